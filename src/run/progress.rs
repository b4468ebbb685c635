//! Progress of one long run on a terminal: virtual time reached, how fast it advances against
//! the wall clock, and the time left. Shown only when stderr is a terminal, and only once a
//! run has lasted [`SHOW_AFTER`]: short runs and piped output print nothing.

use crate::trace::{Event, Sink};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A run shorter than this shows no progress.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Events between two looks at the wall clock.
const EVERY: u64 = 1 << 14;

/// A [`Sink`] that draws the progress line on stderr.
#[derive(Debug)]
pub struct Progress {
    duration_ns: u64,
    started: Instant,
    last_draw: Instant,
    events: u64,
    drawn: bool,
}

impl Progress {
    /// Progress of a run of `duration` virtual time, or `None` when stderr is not a terminal.
    pub fn on_terminal(duration: crate::time::Nanos) -> Option<Progress> {
        std::io::stderr().is_terminal().then(|| Progress {
            duration_ns: duration.0.max(1),
            started: Instant::now(),
            last_draw: Instant::now(),
            events: 0,
            drawn: false,
        })
    }

    /// The progress line at virtual time `t_ns` after `wall` of wall-clock time.
    pub fn line(t_ns: u64, duration_ns: u64, wall: Duration) -> String {
        let done = (t_ns as f64 / duration_ns as f64).clamp(0.0, 1.0);
        let speed = t_ns as f64 / 1e9 / wall.as_secs_f64().max(1e-9);
        let eta = if done > 0.0 {
            format!("{:.0}s", wall.as_secs_f64() * (1.0 - done) / done)
        } else {
            "?".into()
        };
        format!(
            "virtual {:.1}s of {:.1}s ({:.0}%), {speed:.2}x real time, eta {eta}",
            t_ns as f64 / 1e9,
            duration_ns as f64 / 1e9,
            done * 100.0
        )
    }
}

impl Sink for Progress {
    fn event(&mut self, ev: &Event) {
        self.events += 1;
        if !self.events.is_multiple_of(EVERY) {
            return;
        }
        let now = Instant::now();
        let wall = now - self.started;
        if wall < SHOW_AFTER || now - self.last_draw < Duration::from_millis(250) {
            return;
        }
        self.last_draw = now;
        self.drawn = true;
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K{}", Progress::line(ev.t(), self.duration_ns, wall));
        let _ = e.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_virtual_time_speed_and_eta() {
        let l = Progress::line(30_000_000_000, 60_000_000_000, Duration::from_secs(10));
        assert_eq!(l, "virtual 30.0s of 60.0s (50%), 3.00x real time, eta 10s");
    }
}
