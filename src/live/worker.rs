//! The hidden `worker` mode: one live worker process.
//!
//! A worker is the simulator's worker loop run for real. The process side of its backend is
//! the simulator's own [`Backend`] (built from the same scenario, used only for this pid): it
//! decides what to ask the store, what a reply means, when to fall back, and what to report
//! after a fetch. Only the store side is different: where the simulator calls
//! [`Backend::serve`], a worker runs the backend's real operation against PostgreSQL or Redis
//! (`Link::execute`). So simulator and live runs share one definition of every backend's
//! process-side semantics, and differ exactly where reality does.
//!
//! The loop, as in `sim.rs`:
//!
//! 1. wait for the parent's `go` (the run origin), then for this process's start time;
//! 2. per job: think (or wait for the job to arrive), `acquire`, carry out the step:
//!    `Send(op)` runs the real operation (`op_sent`, `grant`, `reply` or `store_error`
//!    events), `FetchAt` sleeps to the slot and fetches from the destination (`fetch_start`,
//!    `fetch_end`), `RetryAt` sleeps and asks again, `Done` ends the job;
//! 3. stop after `requests` fetches or at the scenario's duration.
//!
//! Every event is stamped on the run clock and written to stdout as a JSON line. An armed
//! kill point makes the worker write its `crash` event and SIGKILL itself right there.

use crate::backend::{self, Backend, Cx, Op, ProcView, Reply, Signal, Step};
use crate::clock::Clock;
use crate::fault::{FaultSpec, KillPoint};
use crate::live::clock::RunClock;
use crate::live::destination::DestClient;
use crate::live::pg::{self, RowClient};
use crate::live::proto::{EventMsg, PgStore, RedisStore, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::live::redis as lredis;
use crate::pacer::Status;
use crate::rng::{self, Entity, Rng};
use crate::scenario::{ClockSource, Scenario};
use crate::time::{Instant, Nanos};
use crate::trace::{Event, MultiplierCause, ReleaseReason, Sink, StoreErrorKind};
use rand::RngExt;
use rand_distr::{Distribution, Exp};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entry point of `pacesim worker`: read the spec, run, return the exit status.
pub fn main(run_id: &str, pid: u32) -> i32 {
    let spec: WorkerSpec = match std::env::var(SPEC_ENV)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pacesim worker: bad or missing {SPEC_ENV}: {e}");
            return 2;
        }
    };
    if spec.run_id != run_id || spec.pid != pid {
        eprintln!("pacesim worker: spec is for run {} pid {}", spec.run_id, spec.pid);
        return 2;
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pacesim worker: {e}");
            return 2;
        }
    };
    rt.block_on(run(spec))
}

async fn run(spec: WorkerSpec) -> i32 {
    let armed: Arc<Mutex<Vec<KillPoint>>> = Arc::default();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel();
    {
        let armed = Arc::clone(&armed);
        std::thread::spawn(move || control(armed, go_tx));
    }
    let mut out = Out;
    let link = match Link::open(&spec).await {
        Ok(l) => l,
        Err(e) => {
            out.msg(&ToParent::Fatal { message: e });
            return 3;
        }
    };
    let origin = match spec.origin {
        Some(o) => o,
        None => {
            out.msg(&ToParent::Ready);
            match go_rx.await {
                Ok(o) => o,
                Err(_) => return 3,
            }
        }
    };
    let clock = RunClock::from_parts(origin.0, origin.1);
    clock.wait_origin().await;
    let mut w = Worker::new(spec, clock, link, armed);
    match w.run().await {
        Ok(()) => 0,
        Err(message) => {
            w.out.msg(&ToParent::Fatal { message });
            3
        }
    }
}

