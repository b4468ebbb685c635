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
pub(crate) const MAX_SIGMA: f64 = 10.0;

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

/// Every parameter exact, `sigma` by its bits.
impl std::hash::Hash for Dist {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Dist::Constant { value } => value.hash(h),
            Dist::Uniform { low, high } => (low, high).hash(h),
            Dist::Exponential { mean } => mean.hash(h),
            Dist::Lognormal { median, sigma } => (median, sigma.to_bits()).hash(h),
        }
    }
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
                crate::time::short(*sigma)
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
    pub(crate) fn is_zero(&self) -> bool {
        matches!(self, Dist::Constant { value } if value.0 == 0)
    }

    /// Draw one value. Constant distributions consume no randomness.
    // (inlined: a constant is then a load, and a log-normal draw a call to its own small
    // function, not one through a frame built for every kind)
    #[inline(always)]
    pub fn sample(&self, rng: &mut Rng) -> Nanos {
        match *self {
            Dist::Constant { value } => value,
            _ if crate::choice::active() => self.sample_tied(rng),
            _ => self.sample_untied(rng),
        }
    }

    /// [`Dist::sample`] for a caller that knows no choice source is entered (so no draw can
    /// be steered): it skips asking the thread's source on every draw.
    #[inline(always)]
    pub fn sample_untied(&self, rng: &mut Rng) -> Nanos {
        match *self {
            Dist::Constant { value } => value,
            Dist::Lognormal { median, sigma } => lognormal(median, sigma, rng),
            _ => self.sample_other(rng),
        }
    }

    /// A draw from a stream tied to a choice source: steered, the quantile the explorer
    /// chooses; else (recorded or replayed) the ordinary draw.
    #[cold]
    fn sample_tied(&self, rng: &mut Rng) -> Nanos {
        match crate::choice::with(|s| s.value(crate::choice::pid())) {
            Some((q, z)) => self.quantile_remembered(q, z),
            None => match *self {
                Dist::Lognormal { median, sigma } => lognormal(median, sigma, rng),
                _ => self.sample_other(rng),
            },
        }
    }

    /// The value at quantile `q` (`z`: the standard normal's quantile at `q`, which a
    /// log-normal reads).
    pub fn quantile(&self, q: f64, z: f64) -> Nanos {
        let ns = |v: f64| {
            Nanos(if v >= MAX_DRAW as f64 {
                MAX_DRAW
            } else {
                round_non_negative(v.max(0.0))
            })
        };
        match *self {
            Dist::Constant { value } => value,
            Dist::Uniform { low, high } => ns(low.0 as f64 + q * (high.0 - low.0) as f64),
            Dist::Exponential { mean } => ns(-(mean.0 as f64) * (1.0 - q).ln()),
            Dist::Lognormal { median, sigma } => ns(median.0 as f64 * exp(sigma * z)),
        }
    }

    /// [`Dist::quantile`], remembered: an explorer's runs draw the same few quantiles of the
    /// same few distributions again and again (a log-normal's `exp` was 5% of a search's
    /// profile). The same value [`Dist::quantile`] gives, from a small cache of the thread's.
    fn quantile_remembered(&self, q: f64, z: f64) -> Nanos {
        // (a distribution and a quantile, by their bits; the value)
        type Entry = ([u64; 4], Nanos);
        const WAYS: usize = 8;
        thread_local! {
            static MEMO: std::cell::RefCell<([Option<Entry>; WAYS], usize)> =
                const { std::cell::RefCell::new(([None; WAYS], 0)) };
        }
        let key = match *self {
            Dist::Constant { value } => return value,
            Dist::Uniform { low, high } => [0, low.0, high.0, q.to_bits()],
            Dist::Exponential { mean } => [1, mean.0, 0, q.to_bits()],
            Dist::Lognormal { median, sigma } => [2, median.0, sigma.to_bits(), z.to_bits()],
        };
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if let Some((_, v)) = m.0.iter().flatten().find(|(k, _)| *k == key) {
                return *v;
            }
            let v = self.quantile(q, z);
            let next = m.1;
            m.0[next] = Some((key, v));
            m.1 = (next + 1) % WAYS;
            v
        })
    }

    /// The median: what a distribution an explorer does not vary is held at.
    pub fn median(&self) -> Nanos {
        self.quantile(0.5, 0.0)
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
    let v = median.0 as f64 * exp(sigma * z);
    // saturate: a draw beyond the clock's range (or NaN) is the range's end, never zero; `v`
    // is never negative (a median is not, and `exp` is positive)
    Nanos(if v < MAX_DRAW as f64 {
        round_non_negative(v)
    } else {
        MAX_DRAW
    })
}

