//! Latency and duration distributions, as they appear in scenario files.
//!
//! ```toml
//! latency = { dist = "constant", value = "1ms" }
//! latency = { dist = "uniform", low = "1ms", high = "3ms" }
//! latency = { dist = "exponential", mean = "2ms" }
//! latency = { dist = "lognormal", median = "0.6ms", sigma = 0.5 }
//! ```

use crate::rng::Rng;
use crate::time::Nanos;
use rand::RngExt;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

/// The largest lognormal `sigma`: beyond it a draw spans more than 17 orders of magnitude
/// around the median, which no latency does.
pub const MAX_SIGMA: f64 = 10.0;

/// The largest draw, in nanoseconds (about 31.7 years): larger draws saturate to it.
pub const MAX_DRAW: u64 = 1_000_000_000_000_000_000;

/// `v.round() as u64` for `0 <= v < 2^63`, exactly (halves away from zero), without the call
/// to the C library's `round` a target without SSE4.1 makes: the draws' hot path. Exact because
/// `v - trunc(v)` is always representable, and a `v` from 2^52 up is already whole.
#[inline]
fn round_non_negative(v: f64) -> u64 {
    // (through i64: one instruction, where `as u64` branches on the sign bit; `v < 2^63`)
    let whole = v as i64; // truncates
    (if v - whole as f64 >= 0.5 { whole + 1 } else { whole }) as u64
}

/// A distribution of non-negative durations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum Dist {
    /// Always `value`.
    Constant {
        /// The value.
        value: Nanos,
    },
    /// Uniform on `[low, high]`.
    Uniform {
        /// Lower bound.
        low: Nanos,
        /// Upper bound.
        high: Nanos,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean.
        mean: Nanos,
    },
    /// Log-normal with the given median (`exp(mu)`) and shape `sigma`.
    Lognormal {
        /// Median.
        median: Nanos,
        /// Shape parameter (standard deviation of the underlying normal).
        sigma: f64,
    },
}

/// The inline TOML a scenario file would use, ready to paste (`{ dist = "lognormal", median =
/// "165us", sigma = 0.34 }`); log-normal medians are rounded to the microsecond.
impl std::fmt::Display for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Dist::Constant { value } => write!(f, r#"{{ dist = "constant", value = "{value}" }}"#),
            Dist::Uniform { low, high } => write!(f, r#"{{ dist = "uniform", low = "{low}", high = "{high}" }}"#),
            Dist::Exponential { mean } => write!(f, r#"{{ dist = "exponential", mean = "{mean}" }}"#),
            Dist::Lognormal { median, sigma } => {
                let us = Nanos(median.0.div_ceil(1_000) * 1_000);
                write!(f, r#"{{ dist = "lognormal", median = "{us}", sigma = {sigma:.2} }}"#)
            }
        }
    }
}

impl Default for Dist {
    fn default() -> Self {
        Dist::Constant { value: Nanos::ZERO }
    }
}

impl Dist {
    /// A constant distribution.
    pub const fn constant(value: Nanos) -> Dist {
        Dist::Constant { value }
    }

    /// Check the parameters; `Err` names the offending parameter.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Dist::Uniform { low, high } if low > high => Err(format!("uniform: low ({low}) is above high ({high})")),
            Dist::Lognormal { sigma, .. } if !(sigma.is_finite() && (0.0..=MAX_SIGMA).contains(sigma)) => Err(format!(
                "lognormal: sigma must be a number in [0, {MAX_SIGMA}], got {}",
                crate::scenario::short(*sigma)
            )),
            Dist::Lognormal { median, .. } if median.0 == 0 => Err("lognormal: median must be above 0".into()),
            _ => Ok(()),
        }
    }

    /// The mean, in nanoseconds (used by reports and the calibration fit).
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Constant { value } => value.0 as f64,
            Dist::Uniform { low, high } => (low.0 as f64 + high.0 as f64) / 2.0,
            Dist::Exponential { mean } => mean.0 as f64,
            Dist::Lognormal { median, sigma } => median.0 as f64 * (sigma * sigma / 2.0).exp(),
        }
    }

    /// True when every draw is zero (lets the engine skip scheduling a hop).
    pub fn is_zero(&self) -> bool {
        matches!(self, Dist::Constant { value } if value.0 == 0)
    }

    /// Draw one value. Constant distributions consume no randomness.
    // (inlined: a constant is then a load, and a log-normal draw a call to its own small
    // function, not one through a frame built for every kind)
    #[inline(always)]
    pub fn sample(&self, rng: &mut Rng) -> Nanos {
        match *self {
            Dist::Constant { value } => value,
            Dist::Lognormal { median, sigma } => lognormal(median, sigma, rng),
            _ => self.sample_other(rng),
        }
    }

    /// [`Dist::sample`] for the kinds drawn rarely in hot paths.
    #[inline(never)]
    fn sample_other(&self, rng: &mut Rng) -> Nanos {
        match *self {
            Dist::Constant { value } => value,
            Dist::Uniform { low, high } => {
                if low == high {
                    low
                } else {
                    Nanos(rng.random_range(low.0..=high.0))
                }
            }
            Dist::Exponential { mean } => {
                if mean.0 == 0 {
                    return Nanos::ZERO;
                }
                let e = Exp::new(1.0 / mean.0 as f64).expect("validated exponential");
                Nanos(e.sample(rng).round() as u64)
            }
            Dist::Lognormal { median, sigma } => lognormal(median, sigma, rng),
        }
    }
}

