//! The in-process fallback switch: while the shared store is reachable a process paces through
//! it; when it is not, the process's threads pace through a per-process fallback pacer chosen
//! by [`FallbackPolicy`], until the store comes back.
//!
//! The design records compare the policies: `fail_open` reverts to per-process pacing at the
//! full rate, restoring the N x rate defect exactly when nobody is watching; `divided` paces
//! each process at `rate / (cap + 1)`, so the ceiling survives the outage; `fail_closed` halts
//! fetching until the store returns.
//!
//! # The switch-over invariant
//!
//! A process must never have two pacers granting slots at once. The mode lives in one atomic
//! word, an [`Epoch`] counter that is odd in fallback and even on the shared pace, and a
//! fallback reservation is granted only if the epoch it started in is still current after the
//! slot was taken. So every granted fallback slot is ordered before the
//! [`exit_fallback`](FallbackSwitch::exit_fallback) that ends its epoch, a thread racing the
//! exit is told [`Refusal::Superseded`] and goes to the shared pace instead, and the exit
//! returns a handoff instant after every slot its epoch granted.

use super::local::{LocalPacer, divided_interval};
use super::sync::{AtomicU64, Ordering};
use super::{Nanos, interval_for_rate, scale_interval};

/// What a process paces with while the shared store is unreachable.
#[derive(Hash, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackPolicy {
    /// Per-process pacing at the full rate: N processes reach N x rate (the
    /// behaviour of the design record closed in favour of #649).
    FailOpen,
    /// Per-process pacing at `rate / (cap + 1)` (see [`divided_interval`]): the ceiling
    /// survives (the #649 behaviour).
    Divided {
        /// The dispatch cap: the most concurrently dispatched worker processes.
        cap: u32,
    },
    /// No pacing at all: the process halts fetching until the store is back.
    FailClosed,
}

impl FallbackPolicy {
    /// The fallback pacer's interval at `rate_per_sec`, or `None` for
    /// [`FailClosed`](FallbackPolicy::FailClosed), which has no pacer.
    ///
    /// # Panics
    ///
    /// If `rate_per_sec` is not finite and strictly positive.
    pub fn interval(&self, rate_per_sec: f64) -> Option<Nanos> {
        match *self {
            FallbackPolicy::FailOpen => Some(interval_for_rate(rate_per_sec)),
            FallbackPolicy::Divided { cap } => Some(divided_interval(rate_per_sec, cap)),
            FallbackPolicy::FailClosed => None,
        }
    }
}

/// A mode epoch of a [`FallbackSwitch`]: incremented by every switch, odd while in fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

impl Epoch {
    /// Whether this epoch is a fallback epoch (odd).
    pub fn is_fallback(self) -> bool {
        self.0 % 2 == 1
    }
}

/// Why [`FallbackSwitch::reserve_fallback`] granted no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The switch is on the shared pace: reserve from the shared store.
    #[error("not in fallback: reserve from the shared pace")]
    NotInFallback,
    /// The switch left fallback while this reservation was being taken; the slot is void
    /// (the fallback pacer moved on, harmlessly). Reserve from the shared pace.
    #[error("fallback ended during the reservation: reserve from the shared pace")]
    Superseded,
    /// In fallback under [`FallbackPolicy::FailClosed`]: no request may be made until the
    /// store is back.
    #[error("in fallback under fail_closed: halted until the shared pace is back")]
    Halted,
}

/// The fallback switch shared (by reference or `Arc`) by one process's threads.
///
/// ```
/// use pacesim::pacer::{FallbackPolicy, FallbackSwitch, Refusal};
/// let switch = FallbackSwitch::new(FallbackPolicy::Divided { cap: 1 }, 10.0); // 5/s fallback
/// assert_eq!(switch.reserve_fallback(0), Err(Refusal::NotInFallback));
/// assert!(switch.enter_fallback()); // the store is unreachable
/// assert!(!switch.enter_fallback()); // a second thread noticing too changes nothing
/// assert_eq!(switch.reserve_fallback(0), Ok(0));
/// assert_eq!(switch.reserve_fallback(0), Ok(200_000_000));
/// assert_eq!(switch.exit_fallback(), Some(400_000_000)); // the handoff
/// assert_eq!(switch.reserve_fallback(0), Err(Refusal::NotInFallback));
/// ```
#[derive(Debug)]
pub struct FallbackSwitch {
    // invariant: holds the current Epoch; odd iff in fallback. Changed only by a
    // compare-and-swap from e to e + 1 (enter: even -> odd, exit: odd -> even), so epochs
    // never repeat (no ABA) and the modes alternate.
    state: AtomicU64,
    // invariant: None iff the policy is FailClosed. A slot it hands out is granted only if a
    // read-modify-write of `state` after the slot was taken still reads the odd epoch read
    // before it; so each granted slot precedes, in `state`'s modification order, the exit
    // that ends its epoch, and that exit's handoff (read after the exit) covers it.
    pacer: Option<LocalPacer>,
    policy: FallbackPolicy,
}

