//! The live runner: stores, destination, proxies, worker processes, faults, and cleanup.
//!
//! [`run`] owns one run from start to finish:
//!
//! 1. check the store the backend needs and create the run's schema / key prefix;
//! 2. start the destination, and the fault proxies when the scenario has store faults;
//! 3. spawn one supervisor task per worker; each spawns its worker process, forwards its
//!    events, and kills or restarts it as faults say (for an external program,
//!    `external.rs`: the origin is fixed before they start, and they get no `go`);
//! 4. once every worker is connected, fix the origin (reference time 0) and send `go`;
//! 5. drive the fault schedule; stop at the scenario's duration, when every worker is done,
//!    or on SIGINT/SIGTERM;
//! 6. merge and sort the events into a trace and summarise it with the simulator's code;
//! 7. always: kill what is left, drop the schema, delete the keys.
//!
//! The jobs it hands out live beside it, one file each: `stores.rs` sets the stores up and
//! cleans them up (steps 1 and 7), `supervisor.rs` is one worker process's life (step 3), and
//! `faults.rs` drives the fault schedule (step 5).

use crate::fault::FaultSpec;
use crate::live::clock::{RunClock, mono_ns};
use crate::live::external::{self, ExtCtx, Targets, WorkerCommand};
use crate::live::faults::{Faults, Helpers, fault};
use crate::live::proto::{PgStore, RedisStore};
use crate::live::proxy::Proxy;
use crate::live::settings::{PgSettings, RedisSettings};
use crate::live::stores::Stores;
use crate::live::supervisor::{Cmd, Ctx, Ended, supervise};
use crate::live::{EventLog, LiveError, LiveOptions, destination};
use crate::rng;
use crate::scenario::Scenario;
use crate::summary::{self, Summary};
use crate::trace::{self, Event};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

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
    /// What the run could not do as asked, or saw go wrong without failing it (an external
    /// worker that never reached the destination, a kill point armed that never fired, a kill
    /// that landed before its target asked the store for anything).
    pub notes: Vec<String>,
    /// When every worker was ready, ns on the trace's clock: the scenario's time 0, from which
    /// its faults and its duration count (0 for pacesim's own workers, which start on `go`; an
    /// external program's start-up otherwise).
    pub ready_ns: u64,
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
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                    signal(SignalKind::hangup()),
                ) else {
                    return;
                };
                // SIGHUP (the terminal closed, an ssh session dropped) stops and cleans up as
                // SIGINT and SIGTERM do; the exit status says which came (128 + its number)
                let n = tokio::select! {
                    _ = int.recv() => libc::SIGINT,
                    _ = term.recv() => libc::SIGTERM,
                    _ = hup.recv() => libc::SIGHUP,
                };
                STOP_SIGNAL.store(n, std::sync::atomic::Ordering::Relaxed);
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

/// The signal that stopped the last run of [`run_blocking`] (0: none yet).
static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The exit status a command stopped by a signal returns: 128 + the signal's number (130 for
/// SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process it killed.
pub fn interrupted_status() -> i32 {
    match STOP_SIGNAL.load(std::sync::atomic::Ordering::Relaxed) {
        0 => 128 + libc::SIGINT,
        n => 128 + n,
    }
}

/// A fresh run id: `<parent pid>_<random hex>`.
pub fn new_run_id() -> String {
    format!(
        "{}_{:08x}",
        std::process::id(),
        rng::mix64(mono_ns() ^ crate::live::clock::wall_ns() as u64) as u32
    )
}

/// What live mode cannot do yet, refused before anything starts.
fn check_supported(sc: &Scenario) -> Result<(), LiveError> {
    if !sc.platforms.is_empty() {
        return Err(LiveError::Unsupported(
            "[[platforms]] is simulated only: live mode has one destination and one lock key per run, so it \
             cannot yet give each platform its own"
                .into(),
        ));
    }
    if sc.jobs.is_some() {
        return Err(LiveError::Unsupported(
            "[jobs] (download tasks through a broker: the tick, the sweep, backfill chunks, redelivery) is \
             simulated only: live mode runs pacesim's own job loop, with no broker or download events"
                .into(),
        ));
    }
    if sc.fetch.stuck.is_some() {
        return Err(LiveError::Unsupported(
            "`[fetch] stuck` (stuck files) is simulated only: the live destination answers every request".into(),
        ));
    }
    if sc.processes.threads > 1 {
        return Err(LiveError::Unsupported(format!(
            "`[processes] threads = {}` is simulated only: pacesim's live workers run one loop per OS \
             process, and an external worker is not told a thread count (no PACESIM_THREADS)",
            sc.processes.threads
        )));
    }
    Ok(())
}

