//! Statistics across seeds: the mean of a headline figure with its Student-t confidence
//! interval, and the five-number spread a box plot draws.
//!
//! Each seed is one independent replication of a scenario, so for `n` seeds with sample mean
//! `x̄` and sample standard deviation `s` (divisor `n - 1`) the two-sided `level` interval is
//! `x̄ ± t(1 - (1 - level) / 2; n - 1) · s / √n`, with the quantile from statrs' `StudentsT`.
//! One seed has no interval; it is reported as such, never as a zero-width one.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level every report uses.
pub const LEVEL: f64 = 0.95;

/// The mean of a figure over seeds, with its confidence interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeanCi {
    /// Number of seeds (samples).
    pub n: usize,
    /// Sample mean.
    pub mean: f64,
    /// Sample standard deviation (divisor `n - 1`); `None` for one sample.
    pub std_dev: Option<f64>,
    /// Confidence level of the interval, e.g. 0.95.
    pub level: f64,
    /// Half-width of the interval, `t · s / √n`; `None` for one sample.
    pub half_width: Option<f64>,
    /// Lower end of the interval.
    pub lo: Option<f64>,
    /// Upper end of the interval.
    pub hi: Option<f64>,
}

/// The Student-t quantile `t(1 - (1 - level) / 2; df)` of a two-sided interval.
pub(crate) fn t_quantile(level: f64, df: f64) -> f64 {
    let t = StudentsT::new(0.0, 1.0, df).expect("degrees of freedom above 0");
    t.inverse_cdf(1.0 - (1.0 - level) / 2.0)
}

/// Mean and `level` confidence interval of `xs`; `None` when `xs` is empty.
pub fn mean_ci(xs: &[f64], level: f64) -> Option<MeanCi> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(MeanCi {
            n,
            mean,
            std_dev: None,
            level,
            half_width: None,
            lo: None,
            hi: None,
        });
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let half = if sd == 0.0 {
        0.0
    } else {
        t_quantile(level, (n - 1) as f64) * sd / (n as f64).sqrt()
    };
    Some(MeanCi {
        n,
        mean,
        std_dev: Some(sd),
        level,
        half_width: Some(half),
        lo: Some(mean - half),
        hi: Some(mean + half),
    })
}

/// The five numbers of a box plot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// First quartile.
    pub(crate) q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub(crate) q3: f64,
    /// Largest.
    pub max: f64,
}

/// Quantile `q` in `[0, 1]` of sorted data, linearly interpolated between order statistics
/// (Hyndman and Fan's type 7, the default of R and NumPy).
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The five-number spread of `xs`; `None` when empty.
pub fn spread(xs: &[f64]) -> Option<Spread> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some(Spread {
        min: v[0],
        q1: quantile_sorted(&v, 0.25),
        median: quantile_sorted(&v, 0.5),
        q3: quantile_sorted(&v, 0.75),
        max: v[v.len() - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn ci_matches_a_hand_computed_case() {
        // xs = 1..=5: mean 3, s^2 = (4+1+0+1+4)/4 = 2.5, s = 1.5811388,
        // s/sqrt(5) = 0.7071068; t(0.975; 4) = 2.7764451 (tables), so the half-width is
        // 2.7764451 * 0.7071068 = 1.9632432 and the interval [1.0367568, 4.9632432].
        let ci = mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95).unwrap();
        assert_eq!(ci.n, 5);
        assert!(close(ci.mean, 3.0, 1e-12));
        assert!(close(ci.std_dev.unwrap(), 1.581_138_8, 1e-6));
        assert!(close(t_quantile(0.95, 4.0), 2.776_445_1, 1e-6));
        assert!(close(ci.half_width.unwrap(), 1.963_243_2, 1e-6), "{ci:?}");
        assert!(close(ci.lo.unwrap(), 1.036_756_8, 1e-6));
        assert!(close(ci.hi.unwrap(), 4.963_243_2, 1e-6));
        // two samples 10, 12: s = sqrt(2), s/sqrt(2) = 1, t(0.975; 1) = 12.7062047
        let ci = mean_ci(&[10.0, 12.0], 0.95).unwrap();
        assert!(close(ci.half_width.unwrap(), 12.706_204_7, 1e-5), "{ci:?}");
    }

    #[test]
    fn degenerate_cases() {
        assert!(mean_ci(&[], 0.95).is_none());
        let one = mean_ci(&[7.0], 0.95).unwrap();
        assert_eq!((one.mean, one.half_width, one.lo), (7.0, None, None));
        let flat = mean_ci(&[2.0, 2.0, 2.0], 0.95).unwrap();
        assert_eq!(flat.half_width, Some(0.0));
    }

    #[test]
    fn spread_interpolates() {
        let s = spread(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.min, s.q1, s.median, s.q3, s.max), (1.0, 1.75, 2.5, 3.25, 4.0));
    }
}
