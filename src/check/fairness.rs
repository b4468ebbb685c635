//! `fairness`: Jain's index over the processes' fetch counts (destination arrivals per
//! process): `(sum x)^2 / (n * sum x^2)`, 1 when every process fetched equally, `1/n` when one
//! did everything; and the longest any process waited for permission (from asking to its
//! fetch start, across re-enqueued executions; a crash ends a wait; a wait still open at the
//! end counts to the end), so starvation shows even where the counts look fair.
//!
//! Through a broker (a `[jobs]` trace, whose re-enqueues are `requeued` job events naming the
//! worker) a wait belongs to the **task**, not to the worker that happened to try: a worker
//! whose try found the lock taken is free from its `requeued` event on (time with nothing to
//! ask for is not waiting), and the task's wait, from its first try, goes on across workers
//! (and across a kill when the broker delivers it again, `redelivered`; a task lost with its
//! worker waits no more) until the worker that runs it (its `running` event) starts its fetch. Without a broker a process loops over jobs of its own,
//! so its re-enqueued task is the process's, and the process waits from asking to its fetch.
//!
//! A verdict only when the header states a bound (`[checks] wait_bound`): it fails when some
//! process waited longer. A run that fetched nothing is not judged (Jain's index over no
//! fetches means nothing), unless a wait already broke the bound. Without a bound it passes
//! and says it is reported, not judged:
//! the index alone cannot say starvation (a walk lock is unfair by design, and a process
//! that asks rarely fetches rarely), and what wait is too long is the team's to say.
//!
//! R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and Discrimination for
//! Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984.

use crate::check::common::{Demand, Shared};
use crate::check::{Status, Verdict};
use crate::trace::{Event, Header, JobState};

/// The fairness report.
#[derive(Clone, Hash, Debug)]
pub struct Fairness {
    // invariant: counts[pid] = arrivals from pid; one entry per process of the header.
    counts: Vec<u64>,
    // who waits for permission, and since when (the checkers' one notion of a wait): the
    // suite's ([`Shared::demand`]), unless that one infers waits from the fetches, which count
    // here only when reported; then this one, fed the reported ones
    own: Option<Demand>,
    longest: Option<(u64, u32, u64)>,
    // `[checks] wait_bound`, ns: the verdict's bound, if any
    bound: Option<u64>,
    // the waits through a broker (`[jobs]`), once the first `requeued` job event names a
    // worker: then they replace the demand's
    broker: Option<Broker>,
}

/// Waits through a broker: per worker, and per re-enqueued task (download event).
#[derive(Clone, Hash, Debug, Default)]
struct Broker {
    // invariant: asking[pid] = Some(since) iff pid asked for permission (for the task it
    // executes, whose wait began at `since`) and has neither started its fetch, re-enqueued the
    // task, nor died since.
    asking: Vec<Option<u64>>,
    // invariant: event -> (since, the worker that last tried) iff the task re-enqueued itself
    // and no worker runs it yet; since = its first try.
    tasks: std::collections::BTreeMap<u32, (u64, u32)>,
    // the waiting tasks of a worker that died (a countdown task sits in its worker): waiting
    // again once the broker delivers them again (`redelivered`), lost with it otherwise
    limbo: std::collections::BTreeMap<u32, (u64, u32)>,
}

impl Broker {
    fn slot(&mut self, pid: u32) -> &mut Option<u64> {
        let i = pid as usize;
        if i >= self.asking.len() {
            self.asking.resize(i + 1, None);
        }
        &mut self.asking[i]
    }

    /// A task's wait is `since`: the earlier of the worker's and the task's.
    fn merge(w: &mut Option<u64>, since: u64) {
        *w = Some(w.map_or(since, |s| s.min(since)));
    }

