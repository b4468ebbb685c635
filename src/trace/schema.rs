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
        /// How it failed.
        error: StoreErrorKind,
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
        /// Why it changed.
        cause: MultiplierCause,
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
        /// Why: the holder released it or died, or the store dropped it.
        reason: ReleaseReason,
    },
    /// A job ran without the lock after its bounded wait (the safety valve), or uncapped because
    /// the broker failed.
    Uncapped {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Why it ran without the lock.
        reason: UncappedReason,
    },
    /// A process switched to or from its fallback pacer.
    Fallback {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// True on entry, false on exit.
        enter: bool,
        /// The fallback pacer's mode.
        mode: FallbackMode,
    },
    /// A process was killed (SIGKILL).
    Crash {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Where in its protocol.
        point: CrashPoint,
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
        kind: FaultKind,
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

/// Defines a closed set of names a trace field takes: a `Copy` enum whose serde name is each
/// variant's string (so the JSON holds exactly that string), with [`name`](OpKind::name) giving
/// the same string and `ALL` listing every variant.
macro_rules! names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $s:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $s)] $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &[$name] = &[$($name::$variant),*];

            /// The name the trace writes (the serde name).
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $s, )*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

names! {
    /// A store operation (`op_sent` and `reply` events).
    pub enum OpKind {
        /// Reserve a slot (pace backends).
        Reserve = "reserve",
        /// Report a response to shared backoff state.
        Report = "report",
        /// GCRA check-and-update.
        Gcra = "gcra",
        /// Try to take a lock.
        TryLock = "try_lock",
        /// Release a lock.
        Unlock = "unlock",
        /// Any other request for permission: a backend's own operation (a user-defined backend
        /// maps its operations to it). Consumers treat it as they treat a reservation: its
        /// process waits for permission from sending it until its fetch starts, and a `grant`
        /// that answers it comes from the shared authority.
        Acquire = "acquire",
    }
}

impl OpKind {
    /// Whether the operation asks for permission to fetch (a reservation, a GCRA check, a lock
    /// try, or a backend's own [`Acquire`](OpKind::Acquire)): its sender waits for
    /// permission until it fetches, and its round trip is a permission round trip. Reports
    /// and unlocks do not ask.
    pub const fn asks_permission(self) -> bool {
        match self {
            OpKind::Reserve | OpKind::Gcra | OpKind::TryLock | OpKind::Acquire => true,
            OpKind::Report | OpKind::Unlock => false,
        }
    }
}

names! {
    /// How a store operation failed (`store_error` events).
    pub enum StoreErrorKind {
        /// The store refused the connection: the error comes after one round trip, and the
        /// store never saw the operation.
        Refused = "refused",
        /// The client gave up waiting: the store may or may not have applied the operation.
        Timeout = "timeout",
    }
}

names! {
    /// Why a backoff multiplier changed (`multiplier` events).
    pub enum MultiplierCause {
        /// A 429 response backed it off.
        TooManyRequests = "429",
        /// A 503 response backed it off.
        Unavailable = "503",
        /// A streak of clean responses decayed it.
        Decay = "decay",
        /// Another failed response changed it.
        Error = "error",
    }
}

names! {
    /// Why a lock was freed (`lock_released` events). The holder ends its critical section
    /// with [`Release`](ReleaseReason::Release) or [`HolderDied`](ReleaseReason::HolderDied);
    /// with any other reason the store dropped the lock under a holder that does not know, and
    /// whose section goes on.
    pub enum ReleaseReason {
        /// The holder released it: its critical section ended.
        Release = "release",
        /// The lock's key expired (a TTL lock).
        Ttl = "ttl",
        /// The store noticed the holder's session was gone and freed its locks.
        SessionGone = "session_gone",
        /// The store restarted and lost its session state.
        StoreRestart = "store_restart",
        /// The holder was killed (SIGKILL), which ends its critical section.
        HolderDied = "holder_died",
    }
}

impl ReleaseReason {
    /// Whether the holder's critical section ended with the lock (it released it or died);
    /// false when the store dropped the lock under a live holder.
    pub const fn ends_section(self) -> bool {
        match self {
            ReleaseReason::Release | ReleaseReason::HolderDied => true,
            ReleaseReason::Ttl | ReleaseReason::SessionGone | ReleaseReason::StoreRestart => false,
        }
    }
}

