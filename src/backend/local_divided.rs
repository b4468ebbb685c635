//! `local_divided`: each process paces locally at `rate / (cap + 1)`, where `cap` is the
//! configured maximum number of concurrent dispatches (design record: the fallback that keeps
//! the ceiling).
//!
//! - **In the store:** nothing; each process holds its own pacer.
//! - **Atomic operation:** a compare-and-swap on the process's own `next_allowed`.
//! - **Clock:** the process's monotonic clock.
//! - **Store failure:** not applicable; this *is* the degraded mode of the store-backed pacers.
//! - **SIGKILL leaves:** nothing.
//!
//! While at most `cap + 1` processes run, the fleet's worst case is `(cap + 1) x rate /
//! (cap + 1) = rate`: the ceiling survives. Run more processes than `cap + 1` and it does not.
//! The price is latency: a split bucket makes each process wait its own longer interval even
//! when the others are idle.

use crate::backend::local::Local;
use crate::pacer::divided_interval;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// The divided local pacer: a [`Local`] at the divided interval.
pub struct LocalDivided;

impl LocalDivided {
    /// Build from a scenario (`[pacer] cap`, default `processes.count - 1`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(sc: &Scenario) -> Local {
        Local::with_interval(sc, "local_divided", Nanos(divided_interval(sc.pacer.rate, sc.cap())))
    }
}

impl std::fmt::Debug for LocalDivided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalDivided")
    }
}
