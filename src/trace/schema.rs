//! The trace's schema: the [`Header`] (with its [`Detail`]), the [`Event`]s, and the named
//! values their fields take. A field that takes one of a closed set of names is an enum whose
//! serde names are those names, so the JSON holds the same strings it always did.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Version of the trace format; bumped on any incompatible change.
///
/// - 2: `fallback` events carry `multiplier`, the multiplier the process's own fallback pacer
///   paces by (a version 1 trace lacks it; it reads as 1).
/// - 3: `job_event` (a download's event: pending, running, finalised with a reason, stranded)
///   and `backfill` (a source's backfill state) events, written by scenarios with a `[jobs]`
///   table; `platform` events (which platform a process's job is on) and
///   `backend_detail.platforms` (each platform's name, ceiling and whether its walks are
///   serialised), written by scenarios that declare platforms. The events of one thread's loop
///   (`op_sent`, `grant`, `reply`, `store_error`, `fetch_start`, `fetch_end`) carry `thread`,
///   the thread of the process that made them (`[processes] threads`), written only when it is
///   not 0, so a one-thread trace reads as before and an older trace reads as thread 0; so does
///   `arrival`, the thread whose request reached the destination (added within version 3: an
///   earlier version 3 trace reads as thread 0, as a one-thread trace always did).
pub const TRACE_VERSION: u32 = 3;

/// The oldest trace version this build reads.
pub(crate) const OLDEST_TRACE_VERSION: u32 = 1;

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
    /// The backend's options in force, and the scenario settings the checkers read.
    pub backend_detail: Detail,
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
        /// A later step of a backend's own protocol, sent while its process still waits for
        /// the permission an earlier step asked for (the append after a check, a confirm after
        /// a claim): label the first step [`Acquire`](OpKind::Acquire) and each later one
        /// `Complete` (CONTRIBUTING.md says the same). It does not ask anew: the wait runs on
        /// from the first step, and its round trip is not a second permission round trip. A
        /// `grant` that answers it comes from the shared authority, as one answering the
        /// first step would (`backoff_coherence` spaces it by the design's stated burst).
        /// (Labelled `Acquire` instead, a later step is judged alike, but counts as a round
        /// trip of its own.)
        Complete = "complete",
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
            OpKind::Report | OpKind::Unlock | OpKind::Complete => false,
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
        /// The stored multiplier vanished with the store's state (`state_lost`): back to 1.
        StateLost = "state_lost",
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
        /// The lock's row or key vanished with the store's state (a `state_lost` fault).
        StateLost = "state_lost",
    }
}

impl ReleaseReason {
    /// Whether the holder's critical section ended with the lock (it released it or died);
    /// false when the store dropped the lock under a live holder.
    pub const fn ends_section(self) -> bool {
        match self {
            ReleaseReason::Release | ReleaseReason::HolderDied => true,
            ReleaseReason::Ttl
            | ReleaseReason::SessionGone
            | ReleaseReason::StoreRestart
            | ReleaseReason::StateLost => false,
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
    /// A download event's state (`job_event` events).
    pub enum JobState {
        /// The tick created it and enqueued its task.
        Pending = "pending",
        /// Its task found the walk lock taken and re-enqueued itself with a countdown: the
        /// event stays pending (no new event).
        Requeued = "requeued",
        /// Its task's process was killed; the broker delivers the task again (the same event).
        Redelivered = "redelivered",
        /// Its walk (the subprocess) started.
        Running = "running",
        /// Finalised: the walk ended by itself (rc = 0).
        Complete = "complete",
        /// Finalised: the walk hit its time box but advanced (a chunk boundary; status ok).
        Partial = "partial",
        /// Finalised: the subprocess timed out (an error).
        Timeout = "timeout",
        /// Finalised by the task's own handler of its soft time limit.
        SoftLimit = "soft_limit",
        /// Left `running` and marked stranded by the recovery sweep.
        Stranded = "stranded",
    }
}

impl JobState {
    /// Whether the job finalised the event itself (phase 3 ran, or the soft-limit handler).
    pub const fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Complete | JobState::Partial | JobState::Timeout | JobState::SoftLimit
        )
    }

    /// Whether the event is closed: finalised, or recovered (stranded) by the sweep.
    pub const fn closes(self) -> bool {
        self.is_final() || matches!(self, JobState::Stranded)
    }
}