/// Reads the parent's commands on a plain thread; exits the process when the parent goes
/// away (stdin closes).
fn control(armed: Arc<Mutex<Vec<KillPoint>>>, go: tokio::sync::oneshot::Sender<(u64, i64)>) {
    let mut go = Some(go);
    for line in std::io::stdin().lines() {
        let Ok(l) = line else { break };
        match ToWorker::parse(&l) {
            Some(ToWorker::Go(o, w)) => {
                if let Some(g) = go.take() {
                    let _ = g.send((o, w));
                }
            }
            Some(ToWorker::Arm(p)) => armed.lock().expect("armed").push(p),
            None => eprintln!("pacesim worker: unknown command {l:?}"),
        }
    }
    // The parent is gone: no worker outlives its run.
    std::process::exit(4);
}

/// The worker's output: JSON lines on stdout, flushed per line (a line written before a
/// SIGKILL is not lost).
#[derive(Debug)]
struct Out;

impl Out {
    fn line(&mut self, s: String) {
        let mut o = std::io::stdout().lock();
        if o.write_all(s.as_bytes())
            .and_then(|_| o.write_all(b"\n"))
            .and_then(|_| o.flush())
            .is_err()
        {
            // The parent is gone.
            std::process::exit(4);
        }
    }
    fn msg(&mut self, m: &ToParent) {
        self.line(serde_json::to_string(m).expect("messages serialise"));
    }
}

impl Sink for Out {
    fn event(&mut self, ev: &Event) {
        self.line(serde_json::to_string(&EventMsg { m: "event", ev }).expect("events serialise"));
    }
}

/// A store operation failed: `refused` (an error) or `timeout`.
#[derive(Debug)]
struct StoreFailure(StoreErrorKind);

/// A store-side event of a real operation (the simulator's `serve` emits the same ones),
/// recorded at the time the store served it.
#[derive(Debug)]
enum Served {
    Grant {
        slot: i64,
        now: i64,
        interval: u64,
        multiplier: f64,
    },
    Deny,
    /// `at`: the store clock (wall ns) when it happened.
    LockAcquired {
        lock: u32,
        at: i64,
    },
    /// `at`: the store clock (wall ns) when it happened.
    LockReleased {
        lock: u32,
        at: i64,
    },
    /// `at`: the store clock (wall ns) when it happened.
    Multiplier {
        from: f64,
        to: f64,
        cause: MultiplierCause,
        at: i64,
    },
}

