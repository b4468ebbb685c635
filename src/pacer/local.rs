//! The in-process pacer: one `next_allowed` shared by the threads of one process.
//!
//! This is the design records' `_DestinationLimiter` (a lock and a process-local
//! `next_allowed`) as a lock-free compare-and-swap loop. On its own it paces **one process**:
//! N processes each holding one pace at N x the rate, which is the defect the shared store
//! exists to fix. It remains the pacer of the pooled (single-process) runner and the fallback
//! pacer of [`FallbackSwitch`](super::FallbackSwitch), where [`divided_interval`] keeps the
//! global ceiling through a store outage.
//!
//! In the simulator, the threads of a process (`[processes] threads`) share its one
//! `LocalPacer` (the `local` backend's, and a fallback's) as the record's threads share their
//! `_DestinationLimiter`; they call it one at a time, so the simulator never interleaves
//! inside `reserve`. The interleavings of real threads inside it are what the loom models
//! (`tests/loom_pacer.rs`) check.

use super::sync::{AtomicU64, Ordering};
use super::{NANOS_PER_SEC, Nanos, interval_for_rate, scale_interval};

/// A thread-safe pacer that hands out strictly spaced slots: `reserve(now)` returns
/// `slot = max(now, next_allowed)` and atomically advances `next_allowed = slot + interval`.
///
/// The caller sleeps until `slot` holding nothing, then makes its request. Concurrent
/// reservations form one strictly increasing sequence of slots, each at least `interval` after
/// the previous one, and no reservation is lost.
///
/// ```
/// use pacesim::pacer::LocalPacer;
/// let pacer = LocalPacer::new(20_000_000); // 50/s
/// assert_eq!(pacer.reserve(0), 0);
/// assert_eq!(pacer.reserve(0), 20_000_000); // second caller waits one interval
/// assert_eq!(pacer.reserve(100_000_000), 100_000_000); // idle: no debt carried
/// ```
#[derive(Debug)]
pub struct LocalPacer {
    // invariant: never decreases; only ever replaced by a compare-and-swap whose expected value
    // is the value the new one was computed from (no lost update).
    next_allowed: AtomicU64,
    // invariant: >= 1 ns, so consecutive slots are distinct.
    interval: Nanos,
}

/// Its next slot (a relaxed load, as its `Debug` reads it) and interval, exact.
impl std::hash::Hash for LocalPacer {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let LocalPacer { next_allowed, interval } = self;
        next_allowed.load(std::sync::atomic::Ordering::Relaxed).hash(h);
        interval.hash(h);
    }
}

/// A pacer with the same next slot and interval (its slot read by a relaxed load, as `Hash`
/// reads it: a copy taken where no other thread reserves, such as an explorer's saved world).
impl Clone for LocalPacer {
    fn clone(&self) -> Self {
        let LocalPacer { next_allowed, interval } = self;
        LocalPacer {
            next_allowed: AtomicU64::new(next_allowed.load(std::sync::atomic::Ordering::Relaxed)),
            interval: *interval,
        }
    }
}

impl LocalPacer {
    /// A pacer at `interval` nanoseconds per request whose first slot is free at any `now`.
    ///
    /// # Panics
    ///
    /// If `interval` is 0.
    pub fn new(interval: Nanos) -> Self {
        Self::starting_at(interval, 0)
    }

    /// A pacer at `rate_per_sec` requests per second (interval rounded up, see
    /// [`interval_for_rate`]).
    ///
    /// # Panics
    ///
    /// If `rate_per_sec` is not finite and strictly positive.
    pub fn per_second(rate_per_sec: f64) -> Self {
        Self::new(interval_for_rate(rate_per_sec))
    }

    /// A pacer at `interval` whose `next_allowed` starts at `next_allowed` (for example the
    /// handoff of a previous pacer, so that no slot falls before one already granted).
    ///
    /// # Panics
    ///
    /// If `interval` is 0.
    pub fn starting_at(interval: Nanos, next_allowed: Nanos) -> Self {
        assert!(interval > 0, "pacing interval must be at least 1 ns");
        Self {
            next_allowed: AtomicU64::new(next_allowed),
            interval,
        }
    }

    /// The configured interval between slots, in nanoseconds.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// The earliest instant the next reservation can be granted (a snapshot).
    pub fn next_allowed(&self) -> Nanos {
        self.next_allowed.load(Ordering::Acquire)
    }

    /// Reserves the next slot at the configured interval: returns
    /// `slot = max(now, next_allowed)` and atomically sets `next_allowed = slot + interval`.
    pub fn reserve(&self, now: Nanos) -> Nanos {
        self.reserve_with_interval(now, self.interval)
    }

    /// Reserves the next slot with the interval scaled by a backoff `multiplier` (the design
    /// records' `interval * backoff_multiplier`; rounding as in [`scale_interval`]).
    ///
    /// # Panics
    ///
    /// If `multiplier` is not finite or is below 1.0.
    pub fn reserve_scaled(&self, now: Nanos, multiplier: f64) -> Nanos {
        self.reserve_with_interval(now, scale_interval(self.interval, multiplier))
    }

