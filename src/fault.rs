//! Faults: the `[[faults]]` list of a scenario, and the windows and triggers they open.
//!
//! ```toml
//! [[faults]]
//! kind = "kill"                 # SIGKILL
//! at = "2s"                     # armed from this time (or `rate = 0.1` per second, random)
//! process = 1                   # default: drawn at random
//! point = "mid_reservation"     # default: wherever the process is at `at`
//! restart_after = "1s"          # optional: a fresh process replaces it
//!
//! [[faults]]
//! kind = "store_outage"         # also: store_latency, store_restart, state_lost, partition,
//! at = "5s"                     #       long_transaction, clock
//! duration = "10s"
//! mode = "refuse"               # or "timeout"
//!
//! [[faults]]
//! kind = "destination_throttle" # the destination answers every arrival with `status`
//! at = "5s"
//! duration = "3s"
//! status = 429                  # or 503; default 429
//! ```
//!
//! The simulator turns each spec into timed fault edges (start, end) on the engine and emits a
//! `fault` trace event at each edge, so plots can shade the windows.

use crate::clock::Clock;
use crate::dist::Dist;
use crate::time::Nanos;
use crate::trace::FaultKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `[fetch] stuck` (issue 35 item 5): stuck CDN files inside a walk. A share of fetches hit a
/// file that never answers: the downloader waits `timeout` for each of `retries` attempts and
/// then gives the file up (its `fetch_end` reads 504, pacesim's code for it), so one stuck file
/// holds its walk `retries x timeout`. The attempts go to the file's host (the CDN), not the
/// platform's API: the destination sees the file's request once.
///
/// ```toml
/// [fetch]
/// stuck = { share = 0.01, timeout = "120s", retries = 3 }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StuckCfg {
    /// The share of fetches whose file is stuck, in [0, 1] (pacesim's: the record gives one
    /// stuck file, not a rate).
    pub share: f64,
    /// The downloader's timeout per attempt. Default 120s (the record before #693: "downloader
    /// timeout 120 -> 60s").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Nanos>,
    /// Attempts at a stuck file. Default 3 (the record before #693: "gallery-dl retries 3 ->
    /// 2"). pacesim counts `retries` attempts (the issue's "retries x timeout"); gallery-dl's
    /// own `retries` counts tries after the first, which would add one `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
}

impl StuckCfg {
    /// How long a stuck file holds its walk: `retries x timeout`.
    pub fn cost(&self) -> Nanos {
        let timeout = self.timeout.unwrap_or(Nanos(120_000_000_000));
        Nanos(timeout.0.saturating_mul(u64::from(self.retries.unwrap_or(3))))
    }

    /// Range checks: `Err((field, message))`, the field dotted from the scenario's root.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !(0.0..=1.0).contains(&self.share) {
            return Err((
                "fetch.stuck.share".into(),
                format!("must be a share in [0, 1], got {}", self.share),
            ));
        }
        if self.timeout.is_some_and(|t| t.0 == 0) {
            return Err(("fetch.stuck.timeout".into(), "must be above 0".into()));
        }
        if self.retries == Some(0) {
            return Err(("fetch.stuck.retries".into(), "must be at least 1".into()));
        }
        if self.cost().0 > 86_400_000_000_000 {
            return Err(("fetch.stuck".into(), "retries x timeout must be at most a day".into()));
        }
        Ok(())
    }
}

/// Where in its protocol a process is killed (`point`): defined with the choice source, the
/// lowest layer that names one.
pub use crate::choice::KillPoint;

/// How an unreachable store fails a client.
#[derive(Hash, Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutageMode {
    /// The connection is refused: an error after one round trip.
    #[default]
    Refuse,
    /// Nothing answers: the client gives up after `store.timeout`.
    Timeout,
}

/// A signed duration such as `"-5s"` (clock offsets and steps).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Offset(pub i64);

impl Serialize for Offset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let sign = if self.0 < 0 { "-" } else { "" };
        s.serialize_str(&format!("{sign}{}", Nanos(self.0.unsigned_abs())))
    }
}

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let (neg, rest) = match s.trim().strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.trim()),
        };
        let n = crate::time::parse_duration(rest).map_err(serde::de::Error::custom)?;
        let v = i64::try_from(n.0).map_err(|_| serde::de::Error::custom("offset out of range"))?;
        Ok(Offset(if neg { -v } else { v }))
    }
}

