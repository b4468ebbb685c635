//! loom models of the pacer's concurrent parts: every interleaving (up to the preemption
//! bound) of a few threads reserving from [`LocalPacer`] and switching a [`FallbackSwitch`].
//!
//! Run (a separate target dir, so the cfg does not rebuild the main one):
//!
//! ```text
//! cargo test --profile fast-test --features loom --test loom_pacer
//! ```
//!
//! Each correct model has a deliberately broken twin under `#[should_panic]`, so the suite
//! also shows that the model would catch the defect (red) that the real code fixes (green).
//! To debug a failing model, add `LOOM_LOG=trace LOOM_LOCATION=1` to the command.
#![cfg(feature = "loom")]

use loom::model::Builder;
use loom::sync::Arc;
use loom::thread;
use pacesim::pacer::{FallbackPolicy, FallbackSwitch, LocalPacer, Nanos, RacyLocalPacer, Refusal};

/// Bounds the schedules explored: enough to interleave every step of two or three short
/// CAS loops, small enough to finish in seconds.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    // LOOM_MAX_PREEMPTIONS, read by Builder::new, overrides the default bound.
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}

/// Asserts `slots` are distinct and, sorted, spaced at least `interval` apart.
fn assert_spaced(mut slots: Vec<Nanos>, interval: Nanos) {
    slots.sort_unstable();
    for pair in slots.windows(2) {
        assert!(
            pair[1] >= pair[0] + interval,
            "slots {} and {} closer than the interval {interval}: {slots:?}",
            pair[0],
            pair[1]
        );
    }
}

const INTERVAL: Nanos = 10;
const START: Nanos = 100;

/// Three threads reserve at instants before `next_allowed`: the slots are exactly
/// `START, START + T, START + 2T` in some order and no update is lost.
#[test]
fn local_pacer_three_reservers_no_lost_update() {
    model(|| {
        let pacer = Arc::new(LocalPacer::starting_at(INTERVAL, START));
        let handles: Vec<_> = [0, 50, 99]
            .into_iter()
            .map(|now| {
                let pacer = Arc::clone(&pacer);
                thread::spawn(move || pacer.reserve(now))
            })
            .collect();
        let mut slots: Vec<Nanos> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        slots.sort_unstable();
        assert_eq!(slots, [START, START + INTERVAL, START + 2 * INTERVAL]);
        assert_eq!(pacer.next_allowed(), START + 3 * INTERVAL, "lost update");
    });
}

/// Reservers at instants on both sides of `next_allowed`, one of them scaled by a backoff
/// multiplier: slots stay distinct and spaced, and `next_allowed` ends one (scaled) interval
/// after the last slot granted.
#[test]
fn local_pacer_mixed_instants_stay_spaced() {
    model(|| {
        let pacer = Arc::new(LocalPacer::starting_at(INTERVAL, START));
        let late = {
            let pacer = Arc::clone(&pacer);
            thread::spawn(move || pacer.reserve(START + 5))
        };
        let scaled = {
            let pacer = Arc::clone(&pacer);
            thread::spawn(move || pacer.reserve_scaled(0, 2.0))
        };
        let own = pacer.reserve(START);
        let (late, scaled) = (late.join().unwrap(), scaled.join().unwrap());
        assert_spaced(vec![own, late, scaled], INTERVAL);
        let last = own.max(late).max(scaled);
        let last_interval = if last == scaled { 2 * INTERVAL } else { INTERVAL };
        assert_eq!(pacer.next_allowed(), last + last_interval);
    });
}

/// The lost-update mutant: two load-then-store reservers can read the same `next_allowed`,
/// get the same slot, and advance it once instead of twice.
#[test]
#[should_panic(expected = "closer than the interval")]
fn racy_local_pacer_loses_updates() {
    model(|| {
        let pacer = Arc::new(RacyLocalPacer::starting_at(INTERVAL, START));
        let other = {
            let pacer = Arc::clone(&pacer);
            thread::spawn(move || pacer.reserve(0))
        };
        let own = pacer.reserve(0);
        assert_spaced(vec![own, other.join().unwrap()], INTERVAL);
        assert_eq!(pacer.next_allowed(), START + 2 * INTERVAL, "lost update");
    });
}

