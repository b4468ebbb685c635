//! A team's own backend, out of tree: a Redis sliding log ([`sliding_log`]) and its racy
//! twin, defined only through pacesim's public API, with their live store side
//! ([`live`]: their Lua on pacesim's Redis connections, key prefix, lease and cleanup).
//!
//! [`backends`] and [`checkers`] are what this crate hands to pacesim's command line
//! (`src/main.rs`): with them, every pacesim command (`run`, `simulate`, `matrix`, `sweep`,
//! `check`, `live`, `conform`, `explore`, `backends`) knows `sliding_log` and
//! `sliding_log_racy` beside pacesim's own backends, and judges every trace with the team's
//! own property, `log_limit` ([`log_limit`]), beside pacesim's checkers.

pub mod live;
pub mod log_limit;
pub mod sliding_log;

use pacesim::prelude::*;
use sliding_log::{RacySlidingLogOptions, SlidingLogOptions};

/// `sliding_log`'s live store: its options type and its Redis script.
pub static SLIDING_LOG_LIVE: LiveOf<SlidingLogOptions, live::LogScript> = LiveOf::NEW;
/// `sliding_log_racy`'s live store: the same scripts, the check and the append apart.
pub static SLIDING_LOG_RACY_LIVE: LiveOf<RacySlidingLogOptions, live::LogScript> = LiveOf::NEW;

/// This crate's backends, as pacesim's registry takes them.
pub fn backends() -> Vec<BackendSpec> {
    vec![
        BackendSpec {
            name: "sliding_log",
            summary: "Redis sliding log: ZREMRANGEBYSCORE + ZCARD + ZADD in one Lua script, at most `limit` per window (a team's own)",
            defective: false,
            ops: &OpsOf::<SlidingLogOptions>::NEW,
            live: Some(&SLIDING_LOG_LIVE),
            colour: Some((255, 127, 14)), // orange
        },
        BackendSpec {
            name: "sliding_log_racy",
            summary: "the sliding log with check and append as two store operations: racy (a team's own)",
            defective: true,
            ops: &OpsOf::<RacySlidingLogOptions>::NEW,
            live: Some(&SLIDING_LOG_RACY_LIVE),
            colour: Some((127, 127, 127)), // grey
        },
    ]
}

/// This crate's checkers, judged beside pacesim's on every trace.
pub fn checkers() -> Vec<CheckerSpec> {
    vec![CheckerSpec {
        name: "log_limit",
        summary: "the sliding log's own promise: at most `limit` grants in any window of the store's clock",
        new: log_limit::LogLimit::for_trace,
    }]
}
