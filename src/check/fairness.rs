//! `fairness`: Jain's index over the processes' fetch counts (destination arrivals per
//! process): `(sum x)^2 / (n * sum x^2)`, 1 when every process fetched equally, `1/n` when one
//! did everything; and the longest any process waited for permission (from asking to its
//! fetch start, across re-enqueued executions; a crash ends a wait; a wait still open at the
//! end counts to the end), so starvation shows even where the counts look fair.
//!
//! A verdict only when the header states a bound (`[checks] wait_bound`): it fails when some
//! process waited longer. Without one it always passes and says it is reported, not judged:
//! the index alone cannot say starvation (a walk lock is unfair by design, and a process
//! that asks rarely fetches rarely), and what wait is too long is the team's to say.
//!
//! R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and Discrimination for
//! Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984.

use crate::check::Verdict;
use crate::check::common::{Demand, Shared};
use crate::trace::{Event, Header};

/// The fairness report.
#[derive(Debug)]
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
}

impl Fairness {
    /// A report for the trace this header introduces.
    pub fn new(h: &Header) -> Fairness {
        Fairness {
            counts: vec![0; h.processes as usize],
            own: Demand::for_header(h).implied().then(|| Demand::new(h.processes)),
            longest: None,
            bound: h.backend_detail.wait_bound_ns,
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
            let w = t.saturating_sub(since);
            if longest.is_none_or(|l| w > l.0) {
                *longest = Some((w, pid, since));
            }
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
            (Some((lo, a)), Some((hi, b))) => format!("; fewest {a} (pid {lo}), most {b} (pid {hi})"),
            _ => String::new(),
        };
        let wait = match self.longest {
            Some((w, pid, since)) => format!(
                "; longest wait for permission {:.3}s (pid {pid}, from {:.3}s)",
                w as f64 / 1e9,
                since as f64 / 1e9
            ),
            None => String::new(),
        };
        let longest = self.longest.map_or(0, |l| l.0);
        let (pass, judged) = match self.bound {
            None => (true, " (reported, not a verdict: no [checks] wait_bound)".to_string()),
            Some(b) if longest <= b => (true, format!("; within the wait bound {:.3}s", b as f64 / 1e9)),
            Some(b) => (
                false,
                format!("; starvation: longer than the wait bound {:.3}s", b as f64 / 1e9),
            ),
        };
        vec![Verdict {
            name: "fairness",
            pass,
            detail: format!(
                "Jain's index {:.3} over {} processes{spread}{wait}{judged}",
                self.index(),
                self.counts.len()
            ),
        }]
    }
}