/// One fault in the schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultSpec {
    /// SIGKILL a process.
    Kill {
        /// Armed from this time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Nanos>,
        /// Instead of `at`: kills drawn as a Poisson stream at this rate per second.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate: Option<f64>,
        /// Target process. Default: drawn at random from the fault stream.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        process: Option<u32>,
        /// Protocol point. Default: immediately, wherever the process is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<KillPoint>,
        /// Start a fresh process this long after the kill. Default: stays dead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_after: Option<Nanos>,
    },
    /// The store refuses or times out every operation for a window.
    StoreOutage {
        /// Start.
        at: Nanos,
        /// Length.
        duration: Nanos,
        /// `refuse` (default) or `timeout`.
        #[serde(default)]
        mode: OutageMode,
    },
    /// Extra one-way latency to and from the store for a window.
    StoreLatency {
        /// Start.
        at: Nanos,
        /// Length.
        duration: Nanos,
        /// Added latency per direction.
        added: Dist,
    },
    /// The store restarts: session state (advisory locks) is lost; stored rows survive.
    StoreRestart {
        /// When.
        at: Nanos,
        /// How long the store is down while restarting. Default 0.
        #[serde(default)]
        duration: Nanos,
    },
    /// What the backend keeps in the store vanishes at `at`: a truncated pace table, the shared
    /// cache culling the pace key when it is full, a Redis `FLUSHDB` (issue 16, item 4). The
    /// store stays up and sessions survive; each backend's store side says what it loses
    /// ([`crate::backend::StoreSide::on_state_lost`]).
    StateLost {
        /// When.
        at: Nanos,
    },
    /// Some processes cannot reach the store (their operations time out) for a window.
    Partition {
        /// Start.
        at: Nanos,
        /// Length.
        duration: Nanos,
        /// The processes cut off.
        processes: Vec<u32>,
    },
    /// An unrelated transaction holds the row lock.
    LongTransaction {
        /// Start.
        at: Nanos,
        /// How long it holds the lock.
        duration: Nanos,
    },
    /// The destination answers every arrival in `[at, at + duration)` with `status`, whatever
    /// its own limit says: the same rate-pressure burst for every backend and backoff placement.
    /// Throttled arrivals still count as arrivals (the ceiling checks them) but do not use the
    /// destination's own limit. No checker excuses the window: the store and the backend are
    /// untouched, and the backoff it causes is what the checkers judge.
    DestinationThrottle {
        /// Start.
        at: Nanos,
        /// Length.
        duration: Nanos,
        /// The status every arrival gets: 429 (default) or 503.
        #[serde(default = "throttle_status")]
        status: u16,
    },
    /// Clock disagreement.
    Clock {
        /// Processes affected. Default: all.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        processes: Vec<u32>,
        /// Monotonic epochs: each affected process's epoch is drawn uniformly from
        /// `[0, epoch_spread)` (a restarted process draws a new one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        epoch_spread: Option<Nanos>,
        /// Drift of the affected processes' clocks, parts per million.
        #[serde(default)]
        drift_ppm: f64,
        /// A step jump of the affected processes' wall clocks at `step_at`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<Offset>,
        /// When the step happens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_at: Option<Nanos>,
        /// Host wall clocks' offset against the store's clock.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_offset: Option<Offset>,
    },
}

impl FaultSpec {
    /// Kind name, as in scenario files and `fault` trace events.
    pub fn kind(&self) -> &'static str {
        self.fault_kind().name()
    }

    /// The kind, as `fault` trace events carry it.
    pub(crate) fn fault_kind(&self) -> FaultKind {
        match self {
            FaultSpec::Kill { .. } => FaultKind::Kill,
            FaultSpec::StoreOutage { .. } => FaultKind::StoreOutage,
            FaultSpec::StoreLatency { .. } => FaultKind::StoreLatency,
            FaultSpec::StoreRestart { .. } => FaultKind::StoreRestart,
            FaultSpec::StateLost { .. } => FaultKind::StateLost,
            FaultSpec::Partition { .. } => FaultKind::Partition,
            FaultSpec::LongTransaction { .. } => FaultKind::LongTransaction,
            FaultSpec::DestinationThrottle { .. } => FaultKind::DestinationThrottle,
            FaultSpec::Clock { .. } => FaultKind::Clock,
        }
    }

    /// Range checks, for a run of `n` processes lasting `duration`. `Err((field, message))`.
    pub fn validate(&self, n: u32, duration: Nanos) -> Result<(), (String, String)> {
        let bad_pid = |p: u32| {
            (p >= n).then(|| {
                (
                    "process".to_string(),
                    format!("process {p} does not exist (count = {n})"),
                )
            })
        };
        match self {
            FaultSpec::Kill { at, rate, process, .. } => {
                if at.is_none() == rate.is_none() {
                    return Err(("at".into(), "a kill needs exactly one of `at` or `rate`".into()));
                }
                if let Some(r) = rate
                    && !(r.is_finite() && *r > 0.0)
                {
                    return Err(("rate".into(), format!("must be above 0, got {r}")));
                }
                if let Some(r) = rate {
                    crate::time::rate_in_range(*r).map_err(|m| ("rate".to_string(), m))?;
                }
                if let Some(t) = at
                    && *t >= duration
                {
                    return Err((
                        "at".into(),
                        format!(
                            "the kill can never happen: `at` ({t}) is not before the run's duration ({})",
                            duration
                        ),
                    ));
                }
                if let Some(e) = process.and_then(bad_pid) {
                    return Err(e);
                }
            }
            FaultSpec::Partition { processes, .. } | FaultSpec::Clock { processes, .. } => {
                if let Some(e) = processes.iter().find_map(|&p| bad_pid(p)) {
                    return Err(("processes".into(), e.1));
                }
                if processes.is_empty() && matches!(self, FaultSpec::Partition { .. }) {
                    return Err((
                        "processes".into(),
                        "a partition needs at least one process to cut off".into(),
                    ));
                }
                if let FaultSpec::Clock { drift_ppm, .. } = self
                    && !(drift_ppm.is_finite() && *drift_ppm > -1e6 && *drift_ppm < 1e6)
                {
                    return Err((
                        "drift_ppm".into(),
                        format!(
                            "must be a number above -1000000 and below 1000000 (a clock that runs, \
                             at most twice as fast), got {}",
                            compact(*drift_ppm)
                        ),
                    ));
                }
            }
            FaultSpec::StoreLatency { added, .. } => added.validate().map_err(|m| ("added".to_string(), m))?,
            FaultSpec::DestinationThrottle { duration, status, .. } => {
                if !matches!(status, 429 | 503) {
                    return Err(("status".into(), format!("must be 429 or 503, got {status}")));
                }
                if duration.0 == 0 {
                    return Err(("duration".into(), "must be above 0".into()));
                }
            }
            _ => {}
        }
        if let FaultSpec::Clock {
            step: Some(_),
            step_at: None,
            ..
        } = self
        {
            return Err(("step_at".into(), "a clock step needs `step_at`".into()));
        }
        Ok(())
    }

    /// The fault's window `[start, end)` when it has a fixed one.
    pub fn window(&self) -> Option<(Nanos, Nanos)> {
        match *self {
            FaultSpec::StoreOutage { at, duration, .. }
            | FaultSpec::StoreLatency { at, duration, .. }
            | FaultSpec::StoreRestart { at, duration }
            | FaultSpec::Partition { at, duration, .. }
            | FaultSpec::LongTransaction { at, duration }
            | FaultSpec::DestinationThrottle { at, duration, .. } => Some((at, at + duration)),
            FaultSpec::StateLost { at } => Some((at, at)),
            _ => None,
        }
    }
}

