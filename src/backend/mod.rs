//! Backends: pacing strategies as data (what lives in the shared store) plus semantics (what its
//! atomic operation does, whose clock it reads, what a store failure does, what a crash leaves).
//!
//! # The contract
//!
//! A backend is two halves that talk only through the operations it defines:
//!
//! - its **process side** ([`ProcessSide`]), one per process incarnation: what to ask the store,
//!   what a reply or an error means, when to fall back, where backoff is applied. It is a
//!   sans-IO state machine: it never sleeps, sends or reads a clock itself; it returns a
//!   [`Step`] and is called back. A restart drops it and builds a fresh one.
//!   **Threads** (`[processes] threads = M`): a process runs M loops, each with its own store
//!   connection ([`Session::thread`]). The backend says how they use the process side
//!   ([`Backend::threads`]): one instance shared by the process's threads, each call naming
//!   its thread ([`ProcCx::thread`]) and running alone, as the record's limiter runs under its
//!   `threading.Lock` ([`Threads::Shared`]: what is per process in the records, the local
//!   pacer, the cached multiplier and streak, the fallback pacer, stays per process; what is
//!   per operation in flight must be kept per thread); one instance per thread
//!   ([`Threads::PerThread`]: independent limiters on threads); or one thread only
//!   ([`Threads::Single`], the default, so a backend written for one operation in flight is
//!   never driven by several at once). The simulator
//!   (`src/sim/`) and the live worker ([`crate::live`]) drive the *same* process side
//!   through the same worker loop (`crate::worker`).
//! - its **store side** ([`StoreSide`]), one per run: the state kept in the shared store and
//!   the atomic operation on it. **[`StoreSide::serve`] is applied atomically, one operation at
//!   a time, in the order the store's lock admits them**; that one sentence is what a
//!   PostgreSQL row, a Redis script or an advisory lock satisfies. Its hooks say what a crash,
//!   a store restart or a store timer does. In live mode the store side is replaced by the
//!   real operation (an SQL statement, a Lua script).
//!
//! Operations and replies are the backend's own types ([`Backend::Op`], [`Backend::Reply`]):
//! a backend defined in another crate adds its own operations without touching pacesim. The
//! trace records each operation by its role ([`StoreOp::kind`]), which is all the checkers
//! need to know of it.
//!
//! Known-defective variants are first-class backends so the property suite can prove it
//! catches them. Every backend of pacesim is one file whose header states its semantics, plus
//! one entry in [`crate::registry`]; `fallback` (what a process does when the store is unreachable)
//! and `backoff` (where the backoff multiplier and clean streak live) are shared pieces.

// reached by the suite, not the team API
#[doc(hidden)]
pub mod advisory;
pub(crate) mod backoff;
pub(crate) mod claim_row;
pub(crate) mod fallback;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod local;
pub(crate) mod local_divided;
pub(crate) mod lockset;
pub mod options;
pub mod redis_gcra;
pub(crate) mod redis_lock;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod row;
pub(crate) mod shared_cache;

use crate::clock::{Clock, Reading};
use crate::fault::KillPoint;
use crate::rng::Rng;
use crate::time::{Instant, Nanos};
pub use crate::trace::Facts;
use crate::trace::{OpKind, Sink};
pub use backoff::Signal;

/// A backend's options struct: read from `[pacer]` (strictly, with file:line:field errors), it
/// builds the backend. The registry ([`crate::registry`]) holds one per backend.
pub trait Configure: serde::de::DeserializeOwned + 'static {
    /// The backend it builds.
    type Backend: Backend;
    /// Validate (each option's range) and build, for scenario `sc`.
    fn build(self, sc: &crate::scenario::Scenario) -> Result<Self::Backend, options::OptionError>;
}

/// One connection of a process incarnation, as the store sees it: a restarted process has new
/// sessions, and each thread of a process has its own (the records' "one connect per fetch
/// thread for the life of the process").
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Process id (stable across restarts).
    pub pid: u32,
    /// 0 for the first process with this id; +1 on each restart.
    pub incarnation: u32,
    /// The thread of the process whose connection this is (0 in a one-thread process).
    pub thread: u16,
}

/// How the threads of one process (`[processes] threads`) use the backend's process side.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One process side per process incarnation, shared by its threads: the record's
    /// `_DestinationLimiter`, one instance per process behind its `threading.Lock`. Each call
    /// runs alone (the simulator is one thread; a call is the limiter's critical section) and
    /// [`ProcCx::thread`] says which thread makes it; several threads' operations can be in
    /// flight at once, so a process side that keeps state for *one* operation in flight (a
    /// pending reservation, the lock it holds) must keep it per thread.
    Shared,
    /// One process side per thread, each driven by its thread alone: independent limiter
    /// instances on threads (#653's "weaker witness"). Every instance sees one operation in
    /// flight at a time, as in a one-thread process.
    PerThread,
    /// The backend runs one thread per process; the text says why (a scenario asking for more
    /// is refused).
    Single(&'static str),
}

