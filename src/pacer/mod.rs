//! The pacing core: pure, clock-free, tokio-free pacing arithmetic shared by the simulator
//! (virtual time), by live worker processes, and by the checkers that verify their traces.
//!
//! # Time
//!
//! Nothing in this module reads a clock. Every function that needs the current time takes it
//! as an argument, `now`, in [`Nanos`]: plain `u64` nanoseconds since an epoch the *caller*
//! chooses (the simulator's virtual zero, or the shared store's clock, never one process's
//! monotonic clock, whose epoch is per-process). Intervals are [`Nanos`] too. Arithmetic that
//! could overflow saturates at `u64::MAX` (about 584 years), which no run reaches.
//!
//! # Pieces
//!
//! | file | concept |
//! |------|---------|
//! | `local` | [`LocalPacer`]: one process's `next_allowed`, advanced by compare-and-swap |
//! | `gcra` | [`Gcra`]: the pure GCRA decision, and [`BurstMeter`]: the burst a trace needed |
//! | `backoff` | [`Backoff`]: the 429/503 multiplier and clean-streak state machine |
//! | `fallback` | [`FallbackSwitch`]: shared pace vs per-process fallback pacer |
//! | `sync` | the `std`/`loom` shim every atomic in this module is imported from |
//!
//! # The reservation rule
//!
//! Every pacer here, and every shared store the simulator models, implements the same rule the
//! design records lift into one SQL statement:
//!
//! ```text
//! slot          = max(now, next_allowed)
//! next_allowed  = slot + interval * backoff_multiplier
//! ```
//!
//! applied atomically: a store satisfies the contract if and only if it only replaces
//! `next_allowed` when it has not changed since it was read (compare-and-swap).
//!
//! # Model checking
//!
//! Built with the `loom` feature (`just loom`), the atomics come from `loom` instead of `std`
//! (see `sync`), and `tests/loom_pacer.rs` explores every interleaving of a few threads:
//!
//! ```text
//! cargo test --profile fast-test --features loom --test loom_pacer
//! ```
//!
//! In that build the pacers may only be used inside `loom::model`.
#![warn(missing_docs, missing_debug_implementations)]

pub(crate) mod backoff;
pub(crate) mod fallback;
pub(crate) mod gcra;
pub(crate) mod local;
pub(crate) mod sync;

pub use backoff::{Backoff, BackoffConfig, BackoffConfigError, Change, Status};
pub use fallback::{Epoch, FallbackPolicy, FallbackSwitch, Refusal};
pub use gcra::{BurstMeter, Decision, Exceedance, Gcra};
#[cfg(feature = "loom")]
pub use local::RacyLocalPacer;
pub use local::{LocalPacer, divided_interval};

/// Nanoseconds: an instant (since a caller-chosen epoch) or an interval.
///
/// A plain `u64` rather than a newtype so that traces, stores and checkers can exchange it
/// without conversions; every name that holds one says which it is (`now`, `slot`,
/// `next_allowed`, `interval`).
pub type Nanos = u64;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: Nanos = 1_000_000_000;

/// The pacing interval for `rate_per_sec` requests per second, rounded **up** to a whole
/// nanosecond so that pacing at this interval never exceeds the rate (7/s gives
/// 142 857 143 ns). The result is at least 1 ns.
///
/// (governor's `Quota::per_second` rounds the same quotient *down*; see
/// `tests/suite/gcra_governor.rs`.)
///
/// # Panics
///
/// If `rate_per_sec` is not finite and strictly positive.
pub fn interval_for_rate(rate_per_sec: f64) -> Nanos {
    assert!(
        rate_per_sec.is_finite() && rate_per_sec > 0.0,
        "rate_per_sec must be finite and > 0, got {rate_per_sec}"
    );
    ceil_to_nanos(NANOS_PER_SEC as f64 / rate_per_sec)
}

/// `interval * multiplier`, the interval in force under a backoff multiplier, rounded **up** to
/// a whole nanosecond (so the scaled pace never exceeds `rate / multiplier`).
///
/// Integral multipliers (1.0, 2.0, 4.0, 8.0: every multiplier a factor-2 [`Backoff`] can
/// produce) are applied with exact integer multiplication; others go through `f64`, exact for
/// intervals below 2^53 ns (104 days). Saturates at `u64::MAX`.
///
/// # Panics
///
/// If `multiplier` is not finite or is below 1.0: backoff only ever slows a pace down.
pub fn scale_interval(interval: Nanos, multiplier: f64) -> Nanos {
    assert!(
        multiplier.is_finite() && multiplier >= 1.0,
        "backoff multiplier must be finite and >= 1.0, got {multiplier}"
    );
    if multiplier.fract() == 0.0 && multiplier <= u64::MAX as f64 {
        // Exact: an integral f64 below 2^64 converts to u64 without loss.
        interval.saturating_mul(multiplier as u64)
    } else {
        ceil_to_nanos(interval as f64 * multiplier)
    }
}

/// Rounds a positive nanosecond quantity up to a whole, non-zero `Nanos` (saturating).
fn ceil_to_nanos(ns: f64) -> Nanos {
    // `as` saturates for floats beyond u64::MAX.
    (ns.ceil() as Nanos).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_for_rate_rounds_up() {
        assert_eq!(interval_for_rate(7.0), 142_857_143);
        assert_eq!(interval_for_rate(50.0), 20_000_000);
        assert_eq!(interval_for_rate(1.0), NANOS_PER_SEC);
        assert_eq!(interval_for_rate(0.5), 2 * NANOS_PER_SEC);
        assert_eq!(interval_for_rate(1e12), 1);
    }

    #[test]
    #[should_panic(expected = "rate_per_sec")]
    fn interval_for_rate_rejects_zero() {
        interval_for_rate(0.0);
    }

    #[test]
    fn scale_interval_is_exact_for_integral_multipliers() {
        assert_eq!(scale_interval(142_857_143, 1.0), 142_857_143);
        assert_eq!(scale_interval(142_857_143, 8.0), 1_142_857_144);
        assert_eq!(scale_interval(3, 1.5), 5);
        assert_eq!(scale_interval(u64::MAX / 2, 4.0), u64::MAX);
    }

    #[test]
    #[should_panic(expected = "multiplier")]
    fn scale_interval_rejects_speedup() {
        scale_interval(10, 0.5);
    }
}