names! {
    /// A source's backfill state (`backfill` events; the record's `_backfill_state`).
    pub enum BackfillState {
        /// Continues in chunks across ticks.
        Running = "running",
        /// The walk reached the bottom (rc = 0).
        Complete = "complete",
        /// Paused: no cursor progress (the stall guard) or the chunk cap reached.
        Stalled = "stalled",
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

pub use crate::choice::KillPoint;

/// Where in its protocol a process was killed (`crash` events): at one of its protocol's kill
/// points ([`KillPoint`], whose names these are), or wherever the kill found it, or past its
/// job's hard time limit. The trace writes the name ([`CrashPoint::name`]) and nothing else.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashPoint {
    /// Wherever it was when the kill fired (`immediate`).
    Immediate,
    /// Its job passed the hard time limit (`hard_limit`).
    HardLimit,
    /// At a kill point (named as the kill point is: `mid_reservation`, ...).
    At(KillPoint),
}

impl CrashPoint {
    /// Every value: the two that are not kill points, then each kill point in
    /// [`KillPoint::ALL`]'s order.
    pub const ALL: &[CrashPoint] = &[
        CrashPoint::Immediate,
        CrashPoint::HardLimit,
        CrashPoint::At(KillPoint::MidReservation),
        CrashPoint::At(KillPoint::HoldingLock),
        CrashPoint::At(KillPoint::InTransaction),
        CrashPoint::At(KillPoint::SleepingToSlot),
        CrashPoint::At(KillPoint::MidFetch),
    ];

    /// The name the trace writes.
    pub const fn name(self) -> &'static str {
        match self {
            CrashPoint::Immediate => "immediate",
            CrashPoint::HardLimit => "hard_limit",
            CrashPoint::At(p) => p.name(),
        }
    }

    /// The kill point it was killed at, if at one.
    pub const fn kill_point(self) -> Option<KillPoint> {
        match self {
            CrashPoint::At(p) => Some(p),
            _ => None,
        }
    }
}

impl From<KillPoint> for CrashPoint {
    fn from(p: KillPoint) -> CrashPoint {
        CrashPoint::At(p)
    }
}

impl std::fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for CrashPoint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for CrashPoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        CrashPoint::ALL.iter().copied().find(|p| p.name() == s).ok_or_else(|| {
            let all: Vec<String> = CrashPoint::ALL.iter().map(|p| format!("`{}`", p.name())).collect();
            serde::de::Error::custom(format!("unknown variant `{s}`, expected one of {}", all.join(", ")))
        })
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
        /// What the backend keeps in the store vanishes (a truncated table, a culled key).
        StateLost = "state_lost",
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

names! {
    /// Where a pace backend keeps its backoff multiplier (`backend_detail.backoff`).
    pub enum BackoffPlace {
        /// In the shared store: one multiplier for the fleet.
        Global = "global",
        /// In each process's memory.
        PerProcess = "per_process",
    }
}

names! {
    /// What the locks of a lock backend are used for (`backend_detail.lock_use`).
    pub enum LockUse {
        /// At most K fetches at once: a lock is held for the fetch.
        Concurrency = "concurrency",
        /// Each lock is held for a fixed time: the rejected "fake rate".
        FakeRate = "fake_rate",
    }
}

names! {
    /// What a backend does when the store fails a process (`backend_detail.fallback`).
    pub enum StoreFallback {
        /// Pace locally at the full rate.
        FailOpen = "fail_open",
        /// Pace locally at `rate / (cap + 1)`.
        Divided = "divided",
        /// Stop fetching until the store answers again.
        FailClosed = "fail_closed",
        /// Run the job without the lock (a lock backend's broker error).
        Uncapped = "uncapped",
    }
}

impl From<FallbackMode> for StoreFallback {
    fn from(m: FallbackMode) -> StoreFallback {
        match m {
            FallbackMode::FailOpen => StoreFallback::FailOpen,
            FallbackMode::Divided => StoreFallback::Divided,
            FallbackMode::FailClosed => StoreFallback::FailClosed,
        }
    }
}

/// The scenario settings a producer adds to the backend's options (see [`Detail::new`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ScenarioSettings {
    /// `[backoff] factor`.
    pub backoff_factor: f64,
    /// `[backoff] decay_after`.
    pub decay_after: u32,
    /// `[checks] epsilon`.
    pub epsilon: f64,
    /// Mean think time between jobs, ns.
    pub think_mean_ns: f64,
    /// Mean fetch time plus destination latency, ns.
    pub fetch_mean_ns: f64,
    /// Open loop: jobs per second per process; `None` for a closed loop (written `null`).
    pub arrival_rate: Option<f64>,
    /// `[checks] wait_bound`, ns; `None`: not written at all.
    pub wait_bound_ns: Option<u64>,
}

/// One platform of `backend_detail.platforms`: a destination of its own, judged against its
/// own ceiling.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformDetail {
    /// Its name (`patreon`).
    pub name: String,
    /// Its destination's ceiling, requests per second: what `ceiling` judges its arrivals by.
    pub limit: f64,
    /// The burst its `ceiling` tolerates. Absent: the header's `burst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Its walks take the platform's lock (`SERIALIZED_PLATFORMS`); else they run uncapped.
    pub serialized: bool,
}

crate::exact_hash!(PlatformDetail {
    name,
    limit: bits,
    burst,
    serialized
});

