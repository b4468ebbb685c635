//! `backoff_coherence`: one backoff schedule for the whole fleet, applied to the shared pace.
//!
//! Three properties, each with its own witness and its own file (`range`, `reference`,
//! `spacing`); the verdict reports the first violation in trace order, and how many:
//!
//! 1. **Range.** Every multiplier (in `multiplier` events and in grants) lies in `[1, cap]`
//!    (`Header.multiplier_cap`).
//! 2. **One reference machine.** The sequence of multiplier changes equals what ONE
//!    [`crate::pacer::Backoff`] produces when fed every 429 / 503 / clean response of the run
//!    in `fetch_end` order. A streak counted per process decays at the wrong moments (the
//!    reference decays on the K-th consecutive clean response *of the fleet*, and the trace
//!    shows no change there, or a change where the reference has none), and per-process
//!    multipliers diverge (a second process backs off "from 1" while the reference is
//!    already at 2). The grants must also carry the reference multiplier: a grant at a
//!    different one is a process pacing with its own, diverged multiplier.
//!    A process cut off from the store (between its `fallback` entry and exit) runs its own
//!    copy of the schedule (`cutoff`): from the multiplier its entry states, on its own
//!    responses; its `multiplier` events are checked against that copy, not the fleet's.
//! 3. **Spacing.** Consecutive grants of one authority are spaced by the interval times the
//!    multiplier in force: each slot, mapped to reference time (`t + slot - now`), is at or
//!    after the previous slot plus the previous grant's `interval`, less the authority's GCRA
//!    tolerance (`burst - 1` intervals; [`Detail::gcra_burst`]). A grant answering an
//!    operation sent to the store (a reservation, a GCRA check, or a backend's own `acquire`,
//!    or the `complete` step that follows one, as a check-then-write design's write) belongs
//!    to the shared authority; a grant with no operation outstanding comes from the
//!    process's own pacer and is checked per process.
//!    Each shared grant's `interval` must equal the base interval times its multiplier.
//!
//! **Where the schedule comes from.** [`Detail::backoff_factor`] and [`Detail::decay_after`]
//! (the simulator adds them from `[backoff]`); the cap from the header. When they are absent
//! the defaults the fields state ([`Detail::DEFAULT_BACKOFF_FACTOR`],
//! [`Detail::DEFAULT_DECAY_AFTER`]) are assumed and the detail says so.
//!
//! **Reordering.** The reference is fed in `fetch_end` order, but a shared store applies a
//! response when the process's report *reaches* it, so two reports in flight together may be
//! applied in either order. The checker therefore keeps the set of reference states
//! consistent with the trace, linearizability-style: a response may be applied at any moment
//! between its `fetch_end` and the reply to its report (a response whose process sends no
//! report is applied at its `fetch_end`, unless its process was cut off from the store (in
//! fallback), which then never reported it; one whose report the store refused never was; one
//! whose report timed out or whose process died may or may not have been, for up to 10 s).
//! Responses that change nothing are applied silently; a `multiplier` event must be explained
//! by applying pending responses ending with one that makes exactly that change. The property
//! fails when no reference state remains.
//!
//! [`Detail::gcra_burst`]: crate::trace::Detail::gcra_burst
//! [`Detail::backoff_factor`]: crate::trace::Detail::backoff_factor
//! [`Detail::decay_after`]: crate::trace::Detail::decay_after
//! [`Detail::DEFAULT_BACKOFF_FACTOR`]: crate::trace::Detail::DEFAULT_BACKOFF_FACTOR
//! [`Detail::DEFAULT_DECAY_AFTER`]: crate::trace::Detail::DEFAULT_DECAY_AFTER

mod cutoff;
mod range;
mod reference;
mod spacing;

use crate::check::common::{base_interval, mult};
use crate::check::{Checker, Status, Verdict};
use crate::trace::{Event, Header, Sink};

/// The violations of all three properties: the first, in trace order, and how many.
#[derive(Clone, Hash, Debug, Default)]
struct Failures {
    first: Option<String>,
    count: u64,
}

impl Failures {
    fn fail(&mut self, msg: String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(msg);
        }
    }
}

/// The backoff-coherence checker.
#[derive(Clone, Hash, Debug)]
pub struct BackoffCoherence {
    range: range::Range,
    reference: reference::Reference,
    cutoff: cutoff::Cutoff,
    spacing: spacing::Spacing,
    failures: Failures,
    // the trace has grants or multiplier changes (else the property does not apply)
    seen: bool,
    // the design states a backoff multiplier (its `backoff` fact): then a trace without grants
    // or multiplier changes cannot be judged, rather than the property not applying
    stated: Option<crate::trace::BackoffPlace>,
}

