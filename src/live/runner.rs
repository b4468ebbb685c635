//! The live runner: stores, destination, proxies, worker processes, faults, and cleanup.
//!
//! [`run`] owns one run from start to finish:
//!
//! 1. check the store the backend needs and create the run's schema / key prefix;
//! 2. start the destination, and the fault proxies when the scenario has store faults;
//! 3. spawn one supervisor task per worker; each spawns its worker process, forwards its
//!    events, and kills or restarts it as faults say;
//! 4. once every worker is connected, fix the origin (reference time 0) and send `go`;
//! 5. drive the fault schedule; stop at the scenario's duration, when every worker is done,
//!    or on SIGINT/SIGTERM;
//! 6. merge and sort the events into a trace and summarise it with the simulator's code;
//! 7. always: kill what is left, drop the schema, delete the keys.

use crate::fault::{FaultSpec, KillPoint};
use crate::live::clock::{RunClock, mono_ns};
use crate::live::proto::{PgStore, RedisStore, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::live::proxy::Proxy;
use crate::live::settings::{PgSettings, RedisSettings};
use crate::live::{EventLog, LiveError, StoreUse, destination, pg, redis as lredis, store_use};
use crate::rng::{self, Entity, Rng};
use crate::scenario::Scenario;
use crate::summary::{self, Summary};
use crate::time::Nanos;
use crate::trace::{self, CrashPoint, Event, ReleaseReason};
use rand::RngExt;
use rand_distr::{Distribution, Exp};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

/// How to run.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The pacesim executable workers run (`pacesim worker ...`).
    pub exe: PathBuf,
    /// Stop cleanly on SIGINT/SIGTERM (the CLI does; a test harness need not).
    pub handle_signals: bool,
    /// One progress line on stderr (run id, schema, key prefix).
    pub verbose: bool,
}

impl LiveOptions {
    /// The CLI's options: this executable, signals handled, verbose.
    pub fn cli() -> LiveOptions {
        LiveOptions {
            exe: std::env::current_exe().unwrap_or_else(|_| "pacesim".into()),
            handle_signals: true,
            verbose: true,
        }
    }

    /// Options for a library caller (tests): the given executable, no signal handling, quiet.
    pub fn with_exe(exe: impl Into<PathBuf>) -> LiveOptions {
        LiveOptions {
            exe: exe.into(),
            handle_signals: false,
            verbose: false,
        }
    }
}

/// A finished live run.
#[derive(Debug)]
pub struct LiveRun {
    /// The summary, computed from the trace by the simulator's code.
    pub summary: Summary,
    /// The trace, JSON Lines (header first, events sorted by time).
    pub trace: Vec<u8>,
    /// The run's id.
    pub run_id: String,
    /// The schema it used (dropped by now).
    pub schema: Option<String>,
    /// The Redis key prefix it used (deleted by now).
    pub key_prefix: Option<String>,
    /// OS process ids of every worker process it started (all gone by now).
    pub worker_os_pids: Vec<u32>,
    /// Problems during cleanup (none normally).
    pub warnings: Vec<String>,
}

impl LiveRun {
    /// The trace's events (without the header).
    pub fn events(&self) -> Vec<Event> {
        let mut c = trace::Collect::default();
        trace::read("live", &self.trace[..], &mut c).expect("a live trace reads back");
        c.events
    }
}

/// Run on a fresh multi-threaded runtime (handling SIGINT/SIGTERM if `opts` says so).
pub fn run_blocking(sc: &Scenario, opts: &LiveOptions) -> Result<LiveRun, LiveError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LiveError::Setup(e.to_string()))?;
    rt.block_on(async {
        let (tx, rx) = watch::channel(false);
        let sig = opts.handle_signals.then(|| {
            tokio::spawn(async move {
                let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                    return;
                };
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                let _ = tx.send(true);
            })
        });
        let r = run(sc, opts, rx).await;
        if let Some(s) = sig {
            s.abort();
        }
        r
    })
}

/// A fresh run id: `<parent pid>_<random hex>`.
pub fn new_run_id() -> String {
    format!(
        "{}_{:08x}",
        std::process::id(),
        rng::mix64(mono_ns() ^ crate::live::clock::wall_ns() as u64) as u32
    )
}