/// What a backend states about its design that the checkers judge it by: typed and required
/// ([`crate::backend::Backend::facts`]), written into the trace header's `backend_detail`
/// beside its other options ([`Facts::with_options`]) and read back as [`Detail`]'s typed
/// fields. A fact left `None` is not stated; [`Detail`]'s field of the same name says what a
/// checker then assumes, or that it does not judge. Facts that state nothing at all
/// (`Facts::default()`) are refused ([`crate::backend::stated`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// The shared authority's GCRA burst (its tolerance is `burst - 1` intervals): the design's
    /// own, which `self_heal` (the quiet after a burst) and `backoff_coherence` (the spacing of
    /// its grants) allow. `None`: 1. `ceiling` and `slot_ceiling` do not read it: they judge
    /// by what the destination tolerates, the scenario's `[checks] burst` (the header's
    /// `burst`), whatever the design states, so a design burstier than its destination fails
    /// them.
    pub burst: Option<u64>,
    /// What it does when the store fails a process (`degradation`, `liveness`).
    pub fallback: Option<StoreFallback>,
    /// A divided fallback's cap: each process paces at `rate / (cap + 1)`. `None`:
    /// `processes - 1`.
    pub cap: Option<u64>,
    /// A lock design's K, the critical sections at once (`mutual_exclusion`). `None`: not a
    /// lock design, unless [`lock_use`](Self::lock_use) or [`ttl_ns`](Self::ttl_ns) says so.
    pub locks: Option<u64>,
    /// Where a pace design keeps its backoff multiplier (`backoff_coherence`). `None`: no
    /// backoff schedule of its own.
    pub backoff: Option<BackoffPlace>,
    /// What a lock design's locks are for.
    pub lock_use: Option<LockUse>,
    /// Fetches per walk (a walk lock).
    pub walk: Option<u64>,
    /// How long the store takes to notice a dead holder's session and free its lock, ns.
    pub detect_dead_ns: Option<u64>,
    /// A lock key's time to live, ns.
    pub ttl_ns: Option<u64>,
    /// The platforms, each with its own destination and ceiling (`ceiling` per platform).
    pub platforms: Option<Vec<PlatformDetail>>,
    /// A design whose processes pace alone (each its own pacer, nothing shared: `local`,
    /// `local_divided`): one pacer's spacing, ns. A kill takes the victim's slots with it and
    /// leaves the others' pacers as they were, so `self_heal` measures a stall against this
    /// spacing. `None`: the pace is shared (the fleet's interval, `1 / rate`).
    pub process_spacing_ns: Option<u64>,
}

impl Facts {
    /// The `backend_detail` a producer writes for a backend (before the scenario settings):
    /// `options`, its other options in force (a JSON object, opaque: for people), with these
    /// facts.
    ///
    /// # Errors
    ///
    /// `options` is not a JSON object, or names a key of the header's typed detail (a fact is
    /// stated here, typed and once, never as free JSON).
    pub fn with_options(&self, options: Value) -> Result<Value, String> {
        let Value::Object(other) = options else {
            return Err(format!(
                "its options in force (Backend::detail) must be a JSON object, not {options}"
            ));
        };
        // a key the header's typed detail reads leaves `other` when read back (`null` stays)
        let read = Detail::from_map(other.clone())?;
        if let Some(k) = other.keys().find(|k| !read.other.contains_key(*k)) {
            return Err(format!(
                "Backend::detail names `{k}`, a key the checkers read: state it in Backend::facts (typed)"
            ));
        }
        let d = Detail {
            burst: self.burst,
            fallback: self.fallback,
            cap: self.cap,
            locks: self.locks,
            backoff: self.backoff,
            lock_use: self.lock_use,
            walk: self.walk,
            detect_dead_ns: self.detect_dead_ns,
            ttl_ns: self.ttl_ns,
            platforms: self.platforms.clone(),
            process_spacing_ns: self.process_spacing_ns,
            other,
            ..Detail::default()
        };
        Ok(Value::Object(d.to_map()))
    }
}

