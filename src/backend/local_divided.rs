//! `local_divided`: each process paces locally at `rate / (cap + 1)`, where `cap` is the
//! configured maximum number of concurrent dispatches (design record #649: the fallback that
//! keeps the ceiling).
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
use crate::backend::options::OptionError;
use crate::pacer::divided_interval;
use crate::scenario::Scenario;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `local_divided`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalDividedOptions {
    /// Maximum concurrent dispatches. Default `processes.count - 1` (pacesim's choice: the
    /// divided pace is then `rate / count`).
    pub cap: Option<u32>,
}

/// The divided local pacer: a [`Local`] at the divided interval.
pub fn new(sc: &Scenario, o: LocalDividedOptions) -> Result<Local, OptionError> {
    let cap = o.cap.unwrap_or(sc.processes.count.saturating_sub(1));
    Ok(Local::with_interval(
        sc,
        "local_divided",
        Nanos(divided_interval(sc.pacer.rate, cap)),
    ))
}

impl crate::backend::Configure for LocalDividedOptions {
    type Backend = crate::backend::local::Local;
    fn build(self, sc: &Scenario) -> Result<crate::backend::local::Local, OptionError> {
        new(sc, self)
    }
}
