//! The contract of a live adapter: which store it needs ([`Open::STORE`]), how a worker opens
//! its connection ([`Open::open`]), how an operation runs ([`LiveStore::execute`]) and what it
//! returns ([`Executed`], [`Served`]); and what live mode asks of a backend it runs
//! ([`LiveSpec`]) and of the registry ([`Backends`]). The worker loop ([`crate::live::worker`],
//! [`crate::live::driver`]) is written against it; the adapters (the files beside this one)
//! implement it, and [`super::LiveOf`], the `LiveSpec` of an adapter, runs the worker loop. It
//! sits below both, so neither reaches back up to the other.

use crate::backend::{Backend, StoreOp, StoreReply};
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::trace::{Event, MultiplierCause, ReleaseReason, StoreErrorKind};
use std::time::Duration;

/// Which store a backend's real operation runs against.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StoreUse {
    /// None: an in-process pacer.
    None,
    /// PostgreSQL.
    Postgres,
    /// Redis.
    Redis,
}

/// Why a worker could not open or connect its live store ([`Open::open`],
/// [`Open::connect`]): the worker reports it to the parent as fatal, which ends the run with
/// `worker <pid>: <message>`.
///
/// A team's adapter returns it from `open` and `connect`; `?` converts into it from a
/// `String` or `&str` message (kept verbatim), from a `redis::RedisError` and from a
/// `tokio_postgres::Error` (their own text).
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The worker was given no target for the store its backend needs (a configuration
    /// failure: the parent hands each worker the targets of [`Open::STORE`]).
    #[error("no {0} target for this worker")]
    NoTarget(&'static str),
    /// The worker's first connection to its store failed.
    #[error("cannot connect to {store}")]
    Connect {
        /// The store: `PostgreSQL` or `Redis`.
        store: &'static str,
        /// How it failed: refused or timed out.
        failure: StoreFailure,
    },
    /// Warming a fresh PostgreSQL connection (a statement run and rolled back) failed.
    #[error("warming the PostgreSQL connection: {0}")]
    Warm(#[source] ::tokio_postgres::Error),
    /// A PostgreSQL statement failed (its own text).
    #[error(transparent)]
    Postgres(#[from] ::tokio_postgres::Error),
    /// A Redis command failed (its own text).
    #[error(transparent)]
    Redis(#[from] ::redis::RedisError),
    /// Any other reason, in the adapter's own words (a team's adapter, `Err(format!(..))?`).
    #[error("{0}")]
    Other(String),
}

impl From<String> for AdapterError {
    fn from(message: String) -> AdapterError {
        AdapterError::Other(message)
    }
}

impl From<&str> for AdapterError {
    fn from(message: &str) -> AdapterError {
        AdapterError::Other(message.to_string())
    }
}

/// Its text: code that keeps errors as strings (`Result<_, String>`) takes one with `?`.
impl From<AdapterError> for String {
    fn from(e: AdapterError) -> String {
        e.to_string()
    }
}

/// A store operation failed: refused (an error) or timed out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StoreFailure(pub StoreErrorKind);

/// A store-side event of a real operation (the simulator's store side emits the same ones),
/// with the store clock's reading (ns since the Unix epoch) when it happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Served {
    /// A slot was granted; `now` is the store clock when it granted.
    Grant {
        /// The slot (ns, granting clock).
        slot: i64,
        /// The granting clock's reading.
        now: i64,
        /// Interval applied (ns).
        interval: u64,
        /// Multiplier applied.
        multiplier: f64,
    },
    /// A slot granted on the *process's* clock (the process-clock defect): stamped when the
    /// operation left.
    GrantOnProcessClock {
        /// The slot (ns, the process's clock).
        slot: i64,
        /// The process's reading sent with the operation.
        now: i64,
        /// Interval applied (ns).
        interval: u64,
        /// Multiplier applied.
        multiplier: f64,
    },
    /// The store refused permission for now.
    Deny,
    /// A lock was taken at store time `at`.
    LockAcquired {
        /// Lock number.
        lock: u32,
        /// Store clock (ns).
        at: i64,
    },
    /// A lock was released at store time `at`.
    LockReleased {
        /// Lock number.
        lock: u32,
        /// Store clock (ns).
        at: i64,
    },
    /// The shared multiplier changed at store time `at`.
    Multiplier {
        /// Before.
        from: f64,
        /// After.
        to: f64,
        /// What moved it.
        cause: MultiplierCause,
        /// Store clock (ns).
        at: i64,
    },
}

impl Served {
    /// The trace event, at run time `t`, for process `pid`.
    pub fn event(self, t: u64, pid: u32) -> Event {
        match self {
            Served::Grant {
                slot,
                now,
                interval,
                multiplier,
            }
            | Served::GrantOnProcessClock {
                slot,
                now,
                interval,
                multiplier,
            } => Event::Grant {
                t,
                pid,
                thread: 0,
                slot,
                now,
                interval,
                multiplier,
            },
            Served::Deny => Event::Deny { t, pid },
            Served::LockAcquired { lock, .. } => Event::LockAcquired { t, pid, lock },
            Served::LockReleased { lock, .. } => Event::LockReleased {
                t,
                pid,
                lock,
                reason: ReleaseReason::Release,
            },
            Served::Multiplier { from, to, cause, .. } => Event::Multiplier {
                t,
                pid: None,
                from,
                to,
                cause,
            },
        }
    }
}

/// What a real operation returned.
#[derive(Clone, Debug)]
pub struct Executed<R> {
    /// The reply.
    pub reply: R,
    /// The store-side events it caused.
    pub served: Vec<Served>,
    /// The operation left the caller's transaction open (`in_transaction`).
    pub in_transaction: bool,
}

impl<R> Executed<R> {
    /// A reply with no store-side event.
    pub fn reply(reply: R) -> Executed<R> {
        Executed {
            reply,
            served: Vec::new(),
            in_transaction: false,
        }
    }
    /// With one more store-side event.
    pub fn with(mut self, s: Served) -> Executed<R> {
        self.served.push(s);
        self
    }
}

impl Executed<crate::backend::lockset::LockReply> {
    /// The answer to a try: the lock `taken` at store time `at_us` (µs), or busy.
    pub fn tried(taken: bool, lock: u32, at_us: i64) -> Self {
        use crate::backend::lockset::LockReply;
        if taken {
            Executed::reply(LockReply::Locked { lock }).with(Served::LockAcquired { lock, at: at_us * 1000 })
        } else {
            Executed::reply(LockReply::Busy)
        }
    }

    /// The answer to an unlock: a store-side release only if the lock was still `mine`.
    pub fn unlocked(mine: bool, lock: u32, at_us: i64) -> Self {
        let e = Executed::reply(crate::backend::lockset::LockReply::Unlocked);
        if mine {
            e.with(Served::LockReleased { lock, at: at_us * 1000 })
        } else {
            e
        }
    }
}

/// A backend's store side, for real: one worker's connection.
#[allow(async_fn_in_trait)] // run on one worker's single-threaded runtime: no Send bound needed
pub trait LiveStore {
    /// The backend's operations.
    type Op: StoreOp;
    /// The backend's replies.
    type Reply: StoreReply;
    /// Run `op` for real (the worker bounds it by the store timeout). `rng` is the worker's
    /// store-side stream (a transaction's hold time).
    async fn execute(&mut self, op: &Self::Op, rng: &mut Rng) -> Result<Executed<Self::Reply>, StoreFailure>;
    /// The last operation failed or timed out: the connection's state is unknown, so the next
    /// operation uses a fresh one.
    fn reset(&mut self);
}

/// How a worker opens a backend's live store.
#[allow(async_fn_in_trait)]
pub trait Open: LiveStore + Sized {
    /// The backend whose store side this is.
    type Backend: Backend<Op = Self::Op, Reply = Self::Reply>;
    /// The store it runs against.
    const STORE: StoreUse;
    /// Slot rows the run's schema needs (`claim_row`). Default 1.
    fn slots(_sc: &Scenario) -> u32 {
        1
    }
    /// The backend's own tables (PostgreSQL): SQL statements the runner runs once per run, in
    /// order and in one transaction, right after it creates the run's schema and before any
    /// worker starts, with that schema first on the `search_path` (so `CREATE TABLE log (...)`
    /// lands in it, and a worker's unqualified `log` finds it:
    /// [`PgLink::schema`](super::PgLink::schema) names it too). They are dropped with the
    /// schema after the run, whatever its end. A statement that fails stops the run before it
    /// starts (exit 2, the server's error quoted). A `state_lost` fault does not touch them (it
    /// clears pacesim's own `pace`, `cache` and `slots`). Redis needs no such hook: every key
    /// under the run's prefix ([`RedisLink::key`](super::RedisLink::key)) is deleted after the
    /// run and by `state_lost`. Default: none.
    fn tables(_sc: &Scenario) -> Vec<String> {
        Vec::new()
    }
    /// The worker's link to its store, not yet connected.
    ///
    /// # Errors
    ///
    /// The worker cannot run against its store (no target for it, a bad option): the run ends
    /// with the error's text.
    async fn open(spec: &WorkerSpec, backend: &Self::Backend, timeout: Duration) -> Result<Self, AdapterError>;
    /// Connect and warm up: the worker's first connection (whether it must succeed is the
    /// worker's business, [`crate::live::worker::main_with`]). Default: nothing to connect.
    ///
    /// # Errors
    ///
    /// The store cannot be reached or refuses the warm-up.
    async fn connect(&mut self) -> Result<(), AdapterError> {
        Ok(())
    }
}

/// The store timeout of a scenario (`store.timeout`, default 5 s).
pub fn timeout(sc: &Scenario) -> Duration {
    Duration::from_nanos(sc.store.timeout().0)
}

/// The registry's view of a live adapter: what live mode needs of a backend it runs.
pub trait LiveSpec: Sync {
    /// The store the backend needs.
    fn store(&self) -> StoreUse;

    /// Slot rows the run's schema needs.
    fn slots(&self, sc: &Scenario) -> u32;
    /// The backend's own tables, created in the run's schema before any worker starts
    /// ([`Open::tables`]). Default: none.
    fn tables(&self, _sc: &Scenario) -> Vec<String> {
        Vec::new()
    }
    /// Run one worker process (the hidden `pacesim worker` mode); its exit status.
    fn worker_main(&self, spec: WorkerSpec) -> i32;
}

/// What live mode needs of the backends a scenario may name, by name: the registry's answers
/// ([`crate::registry::Registered`]: pacesim's backends and registered ones), handed to live
/// mode in [`crate::live::LiveOptions`] because the registry sits above it.
pub trait Backends: Sync + std::fmt::Debug {
    /// The live adapter of `sc`'s backend; `None`: unknown, or simulator only.
    fn adapter(&self, sc: &Scenario) -> Option<&'static dyn LiveSpec>;
    /// The backends that have a live adapter, for messages.
    fn live_names(&self) -> Vec<&'static str>;
    /// The options in force of `sc`'s backend (the trace header's `backend_detail`, and the
    /// `pacer` an external worker is told); `None`: unknown backend.
    fn detail(&self, sc: &Scenario) -> Option<serde_json::Value>;
    /// Simulate `sc` with its backend (`conform`'s other side), streaming its trace.
    ///
    /// # Errors
    ///
    /// The run stopped making progress.
    fn simulate(&self, sc: &Scenario, out: &mut dyn crate::trace::Sink) -> Result<(), crate::sim::NoProgress>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A team's adapter keeps its own words and its library's: `?` on a `String`, a `&str` or
    /// a Redis error gives an `AdapterError` with that very text.
    #[test]
    fn adapter_errors_convert_keeping_their_text() {
        fn own() -> Result<(), AdapterError> {
            Err(format!("script {} did not load", 7))?
        }
        fn word() -> Result<(), AdapterError> {
            Err("no such key")?
        }
        fn script() -> Result<(), ::redis::RedisError> {
            Err((::redis::ErrorKind::UnexpectedReturnType, "not a number").into())
        }
        fn library() -> Result<(), AdapterError> {
            script()?;
            Ok(())
        }
        assert_eq!(own().unwrap_err().to_string(), "script 7 did not load");
        assert_eq!(word().unwrap_err().to_string(), "no such key");
        let ours = library().unwrap_err();
        assert_eq!(ours.to_string(), script().unwrap_err().to_string());
        assert!(matches!(ours, AdapterError::Redis(_)));
        let refused = StoreFailure(StoreErrorKind::Refused);
        let connect = AdapterError::Connect {
            store: "Redis",
            failure: refused,
        };
        assert_eq!(connect.to_string(), "cannot connect to Redis");
        assert_eq!(
            AdapterError::NoTarget("PostgreSQL").to_string(),
            "no PostgreSQL target for this worker"
        );
    }
}