/// `Header.backend_detail`: the backend's options in force and the scenario settings the
/// checkers need, as one JSON object with its keys sorted.
///
/// The typed fields are everything a checker, the summary or a report reads; each says what
/// its absence means, and where a default is needed it is stated there, once. Everything else
/// the backend states (its storage, clock source, poll interval, ...) is in [`other`](Self::other),
/// opaque: nothing reads it but people.
///
/// On disk the typed fields and `other` are merged into one object, so the header's JSON is
/// what it always was. A typed key written as `null` reads as absent and stays in `other`, so
/// it writes back as it was read; a typed key whose value has the wrong type is an error.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Detail {
    /// `backoff_factor`: the backoff multiplier's factor (`[backoff] factor`). Absent: the
    /// schedule is not stated; `backoff_coherence` assumes [`Detail::DEFAULT_BACKOFF_FACTOR`]
    /// and says so.
    pub backoff_factor: Option<f64>,
    /// `decay_after`: clean responses in a row that decay the multiplier (`[backoff]
    /// decay_after`). Absent: `backoff_coherence` assumes [`Detail::DEFAULT_DECAY_AFTER`] and
    /// says so.
    pub decay_after: Option<u32>,
    /// `epsilon`: the share of the effective rate `liveness` lets go (`[checks] epsilon`).
    /// Absent (or outside `[0, 1)`): [`Detail::DEFAULT_EPSILON`], and the verdict says so.
    pub epsilon: Option<f64>,
    /// `think_mean_ns`: mean think time between a process's jobs, ns. Absent: unknown (the
    /// offered load of a closed loop is then unknown).
    pub think_mean_ns: Option<f64>,
    /// `fetch_mean_ns`: mean fetch time plus destination latency, ns. Absent (or not
    /// positive): unknown (no lock throughput bound, and a closed loop's offered load is
    /// unknown).
    pub fetch_mean_ns: Option<f64>,
    /// `arrival_rate`: jobs per second per process when jobs arrive on their own (an open
    /// loop). Absent or `null` (the simulator writes `null` for a closed loop): the offered
    /// load is that of a closed loop, `processes / (think + fetch)` when both are known.
    pub arrival_rate: Option<f64>,
    /// `burst`: the shared authority's GCRA burst (its tolerance is `burst - 1` intervals),
    /// read by `self_heal` and `backoff_coherence`; `ceiling` and `slot_ceiling` judge by the
    /// header's `burst` (`[checks] burst`) instead. Absent: 1 ([`Detail::gcra_burst`]).
    pub burst: Option<u64>,
    /// `fallback`: what the backend does when the store fails a process. Absent: not stated;
    /// `degradation` then knows the mode only from the trace's `fallback` events, and
    /// `liveness` allows for a divided fallback's park after a store window (the longest).
    pub fallback: Option<StoreFallback>,
    /// `cap`: a divided fallback paces each process at `rate / (cap + 1)`. Absent:
    /// `processes - 1` ([`Detail::fallback_cap`]).
    pub cap: Option<u64>,
    /// `locks`: K, the number of locks (critical sections at once). Absent: 1
    /// ([`Detail::lock_count`]).
    pub locks: Option<u64>,
    /// `backoff`: where the backend keeps its backoff multiplier. Absent: the backend runs no
    /// backoff schedule of its own (a lock backend): `backoff_coherence` then does not expect
    /// a process cut off from the store to back off by itself.
    pub backoff: Option<BackoffPlace>,
    /// `lock_use`: what the locks are for. Absent: not a lock backend, or a walk lock, which
    /// has no throughput target.
    pub lock_use: Option<LockUse>,
    /// `walk`: fetches per walk (a walk lock); an uncapped job ends after this many. Absent
    /// (or 0): an uncapped job lasts until its process tries a lock again or dies
    /// ([`Detail::walk_fetches`]).
    pub walk: Option<u64>,
    /// `detect_dead_ns`: how long the store takes to notice a dead holder's session and free
    /// its lock (advisory locks). Absent: no such delay ([`Detail::dead_holder_release`]).
    pub detect_dead_ns: Option<u64>,
    /// `ttl_ns`: a lock key's time to live, which frees a dead holder's lock (TTL locks).
    /// Absent: no such delay ([`Detail::dead_holder_release`]).
    pub ttl_ns: Option<u64>,
    /// `wait_bound_ns`: the longest a process may wait for permission before `fairness` fails
    /// (`[checks] wait_bound`). Absent: `fairness` is reported, not a verdict.
    pub wait_bound_ns: Option<u64>,
    /// `stranded_after_ns`: the recovery sweep marks an event stranded once it has been
    /// `running` this long (`[jobs] stranded_after`). Absent: the trace has no download jobs;
    /// `work_heal` then does not bound how long an event stays open.
    pub stranded_after_ns: Option<u64>,
    /// `sweep_every_ns`: how often the recovery sweep runs (`[jobs] sweep_every`). Absent: 0
    /// (with [`stranded_after_ns`](Self::stranded_after_ns) it makes
    /// [`Detail::heal_bound`]).
    pub sweep_every_ns: Option<u64>,
    /// `strand_limit`: consecutive strands of one source that `work_heal` calls "forever"
    /// (`[jobs] strand_limit`). Absent: [`Detail::DEFAULT_STRAND_LIMIT`].
    pub strand_limit: Option<u64>,
    /// `platforms`: the platforms jobs are on, in index order (the `platform` events' index),
    /// each with its own destination and ceiling. Absent: one destination, at the header's
    /// `rate` ([`Detail::platforms`]).
    pub platforms: Option<Vec<PlatformDetail>>,
    /// `process_spacing_ns`: each process paces alone at this spacing
    /// ([`Facts::process_spacing_ns`]). Absent: the pace is shared.
    pub process_spacing_ns: Option<u64>,
    /// Every other key: the backend's remaining options, opaque (and any typed key written as
    /// `null`). It holds no typed key with a value: on writing, a typed field that is set
    /// replaces a key of the same name here.
    pub other: Map<String, Value>,
}

impl Detail {
    /// The design takes locks: its facts state locks, a TTL or a lock use. It grants no slots.
    pub fn is_lock_design(&self) -> bool {
        self.locks.is_some() || self.ttl_ns.is_some() || self.lock_use.is_some()
    }

    /// The backoff factor assumed when [`backoff_factor`](Self::backoff_factor) is absent.
    pub const DEFAULT_BACKOFF_FACTOR: f64 = 2.0;
    /// The streak assumed when [`decay_after`](Self::decay_after) is absent.
    pub const DEFAULT_DECAY_AFTER: u32 = 10;
    /// The tolerance assumed when [`epsilon`](Self::epsilon) is absent or out of range.
    pub const DEFAULT_EPSILON: f64 = 0.2;