/// An operation a process sends to the store.
pub trait StoreOp: Clone + std::fmt::Debug + std::hash::Hash + Send + 'static {
    /// Its role in the trace (`op_sent` and `reply` events).
    fn kind(&self) -> OpKind;
}

/// A store's answer to an operation.
pub trait StoreReply: Clone + std::fmt::Debug + std::hash::Hash + Send + 'static {
    /// True when the reply hands the process a lock (the `holding_lock` kill point).
    fn took_lock(&self) -> bool {
        false
    }
}

/// What a process does next.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Step<Op> {
    /// Send an operation to the store and wait for the reply.
    Send(Op),
    /// Permission granted: sleep until this reference time, then fetch.
    FetchAt(Instant),
    /// Ask again ([`ProcessSide::acquire`]) at this time.
    RetryAt(Instant),
    /// End this execution of the job and re-enqueue its task with a countdown: the worker is
    /// free, and a fresh execution (fresh time limits; the process side keeps its state)
    /// starts at this time (a Celery task retrying itself with `countdown`).
    Requeue(Instant),
    /// The job is complete.
    Done,
}

pub use crate::task::TaskMemo;

/// What the process side may touch: the time, its own clocks, and the trace.
pub struct ProcCx<'a> {
    /// Reference time now.
    pub t: Instant,
    /// The process.
    pub pid: u32,
    /// The thread of the process making this call (0 in a one-thread process; see
    /// [`Threads`]).
    pub thread: u16,
    /// Its monotonic clock.
    pub mono: &'a Clock,
    /// Its host's wall clock.
    pub wall: &'a Clock,
    /// Trace output.
    pub out: &'a mut dyn Sink,
}

impl ProcCx<'_> {
    /// The monotonic reading now, as unsigned nanoseconds (the local pacer's domain).
    pub fn mono_ns(&self) -> u64 {
        self.mono_ns_at(self.t)
    }

    /// The monotonic reading at reference time `t`, as unsigned nanoseconds.
    pub(crate) fn mono_ns_at(&self, t: Instant) -> u64 {
        self.mono.read(t).max(0) as u64
    }

    /// The reference time at which `d` of this process's monotonic time will have passed.
    pub fn after_mono(&self, d: Nanos) -> Instant {
        self.t + self.mono.ref_duration(d)
    }
}

impl std::fmt::Debug for ProcCx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcCx")
            .field("t", &self.t)
            .field("pid", &self.pid)
            .field("thread", &self.thread)
            .finish()
    }
}

/// What the store side may touch: the time, the trace, the store's random stream, timers.
pub struct StoreCx<'a> {
    /// Reference time now.
    pub t: Instant,
    /// Trace output.
    pub out: &'a mut dyn Sink,
    /// The store's random stream (service-side draws such as transaction hold times).
    pub rng: &'a mut Rng,
    /// Timers the store side asks for: `(when, token)`; [`StoreSide::on_timer`] gets the token.
    pub timers: &'a mut Vec<(Instant, u64)>,
}

impl std::fmt::Debug for StoreCx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCx").field("t", &self.t).finish()
    }
}

/// What serving an operation produced.
#[derive(Copy, Clone, Debug)]
pub struct Served<R> {
    /// The reply sent back.
    pub reply: R,
    /// How long the store's lock stays held after the reply leaves (a caller's open
    /// transaction); zero for autocommit.
    pub hold: Nanos,
}

impl<R> Served<R> {
    /// A reply that releases the lock at once.
    pub fn now(reply: R) -> Served<R> {
        Served {
            reply,
            hold: Nanos::ZERO,
        }
    }
}

