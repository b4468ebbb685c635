//! The backoff reference state machine: the design records' 429/503 multiplier and shared
//! clean streak.
//!
//! Rate pressure **throttles, never halts**: a 429 or 503 multiplies the pacing interval by
//! `factor` up to `cap`, and `decay_after` consecutive clean responses divide it back towards
//! 1.0. The multiplier is bounded by the finite `cap`, so the pace slows to at worst
//! `rate / cap` and never stops.
//!
//! For a global rate ceiling the multiplier and the streak are **global** (one per destination,
//! stored beside `next_allowed_at`): N processes each holding their own multiplier write
//! conflicting paces, and N processes each counting their own streak cross the decay threshold
//! together, N steps at once (the records say "N times faster"; `tests/suite/stories.rs` story 3
//! measures clustered steps at the same average rate, and a later recovery). The simulator's
//! processes and stores run this machine on whatever state they hold, and the
//! backoff-coherence checker replays the globally ordered responses through it as the oracle,
//! so it is deterministic: see [`Backoff`].

use serde::{Deserialize, Serialize};

use super::{Nanos, scale_interval};

/// A response, as the backoff machine classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A clean response: the destination served the request without signalling pressure.
    /// Counts towards the clean streak.
    Ok,
    /// HTTP 429 Too Many Requests: rate pressure; backs off.
    TooManyRequests,
    /// HTTP 503 Service Unavailable: rate pressure; backs off.
    Unavailable,
    /// Any other failure (another 5xx, a timeout, a reset connection). Not clean, so it
    /// **resets the clean streak** (decay needs `decay_after` *consecutive* clean responses),
    /// but it is not rate pressure, so it **leaves the multiplier unchanged**.
    Error,
}

impl Status {
    /// Classifies an HTTP status code: 429 and 503 are rate pressure (the records' "429/503
    /// semantics" of #644), any other code below 500 (including 4xx such as 404: the
    /// destination answered normally) is clean, and any other 5xx (or a code above 599) is an
    /// [`Error`](Status::Error). Which codes are clean and which reset the streak is pacesim's
    /// reading: the records name only 429 and 503.
    pub fn from_http(code: u16) -> Self {
        match code {
            429 => Status::TooManyRequests,
            503 => Status::Unavailable,
            0..=499 => Status::Ok,
            _ => Status::Error,
        }
    }

    /// Whether this response counts towards the clean streak.
    pub fn is_clean(self) -> bool {
        self == Status::Ok
    }

    /// Whether this response backs the pace off (429 or 503).
    pub fn is_rate_pressure(self) -> bool {
        matches!(self, Status::TooManyRequests | Status::Unavailable)
    }
}

/// An invalid backoff configuration or restored state.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum BackoffConfigError {
    /// `factor` must be finite and greater than 1.0.
    #[error("backoff factor must be finite and > 1.0, got {0}")]
    Factor(f64),
    /// `cap` must be finite and at least 1.0.
    #[error("backoff cap must be finite and >= 1.0, got {0}")]
    Cap(f64),
    /// `decay_after` must be at least 1.
    #[error("backoff decay_after must be at least 1 clean response, got 0")]
    DecayAfter,
    /// A restored multiplier must lie in `[1.0, cap]`.
    #[error("backoff multiplier must lie in [1.0, {cap}], got {multiplier}")]
    Multiplier {
        /// The rejected multiplier.
        multiplier: f64,
        /// The configured cap.
        cap: f64,
    },
    /// A restored clean streak must be below `decay_after` (it resets on reaching it).
    #[error("clean streak must be below decay_after = {decay_after}, got {clean_streak}")]
    Streak {
        /// The rejected streak.
        clean_streak: u32,
        /// The configured threshold.
        decay_after: u32,
    },
}

/// The backoff schedule: multiply by `factor` on rate pressure up to `cap`; divide by
/// `factor` (down to 1.0) after `decay_after` consecutive clean responses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    // invariant: finite and > 1.0.
    factor: f64,
    // invariant: finite and >= 1.0.
    cap: f64,
    // invariant: >= 1.
    decay_after: u32,
}

crate::exact_hash!(BackoffConfig {
    factor: bits,
    cap: bits,
    decay_after
});

