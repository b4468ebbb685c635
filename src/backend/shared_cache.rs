//! `shared_cache`: the global pace kept under a reserved key of an existing key-value cache
//! table (the alternative that needed no migration: the design record's winner, #649, reused
//! the `shared_cache` table under a key prefix the framework's `make_key` can never emit).
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

use crate::backend::options::{Fallback, OptionError, Placement};
use crate::backend::row::{Row, RowOptions};
use crate::scenario::Scenario;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `shared_cache` (each as [`RowOptions`] documents it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedCacheOptions {
    /// See [`RowOptions::fallback`] (default `divided`, #649 as written).
    pub fallback: Option<Fallback>,
    /// See [`RowOptions::cap`].
    pub cap: Option<u32>,
    /// See [`RowOptions::backoff`] (default `global`; #649 as written had none: #653).
    pub backoff: Option<Placement>,
    /// See [`RowOptions::streak`].
    pub streak: Option<Placement>,
    /// See [`RowOptions::rejoin_after`].
    pub rejoin_after: Option<Nanos>,
}

/// The shared-cache pace: the row's statement under a cache key.
pub fn new(sc: &Scenario, o: SharedCacheOptions) -> Result<Row, OptionError> {
    let row = RowOptions {
        fallback: o.fallback,
        cap: o.cap,
        backoff: o.backoff,
        streak: o.streak,
        rejoin_after: o.rejoin_after,
        ..RowOptions::default()
    };
    Ok(Row::new(sc, row)?.renamed("shared_cache"))
}

impl crate::backend::Configure for SharedCacheOptions {
    type Backend = crate::backend::row::Row;
    fn build(self, sc: &Scenario) -> Result<crate::backend::row::Row, OptionError> {
        new(sc, self)
    }
}
