//! The parent-worker protocol: a worker's spec (JSON in the `PACESIM_WORKER` environment
//! variable), its messages to the parent (JSON lines on its stdout), and the parent's commands
//! (text lines on its stdin).
//!
//! ```text
//! worker -> parent   {"m":"ready"}
//! parent -> worker   go <origin>              CLOCK_MONOTONIC ns of reference time 0
//! worker -> parent   {"m":"event","ev":{"ev":"op_sent","t":12,"pid":0,"op":"reserve"}}
//! worker -> parent   {"m":"job_start","t":12} / {"m":"job_end","t":40}
//! parent -> worker   arm mid_reservation      SIGKILL yourself at that protocol point
//! worker -> parent   {"m":"fatal","message":"..."}
//! ```
//!
//! Closing the worker's stdin (the parent died) makes the worker exit at once.

use crate::fault::KillPoint;
use crate::live::settings::{PgSettings, RedisSettings};
use crate::scenario::Scenario;
use crate::trace::Event;
use serde::{Deserialize, Serialize};

/// The environment variable carrying a worker's [`WorkerSpec`].
pub const SPEC_ENV: &str = "PACESIM_WORKER";

/// Everything a worker process needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The run's id (also on the worker's command line, so its processes can be found).
    pub run_id: String,
    /// Process id in the scenario (0-based).
    pub pid: u32,
    /// 0 for the first process with this id; +1 on each restart.
    pub incarnation: u32,
    /// Fetches completed by earlier incarnations.
    pub done: u64,
    /// The scenario (with any `--backend` override applied).
    pub scenario: Scenario,
    /// The origin (CLOCK_MONOTONIC ns) and the wall clock's reading there; `None`: wait for
    /// `go` on stdin.
    pub origin: Option<(u64, i64)>,
    /// The destination's `host:port`.
    pub dest: String,
    /// PostgreSQL, when the backend uses it (possibly pointed at a fault proxy).
    pub pg: Option<PgStore>,
    /// Redis, when the backend uses it.
    pub redis: Option<RedisStore>,
}

/// A worker's PostgreSQL target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PgStore {
    /// Connection settings.
    pub settings: PgSettings,
    /// The run's schema.
    pub schema: String,
}

/// A worker's Redis target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RedisStore {
    /// Connection settings.
    pub settings: RedisSettings,
    /// Connect here instead of the URL's address (a fault proxy).
    pub via: Option<(String, u16)>,
    /// The run's key prefix.
    pub prefix: String,
}

/// A worker's message to the parent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "m", rename_all = "snake_case")]
pub enum ToParent {
    /// Connected; waiting for `go` (first incarnations only).
    Ready,
    /// A trace event, stamped on the run clock.
    Event {
        /// The event.
        ev: Event,
    },
    /// A job began (for the hard time limit).
    JobStart {
        /// Time.
        t: u64,
    },
    /// The job ended.
    JobEnd {
        /// Time.
        t: u64,
    },
    /// The worker cannot go on.
    Fatal {
        /// Why.
        message: String,
    },
}

/// Borrowed form of [`ToParent::Event`] for writing without a clone.
#[derive(Serialize)]
pub(crate) struct EventMsg<'a> {
    pub m: &'static str,
    pub ev: &'a Event,
}

/// A parent's command to a worker.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToWorker {
    /// Reference time 0 is this CLOCK_MONOTONIC reading, when the wall clock read the second
    /// value; start.
    Go(u64, i64),
    /// SIGKILL yourself when you next reach this point.
    Arm(KillPoint),
}

impl ToWorker {
    /// The command as one line (with newline).
    pub fn line(&self) -> String {
        match self {
            ToWorker::Go(o, w) => format!("go {o} {w}\n"),
            ToWorker::Arm(p) => format!("arm {}\n", p.name()),
        }
    }

    /// Parse one line.
    pub fn parse(line: &str) -> Option<ToWorker> {
        let (cmd, arg) = line.trim().split_once(' ')?;
        match cmd {
            "go" => {
                let (o, w) = arg.split_once(' ')?;
                Some(ToWorker::Go(o.parse().ok()?, w.parse().ok()?))
            }
            "arm" => {
                let p: KillPoint = serde_json::from_value(serde_json::Value::String(arg.into())).ok()?;
                Some(ToWorker::Arm(p))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip() {
        for c in [ToWorker::Go(123, -4), ToWorker::Arm(KillPoint::MidReservation)] {
            assert_eq!(ToWorker::parse(&c.line()), Some(c));
        }
        assert_eq!(ToWorker::parse("bogus 1"), None);
    }

    #[test]
    fn event_message_matches_the_owned_form() {
        let ev = Event::FetchStart {
            t: 5,
            pid: 1,
            thread: 0,
        };
        let s = serde_json::to_string(&EventMsg { m: "event", ev: &ev }).unwrap();
        assert_eq!(serde_json::from_str::<ToParent>(&s).unwrap(), ToParent::Event { ev });
    }

    #[test]
    fn scenarios_survive_json() {
        let src = r#"
name = "x"
duration = "3s"
[pacer]
backend = "row"
rate = 20.0
fallback = "divided"
in_transaction = { hold = { dist = "constant", value = "5ms" } }
[processes]
count = 4
requests = 10
[store]
latency = { dist = "lognormal", median = "300us", sigma = 0.3 }
[[faults]]
kind = "kill"
at = "1s"
process = 1
point = "mid_reservation"
restart_after = "100ms"
[[faults]]
kind = "store_outage"
at = "1s"
duration = "1s"
"#;
        let sc = crate::registry::parse("x.toml", src).unwrap();
        let back: Scenario = serde_json::from_str(&serde_json::to_string(&sc).unwrap()).unwrap();
        assert_eq!(back, sc);
    }
}