/// The run's stores, set up: the schema and key prefix of the store the backend needs (for an
/// external worker, the store the named design uses; none for an in-process pacer).
async fn open_stores(
    sc: &Scenario,
    opts: &LiveOptions,
    adapter: Option<&'static dyn crate::live::adapter::LiveSpec>,
    run_id: &str,
) -> Result<Stores, LiveError> {
    if opts.worker.is_some() {
        external::unsupported(sc).map_err(|e| LiveError::Unsupported(e.to_string()))?;
        // the stores the named design uses (none for an in-process pacer)
        let (used, slots, tables) = adapter.map_or((crate::live::StoreUse::None, 1, Vec::new()), |l| {
            (l.store(), l.slots(sc), l.tables(sc))
        });
        Ok(Stores::setup_for(run_id, used, slots, &tables).await?)
    } else {
        let live = adapter.ok_or_else(|| {
            let known = opts.backends.live_names();
            LiveError::Unsupported(format!(
                "backend `{}` has no live store side (its registry entry's `live` is None; \
                 live mode knows: {})",
                sc.pacer.backend,
                known.join(", ")
            ))
        })?;
        Ok(Stores::setup(sc, run_id, live).await?)
    }
}

/// Run a scenario live. Cleanup (workers, schema, keys) happens whatever the outcome; `cancel`
/// turning true stops the run (SIGINT/SIGTERM).
pub async fn run(sc: &Scenario, opts: &LiveOptions, cancel: watch::Receiver<bool>) -> Result<LiveRun, LiveError> {
    check_supported(sc)?;
    let adapter = opts.backends.adapter(sc);
    let run_id = new_run_id();
    if opts.handle_signals {
        // the CLI: orphans of the workers are re-parented to pacesim, which kills and reaps
        // them at the run's end (`reap`)
        crate::live::reap::become_subreaper();
    }
    let mut stores = open_stores(sc, opts, adapter, &run_id).await?;
    if opts.verbose {
        eprintln!(
            "live: run {run_id}: {} worker processes, {}, schema {}, key prefix {}",
            sc.processes.count,
            match &opts.worker {
                Some(w) => format!("external worker `{}` (design: {})", w.display(), sc.pacer.backend),
                None => format!("backend {}", sc.pacer.backend),
            },
            stores.pg.as_ref().map_or("-", |p| p.1.as_str()),
            stores.redis.as_ref().map_or("-", |r| r.1.as_str()),
        );
    }
    // `[live] setup`: the team's own tables, before any worker starts (setup.rs)
    if let Err(e) = crate::live::setup::run(sc, opts, &run_id, &stores, cancel.clone()).await {
        for w in stores.cleanup().await {
            eprintln!("warning: live cleanup: {w}");
        }
        return Err(e);
    }
    let os_pids: Arc<Mutex<Vec<u32>>> = Arc::default();
    let notes: Arc<Mutex<Vec<String>>> = Arc::default();
    let ready_at: Arc<std::sync::atomic::AtomicU64> = Arc::default();
    let inner = tokio::spawn(run_inner(
        sc.clone(),
        opts.clone(),
        run_id.clone(),
        stores.pg.clone(),
        stores.redis.clone(),
        Arc::clone(&os_pids),
        Arc::clone(&notes),
        Arc::clone(&ready_at),
        cancel,
    ));
    let r = inner.await;
    // Every process the workers started, wherever it went (a new session, a dead parent),
    // before the schema and keys go: none can recreate them afterwards.
    {
        let (tags, roots, adopted) = (
            crate::live::reap::tags(&run_id, None),
            os_pids.lock().expect("pids").clone(),
            opts.handle_signals,
        );
        let _ = tokio::task::spawn_blocking(move || crate::live::reap::sweep(&tags, &roots, adopted, &[])).await;
    }
    let warnings = stores.cleanup().await;
    for w in &warnings {
        eprintln!("warning: live cleanup: {w}");
    }
    let trace = match r {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(LiveError::Worker(format!("the live runner panicked: {e}"))),
    };
    let mut summary =
        summary::from_trace("live", &trace[..]).map_err(|e| LiveError::Worker(format!("live trace: {e}")))?;
    let worker_os_pids = os_pids.lock().expect("pids").clone();
    let mut notes = notes.lock().expect("notes").clone();
    let ready_ns = ready_at.load(std::sync::atomic::Ordering::Relaxed);
    let mut c = trace::Collect::default();
    trace::read("live", &trace[..], &mut c).map_err(|e| LiveError::Worker(format!("live trace: {e}")))?;
    untested_kills(&c.events, &mut summary.checks, &mut notes);
    Ok(LiveRun {
        summary,
        trace,
        run_id,
        schema: stores.pg.map(|p| p.1),
        key_prefix: stores.redis.map(|r| r.1),
        worker_os_pids,
        warnings,
        notes,
        ready_ns,
    })
}

