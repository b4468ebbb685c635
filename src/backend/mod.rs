//! Backends: pacing strategies as data (what lives in the shared store) plus semantics (what its
//! atomic operation does, whose clock it reads, what a store failure does, what a crash leaves).
//!
//! Every backend, correct or known-defective, implements one contract: **[`Backend::serve`]
//! is applied atomically, one operation at a time, in the order the store's lock admits them**;
//! everything else a backend does runs inside one process, with that process's clocks.
//! Known-defective variants are first-class backends so the property suite can prove it
//! catches them.
//!
//! Each backend lives in its own file whose header states its semantics. Two pieces are shared
//! by the pace backends and live in their own files: [`fallback`] (what a process does when the
//! store is unreachable) and [`backoff`] (where the backoff multiplier and clean streak live).

pub mod advisory;
pub mod backoff;
pub mod claim_row;
pub mod fallback;
pub mod local;
pub mod local_divided;
pub mod lockset;
pub mod redis_gcra;
pub mod redis_lock;
pub mod row;
pub mod shared_cache;

use crate::clock::{Clock, Reading};
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{OpKind, Sink};
pub use backoff::Signal;

/// One row of `pacesim backends`.
#[derive(Debug)]
pub struct BackendInfo {
    /// Name in scenario files.
    pub name: &'static str,
    /// One line.
    pub summary: &'static str,
    /// True for the variants the design records call defective.
    pub defective: bool,
}

/// Every backend, in listing order.
pub const BACKENDS: &[BackendInfo] = &[
    BackendInfo {
        name: "row",
        summary: "one store row: slot = GREATEST(clock_timestamp(), next_allowed_at); next += interval * multiplier",
        defective: false,
    },
    BackendInfo {
        name: "shared_cache",
        summary: "the same pace under a reserved key of an existing cache table, by atomic upsert (no migration)",
        defective: false,
    },
    BackendInfo {
        name: "redis_gcra",
        summary: "GCRA in one atomic Redis script on the server clock (TIME); burst tolerance interval * (burst - 1)",
        defective: false,
    },
    BackendInfo {
        name: "local_divided",
        summary: "each process paces locally at rate / (cap + 1): holds while at most cap + 1 processes run",
        defective: false,
    },
    BackendInfo {
        name: "advisory",
        summary: "K pg_try_advisory_lock session locks: a concurrency cap, or a fake rate K / hold (rejected)",
        defective: false,
    },
    BackendInfo {
        name: "claim_row",
        summary: "a concurrency slot claimed by writing a row: a SIGKILLed holder keeps it claimed forever",
        defective: true,
    },
    BackendInfo {
        name: "redis_lock",
        summary: "SET NX PX walk lock per platform; re-enqueue on contention; uncapped after ~15 min or on broker error",
        defective: false,
    },
    BackendInfo {
        name: "local",
        summary: "a pacer in each process at the full rate: N x rate (the classic defect)",
        defective: true,
    },
];

/// Names of every backend.
pub fn names() -> Vec<&'static str> {
    BACKENDS.iter().map(|b| b.name).collect()
}

/// Options each backend accepts in `[pacer]` (besides `backend`, `compare`, `rate`).
fn accepted_options(backend: &str) -> &'static [&'static str] {
    match backend {
        "row" => &[
            "clock",
            "wait",
            "in_transaction",
            "fallback",
            "cap",
            "backoff",
            "streak",
            "stale_after",
        ],
        "shared_cache" => &["fallback", "cap", "backoff", "streak"],
        "redis_gcra" => &["fallback", "cap", "backoff", "streak", "burst"],
        "local_divided" => &["cap"],
        "advisory" => &[
            "locks",
            "lock_use",
            "hold",
            "poll",
            "detect_dead",
            "connections",
            "fallback",
            "cap",
        ],
        "claim_row" => &["locks", "poll", "fallback", "cap"],
        "redis_lock" => &["ttl", "max_wait", "poll", "walk"],
        _ => &[],
    }
}