/// Its epoch (a relaxed load, as its `Debug` reads it), fallback pacer and policy, exact.
impl std::hash::Hash for FallbackSwitch {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let FallbackSwitch { state, pacer, policy } = self;
        state.load(std::sync::atomic::Ordering::Relaxed).hash(h);
        pacer.hash(h);
        policy.hash(h);
    }
}

/// A switch in the same epoch with the same pacer and policy (its epoch read by a relaxed
/// load, as `Hash` reads it: a copy taken where no other thread switches, such as an
/// explorer's saved world).
impl Clone for FallbackSwitch {
    fn clone(&self) -> Self {
        let FallbackSwitch { state, pacer, policy } = self;
        FallbackSwitch {
            state: AtomicU64::new(state.load(std::sync::atomic::Ordering::Relaxed)),
            pacer: pacer.clone(),
            policy: *policy,
        }
    }
}

impl FallbackSwitch {
    /// A switch on the shared pace (epoch 0) whose fallback pacer follows `policy` at
    /// `rate_per_sec`.
    ///
    /// # Panics
    ///
    /// If `rate_per_sec` is not finite and strictly positive.
    pub fn new(policy: FallbackPolicy, rate_per_sec: f64) -> Self {
        Self {
            state: AtomicU64::new(0),
            pacer: policy.interval(rate_per_sec).map(LocalPacer::new),
            policy,
        }
    }

    /// The fallback policy.
    pub fn policy(&self) -> FallbackPolicy {
        self.policy
    }

    /// The fallback pacer's interval (`None` under fail_closed).
    pub fn fallback_interval(&self) -> Option<Nanos> {
        self.pacer.as_ref().map(LocalPacer::interval)
    }

    /// The current epoch (a snapshot).
    pub fn epoch(&self) -> Epoch {
        Epoch(self.state.load(Ordering::Acquire))
    }

    /// Whether the switch is in fallback (a snapshot).
    pub fn in_fallback(&self) -> bool {
        self.epoch().is_fallback()
    }

