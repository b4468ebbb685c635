//! `fairness`: Jain's index over the processes' fetch counts (destination arrivals per
//! process): `(sum x)^2 / (n * sum x^2)`, 1 when every process fetched equally, `1/n` when one
//! did everything. Reported, not a verdict: it always passes, the detail carries the figure.
//!
//! R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and Discrimination for
//! Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984.

use crate::check::{Checker, Verdict};
use crate::trace::{Event, Header, Sink};

/// The fairness report.
#[derive(Debug)]
pub struct Fairness {
    // invariant: counts[pid] = arrivals from pid; one entry per process of the header.
    counts: Vec<u64>,
}

impl Fairness {
    /// A report for the trace this header introduces.
    pub fn new(h: &Header) -> Fairness {
        Fairness {
            counts: vec![0; h.processes as usize],
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

impl Sink for Fairness {
    fn event(&mut self, ev: &Event) {
        if let Event::Arrival { pid, .. } = *ev {
            let i = pid as usize;
            if i >= self.counts.len() {
                self.counts.resize(i + 1, 0);
            }
            self.counts[i] += 1;
        }
    }
}

impl Checker for Fairness {
    fn verdicts(&mut self) -> Vec<Verdict> {
        let min = self.counts.iter().enumerate().min_by_key(|c| *c.1);
        let max = self.counts.iter().enumerate().max_by_key(|c| *c.1);
        let spread = match (min, max) {
            (Some((lo, a)), Some((hi, b))) => format!("; fewest {a} (pid {lo}), most {b} (pid {hi})"),
            _ => String::new(),
        };
        vec![Verdict {
            name: "fairness",
            pass: true,
            detail: format!(
                "Jain's index {:.3} over {} processes{spread} (reported, not a verdict)",
                self.index(),
                self.counts.len()
            ),
        }]
    }
}