names! {
    /// Why a job ran without the lock (`uncapped` events).
    pub enum UncappedReason {
        /// It waited the bounded time for the lock and ran without it.
        SafetyValve = "safety_valve",
        /// The broker (the store) failed, so it ran without the lock.
        BrokerError = "broker_error",
    }
}

names! {
    /// A fallback pacer's mode (`fallback` events).
    pub enum FallbackMode {
        /// Pace locally at the full rate.
        FailOpen = "fail_open",
        /// Pace locally at `rate / (cap + 1)`.
        Divided = "divided",
        /// Stop fetching until the store answers again.
        FailClosed = "fail_closed",
    }
}

names! {
    /// Where in its protocol a process was killed (`crash` events).
    pub enum CrashPoint {
        /// Wherever it was when the kill fired.
        Immediate = "immediate",
        /// Its job passed the hard time limit.
        HardLimit = "hard_limit",
        /// The store applied its operation; the reply never arrived.
        MidReservation = "mid_reservation",
        /// Right after it acquired a lock.
        HoldingLock = "holding_lock",
        /// While its transaction (holding the row lock) was open.
        InTransaction = "in_transaction",
        /// While sleeping until its slot.
        SleepingToSlot = "sleeping_to_slot",
        /// After the fetch request left, before the response.
        MidFetch = "mid_fetch",
    }
}

names! {
    /// A fault's kind (`fault` events), as scenario files name it.
    pub enum FaultKind {
        /// SIGKILL of a process.
        Kill = "kill",
        /// The store is unreachable.
        StoreOutage = "store_outage",
        /// The store answers slowly.
        StoreLatency = "store_latency",
        /// The store restarts and loses its session state.
        StoreRestart = "store_restart",
        /// Some processes cannot reach the store.
        Partition = "partition",
        /// A transaction holds the store's lock for long.
        LongTransaction = "long_transaction",
        /// The destination answers every arrival with a throttling status.
        DestinationThrottle = "destination_throttle",
        /// Process clocks are skewed, drift or step.
        Clock = "clock",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of `T` writes exactly its string (the bytes the trace held when these fields
    /// were strings), reads back as itself, and `name` agrees.
    fn exact<T>(all: &[T], names: &[&str])
    where
        T: Copy + std::fmt::Debug + PartialEq + Serialize + serde::de::DeserializeOwned + std::fmt::Display,
    {
        assert_eq!(all.len(), names.len(), "{all:?}");
        for (v, name) in all.iter().zip(names) {
            let json = serde_json::to_string(v).unwrap();
            assert_eq!(json, format!("\"{name}\""), "{v:?}");
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *v);
            assert_eq!(v.to_string(), *name);
        }
    }

    #[test]
    fn every_named_value_round_trips_as_its_exact_string() {
        exact(
            OpKind::ALL,
            &["reserve", "report", "gcra", "try_lock", "unlock", "acquire"],
        );
        exact(StoreErrorKind::ALL, &["refused", "timeout"]);
        exact(MultiplierCause::ALL, &["429", "503", "decay", "error"]);
        exact(
            ReleaseReason::ALL,
            &["release", "ttl", "session_gone", "store_restart", "holder_died"],
        );
        exact(UncappedReason::ALL, &["safety_valve", "broker_error"]);
        exact(FallbackMode::ALL, &["fail_open", "divided", "fail_closed"]);
        exact(
            CrashPoint::ALL,
            &[
                "immediate",
                "hard_limit",
                "mid_reservation",
                "holding_lock",
                "in_transaction",
                "sleeping_to_slot",
                "mid_fetch",
            ],
        );
        exact(
            FaultKind::ALL,
            &[
                "kill",
                "store_outage",
                "store_latency",
                "store_restart",
                "partition",
                "long_transaction",
                "destination_throttle",
                "clock",
            ],
        );
    }

    /// An event with a named value reads from, and writes, the JSON it always had; a name the
    /// schema does not know is an error, not a silent default.
    #[test]
    fn events_keep_their_json() {
        let line = r#"{"ev":"lock_released","t":5,"pid":1,"lock":0,"reason":"holder_died"}"#;
        let ev: Event = serde_json::from_str(line).unwrap();
        assert_eq!(
            ev,
            Event::LockReleased {
                t: 5,
                pid: 1,
                lock: 0,
                reason: ReleaseReason::HolderDied
            }
        );
        assert_eq!(serde_json::to_string(&ev).unwrap(), line);
        let bad = r#"{"ev":"crash","t":5,"pid":1,"point":"somewhere"}"#;
        assert!(serde_json::from_str::<Event>(bad).is_err());
    }
}