impl BackoffCoherence {
    /// An explorer's form at `now` ([`crate::form`]): the reference machine while it holds
    /// no pending response (then nothing in it is an instant; otherwise absolute), the
    /// cut-off machines while none runs (likewise), the spacing's theoretical arrival times
    /// relative to now, and as slack whether a property already failed.
    pub fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        let BackoffCoherence {
            range,
            reference,
            cutoff,
            spacing,
            failures,
            seen,
            stated,
        } = self;
        f.word(fingerprint(&(range, seen, stated)));
        reference.form(f);
        cutoff.form(f);
        spacing.form(f);
        f.more_is_worse(i64::from(failures.count > 0));
    }

    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> BackoffCoherence {
        let reference = reference::Reference::new(h);
        BackoffCoherence {
            range: range::Range::new(h.multiplier_cap),
            cutoff: cutoff::Cutoff::new(reference.config(), h),
            reference,
            spacing: spacing::Spacing::new(
                base_interval(h),
                h.backend_detail.gcra_burst(),
                h.backend_detail.process_side_per_thread(),
            ),
            failures: Failures::default(),
            seen: false,
            stated: h.backend_detail.backoff,
        }
    }
}

impl Sink for BackoffCoherence {
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        self.reference.advance(&mut self.failures, ev.t());
        // (checked inline) with no process cut off, a grant, and every event but a multiplier
        // change, go where `step` would send them
        if !self.cutoff.idle(ev) {
            return self.step(ev);
        }
        match ev {
            Event::Multiplier { .. } => self.step(ev),
            Event::Grant { .. } => self.grant(ev),
            _ => {
                self.reference.event(&mut self.failures, ev);
                self.spacing.event(ev);
            }
        }
    }
}

impl BackoffCoherence {
    /// A `grant` event, after the reference advanced to its time, with the cut-off processes'
    /// machines (which a grant can only find overdue) already fed it.
    #[inline]
    fn grant(&mut self, ev: &Event) {
        let Event::Grant {
            t,
            pid,
            thread,
            multiplier,
            ..
        } = *ev
        else {
            return;
        };
        let f = &mut self.failures;
        self.seen = true;
        self.reference.force_fresh_of(f, pid, thread, t);
        self.range.check(f, multiplier, t, || format!("grant to pid {pid}"));
        self.reference.grant(f, t, pid, multiplier);
        self.spacing.grant(f, ev);
    }

    /// Any event, after the reference advanced to its time.
    fn step(&mut self, ev: &Event) {
        let t = ev.t();
        let f = &mut self.failures;
        // a cut-off process's own steps are its own schedule's, not the fleet's
        let cut_off = matches!(*ev, Event::Multiplier { pid: Some(p), .. } if self.cutoff.owns(p));
        self.cutoff.event(f, ev);
        match *ev {
            Event::Multiplier {
                pid, from, to, cause, ..
            } => {
                self.seen = true;
                let whose = || pid.map_or("shared multiplier".to_string(), |p| format!("pid {p}'s multiplier"));
                self.range.check(f, from, t, whose);
                self.range.check(f, to, t, whose);
                if !cut_off {
                    self.reference.observe_change(f, t, pid, from, to, cause);
                }
            }
            Event::Grant { .. } => self.grant(ev),
            _ => {
                self.reference.event(f, ev);
                self.spacing.event(ev);
            }
        }
    }
}

impl Checker for BackoffCoherence {
    fn verdicts(&mut self) -> Vec<Verdict> {
        self.reference.finish(&mut self.failures);
        self.cutoff.finish(&mut self.failures, u64::MAX);
        if !self.seen && self.cutoff.responses == 0 {
            return match self.stated {
                Some(place) => vec![Verdict {
                    name: "backoff_coherence",
                    status: Status::NotJudged,
                    detail: witness!(
                        "{}grant or multiplier events: the design states a {} backoff multiplier (`backoff`) \
                         but its trace shows neither the slots it granted nor the multiplier",
                        crate::check::NOT_JUDGED,
                        place.name()
                    ),
                }],
                None => Vec::new(),
            };
        }
        let approx = if self.reference.approximate {
            " (reordering search truncated)"
        } else {
            ""
        };
        let v = match &self.failures.first {
            None => Verdict {
                name: "backoff_coherence",
                status: Status::Pass,
                detail: witness!(
                    "{} responses, {} multiplier changes match one reference machine ({}){approx}{}; max multiplier {}; {} grants spaced by interval x multiplier",
                    self.reference.responses,
                    self.reference.changes,
                    self.reference.config_note(),
                    if self.cutoff.steps > 0 {
                        format!(" and {} steps of cut-off processes match their own", self.cutoff.steps)
                    } else {
                        String::new()
                    },
                    mult(self.range.max_m),
                    self.spacing.grants
                ),
            },
            Some(f) => Verdict {
                name: "backoff_coherence",
                status: Status::Fail,
                detail: if self.failures.count > 1 {
                    witness!("{f} ({} violations in all){approx}", self.failures.count)
                } else {
                    witness!("{f}{approx}")
                },
            },
        };
        vec![v]
    }
}
