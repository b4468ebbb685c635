//! `log_limit`: the team's own checker, the sliding log's invariant stated on the store's
//! clock: **at most `limit` grants in any window `(now - window, now]`**, where `now` is the
//! clock the log scores its entries by (the `grant` events' `now`).
//!
//! pacesim's `ceiling` judges what reaches the destination, on the destination's clock; this
//! judges what the log itself promised, so a design review sees which of the two broke. It
//! applies to the two sliding-log backends only (the `window_ns` and `limit` of their options
//! in force); a trace of either without `grant` events (an external worker that does not
//! report them) is not judged. Handed to pacesim with [`crate::checkers`].

use pacesim::prelude::*;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

/// The checker of one trace.
#[derive(Clone, Debug)]
pub struct LogLimit {
    window: u64,
    limit: u64,
    // the store-clock times of the grants inside the window ending at the newest, sorted
    recent: VecDeque<i64>,
    grants: u64,
    // the fullest window over the limit: (grants in it, its end on the store's clock, the
    // trace time of its last grant)
    worst: Option<(usize, i64, u64)>,
}

impl LogLimit {
    /// For a trace of `sliding_log` or `sliding_log_racy` (its options in force state the
    /// window and the limit); `None` for any other trace.
    pub fn for_trace(h: &Header) -> Option<Box<dyn Checker + Send>> {
        if !h.backend.starts_with("sliding_log") {
            return None;
        }
        let get = |k: &str| h.backend_detail.other.get(k).and_then(serde_json::Value::as_u64);
        Some(Box::new(LogLimit {
            window: get("window_ns")?,
            limit: get("limit")?,
            recent: VecDeque::new(),
            grants: 0,
            worst: None,
        }))
    }
}

impl Sink for LogLimit {
    fn event(&mut self, ev: &Event) {
        let Event::Grant { t, now, .. } = *ev else { return };
        self.grants += 1;
        // (the store serves one operation at a time, so `now` rises; kept sorted anyway)
        let at = self.recent.partition_point(|&x| x <= now);
        self.recent.insert(at, now);
        let newest = *self.recent.back().expect("just inserted");
        while self.recent.front().is_some_and(|&f| f <= newest - self.window as i64) {
            self.recent.pop_front();
        }
        // the window ending at this grant
        let n = self.recent.len() - self.recent.partition_point(|&x| x <= now - self.window as i64);
        if n as u64 > self.limit && self.worst.is_none_or(|w| n > w.0) {
            self.worst = Some((n, now, t));
        }
    }

    /// What its verdict can still depend on: the grants inside the window (relative to the
    /// last one), whether any came, and the worst window so far.
    fn state(&self) -> Option<u64> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let last = self.recent.back().copied().unwrap_or(0);
        for g in &self.recent {
            (last - g).hash(&mut h);
        }
        (self.grants > 0, self.worst).hash(&mut h);
        Some(h.finish())
    }
}

impl Checker for LogLimit {
    /// It keeps no process id (grant instants only) and judges every process alike: `explore`
    /// may merge states that differ only in which process is which (symmetry reduction).
    fn relabels(&self) -> bool {
        true
    }

    fn verdicts(&mut self) -> Vec<Verdict> {
        let secs = |ns: u64| format!("{:.3} s", ns as f64 / 1e9);
        let (status, detail) = match self.worst {
            _ if self.grants == 0 => (
                Status::NotJudged,
                format!("{}grant events (the log's own clock)", NOT_JUDGED),
            ),
            None => (
                Status::Pass,
                format!(
                    "{} grants, never more than {} in any {} of the store's clock",
                    self.grants,
                    self.limit,
                    secs(self.window)
                ),
            ),
            Some((n, _, t)) => (
                Status::Fail,
                format!(
                    "{n} grants within {} of the store's clock, the last at t = {}: the log promised at most {}",
                    secs(self.window),
                    secs(t),
                    self.limit
                ),
            ),
        };
        vec![Verdict {
            name: "log_limit",
            status,
            detail,
        }]
    }

    // (an explorer goes on from a world an earlier run saved, this checker's copy with it,
    // rather than replaying the decisions the two runs share)
    fn duplicate(&self) -> Option<Box<dyn Checker + Send>> {
        Some(Box::new(self.clone()))
    }
}
