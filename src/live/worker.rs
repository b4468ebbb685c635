//! The hidden `worker` mode: one live worker process.
//!
//! A worker runs the one worker loop ([`crate::worker::Worker`]) for real. The process side is
//! the backend's own ([`crate::backend::ProcessSide`], built from the same scenario); only the
//! store side is different: where the simulator calls [`crate::backend::StoreSide::serve`], a
//! worker runs the backend's live adapter ([`crate::live::adapter`]) against PostgreSQL or
//! Redis. So simulator and live runs share one definition of every backend's process side
//! and of the loop, and differ exactly where reality does.
//!
//! The driver, step by step (the numbers are [`crate::worker`]'s):
//!
//! 1. wait for the parent's `go` (the run origin), then for this process's start time;
//! 2. per job: think (or wait for the job to arrive), start the job;
//! 3. carry out each action: `Send` runs the real operation within the store timeout (4a-4d:
//!    the store-side events it caused, then the reply or the error), `FetchAt` sleeps to the
//!    slot and fetches from the destination (5, 6), `RetryAt` sleeps and asks again, `JobDone`
//!    ends the job;
//! 4. stop after `requests` fetches or at the scenario's duration.
//!
//! Every event is stamped on the run clock and written to stdout as a JSON line. An armed
//! kill point makes the worker write its `crash` event and SIGKILL itself right there.

use crate::backend::Backend;
use crate::clock::Clock;
use crate::fault::KillPoint;
use crate::live::adapter::{LiveStore, Open, Served, StoreFailure, timeout};
use crate::live::clock::RunClock;
use crate::live::destination::DestClient;
use crate::live::proto::{EventMsg, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::rng::{self, Entity, Rng};
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, Sink};
use crate::worker::{Action, NextJob, Worker};
use rand_distr::{Distribution, Exp};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entry point of `pacesim worker`: read the spec, find the backend's live adapter, run;
/// the exit status.
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
    match crate::backend::spec(&spec.scenario.pacer.backend).and_then(|s| s.live) {
        Some(live) => live.worker_main(spec),
        None => {
            eprintln!(
                "pacesim worker: backend `{}` has no live adapter",
                spec.scenario.pacer.backend
            );
            2
        }
    }
}