/// The stores of one run, and what to clean up.
struct Stores {
    pg: Option<(PgSettings, String)>,
    redis: Option<(RedisSettings, String)>,
}

impl Stores {
    async fn setup(sc: &Scenario, run_id: &str, used: StoreUse) -> Result<Stores, LiveError> {
        let t = Duration::from_secs(3);
        let mut s = Stores { pg: None, redis: None };
        if used == StoreUse::Postgres {
            let (settings, admin) = PgSettings::from_env().connect_resolving_user(t).await?;
            // Schemas left by runs whose parent was SIGKILLed (and so could not clean up).
            if let Ok(orphans) = pg::orphan_schemas(&admin).await {
                for o in orphans {
                    let _ = pg::drop_schema(&admin, &o).await;
                }
            }
            let schema = pg::schema_name(run_id);
            pg::create_schema(&admin, &schema, sc.pacer.locks.unwrap_or(1))
                .await
                .map_err(|e| {
                    LiveError::Setup(format!(
                        "creating schema {schema}: {}",
                        crate::live::settings::error_chain(&e)
                    ))
                })?;
            s.pg = Some((settings, schema));
        }
        if used == StoreUse::Redis {
            let r = RedisSettings::from_env();
            tokio::task::spawn_blocking({
                let r = r.clone();
                move || r.check(t)
            })
            .await
            .map_err(|e| LiveError::Setup(e.to_string()))??;
            s.redis = Some((r, lredis::key_prefix(run_id)));
        }
        Ok(s)
    }

    /// Drop the schema and delete the keys; problems are returned, not raised.
    async fn cleanup(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some((settings, schema)) = &self.pg {
            match settings.connect(Duration::from_secs(5)).await {
                Ok(c) => {
                    if let Err(e) = pg::drop_schema(&c, schema).await {
                        warnings.push(format!("dropping schema {schema}: {e}"));
                    }
                }
                Err(e) => warnings.push(format!("dropping schema {schema}: {e}")),
            }
        }
        if let Some((settings, prefix)) = &self.redis {
            let (s, p) = (settings.clone(), prefix.clone());
            let r = tokio::task::spawn_blocking(move || {
                let mut c = s.connect(None, Duration::from_secs(5))?;
                lredis::delete_prefix(&mut c, &p)
            })
            .await;
            match r {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warnings.push(format!("deleting keys {prefix}*: {e}")),
                Err(e) => warnings.push(format!("deleting keys {prefix}*: {e}")),
            }
        }
        warnings
    }
}

/// Run a scenario live. Cleanup (workers, schema, keys) happens whatever the outcome; `cancel`
/// turning true stops the run (SIGINT/SIGTERM).
pub async fn run(sc: &Scenario, opts: &LiveOptions, cancel: watch::Receiver<bool>) -> Result<LiveRun, LiveError> {
    let used = store_use(&sc.pacer.backend).ok_or_else(|| {
        LiveError::Unsupported(format!(
            "backend `{}` has no live implementation (live mode knows: local, local_divided, row, shared_cache, advisory, claim_row, redis_lock, redis_gcra)",
            sc.pacer.backend
        ))
    })?;
    let run_id = new_run_id();
    let stores = Stores::setup(sc, &run_id, used).await?;
    if opts.verbose {
        eprintln!(
            "live: run {run_id}: {} worker processes, backend {}, schema {}, key prefix {}",
            sc.processes.count,
            sc.pacer.backend,
            stores.pg.as_ref().map_or("-", |p| p.1.as_str()),
            stores.redis.as_ref().map_or("-", |r| r.1.as_str()),
        );
    }
    let os_pids: Arc<Mutex<Vec<u32>>> = Arc::default();
    let inner = tokio::spawn(run_inner(
        sc.clone(),
        opts.clone(),
        run_id.clone(),
        stores.pg.clone(),
        stores.redis.clone(),
        Arc::clone(&os_pids),
        cancel,
    ));
    let r = inner.await;
    let warnings = stores.cleanup().await;
    for w in &warnings {
        eprintln!("warning: live cleanup: {w}");
    }
    let trace = match r {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(LiveError::Worker(format!("the live runner panicked: {e}"))),
    };
    let summary = summary::from_trace("live", &trace[..]).map_err(|e| LiveError::Worker(format!("live trace: {e}")))?;
    let worker_os_pids = os_pids.lock().expect("pids").clone();
    Ok(LiveRun {
        summary,
        trace,
        run_id,
        schema: stores.pg.map(|p| p.1),
        key_prefix: stores.redis.map(|r| r.1),
        worker_os_pids,
        warnings,
    })
}