/// The process side of a backend: one process incarnation's memory and decisions. With
/// several threads per process it is shared by them or built once per thread, as
/// [`Backend::threads`] says; [`ProcCx::thread`] names the calling thread.
pub trait ProcessSide: Clone + Send + std::fmt::Debug + std::hash::Hash {
    /// The operations it sends.
    type Op: StoreOp;
    /// The replies it understands.
    type Reply: StoreReply;
    /// The process wants permission for its next fetch.
    fn acquire(&mut self, cx: &mut ProcCx) -> Step<Self::Op>;
    /// The reply to `op` arrived.
    fn on_reply(&mut self, cx: &mut ProcCx, op: &Self::Op, reply: Self::Reply) -> Step<Self::Op>;
    /// `op` failed (store unreachable, or the client timed out).
    fn on_store_error(&mut self, cx: &mut ProcCx, op: &Self::Op) -> Step<Self::Op>;
    /// The fetch ended with HTTP `status`.
    fn after_fetch(&mut self, cx: &mut ProcCx, status: u16) -> Step<Self::Op>;
    /// The job passed its soft time limit and finalises. Default: give the job up.
    fn on_soft_limit(&mut self, _cx: &mut ProcCx) -> Step<Self::Op> {
        Step::Done
    }
    /// A broker task's execution is about to start on this process, carrying `memo`
    /// ([`TaskMemo`]). Default: ignore it (a backend with no task memory).
    fn begin_task(&mut self, _memo: TaskMemo) {}
    /// Whether an explorer may reduce by symmetry ([`StoreSide::SYMMETRIC`]): this side's
    /// form writes every process id it keeps through [`crate::form::Form::pid`], and what it
    /// does depends on no process's id (the `pid` it was made for, [`Backend::process`], only
    /// to name itself in the trace). Default: no.
    const SYMMETRIC: bool = false;
    /// An explorer's form of this side ([`crate::form`]), its process's monotonic clock
    /// reading `mono_now` now: what of it the process's future reads, its clock readings
    /// relative to now. The default is its whole value as its `Hash` declares it (every field
    /// exact: `#[derive(Clone, Hash)]`, or [`crate::exact_hash!`]), absolute (met at its own instant
    /// only).
    fn form(&self, f: &mut crate::form::Form, _mono_now: u64) {
        f.exact(self);
        f.absolute();
    }
}

/// The store side of a backend: the shared state and its atomic operation.
pub trait StoreSide: Clone + Send + std::fmt::Debug + std::hash::Hash {
    /// The operations it serves.
    type Op: StoreOp;
    /// The replies it sends.
    type Reply: StoreReply;
    /// Apply `op` from `from`, atomically, at store clock reading `now`.
    fn serve(&mut self, cx: &mut StoreCx, from: Session, op: &Self::Op, now: Reading) -> Served<Self::Reply>;
    /// Does serving `op` write state the store makes durable when it commits (a PostgreSQL
    /// write: with `synchronous_commit = on` the commit waits for the WAL flush)? Then the
    /// store model's commit stage (`[store] commit`) follows the statement, under the lock:
    /// an autocommit reply leaves when the commit ends; an open transaction ([`Served::hold`])
    /// commits at its end. Default: no (an advisory lock, a Redis command).
    fn durable(&self, _op: &Self::Op) -> bool {
        false
    }
    /// `from`'s `op` failed on its way (the client saw an error or gave up): what the store
    /// does about the broken session. Default: nothing.
    fn on_error(&mut self, _cx: &mut StoreCx, _from: Session, _op: &Self::Op) {}
    /// `s` was killed (SIGKILL; called once for each thread's session of the process). What
    /// does it leave behind? Default: nothing but the data it
    /// already wrote. (The end of its critical sections is the worker loop's business.)
    fn on_crash(&mut self, _cx: &mut StoreCx, _s: Session) {}
    /// The store restarted: session state (locks tied to sessions) is gone; rows survive.
    fn on_store_restart(&mut self, _cx: &mut StoreCx) {}

    /// What the backend keeps in the store's tables or keys vanished (a `state_lost` fault: a
    /// truncated table, a culled cache key, a flushed Redis): forget it, as the next operation
    /// would find it. The default keeps everything: right only for a backend that keeps
    /// nothing in tables or keys (session locks, process-local pacers).
    fn on_state_lost(&mut self, _cx: &mut StoreCx) {}
    /// A timer this side asked for fired (a TTL expiring, the store noticing a dead session).
    fn on_timer(&mut self, _cx: &mut StoreCx, _token: u64) {}
    /// An explorer's form of the store's state ([`crate::form`]), the store's clock reading
    /// `now` now: what of it later operations read, its clock readings relative to now. The
    /// default is its whole value as its `Hash` declares it (every field exact:
    /// `#[derive(Clone, Hash)]`, or [`crate::exact_hash!`]), absolute (met at its own instant only).
    fn form(&self, f: &mut crate::form::Form, _now: Reading) {
        f.exact(self);
        f.absolute();
    }
    /// Whether its operations and replies hold no instant or clock reading (durations, counts
    /// and multipliers only), so that an explorer may compare those in flight at two
    /// instants. Default: no.
    const TIMELESS_MESSAGES: bool = false;
    /// Whether an explorer may reduce by symmetry (merge states that differ only in which
    /// process is which, [`crate::form::Form::relabeled`]): this side's form writes every
    /// process id it keeps through [`crate::form::Form::pid`] (per-process data through
    /// [`crate::form::Form::per_pid`]), its operations and replies hold no process id, and what
    /// it does depends on no process's id (the session's id only to name whom it answers, in
    /// the trace). Default: no (the explorer then names processes by id).
    const SYMMETRIC: bool = false;
}