/// One log-normal draw: `median` x e^(`sigma` z), z standard normal: LogNormal(ln median, sigma)
/// without a logarithm per draw (the same single normal draw).
#[inline(never)]
fn lognormal(median: Nanos, sigma: f64, rng: &mut Rng) -> Nanos {
    let z: f64 = rand_distr::StandardNormal.sample(rng);
    let v = median.0 as f64 * (sigma * z).exp();
    // saturate: a draw beyond the clock's range (or NaN) is the range's end, never zero; `v`
    // is never negative (a median is not, and `exp` is positive)
    Nanos(if v < MAX_DRAW as f64 {
        round_non_negative(v)
    } else {
        MAX_DRAW
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Entity, stream};

    /// The fast rounding is `f64::round` on every value the draws can reach, halves and the
    /// neighbours of halves included.
    #[test]
    fn fast_rounding_is_round() {
        use rand::RngExt;
        let mut rng = stream(11, Entity::Store);
        let mut cases: Vec<f64> = vec![
            0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            4503599627370495.5,
            4503599627370496.0,
            9.0e18,
        ];
        for k in [0u64, 1, 2, 3, 1 << 20, (1 << 52) - 1, 1 << 52, 1 << 53] {
            let h = k as f64 + 0.5;
            cases.extend([h, f64::from_bits(h.to_bits() - 1), f64::from_bits(h.to_bits() + 1)]);
        }
        cases.extend((0..100_000).map(|_| rng.random::<f64>() * 1e12));
        cases.extend((0..100_000).map(|_| rng.random::<f64>() * 10.0));
        for v in cases {
            assert_eq!(round_non_negative(v), v.round() as u64, "{v:?}");
        }
    }

    #[test]
    fn lognormal_median_is_close() {
        let d = Dist::Lognormal {
            median: Nanos(600_000),
            sigma: 0.5,
        };
        let mut rng = stream(7, Entity::Store);
        let mut v: Vec<u64> = (0..20001).map(|_| d.sample(&mut rng).0).collect();
        v.sort_unstable();
        let med = v[10000] as f64;
        assert!((med - 600_000.0).abs() < 20_000.0, "median {med}");
    }

    #[test]
    fn uniform_and_exponential_bounds() {
        let mut rng = stream(7, Entity::Store);
        let u = Dist::Uniform {
            low: Nanos(10),
            high: Nanos(20),
        };
        assert!((0..1000).all(|_| (10..=20).contains(&u.sample(&mut rng).0)));
        let e = Dist::Exponential { mean: Nanos(1_000_000) };
        let mean = (0..20000).map(|_| e.sample(&mut rng).0 as f64).sum::<f64>() / 20000.0;
        assert!((mean - 1e6).abs() < 5e4, "mean {mean}");
        assert!(
            Dist::Uniform {
                low: Nanos(2),
                high: Nanos(1)
            }
            .validate()
            .is_err()
        );
    }
}