/// The clocks of process `pid`, `incarnation`, shaped by the scenario's clock faults: its
/// monotonic clock (epoch 0, unless an `epoch_spread` draws one from the process's own clock
/// stream) and its host's wall clock (`base_wall`, the store's clock frame, unless offset,
/// drifted or stepped). The simulator and a live worker both call this, so one seed gives one
/// set of clocks in both modes.
pub fn clocks(seed: u64, faults: &[FaultSpec], pid: u32, incarnation: u32, base_wall: &Clock) -> (Clock, Clock) {
    use rand::RngExt;
    let mut mono = Clock::reference();
    let mut wall = base_wall.clone();
    let mut rng = crate::rng::stream(seed, crate::rng::Entity::Clock { pid, incarnation });
    for f in faults {
        if let FaultSpec::Clock {
            processes,
            epoch_spread,
            drift_ppm,
            step,
            step_at,
            wall_offset,
        } = f
        {
            if !processes.is_empty() && !processes.contains(&pid) {
                continue;
            }
            if let Some(s) = epoch_spread {
                mono.offset = if s.0 == 0 { 0 } else { rng.random_range(0..s.0) as i64 };
            }
            mono.drift_ppm = *drift_ppm;
            wall.drift_ppm = *drift_ppm;
            if let Some(o) = wall_offset {
                wall.offset = base_wall.offset + o.0;
            }
            if let (Some(by), Some(at)) = (step, step_at) {
                wall.add_step(crate::time::Instant(at.0), by.0);
            }
        }
    }
    (mono, wall)
}

fn throttle_status() -> u16 {
    429
}

/// The destination-throttle windows of a fault list: `(start ns, end ns, status)`.
pub fn throttles(faults: &[FaultSpec]) -> Vec<(u64, u64, u16)> {
    faults
        .iter()
        .filter_map(|f| match *f {
            FaultSpec::DestinationThrottle { at, duration, status } => Some((at.0, at.0 + duration.0, status)),
            _ => None,
        })
        .collect()
}

/// A number as a message quotes it: in full when short, in scientific notation when its
/// digits would run long (`1e300`, not 301 digits).
fn compact(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kill point's trace name is the name scenario files give it.
    #[test]
    fn kill_points_crash_under_their_scenario_names() {
        for p in [
            KillPoint::MidReservation,
            KillPoint::HoldingLock,
            KillPoint::InTransaction,
            KillPoint::SleepingToSlot,
            KillPoint::MidFetch,
        ] {
            let scenario = serde_json::to_string(&p).unwrap();
            let crash = crate::trace::CrashPoint::from(p);
            assert_eq!(scenario, format!("\"{}\"", crash.name()));
            assert_eq!(scenario, serde_json::to_string(&crash).unwrap());
            assert_eq!(p.name(), crash.name());
        }
    }
}
