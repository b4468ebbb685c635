//! Property 2b of [`super`], a cut-off process's own schedule: a process the store has failed
//! paces by its own fallback pacer (from its `fallback` entry to its exit), which cannot read
//! the shared multiplier. It starts from the multiplier its `fallback` entry states and runs
//! the backoff schedule on its own responses: ONE [`Backoff`] per cut-off process, fed that
//! process's `fetch_end`s in order. Its `multiplier` events (with its pid) while cut off must be
//! exactly that machine's steps, each at the response that causes it (the process takes the
//! step when the response arrives, before anything else it does).
//!
//! These events are not the fleet's: [`super::reference`] never sees them. The responses stay
//! pending for the fleet's reference too, with the fate of their reports (a report the store
//! refused was never applied; one that timed out may have been).
//!
//! A 429 during an outage that moves nothing is the defect this catches: the fallback then
//! holds its pace while the destination says it is too fast.

use super::Failures;
use crate::check::common::{PidMap, mult, secs};
use crate::pacer::{Backoff, BackoffConfig, Change, Status};
use crate::trace::{Event, Header, MultiplierCause};

/// A step the machine took at a response, not yet seen in the trace.
#[derive(Hash, Copy, Clone, Debug)]
struct Due {
    change: Change,
    code: u16,
    t: u64,
}

#[derive(Clone, Hash, Debug)]
struct Machine {
    since: u64,
    b: Backoff,
    due: Option<Due>,
}

/// The cut-off processes' own machines.
#[derive(Clone, Hash, Debug)]
pub(super) struct Cutoff {
    config: Option<BackoffConfig>,
    // invariant: an entry exactly for each process between its `fallback` entry and exit
    // (or its crash).
    machines: PidMap<Machine>,
    /// Steps of cut-off processes seen.
    pub(super) steps: u64,
    /// Responses of cut-off processes seen (the property applies once there is one).
    pub(super) responses: u64,
}

impl Cutoff {
    /// An explorer's form ([`crate::form`]): absolute while a cut-off machine runs.
    pub(super) fn form(&self, f: &mut crate::form::Form) {
        if !self.machines.is_empty() {
            // (each process's reference machine, by id)
            f.raw_pids();
        }
        f.word(crate::choice::fingerprint(self));
        if !self.machines.is_empty() {
            f.absolute();
        }
    }

    /// For the fleet's schedule (`None`: no reference machine; range and spacing only), when the
    /// backend runs one (`backoff` in the header's detail; a lock backend does not).
    pub(super) fn new(config: Option<BackoffConfig>, h: &Header) -> Cutoff {
        Cutoff {
            config: config.filter(|_| h.backend_detail.backoff.is_some()),
            machines: PidMap::new(),
            steps: 0,
            responses: 0,
        }
    }

    /// Whether `pid` is cut off (its multiplier events are this property's).
    pub(super) fn owns(&self, pid: u32) -> bool {
        self.machines.contains_key(&pid)
    }

    /// Whether `ev` does nothing here: with no process cut off (the usual case) only a
    /// fallback entry does anything, every other event looks up a machine that is not there.
    #[inline]
    pub(super) fn idle(&self, ev: &Event) -> bool {
        self.machines.is_empty() && !matches!(ev, Event::Fallback { enter: true, .. })
    }

    /// Every event: entries and exits, responses, and the steps they cause.
    #[inline]
    pub(super) fn event(&mut self, f: &mut Failures, ev: &Event) {
        if self.idle(ev) {
            return;
        }
        let Some(config) = self.config else {
            return;
        };
        self.apply(f, config, ev);
    }