/// A command from the runner to a worker's supervisor.
#[derive(Clone, Debug)]
enum Cmd {
    /// SIGKILL it now.
    Kill { restart_after: Option<Nanos> },
    /// Have it SIGKILL itself at `point`.
    Arm {
        point: KillPoint,
        restart_after: Option<Nanos>,
    },
    /// The run is over: kill it, do not restart.
    Stop,
}

/// How a supervisor ended.
#[derive(Debug)]
enum Ended {
    Finished,
    Dead,
    Stopped,
    Failed(String),
}

/// What supervisors share.
struct Ctx {
    sc: Scenario,
    exe: PathBuf,
    run_id: String,
    log: EventLog,
    clock: Arc<OnceLock<RunClock>>,
    dest: String,
    pg: Vec<Option<PgStore>>,
    redis: Vec<Option<RedisStore>>,
    os_pids: Arc<Mutex<Vec<u32>>>,
}

impl Ctx {
    fn now(&self) -> u64 {
        self.clock.get().map_or(0, RunClock::now)
    }
    fn push(&self, ev: Event) {
        self.log.lock().expect("event log").push(ev);
    }
}

fn store_faults(sc: &Scenario) -> bool {
    sc.faults.iter().any(|f| {
        matches!(
            f,
            FaultSpec::StoreOutage { .. }
                | FaultSpec::StoreLatency { .. }
                | FaultSpec::StoreRestart { .. }
                | FaultSpec::Partition { .. }
        )
    })
}