impl BackoffConfig {
    /// Validates and builds a schedule.
    ///
    /// # Errors
    ///
    /// [`BackoffConfigError::Factor`], [`Cap`](BackoffConfigError::Cap) or
    /// [`DecayAfter`](BackoffConfigError::DecayAfter) if the value is out of range.
    pub fn new(factor: f64, cap: f64, decay_after: u32) -> Result<Self, BackoffConfigError> {
        if !(factor.is_finite() && factor > 1.0) {
            return Err(BackoffConfigError::Factor(factor));
        }
        if !(cap.is_finite() && cap >= 1.0) {
            return Err(BackoffConfigError::Cap(cap));
        }
        if decay_after == 0 {
            return Err(BackoffConfigError::DecayAfter);
        }
        Ok(Self {
            factor,
            cap,
            decay_after,
        })
    }

    /// The multiplication factor per backoff (and divisor per decay).
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// The largest multiplier.
    pub fn cap(&self) -> f64 {
        self.cap
    }

    /// The number of consecutive clean responses that decays the multiplier one step.
    pub fn decay_after(&self) -> u32 {
        self.decay_after
    }
}

impl Default for BackoffConfig {
    /// `factor = 2.0`, `cap = 8.0`, `decay_after = 10`: all three are pacesim's choices. The
    /// records say only that 429/503 throttle the pass and that a clean streak decays it
    /// (#644's schedule, whose values they do not give).
    fn default() -> Self {
        Self {
            factor: 2.0,
            cap: 8.0,
            decay_after: 10,
        }
    }
}

/// A change of the backoff multiplier, reported by [`Backoff::on_response`], [`Backoff::back_off`]
/// and [`Backoff::decay`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The multiplier before the response.
    pub from: f64,
    /// The multiplier after the response.
    pub to: f64,
    /// The response that caused it: [`Status::TooManyRequests`] or [`Status::Unavailable`]
    /// for a backoff (`to > from`), [`Status::Ok`] for a decay (`to < from`).
    pub cause: Status,
}

crate::exact_hash!(Change {
    from: bits,
    to: bits,
    cause
});

/// The backoff state: the multiplier in force and the clean streak, with the schedule that
/// drives them.
///
/// # Determinism
///
/// The multiplier stays an `f64` but is only ever changed by one multiplication or division
/// by `factor` followed by a clamp to `[1.0, cap]`. IEEE-754 multiplication and division are
/// correctly rounded, so the same responses in the same order yield bit-identical multipliers
/// on every machine, which is what lets the checker use this machine as its oracle with `==`.
/// With a power-of-two factor (the default 2.0) every step is also exact, so backing off and
/// decaying the same number of steps returns exactly to the same value.
///
/// ```
/// use pacesim::pacer::{Backoff, BackoffConfig, Status};
/// let mut b = Backoff::new(BackoffConfig::new(2.0, 8.0, 2).unwrap());
/// for _ in 0..5 {
///     b.on_response(Status::TooManyRequests);
/// }
/// assert_eq!(b.multiplier(), 8.0); // capped: throttled, never halted
/// assert_eq!(b.on_response(Status::Ok), None);
/// let change = b.on_response(Status::Ok).unwrap();
/// assert_eq!((change.from, change.to), (8.0, 4.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    config: BackoffConfig,
    // invariant: 1.0 <= multiplier <= config.cap, and only ever set to
    // clamp(multiplier * factor) or clamp(multiplier / factor).
    multiplier: f64,
    // invariant: clean_streak < config.decay_after (it resets on reaching it); reset by
    // any non-clean response.
    clean_streak: u32,
}

crate::exact_hash!(Backoff {
    config,
    multiplier: bits,
    clean_streak
});