/// Run one worker process with `backend` and its live store `S`; the exit status.
pub fn main_with<B, S>(spec: WorkerSpec, backend: B) -> i32
where
    B: Backend,
    S: Open<Backend = B> + LiveStore<Op = B::Op, Reply = B::Reply>,
{
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pacesim worker: {e}");
            return 2;
        }
    };
    rt.block_on(async move {
        let armed: Arc<Mutex<Vec<KillPoint>>> = Arc::default();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel();
        {
            let armed = Arc::clone(&armed);
            std::thread::spawn(move || control(armed, go_tx));
        }
        let mut out = Out;
        let store = match S::open(&spec, &backend, timeout(&spec.scenario)).await {
            Ok(s) => s,
            Err(message) => {
                out.msg(&ToParent::Fatal { message });
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
        let dest = DestClient::new(&spec.dest);
        let mut d = Driver::new(&spec, &backend, store, dest, clock, out, armed);
        match d.run().await {
            Ok(()) => 0,
            Err(message) => {
                d.out.msg(&ToParent::Fatal { message });
                3
            }
        }
    })
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

/// Where a live worker's output goes: trace events, messages to the parent, and its death.
pub trait LiveOut: Sink {
    /// A message to the parent.
    fn msg(&mut self, m: &ToParent);
    /// An armed kill fired: SIGKILL this process (its `crash` event is already out).
    fn die(&mut self);
}

/// The worker's output: JSON lines on stdout, flushed per line (a line written before a
/// SIGKILL is not lost).
#[derive(Debug)]
pub struct Out;

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
}

impl Sink for Out {
    fn event(&mut self, ev: &Event) {
        self.line(serde_json::to_string(&EventMsg { m: "event", ev }).expect("events serialise"));
    }
}

impl LiveOut for Out {
    fn msg(&mut self, m: &ToParent) {
        self.line(serde_json::to_string(m).expect("messages serialise"));
    }
    fn die(&mut self) {
        // SAFETY: signalling our own process; SIGKILL does not return.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// The destination, as a live worker calls it.
#[allow(async_fn_in_trait)]
pub trait Fetcher {
    /// Send the request (the destination holds it `hold_ns` before answering).
    async fn send(&mut self, pid: u32, hold_ns: u64) -> std::io::Result<()>;
    /// The response's status.
    async fn status(&mut self) -> std::io::Result<u16>;
}

impl Fetcher for DestClient {
    async fn send(&mut self, pid: u32, hold_ns: u64) -> std::io::Result<()> {
        DestClient::send(self, pid, hold_ns).await
    }
    async fn status(&mut self) -> std::io::Result<u16> {
        DestClient::status(self).await
    }
}

/// The live driver of one worker: the loop's I/O, for real.
pub struct Driver<B: Backend, S, D, O> {
    sc: Scenario,
    w: Worker<B::Process>,
    store: S,
    dest: D,
    clock: RunClock,
    /// Where output goes.
    pub out: O,
    armed: Arc<Mutex<Vec<KillPoint>>>,
    // the store side's own draws (a transaction's hold time)
    store_rng: Rng,
    timeout: Duration,
    // The wall clock's reading (ns since the Unix epoch) at reference time 0.
    wall_at_origin: i64,
}

impl<B: Backend, S, D, O> std::fmt::Debug for Driver<B, S, D, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("pid", &self.w.pid).finish()
    }
}

impl<B, S, D, O> Driver<B, S, D, O>
where
    B: Backend,
    S: LiveStore<Op = B::Op, Reply = B::Reply>,
    D: Fetcher,
    O: LiveOut,
{
    /// A worker for `spec`'s process, with its store connection and destination.
    pub fn new(
        spec: &WorkerSpec,
        backend: &B,
        store: S,
        dest: D,
        clock: RunClock,
        out: O,
        armed: Arc<Mutex<Vec<KillPoint>>>,
    ) -> Driver<B, S, D, O> {
        let sc = spec.scenario.clone();
        let (pid, inc) = (spec.pid, spec.incarnation);
        // The host wall clock, as a clock over the reference timeline: at reference time t it
        // reads the real wall clock (the frame of the store's clock on this host).
        let wall_at_origin = clock.wall_at_origin();
        let (mono, wall) = crate::fault::clocks(&sc, pid, inc, &Clock::new(wall_at_origin, 0.0));
        let rng = rng::stream(sc.seed, Entity::Process { pid, incarnation: inc });
        let mut w = Worker::new(pid, inc, mono, wall, rng, backend.process(pid));
        w.fetches = spec.done;
        Driver {
            store_rng: rng::stream(sc.seed ^ ((pid as u64) << 32 | inc as u64), Entity::Store),
            timeout: timeout(&sc),
            sc,
            w,
            store,
            dest,
            clock,
            out,
            armed,
            wall_at_origin,
        }
    }

    fn now(&self) -> Instant {
        Instant(self.clock.now())
    }

    /// Kills the parent armed since the last step.
    fn take_armed(&mut self) {
        let mut a = self.armed.lock().expect("armed");
        for point in a.drain(..) {
            self.w.armed.push(crate::worker::Armed {
                point,
                restart_after: None,
            });
        }
    }

    /// The process dies at `point`: its `crash` event, then SIGKILL.
    fn die(&mut self, point: KillPoint) {
        let t = self.clock.now();
        self.out.event(&Event::Crash {
            t,
            pid: self.w.pid,
            point: point.name().into(),
        });
        self.out.die();
    }

    /// Run the loop until `requests` fetches or the duration.
    pub async fn run(&mut self) -> Result<(), String> {
        let sc = self.sc.clone();
        let duration = sc.duration.0;
        let first_start = if self.w.incarnation == 0 {
            sc.processes.start.sample(&mut self.w.rng).0
        } else {
            0
        };
        self.clock.sleep_until_precise(first_start).await;
        let mut arrivals = sc.processes.arrival_rate.map(|r| {
            // Job k arrives at the sum of the first k gaps; a restarted worker skips the jobs
            // already served.
            let mut s = rng::stream(sc.seed, Entity::Arrivals(self.w.pid));
            let mut at = 0u64;
            let mut gap = move || Nanos::from_secs_f64(Exp::new(r).expect("validated rate").sample(&mut s)).0;
            for _ in 0..self.w.fetches {
                at += gap();
            }
            (at, gap)
        });
        let mut first = true;
        loop {
            // 1. between jobs
            if let Some((at, gap)) = arrivals.as_mut() {
                if sc.processes.requests.is_some_and(|n| self.w.fetches >= n) {
                    return Ok(());
                }
                *at += gap();
                self.clock.sleep_until_precise(*at).await;
            } else {
                match self
                    .w
                    .next_job(sc.processes.requests, false, &sc.processes.think, first)
                {
                    NextJob::Finished => return Ok(()),
                    NextJob::ThinkFor(d) => {
                        let t = self.clock.now() + d.0;
                        self.clock.sleep_until_precise(t).await;
                    }
                    NextJob::StartNow | NextJob::WaitForJob => {}
                }
            }
            first = false;
            if self.clock.now() >= duration {
                return Ok(());
            }
            self.job().await?;
        }
    }

    /// 2. One job, within its soft time limit.
    async fn job(&mut self) -> Result<(), String> {
        let t = self.clock.now();
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
                // Past the soft limit the job finalises; the process side says what that means.
                let now = self.now();
                let a = self.w.soft_limit(now, &mut self.out);
                self.act(a).await?;
            }
        }
        let t = self.clock.now();
        self.out.msg(&ToParent::JobEnd { t });
        Ok(())
    }

    async fn job_body(&mut self) -> Result<(), String> {
        self.take_armed();
        let now = self.now();
        let a = self.w.start_job(now, &mut self.out);
        self.act(a).await
    }

    /// 3. Carry out actions until the job is done.
    async fn act(&mut self, mut a: Action<B::Op>) -> Result<(), String> {
        loop {
            self.take_armed();
            a = match a {
                Action::Send { op, .. } => self.send(op).await,
                Action::FetchAt(wake) => {
                    self.clock.sleep_until_precise(wake.0).await;
                    self.fetch().await?
                }
                Action::RetryAt(at) => {
                    self.clock.sleep_until_precise(at.0).await;
                    let now = self.now();
                    self.w.retry(now, &mut self.out)
                }
                Action::JobDone => return Ok(()),
                Action::Die(k) => {
                    self.die(k.point);
                    return Ok(());
                }
            };
        }
    }

    /// 4. Run `op` for real (already traced as `op_sent`).
    async fn send(&mut self, op: B::Op) -> Action<B::Op> {
        let t0 = self.w.op_sent.0;
        let r = match tokio::time::timeout(self.timeout, self.store.execute(&op, &mut self.store_rng)).await {
            Ok(r) => r,
            Err(_) => Err(StoreFailure("timeout")),
        };
        let t1 = self.clock.now();
        match r {
            Ok(ex) => {
                for s in ex.served {
                    let (at, ev) = self.place(s, t0, t1);
                    self.out.event(&ev.event(at, self.w.pid));
                }
                // 4a. the store applied it
                self.take_armed();
                if let Some(k) = self.w.served(&op, ex.in_transaction) {
                    self.die(k.point);
                }
                // 4b. the reply
                let now = self.now();
                self.w.reply(now, &op, ex.reply, &mut self.out)
            }
            Err(StoreFailure(error)) => {
                // The connection's state is unknown: use a fresh one next time.
                self.store.reset();
                let t = Instant(t1);
                self.w.store_error_event(t, error, &mut self.out);
                self.w.store_error(t, &op, &mut self.out)
            }
        }
    }

    /// When did the store serve it? A grant carries the store clock's reading, which on this
    /// host is the wall clock: map it onto the run clock (kept within the round trip). A grant
    /// on a process's own clock was read when the operation left. Lock and multiplier events
    /// carry their store time too.
    fn place(&self, s: Served, t0: u64, t1: u64) -> (u64, Served) {
        let on_store_clock = |wall: i64| ((wall - self.wall_at_origin).max(0) as u64).clamp(t0, t1);
        match s {
            Served::GrantOnProcessClock { .. } => (t0, s),
            Served::Grant {
                slot,
                now,
                interval,
                multiplier,
            } => {
                // Kept within the round trip, the grant's `now` moves with it, so its slot
                // still maps to the same reference time (`t + slot - now`).
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
            Served::LockAcquired { at, .. } | Served::LockReleased { at, .. } | Served::Multiplier { at, .. } => {
                (on_store_clock(at), s)
            }
            Served::Deny => (t0 + (t1 - t0) / 2, s),
        }
    }

    /// 5, 6. Fetch from the destination; the after-fetch step.
    async fn fetch(&mut self) -> Result<Action<B::Op>, String> {
        let pid = self.w.pid;
        let t = self.clock.now();
        self.w.fetch_start(Instant(t), &mut self.out);
        let latency = self.sc.destination.latency.sample(&mut self.w.rng).0;
        if latency > 0 {
            self.clock.sleep_until_precise(t + latency).await;
        }
        let hold = self.sc.fetch.duration.sample(&mut self.w.rng).0;
        self.dest
            .send(pid, hold)
            .await
            .map_err(|e| format!("destination: {e}"))?;
        self.take_armed();
        if let Some(k) = self.w.fetch_sent() {
            self.die(k.point);
        }
        let status = self.dest.status().await.map_err(|e| format!("destination: {e}"))?;
        let now = self.now();
        Ok(self.w.fetch_end(now, status, &mut self.out))
    }
}