impl Served {
    fn event(self, t: u64, pid: u32) -> Event {
        match self {
            Served::Grant {
                slot,
                now,
                interval,
                multiplier,
            } => Event::Grant {
                t,
                pid,
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
#[derive(Debug)]
struct Executed {
    reply: Reply,
    served: Vec<Served>,
    /// The reservation left a transaction open (`in_transaction`).
    in_transaction: bool,
}

impl Executed {
    fn reply(reply: Reply) -> Executed {
        Executed {
            reply,
            served: Vec::new(),
            in_transaction: false,
        }
    }
    fn with(mut self, s: Served) -> Executed {
        self.served.push(s);
        self
    }
    /// The reply to an unlock: the release is a store-side event only if the lock was ours
    /// (`at` in microseconds, store clock).
    fn unlocked(mine: bool, lock: u32, at: i64) -> Executed {
        let e = Executed::reply(Reply::Unlocked);
        if mine {
            e.with(Served::LockReleased { lock, at: at * 1000 })
        } else {
            e
        }
    }
}

/// A multiplier change as a store-side event, if it changed.
fn multiplier_change(signal: Signal, from: f64, to: f64, at: i64) -> Option<Served> {
    let (_, status) = pg::backoff_step(signal);
    let cause = match status {
        Status::TooManyRequests => MultiplierCause::TooManyRequests,
        Status::Unavailable => MultiplierCause::Unavailable,
        Status::Ok => MultiplierCause::Decay,
        Status::Error => MultiplierCause::Error,
    };
    (from != to).then_some(Served::Multiplier { from, to, cause, at })
}

/// Did a streak signal reach the threshold (the reply's `decay`)?
fn streak_decay(signal: Signal, streak_from: i64, streak_to: i64, decay_after: u32) -> bool {
    matches!(signal, Signal::Streak(s) if s.is_clean())
        && streak_to == 0
        && streak_from + 1 >= decay_after.max(1) as i64
}

/// The worker's link to its store (PostgreSQL, Redis, or none), reconnected on demand.
struct Link {
    sc: Scenario,
    pid: u32,
    incarnation: u32,
    timeout: Duration,
    pg: Option<PgStore>,
    row: Option<Arc<RowClient>>,
    // invariant: the COMMIT of an `in_transaction` reservation still to come; awaited before
    // the connection is used again.
    commit: Option<tokio::task::JoinHandle<bool>>,
    redis: Option<RedisStore>,
    redis_con: Option<redis::Connection>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("pg", &self.pg)
            .field("redis", &self.redis)
            .finish()
    }
}

impl Link {
    /// Open the store connection the backend needs (the first one must succeed).
    async fn open(spec: &WorkerSpec) -> Result<Link, String> {
        let mut l = Link {
            sc: spec.scenario.clone(),
            pid: spec.pid,
            incarnation: spec.incarnation,
            timeout: Duration::from_nanos(spec.scenario.store.timeout.unwrap_or(Nanos(5_000_000_000)).0),
            pg: spec.pg.clone(),
            row: None,
            commit: None,
            redis: spec.redis.clone(),
            redis_con: None,
        };
        if l.pg.is_some() {
            let rc = l
                .row_client()
                .await
                .map_err(|_| "cannot connect to PostgreSQL".to_string())?;
            // Warm the connection as a long-lived one is warm (plans, catalog caches): run the
            // reservation once and roll it back, before the run starts.
            if matches!(l.sc.pacer.backend.as_str(), "row" | "shared_cache") {
                let warm = async {
                    rc.client.batch_execute("BEGIN").await?;
                    let _ = rc.reserve(1.0, None).await;
                    rc.client.batch_execute("ROLLBACK").await?;
                    rc.client.batch_execute("BEGIN").await?;
                    let _ = rc.cache_reserve(1.0, None).await;
                    rc.client.batch_execute("ROLLBACK").await
                };
                warm.await
                    .map_err(|e| format!("warming the PostgreSQL connection: {e}"))?;
            }
        }
        if l.redis.is_some() {
            l.redis().map_err(|_| "cannot connect to Redis".to_string())?;
        }
        Ok(l)
    }

    fn schema(&self) -> &str {
        self.pg.as_ref().map_or("", |p| p.schema.as_str())
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.redis.as_ref().map_or("", |r| r.prefix.as_str()))
    }

    async fn row_client(&mut self) -> Result<Arc<RowClient>, StoreFailure> {
        if let Some(c) = self.commit.take() {
            let ok = matches!(tokio::time::timeout(self.timeout, c).await, Ok(Ok(true)));
            if !ok {
                self.row = None;
            }
        }
        if let Some(r) = &self.row
            && !r.client.is_closed()
        {
            return Ok(Arc::clone(r));
        }
        self.row = None;
        let pg = self.pg.as_ref().ok_or(StoreFailure(StoreErrorKind::Refused))?;
        let client = pg.settings.connect(self.timeout).await.map_err(|m| {
            if m.detail.contains("timed out") {
                StoreFailure(StoreErrorKind::Timeout)
            } else {
                StoreFailure(StoreErrorKind::Refused)
            }
        })?;
        let rc = Arc::new(RowClient::prepare(client, &pg.schema).await.map_err(pg_failure)?);
        self.row = Some(Arc::clone(&rc));
        Ok(rc)
    }

    fn redis(&mut self) -> Result<&mut redis::Connection, StoreFailure> {
        if self.redis_con.is_none() {
            let r = self.redis.as_ref().ok_or(StoreFailure(StoreErrorKind::Refused))?;
            let via = r.via.as_ref().map(|(h, p)| (h.as_str(), *p));
            self.redis_con = Some(r.settings.connect(via, self.timeout).map_err(redis_failure)?);
        }
        Ok(self.redis_con.as_mut().expect("connected above"))
    }

    /// Run `op` for real, within the store timeout.
    async fn execute(&mut self, op: &Op, rng: &mut Rng) -> Result<Executed, StoreFailure> {
        let timeout = self.timeout;
        let r = match tokio::time::timeout(timeout, self.execute_inner(op, rng)).await {
            Ok(r) => r,
            Err(_) => Err(StoreFailure(StoreErrorKind::Timeout)),
        };
        if r.is_err() {
            // The connection's state is unknown: use a fresh one next time.
            self.row = None;
            self.redis_con = None;
        }
        r
    }

    async fn execute_inner(&mut self, op: &Op, rng: &mut Rng) -> Result<Executed, StoreFailure> {
        let backend = self.sc.pacer.backend.clone();
        let interval = self.sc.interval();
        // The store rounds `interval * multiplier` to its resolution (µs); the grant reports
        // the interval it applied.
        let interval_us = interval.0 as f64 / 1000.0;
        let holder = ((self.pid as i32) << 16) | (self.incarnation as i32 & 0xFFFF);
        match (backend.as_str(), *op) {
            // ---- the pace row (and the same pace under a cache key) ----
            ("row", Op::Reserve { proc_now, multiplier }) => {
                let rc = self.row_client().await?;
                let hold = self.sc.pacer.in_transaction.as_ref().map(|t| t.hold.sample(rng));
                if hold.is_some() {
                    rc.client.batch_execute("BEGIN").await.map_err(pg_failure)?;
                }
                let g = match self.sc.pacer.clock.unwrap_or(ClockSource::Store) {
                    ClockSource::Store => rc.reserve(interval_us, multiplier).await,
                    ClockSource::ProcessMonotonic => {
                        let stale = self.sc.pacer.stale_after.unwrap_or(Nanos(10_000_000_000));
                        rc.reserve_process_clock(
                            interval_us,
                            multiplier,
                            proc_now as f64 / 1e9,
                            stale.0 as f64 / 1000.0,
                        )
                        .await
                    }
                }
                .map_err(pg_failure)?;
                if let Some(h) = hold {
                    // The caller's transaction stays open (holding the row lock) for `hold`.
                    let c = Arc::clone(&rc);
                    self.commit = Some(tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_nanos(h.0)).await;
                        c.client.batch_execute("COMMIT").await.is_ok()
                    }));
                }
                let mut e = slot_reply(g);
                e.in_transaction = hold.is_some();
                Ok(e)
            }
            ("shared_cache", Op::Reserve { multiplier, .. }) => {
                let rc = self.row_client().await?;
                let g = rc.cache_reserve(interval_us, multiplier).await.map_err(pg_failure)?;
                Ok(slot_reply(g))
            }
            ("row" | "shared_cache", Op::Report(signal)) => {
                let rc = self.row_client().await?;
                let b = if backend == "row" {
                    Some(rc.backoff(signal, &self.sc.backoff).await.map_err(pg_failure)?)
                } else {
                    rc.cache_backoff(signal, &self.sc.backoff).await.map_err(pg_failure)?
                };
                let Some(b) = b else {
                    // No cache entry yet (a report before any reservation): nothing to update.
                    return Ok(Executed::reply(Reply::Backoff {
                        multiplier: 1.0,
                        decay: false,
                    }));
                };
                let decay = streak_decay(
                    signal,
                    b.streak_from as i64,
                    b.streak_to as i64,
                    self.sc.backoff.decay_after,
                );
                let mut e = Executed::reply(Reply::Backoff {
                    multiplier: b.to,
                    decay,
                });
                e.served.extend(multiplier_change(signal, b.from, b.to, b.at_us * 1000));
                Ok(e)
            }
            // ---- PostgreSQL locks ----
            ("advisory", Op::TryLock { lock }) => {
                let rc = self.row_client().await?;
                let schema = self.schema().to_string();
                let (taken, at) = pg::advisory_try(&rc.client, &schema, lock).await.map_err(pg_failure)?;
                if taken {
                    Ok(Executed::reply(Reply::Locked { lock }).with(Served::LockAcquired { lock, at: at * 1000 }))
                } else {
                    Ok(Executed::reply(Reply::Busy))
                }
            }
            ("advisory", Op::Unlock { lock }) => {
                let rc = self.row_client().await?;
                let schema = self.schema().to_string();
                let (mine, at) = pg::advisory_unlock(&rc.client, &schema, lock)
                    .await
                    .map_err(pg_failure)?;
                Ok(Executed::unlocked(mine, lock, at))
            }
            ("claim_row", Op::TryLock { lock }) => {
                let rc = self.row_client().await?;
                let schema = self.schema().to_string();
                match pg::claim(&rc.client, &schema, lock as i32, holder)
                    .await
                    .map_err(pg_failure)?
                {
                    Some((true, at)) => {
                        Ok(Executed::reply(Reply::Locked { lock }).with(Served::LockAcquired { lock, at: at * 1000 }))
                    }
                    Some((false, _)) => Ok(Executed::reply(Reply::Locked { lock })),
                    None => Ok(Executed::reply(Reply::Busy)),
                }
            }
            ("claim_row", Op::Unlock { lock }) => {
                let rc = self.row_client().await?;
                let schema = self.schema().to_string();
                let (mine, at) = pg::release(&rc.client, &schema, lock as i32, holder)
                    .await
                    .map_err(pg_failure)?;
                Ok(Executed::unlocked(mine, lock, at))
            }
            // ---- Redis ----
            ("redis_gcra", Op::Gcra { multiplier }) => {
                let (key, bkey) = (self.key("gcra"), self.key("backoff"));
                let burst = self.sc.pacer.burst.unwrap_or(1).max(1);
                let con = self.redis()?;
                let g = lredis::gcra(con, &key, &bkey, interval_us, burst, multiplier).map_err(redis_failure)?;
                let now = g.now_us as i64 * 1000;
                if g.allowed {
                    Ok(Executed::reply(Reply::Allowed).with(Served::Grant {
                        slot: now,
                        now,
                        interval: (g.interval_us * 1000.0).round() as u64,
                        multiplier: g.multiplier,
                    }))
                } else {
                    let retry_after = Nanos(((g.retry_at_us - g.now_us).max(0.0) * 1000.0).ceil() as u64);
                    Ok(Executed::reply(Reply::Denied { retry_after }).with(Served::Deny))
                }
            }
            ("redis_gcra", Op::Report(signal)) => {
                let key = self.key("backoff");
                let cfg = self.sc.backoff.clone();
                let con = self.redis()?;
                let (step, _) = pg::backoff_step(signal);
                let (from, to, k0, k1, at) =
                    lredis::backoff(con, &key, step, cfg.cap, cfg.factor, cfg.decay_after).map_err(redis_failure)?;
                let decay = streak_decay(signal, k0, k1, cfg.decay_after);
                let mut e = Executed::reply(Reply::Backoff { multiplier: to, decay });
                e.served.extend(multiplier_change(signal, from, to, at * 1000));
                Ok(e)
            }
            ("redis_lock", Op::TryLock { lock }) => {
                let key = self.key("lock");
                let token = format!("{}:{}", self.pid, self.incarnation);
                let ttl_ms = self
                    .sc
                    .pacer
                    .ttl
                    .unwrap_or(Nanos(1_560_000_000_000))
                    .0
                    .div_ceil(1_000_000);
                let con = self.redis()?;
                let (taken, at) = lredis::lock_try(con, &key, &token, ttl_ms).map_err(redis_failure)?;
                if taken {
                    Ok(Executed::reply(Reply::Locked { lock }).with(Served::LockAcquired { lock, at: at * 1000 }))
                } else {
                    Ok(Executed::reply(Reply::Busy))
                }
            }
            ("redis_lock", Op::Unlock { lock }) => {
                let key = self.key("lock");
                let token = format!("{}:{}", self.pid, self.incarnation);
                let con = self.redis()?;
                let (_, at) = lredis::lock_release(con, &key, &token).map_err(redis_failure)?;
                // The walk (the critical section) is over, whether or not the key was ours.
                Ok(Executed::unlocked(true, lock, at))
            }
            (b, op) => {
                let message = format!("backend `{b}`: operation {op:?} is not supported in live mode");
                Out.msg(&ToParent::Fatal { message });
                std::process::exit(5);
            }
        }
    }
}