    fn apply(&mut self, f: &mut Failures, config: BackoffConfig, ev: &Event) {
        match *ev {
            Event::Fallback {
                t,
                pid,
                enter: true,
                multiplier,
                ..
            } => {
                self.overdue(f, pid, t);
                match Backoff::restore(config, multiplier, 0) {
                    Ok(b) => {
                        self.machines.insert(pid, Machine { since: t, b, due: None });
                    }
                    // out of range: the range property reports it
                    Err(_) => {
                        self.machines.remove(&pid);
                    }
                }
            }
            Event::Fallback {
                t, pid, enter: false, ..
            } => {
                self.overdue(f, pid, t);
                self.machines.remove(&pid);
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                // a killed process's machine dies with it, steps not yet taken included
                self.machines.remove(&pid);
            }
            Event::FetchEnd { t, pid, status, .. } => {
                self.overdue(f, pid, t);
                if self.machines.contains_key(&pid) {
                    self.responses += 1;
                }
                if let Some(m) = self.machines.get_mut(&pid)
                    && let Some(change) = m.b.on_response(Status::from_http(status))
                {
                    m.due = Some(Due {
                        change,
                        code: status,
                        t,
                    });
                }
            }
            Event::Multiplier {
                t,
                pid: Some(pid),
                from,
                to,
                cause,
            } => self.step(f, t, pid, from, to, cause),
            Event::OpSent { t, pid, .. }
            | Event::Grant { t, pid, .. }
            | Event::Deny { t, pid, .. }
            | Event::Reply { t, pid, .. }
            | Event::StoreError { t, pid, .. }
            | Event::FetchStart { t, pid, .. }
            | Event::Arrival { t, pid, .. }
            | Event::LockAcquired { t, pid, .. }
            | Event::LockReleased { t, pid, .. }
            | Event::Uncapped { t, pid, .. } => self.overdue(f, pid, t),
            Event::Multiplier { pid: None, .. }
            | Event::Fault { .. }
            | Event::JobEvent { .. }
            | Event::Backfill { .. }
            | Event::Platform { .. }
            | Event::End { .. } => {}
        }
    }

    fn step(&mut self, f: &mut Failures, t: u64, pid: u32, from: f64, to: f64, cause: MultiplierCause) {
        let Some(m) = self.machines.get_mut(&pid) else {
            return;
        };
        self.steps += 1;
        match m.due.take() {
            Some(d)
                if d.change.from == from
                    && d.change.to == to
                    && super::reference::cause_of(d.change.cause) == cause => {}
            Some(d) => f.fail(format!(
                "at {}: pid {pid}, cut off from the store since {}, stepped its own multiplier {}→{} ({cause}), \
                 but its schedule on the {} at {} steps {}→{}",
                secs(t),
                secs(m.since),
                mult(from),
                mult(to),
                d.code,
                secs(d.t),
                mult(d.change.from),
                mult(d.change.to)
            )),
            None => f.fail(format!(
                "at {}: pid {pid}, cut off from the store since {}, stepped its own multiplier {}→{} ({cause}) \
                 with no response of its own that causes it (its schedule is at {})",
                secs(t),
                secs(m.since),
                mult(from),
                mult(to),
                mult(m.b.multiplier())
            )),
        }
    }

    /// `pid` does something else at `t`: a step its last response caused must have been taken.
    fn overdue(&mut self, f: &mut Failures, pid: u32, t: u64) {
        let Some(m) = self.machines.get_mut(&pid) else {
            return;
        };
        if let Some(d) = m.due.take() {
            let what = if Status::from_http(d.code).is_rate_pressure() {
                "its own pacer must back off on 429/503 (the fallback is the process's own pacer), \
                 but it kept its pace"
            } else {
                "its own pacer must decay after its clean streak, but it did not"
            };
            f.fail(format!(
                "at {}: pid {pid}, cut off from the store since {}, got a {} at multiplier {}: {what} \
                 (expected a step {}→{}; none by {})",
                secs(d.t),
                secs(m.since),
                d.code,
                mult(d.change.from),
                mult(d.change.from),
                mult(d.change.to),
                if t == u64::MAX { "the end".to_string() } else { secs(t) }
            ));
        }
    }

    /// The end of the trace: steps still due were never taken.
    pub(super) fn finish(&mut self, f: &mut Failures, t: u64) {
        let pids: Vec<u32> = self.machines.iter().map(|(pid, _)| pid).collect();
        for pid in pids {
            self.overdue(f, pid, t);
        }
    }
}