impl Backoff {
    /// The rested state: multiplier 1.0, clean streak 0.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            multiplier: 1.0,
            clean_streak: 0,
        }
    }

    /// Restores a state previously read from [`multiplier`](Self::multiplier) and
    /// [`clean_streak`](Self::clean_streak) (for example from a shared store's row).
    ///
    /// # Errors
    ///
    /// [`BackoffConfigError::Multiplier`] if `multiplier` is outside `[1.0, cap]`,
    /// [`BackoffConfigError::Streak`] if `clean_streak >= decay_after`.
    pub fn restore(config: BackoffConfig, multiplier: f64, clean_streak: u32) -> Result<Self, BackoffConfigError> {
        if !(1.0..=config.cap).contains(&multiplier) {
            return Err(BackoffConfigError::Multiplier {
                multiplier,
                cap: config.cap,
            });
        }
        if clean_streak >= config.decay_after {
            return Err(BackoffConfigError::Streak {
                clean_streak,
                decay_after: config.decay_after,
            });
        }
        Ok(Self {
            config,
            multiplier,
            clean_streak,
        })
    }

    /// The schedule.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// The multiplier in force, in `[1.0, cap]`.
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// Consecutive clean responses since the last backoff, decay or error.
    pub fn clean_streak(&self) -> u32 {
        self.clean_streak
    }

    /// `interval` scaled by the multiplier in force (see [`scale_interval`]).
    pub fn scale(&self, interval: Nanos) -> Nanos {
        scale_interval(interval, self.multiplier)
    }

    /// Applies one response; returns the multiplier change it caused, if any.
    ///
    /// 1. 429 or 503: [`back_off`](Self::back_off): `multiplier = min(cap, multiplier * factor)`,
    ///    streak reset to 0.
    /// 2. Clean: streak + 1; on reaching `decay_after`, [`decay`](Self::decay):
    ///    `multiplier = max(1.0, multiplier / factor)` and streak reset to 0.
    /// 3. Other error: streak reset to 0, multiplier unchanged.
    ///
    /// A step that leaves the multiplier equal (a 429 at the cap, a decay at 1.0) returns
    /// `None`; the streak still changes as above.
    pub fn on_response(&mut self, status: Status) -> Option<Change> {
        match status {
            Status::TooManyRequests | Status::Unavailable => self.back_off(status),
            Status::Ok => {
                self.clean_streak += 1;
                if self.clean_streak >= self.config.decay_after {
                    self.decay()
                } else {
                    None
                }
            }
            Status::Error => {
                self.clean_streak = 0;
                None
            }
        }
    }

    /// One backoff step, as a 429 or 503 takes it: `multiplier = min(cap, multiplier * factor)`
    /// and the streak reset to 0. `cause` is the rate-pressure response
    /// ([`Status::TooManyRequests`] or [`Status::Unavailable`]) reported in the [`Change`].
    ///
    /// For a holder that applies only the multiplier half of the schedule (the streak is
    /// counted elsewhere). Returns `None` at the cap.
    pub fn back_off(&mut self, cause: Status) -> Option<Change> {
        debug_assert!(cause.is_rate_pressure(), "back_off caused by {cause:?}");
        let from = self.multiplier;
        self.clean_streak = 0;
        self.multiplier = (from * self.config.factor).min(self.config.cap);
        self.changed(from, cause)
    }

    /// One decay step, as the `decay_after`-th consecutive clean response takes it:
    /// `multiplier = max(1.0, multiplier / factor)` and the streak reset to 0, whatever it was.
    ///
    /// For a holder told that a streak counted elsewhere reached `decay_after`. Returns `None`
    /// at 1.0; a returned [`Change`] has cause [`Status::Ok`].
    pub fn decay(&mut self) -> Option<Change> {
        let from = self.multiplier;
        self.clean_streak = 0;
        self.multiplier = (from / self.config.factor).max(1.0);
        self.changed(from, Status::Ok)
    }

    fn changed(&self, from: f64, cause: Status) -> Option<Change> {
        (self.multiplier != from).then_some(Change {
            from,
            to: self.multiplier,
            cause,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(factor: f64, cap: f64, k: u32) -> BackoffConfig {
        BackoffConfig::new(factor, cap, k).unwrap()
    }

    #[test]
    fn classifies_http_codes() {
        assert_eq!(Status::from_http(200), Status::Ok);
        assert_eq!(Status::from_http(404), Status::Ok);
        assert_eq!(Status::from_http(429), Status::TooManyRequests);
        assert_eq!(Status::from_http(503), Status::Unavailable);
        assert_eq!(Status::from_http(500), Status::Error);
        assert!(Status::Unavailable.is_rate_pressure() && !Status::Error.is_rate_pressure());
        assert!(Status::Ok.is_clean() && !Status::Error.is_clean());
    }

    #[test]
    fn backs_off_to_cap_and_decays_to_one() {
        let mut b = Backoff::new(cfg(2.0, 8.0, 3));
        let ups: Vec<_> = (0..4)
            .map(|_| b.on_response(Status::Unavailable).map(|c| c.to))
            .collect();
        assert_eq!(ups, [Some(2.0), Some(4.0), Some(8.0), None]);
        let mut downs = Vec::new();
        for _ in 0..12 {
            if let Some(c) = b.on_response(Status::Ok) {
                assert_eq!(c.cause, Status::Ok);
                downs.push((c.from, c.to));
            }
        }
        assert_eq!(downs, [(8.0, 4.0), (4.0, 2.0), (2.0, 1.0)]);
        assert_eq!(b.multiplier(), 1.0);
        assert_eq!(b.clean_streak(), 0);
    }

    #[test]
    fn pressure_and_errors_reset_the_streak() {
        let mut b = Backoff::restore(cfg(2.0, 8.0, 3), 4.0, 0).unwrap();
        b.on_response(Status::Ok);
        b.on_response(Status::Ok);
        assert_eq!(b.on_response(Status::Error), None);
        assert_eq!(b.clean_streak(), 0);
        b.on_response(Status::Ok);
        b.on_response(Status::Ok);
        assert_eq!(b.multiplier(), 4.0);
        assert_eq!(b.on_response(Status::Ok).map(|c| c.to), Some(2.0));
        b.on_response(Status::Ok);
        let c = b.on_response(Status::TooManyRequests).unwrap();
        assert_eq!((c.from, c.to, c.cause), (2.0, 4.0, Status::TooManyRequests));
        assert_eq!(b.clean_streak(), 0);
    }

    #[test]
    fn cap_need_not_be_a_power_of_the_factor() {
        let mut b = Backoff::new(cfg(2.0, 6.0, 1));
        for _ in 0..3 {
            b.on_response(Status::TooManyRequests);
        }
        assert_eq!(b.multiplier(), 6.0);
        let tos: Vec<_> = (0..4).map(|_| b.on_response(Status::Ok).map(|c| c.to)).collect();
        assert_eq!(tos, [Some(3.0), Some(1.5), Some(1.0), None]);
        assert_eq!(b.scale(10), 10);
    }

    #[test]
    fn back_off_is_the_pressure_step_without_the_response() {
        let mut b = Backoff::restore(cfg(2.0, 6.0, 3), 2.0, 2).unwrap();
        let c = b.back_off(Status::Unavailable).unwrap();
        assert_eq!((c.from, c.to, c.cause), (2.0, 4.0, Status::Unavailable));
        assert_eq!(b.clean_streak(), 0);
        assert_eq!(b.back_off(Status::TooManyRequests).map(|c| c.to), Some(6.0));
        assert_eq!(b.back_off(Status::TooManyRequests), None, "held at the cap");
        assert_eq!(b.multiplier(), 6.0);
        // the same step as a 429 through on_response, streak and all
        let (mut x, mut y) = (
            Backoff::restore(cfg(2.0, 8.0, 3), 2.0, 1).unwrap(),
            Backoff::restore(cfg(2.0, 8.0, 3), 2.0, 1).unwrap(),
        );
        assert_eq!(
            x.back_off(Status::TooManyRequests),
            y.on_response(Status::TooManyRequests)
        );
        assert_eq!(x, y);
    }

    #[test]
    fn decay_is_the_streak_step_without_the_streak() {
        // from any streak, not only decay_after - 1
        let mut b = Backoff::restore(cfg(2.0, 6.0, 3), 6.0, 1).unwrap();
        let c = b.decay().unwrap();
        assert_eq!((c.from, c.to, c.cause), (6.0, 3.0, Status::Ok));
        assert_eq!(b.clean_streak(), 0);
        assert_eq!(b.decay().map(|c| c.to), Some(1.5));
        assert_eq!(b.decay().map(|c| c.to), Some(1.0));
        assert_eq!(b.decay(), None, "held at 1.0");
        assert_eq!(b.multiplier(), 1.0);
        // the same step as the decay_after-th clean response through on_response
        let mut x = Backoff::restore(cfg(2.0, 8.0, 3), 8.0, 0).unwrap();
        let mut y = Backoff::restore(cfg(2.0, 8.0, 3), 8.0, 2).unwrap();
        assert_eq!(x.decay(), y.on_response(Status::Ok));
        assert_eq!(x, y);
    }

    #[test]
    fn rejects_bad_config_and_state() {
        assert_eq!(BackoffConfig::new(1.0, 8.0, 1), Err(BackoffConfigError::Factor(1.0)));
        assert!(BackoffConfig::new(2.0, f64::INFINITY, 1).is_err());
        assert_eq!(BackoffConfig::new(2.0, 8.0, 0), Err(BackoffConfigError::DecayAfter));
        assert!(Backoff::restore(cfg(2.0, 8.0, 3), 16.0, 0).is_err());
        assert!(Backoff::restore(cfg(2.0, 8.0, 3), f64::NAN, 0).is_err());
        assert!(Backoff::restore(cfg(2.0, 8.0, 3), 2.0, 3).is_err());
        assert_eq!(BackoffConfig::default(), cfg(2.0, 8.0, 10));
    }
}