    /// Whether `epoch` is still the current epoch, checked with a read-modify-write so the
    /// answer is ordered against every switch. A thread that takes a shared-pace reservation
    /// can bracket it with [`epoch`](Self::epoch) and `is_current` to learn whether fallback
    /// began meanwhile.
    pub fn is_current(&self, epoch: Epoch) -> bool {
        // A compare-and-swap of e for e reads the latest value in `state`'s modification
        // order and, when it succeeds, releases everything before it (the slot just taken) to
        // the exit that later replaces e. A plain load here is the store-buffering pattern
        // (reserver: write pace, read epoch; exiter: write epoch, read pace): loom finds the
        // interleaving where both read stale values and a slot escapes the handoff.
        self.state
            .compare_exchange(epoch.0, epoch.0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Switches from the shared pace into fallback (the store is unreachable). Returns `true`
    /// if this call made the switch, `false` if the switch was already in fallback.
    pub fn enter_fallback(&self) -> bool {
        self.switch(false).is_some()
    }

    /// Switches from fallback back to the shared pace (the store is reachable again). Returns
    /// `None` if the switch was not in fallback; otherwise `Some(handoff)`, the fallback
    /// pacer's `next_allowed` read after the switch (0 under fail_closed): every slot the
    /// ended epoch granted is at most `handoff - interval`, so a caller that starts its shared
    /// reservations at `max(now, handoff)` never overlaps them.
    pub fn exit_fallback(&self) -> Option<Nanos> {
        self.switch(true)?;
        Some(self.pacer.as_ref().map_or(0, LocalPacer::next_allowed))
    }

    /// Reserves a slot from the fallback pacer at its interval.
    ///
    /// # Errors
    ///
    /// [`Refusal::NotInFallback`] on the shared pace, [`Refusal::Halted`] under fail_closed,
    /// [`Refusal::Superseded`] if the switch left fallback during the reservation.
    pub fn reserve_fallback(&self, now: Nanos) -> Result<Nanos, Refusal> {
        self.reserve_fallback_scaled(now, 1.0)
    }

    /// Reserves a slot from the fallback pacer at its interval scaled by a backoff
    /// `multiplier` (see [`scale_interval`]).
    ///
    /// # Errors
    ///
    /// As [`reserve_fallback`](Self::reserve_fallback).
    ///
    /// # Panics
    ///
    /// If `multiplier` is not finite or is below 1.0.
    pub fn reserve_fallback_scaled(&self, now: Nanos, multiplier: f64) -> Result<Nanos, Refusal> {
        // 1. Read the epoch; only a fallback epoch may grant.
        let epoch = self.epoch();
        let (pacer, interval) = self.fallback_pacer(epoch, multiplier)?;
        // 2. Take the slot (advancing the fallback pacer even if step 3 voids it).
        let slot = pacer.reserve_with_interval(now, interval);
        // 3. Grant it only if no switch happened since step 1.
        if self.is_current(epoch) {
            Ok(slot)
        } else {
            Err(Refusal::Superseded)
        }
    }

    /// **Deliberately broken** [`reserve_fallback`](Self::reserve_fallback) without step 3
    /// (the epoch re-check): a thread racing `exit_fallback` can be granted a slot after the
    /// exit, beyond the handoff. Exists only so `tests/loom_pacer.rs` can show the model
    /// catches it, so it is built only with the `loom` feature (`just loom`). Never use it to
    /// pace anything.
    ///
    /// # Errors
    ///
    /// As [`reserve_fallback`](Self::reserve_fallback), never `Superseded`.
    #[cfg(feature = "loom")]
    pub fn reserve_fallback_unvalidated(&self, now: Nanos) -> Result<Nanos, Refusal> {
        let (pacer, interval) = self.fallback_pacer(self.epoch(), 1.0)?;
        Ok(pacer.reserve_with_interval(now, interval))
    }

    /// The fallback pacer and scaled interval if `epoch` may grant.
    fn fallback_pacer(&self, epoch: Epoch, multiplier: f64) -> Result<(&LocalPacer, Nanos), Refusal> {
        if !epoch.is_fallback() {
            return Err(Refusal::NotInFallback);
        }
        let pacer = self.pacer.as_ref().ok_or(Refusal::Halted)?;
        Ok((pacer, scale_interval(pacer.interval(), multiplier)))
    }

    /// Advances the epoch by one if its parity is `from_fallback`; returns the new epoch, or
    /// `None` if the switch was already in the other mode.
    fn switch(&self, from_fallback: bool) -> Option<Epoch> {
        let mut current = self.state.load(Ordering::Acquire);
        loop {
            if Epoch(current).is_fallback() != from_fallback {
                return None;
            }
            match self
                .state
                .compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(Epoch(current + 1)),
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn policies_pick_their_interval() {
        assert_eq!(FallbackPolicy::FailOpen.interval(7.0), Some(142_857_143));
        assert_eq!(FallbackPolicy::Divided { cap: 2 }.interval(7.0), Some(428_571_429));
        assert_eq!(FallbackPolicy::FailClosed.interval(7.0), None);
    }

    #[test]
    fn epochs_alternate() {
        let s = FallbackSwitch::new(FallbackPolicy::FailOpen, 100.0);
        assert_eq!(s.epoch(), Epoch(0));
        assert_eq!(s.exit_fallback(), None);
        assert!(s.enter_fallback());
        assert!(s.in_fallback());
        assert_eq!(s.epoch(), Epoch(1));
        assert!(s.is_current(Epoch(1)) && !s.is_current(Epoch(0)));
        assert_eq!(s.reserve_fallback_scaled(5, 2.0), Ok(5));
        assert_eq!(s.exit_fallback(), Some(5 + 20_000_000));
        assert_eq!(s.epoch(), Epoch(2));
        // Re-entering resumes the same pacer: no slot before one already granted.
        assert!(s.enter_fallback());
        assert_eq!(s.reserve_fallback(0), Ok(20_000_005));
    }

    #[test]
    fn fail_closed_halts() {
        let s = FallbackSwitch::new(FallbackPolicy::FailClosed, 7.0);
        assert_eq!(s.fallback_interval(), None);
        assert!(s.enter_fallback());
        assert_eq!(s.reserve_fallback(0), Err(Refusal::Halted));
        assert_eq!(s.exit_fallback(), Some(0));
    }

    #[test]
    fn stale_epoch_is_superseded() {
        let s = FallbackSwitch::new(FallbackPolicy::FailOpen, 100.0);
        s.enter_fallback();
        let e = s.epoch();
        s.exit_fallback();
        assert!(!s.is_current(e));
    }
}