    /// The detail a producer writes: the backend's options (a JSON object, as a backend
    /// states them) with the scenario settings added, typed as reading them back would type
    /// them.
    ///
    /// # Panics
    ///
    /// If `options` is not a JSON object, or gives a typed key a value of the wrong type:
    /// both are a backend's programming error.
    pub fn new(options: Value, settings: ScenarioSettings) -> Detail {
        let Value::Object(mut map) = options else {
            panic!("a backend's options are a JSON object, not {options}");
        };
        map.insert("backoff_factor".into(), settings.backoff_factor.into());
        map.insert("decay_after".into(), settings.decay_after.into());
        map.insert("epsilon".into(), settings.epsilon.into());
        map.insert("think_mean_ns".into(), settings.think_mean_ns.into());
        map.insert("fetch_mean_ns".into(), settings.fetch_mean_ns.into());
        map.insert("arrival_rate".into(), settings.arrival_rate.into());
        if let Some(b) = settings.wait_bound_ns {
            map.insert("wait_bound_ns".into(), b.into());
        }
        Detail::from_map(map).unwrap_or_else(|e| panic!("a backend's options: {e}"))
    }

    /// Types the keys the typed fields hold; the rest, and typed keys written `null`, go to
    /// [`other`](Self::other).
    fn from_map(mut map: Map<String, Value>) -> Result<Detail, String> {
        let mut other = Map::new();
        let mut take = |key: &str| -> Option<Value> {
            match map.remove(key)? {
                Value::Null => {
                    other.insert(key.to_string(), Value::Null);
                    None
                }
                v => Some(v),
            }
        };
        fn typed<T: serde::de::DeserializeOwned>(key: &str, v: Option<Value>) -> Result<Option<T>, String> {
            v.map(|v| serde_json::from_value(v).map_err(|e| format!("backend_detail.{key}: {e}")))
                .transpose()
        }
        let d = Detail {
            backoff_factor: typed("backoff_factor", take("backoff_factor"))?,
            decay_after: typed("decay_after", take("decay_after"))?,
            epsilon: typed("epsilon", take("epsilon"))?,
            think_mean_ns: typed("think_mean_ns", take("think_mean_ns"))?,
            fetch_mean_ns: typed("fetch_mean_ns", take("fetch_mean_ns"))?,
            arrival_rate: typed("arrival_rate", take("arrival_rate"))?,
            burst: typed("burst", take("burst"))?,
            fallback: typed("fallback", take("fallback"))?,
            cap: typed("cap", take("cap"))?,
            locks: typed("locks", take("locks"))?,
            backoff: typed("backoff", take("backoff"))?,
            lock_use: typed("lock_use", take("lock_use"))?,
            walk: typed("walk", take("walk"))?,
            detect_dead_ns: typed("detect_dead_ns", take("detect_dead_ns"))?,
            ttl_ns: typed("ttl_ns", take("ttl_ns"))?,
            wait_bound_ns: typed("wait_bound_ns", take("wait_bound_ns"))?,
            stranded_after_ns: typed("stranded_after_ns", take("stranded_after_ns"))?,
            sweep_every_ns: typed("sweep_every_ns", take("sweep_every_ns"))?,
            strand_limit: typed("strand_limit", take("strand_limit"))?,
            platforms: typed("platforms", take("platforms"))?,
            process_spacing_ns: typed("process_spacing_ns", take("process_spacing_ns"))?,
            other: Map::new(),
        };
        other.append(&mut map);
        Ok(Detail { other, ..d })
    }