/// Reject options the chosen backend does not use. `Err((option, message))`.
pub fn validate_options(sc: &Scenario) -> Result<(), (String, String)> {
    let p = &sc.pacer;
    let set: Vec<(&str, bool)> = vec![
        ("clock", p.clock.is_some()),
        ("wait", p.wait.is_some()),
        ("in_transaction", p.in_transaction.is_some()),
        ("fallback", p.fallback.is_some()),
        ("cap", p.cap.is_some()),
        ("backoff", p.backoff.is_some()),
        ("streak", p.streak.is_some()),
        ("stale_after", p.stale_after.is_some()),
        ("burst", p.burst.is_some()),
        ("locks", p.locks.is_some()),
        ("lock_use", p.lock_use.is_some()),
        ("hold", p.hold.is_some()),
        ("poll", p.poll.is_some()),
        ("ttl", p.ttl.is_some()),
        ("max_wait", p.max_wait.is_some()),
        ("walk", p.walk.is_some()),
        ("detect_dead", p.detect_dead.is_some()),
        ("connections", p.connections.is_some()),
    ];
    // Options are checked against the primary backend only when it is the one being run;
    // `compare` lists may include backends that ignore some options.
    let ok = accepted_options(&p.backend);
    if p.compare.is_empty() {
        for (name, present) in set {
            if present && !ok.contains(&name) {
                return Err((
                    name.to_string(),
                    format!("backend `{}` does not use option `{name}`", p.backend),
                ));
            }
        }
    }
    if let Some(it) = &p.in_transaction {
        it.hold.validate().map_err(|m| ("in_transaction.hold".to_string(), m))?;
    }
    Ok(())
}

/// Build the backend a scenario names.
pub fn build(sc: &Scenario) -> Box<dyn Backend> {
    match sc.pacer.backend.as_str() {
        "row" => Box::new(row::Row::new(sc)),
        "shared_cache" => Box::new(shared_cache::SharedCache::new(sc)),
        "redis_gcra" => Box::new(redis_gcra::RedisGcra::new(sc)),
        "local_divided" => Box::new(local_divided::LocalDivided::new(sc)),
        "advisory" => Box::new(advisory::Advisory::new(sc)),
        "claim_row" => Box::new(claim_row::ClaimRow::new(sc)),
        "redis_lock" => Box::new(redis_lock::RedisLock::new(sc)),
        "local" => Box::new(local::Local::new(sc)),
        other => unreachable!("validated backend name {other}"),
    }
}

/// An operation a process sends to the store.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Op {
    /// Reserve a slot. `proc_now` is the sender's monotonic reading (used only by the
    /// process-clock defect); `multiplier` is the sender's own multiplier when it keeps one.
    Reserve {
        /// Sender's monotonic clock reading when it sent the operation.
        proc_now: Reading,
        /// Per-process multiplier, when backoff state is per process.
        multiplier: Option<f64>,
    },
    /// Tell shared backoff state about a response.
    Report(Signal),
    /// GCRA check-and-update (`redis_gcra`), with the sender's own multiplier if it keeps one.
    Gcra {
        /// Per-process multiplier, when backoff state is per process.
        multiplier: Option<f64>,
    },
    /// Try to take lock number `lock`, without blocking.
    TryLock {
        /// Lock number.
        lock: u32,
    },
    /// Release lock number `lock` (only if still ours).
    Unlock {
        /// Lock number.
        lock: u32,
    },
}

impl Op {
    /// Trace name.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Reserve { .. } => OpKind::Reserve,
            Op::Report(_) => OpKind::Report,
            Op::Gcra { .. } => OpKind::Gcra,
            Op::TryLock { .. } => OpKind::TryLock,
            Op::Unlock { .. } => OpKind::Unlock,
        }
    }
}