    /// Reserves the next slot, advancing `next_allowed` by an explicit `interval` instead of
    /// the configured one. The compare-and-swap loop behind every `reserve*`.
    ///
    /// # Panics
    ///
    /// If `interval` is 0.
    pub fn reserve_with_interval(&self, now: Nanos, interval: Nanos) -> Nanos {
        assert!(interval > 0, "pacing interval must be at least 1 ns");
        // The pace protects no other memory, so Relaxed would order the slots correctly (every
        // read-modify-write sees the latest value); Acquire/Release is kept so that anything a
        // caller publishes before reserving is visible to whoever reserves after it.
        let mut current = self.next_allowed.load(Ordering::Acquire);
        loop {
            let slot = current.max(now);
            let next = slot.saturating_add(interval);
            match self
                .next_allowed
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return slot,
                Err(actual) => current = actual,
            }
        }
    }
}

/// **Deliberately broken** [`LocalPacer`]: `reserve` loads `next_allowed`, computes, then
/// stores, with no compare-and-swap, so two concurrent reservers can read the same value, get
/// the same slot and lose one update. Exists only so that `tests/loom_pacer.rs` can prove the
/// model checker catches a lost update (the mutation test of the CAS loop), so it is built only
/// with the `loom` feature (`just loom`). Never use it to pace anything.
#[cfg(feature = "loom")]
#[derive(Debug)]
pub struct RacyLocalPacer {
    // invariant: none; this type exists to violate LocalPacer's.
    next_allowed: AtomicU64,
    interval: Nanos,
}

#[cfg(feature = "loom")]
impl RacyLocalPacer {
    /// A racy pacer at `interval` whose `next_allowed` starts at `next_allowed`.
    pub fn starting_at(interval: Nanos, next_allowed: Nanos) -> Self {
        Self {
            next_allowed: AtomicU64::new(next_allowed),
            interval,
        }
    }

    /// A snapshot of `next_allowed`.
    pub fn next_allowed(&self) -> Nanos {
        self.next_allowed.load(Ordering::Acquire)
    }

    /// Load-then-store reservation: the lost-update defect.
    pub fn reserve(&self, now: Nanos) -> Nanos {
        let slot = self.next_allowed.load(Ordering::Acquire).max(now);
        self.next_allowed
            .store(slot.saturating_add(self.interval), Ordering::Release);
        slot
    }
}

/// The fallback interval when each process paces itself at `rate_per_sec / (cap + 1)`, where
/// `cap` is the dispatch cap (the design records' `STAGE_E_MAX_CONCURRENT_DISPATCHES`, #649's
/// divisor plus one): as many as `cap + 1` concurrently fetching processes, each at
/// `rate / (cap + 1)`, never exceed `rate` in aggregate, so the ceiling survives a store
/// outage.
///
/// Computed as `(cap + 1) * 1e9 / rate_per_sec` nanoseconds, rounded **up** (at least 1 ns).
/// At 7/s and cap 2 this is 428 571 429 ns (2.33/s per process).
///
/// # Panics
///
/// If `rate_per_sec` is not finite and strictly positive.
pub fn divided_interval(rate_per_sec: f64, cap: u32) -> Nanos {
    assert!(
        rate_per_sec.is_finite() && rate_per_sec > 0.0,
        "rate_per_sec must be finite and > 0, got {rate_per_sec}"
    );
    let ns = (f64::from(cap) + 1.0) * NANOS_PER_SEC as f64 / rate_per_sec;
    (ns.ceil() as Nanos).max(1)
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn slots_are_spaced_and_idle_carries_no_debt() {
        let p = LocalPacer::new(10);
        assert_eq!(p.reserve(5), 5);
        assert_eq!(p.reserve(5), 15);
        assert_eq!(p.reserve(6), 25);
        assert_eq!(p.next_allowed(), 35);
        assert_eq!(p.reserve(100), 100);
        assert_eq!(p.next_allowed(), 110);
    }

    #[test]
    fn scaled_reservations_use_the_multiplier() {
        let p = LocalPacer::starting_at(10, 0);
        assert_eq!(p.reserve_scaled(0, 8.0), 0);
        assert_eq!(p.reserve_scaled(0, 1.0), 80);
        assert_eq!(p.next_allowed(), 90);
        assert_eq!(p.interval(), 10);
    }

    #[test]
    fn divided_interval_keeps_the_ceiling() {
        assert_eq!(divided_interval(7.0, 2), 428_571_429);
        assert_eq!(divided_interval(50.0, 0), 20_000_000);
        assert_eq!(divided_interval(20.0, 3), 200_000_000);
        // cap + 1 processes at the divided interval never exceed the rate.
        for (rate, cap) in [(7.0, 2), (3.0, 6), (50.0, 9), (0.7, 1)] {
            let per_process = NANOS_PER_SEC as f64 / divided_interval(rate, cap) as f64;
            assert!(per_process * f64::from(cap + 1) <= rate);
        }
    }

    #[test]
    fn threads_get_distinct_spaced_slots() {
        let p = Arc::new(LocalPacer::new(3));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let p = Arc::clone(&p);
                std::thread::spawn(move || (0..1000).map(|_| p.reserve(0)).collect::<Vec<_>>())
            })
            .collect();
        let mut slots: Vec<Nanos> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        slots.sort_unstable();
        let expected: Vec<Nanos> = (0..8000).map(|k| k * 3).collect();
        assert_eq!(slots, expected);
        assert_eq!(p.next_allowed(), 8000 * 3);
    }
}