/// `e^x`, within one unit in the last place of the correctly rounded value, in pure Rust and
/// inline: the draws' hot path. The C library's `exp` costs a call through the PLT and its
/// error handling, about 52 instructions in all (by callgrind, three draws a fetch on R1); this
/// is about 40, inline, and the same on every platform, where the C library's results may
/// differ from one libm to another.
///
/// Method (Tang's table-driven reduction, as in glibc and ARM's optimized-routines, with a
/// smaller table): `x = k ln2/32 + r` with `k` the nearest integer to `32 x / ln2`, so
/// `|r| <= ln2/64` (a little more with the rounding of `32 x / ln2`); `e^x = 2^(k/32) e^r`.
/// `2^(k/32)` is `2^(k >> 5)`, put straight into the exponent bits, times `2^(j/32)`,
/// `j = k & 31`, from [`EXP_TABLE`] (the nearest double and the rest of its exact value);
/// `e^r - 1` is its Taylor series to `r^6` (the remainder, `r^7 / 7!`, is below `4e-18`).
/// `ln2/32` is split in two so that `k ln2/32` is exact. Outside `|x| < 700` (never reached by
/// a draw: `|sigma z|` stays below 150) and for NaN, the C library's `exp` answers.
#[inline(always)]
fn exp(x: f64) -> f64 {
    // (one comparison, false for NaN too)
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(x.abs() < 700.0) {
        return x.exp();
    }
    // 1.5 x 2^52: adding it rounds to an integer, which then sits in the low mantissa bits
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const INV_LN2_32: f64 = 32.0 / std::f64::consts::LN_2;
    // ln2 = LN2_HI + LN2_LO, LN2_HI with its low 32 bits zero (fdlibm's split), over 32
    const LN2_32_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000) / 32.0;
    const LN2_32_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76) / 32.0;
    let kd = x * INV_LN2_32 + SHIFT;
    let k = kd.to_bits().wrapping_sub(SHIFT.to_bits()) as i64;
    let kf = kd - SHIFT;
    let r = (x - kf * LN2_32_HI) - kf * LN2_32_LO;
    let (bits, rest) = EXP_TABLE[(k & 31) as usize];
    // e^r - 1, by Horner
    let q = r + r * r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0)))));
    // 2^(k/32): 2^(j/32)'s bits with k >> 5 added to the exponent (|k >> 5| <= 1010: normal)
    let scale = f64::from_bits(bits.wrapping_add(((k >> 5) as u64) << 52));
    scale + scale * (f64::from_bits(rest) + q)
}

