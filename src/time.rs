//! Virtual time: instants and durations as nanosecond newtypes, and human-readable durations.
//!
//! Simulated code never reads a wall clock. Every instant is a count of nanoseconds since the
//! run's origin on the *reference* timeline (the simulator's virtual time, or in live mode the
//! destination's clock). Clocks that disagree with the reference (a process's monotonic clock,
//! the store's `clock_timestamp()`) live in [`crate::clock`] and read *into* signed `i64`
//! nanoseconds of their own frame.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A span of time in nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

/// A point on the reference timeline, in nanoseconds since the run's origin.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Instant(pub u64);

impl Nanos {
    /// Zero duration.
    pub const ZERO: Nanos = Nanos(0);
    /// One second.
    pub(crate) const SECOND: Nanos = Nanos(1_000_000_000);
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    /// From (fractional) seconds, rounded to the nearest nanosecond; negatives clamp to zero.
    pub fn from_secs_f64(s: f64) -> Nanos {
        if s.is_finite() && s > 0.0 {
            Nanos((s * 1e9).round() as u64)
        } else {
            Nanos::ZERO
        }
    }
    /// As fractional seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// As fractional milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// The pacing interval of a rate in events per second (`1 s / rate`), rounded up so a
    /// pacer never runs faster than its rate.
    pub(crate) fn interval_of_rate(rate: f64) -> Nanos {
        Nanos((1e9 / rate).ceil() as u64)
    }
    /// Multiply by a non-negative factor (e.g. a backoff multiplier), rounding to nanoseconds.
    pub fn scale(self, factor: f64) -> Nanos {
        // (by 1, the usual multiplier, it is the identity: below 2^50 ns the round trip
        // through seconds is off by under a quarter of a nanosecond, so it rounds back; the
        // shortcut skips two divisions and a call to the C library's `round`)
        if factor == 1.0 && self.0 < 1 << 50 {
            return self;
        }
        Nanos::from_secs_f64(self.as_secs_f64() * factor)
    }
}

impl Instant {
    /// The run's origin.
    pub const ZERO: Instant = Instant(0);
    /// Seconds since the origin.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Duration since an earlier instant (zero if `earlier` is later).
    pub fn since(self, earlier: Instant) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Nanos> for Instant {
    type Output = Instant;
    fn add(self, d: Nanos) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Nanos> for Instant {
    fn add_assign(&mut self, d: Nanos) {
        *self = *self + d;
    }
}
impl Sub for Instant {
    type Output = Nanos;
    fn sub(self, o: Instant) -> Nanos {
        self.since(o)
    }
}
impl Add for Nanos {
    type Output = Nanos;
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(o.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n == 0 {
            write!(f, "0s")
        } else if n.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", n / 1_000_000_000)
        } else if n.is_multiple_of(1_000_000) {
            write!(f, "{}ms", n / 1_000_000)
        } else if n.is_multiple_of(1_000) {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

/// The longest duration a scenario may state: 10^18 ns, about 31.7 years. Virtual time is
/// counted in nanoseconds and clocks read into `i64`, so it stops at 2^63 ns (about 292
/// years); capped here, a run's duration, its fault times and the delays added to them stay
/// far inside that range instead of piling into its last instant.
pub(crate) const MAX_DURATION: Nanos = Nanos(1_000_000_000_000_000_000);

/// Parse a human-readable duration: `"0"`, `"250ns"`, `"12us"`, `"1.5ms"`, `"5s"`, `"2m"`, `"1h"`.
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Nanos::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!("duration `{s}` is negative: a duration is 0 or more"));
    }
    if let Some(i) = s.find(['e', 'E'])
        && s[..i].parse::<f64>().is_ok()
        && s[i + 1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
    {
        return Err(format!(
            "duration `{s}`: exponent notation is not accepted; write digits and a unit (ns, us, ms, s, m, h)"
        ));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration `{s}` needs a unit (ns, us, ms, s, m, h)"))?;
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("duration `{s}`: `{num}` is not a number"))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => return Err(format!("duration `{s}`: unknown unit `{other}` (ns, us, ms, s, m, h)")),
    };
    let ns = value * scale;
    if !ns.is_finite() || !(0.0..=MAX_DURATION.0 as f64).contains(&ns) {
        return Err(format!(
            "duration `{s}` is beyond what the virtual clock can represent: at most 1000000000000000000ns \
             (about 31.7 years; virtual time stops at 2^63 ns, about 292 years)"
        ));
    }
    Ok(Nanos(ns.round() as u64))
}

impl Serialize for Nanos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// The lowest rate a scenario may ask for, per second: its interval (`1 s / rate`, about 11.6
/// days) times any backoff multiplier must stay far inside the nanosecond clock's range.
pub const MIN_RATE: f64 = 1e-6;
/// The highest rate, per second: one request per nanosecond, the clock's resolution.
pub const MAX_RATE: f64 = 1e9;

/// Check that `rate` (per second, finite and above 0) has an interval the nanosecond clock
/// can express: `MIN_RATE..=MAX_RATE`.
pub(crate) fn rate_in_range(rate: f64) -> Result<(), String> {
    if (MIN_RATE..=MAX_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(format!(
            "must be between {MIN_RATE:e} and {MAX_RATE:e} per second (an interval between 1 ns and \
             about 11.6 days), got {}",
            short(rate)
        ))
    }
}

/// A number for a message: plain when it reads well, else in scientific notation (`1e-11`,
/// not `0.00000000001`; `1e300`, not 301 digits).
pub fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scaling by 1 returns the duration itself, as the long way round (through seconds and
    /// back, rounded) does, up to and beyond the shortcut's bound.
    #[test]
    fn scaling_by_one_is_the_long_way_round() {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let long = |n: Nanos| Nanos::from_secs_f64(n.as_secs_f64() * 1.0);
        let mut cases: Vec<u64> = vec![0, 1, 999, 100_000, (1 << 50) - 1, 1 << 50, 1 << 53];
        cases.extend((0..100_000).map(|_| r.random_range(0..1u64 << 50)));
        for n in cases {
            let n = Nanos(n);
            if n.0 < 1 << 50 {
                assert_eq!(n.scale(1.0), n, "{n:?}");
            }
            assert_eq!(n.scale(1.0), long(n), "{n:?}");
        }
        assert_eq!(Nanos(100_000).scale(2.0), Nanos(200_000));
    }

    #[test]
    fn parses_and_prints_durations() {
        assert_eq!(parse_duration("50ms").unwrap(), Nanos(50_000_000));
        assert_eq!(parse_duration("1.5s").unwrap(), Nanos(1_500_000_000));
        assert_eq!(parse_duration("0").unwrap(), Nanos::ZERO);
        assert_eq!(parse_duration("0ms").unwrap(), Nanos::ZERO);
        assert_eq!(parse_duration("2m").unwrap(), Nanos(120_000_000_000));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(Nanos(143_000_000).to_string(), "143ms");
        assert_eq!(Nanos::interval_of_rate(7.0), Nanos(142_857_143));
    }
}