async fn run_inner(
    sc: Scenario,
    opts: LiveOptions,
    run_id: String,
    pg_target: Option<(PgSettings, String)>,
    redis_target: Option<(RedisSettings, String)>,
    os_pids: Arc<Mutex<Vec<u32>>>,
    mut cancel: watch::Receiver<bool>,
) -> Result<Vec<u8>, LiveError> {
    let n = sc.processes.count;
    let log: EventLog = Arc::default();
    let clock_cell: Arc<OnceLock<RunClock>> = Arc::default();
    let setup = |what: &str, e: &dyn std::fmt::Display| LiveError::Setup(format!("{what}: {e}"));

    // 1. The destination.
    let dest = destination::start(
        &sc.destination,
        crate::fault::throttles(&sc.faults),
        sc.seed,
        Arc::clone(&clock_cell),
        Arc::clone(&log),
    )
    .await
    .map_err(|e| setup("starting the destination", &e))?;

    // 2. Fault proxies, when the scenario has store faults.
    let mut proxies: Vec<Proxy> = Vec::new();
    let mut pg_stores: Vec<Option<PgStore>> = vec![None; n as usize];
    let mut redis_stores: Vec<Option<RedisStore>> = vec![None; n as usize];
    if let Some((settings, schema)) = &pg_target {
        let proxy = if store_faults(&sc) {
            if settings.host.starts_with('/') {
                return Err(LiveError::Unsupported(
                    "store faults need PostgreSQL over TCP (PGHOST is a socket directory)".into(),
                ));
            }
            let p = Proxy::start((settings.host.clone(), settings.port), n, sc.seed)
                .await
                .map_err(|e| setup("starting the store proxy", &e))?;
            proxies.push(p);
            proxies.last()
        } else {
            None
        };
        for (pid, slot) in pg_stores.iter_mut().enumerate() {
            let s = match proxy {
                Some(p) => settings.via("127.0.0.1", p.addrs[pid].port()),
                None => settings.clone(),
            };
            *slot = Some(PgStore {
                settings: s,
                schema: schema.clone(),
            });
        }
    }
    if let Some((settings, prefix)) = &redis_target {
        let proxy = if store_faults(&sc) {
            let hp = settings
                .host_port()
                .ok_or_else(|| LiveError::Unsupported("store faults need Redis over TCP".into()))?;
            let p = Proxy::start(hp, n, sc.seed)
                .await
                .map_err(|e| setup("starting the store proxy", &e))?;
            proxies.push(p);
            proxies.last()
        } else {
            None
        };
        for (pid, slot) in redis_stores.iter_mut().enumerate() {
            *slot = Some(RedisStore {
                settings: settings.clone(),
                via: proxy.map(|p| ("127.0.0.1".to_string(), p.addrs[pid].port())),
                prefix: prefix.clone(),
            });
        }
    }
    let proxies = Arc::new(proxies);

    // The long-transaction helper connects before the run starts.
    let mut helpers = Vec::new();
    if let Some((settings, _)) = &pg_target {
        for f in &sc.faults {
            if matches!(f, FaultSpec::LongTransaction { .. }) {
                helpers.push(Some(
                    settings
                        .connect(Duration::from_secs(3))
                        .await
                        .map_err(|e| setup("long-transaction helper", &e))?,
                ));
            }
        }
    }

    // 3. Supervisors.
    let ctx = Arc::new(Ctx {
        sc: sc.clone(),
        exe: opts.exe.clone(),
        run_id,
        log: Arc::clone(&log),
        clock: Arc::clone(&clock_cell),
        dest: dest.addr.to_string(),
        pg: pg_stores,
        redis: redis_stores,
        os_pids,
    });
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let (go_tx, go_rx) = watch::channel(None::<(u64, i64)>);
    let mut cmds = Vec::new();
    let mut set = tokio::task::JoinSet::new();
    for pid in 0..n {
        let (tx, rx) = mpsc::unbounded_channel();
        cmds.push(tx);
        set.spawn(supervise(Arc::clone(&ctx), pid, rx, ready_tx.clone(), go_rx.clone()));
    }
    drop(ready_tx);
    let stop_all = |cmds: &[mpsc::UnboundedSender<Cmd>]| {
        for c in cmds {
            let _ = c.send(Cmd::Stop);
        }
    };

    // 4. Every worker connected: fix the origin and go.
    let mut ready = 0;
    let mut failure: Option<String> = None;
    let barrier = tokio::time::sleep(Duration::from_secs(60));
    tokio::pin!(barrier);
    while ready < n && failure.is_none() {
        tokio::select! {
            r = ready_rx.recv() => match r {
                Some(_) => ready += 1,
                None => failure = Some("a worker exited before connecting".into()),
            },
            Some(r) = set.join_next() => {
                failure = Some(match r {
                    Ok((_, Ended::Failed(m))) => m,
                    Ok((pid, e)) => format!("worker {pid} ended before the run started ({e:?})"),
                    Err(e) => e.to_string(),
                });
            }
            _ = &mut barrier => failure = Some("workers did not connect within 60 s".into()),
            _ = cancelled(&mut cancel) => failure = Some(String::new()),
        }
    }
    if let Some(f) = failure {
        stop_all(&cmds);
        drop(go_tx);
        drain(&mut set).await;
        return Err(if *cancel.borrow() {
            LiveError::Interrupted
        } else {
            LiveError::Worker(f)
        });
    }
    let origin = mono_ns() + 3_000_000;
    let clock = RunClock::new(origin);
    let _ = clock_cell.set(clock);
    let _ = go_tx.send(Some((origin, clock.wall_at_origin())));

    // 5. Faults.
    let cmds = Arc::new(cmds);
    let mut fault_tasks = Vec::new();
    for (id, f) in sc.faults.iter().enumerate() {
        let helper = if matches!(f, FaultSpec::LongTransaction { .. }) {
            helpers.iter_mut().find_map(Option::take)
        } else {
            None
        };
        fault_tasks.push(tokio::spawn(fault(
            id as u32,
            f.clone(),
            sc.seed,
            n,
            clock,
            Arc::clone(&log),
            Arc::clone(&proxies),
            Arc::clone(&cmds),
            helper,
            pg_target.as_ref().map(|p| p.1.clone()),
        )));
    }

    // The run ends when every supervisor ends, at the duration, or on a signal.
    let duration = sc.duration.0;
    let mut by_deadline = false;
    let mut interrupted = false;
    let mut failures = Vec::new();
    let mut stopped_at: Option<u64> = None;
    loop {
        let grace = async {
            match stopped_at {
                Some(t) => clock.sleep_until(t + 10_000_000_000).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = set.join_next() => match r {
                None => break,
                Some(Ok((_, Ended::Failed(m)))) => {
                    failures.push(m);
                    if stopped_at.is_none() {
                        stopped_at = Some(clock.now());
                        stop_all(&cmds);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => failures.push(format!("a supervisor panicked: {e}")),
            },
            _ = clock.sleep_until(duration), if !by_deadline => {
                by_deadline = true;
                if stopped_at.is_none() {
                    stopped_at = Some(clock.now());
                }
                stop_all(&cmds);
            }
            _ = cancelled(&mut cancel), if !interrupted => {
                interrupted = true;
                if stopped_at.is_none() {
                    stopped_at = Some(clock.now());
                }
                stop_all(&cmds);
            }
            _ = grace => {
                // Supervisors that did not end: dropping them kills their workers.
                set.abort_all();
                drain(&mut set).await;
                break;
            }
        }
    }
    for t in &fault_tasks {
        t.abort();
    }
    drop(dest);
    drop(proxies);
    if interrupted {
        return Err(LiveError::Interrupted);
    }
    if !failures.is_empty() {
        return Err(LiveError::Worker(failures.join("; ")));
    }

    // 6. The trace: every event, sorted by time, cut at the duration.
    let mut events = std::mem::take(&mut *log.lock().expect("event log"));
    events.retain(|e| e.t() <= duration);
    events.sort_by_key(Event::t);
    let end = if by_deadline {
        duration
    } else {
        events.last().map_or(0, Event::t)
    };
    events.push(Event::End { t: end });
    let mut out = Vec::new();
    trace::encode_line(&crate::sim::header(&sc, "live"), &mut out);
    for e in &events {
        trace::encode_line(e, &mut out);
    }
    Ok(out)
}

/// Resolves once `cancel` turns true; never, if its sender is gone without cancelling.
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn drain(set: &mut tokio::task::JoinSet<(u32, Ended)>) {
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while set.join_next().await.is_some() {}
    })
    .await;
    set.abort_all();
}

/// Start one worker process.
fn spawn_worker(
    ctx: &Ctx,
    pid: u32,
    incarnation: u32,
    done: u64,
    origin: Option<(u64, i64)>,
) -> std::io::Result<tokio::process::Child> {
    let spec = WorkerSpec {
        run_id: ctx.run_id.clone(),
        pid,
        incarnation,
        done,
        scenario: ctx.sc.clone(),
        origin,
        dest: ctx.dest.clone(),
        pg: ctx.pg[pid as usize].clone(),
        redis: ctx.redis[pid as usize].clone(),
    };
    let mut cmd = tokio::process::Command::new(&ctx.exe);
    cmd.arg("worker")
        .arg("--run")
        .arg(&ctx.run_id)
        .arg("--pid")
        .arg(pid.to_string())
        .env(SPEC_ENV, serde_json::to_string(&spec).expect("specs serialise"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Die with the parent (with the thread that forked us: a runtime worker thread,
            // which lives as long as the run).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    if let Some(id) = child.id() {
        ctx.os_pids.lock().expect("pids").push(id);
    }
    Ok(child)
}

/// One worker's life: its process and any restarts.
async fn supervise(
    ctx: Arc<Ctx>,
    pid: u32,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    ready: mpsc::UnboundedSender<u32>,
    mut go: watch::Receiver<Option<(u64, i64)>>,
) -> (u32, Ended) {
    let mut incarnation = 0u32;
    let mut done = 0u64;
    let mut cmds_open = true;
    loop {
        let origin = if incarnation == 0 { None } else { *go.borrow() };
        let mut child = match spawn_worker(&ctx, pid, incarnation, done, origin) {
            Ok(c) => c,
            Err(e) => return (pid, Ended::Failed(format!("cannot start worker {pid}: {e}"))),
        };
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        // invariant: Some(restart) once this incarnation was killed by a fault.
        let mut restart: Option<Option<Nanos>> = None;
        let mut armed: Option<Option<Nanos>> = None;
        let mut hard_deadline: Option<u64> = None;
        let mut stopping = false;
        let mut fatal: Option<String> = None;
        // Locks this incarnation holds (from its own events): a SIGKILL ends its sections.
        let mut held: Vec<u32> = Vec::new();
        let died = |held: &mut Vec<u32>, t: u64| {
            for lock in held.drain(..) {
                ctx.push(Event::LockReleased {
                    t,
                    pid,
                    lock,
                    reason: ReleaseReason::HolderDied,
                });
            }
        };
        loop {
            let clock = ctx.clock.get().copied();
            let hard = async {
                match (hard_deadline, clock) {
                    (Some(d), Some(c)) => c.sleep_until(d).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                line = lines.next_line() => {
                    let Ok(Some(line)) = line else { break };
                    match serde_json::from_str::<ToParent>(&line) {
                        Ok(ToParent::Ready) => {
                            let _ = ready.send(pid);
                            let origin = loop {
                                if let Some(o) = *go.borrow() {
                                    break Some(o);
                                }
                                if go.changed().await.is_err() {
                                    break None;
                                }
                            };
                            match origin {
                                Some((o, w)) => {
                                    let _ = stdin.write_all(ToWorker::Go(o, w).line().as_bytes()).await;
                                }
                                None => {
                                    stopping = true;
                                    let _ = child.start_kill();
                                }
                            }
                        }
                        Ok(ToParent::Event { ev }) => {
                            let crashed = match ev {
                                Event::FetchEnd { .. } => {
                                    done += 1;
                                    None
                                }
                                Event::Crash { t, .. } => {
                                    restart = Some(armed.take().flatten());
                                    Some(t)
                                }
                                Event::LockAcquired { lock, .. } => {
                                    held.push(lock);
                                    None
                                }
                                Event::LockReleased { lock, .. } => {
                                    held.retain(|&l| l != lock);
                                    None
                                }
                                _ => None,
                            };
                            ctx.push(ev);
                            if let Some(t) = crashed {
                                died(&mut held, t);
                            }
                        }
                        Ok(ToParent::JobStart { t }) => hard_deadline = ctx.sc.processes.hard_limit.map(|h| t + h.0),
                        Ok(ToParent::JobEnd { .. }) => hard_deadline = None,
                        Ok(ToParent::Fatal { message }) => fatal = Some(message),
                        Err(e) => fatal = Some(format!("unreadable message {line:?}: {e}")),
                    }
                }
                cmd = cmds.recv(), if cmds_open => match cmd {
                    Some(Cmd::Kill { restart_after }) => {
                        if restart.is_none() && !stopping {
                            let t = ctx.now();
                            let _ = child.start_kill();
                            restart = Some(restart_after);
                            ctx.push(Event::Crash { t, pid, point: CrashPoint::Immediate });
                            died(&mut held, t);
                        }
                    }
                    Some(Cmd::Arm { point, restart_after }) => {
                        if restart.is_none() && !stopping {
                            armed = Some(restart_after);
                            let _ = stdin.write_all(ToWorker::Arm(point).line().as_bytes()).await;
                        }
                    }
                    Some(Cmd::Stop) | None => {
                        cmds_open = cmd.is_some();
                        stopping = true;
                        let _ = child.start_kill();
                    }
                },
                _ = hard => {
                    hard_deadline = None;
                    if restart.is_none() && !stopping {
                        let t = ctx.now();
                        let _ = child.start_kill();
                        // Past the hard limit the job is killed; the pool starts a fresh worker.
                        restart = Some(Some(Nanos::ZERO));
                        ctx.push(Event::Crash { t, pid, point: CrashPoint::HardLimit });
                        died(&mut held, t);
                    }
                }
            }
        }
        let status = child.wait().await;
        if stopping {
            return (pid, Ended::Stopped);
        }
        if let Some(m) = fatal {
            return (pid, Ended::Failed(format!("worker {pid}: {m}")));
        }
        let after = match restart {
            None => {
                return match status {
                    Ok(s) if s.success() => (pid, Ended::Finished),
                    Ok(s) => (pid, Ended::Failed(format!("worker {pid} exited unexpectedly ({s})"))),
                    Err(e) => (pid, Ended::Failed(format!("worker {pid}: {e}"))),
                };
            }
            Some(None) => return (pid, Ended::Dead),
            Some(Some(d)) => d,
        };
        // A fresh process takes its place after `after`.
        let until = ctx.now() + after.0;
        let clock = ctx.clock.get().copied().unwrap_or(RunClock::new(mono_ns()));
        loop {
            tokio::select! {
                _ = clock.sleep_until(until) => break,
                cmd = cmds.recv(), if cmds_open => {
                    if matches!(cmd, Some(Cmd::Stop) | None) {
                        return (pid, Ended::Stopped);
                    }
                }
            }
        }
        incarnation += 1;
        ctx.push(Event::Restart { t: ctx.now(), pid });
    }
}

/// Drive one fault of the schedule.
#[allow(clippy::too_many_arguments)]
async fn fault(
    id: u32,
    f: FaultSpec,
    seed: u64,
    n: u32,
    clock: RunClock,
    log: EventLog,
    proxies: Arc<Vec<Proxy>>,
    cmds: Arc<Vec<mpsc::UnboundedSender<Cmd>>>,
    helper: Option<tokio_postgres::Client>,
    schema: Option<String>,
) {
    let mut rng: Rng = rng::stream(seed ^ (id as u64).wrapping_mul(0x9e37_79b9), Entity::Faults);
    let edge = |start: bool, t: u64| {
        log.lock().expect("event log").push(Event::Fault {
            t,
            id,
            kind: f.fault_kind(),
            start,
        });
    };
    let update = |g: &dyn Fn(&mut crate::live::proxy::ProxyState)| {
        for p in proxies.iter() {
            p.update(g);
        }
    };
    match &f {
        FaultSpec::Kill {
            at,
            rate,
            process,
            point,
            restart_after,
        } => {
            let mut next = match (at, rate) {
                (Some(a), _) => a.0,
                (None, Some(r)) => exp_gap(&mut rng, *r),
                _ => return,
            };
            loop {
                clock.sleep_until(next).await;
                let pid = process.unwrap_or_else(|| rng.random_range(0..n));
                let cmd = match point {
                    None => Cmd::Kill {
                        restart_after: *restart_after,
                    },
                    Some(p) => Cmd::Arm {
                        point: *p,
                        restart_after: *restart_after,
                    },
                };
                let _ = cmds[pid as usize].send(cmd);
                match rate {
                    Some(r) => next = clock.now() + exp_gap(&mut rng, *r),
                    None => return,
                }
            }
        }
        FaultSpec::Clock { .. } => edge(true, 0),
        FaultSpec::StoreOutage { at, duration, mode } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            let m = *mode;
            update(&|s| s.outages.push(m));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.outages.is_empty() {
                    s.outages.remove(0);
                }
            });
        }
        FaultSpec::StoreLatency { at, duration, added } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.added.push(added.clone()));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.added.is_empty() {
                    s.added.remove(0);
                }
            });
        }
        FaultSpec::StoreRestart { at, duration } => {
            // Every session ends (and with it the advisory locks it held); the store refuses
            // connections while it restarts.
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.outages.push(crate::fault::OutageMode::Refuse));
            clock.sleep_until(at.0 + duration.0.max(1_000_000)).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.outages.is_empty() {
                    s.outages.remove(0);
                }
            });
        }
        FaultSpec::Partition {
            at,
            duration,
            processes,
        } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.partitioned.extend_from_slice(processes));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                for p in processes {
                    if let Some(i) = s.partitioned.iter().position(|q| q == p) {
                        s.partitioned.remove(i);
                    }
                }
            });
        }
        FaultSpec::DestinationThrottle { at, duration, .. } => {
            // The destination applies the window itself, by arrival time; only the edges here.
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
        }
        FaultSpec::LongTransaction { at, duration } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            if let (Some(c), Some(schema)) = (&helper, &schema)
                && let Err(e) = pg::hold_row_lock(c, schema, Duration::from_nanos(duration.0)).await
            {
                eprintln!("warning: long_transaction fault: {e}");
            } else if helper.is_none() {
                clock.sleep_until(at.0 + duration.0).await;
            }
            edge(false, clock.now());
        }
    }
}

fn exp_gap(r: &mut Rng, rate: f64) -> u64 {
    Nanos::from_secs_f64(Exp::new(rate).expect("validated rate").sample(r)).0
}
