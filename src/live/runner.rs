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
use crate::live::external::{self, ExtCtx, Targets};
use crate::live::faults::{StateStores, fault};
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

/// Run a scenario live. Cleanup (workers, schema, keys) happens whatever the outcome; `cancel`
/// turning true stops the run (SIGINT/SIGTERM).
pub async fn run(sc: &Scenario, opts: &LiveOptions, cancel: watch::Receiver<bool>) -> Result<LiveRun, LiveError> {
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
    let adapter = opts.backends.adapter(sc);
    let run_id = new_run_id();
    if opts.handle_signals {
        // the CLI: orphans of the workers are re-parented to pacesim, which kills and reaps
        // them at the run's end (`reap`)
        crate::live::reap::become_subreaper();
    }
    let mut stores = if opts.worker.is_some() {
        external::unsupported(sc).map_err(LiveError::Unsupported)?;
        // the stores the named design uses (none for an in-process pacer)
        let (used, slots, tables) = adapter.map_or((crate::live::StoreUse::None, 1, Vec::new()), |l| {
            (l.store(), l.slots(sc), l.tables(sc))
        });
        Stores::setup_for(&run_id, used, slots, &tables).await?
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
        Stores::setup(sc, &run_id, live).await?
    };
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
pub fn untested_kills(
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
    let log: EventLog = Arc::default();
    let clock_cell: Arc<OnceLock<RunClock>> = Arc::default();
    let setup = |what: &str, e: &dyn std::fmt::Display| LiveError::Setup(format!("{what}: {e}"));

    // 1. The destination (for external workers it also records each fetch's start and end).
    let strays: Arc<Mutex<Vec<String>>> = Arc::default();
    let dest = match &opts.worker {
        None => {
            destination::start(
                &sc.destination,
                crate::fault::throttles(&sc.faults),
                sc.seed,
                Arc::clone(&clock_cell),
                Arc::clone(&log),
            )
            .await
        }
        Some(_) => {
            destination::start_external(
                &sc.destination,
                crate::fault::throttles(&sc.faults),
                sc.seed,
                Arc::clone(&clock_cell),
                Arc::clone(&log),
                destination::ExternalCfg {
                    processes: n,
                    fetch: sc.fetch.duration.clone(),
                    strays: Arc::clone(&strays),
                },
            )
            .await
        }
    }
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

    // The state-lost helpers too: one PostgreSQL and one Redis connection per such fault.
    let mut losses = Vec::new();
    for f in &sc.faults {
        let mut stores = StateStores::default();
        if matches!(f, FaultSpec::StateLost { .. }) {
            if let Some((settings, schema)) = &pg_target {
                let c = settings
                    .connect(Duration::from_secs(3))
                    .await
                    .map_err(|e| setup("state-lost helper (PostgreSQL)", &e))?;
                stores.pg = Some((c, schema.clone()));
            }
            if let Some((settings, prefix)) = &redis_target {
                let s = settings.clone();
                let con = tokio::task::spawn_blocking(move || s.connect(None, Duration::from_secs(3)))
                    .await
                    .map_err(|e| setup("state-lost helper (Redis)", &e))?
                    .map_err(|e| setup("state-lost helper (Redis)", &e))?;
                stores.redis = Some((con, prefix.clone()));
            }
        }
        losses.push(Some(stores));
    }

    // 3. Supervisors. External workers need no handshake: the origin is fixed now, before
    // they start, and given to them in their environment.
    let ext_ctx = opts.worker.as_ref().map(|cmd| {
        let clock = RunClock::new(mono_ns());
        let _ = clock_cell.set(clock);
        let pacer = serde_json::json!({
            "backend": sc.pacer.backend,
            "rate": sc.pacer.rate,
            "options": opts.backends.detail(&sc).unwrap_or(serde_json::Value::Null),
        });
        Arc::new(ExtCtx {
            sc: sc.clone(),
            cmd: cmd.clone(),
            run_id: run_id.clone(),
            log: Arc::clone(&log),
            clock,
            dest_port: dest.addr.port(),
            targets: pg_stores
                .iter()
                .zip(&redis_stores)
                .map(|(pg, redis)| Targets {
                    pg: pg.clone(),
                    redis: redis.clone(),
                })
                .collect(),
            os_pids: Arc::clone(&os_pids),
            pacer: pacer.to_string(),
            tails: (0..n).map(|_| Mutex::default()).collect(),
            notes: Arc::clone(&notes),
            forward_stderr: opts.verbose,
            ready: (0..n).map(|_| Default::default()).collect(),
            start: Default::default(),
        })
    });
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
        match &ext_ctx {
            Some(x) => {
                set.spawn(external::supervise(Arc::clone(x), pid, rx));
            }
            None => {
                set.spawn(supervise(Arc::clone(&ctx), pid, rx, ready_tx.clone(), go_rx.clone()));
            }
        }
    }
    drop(ready_tx);
    let stop_all = |cmds: &[mpsc::UnboundedSender<Cmd>]| {
        for c in cmds {
            let _ = c.send(Cmd::Stop);
        }
    };

    // 4. Every worker ready: pacesim's own connected (then the origin is fixed and they get
    // `go`); an external one printed its first line or reached the destination (the
    // scenario's clock starts there: faults and the duration count from it).
    let mut ready = 0;
    let mut failure: Option<String> = None;
    let wait = ready_timeout(&sc);
    let barrier = tokio::time::sleep(Duration::from_nanos(wait));
    tokio::pin!(barrier);
    let mut poll = tokio::time::interval(Duration::from_millis(5));
    let mut finished = vec![false; n as usize];
    while ready < n && failure.is_none() {
        tokio::select! {
            r = ready_rx.recv(), if ext_ctx.is_none() => match r {
                Some(_) => ready += 1,
                None => failure = Some("a worker exited before connecting".into()),
            },
            _ = poll.tick(), if ext_ctx.is_some() => {
                if let Some(x) = &ext_ctx {
                    ready = (0..n).filter(|&p| finished[p as usize] || x.is_ready(p)).count() as u32;
                }
            }
            Some(r) = set.join_next() => match r {
                // an external worker that made all its requests before the others were ready
                Ok((pid, Ended::Finished)) if ext_ctx.is_some() => finished[pid as usize] = true,
                Ok((_, Ended::Failed(m))) => failure = Some(m),
                Ok((pid, e)) => failure = Some(format!("worker {pid} ended before the run started ({e:?})")),
                Err(e) => failure = Some(e.to_string()),
            },
            _ = &mut barrier => failure = Some(match &ext_ctx {
                None => format!("workers did not connect within {}", secs(wait)),
                Some(x) => not_ready(x, &finished, wait),
            }),
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
    let clock = match clock_cell.get() {
        Some(c) => *c,
        None => {
            let clock = RunClock::new(mono_ns() + 3_000_000);
            let _ = clock_cell.set(clock);
            clock
        }
    };
    let _ = go_tx.send(Some((clock.origin(), clock.wall_at_origin())));
    // The scenario's time 0 on the run clock: the origin itself for pacesim's own workers
    // (they start on `go`), when the last one was ready for an external program's.
    let start = match &ext_ctx {
        Some(x) => {
            let t = clock.now();
            x.start.store(t, std::sync::atomic::Ordering::Relaxed);
            dest.delay_throttles(t);
            t
        }
        None => 0,
    };
    ready_at.store(start, std::sync::atomic::Ordering::Relaxed);

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
            start,
            Arc::clone(&log),
            Arc::clone(&proxies),
            Arc::clone(&cmds),
            helper,
            pg_target.as_ref().map(|p| p.1.clone()),
            losses[id].take().unwrap_or_default(),
        )));
    }

    // The run ends when every supervisor ends, at the duration, or on a signal.
    let duration = start + sc.duration.0;
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
    if let Some(x) = &ext_ctx {
        external_outcome(x, &strays, &log, &notes)?;
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
    let detail = opts.backends.detail(&sc).unwrap_or(serde_json::Value::Null);
    let mut header = crate::sim::header_with(&sc, &sc.pacer.backend, detail, "live");
    if let Some(x) = &ext_ctx {
        external::mark_header(&mut header, &sc, &x.cmd);
    }
    trace::encode_line(&header, &mut out);
    for e in &events {
        trace::encode_line(e, &mut out);
    }
    Ok(out)
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