    /// The one JSON object the header holds: [`other`](Self::other) with the typed fields
    /// that are set (keys sorted).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut map = self.other.clone();
        let mut put = |key: &str, v: Option<Value>| {
            if let Some(v) = v {
                map.insert(key.to_string(), v);
            }
        };
        put("backoff_factor", self.backoff_factor.map(Value::from));
        put("decay_after", self.decay_after.map(Value::from));
        put("epsilon", self.epsilon.map(Value::from));
        put("think_mean_ns", self.think_mean_ns.map(Value::from));
        put("fetch_mean_ns", self.fetch_mean_ns.map(Value::from));
        put("arrival_rate", self.arrival_rate.map(Value::from));
        put("burst", self.burst.map(Value::from));
        put("fallback", self.fallback.map(|f| Value::from(f.name())));
        put("cap", self.cap.map(Value::from));
        put("locks", self.locks.map(Value::from));
        put("backoff", self.backoff.map(|b| Value::from(b.name())));
        put("lock_use", self.lock_use.map(|u| Value::from(u.name())));
        put("walk", self.walk.map(Value::from));
        put("detect_dead_ns", self.detect_dead_ns.map(Value::from));
        put("ttl_ns", self.ttl_ns.map(Value::from));
        put("wait_bound_ns", self.wait_bound_ns.map(Value::from));
        put("stranded_after_ns", self.stranded_after_ns.map(Value::from));
        put("sweep_every_ns", self.sweep_every_ns.map(Value::from));
        put("strand_limit", self.strand_limit.map(Value::from));
        put(
            "platforms",
            self.platforms
                .as_ref()
                .map(|p| serde_json::to_value(p).expect("platforms serialise")),
        );
        put("process_spacing_ns", self.process_spacing_ns.map(Value::from));
        map
    }

    /// `work_heal`'s default for [`strand_limit`](Self::strand_limit): three strands in a row
    /// (pacesim's choice: one is bad luck, two a pattern, three a source that will not heal).
    pub const DEFAULT_STRAND_LIMIT: u64 = 3;

    /// How long an event may stay in one open phase (pending until its walk runs, running
    /// until it is finalised or stranded): `stranded_after_ns + sweep_every_ns`, the latest a
    /// sweep can recover a running event; `None` when the trace states no sweep.
    pub fn heal_bound(&self) -> Option<u64> {
        self.stranded_after_ns
            .map(|s| s.saturating_add(self.sweep_every_ns.unwrap_or(0)))
    }

    /// Consecutive strands that count as "forever": [`strand_limit`](Self::strand_limit), at
    /// least 1; [`Detail::DEFAULT_STRAND_LIMIT`] when absent.
    pub fn strand_limit(&self) -> u64 {
        self.strand_limit.unwrap_or(Self::DEFAULT_STRAND_LIMIT).max(1)
    }

    /// The platforms the trace declares (empty: one destination at the header's rate).
    pub fn platforms(&self) -> &[PlatformDetail] {
        self.platforms.as_deref().unwrap_or(&[])
    }

    /// The shared authority's GCRA burst: [`burst`](Self::burst), at least 1; 1 when absent.
    pub fn gcra_burst(&self) -> u64 {
        self.burst.unwrap_or(1).max(1)
    }

    /// `threads`: thread loops per process (`[processes] threads`; a producer writes it only
    /// above 1). Absent: 1.
    pub fn threads(&self) -> u64 {
        self.other.get("threads").and_then(Value::as_u64).unwrap_or(1).max(1)
    }

    /// `max_concurrency`: at most K jobs in flight per process (`[processes] max_concurrency`).
    /// Absent: no bound beyond the threads.
    pub fn max_concurrency(&self) -> Option<u64> {
        self.other.get("max_concurrency").and_then(Value::as_u64)
    }

    /// `process_side = "per_thread"`: each thread of a process runs its own instance of the
    /// backend's process side (its own pacer), rather than one the process's threads share
    /// (`"shared"`, or absent).
    pub fn process_side_per_thread(&self) -> bool {
        self.other.get("process_side").and_then(Value::as_str) == Some("per_thread")
    }

    /// A divided fallback's `cap` for `processes` processes: [`cap`](Self::cap), or
    /// `processes - 1` when absent.
    pub fn fallback_cap(&self, processes: u32) -> u64 {
        self.cap.unwrap_or(u64::from(processes).saturating_sub(1))
    }

    /// K: [`locks`](Self::locks), at least 1; 1 when absent.
    pub fn lock_count(&self) -> u64 {
        self.locks.unwrap_or(1).max(1)
    }

    /// The fetches after which an uncapped job ends: [`walk`](Self::walk), if positive.
    pub fn walk_fetches(&self) -> Option<u64> {
        self.walk.filter(|w| *w > 0)
    }

    /// How long after its holder dies a lock frees by the store's own doing: the larger of
    /// [`detect_dead_ns`](Self::detect_dead_ns) and [`ttl_ns`](Self::ttl_ns) (the first on a
    /// tie), named `detect_dead` or `ttl`; `None` when neither is positive.
    pub fn dead_holder_release(&self) -> Option<(&'static str, u64)> {
        let mut best = None;
        for (name, ns) in [("detect_dead", self.detect_dead_ns), ("ttl", self.ttl_ns)] {
            if let Some(ns) = ns
                && ns > best.map_or(0, |(_, b)| b)
            {
                best = Some((name, ns));
            }
        }
        best
    }
}

impl Serialize for Detail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Detail {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Detail, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        Detail::from_map(map).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {

