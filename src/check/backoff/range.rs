//! Property 1 of [`super`], range: every multiplier (in `multiplier` events and in grants)
//! lies in `[1, cap]` (`Header.multiplier_cap`).

use super::Failures;
use crate::check::common::{mult, secs};

/// The multipliers seen, against the cap.
#[derive(Clone, Debug)]
pub(super) struct Range {
    cap: f64,
    /// The largest multiplier seen (at least 1).
    pub(super) max_m: f64,
}

crate::exact_hash!(Range { cap: bits, max_m: bits });

impl Range {
    /// Against the header's multiplier cap.
    pub(super) fn new(cap: f64) -> Range {
        Range { cap, max_m: 1.0 }
    }

    /// Checks `m` lies in `[1, cap]`; `what` names it, and is only called on a failure.
    pub(super) fn check(&mut self, f: &mut Failures, m: f64, t: u64, what: impl FnOnce() -> String) {
        self.max_m = self.max_m.max(m);
        let tol = 1e-9 * self.cap.max(1.0);
        if !(m >= 1.0 - tol && m <= self.cap + tol) {
            let what = what();
            f.fail(format!(
                "multiplier {} outside [1, {}] at {} ({what})",
                mult(m),
                mult(self.cap),
                secs(t)
            ));
        }
    }
}