/// How long the workers have to get ready (`[live] ready_timeout`, default 30 s).
fn ready_timeout(sc: &Scenario) -> u64 {
    sc.live
        .as_ref()
        .and_then(|l| l.ready_timeout)
        .map_or(30_000_000_000, |t| t.0)
}

fn secs(ns: u64) -> String {
    format!("{:.2} s", ns as f64 / 1e9)
}

/// The message when external workers were not all ready within `wait`: each one that was not,
/// with its last stderr lines.
fn not_ready(x: &ExtCtx, finished: &[bool], wait: u64) -> String {
    let late: Vec<u32> = (0..x.sc.processes.count)
        .filter(|&p| !finished[p as usize] && !x.is_ready(p))
        .collect();
    let names = late.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    format!(
        "worker{} {names} (`{}`) not ready within {} ([live] ready_timeout): a worker is ready at its \
         first line on stdout (an event, or {{\"ev\":\"ready\"}} once started up) or its first request \
         to the destination; the scenario's clock starts when every worker is ready{}",
        if late.len() > 1 { "s" } else { "" },
        x.cmd.display(),
        secs(wait),
        late.first().map_or(String::new(), |&p| x.tail(p)),
    )
}

/// The process an event shows asking the store for permission (or answered by it, or acting on
/// its answer), if it is such an event.
fn asked_the_store(e: &Event) -> Option<u32> {
    match *e {
        Event::OpSent { pid, .. }
        | Event::Grant { pid, .. }
        | Event::Deny { pid, .. }
        | Event::Reply { pid, .. }
        | Event::StoreError { pid, .. }
        | Event::LockAcquired { pid, .. }
        | Event::Fallback { pid, .. }
        | Event::Uncapped { pid, .. } => Some(pid),
        _ => None,
    }
}