/// A granted slot as the reply and the grant event (µs of the store clock to ns).
fn slot_reply(g: pg::Granted) -> Executed {
    let (slot, now) = (g.slot_us * 1000, g.now_us * 1000);
    Executed::reply(Reply::Slot { slot, now }).with(Served::Grant {
        slot,
        now,
        interval: (g.interval_us * 1000) as u64,
        multiplier: g.multiplier,
    })
}

fn redis_failure(e: redis::RedisError) -> StoreFailure {
    if e.is_timeout() {
        StoreFailure(StoreErrorKind::Timeout)
    } else {
        if !(e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()) {
            eprintln!("pacesim worker: Redis error: {e}");
        }
        StoreFailure(StoreErrorKind::Refused)
    }
}

fn pg_failure(e: tokio_postgres::Error) -> StoreFailure {
    if let Some(db) = e.as_db_error() {
        let class = &db.code().code()[..2];
        // 08: connection exception, 57: operator intervention (shutdown, restart)
        if class != "08" && class != "57" {
            eprintln!(
                "pacesim worker: PostgreSQL error: {}",
                crate::live::settings::error_chain(&e)
            );
        }
    }
    if e.to_string().contains("timed out") {
        StoreFailure(StoreErrorKind::Timeout)
    } else {
        StoreFailure(StoreErrorKind::Refused)
    }
}