/// The fallback interval of a `FailOpen` switch at 1e8/s.
const FALLBACK_INTERVAL: Nanos = 10;

/// A switch already in fallback, with the fallback pacer used once (so the handoff of a
/// switch that granted nothing during the race is still distinguishable).
fn switch_in_fallback() -> FallbackSwitch {
    let switch = FallbackSwitch::new(FallbackPolicy::FailOpen, 1e8);
    assert_eq!(switch.fallback_interval(), Some(FALLBACK_INTERVAL));
    assert!(switch.enter_fallback());
    assert_eq!(switch.reserve_fallback(0), Ok(0));
    switch
}

/// Two threads reserve from the fallback pacer while a third switches back to the shared
/// pace. Every granted slot is covered by the handoff (no slot is granted after the exit), a
/// refused reservation is `Superseded` or `NotInFallback`, and granted slots stay spaced.
#[test]
fn fallback_exit_never_leaves_two_pacers_active() {
    model(|| {
        let switch = Arc::new(switch_in_fallback());
        let reservers: Vec<_> = (0..2)
            .map(|_| {
                let switch = Arc::clone(&switch);
                thread::spawn(move || switch.reserve_fallback(0))
            })
            .collect();
        let handoff = switch.exit_fallback().expect("the only exit");
        let outcomes: Vec<_> = reservers.into_iter().map(|h| h.join().unwrap()).collect();
        let mut granted = Vec::new();
        for outcome in outcomes {
            match outcome {
                Ok(slot) => {
                    assert!(
                        slot + FALLBACK_INTERVAL <= handoff,
                        "fallback slot {slot} granted beyond the handoff {handoff}"
                    );
                    granted.push(slot);
                }
                Err(refusal) => assert!(
                    matches!(refusal, Refusal::Superseded | Refusal::NotInFallback),
                    "{refusal:?}"
                ),
            }
        }
        assert_spaced(granted, FALLBACK_INTERVAL);
        assert!(!switch.in_fallback());
        assert_eq!(
            switch.reserve_fallback(0),
            Err(Refusal::NotInFallback),
            "the fallback pacer still grants after the exit"
        );
    });
}

/// The mutant without the epoch re-check: a reserver that read the fallback epoch before the
/// exit is granted a slot after it, beyond the handoff, while the shared pace is active.
#[test]
#[should_panic(expected = "beyond the handoff")]
fn unvalidated_fallback_reservation_outlives_the_exit() {
    model(|| {
        let switch = Arc::new(switch_in_fallback());
        let reserver = {
            let switch = Arc::clone(&switch);
            thread::spawn(move || switch.reserve_fallback_unvalidated(0))
        };
        let handoff = switch.exit_fallback().expect("the only exit");
        if let Ok(slot) = reserver.join().unwrap() {
            assert!(
                slot + FALLBACK_INTERVAL <= handoff,
                "fallback slot {slot} granted beyond the handoff {handoff}"
            );
        }
    });
}

/// Threads that all notice the outage (or the recovery) at once switch exactly once.
#[test]
fn concurrent_switches_happen_once() {
    model(|| {
        let switch = Arc::new(FallbackSwitch::new(FallbackPolicy::Divided { cap: 1 }, 1e8));
        let other = {
            let switch = Arc::clone(&switch);
            thread::spawn(move || {
                let entered = switch.enter_fallback();
                (entered, switch.exit_fallback())
            })
        };
        let entered = switch.enter_fallback();
        let exited = switch.exit_fallback();
        let (other_entered, other_exited) = other.join().unwrap();
        // Every exit pairs with an enter; the switch ends on the shared pace.
        let enters = usize::from(entered) + usize::from(other_entered);
        let exits = usize::from(exited.is_some()) + usize::from(other_exited.is_some());
        assert!(enters >= 1, "nobody entered");
        assert_eq!(enters, exits);
        assert_eq!(switch.epoch().0, 2 * enters as u64);
        assert!(!switch.in_fallback());
    });
}