/// The store's answer.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Reply {
    /// A slot, in the authority's clock frame, and that clock's reading when it granted.
    Slot {
        /// The slot.
        slot: Reading,
        /// The authority's `now`.
        now: Reading,
    },
    /// Shared backoff state after a report; `decay` tells a per-process multiplier to decay.
    Backoff {
        /// Shared multiplier after the report.
        multiplier: f64,
        /// True when a shared streak reached its threshold.
        decay: bool,
    },
    /// GCRA allowed the request.
    Allowed,
    /// GCRA denied it; it would conform after this long.
    Denied {
        /// Wait before the next try.
        retry_after: Nanos,
    },
    /// The lock is ours.
    Locked {
        /// Lock number.
        lock: u32,
    },
    /// The lock is held by someone else (or no session was free).
    Busy,
    /// The lock was released (or was no longer ours).
    Unlocked,
}

/// What serving an operation produced.
#[derive(Copy, Clone, Debug)]
pub struct Served {
    /// The reply sent back.
    pub reply: Reply,
    /// How long the store's lock stays held after the reply leaves (a caller's open
    /// transaction); zero for autocommit.
    pub hold: Nanos,
}

impl Served {
    /// A reply that releases the lock at once.
    pub fn now(reply: Reply) -> Served {
        Served {
            reply,
            hold: Nanos::ZERO,
        }
    }
}

/// What a process does next.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Step {
    /// Send an operation to the store and wait for the reply.
    Send(Op),
    /// Permission granted: sleep until this reference time, then fetch.
    FetchAt(Instant),
    /// Ask again (call [`Backend::acquire`]) at this time.
    RetryAt(Instant),
    /// The job is complete.
    Done,
}

/// The view of a process a backend gets.
#[derive(Debug)]
pub struct ProcView<'a> {
    /// Process id.
    pub pid: u32,
    /// Its monotonic clock.
    pub mono: &'a Clock,
    /// Its host's wall clock.
    pub wall: &'a Clock,
}

impl ProcView<'_> {
    /// Its monotonic reading at `t`, as unsigned nanoseconds (the local pacer's domain).
    pub fn mono_ns(&self, t: Instant) -> u64 {
        self.mono.read(t).max(0) as u64
    }
}

impl std::fmt::Debug for Cx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cx").field("t", &self.t).finish()
    }
}

/// What a backend may touch besides its own state: the time, the trace, the store's random
/// stream, and timers.
pub struct Cx<'a> {
    /// Reference time now.
    pub t: Instant,
    /// Trace output.
    pub out: &'a mut dyn Sink,
    /// The store's random stream (service-side draws such as transaction hold times).
    pub store_rng: &'a mut Rng,
    /// Timers the backend asks for: `(when, token)`; [`Backend::on_timer`] gets the token back.
    pub timers: &'a mut Vec<(Instant, u64)>,
}

/// A pacing strategy. See the module docs for the contract.
pub trait Backend {
    /// Backend name.
    fn name(&self) -> &'static str;
    /// The options in force, for reports and `--json`'s `backend_detail`.
    fn detail(&self) -> serde_json::Value;
    /// Process side: the process wants permission for its next fetch.
    fn acquire(&mut self, cx: &mut Cx, p: &ProcView) -> Step;
    /// Store side, atomic: apply `op` from `pid` at store clock reading `now`.
    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, now: Reading) -> Served;
    /// Process side: the reply to `op` arrived.
    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, op: &Op, reply: Reply) -> Step;
    /// Process side: `op` failed (store unreachable or timed out).
    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step;
    /// Process side: the fetch ended with `status`.
    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, status: u16) -> Step;
    /// A fresh process took `pid`'s place: forget its in-memory state.
    fn on_restart(&mut self, pid: u32);
    /// `pid` was killed (SIGKILL). What does it leave behind in the store? Default: nothing
    /// but the data it already wrote.
    fn on_crash(&mut self, _cx: &mut Cx, _pid: u32) {}
    /// The store restarted: session state (locks tied to sessions) is gone; rows survive.
    fn on_store_restart(&mut self, _cx: &mut Cx) {}
    /// `pid`'s job passed its soft time limit and finalises. Default: give the job up.
    fn on_soft_limit(&mut self, _cx: &mut Cx, _p: &ProcView) -> Step {
        Step::Done
    }
    /// A timer this backend asked for fired (store-side housekeeping: a TTL expiring, the
    /// store noticing a dead session).
    fn on_timer(&mut self, _cx: &mut Cx, _token: u64) {}
}
