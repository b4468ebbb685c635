//! pacesim's GCRA against governor's, decision by decision, and `BurstMeter` against
//! hand-computed cases, a brute force, and GCRA itself.
//!
//! # A fair comparison
//!
//! governor's `Quota::per_second(r)` sets the replenish interval to `1e9 / r` nanoseconds
//! **rounded down** (7/s gives 142 857 142 ns), while pacesim's `interval_for_rate` rounds up.
//! So the differential test builds pacesim's `Gcra` from the very interval governor uses,
//! `NANOS_PER_SEC / r` in integer division, which makes every rate 1..=1000 comparable, not
//! only the divisors of 1e9. `allow_burst(b)` sets governor's tolerance to `T * (b - 1)`
//! (since governor 0.8; earlier versions used `T * b`, admitting a spurious extra cell after
//! idle), the same tolerance `Gcra::new(T, b)` uses. governor's `FakeRelativeClock` starts at 0
//! and the limiter's start instant is 0, so governor's `t0` is pacesim's `now`.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, FakeRelativeClock};
use governor::{Quota, RateLimiter};
use pacesim::pacer::{BurstMeter, Gcra, LocalPacer, NANOS_PER_SEC, Nanos};
use proptest::prelude::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// governor's replenish interval for `per_second(rate)`: 1e9 / rate, rounded down.
fn governor_interval(rate: u32) -> Nanos {
    NANOS_PER_SEC / Nanos::from(rate)
}

/// Gaps between arrivals for interval `t`: simultaneous bursts, sub-interval jitter,
/// near-paced gaps, and idle periods of seconds.
fn gap(t: Nanos) -> impl Strategy<Value = Nanos> {
    prop_oneof![
        3 => Just(0),
        2 => 0..t,
        3 => t.saturating_sub(2)..=t.saturating_add(2),
        2 => 0..=3 * t,
        1 => NANOS_PER_SEC..=5 * NANOS_PER_SEC,
    ]
}

/// (rate per second, burst, gaps between arrivals).
fn scenario() -> impl Strategy<Value = (u32, u32, Vec<Nanos>)> {
    (1..=1000u32, 1..=20u32).prop_flat_map(|(rate, burst)| {
        let t = governor_interval(rate);
        (Just(rate), Just(burst), prop::collection::vec(gap(t), 1..300))
    })
}

proptest! {
    /// Every arrival gets the same allow/deny from both, and on deny the same earliest
    /// conforming instant.
    #[test]
    fn gcra_agrees_with_governor((rate, burst, gaps) in scenario()) {
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_second(nz(rate)).allow_burst(nz(burst));
        let limiter = RateLimiter::direct_with_clock(quota, clock.clone());
        let gcra = Gcra::new(governor_interval(rate), burst);
        prop_assert_eq!(quota.replenish_interval(), Duration::from_nanos(gcra.interval()));

        let (mut now, mut tat) = (0, None);
        for (i, gap) in gaps.into_iter().enumerate() {
            clock.advance(Duration::from_nanos(gap));
            now += gap;
            let ours = gcra.decide(tat, now);
            match limiter.check() {
                Ok(()) => prop_assert!(ours.is_allowed(), "arrival {} at {}: governor allowed", i, now),
                Err(not_until) => {
                    let retry_at = ours.retry_at();
                    prop_assert!(retry_at.is_some(), "arrival {} at {}: governor denied", i, now);
                    prop_assert_eq!(
                        not_until.wait_time_from(clock.now()),
                        Duration::from_nanos(retry_at.unwrap() - now),
                        "arrival {} at {}", i, now
                    );
                }
            }
            tat = Some(ours.tat());
        }
    }
}

/// Exhaust `per_second(5)` with burst 5, idle 2 s, then count the cells admitted at once.
#[test]
fn idle_refills_burst_cells_not_burst_plus_one_governor() {
    let clock = FakeRelativeClock::default();
    let limiter = RateLimiter::direct_with_clock(Quota::per_second(nz(5)), clock.clone());
    let admitted = || std::iter::from_fn(|| limiter.check().ok()).take(100).count();
    assert_eq!(admitted(), 5);
    clock.advance(Duration::from_secs(2));
    assert_eq!(admitted(), 5, "governor's fixed off-by-one is back");
}

/// The same pin for pacesim's `Gcra`.
#[test]
fn idle_refills_burst_cells_not_burst_plus_one_pacesim() {
    let gcra = Gcra::new(governor_interval(5), 5);
    let admitted = |now: Nanos, tat: &mut Option<Nanos>| {
        std::iter::from_fn(|| {
            let d = gcra.decide(*tat, now);
            *tat = Some(d.tat());
            d.is_allowed().then_some(())
        })
        .take(100)
        .count()
    };
    let mut tat = None;
    assert_eq!(admitted(0, &mut tat), 5);
    assert_eq!(admitted(2 * NANOS_PER_SEC, &mut tat), 5);
}

#[test]
fn perfectly_paced_sequence_needs_burst_one() {
    let mut meter = BurstMeter::new(20_000_000);
    for k in 0..100 {
        meter.push(k * 20_000_000);
    }
    assert_eq!(meter.burst_needed(), 1);
    assert_eq!(meter.first_exceeding(1), None);
}