/// A backend: its options in force, and the two halves built from them.
///
/// Implement this (and the two halves) to put your own pacer under test, from your own crate;
/// run it with [`crate::builder::SimBuilder`].
pub trait Backend: Send + Sync + 'static {
    /// The operations a process sends.
    type Op: StoreOp;
    /// The store's replies.
    type Reply: StoreReply;
    /// One process's side.
    type Process: ProcessSide<Op = Self::Op, Reply = Self::Reply>;
    /// The store's side.
    type Store: StoreSide<Op = Self::Op, Reply = Self::Reply>;
    /// Name, as the trace header and reports show it.
    fn name(&self) -> &str;
    /// What it states about its design that the checkers judge it by (burst, fallback,
    /// locks, backoff, ...): typed, and written into the trace header ([`Facts`]). Required,
    /// and not empty: a backend whose facts state nothing ([`Facts::default()`]) is refused
    /// when a scenario naming it is read or a run starts ([`stated`]); a design that grants
    /// one slot at a time and has nothing else to state says `burst: Some(1)`.
    fn facts(&self) -> Facts;
    /// Its other options in force, for people: a JSON object (its storage, clock source,
    /// intervals, ...) written into the trace header's `backend_detail` beside its
    /// [`facts`](Backend::facts). Nothing judges by it; a key the checkers read (a
    /// typed field of [`crate::trace::Detail`]) is refused: state it as a fact.
    fn detail(&self) -> serde_json::Value;
    /// A fresh process side for process `pid` (at start and on every restart).
    fn process(&self, pid: u32) -> Self::Process;
    /// The store side, empty.
    fn store(&self) -> Self::Store;
    /// The protocol points at which a kill fault can find a process of this backend (a
    /// scenario arming a kill at any other point is refused: it would never fire). Default:
    /// every point, unchecked.
    fn kill_points(&self) -> Vec<KillPoint> {
        KillPoint::ALL.to_vec()
    }
    /// How the threads of a process (`[processes] threads`) use [`Backend::process`]'s
    /// result. Default: [`Threads::Single`]: a process side written before threads existed
    /// may keep state for one operation in flight, so a scenario with more than one thread
    /// per process is refused until the backend says how its threads share it.
    fn threads(&self) -> Threads {
        Threads::Single("it does not say how its threads share its process side (Backend::threads)")
    }
    /// Does the design keep one walk lock per platform, so a scenario may declare
    /// `[[platforms]]` (`crate::platform`)? Default: no (a pace keeps one budget for one
    /// destination; a scenario with platforms is refused).
    fn platforms(&self) -> bool {
        false
    }
    /// Does its process side run broker tasks (`[jobs]`, `crate::task`): download tasks that
    /// walk under its lock? Default: no (a scenario with `[jobs]` is refused).
    fn jobs(&self) -> bool {
        false
    }
}

/// What a backend writes into the trace header's `backend_detail`: its options in force
/// ([`Backend::detail`]) with its facts ([`Backend::facts`]).
///
/// # Errors
///
/// Its facts state nothing ([`Facts::default()`]: a backend that forgot them would be judged
/// as a design of burst 1 without a fallback, whatever it is), or its options are not a JSON
/// object, or name a key that is a fact.
pub fn stated<B: Backend>(b: &B) -> Result<serde_json::Value, options::OptionError> {
    let facts = b.facts();
    if facts == Facts::default() {
        return Err(options::OptionError::new(
            "backend",
            format!(
                "backend `{}`: Backend::facts states nothing, and the checkers judge a design by its facts: \
                 state at least its burst (`burst: Some(1)` for a design that grants one slot at a time), \
                 its fallback, or its locks (`Facts` in pacesim::trace)",
                b.name()
            ),
        ));
    }
    facts
        .with_options(b.detail())
        .map_err(|m| options::OptionError::new("backend", format!("backend `{}`: {m}", b.name())))
}

/// An operation no process ever sends: the store side of a backend without a store.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum NoOp {}

impl StoreOp for NoOp {
    fn kind(&self) -> OpKind {
        match *self {}
    }
}

impl StoreReply for NoOp {}

/// The store of a backend that keeps nothing shared (a per-process pacer).
#[derive(Hash, Copy, Clone, Debug, Default)]
pub struct NoStore;

impl StoreSide for NoStore {
    type Op = NoOp;
    type Reply = NoOp;
    // (it keeps nothing)
    const SYMMETRIC: bool = true;
    fn serve(&mut self, _cx: &mut StoreCx, _from: Session, op: &NoOp, _now: Reading) -> Served<NoOp> {
        match *op {}
    }
}