/// `2^(j/32)` for `j` in `0..32`: the bits of the nearest double `d`, and of `(2^(j/32) - d) /
/// d` rounded to a double. Computed to 60 digits with Python's `decimal` (`Decimal(2) **
/// (Decimal(j) / 32)`; a test checks each against `exp2`).
const EXP_TABLE: [(u64, u64); 32] = [
    (0x3ff0000000000000, 0x0000000000000000),
    (0x3ff059b0d3158574, 0x3c8cd2523567f613),
    (0x3ff0b5586cf9890f, 0x3c979aa65d837b6d),
    (0x3ff11301d0125b51, 0xbc9556522a2fbd0e),
    (0x3ff172b83c7d517b, 0xbc801b15eaa59348),
    (0x3ff1d4873168b9aa, 0x3c9aecf73e3a2f60),
    (0x3ff2387a6e756238, 0x3c968efde3a8a894),
    (0x3ff29e9df51fdee1, 0x3c82f7e16d09ab31),
    (0x3ff306fe0a31b715, 0x3c834d754db0abb6),
    (0x3ff371a7373aa9cb, 0xbc924aedcc4b5068),
    (0x3ff3dea64c123422, 0x3c859f48a72a4c6d),
    (0x3ff44e086061892d, 0x3c4363ed60c2ac11),
    (0x3ff4bfdad5362a27, 0x3c7690cebb7aafb0),
    (0x3ff5342b569d4f82, 0xbc78dec6bd0f385f),
    (0x3ff5ab07dd485429, 0x3c9063e1e21c5409),
    (0x3ff6247eb03a5585, 0xbc8c33c53bef4da8),
    (0x3ff6a09e667f3bcd, 0xbc93b3efbf5e2228),
    (0x3ff71f75e8ec5f74, 0xbc781f647e5a3ecf),
    (0x3ff7a11473eb0187, 0xbc7b32dcb94da51d),
    (0x3ff82589994cce13, 0xbc9369b6f13b3734),
    (0x3ff8ace5422aa0db, 0x3c8db72fc1f0eab4),
    (0x3ff93737b0cdc5e5, 0xbc5da9b88b6c1e29),
    (0x3ff9c49182a3f090, 0x3c71affc2b91ce27),
    (0x3ffa5503b23e255d, 0xbc91bbd1d3bcbb15),
    (0x3ffae89f995ad3ad, 0x3c8c1a7792cb3387),
    (0x3ffb7f76f2fb5e47, 0xbc68d6f438ad9334),
    (0x3ffc199bdd85529c, 0x3c736eae30af0cb3),
    (0x3ffcb720dcef9069, 0x3c676b2c6c921968),
    (0x3ffd5818dcfba487, 0x3c74a385a63d07a7),
    (0x3ffdfc97337b9b5f, 0xbc82d52107b43e1f),
    (0x3ffea4afa2a490da, 0xbc8ff7128fd391f0),
    (0x3fff50765b6e4540, 0x3c8a64a931d185ee),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Entity, stream};

    /// Units in the last place between two positive doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// The remembered quantile is the computed one, for every kind, parameter and quantile,
    /// in an order that makes the cache forget and meet entries again (more than its ways).
    #[test]
    fn a_remembered_quantile_is_the_computed_one() {
        let dists = [
            Dist::Lognormal {
                median: Nanos(1_000_000),
                sigma: 0.5,
            },
            Dist::Lognormal {
                median: Nanos(1_000_000),
                sigma: 1.5,
            },
            Dist::Lognormal {
                median: Nanos(2_000_000),
                sigma: 0.5,
            },
            Dist::Uniform {
                low: Nanos(10),
                high: Nanos(1_000),
            },
            Dist::Uniform {
                low: Nanos(10),
                high: Nanos(2_000),
            },
            Dist::Exponential { mean: Nanos(5_000) },
            Dist::Exponential { mean: Nanos(7_000) },
            Dist::Constant { value: Nanos(3) },
        ];
        let qs = [0.01, 0.5, 0.99];
        for round in 0..3 {
            for (i, d) in dists.iter().enumerate() {
                for &q in &qs {
                    let z = crate::choice::probit(q);
                    assert_eq!(
                        d.quantile_remembered(q, z),
                        d.quantile(q, z),
                        "round {round}, {i}: {d:?} at {q}"
                    );
                }
            }
        }
    }

    /// Each table entry is `2^(j/32)`: its double within half an ulp of `exp2` (itself within
    /// one), and its rest smaller than half an ulp of 1.
    #[test]
    fn exp_table_is_two_to_the_j_over_32() {
        for (j, &(bits, rest)) in EXP_TABLE.iter().enumerate() {
            let d = f64::from_bits(bits);
            assert!(
                ulps(d, (j as f64 / 32.0).exp2()) <= 1,
                "entry {j}: {d} against {}",
                (j as f64 / 32.0).exp2()
            );
            assert!(f64::from_bits(rest).abs() <= f64::EPSILON / 2.0, "entry {j}'s rest");
        }
    }

    /// The inline `exp` is within one ulp of the C library's on the range draws reach and at
    /// its edges, nearly always equal to it, and hands NaN, infinities and huge arguments to it.
    #[test]
    fn inline_exp_matches_the_c_library() {
        let mut rng = stream(3, Entity::Store);
        let mut xs: Vec<f64> = (0..400_000).map(|_| (rng.random::<f64>() - 0.5) * 300.0).collect();
        xs.extend((0..400_000).map(|_| (rng.random::<f64>() - 0.5) * 4.0));
        xs.extend([
            0.0,
            -0.0,
            1.0,
            -1.0,
            1e-300,
            -1e-300,
            699.99,
            -699.99,
            std::f64::consts::LN_2,
        ]);
        xs.extend((-64..=64).map(|k| f64::from(k) * std::f64::consts::LN_2 / 32.0));
        let mut same = 0;
        for &x in &xs {
            let (a, b) = (exp(x), x.exp());
            assert!(ulps(a, b) <= 1, "exp({x:e}) = {a:e}, the C library says {b:e}");
            same += usize::from(a == b);
        }
        assert!(same * 100 >= xs.len() * 99, "only {same} of {} equal", xs.len());
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(800.0), f64::INFINITY);
        assert_eq!(exp(-800.0), (-800.0f64).exp());
    }

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
