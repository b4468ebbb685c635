//! One clock for the whole run.
//!
//! Every live timestamp (the destination's arrivals, the workers' own events, the fault
//! edges) is nanoseconds of `CLOCK_MONOTONIC` since one origin instant that the parent chooses
//! and hands to every worker. On Linux `CLOCK_MONOTONIC` is one system-wide clock, so a reading
//! taken in a worker process and one taken in the parent are on the same timeline, and the
//! merged trace needs no clock reconciliation. (This is the reference timeline of the trace,
//! not a pacing clock: the `row` backend still paces on the store's `clock_timestamp()`.)

use std::time::Duration;

/// `CLOCK_MONOTONIC` now, in nanoseconds (system-wide on Linux).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always supported.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The host's wall clock (`CLOCK_REALTIME`) now, nanoseconds since the Unix epoch: the frame of
/// PostgreSQL's `clock_timestamp()` and Redis's `TIME` on this host.
pub(crate) fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The wall clock's reading at the `CLOCK_MONOTONIC` reading `mono`: the offset between the
/// two clocks, measured as the tightest of several bracketed samples (a read of the wall
/// clock between two monotonic reads), so a preemption between the reads does not skew it.
pub(crate) fn wall_at(mono: u64) -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..16 {
        let a = mono_ns();
        let w = wall_ns();
        let b = mono_ns();
        let width = b - a;
        let offset = w - (a + width / 2) as i64;
        if best.is_none_or(|(bw, _)| width < bw) {
            best = Some((width, offset));
        }
    }
    let (_, offset) = best.expect("sampled");
    offset + mono as i64
}

/// The run's reference clock: nanoseconds since the origin.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RunClock {
    // invariant: a CLOCK_MONOTONIC reading (ns) taken by the parent.
    origin: u64,
    // invariant: the wall clock's reading at `origin`, measured once by the parent and shared
    // by every worker, so every process maps store timestamps onto the run clock alike.
    wall_at_origin: i64,
}

impl RunClock {
    /// A clock whose zero is the `CLOCK_MONOTONIC` reading `origin` (the wall clock's
    /// reading there measured now).
    pub fn new(origin: u64) -> RunClock {
        RunClock {
            origin,
            wall_at_origin: wall_at(origin),
        }
    }

    /// A clock from a parent's origin and wall-clock mapping.
    pub(crate) fn from_parts(origin: u64, wall_at_origin: i64) -> RunClock {
        RunClock { origin, wall_at_origin }
    }

    /// The origin, as a `CLOCK_MONOTONIC` reading.
    pub fn origin(&self) -> u64 {
        self.origin
    }

    /// The wall clock's reading (ns since the Unix epoch) at reference time 0.
    pub(crate) fn wall_at_origin(&self) -> i64 {
        self.wall_at_origin
    }

    /// Wait until reference time 0 (a worker told to go slightly ahead of it).
    pub(crate) async fn wait_origin(&self) {
        let now = mono_ns();
        if now < self.origin {
            let left = self.origin - now;
            if left > 2_000_000 {
                tokio::time::sleep(Duration::from_nanos(left - 1_500_000)).await;
            }
            let now = mono_ns();
            if now < self.origin {
                std::thread::sleep(Duration::from_nanos(self.origin - now));
            }
        }
    }

    /// Nanoseconds since the origin (0 before it).
    pub fn now(&self) -> u64 {
        mono_ns().saturating_sub(self.origin)
    }

    /// Sleep until reference time `t`, precisely: the tokio timer (1 ms granularity) for the
    /// bulk, then a thread sleep (tens of microseconds late at most) for the last stretch.
    /// Blocks the calling thread for at most ~2 ms; only workers, whose single task has
    /// nothing else to do meanwhile, use it.
    pub(crate) async fn sleep_until_precise(&self, t: u64) {
        let now = self.now();
        if t <= now {
            return;
        }
        let left = t - now;
        if left > 2_000_000 {
            tokio::time::sleep(Duration::from_nanos(left - 1_500_000)).await;
        }
        let now = self.now();
        if t > now {
            std::thread::sleep(Duration::from_nanos(t - now));
        }
    }

    /// Sleep until reference time `t` with the tokio timer (millisecond granularity).
    pub(crate) async fn sleep_until(&self, t: u64) {
        let now = self.now();
        if t > now {
            tokio::time::sleep(Duration::from_nanos(t - now)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_relative() {
        let a = mono_ns();
        let c = RunClock::new(a);
        let t = c.now();
        assert!(t < 1_000_000_000);
        assert!(mono_ns() >= a);
        assert_eq!(RunClock::new(u64::MAX).now(), 0);
    }
}
