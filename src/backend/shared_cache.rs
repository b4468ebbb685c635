//! `shared_cache`: the global pace kept under a reserved key of an existing key-value cache
//! table (the alternative that needed no migration: the design record's winner reused the
//! `shared_cache` table under a key prefix the framework's `make_key` can never emit).
//!
//! - **In the store:** one entry `(cache_key, value, expires)` whose value holds
//!   `next_allowed_at` (and, with `backoff = "global"`, the multiplier and clean streak).
//! - **Atomic operation:** one upsert under the entry's row lock:
//!   `INSERT ... ON CONFLICT (cache_key) DO UPDATE SET value = GREATEST(now, old) + interval * m
//!   RETURNING ...`, the same arithmetic as [`super::row`]. A missing entry (a truncated or
//!   culled cache) is recreated by the same statement: the pace restarts at `now`, and at
//!   most one extra request goes early.
//! - **Clock:** the store's.
//! - **Store failure:** the process falls back ([`super::fallback`]).
//! - **SIGKILL leaves:** at most one unused slot, self-healing within one interval.
//!
//! Its semantics equal `row`'s by design (the point of the alternative was where the state
//! lives, not how it moves), so it is the row's statement under another name; the simulator
//! and the property suite treat it as a separate backend so a regression in either shows.

use crate::backend::row::Row;
use crate::scenario::Scenario;

/// The shared-cache pace.
#[derive(Debug)]
pub struct SharedCache;

impl SharedCache {
    /// Build from a scenario.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(sc: &Scenario) -> Row {
        Row::new(sc).renamed("shared_cache")
    }
}
