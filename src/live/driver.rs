//! The live driver of one worker: the one worker loop ([`crate::worker::Worker`]) with real
//! I/O. Where the simulator schedules engine events, the driver sleeps on the run clock, runs
//! the backend's live store ([`crate::live::adapter::LiveStore`]) within the store timeout, and
//! calls the destination ([`Fetcher`]). Its output (events, messages to the parent, its own
//! death at an armed kill point) goes to a [`LiveOut`]: the worker process's stdout, or a test's
//! recorder (`tests/suite/drift.rs` drives it beside the simulator on one script).
//!
//! The steps, numbered as in [`crate::worker`]:
//!
//! 1. between jobs: think (or wait for the job to arrive); stop after `requests` fetches or at
//!    the scenario's duration;
//! 2. start the job, within its soft time limit;
//! 3. carry out each action: `Send` runs the real operation (4a-4d: the store-side events it
//!    caused, placed on the run clock, then the reply or the error), `FetchAt` sleeps to the
//!    slot and fetches (5, 6), `RetryAt` sleeps and asks again, `JobDone` ends the job.

use crate::backend::Backend;
use crate::clock::Clock;
use crate::fault::KillPoint;
use crate::live::adapter::{LiveStore, Served, StoreFailure, timeout};
use crate::live::clock::RunClock;
use crate::live::destination::DestClient;
use crate::live::proto::{ToParent, WorkerSpec};
use crate::rng::{self, Entity, Rng};
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, Sink};
use crate::worker::{Action, NextJob, Worker};
use rand_distr::{Distribution, Exp};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a worker's loop stopped before its end (the worker reports it as fatal).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The destination could not be reached, or its answer not read.
    #[error("destination: {0}")]
    Destination(std::io::Error),
}

/// Where a live worker's output goes: trace events, messages to the parent, and its death.
pub trait LiveOut: Sink {
    /// A message to the parent.
    fn msg(&mut self, m: &ToParent);
    /// An armed kill fired: SIGKILL this process (its `crash` event is already out).
    fn die(&mut self);
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
        let (mono, wall) = crate::fault::clocks(sc.seed, &sc.faults, pid, inc, &Clock::new(wall_at_origin, 0.0));
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
            point: point.into(),
        });
        self.out.die();
    }

    /// Run the loop until `requests` fetches or the duration.
    pub async fn run(&mut self) -> Result<(), DriverError> {
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
            // a job that re-enqueues its task runs again, as a fresh execution, at the countdown
            let mut requeued = self.job().await?;
            while let Some(at) = requeued {
                self.clock.sleep_until_precise(at.0).await;
                if self.clock.now() >= duration {
                    return Ok(());
                }
                requeued = self.job().await?;
            }
        }
    }

    /// 2. One job, within its soft time limit; `Some(at)` when it re-enqueued its task to run
    ///    again at `at`.
    async fn job(&mut self) -> Result<Option<Instant>, DriverError> {
        let t = self.clock.now();
        self.out.msg(&ToParent::JobStart { t });
        let soft = self.sc.processes.soft_limit;
        let finished = match soft {
            Some(s) => tokio::time::timeout(Duration::from_nanos(s.0), self.job_body())
                .await
                .ok(),
            None => Some(self.job_body().await),
        };
        let requeued = match finished {
            Some(r) => r?,
            None => {
                // Past the soft limit the job finalises; the process side says what that means.
                let now = self.now();
                let a = self.w.soft_limit(now, &mut self.out);
                self.act(a).await?
            }
        };
        let t = self.clock.now();
        self.out.msg(&ToParent::JobEnd { t });
        Ok(requeued)
    }

    async fn job_body(&mut self) -> Result<Option<Instant>, DriverError> {
        self.take_armed();
        let now = self.now();
        self.w.start_job(now); // the parent arms the hard limit from the job_start message
        let a = self.w.retry(now, &mut self.out);
        self.act(a).await
    }

    /// 3. Carry out actions until the job is done (`Some(at)`: it re-enqueued its task).
    async fn act(&mut self, mut a: Action<B::Op>) -> Result<Option<Instant>, DriverError> {
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
                Action::JobDone => return Ok(None),
                Action::Requeue(at) => return Ok(Some(at)),
                Action::Die(k) => {
                    self.die(k.point);
                    return Ok(None);
                }
            };
        }
    }

    /// 4. Run `op` for real (already traced as `op_sent`).
    async fn send(&mut self, op: B::Op) -> Action<B::Op> {
        let t0 = self.w.op_sent.0;
        let r = match tokio::time::timeout(self.timeout, self.store.execute(&op, &mut self.store_rng)).await {
            Ok(r) => r,
            Err(_) => Err(StoreFailure(crate::trace::StoreErrorKind::Timeout)),
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
    async fn fetch(&mut self) -> Result<Action<B::Op>, DriverError> {
        let pid = self.w.pid;
        let t = self.clock.now();
        self.w.fetch_start(Instant(t), &mut self.out);
        let latency = self.sc.destination.latency.sample(&mut self.w.rng).0;
        if latency > 0 {
            self.clock.sleep_until_precise(t + latency).await;
        }
        let hold = self.sc.fetch.duration.sample(&mut self.w.rng).0;
        self.dest.send(pid, hold).await.map_err(DriverError::Destination)?;
        self.take_armed();
        if let Some(k) = self.w.fetch_sent() {
            self.die(k.point);
        }
        let status = self.dest.status().await.map_err(DriverError::Destination)?;
        let now = self.now();
        Ok(self.w.fetch_end(now, status, &mut self.out))
    }
}
