//! The trace's schema: the [`Header`], the [`Event`]s, and the named values their fields take.

use serde::{Deserialize, Serialize};

/// Version of the trace format; bumped on any incompatible change.
pub const TRACE_VERSION: u32 = 1;

/// First line of every trace: what produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always `"header"`.
    pub ev: String,
    /// [`TRACE_VERSION`].
    pub version: u32,
    /// `sim` or `live`.
    pub source: String,
    /// Scenario name.
    pub scenario: String,
    /// Backend name.
    pub backend: String,
    /// Seed used.
    pub seed: u64,
    /// Number of worker processes.
    pub processes: u32,
    /// The global ceiling, per second.
    pub rate: f64,
    /// The ceiling check's tolerated burst.
    pub burst: u64,
    /// Backoff multiplier cap.
    pub multiplier_cap: f64,
    /// Backend options in force.
    pub backend_detail: serde_json::Value,
}

/// Why an operation or a lock ended the way it did.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Reserve a slot (pace backends).
    Reserve,
    /// Report a response to shared backoff state.
    Report,
    /// GCRA check-and-update.
    Gcra,
    /// Try to take a lock.
    TryLock,
    /// Release a lock.
    Unlock,
}

/// One event. `t` is nanoseconds on the reference timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A process sent an operation to the store.
    OpSent {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Which operation.
        op: OpKind,
    },
    /// The store granted a slot (pace backends), at store-clock time `store_now`.
    Grant {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// The slot, in the granting authority's clock frame (ns).
        slot: i64,
        /// The authority's clock when it granted (ns).
        now: i64,
        /// The pacing interval applied, after the multiplier (ns).
        interval: u64,
        /// Backoff multiplier in force for this grant.
        multiplier: f64,
    },
    /// The store refused permission for now (GCRA deny, lock busy).
    Deny {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A reply reached the process; `wait` is how long it will now sleep (ns).
    Reply {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Which operation this answers.
        op: OpKind,
        /// Sleep until the slot (ns, reference time).
        wait: u64,
    },
    /// A store operation failed (outage, partition, timeout).
    StoreError {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// `refused` or `timeout`.
        error: String,
    },
    /// A process started a fetch.
    FetchStart {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A fetch reached the destination (the witness the ceiling check counts).
    Arrival {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// The destination's answer.
        status: u16,
    },
    /// A fetch's response reached the process.
    FetchEnd {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Status.
        status: u16,
    },
    /// A backoff multiplier changed; `pid` is `None` for the shared (global) multiplier.
    Multiplier {
        /// Time.
        t: u64,
        /// Process owning a per-process multiplier, or none for the global one.
        pid: Option<u32>,
        /// Old value.
        from: f64,
        /// New value.
        to: f64,
        /// `429`, `503` or `decay`.
        cause: String,
    },
    /// A lock was taken.
    LockAcquired {
        /// Time.
        t: u64,
        /// Holder.
        pid: u32,
        /// Lock number.
        lock: u32,
    },
    /// A lock was freed.
    LockReleased {
        /// Time.
        t: u64,
        /// Holder it was freed from.
        pid: u32,
        /// Lock number.
        lock: u32,
        /// `release`, `ttl`, `session_gone` or `store_restart`.
        reason: String,
    },
    /// A job ran without the lock after its bounded wait (the safety valve), or uncapped because
    /// the broker failed.
    Uncapped {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// `safety_valve` or `broker_error`.
        reason: String,
    },
    /// A process switched to or from its fallback pacer.
    Fallback {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// True on entry, false on exit.
        enter: bool,
        /// `fail_open`, `divided` or `fail_closed`.
        mode: String,
    },
    /// A process was killed (SIGKILL).
    Crash {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Where in its protocol.
        point: String,
    },
    /// A fresh process replaced a killed one.
    Restart {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A fault window opened (`start`) or closed.
    Fault {
        /// Time.
        t: u64,
        /// Index in the scenario's fault list.
        id: u32,
        /// Fault kind.
        kind: String,
        /// True at start, false at end.
        start: bool,
    },
    /// The run ended.
    End {
        /// Time.
        t: u64,
    },
}

impl Event {
    /// The event's time.
    pub fn t(&self) -> u64 {
        match *self {
            Event::OpSent { t, .. }
            | Event::Grant { t, .. }
            | Event::Deny { t, .. }
            | Event::Reply { t, .. }
            | Event::StoreError { t, .. }
            | Event::FetchStart { t, .. }
            | Event::Arrival { t, .. }
            | Event::FetchEnd { t, .. }
            | Event::Multiplier { t, .. }
            | Event::LockAcquired { t, .. }
            | Event::LockReleased { t, .. }
            | Event::Uncapped { t, .. }
            | Event::Fallback { t, .. }
            | Event::Crash { t, .. }
            | Event::Restart { t, .. }
            | Event::Fault { t, .. }
            | Event::End { t } => t,
        }
    }
}

impl OpKind {
    /// The name the trace uses (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Reserve => "reserve",
            OpKind::Report => "report",
            OpKind::Gcra => "gcra",
            OpKind::TryLock => "try_lock",
            OpKind::Unlock => "unlock",
        }
    }
}
