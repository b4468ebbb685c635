//! Clocks that disagree with the reference timeline.
//!
//! Three kinds of clock matter to a shared pacer, and the design records turn on the
//! difference between them:
//! - the store's clock (`clock_timestamp()` in PostgreSQL, `TIME` in Redis): one clock that
//!   every process reads through the store, so values written by one process mean the same
//!   thing to another;
//! - each process's monotonic clock (`time.monotonic()`): its epoch is per process, so a value
//!   one process persists is meaningless to another (the defect the record warns about);
//! - each host's wall clock: shared in principle, but skewed against the store's.
//!
//! A [`Clock`] maps a reference [`Instant`] to a signed reading in its own frame:
//! `reading(t) = offset + t * (1 + drift_ppm / 1e6) + sum(steps at or before t)`.

use crate::time::{Instant, Nanos};

/// A clock's reading, in nanoseconds of its own frame (may be negative).
pub type Reading = i64;

/// A clock with an epoch offset, a constant drift and step jumps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Clock {
    /// Reading at reference time zero.
    pub offset: i64,
    /// Rate error in parts per million (positive runs fast).
    pub drift_ppm: f64,
    // invariant: sorted by instant.
    steps: Vec<(Instant, i64)>,
}

crate::exact_hash!(Clock {
    offset,
    drift_ppm: bits,
    steps
});

impl Clock {
    /// A clock that agrees with the reference timeline.
    pub fn reference() -> Clock {
        Clock::default()
    }

    /// A clock with the given offset and drift.
    pub fn new(offset: i64, drift_ppm: f64) -> Clock {
        Clock {
            offset,
            drift_ppm,
            steps: Vec::new(),
        }
    }

    /// Add a step jump of `by` nanoseconds at reference time `at`.
    pub(crate) fn add_step(&mut self, at: Instant, by: i64) {
        let i = self.steps.partition_point(|s| s.0 <= at);
        self.steps.insert(i, (at, by));
    }

    fn rate(&self) -> f64 {
        1.0 + self.drift_ppm * 1e-6
    }

    /// An explorer's form of the clock at reference time `t` ([`crate::form`]): how far its
    /// reading is from `t`, which stays so as time goes on when it does not drift, takes no
    /// step after `t`, and reads no negative value (readings are clamped at zero where read as
    /// unsigned); otherwise the form is absolute.
    pub fn form(&self, f: &mut crate::form::Form, t: Instant) {
        // (every field named: one added later is placed here, or the build fails)
        let Clock {
            offset: _, // in the reading
            drift_ppm,
            steps, // those taken are in the reading
        } = self;
        let r = self.read(t);
        f.word(r.wrapping_sub(t.0 as i64) as u64);
        if *drift_ppm != 0.0 || steps.iter().any(|s| s.0 > t) || r < 0 {
            f.absolute();
        }
    }

    /// The clock's reading at reference time `t`.
    pub fn read(&self, t: Instant) -> Reading {
        let base = if self.drift_ppm == 0.0 {
            t.0 as i64
        } else {
            (t.0 as f64 * self.rate()).round() as i64
        };
        let stepped: i64 = self.steps.iter().take_while(|s| s.0 <= t).map(|s| s.1).sum();
        self.offset + base + stepped
    }

    /// How long, on the reference timeline, a sleep of `d` measured by this clock lasts.
    /// Relative sleeps (monotonic timers) ignore steps; they feel only drift.
    pub(crate) fn ref_duration(&self, d: Nanos) -> Nanos {
        if self.drift_ppm == 0.0 {
            d
        } else {
            Nanos((d.0 as f64 / self.rate()).round() as u64)
        }
    }

    /// The reference time, at or after `now`, when this clock first reads `target`
    /// (an absolute sleep "until the wall clock says `target`"). Steps after `now` are not
    /// anticipated, as a real timer would not.
    pub(crate) fn when_reads(&self, now: Instant, target: Reading) -> Instant {
        let ahead = target - self.read(now);
        if ahead <= 0 {
            now
        } else {
            now + self.ref_duration(Nanos(ahead as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_drift_and_steps() {
        let mut c = Clock::new(1_000, 100.0);
        assert_eq!(c.read(Instant(0)), 1_000);
        assert_eq!(c.read(Instant(1_000_000)), 1_000 + 1_000_100);
        c.add_step(Instant(10), -500);
        assert_eq!(c.read(Instant(9)), 1_009);
        assert_eq!(c.read(Instant(10)), 1_000 + 10 - 500);
        let r = Clock::reference();
        assert_eq!(r.when_reads(Instant(5), 20), Instant(20));
        assert_eq!(r.when_reads(Instant(5), 2), Instant(5));
    }
}