    /// A backend's facts are typed and stated once: its free-form options may not name a key
    /// the checkers read, and must be a JSON object; what it states comes back typed.
    #[test]
    fn facts_are_stated_typed_and_once() {
        let f = Facts {
            burst: Some(5),
            fallback: Some(StoreFallback::Divided),
            ..Facts::default()
        };
        let v = f.with_options(serde_json::json!({"window_ns": 7})).unwrap();
        let d: Detail = serde_json::from_value(v).unwrap();
        assert_eq!((d.burst, d.fallback), (Some(5), Some(StoreFallback::Divided)));
        assert_eq!(d.other.get("window_ns"), Some(&Value::from(7)));
        let e = f.with_options(serde_json::json!({"burst": 5})).unwrap_err();
        assert!(
            e.contains("names `burst`, a key the checkers read: state it in Backend::facts"),
            "{e}"
        );
        let e = f.with_options(serde_json::json!(["x"])).unwrap_err();
        assert!(e.contains("must be a JSON object"), "{e}");
    }
    use super::*;
    use crate::trace::Event;

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
            &["reserve", "report", "gcra", "try_lock", "unlock", "acquire", "complete"],
        );
        exact(StoreErrorKind::ALL, &["refused", "timeout"]);
        exact(MultiplierCause::ALL, &["429", "503", "decay", "error", "state_lost"]);
        exact(
            ReleaseReason::ALL,
            &[
                "release",
                "ttl",
                "session_gone",
                "store_restart",
                "holder_died",
                "state_lost",
            ],
        );
        exact(UncappedReason::ALL, &["safety_valve", "broker_error"]);
        exact(
            JobState::ALL,
            &[
                "pending",
                "requeued",
                "redelivered",
                "running",
                "complete",
                "partial",
                "timeout",
                "soft_limit",
                "stranded",
            ],
        );
        exact(BackfillState::ALL, &["running", "complete", "stalled"]);
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
        exact(LockUse::ALL, &["concurrency", "fake_rate"]);
        exact(BackoffPlace::ALL, &["global", "per_process"]);
        exact(StoreFallback::ALL, &["fail_open", "divided", "fail_closed", "uncapped"]);
        exact(
            FaultKind::ALL,
            &[
                "kill",
                "store_outage",
                "store_latency",
                "store_restart",
                "state_lost",
                "partition",
                "long_transaction",
                "destination_throttle",
                "clock",
            ],
        );
    }

    /// A crash's point names each kill point as the kill point names itself: every
    /// [`KillPoint`], after the two crashes that are not at one.
    #[test]
    fn crash_points_are_the_kill_points_and_two_more() {
        let at: Vec<CrashPoint> = KillPoint::ALL.iter().map(|&p| CrashPoint::from(p)).collect();
        assert_eq!(CrashPoint::ALL[2..], at[..]);
        for &p in KillPoint::ALL {
            assert_eq!(CrashPoint::At(p).name(), p.name());
            assert_eq!(CrashPoint::At(p).kill_point(), Some(p));
        }
        assert_eq!(CrashPoint::HardLimit.kill_point(), None);
        let e = serde_json::from_str::<CrashPoint>("\"somewhere\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("unknown variant `somewhere`, expected one of `immediate`, `hard_limit`, `mid_reservation`"),
            "{e}"
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

    /// Header lines as the simulator writes them (one per kind of backend; their details are
    /// those of `tests/golden/runs.jsonl`).
    const TODAYS_HEADERS: [&str; 6] = [
        r#"{"ev":"header","version":1,"source":"sim","scenario":"advisory-fake-rate","backend":"advisory","seed":23,"processes":6,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":null,"backoff_factor":2.0,"connections":null,"decay_after":10,"detect_dead_ns":5000000000,"epsilon":0.2,"fallback":"fail_closed","fetch_mean_ns":54164353.383747935,"hold_ns":250000000,"lock_use":"fake_rate","locks":2,"poll_ns":100000000,"think_mean_ns":0.0}}"#,
        r#"{"ev":"header","version":1,"source":"sim","scenario":"in-transaction","backend":"row","seed":1,"processes":4,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":null,"backoff":"global","backoff_factor":2.0,"clock":"store","decay_after":10,"epsilon":0.2,"fallback":"divided","fetch_mean_ns":54164353.383747935,"in_transaction":{"dist":"constant","value":"500ms"},"interval_ns":142857143,"storage":"pace row (migration)","streak":"global","think_mean_ns":0.0,"wait":"relative"}}"#,
        r#"{"ev":"header","version":1,"source":"sim","scenario":"eight-reservers","backend":"redis_gcra","seed":1,"processes":8,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":null,"backoff":"global","backoff_factor":2.0,"burst":1,"decay_after":10,"epsilon":0.2,"fallback":"divided","fetch_mean_ns":0.0,"interval_ns":142857143,"streak":"global","think_mean_ns":0.0}}"#,
        r#"{"ev":"header","version":1,"source":"sim","scenario":"split-bucket","backend":"local_divided","seed":54,"processes":8,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":0.7,"backoff":"per_process","backoff_factor":2.0,"decay_after":10,"epsilon":0.2,"fetch_mean_ns":54164353.383747935,"interval_ns":1142857143,"think_mean_ns":0.0}}"#,
        r#"{"ev":"header","version":1,"source":"sim","scenario":"kill-holder-claim-row","backend":"claim_row","seed":1,"processes":4,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":null,"backoff_factor":2.0,"decay_after":10,"epsilon":0.2,"fallback":"fail_closed","fetch_mean_ns":209205571.9817434,"lock_use":"concurrency","locks":2,"poll_ns":100000000,"think_mean_ns":0.0}}"#,
        r#"{"ev":"header","version":1,"source":"sim","scenario":"redis-lock-kill","backend":"redis_lock","seed":1,"processes":4,"rate":7.0,"burst":2,"multiplier_cap":8.0,"backend_detail":{"arrival_rate":null,"backoff_factor":2.0,"decay_after":10,"epsilon":0.2,"fallback":"uncapped","fetch_mean_ns":324986120.3024876,"interval_ns":500000000,"locks":1,"max_wait_ns":900000000000,"poll_ns":2000000000,"think_mean_ns":0.0,"ttl_ns":60000000000,"walk":40}}"#,
    ];

    /// Today's header JSON reads, and writes back byte for byte; the typed part holds what the
    /// checkers read, and the rest stays opaque.
    #[test]
    fn todays_headers_write_back_byte_for_byte() {
        for line in TODAYS_HEADERS {
            let h: Header = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&h).unwrap(), line);
            let d = &h.backend_detail;
            assert_eq!(d.backoff_factor, Some(2.0));
            assert_eq!(d.decay_after, Some(10));
            assert_eq!(d.epsilon, Some(0.2));
            assert_eq!(d.think_mean_ns, Some(0.0));
            assert!(d.fetch_mean_ns.is_some());
            assert!(
                d.other
                    .keys()
                    .all(|k| !TYPED.contains(&k.as_str()) || d.other[k].is_null())
            );
        }
        let d = |i: usize| {
            serde_json::from_str::<Header>(TODAYS_HEADERS[i])
                .unwrap()
                .backend_detail
        };
        let advisory = d(0);
        assert_eq!(advisory.locks, Some(2));
        assert_eq!(advisory.lock_use, Some(LockUse::FakeRate));
        assert_eq!(advisory.fallback, Some(StoreFallback::FailClosed));
        assert_eq!(advisory.dead_holder_release(), Some(("detect_dead", 5_000_000_000)));
        assert_eq!(advisory.arrival_rate, None);
        assert_eq!(advisory.other["arrival_rate"], Value::Null, "null stays where it was");
        assert_eq!(advisory.other["hold_ns"], 250_000_000, "opaque");
        assert_eq!(d(2).gcra_burst(), 1);
        assert_eq!(d(3).arrival_rate, Some(0.7));
        let redis_lock = d(5);
        assert_eq!(redis_lock.fallback, Some(StoreFallback::Uncapped));
        assert_eq!(redis_lock.walk_fetches(), Some(40));
        assert_eq!(redis_lock.dead_holder_release(), Some(("ttl", 60_000_000_000)));
        assert_eq!(redis_lock.lock_count(), 1);
    }

    const TYPED: [&str; 21] = [
        "backoff",
        "backoff_factor",
        "decay_after",
        "epsilon",
        "think_mean_ns",
        "fetch_mean_ns",
        "arrival_rate",
        "burst",
        "fallback",
        "cap",
        "locks",
        "lock_use",
        "walk",
        "detect_dead_ns",
        "ttl_ns",
        "wait_bound_ns",
        "stranded_after_ns",
        "sweep_every_ns",
        "strand_limit",
        "platforms",
        "process_spacing_ns",
    ];

    /// A version 3 header's platforms are typed, and write back byte for byte.
    #[test]
    fn platforms_are_typed_and_write_back() {
        let line = r#"{"locks":1,"platforms":[{"limit":2.5,"name":"patreon","serialized":true},{"burst":4,"limit":10.0,"name":"deviantart","serialized":false}],"walk":10}"#;
        let d: Detail = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), line);
        assert_eq!(d.platforms().len(), 2);
        assert_eq!(d.platforms()[1].burst, Some(4));
        assert!(d.other.is_empty());
        let bad = r#"{"platforms":[{"name":"patreon"}]}"#;
        let e = serde_json::from_str::<Detail>(bad).unwrap_err().to_string();
        assert!(e.contains("backend_detail.platforms"), "{e}");
    }

    /// What a producer builds is what reading its bytes gives, and the settings are written as
    /// the simulator always wrote them (a closed loop's `arrival_rate` as `null`).
    #[test]
    fn a_producers_detail_is_what_reading_it_gives() {
        let settings = ScenarioSettings {
            backoff_factor: 2.0,
            decay_after: 10,
            epsilon: 0.2,
            think_mean_ns: 0.0,
            fetch_mean_ns: 0.0,
            arrival_rate: None,
            wait_bound_ns: None,
        };
        let options = serde_json::json!({"burst": 1, "fallback": "divided", "interval_ns": 142857143});
        let d = Detail::new(options, settings);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(
            json,
            r#"{"arrival_rate":null,"backoff_factor":2.0,"burst":1,"decay_after":10,"epsilon":0.2,"fallback":"divided","fetch_mean_ns":0.0,"interval_ns":142857143,"think_mean_ns":0.0}"#
        );
        assert_eq!(serde_json::from_str::<Detail>(&json).unwrap(), d);
        assert_eq!(d.fallback, Some(StoreFallback::Divided));
        let open = Detail::new(
            serde_json::json!({}),
            ScenarioSettings {
                arrival_rate: Some(0.5),
                ..settings
            },
        );
        assert_eq!(open.arrival_rate, Some(0.5));
        assert!(!open.other.contains_key("arrival_rate"));
    }

    /// A hand-written detail may state little or nothing; the defaults are the ones the fields
    /// state. A typed key of the wrong type is an error, not a silent default.
    #[test]
    fn absent_keys_and_wrong_types() {
        let d: Detail = serde_json::from_str("{}").unwrap();
        assert_eq!(d, Detail::default());
        assert_eq!(serde_json::to_string(&d).unwrap(), "{}");
        assert_eq!((d.gcra_burst(), d.lock_count(), d.fallback_cap(4)), (1, 1, 3));
        assert_eq!((d.walk_fetches(), d.dead_holder_release()), (None, None));
        let d: Detail = serde_json::from_str(r#"{"cap":3,"in_transaction":{"hold":"500ms"},"locks":0}"#).unwrap();
        assert_eq!((d.fallback_cap(4), d.lock_count()), (3, 1));
        assert_eq!(d.other.len(), 1);
        for bad in [
            r#"{"locks":"two"}"#,
            r#"{"locks":2.5}"#,
            r#"{"fallback":"sideways"}"#,
            "[]",
        ] {
            let e = serde_json::from_str::<Detail>(bad).unwrap_err().to_string();
            assert!(bad == "[]" || e.contains("backend_detail."), "{bad}: {e}");
        }
    }
}