    fn event(&mut self, ev: &Event, longest: &mut Option<(u64, u32, u64)>) {
        match *ev {
            Event::OpSent { t, pid, op, .. } if op.asks_permission() => {
                let w = self.slot(pid);
                if w.is_none() {
                    *w = Some(t);
                }
            }
            Event::Grant { t, pid, .. } => {
                let w = self.slot(pid);
                if w.is_none() {
                    *w = Some(t);
                }
            }
            Event::FetchStart { t, pid, .. } => {
                if let Some(since) = self.slot(pid).take() {
                    Fairness::longer(longest, t.saturating_sub(since), pid, since);
                }
            }
            Event::JobEvent {
                pid: Some(pid),
                event,
                state,
                ..
            } => match state {
                // the execution ends and the worker is free; the task waits on
                JobState::Requeued => {
                    if let Some(since) = self.slot(pid).take() {
                        let e = self.tasks.entry(event).or_insert((since, pid));
                        *e = (e.0.min(since), pid);
                    }
                }
                // the worker runs the task: its wait, from the first try, ends at the fetch
                JobState::Running => {
                    if let Some((since, _)) = self.tasks.remove(&event) {
                        Broker::merge(self.slot(pid), since);
                    }
                }
                _ => {}
            },
            Event::JobEvent {
                event,
                state: JobState::Redelivered,
                ..
            } => {
                if let Some(w) = self.limbo.remove(&event) {
                    self.tasks.insert(event, w);
                }
            }
            // a dead worker asks for nothing; the tasks it held wait on only if redelivered
            Event::Restart { pid, .. } => *self.slot(pid) = None,
            Event::Crash { pid, .. } => {
                *self.slot(pid) = None;
                let held: Vec<u32> = self.tasks.iter().filter(|(_, w)| w.1 == pid).map(|(&e, _)| e).collect();
                for e in held {
                    if let Some(w) = self.tasks.remove(&e) {
                        self.limbo.insert(e, w);
                    }
                }
            }
            Event::End { t } => {
                for (pid, w) in self.asking.iter().enumerate() {
                    if let Some(since) = *w {
                        Fairness::longer(longest, t.saturating_sub(since), pid as u32, since);
                    }
                }
                for &(since, pid) in self.tasks.values() {
                    Fairness::longer(longest, t.saturating_sub(since), pid, since);
                }
            }
            _ => {}
        }
    }
}

impl Fairness {
    /// Whether it has a wait bound (a verdict to give).
    pub fn bounded(&self) -> bool {
        self.bound.is_some()
    }

    /// An explorer's form at `now` ([`crate::form`]): without a wait bound only whether
    /// anything was fetched (it passes, or with nothing fetched is not judged); with one, the waits it follows (relative to now) and as slack the longest wait
    /// so far (a longer one is worse). Waits through a broker make it absolute. (The counts
    /// are the report's.)
    pub fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        let Fairness {
            counts,
            own,
            longest,
            bound,
            broker,
        } = self;
        // (whether anything was fetched: with nothing, the report is not judged)
        f.word(fingerprint(&(bound, counts.iter().all(|&c| c == 0))));
        if bound.is_none() {
            return;
        }
        if broker.is_some() {
            // (the broker's queue: processes by id)
            f.raw_pids();
            f.word(fingerprint(broker));
            f.absolute();
        }
        match own {
            Some(d) => d.form(f, true),
            None => f.word(0),
        }
        f.more_is_worse(longest.map_or(0, |l| l.0) as i64);
    }

    /// A report for the trace this header introduces.
    pub fn new(h: &Header) -> Fairness {
        Fairness {
            counts: vec![0; h.processes as usize],
            own: Demand::for_header(h).implied().then(|| Demand::new(h.processes)),
            longest: None,
            bound: h.backend_detail.wait_bound_ns,
            broker: None,
        }
    }

    /// Jain's index of the counts so far (1 when nothing was fetched).
    pub fn index(&self) -> f64 {
        let n = self.counts.len() as f64;
        let sum: f64 = self.counts.iter().map(|&c| c as f64).sum();
        let sq: f64 = self.counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
        if sq == 0.0 { 1.0 } else { sum * sum / (n * sq) }
    }
}

impl Fairness {
    /// `pid`'s wait (if it waited, by `demand`) ends at `t`: the longest so far?
    fn served(longest: &mut Option<(u64, u32, u64)>, demand: &Demand, pid: u32, t: u64) {
        if let Some(since) = demand.waiting_since(pid) {
            Fairness::longer(longest, t.saturating_sub(since), pid, since);
        }
    }

    /// A wait of `w` (by `pid`, from `since`): the longest so far?
    fn longer(longest: &mut Option<(u64, u32, u64)>, w: u64, pid: u32, since: u64) {
        if longest.is_none_or(|l| w > l.0) {
            *longest = Some((w, pid, since));
        }
    }