/// One live worker.
struct Worker {
    sc: Scenario,
    pid: u32,
    incarnation: u32,
    clock: RunClock,
    out: Out,
    backend: Box<dyn Backend>,
    mono: Clock,
    wall: Clock,
    rng: Rng,
    scratch: Rng,
    link: Link,
    dest: DestClient,
    armed: Arc<Mutex<Vec<KillPoint>>>,
    fetches: u64,
    // Store-side timers the simulator's backend asks for; the real store keeps its own time.
    timers: Vec<(Instant, u64)>,
    // The wall clock's reading (ns since the Unix epoch) at reference time 0.
    wall_at_origin: i64,
    // invariant: Some(fetch end time) only between a fetch's end and the send of the
    // operation its after-fetch step decided.
    report_at: Option<u64>,
}

impl Worker {
    fn new(spec: WorkerSpec, clock: RunClock, link: Link, armed: Arc<Mutex<Vec<KillPoint>>>) -> Worker {
        let sc = spec.scenario;
        let pid = spec.pid;
        let mut rng = rng::stream(
            sc.seed,
            Entity::Process {
                pid,
                incarnation: spec.incarnation,
            },
        );
        // The host wall clock, as a clock over the reference timeline: at reference time t it
        // reads the real wall clock (the frame of the store's clock_timestamp() on this host).
        let wall_at_origin = clock.wall_at_origin();
        let (mono, wall) = clocks(&sc, pid, wall_at_origin, &mut rng);
        Worker {
            backend: backend::build(&sc),
            pid,
            incarnation: spec.incarnation,
            clock,
            out: Out,
            mono,
            wall,
            scratch: rng::stream(sc.seed, Entity::Store),
            rng,
            link,
            dest: DestClient::new(&spec.dest),
            armed,
            fetches: spec.done,
            timers: Vec::new(),
            wall_at_origin,
            report_at: None,
            sc,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn emit(&mut self, ev: Event) {
        self.out.event(&ev);
    }

    /// Call into the backend's process side with this process's view.
    fn call<R>(&mut self, f: impl FnOnce(&mut dyn Backend, &mut Cx, &ProcView) -> R) -> R {
        let t = Instant(self.clock.now());
        let view = ProcView {
            pid: self.pid,
            mono: &self.mono,
            wall: &self.wall,
        };
        let mut cx = Cx {
            t,
            out: &mut self.out,
            store_rng: &mut self.scratch,
            timers: &mut self.timers,
        };
        let r = f(self.backend.as_mut(), &mut cx, &view);
        self.timers.clear();
        r
    }

    /// If a kill is armed at `point`, record the crash and SIGKILL this process.
    fn take_kill(&mut self, point: KillPoint) {
        let hit = {
            let mut a = self.armed.lock().expect("armed");
            a.iter().position(|&p| p == point).map(|i| a.remove(i))
        };
        if hit.is_some() {
            let t = self.now();
            self.emit(Event::Crash {
                t,
                pid: self.pid,
                point: point.into(),
            });
            // SAFETY: signalling our own process; SIGKILL does not return.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    async fn run(&mut self) -> Result<(), String> {
        let duration = self.sc.duration.0;
        let first_start = if self.incarnation == 0 {
            self.sc.processes.start.sample(&mut self.rng).0
        } else {
            0
        };
        self.clock.sleep_until_precise(first_start).await;
        let mut arrivals = self.sc.processes.arrival_rate.map(|r| {
            // Job k arrives at the sum of the first k gaps; a restarted worker skips the jobs
            // already served.
            let mut s = rng::stream(self.sc.seed, Entity::Arrivals(self.pid));
            let mut at = 0u64;
            let mut gap = move || Nanos::from_secs_f64(Exp::new(r).expect("validated rate").sample(&mut s)).0;
            for _ in 0..self.fetches {
                at += gap();
            }
            (at, gap)
        });
        let mut first = true;
        loop {
            if let Some(n) = self.sc.processes.requests
                && self.fetches >= n
            {
                return Ok(());
            }
            if let Some((at, gap)) = arrivals.as_mut() {
                *at += gap();
                self.clock.sleep_until_precise(*at).await;
            } else if !first {
                let think = self.sc.processes.think.sample(&mut self.rng).0;
                let t = self.now() + think;
                self.clock.sleep_until_precise(t).await;
            }
            first = false;
            if self.now() >= duration {
                return Ok(());
            }
            self.job().await?;
        }
    }

    async fn job(&mut self) -> Result<(), String> {
        let t = self.now();
        self.out.msg(&ToParent::JobStart { t });
        let soft = self.sc.processes.soft_limit;
        let finished = match soft {
            Some(s) => tokio::time::timeout(Duration::from_nanos(s.0), self.job_body())
                .await
                .ok(),
            None => Some(self.job_body().await),
        };
        match finished {
            Some(r) => r?,
            None => {
                // Past the soft limit the job finalises; the backend says what that means.
                let step = self.call(|b, cx, v| b.on_soft_limit(cx, v));
                self.apply(step).await?;
            }
        }
        let t = self.now();
        self.out.msg(&ToParent::JobEnd { t });
        Ok(())
    }

    async fn job_body(&mut self) -> Result<(), String> {
        let step = self.call(|b, cx, v| b.acquire(cx, v));
        self.apply(step).await
    }

    /// Carry out steps until the job is done.
    async fn apply(&mut self, mut step: Step) -> Result<(), String> {
        loop {
            step = match step {
                Step::Send(op) => self.send(op).await,
                Step::FetchAt(wake) => {
                    self.take_kill(KillPoint::SleepingToSlot);
                    self.clock.sleep_until_precise(wake.0).await;
                    self.fetch().await?
                }
                Step::RetryAt(at) => {
                    self.clock.sleep_until_precise(at.0).await;
                    self.call(|b, cx, v| b.acquire(cx, v))
                }
                Step::Done => return Ok(()),
            };
        }
    }

    /// Send `op` to the store for real.
    async fn send(&mut self, op: Op) -> Step {
        let pid = self.pid;
        // A report the fetch's end decided is sent at the fetch's end: the only work between
        // the two is writing the fetch_end line (the simulator sends it at the same instant,
        // and the backoff checker reads a response with no report at once as unreported).
        let t0 = self.report_at.take().unwrap_or_else(|| self.now());
        self.emit(Event::OpSent {
            t: t0,
            pid,
            op: op.kind(),
        });
        let r = self.link.execute(&op, &mut self.rng).await;
        let t1 = self.now();
        match r {
            Ok(ex) => {
                // When did the store serve it? A grant carries the store clock's reading, which
                // on this host is the wall clock: map it onto the run clock (kept within the
                // round trip). A grant on a process's own clock was read when the operation
                // left. Other events: half-way through the round trip.
                let process_clock = self.sc.pacer.clock == Some(ClockSource::ProcessMonotonic);
                for s in ex.served {
                    let on_store_clock = |wall: i64| ((wall - self.wall_at_origin).max(0) as u64).clamp(t0, t1);
                    let (at, s) = match s {
                        Served::Grant { .. } if process_clock => (t0, s),
                        Served::Grant {
                            slot,
                            now,
                            interval,
                            multiplier,
                        } => {
                            // Kept within the round trip, the grant's `now` moves with it, so
                            // its slot still maps to the same reference time (`t + slot - now`).
                            let mapped = now - self.wall_at_origin;
                            let at = on_store_clock(now);
                            let now = now + (at as i64 - mapped);
                            (
                                at,
                                Served::Grant {
                                    slot,
                                    now,
                                    interval,
                                    multiplier,
                                },
                            )
                        }
                        Served::LockAcquired { at, .. }
                        | Served::LockReleased { at, .. }
                        | Served::Multiplier { at, .. } => (on_store_clock(at), s),
                        _ => (t0 + (t1 - t0) / 2, s),
                    };
                    self.emit(s.event(at, pid));
                }
                if matches!(op, Op::Reserve { .. }) {
                    self.take_kill(KillPoint::MidReservation);
                }
                if ex.in_transaction {
                    self.take_kill(KillPoint::InTransaction);
                }
                let step = self.call(|b, cx, v| b.on_reply(cx, v, &op, ex.reply));
                let t = self.now();
                let wait = match step {
                    Step::FetchAt(w) => w.0.saturating_sub(t),
                    _ => 0,
                };
                self.emit(Event::Reply {
                    t,
                    pid,
                    op: op.kind(),
                    wait,
                });
                if matches!(ex.reply, Reply::Locked { .. }) {
                    self.take_kill(KillPoint::HoldingLock);
                }
                step
            }
            Err(StoreFailure(error)) => {
                self.emit(Event::StoreError { t: t1, pid, error });
                self.call(|b, cx, v| b.on_store_error(cx, v, &op))
            }
        }
    }

    /// Fetch from the destination; the backend's after-fetch step.
    async fn fetch(&mut self) -> Result<Step, String> {
        let pid = self.pid;
        let t = self.now();
        self.emit(Event::FetchStart { t, pid });
        let latency = self.sc.destination.latency.sample(&mut self.rng).0;
        if latency > 0 {
            self.clock.sleep_until_precise(t + latency).await;
        }
        let hold = self.sc.fetch.duration.sample(&mut self.rng).0;
        self.dest
            .send(pid, hold)
            .await
            .map_err(|e| format!("destination: {e}"))?;
        self.take_kill(KillPoint::MidFetch);
        let status = self.dest.status().await.map_err(|e| format!("destination: {e}"))?;
        let t = self.now();
        self.emit(Event::FetchEnd { t, pid, status });
        self.fetches += 1;
        let step = self.call(|b, cx, v| b.after_fetch(cx, v, status));
        if matches!(step, Step::Send(_)) {
            self.report_at = Some(t);
        }
        Ok(step)
    }
}

/// This process's monotonic clock and its host's wall clock over the reference timeline,
/// shaped by the scenario's clock faults as the simulator shapes them.
fn clocks(sc: &Scenario, pid: u32, wall_at_origin: i64, rng: &mut Rng) -> (Clock, Clock) {
    let mut mono = Clock::reference();
    let mut wall = Clock::new(wall_at_origin, 0.0);
    for f in &sc.faults {
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
            if let Some(s) = epoch_spread
                && s.0 > 0
            {
                mono.offset = rng.random_range(0..s.0) as i64;
            }
            mono.drift_ppm = *drift_ppm;
            wall.drift_ppm = *drift_ppm;
            if let Some(o) = wall_offset {
                wall.offset = wall_at_origin + o.0;
            }
            if let (Some(by), Some(at)) = (step, step_at) {
                wall.add_step(Instant(at.0), by.0);
            }
        }
    }
    (mono, wall)
}