/// A kill that landed before its target asked the store for anything (no `op_sent`, `grant`,
/// `deny`, `reply`, `store_error`, lock, fallback or fetch since it started) tested nothing of
/// the design's healing: it is noted, and `self_heal` is not judged on it (never a pass; a
/// failure another kill caused stands).
pub(crate) fn untested_kills(
    events: &[Event],
    checks: &mut std::collections::BTreeMap<String, summary::CheckOut>,
    notes: &mut Vec<String>,
) {
    use crate::check::Status;
    let mut asked: std::collections::BTreeMap<u32, bool> = std::collections::BTreeMap::new();
    let (mut kills, mut untested) = (0usize, Vec::new());
    for e in events {
        match e {
            Event::Arrival { pid, .. } => {
                asked.insert(*pid, true);
            }
            e if let Some(pid) = asked_the_store(e) => {
                asked.insert(pid, true);
            }
            Event::Restart { pid, .. } => {
                asked.insert(*pid, false);
            }
            Event::Crash { t, pid, .. } => {
                kills += 1;
                if !asked.get(pid).copied().unwrap_or(false) {
                    untested.push(format!("process {pid} at {}", secs(*t)));
                }
                asked.insert(*pid, false);
            }
            _ => {}
        }
    }
    if untested.is_empty() {
        return;
    }
    let what = format!(
        "{} of {kills} kill(s) landed before the process asked the store for anything (it had not started its \
         protocol: nothing of the design's healing was tested): {}",
        untested.len(),
        untested.join(", ")
    );
    notes.push(format!("{what}; self_heal is not judged on it"));
    if let Some(v) = checks.get_mut("self_heal") {
        if v.verdict == Status::Pass || untested.len() == kills {
            v.verdict = Status::NotJudged;
            v.detail = format!("not judged: {what} (was: {})", v.detail);
        } else {
            v.detail = format!("{}; also {what}", v.detail);
        }
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

/// What the run shares while it runs: the scenario, the event log, the run clock once fixed.
struct Shared {
    sc: Scenario,
    log: EventLog,
    clock: Arc<OnceLock<RunClock>>,
    /// OS process ids of every worker process started (the runner's last-resort cleanup).
    os_pids: Arc<Mutex<Vec<u32>>>,
    /// Notes for the run's output.
    notes: Arc<Mutex<Vec<String>>>,
}

impl Shared {
    /// The run clock: fixed already (external workers get it before they start), else now, a
    /// moment ahead (pacesim's own workers start on `go`).
    fn fix_clock(&self) -> RunClock {
        match self.clock.get() {
            Some(c) => *c,
            None => {
                let clock = RunClock::new(mono_ns() + 3_000_000);
                let _ = self.clock.set(clock);
                clock
            }
        }
    }
}

fn setup_error(what: &str, e: &dyn std::fmt::Display) -> LiveError {
    LiveError::Setup(format!("{what}: {e}"))
}

/// The destination (for external workers it also records each fetch's start and end, and
/// lists the requests that named no worker in `strays`).
async fn start_destination(
    run: &Shared,
    external: bool,
    strays: &Arc<Mutex<Vec<String>>>,
) -> Result<destination::DestinationServer, LiveError> {
    let sc = &run.sc;
    let throttles = crate::fault::throttles(&sc.faults);
    let (clock, log) = (Arc::clone(&run.clock), Arc::clone(&run.log));
    let started = if external {
        let ext = destination::ExternalCfg {
            processes: sc.processes.count,
            fetch: sc.fetch.duration.clone(),
            strays: Arc::clone(strays),
        };
        destination::start_external(&sc.destination, throttles, sc.seed, clock, log, ext).await
    } else {
        destination::start(&sc.destination, throttles, sc.seed, clock, log).await
    };
    started.map_err(|e| setup_error("starting the destination", &e))
}

/// Each worker's way to its stores: straight, or through a fault proxy of its own when the
/// scenario has store faults.
struct Routes {
    proxies: Arc<Vec<Proxy>>,
    pg: Vec<Option<PgStore>>,
    redis: Vec<Option<RedisStore>>,
}

impl Routes {
    async fn start(
        sc: &Scenario,
        pg_target: Option<&(PgSettings, String)>,
        redis_target: Option<&(RedisSettings, String)>,
    ) -> Result<Routes, LiveError> {
        let n = sc.processes.count;
        let mut proxies: Vec<Proxy> = Vec::new();
        let mut pg: Vec<Option<PgStore>> = vec![None; n as usize];
        let mut redis: Vec<Option<RedisStore>> = vec![None; n as usize];
        if let Some((settings, schema)) = pg_target {
            if store_faults(sc) && settings.host.starts_with('/') {
                return Err(LiveError::Unsupported(
                    "store faults need PostgreSQL over TCP (PGHOST is a socket directory)".into(),
                ));
            }
            let proxy = Routes::proxy(sc, (settings.host.clone(), settings.port), &mut proxies).await?;
            for (pid, slot) in pg.iter_mut().enumerate() {
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
        if let Some((settings, prefix)) = redis_target {
            let hp = match store_faults(sc) {
                true => Some(
                    settings
                        .host_port()
                        .ok_or_else(|| LiveError::Unsupported("store faults need Redis over TCP".into()))?,
                ),
                false => None,
            };
            let proxy = match hp {
                Some(hp) => Routes::proxy(sc, hp, &mut proxies).await?,
                None => None,
            };
            for (pid, slot) in redis.iter_mut().enumerate() {
                *slot = Some(RedisStore {
                    settings: settings.clone(),
                    via: proxy.map(|p| ("127.0.0.1".to_string(), p.addrs[pid].port())),
                    prefix: prefix.clone(),
                });
            }
        }
        Ok(Routes {
            proxies: Arc::new(proxies),
            pg,
            redis,
        })
    }

    /// A fault proxy to `upstream` when the scenario has store faults (kept in `proxies`).
    async fn proxy<'a>(
        sc: &Scenario,
        upstream: (String, u16),
        proxies: &'a mut Vec<Proxy>,
    ) -> Result<Option<&'a Proxy>, LiveError> {
        if !store_faults(sc) {
            return Ok(None);
        }
        let p = Proxy::start(upstream, sc.processes.count, sc.seed)
            .await
            .map_err(|e| setup_error("starting the store proxy", &e))?;
        proxies.push(p);
        Ok(proxies.last())
    }
}

/// The helper connections the faults need, made before the run starts (so no fault is late by
/// a connect): one PostgreSQL connection per `long_transaction`, one PostgreSQL and one Redis
/// connection per `state_lost`; by fault, in the schedule's order.
async fn fault_helpers(
    sc: &Scenario,
    pg_target: Option<&(PgSettings, String)>,
    redis_target: Option<&(RedisSettings, String)>,
) -> Result<Vec<Helpers>, LiveError> {
    let mut long_tx = Vec::new();
    if let Some((settings, _)) = pg_target {
        for f in &sc.faults {
            if matches!(f, FaultSpec::LongTransaction { .. }) {
                let c = settings
                    .connect(Duration::from_secs(3))
                    .await
                    .map_err(|e| setup_error("long-transaction helper", &e))?;
                long_tx.push(c);
            }
        }
    }
    let mut long_tx = long_tx.into_iter();
    let mut helpers = Vec::new();
    for f in &sc.faults {
        let mut h = Helpers::default();
        if matches!(f, FaultSpec::LongTransaction { .. }) {
            h.long_tx = long_tx.next();
        }
        if matches!(f, FaultSpec::StateLost { .. }) {
            if let Some((settings, schema)) = pg_target {
                let c = settings
                    .connect(Duration::from_secs(3))
                    .await
                    .map_err(|e| setup_error("state-lost helper (PostgreSQL)", &e))?;
                h.state.pg = Some((c, schema.clone()));
            }
            if let Some((settings, prefix)) = redis_target {
                let s = settings.clone();
                let con = tokio::task::spawn_blocking(move || s.connect(None, Duration::from_secs(3)))
                    .await
                    .map_err(|e| setup_error("state-lost helper (Redis)", &e))?
                    .map_err(|e| setup_error("state-lost helper (Redis)", &e))?;
                h.state.redis = Some((con, prefix.clone()));
            }
        }
        helpers.push(h);
    }
    Ok(helpers)
}

/// What external workers share (their supervisors, the runner): the origin is fixed now,
/// before they start, and given to them in their environment; they need no handshake.
fn external_ctx(
    run: &Shared,
    opts: &LiveOptions,
    cmd: &WorkerCommand,
    run_id: &str,
    routes: &Routes,
    dest_port: u16,
) -> Arc<ExtCtx> {
    let (sc, n) = (&run.sc, run.sc.processes.count);
    let clock = RunClock::new(mono_ns());
    let _ = run.clock.set(clock);
    let pacer = serde_json::json!({
        "backend": sc.pacer.backend,
        "rate": sc.pacer.rate,
        "options": opts.backends.detail(sc).unwrap_or(serde_json::Value::Null),
    });
    Arc::new(ExtCtx {
        sc: sc.clone(),
        cmd: cmd.clone(),
        run_id: run_id.to_string(),
        log: Arc::clone(&run.log),
        clock,
        dest_port,
        targets: routes
            .pg
            .iter()
            .zip(&routes.redis)
            .map(|(pg, redis)| Targets {
                pg: pg.clone(),
                redis: redis.clone(),
            })
            .collect(),
        os_pids: Arc::clone(&run.os_pids),
        pacer: pacer.to_string(),
        tails: (0..n).map(|_| Mutex::default()).collect(),
        notes: Arc::clone(&run.notes),
        forward_stderr: opts.verbose,
        ready: (0..n).map(|_| Default::default()).collect(),
        start: Default::default(),
    })
}

/// The workers' supervisors, one task each, and the runner's lines to them.
struct Fleet {
    n: u32,
    ext: Option<Arc<ExtCtx>>,
    cmds: Arc<Vec<mpsc::UnboundedSender<Cmd>>>,
    set: tokio::task::JoinSet<(u32, Ended)>,
    ready_rx: mpsc::UnboundedReceiver<u32>,
    go_tx: watch::Sender<Option<(u64, i64)>>,
}

/// How the workers' run ended.
struct Ending {
    /// At the scenario's duration.
    by_deadline: bool,
    /// On a signal.
    interrupted: bool,
    /// Workers that failed (their supervisors' messages).
    failures: Vec<String>,
}

impl Fleet {
    /// One supervisor per worker: pacesim's own (`ctx`), or the external program's (`ext`).
    fn spawn(ctx: Arc<Ctx>, ext: Option<Arc<ExtCtx>>, n: u32) -> Fleet {
        let (ready_tx, ready_rx) = mpsc::unbounded_channel();
        let (go_tx, go_rx) = watch::channel(None::<(u64, i64)>);
        let mut cmds = Vec::new();
        let mut set = tokio::task::JoinSet::new();
        for pid in 0..n {
            let (tx, rx) = mpsc::unbounded_channel();
            cmds.push(tx);
            match &ext {
                Some(x) => {
                    set.spawn(external::supervise(Arc::clone(x), pid, rx));
                }
                None => {
                    set.spawn(supervise(Arc::clone(&ctx), pid, rx, ready_tx.clone(), go_rx.clone()));
                }
            }
        }
        Fleet {
            n,
            ext,
            cmds: Arc::new(cmds),
            set,
            ready_rx,
            go_tx,
        }
    }

    fn stop_all(&self) {
        for c in self.cmds.iter() {
            let _ = c.send(Cmd::Stop);
        }
    }

    /// Wait until every worker is ready: pacesim's own connected (then the origin is fixed
    /// and they get `go`); an external one printed its first line or reached the destination
    /// (the scenario's clock starts there: faults and the duration count from it). `Some`:
    /// why not (empty: cancelled).
    async fn await_ready(&mut self, wait: u64, cancel: &mut watch::Receiver<bool>) -> Option<String> {
        let n = self.n;
        let mut ready = 0;
        let mut failure: Option<String> = None;
        let barrier = tokio::time::sleep(Duration::from_nanos(wait));
        tokio::pin!(barrier);
        let mut poll = tokio::time::interval(Duration::from_millis(5));
        let mut finished = vec![false; n as usize];
        let ext = self.ext.clone();
        while ready < n && failure.is_none() {
            tokio::select! {
                r = self.ready_rx.recv(), if ext.is_none() => match r {
                    Some(_) => ready += 1,
                    None => failure = Some("a worker exited before connecting".into()),
                },
                _ = poll.tick(), if ext.is_some() => {
                    if let Some(x) = &ext {
                        ready = (0..n).filter(|&p| finished[p as usize] || x.is_ready(p)).count() as u32;
                    }
                }
                Some(r) = self.set.join_next() => match r {
                    // an external worker that made all its requests before the others were ready
                    Ok((pid, Ended::Finished)) if ext.is_some() => finished[pid as usize] = true,
                    Ok((_, Ended::Failed(m))) => failure = Some(m),
                    Ok((pid, e)) => failure = Some(format!("worker {pid} ended before the run started ({e:?})")),
                    Err(e) => failure = Some(e.to_string()),
                },
                _ = &mut barrier => failure = Some(match &ext {
                    None => format!("workers did not connect within {}", secs(wait)),
                    Some(x) => not_ready(x, &finished, wait),
                }),
                _ = cancelled(cancel) => failure = Some(String::new()),
            }
        }
        failure
    }

    /// The run did not start: stop every worker, and no `go`.
    async fn abandon(self) {
        let Fleet {
            cmds,
            mut set,
            ready_rx,
            go_tx,
            ..
        } = self;
        for c in cmds.iter() {
            let _ = c.send(Cmd::Stop);
        }
        drop(go_tx);
        drain(&mut set).await;
        drop((cmds, ready_rx));
    }

    /// Send `go` (pacesim's own workers start on it); the scenario's time 0 on the run clock:
    /// the origin itself for pacesim's own workers, when the last one was ready for an
    /// external program's.
    fn go(&self, clock: RunClock, dest: &destination::DestinationServer) -> u64 {
        let _ = self.go_tx.send(Some((clock.origin(), clock.wall_at_origin())));
        match &self.ext {
            Some(x) => {
                let t = clock.now();
                x.start.store(t, std::sync::atomic::Ordering::Relaxed);
                dest.delay_throttles(t);
                t
            }
            None => 0,
        }
    }

    /// Run until every supervisor ends, the scenario's `duration` (on the run clock), or a
    /// signal; a worker's failure stops the others. Supervisors still running 10 s after the
    /// stop are dropped (which kills their workers).
    async fn await_end(&mut self, clock: RunClock, duration: u64, cancel: &mut watch::Receiver<bool>) -> Ending {
        let mut end = Ending {
            by_deadline: false,
            interrupted: false,
            failures: Vec::new(),
        };
        let mut stopped_at: Option<u64> = None;
        loop {
            let grace = async {
                match stopped_at {
                    Some(t) => clock.sleep_until(t + 10_000_000_000).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = self.set.join_next() => match r {
                    None => break,
                    Some(Ok((_, Ended::Failed(m)))) => {
                        end.failures.push(m);
                        if stopped_at.is_none() {
                            stopped_at = Some(clock.now());
                            self.stop_all();
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => end.failures.push(format!("a supervisor panicked: {e}")),
                },
                _ = clock.sleep_until(duration), if !end.by_deadline => {
                    end.by_deadline = true;
                    stopped_at.get_or_insert(clock.now());
                    self.stop_all();
                }
                _ = cancelled(cancel), if !end.interrupted => {
                    end.interrupted = true;
                    stopped_at.get_or_insert(clock.now());
                    self.stop_all();
                }
                _ = grace => {
                    // Supervisors that did not end: dropping them kills their workers.
                    self.set.abort_all();
                    drain(&mut self.set).await;
                    break;
                }
            }
        }
        end
    }
}

/// The trace: the header, then every event up to `duration`, sorted by time, and `end` (at
/// the duration when the run lasted that long, else at the last event).
fn write_trace(run: &Shared, opts: &LiveOptions, duration: u64, by_deadline: bool) -> Vec<u8> {
    let sc = &run.sc;
    let mut events = std::mem::take(&mut *run.log.lock().expect("event log"));
    events.retain(|e| e.t() <= duration);
    events.sort_by_key(Event::t);
    let end = if by_deadline {
        duration
    } else {
        events.last().map_or(0, Event::t)
    };
    events.push(Event::End { t: end });
    let mut out = Vec::new();
    let detail = opts.backends.detail(sc).unwrap_or(serde_json::Value::Null);
    let mut header = crate::sim::header::header_with(sc, &sc.pacer.backend, detail, "live");
    if let Some(cmd) = &opts.worker {
        external::mark_header(&mut header, sc, cmd);
    }
    trace::encode_line(&header, &mut out);
    for e in &events {
        trace::encode_line(e, &mut out);
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn run_inner(
    sc: Scenario,
    opts: LiveOptions,
    run_id: String,
    pg_target: Option<(PgSettings, String)>,
    redis_target: Option<(RedisSettings, String)>,
    os_pids: Arc<Mutex<Vec<u32>>>,
    notes: Arc<Mutex<Vec<String>>>,
    ready_at: Arc<std::sync::atomic::AtomicU64>,
    mut cancel: watch::Receiver<bool>,
) -> Result<Vec<u8>, LiveError> {
    let n = sc.processes.count;
    let run = Shared {
        sc,
        log: Arc::default(),
        clock: Arc::default(),
        os_pids,
        notes,
    };
    // 1. The destination.
    let strays: Arc<Mutex<Vec<String>>> = Arc::default();
    let dest = start_destination(&run, opts.worker.is_some(), &strays).await?;
    // 2. Fault proxies when the scenario has store faults, and the faults' helper connections.
    let routes = Routes::start(&run.sc, pg_target.as_ref(), redis_target.as_ref()).await?;
    let helpers = fault_helpers(&run.sc, pg_target.as_ref(), redis_target.as_ref()).await?;
    // 3. Supervisors.
    let ext_ctx = opts
        .worker
        .as_ref()
        .map(|cmd| external_ctx(&run, &opts, cmd, &run_id, &routes, dest.addr.port()));
    let ctx = Arc::new(Ctx {
        sc: run.sc.clone(),
        exe: opts.exe.clone(),
        run_id,
        log: Arc::clone(&run.log),
        clock: Arc::clone(&run.clock),
        dest: dest.addr.to_string(),
        pg: routes.pg,
        redis: routes.redis,
        os_pids: Arc::clone(&run.os_pids),
    });
    let mut fleet = Fleet::spawn(ctx, ext_ctx.clone(), n);
    // 4. Every worker ready: the origin fixed, `go`.
    if let Some(f) = fleet.await_ready(ready_timeout(&run.sc), &mut cancel).await {
        fleet.abandon().await;
        return Err(if *cancel.borrow() {
            LiveError::Interrupted
        } else {
            LiveError::Worker(f)
        });
    }
    let clock = run.fix_clock();
    let start = fleet.go(clock, &dest);
    ready_at.store(start, std::sync::atomic::Ordering::Relaxed);
    // 5. Faults; the run ends when every supervisor ends, at the duration, or on a signal.
    let faults = Arc::new(Faults {
        seed: run.sc.seed,
        n,
        clock,
        start,
        log: Arc::clone(&run.log),
        proxies: Arc::clone(&routes.proxies),
        cmds: Arc::clone(&fleet.cmds),
        schema: pg_target.as_ref().map(|p| p.1.clone()),
    });
    let fault_tasks: Vec<_> = run
        .sc
        .faults
        .iter()
        .zip(helpers)
        .enumerate()
        .map(|(id, (f, h))| tokio::spawn(fault(id as u32, f.clone(), Arc::clone(&faults), h)))
        .collect();
    let duration = start + run.sc.duration.0;
    let ending = fleet.await_end(clock, duration, &mut cancel).await;
    for t in &fault_tasks {
        t.abort();
    }
    drop(dest);
    drop(faults);
    drop(routes.proxies);
    if ending.interrupted {
        return Err(LiveError::Interrupted);
    }
    if !ending.failures.is_empty() {
        return Err(LiveError::Worker(ending.failures.join("; ")));
    }
    if let Some(x) = &ext_ctx {
        external_outcome(x, &strays, &run.log, &run.notes)?;
    }
    // 6. The trace: every event, sorted by time, cut at the duration.
    Ok(write_trace(&run, &opts, duration, ending.by_deadline))
}

/// After an external run: a request that named no worker, or no worker reaching the
/// destination at all, is an error naming what happened; a worker that alone never reached
/// it is a note.
fn external_outcome(
    x: &ExtCtx,
    strays: &Mutex<Vec<String>>,
    log: &EventLog,
    notes: &Mutex<Vec<String>>,
) -> Result<(), LiveError> {
    let strays = strays.lock().expect("strays");
    if let Some(first) = strays.first() {
        return Err(LiveError::Worker(format!(
            "a worker sent `{first}` to the destination, which names no worker (answered 400): GET \
             $PACESIM_DESTINATION_URL as given (worker 0's is {})",
            x.url(0)
        )));
    }
    let n = x.sc.processes.count;
    let mut reached = vec![0u64; n as usize];
    for e in log.lock().expect("event log").iter() {
        if let Event::Arrival { pid, .. } = e {
            reached[*pid as usize] += 1;
        }
    }
    let secs = x.sc.duration.0 as f64 / 1e9;
    if n > 0 && reached.iter().all(|&r| r == 0) {
        return Err(LiveError::Worker(format!(
            "no worker reached the destination in {secs} s: each must GET its $PACESIM_DESTINATION_URL (worker 0's \
             was {}){}",
            x.url(0),
            x.tail(0)
        )));
    }
    // A worker that never reached the destination and never reported asking the store for
    // permission, though it was never killed for good, did not take part: an error naming it
    // (the run's verdicts would judge a smaller fleet than the scenario's). One that asked
    // all run long and was never let through is a finding for the checkers (liveness,
    // fairness): a note.
    let mut asked = vec![false; n as usize];
    let mut killed = vec![false; n as usize];
    for e in log.lock().expect("event log").iter() {
        match e {
            e if let Some(pid) = asked_the_store(e) => asked[pid as usize] = true,
            Event::Crash { pid, .. } => killed[*pid as usize] = true,
            _ => {}
        }
    }
    let silent: Vec<usize> = (0..n as usize)
        .filter(|&p| reached[p] == 0 && !asked[p] && !killed[p])
        .collect();
    if let Some(&first) = silent.first() {
        return Err(LiveError::Worker(format!(
            "worker{} {} never reached the destination in {secs} s, and never reported asking for \
             permission, while {} other{} did: each worker must GET its $PACESIM_DESTINATION_URL \
             (worker {first}'s was {}){}",
            if silent.len() > 1 { "s" } else { "" },
            silent.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
            reached.iter().filter(|&&r| r > 0).count(),
            if reached.iter().filter(|&&r| r > 0).count() == 1 {
                ""
            } else {
                "s"
            },
            x.url(first as u32),
            x.tail(first as u32)
        )));
    }
    let mut notes = notes.lock().expect("notes");
    for (pid, r) in reached.iter().enumerate() {
        if *r == 0 {
            notes.push(format!(
                "worker {pid} never reached the destination in {secs} s, though it asked for permission \
                 (its URL was {}){}",
                x.url(pid as u32),
                x.tail(pid as u32)
            ));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use crate::summary::CheckOut;
    use crate::trace::{CrashPoint, OpKind};

    fn checks() -> std::collections::BTreeMap<String, CheckOut> {
        [(
            "self_heal".to_string(),
            CheckOut {
                verdict: Status::Pass,
                detail: "1 kill(s)".into(),
            },
        )]
        .into()
    }

    #[test]
    fn a_kill_before_the_target_asked_the_store_is_noted_and_self_heal_not_judged() {
        let crash = |t| Event::Crash {
            t,
            pid: 1,
            point: CrashPoint::Immediate,
        };
        let ask = |t| Event::OpSent {
            t,
            pid: 1,
            thread: 0,
            op: OpKind::Reserve,
        };
        // killed before it asked: a note, and a pass becomes not judged
        let (mut c, mut notes) = (checks(), Vec::new());
        untested_kills(&[crash(2_020_000_000), ask(2_080_000_000)], &mut c, &mut notes);
        assert_eq!(c["self_heal"].verdict, Status::NotJudged, "{:?}", c["self_heal"]);
        assert!(notes[0].contains("process 1 at 2.02 s"), "{notes:?}");
        // killed after it asked: judged as it was
        let (mut c, mut notes) = (checks(), Vec::new());
        untested_kills(&[ask(1_000_000_000), crash(2_020_000_000)], &mut c, &mut notes);
        assert_eq!(c["self_heal"].verdict, Status::Pass);
        assert!(notes.is_empty());
    }
}