    /// One event, with the suite's shared state ([`Shared`]: who waited before it).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, shared: &Shared) {
        // (checked inline) the counts, the waits, and the end; the report reads no busy time
        // from its own demand, so events that change no wait need not reach it
        if matches!(ev, Event::Arrival { .. } | Event::FetchStart { .. } | Event::End { .. })
            || self.own.as_ref().is_some_and(|d| d.changes_waits(ev))
        {
            self.counted(ev, shared);
        } else if matches!(ev, Event::JobEvent { .. }) || self.broker.is_some() {
            self.brokered(ev, shared);
        }
    }

    /// An event through a broker. The first `requeued` job event that names a worker switches
    /// the waits to the broker's: every wait open then (in the suite's demand) is carried over,
    /// so nothing before it is lost.
    #[inline(never)]
    fn brokered(&mut self, ev: &Event, shared: &Shared) {
        if self.broker.is_none() {
            if !matches!(
                ev,
                Event::JobEvent {
                    pid: Some(_),
                    state: JobState::Requeued,
                    ..
                }
            ) {
                return;
            }
            let demand = self.own.as_ref().unwrap_or(shared.demand());
            let mut b = Broker::default();
            for pid in demand.waiting_pids() {
                *b.slot(pid) = demand.waiting_since(pid);
            }
            self.broker = Some(b);
        }
        if let Some(b) = &mut self.broker {
            b.event(ev, &mut self.longest);
        }
    }

    // (inlined into each caller: the suite's copy for one kind of event keeps only that
    // kind's arm)
    #[inline(always)]
    fn counted(&mut self, ev: &Event, shared: &Shared) {
        let demand = self.own.as_ref().unwrap_or(shared.demand());
        match *ev {
            Event::Arrival { pid, .. } => {
                let i = pid as usize;
                if i >= self.counts.len() {
                    self.counts.resize(i + 1, 0);
                }
                self.counts[i] += 1;
            }
            Event::FetchStart { .. } | Event::End { .. } if self.broker.is_some() => {
                if let Some(b) = &mut self.broker {
                    b.event(ev, &mut self.longest);
                }
            }
            Event::FetchStart { t, pid, .. } => Self::served(&mut self.longest, demand, pid, t),
            Event::End { t } => {
                for pid in demand.waiting_pids() {
                    Self::served(&mut self.longest, demand, pid, t);
                }
            }
            _ => {}
        }
        if let Some(own) = &mut self.own {
            own.event(ev);
        }
    }

    /// The report, after the last event.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let min = self.counts.iter().enumerate().min_by_key(|c| *c.1);
        let max = self.counts.iter().enumerate().max_by_key(|c| *c.1);
        let spread = match (min, max) {
            (Some((lo, a)), Some((hi, b))) => witness!("; fewest {a} (pid {lo}), most {b} (pid {hi})"),
            _ => String::new(),
        };
        let wait = match self.longest {
            Some((w, pid, since)) => witness!(
                "; longest wait for permission {:.3}s (pid {pid}, from {:.3}s)",
                w as f64 / 1e9,
                since as f64 / 1e9
            ),
            None => String::new(),
        };
        let longest = self.longest.map_or(0, |l| l.0);
        let starved = self.bound.is_some_and(|b| longest > b);
        if !starved && self.counts.iter().all(|&c| c == 0) {
            // Jain's index over no fetches is no fairness (0/0): nothing to judge
            return vec![Verdict {
                name: "fairness",
                status: Status::NotJudged,
                detail: witness!(
                    "{}arrivals at the destination: the run fetched nothing{wait}",
                    crate::check::NOT_JUDGED
                ),
            }];
        }
        let (pass, judged) = match self.bound {
            None => (true, " (reported, not a verdict: no [checks] wait_bound)".to_string()),
            Some(b) if longest <= b => (true, witness!("; within the wait bound {:.3}s", b as f64 / 1e9)),
            Some(b) => (
                false,
                witness!("; starvation: longer than the wait bound {:.3}s", b as f64 / 1e9),
            ),
        };
        vec![Verdict {
            name: "fairness",
            status: Status::of(pass),
            detail: witness!(
                "Jain's index {:.3} over {} processes{spread}{wait}{judged}",
                self.index(),
                self.counts.len()
            ),
        }]
    }
}
