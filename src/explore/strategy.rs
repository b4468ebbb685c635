//! The sampling strategies: uniform, PCT, and coverage-guided.

use crate::choice::{Choice, Decision, Kind, Strategy};
use crate::rng::Rng;
use crate::trace::Event;
use rand::{RngExt, SeedableRng};
// (a strategy draws while the run's choice source is entered: from a plain generator, whose
// words no source sees)
type Own = rand_pcg::Pcg64Mcg;

/// Every way of every choice equally likely (the explorer's own stream).
#[derive(Debug)]
pub struct Uniform(Own);

impl Uniform {
    /// A strategy seeded from the explorer's stream `rng` (one word).
    pub fn new(rng: &mut Rng) -> Uniform {
        Uniform(Own::seed_from_u64(rng.random()))
    }
}

impl Strategy for Uniform {
    fn choose(&mut self, d: &Decision) -> u32 {
        // (a kill is a rarer choice: at every point with the budget left, one in eight)
        match d.kind {
            Kind::Kill => u32::from(self.0.random_ratio(1, 8)),
            _ => self.0.random_range(0..d.of),
        }
    }
}

/// Probabilistic concurrency testing, carried over to messages (see the module docs of
/// [`crate::explore`]): random distinct priorities per process, `depth - 1` change points
/// among the first `k` decisions.
#[derive(Debug)]
pub struct Pct {
    rng: Own,
    // priority of each process: higher goes first
    priority: Vec<u32>,
    // the decision numbers at which the deciding process drops to the lowest priority
    change: Vec<usize>,
    lowest: u32,
}

impl Pct {
    /// A run's strategy: `n` processes, bug depth `depth`, about `k` decisions a run.
    pub fn new(rng: &mut Rng, n: u32, depth: u32, k: usize) -> Pct {
        let mut r = Own::seed_from_u64(rng.random());
        // priorities depth .. depth + n, shuffled (Fisher-Yates)
        let mut priority: Vec<u32> = (0..n).map(|i| depth + i).collect();
        for i in (1..priority.len()).rev() {
            let j = r.random_range(0..=i);
            priority.swap(i, j);
        }
        let change = (1..depth).map(|_| r.random_range(0..k.max(1))).collect();
        Pct {
            rng: r,
            priority,
            change,
            lowest: depth,
        }
    }

    fn prio(&self, pid: u32) -> u32 {
        self.priority.get(pid as usize).copied().unwrap_or(0)
    }
}

impl Strategy for Pct {
    fn choose(&mut self, d: &Decision) -> u32 {
        let i = match d.kind {
            // the highest-priority candidate is served first
            Kind::Order => (0..d.of as usize)
                .max_by_key(|&i| (self.prio(d.pids[i]), std::cmp::Reverse(i)))
                .unwrap_or(0) as u32,
            // fast for high priority, slow for low: the low one's messages come late
            Kind::Value => match d.pid {
                Some(pid) if !self.priority.is_empty() => {
                    let n = self.priority.len() as u32;
                    let rank = self.prio(pid).saturating_sub(self.lowest.min(self.prio(pid)));
                    // rank 0 .. n-1 (a process dropped by a change point is below 0: slowest)
                    let from_top = n.saturating_sub(1).saturating_sub(rank.min(n - 1));
                    (from_top * (d.of - 1)) / n.saturating_sub(1).max(1)
                }
                _ => self.rng.random_range(0..d.of),
            },
            Kind::Kill => u32::from(self.rng.random_ratio(1, 8)),
            Kind::Target => self.rng.random_range(0..d.of),
        };
        if self.change.contains(&d.depth) {
            // the process deciding (or the candidate it served) drops below every other
            let pid = d.pid.unwrap_or(d.pids[i as usize % 8]);
            if let Some(p) = self.priority.get_mut(pid as usize) {
                self.lowest = self.lowest.saturating_sub(1);
                *p = self.lowest;
            }
        }
        i
    }
}

/// Coverage-guided random search: a corpus of choice sequences whose traces showed a new
/// feature (a pair of consecutive event kinds with a gap of a new magnitude, a power of two in
/// nanoseconds); each run mutates one of them at one choice and goes on at random.
#[derive(Debug, Default)]
pub struct Coverage {
    corpus: Vec<Vec<Choice>>,
    features: std::collections::BTreeSet<u64>,
    // the run in flight: its last event's kind and time, and whether it found a feature
    last: Option<(u8, u64)>,
    new: bool,
}

impl Coverage {
    /// The next run's prefix (a corpus entry mutated at one choice) and its strategy.
    pub fn next(&mut self, rng: &mut Rng) -> (Vec<u32>, Uniform) {
        self.last = None;
        self.new = false;
        let st = Uniform::new(rng);
        if self.corpus.is_empty() || rng.random_ratio(1, 4) {
            return (Vec::new(), st);
        }
        let base = &self.corpus[rng.random_range(0..self.corpus.len())];
        if base.is_empty() {
            return (Vec::new(), st);
        }
        let at = rng.random_range(0..base.len());
        let mut p: Vec<u32> = base[..at].iter().map(|c| c.index).collect();
        p.push(rng.random_range(0..base[at].of));
        (p, st)
    }

    /// A trace event of the run in flight.
    pub fn event(&mut self, ev: &Event) {
        let t = ev.t();
        // (the variant, folded to a byte: a collision only merges two features)
        let kind = (crate::choice::fingerprint(&std::mem::discriminant(ev)) & 0xFF) as u8;
        if let Some((k0, t0)) = self.last {
            let gap = 64 - (t.saturating_sub(t0)).leading_zeros() as u64;
            let f = (u64::from(k0) << 16) | (u64::from(kind) << 8) | gap;
            if self.features.insert(f) {
                self.new = true;
            }
        }
        self.last = Some((kind, t));
    }

    /// The run in flight made `made`: kept when it showed something new.
    pub fn finish(&mut self, made: &[Choice]) {
        if self.new {
            self.corpus.push(made.to_vec());
        }
    }
}