/// The design records' witness: 4 independent limiters x 10 requests at a 50/s local pace,
/// all starting at 0. Each process alone is perfectly paced; together, four arrive at every
/// 20 ms tick. Against the global 50/s the window [0, 180 ms] holds 40 arrivals spanning 9
/// whole intervals, so the burst needed is 40 - 9 = 31, and a burst of 3 is first exceeded by
/// the fourth request at 0.
#[test]
fn four_independent_local_pacers_need_a_burst_of_four_or_more() {
    let t = 20_000_000;
    let pacers: Vec<LocalPacer> = (0..4).map(|_| LocalPacer::new(t)).collect();
    let mut arrivals: Vec<Nanos> = pacers
        .iter()
        .flat_map(|p| (0..10).map(|_| p.reserve(0)).collect::<Vec<_>>())
        .collect();
    arrivals.sort_unstable();
    let mut meter = BurstMeter::new(t);
    for &a in &arrivals {
        meter.push(a);
    }
    assert!(meter.burst_needed() >= 4);
    assert_eq!(meter.burst_needed(), 31);
    let first = meter.first_exceeding(3).expect("exceeds 3");
    assert_eq!((first.index, first.at, first.burst_needed), (3, 0, 4));
    assert_eq!(arrivals.last(), Some(&180_000_000));

    // One shared pacer instead: burst 1, and 40 requests take 39 intervals = 0.78 s.
    let shared = LocalPacer::new(t);
    let mut meter = BurstMeter::new(t);
    let mut last = 0;
    for _ in 0..40 {
        last = shared.reserve(0);
        meter.push(last);
    }
    assert_eq!(meter.burst_needed(), 1);
    assert_eq!(last, 780_000_000);
}

/// O(n^2) window form for one interval `t`:
/// `max over i <= j of (j - i + 1) - floor((t_j - t_i) / t)`.
fn brute_force_fixed(times: &[Nanos], t: Nanos) -> u64 {
    let mut best = 1;
    for j in 0..times.len() {
        for i in 0..=j {
            let count = (j - i + 1) as i128;
            let spanned = ((times[j] - times[i]) / t) as i128;
            best = best.max(count - spanned);
        }
    }
    best as u64
}

fn ceil_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b) + i128::from(a.rem_euclid(b) != 0)
}

/// O(n^2) unrolled form with per-arrival intervals `T_k`:
/// `need_j = max(1, max over i < j of 1 + ceil((T_i + ... + T_{j-1} - (t_j - t_i)) / T_j))`.
fn brute_force_varying(arrivals: &[(Nanos, Nanos)]) -> u64 {
    let mut best = 1;
    for (j, &(tj, intervals_j)) in arrivals.iter().enumerate() {
        for i in 0..j {
            let owed: i128 = arrivals[i..j].iter().map(|&(_, ti)| i128::from(ti)).sum();
            let slack = i128::from(tj - arrivals[i].0);
            best = best.max(1 + ceil_div(owed - slack, i128::from(intervals_j)));
        }
    }
    best as u64
}

/// Sorted instants built from gaps.
fn instants(gaps: &[Nanos]) -> Vec<Nanos> {
    gaps.iter()
        .scan(0, |now, g| {
            *now += g;
            Some(*now)
        })
        .collect()
}

/// Index of the first arrival `Gcra::new(T_i, burst)` denies, running it for real.
fn first_denied(arrivals: &[(Nanos, Nanos)], burst: u64) -> Option<usize> {
    let burst = u32::try_from(burst).expect("small burst");
    let mut tat = None;
    for (k, &(t, interval)) in arrivals.iter().enumerate() {
        let d = Gcra::new(interval, burst).decide(tat, t);
        if !d.is_allowed() {
            return Some(k);
        }
        tat = Some(d.tat());
    }
    None
}

proptest! {
    #[test]
    fn burst_meter_matches_window_brute_force(
        t in 1..=50u64,
        gaps in prop::collection::vec(prop_oneof![3 => Just(0u64), 3 => 0..=60u64, 1 => 0..=400u64], 0..60),
    ) {
        let times = instants(&gaps);
        let mut meter = BurstMeter::new(t);
        for &x in &times {
            meter.push(x);
        }
        prop_assert_eq!(meter.burst_needed(), brute_force_fixed(&times, t));
    }

    /// With the interval changing per arrival (a backoff multiplier of 1, 2, 4 or 8), the
    /// meter matches the unrolled brute force, GCRA at `burst_needed` allows everything, and
    /// GCRA at any smaller burst first denies exactly `first_exceeding`'s arrival.
    #[test]
    fn burst_meter_matches_gcra_with_varying_interval(
        base in 1..=30u64,
        steps in prop::collection::vec(
            (prop_oneof![3 => Just(0u64), 3 => 0..=60u64, 1 => 0..=500u64], 0..4u32),
            0..60,
        ),
        below in 1..=8u64,
    ) {
        let times = instants(&steps.iter().map(|&(g, _)| g).collect::<Vec<_>>());
        let arrivals: Vec<(Nanos, Nanos)> = times
            .iter()
            .zip(&steps)
            .map(|(&t, &(_, shift))| (t, base << shift))
            .collect();
        let mut meter = BurstMeter::new(base);
        for &(t, interval) in &arrivals {
            meter.push_with_interval(t, interval);
        }
        let needed = meter.burst_needed();
        prop_assert_eq!(needed, brute_force_varying(&arrivals));
        prop_assert_eq!(first_denied(&arrivals, needed), None);
        let b = needed.saturating_sub(below).max(1);
        prop_assert_eq!(first_denied(&arrivals, b), meter.first_exceeding(b).map(|e| e.index));
    }
}
