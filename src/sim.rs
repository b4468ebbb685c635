//! The simulator: builds the world from a scenario and runs it under virtual time, emitting the
//! trace.
//!
//! [`Sim`] owns the world (workers, store, destination, backend, fault state) and one
//! [`Engine`]. Each engine event is handled by one method below; each method states the
//! protocol step it models. No wall clock is read anywhere here, no hash map is iterated, and
//! every random draw comes from the stream of the entity that makes it ([`crate::rng`]).

use crate::backend::{self, Backend, Cx, Op, ProcView, Reply, Step};
use crate::clock::Clock;
use crate::destination::Destination;
use crate::engine::{Engine, Lane};
use crate::fault::{FaultSpec, KillPoint, OutageMode};
use crate::rng::{self, Entity, Rng};
use crate::scenario::Scenario;
use crate::store::{Store, Waiter};
use crate::time::{Instant, Nanos};
use crate::trace::{CrashPoint, Detail, Event, Header, ScenarioSettings, Sink, StoreErrorKind, TRACE_VERSION};
use crate::worker::{Phase, Worker};
use rand::RngExt;
use rand_distr::{Distribution, Exp};

// Engine lanes (see `crate::engine`) for events that come in time order anyway.
/// Client timeouts: always `store.timeout` after their request.
const TIMEOUTS: Lane = Lane(0);
/// The store lock's release: one pending at a time.
const LOCK: Lane = Lane(1);
/// Fetches on their way to the destination: in order whenever its latency is constant.
const TO_DESTINATION: Lane = Lane(2);

/// What happens next, on the engine's queue.
#[derive(Copy, Clone, Debug)]
enum Ev {
    /// Process `pid` starts.
    Start { pid: u32 },
    /// A process timer fires; what it means depends on the process's phase.
    Wake { pid: u32, inc: u32 },
    /// Open loop: a job arrives for `pid`.
    Job { pid: u32 },
    /// An operation reaches the store.
    StoreRecv { pid: u32, inc: u32, seq: u64, op: Op },
    /// The store's lock frees.
    StoreFree,
    /// A reply reaches the process.
    Reply {
        pid: u32,
        inc: u32,
        seq: u64,
        op: Op,
        reply: Reply,
    },
    /// The store refused the operation (the error reaches the process).
    StoreRefused { pid: u32, inc: u32, seq: u64, op: Op },
    /// The client gave up waiting for the operation.
    Timeout { pid: u32, inc: u32, seq: u64, op: Op },
    /// A fetch reaches the destination (delivered even if the sender has since died).
    DestRecv { pid: u32, inc: u32 },
    /// A fetch's response reaches the process.
    FetchDone { pid: u32, inc: u32, status: u16 },
    /// A fault window opens or closes.
    Fault { id: u32, start: bool },
    /// A kill fault fires (armed or immediate).
    Kill { id: u32 },
    /// A fresh process replaces a killed one.
    Restart { pid: u32 },
    /// A job's soft or hard time limit.
    Limit { pid: u32, inc: u32, job: u64, hard: bool },
    /// A timer the backend asked for.
    BackendTimer { token: u64 },
}

/// A kill waiting for its target to reach a protocol point.
#[derive(Clone, Debug)]
struct ArmedKill {
    pid: u32,
    point: KillPoint,
    restart_after: Option<Nanos>,
}

/// Figures about the run itself (not about the pacer: those come from the trace).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Virtual time when the run ended.
    pub end: Instant,
    /// Engine events processed.
    pub events: u64,
    /// Store operations served.
    pub store_ops: u64,
}

/// The trace header for a scenario run by the simulator.
pub fn header(sc: &Scenario, source: &str) -> Header {
    Header {
        ev: "header".into(),
        version: TRACE_VERSION,
        source: source.into(),
        scenario: sc.name.clone(),
        backend: sc.pacer.backend.clone(),
        seed: sc.seed,
        processes: sc.processes.count,
        rate: sc.pacer.rate,
        burst: sc.checks.burst,
        multiplier_cap: sc.backoff.cap,
        backend_detail: detail(sc),
    }
}

/// The backend's options in force, plus the scenario settings checkers need.
fn detail(sc: &Scenario) -> Detail {
    let settings = ScenarioSettings {
        backoff_factor: sc.backoff.factor,
        decay_after: sc.backoff.decay_after,
        epsilon: sc.checks.epsilon,
        think_mean_ns: sc.processes.think.mean(),
        fetch_mean_ns: sc.fetch.duration.mean() + sc.destination.latency.mean(),
        arrival_rate: sc.processes.arrival_rate,
    };
    Detail::new(backend::build(sc).detail(), settings)
}

/// Run a scenario, streaming its trace (header first) into `out`.
pub fn run(sc: &Scenario, out: &mut dyn Sink) -> Outcome {
    out.header(&header(sc, "sim"));
    let mut sim = Sim::new(sc, out);
    sim.run()
}

/// The world and its engine.
pub struct Sim<'a> {
    sc: &'a Scenario,
    out: &'a mut dyn Sink,
    engine: Engine<Ev>,
    workers: Vec<Worker>,
    store: Store,
    dest: Destination,
    backend: Box<dyn Backend>,
    fault_rng: Rng,
    armed: Vec<ArmedKill>,
    // invariant: number of workers that are neither finished nor dead-for-good; the run ends
    // when it reaches zero (closed loop) or at the duration.
    active: u32,
    epoch_spread: Vec<Option<Nanos>>,
    arrivals: Vec<Rng>,
    timers: Vec<(Instant, u64)>,
}

impl std::fmt::Debug for Sim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.engine.now())
            .field("active", &self.active)
            .finish()
    }
}

impl<'a> Sim<'a> {
    /// Build the world: workers, clocks, store, destination, backend, fault schedule.
    pub fn new(sc: &'a Scenario, out: &'a mut dyn Sink) -> Sim<'a> {
        let n = sc.processes.count;
        let mut fault_rng = rng::stream(sc.seed, Entity::Faults);
        let store = Store::new(&sc.store, rng::stream(sc.seed, Entity::Store));
        let mut epoch_spread = vec![None; n as usize];
        let mut workers: Vec<Worker> = (0..n)
            .map(|pid| {
                let r = rng::stream(sc.seed, Entity::Process { pid, incarnation: 0 });
                Worker::new(pid, 0, Clock::reference(), store.clock.clone(), r)
            })
            .collect();
        // Clock faults shape the clocks before anything runs.
        for f in &sc.faults {
            if let FaultSpec::Clock {
                processes,
                epoch_spread: spread,
                drift_ppm,
                step,
                step_at,
                wall_offset,
            } = f
            {
                let targets: Vec<u32> = if processes.is_empty() {
                    (0..n).collect()
                } else {
                    processes.clone()
                };
                for pid in targets {
                    let w = &mut workers[pid as usize];
                    if let Some(s) = spread {
                        epoch_spread[pid as usize] = Some(*s);
                        w.mono.offset = draw_epoch(&mut fault_rng, *s);
                    }
                    w.mono.drift_ppm = *drift_ppm;
                    w.wall.drift_ppm = *drift_ppm;
                    if let Some(o) = wall_offset {
                        w.wall.offset = store.clock.offset + o.0;
                    }
                    if let (Some(by), Some(at)) = (step, step_at) {
                        w.wall.add_step(Instant(at.0), by.0);
                    }
                }
            }
        }
        let dest = Destination::new(&sc.destination, rng::stream(sc.seed, Entity::Destination))
            .with_throttles(crate::fault::throttles(&sc.faults));
        let mut sim = Sim {
            sc,
            out,
            engine: Engine::new(),
            workers,
            store,
            dest,
            backend: backend::build(sc),
            fault_rng,
            armed: Vec::new(),
            active: n,
            epoch_spread,
            arrivals: (0..n).map(|pid| rng::stream(sc.seed, Entity::Arrivals(pid))).collect(),
            timers: Vec::new(),
        };
        sim.schedule_start();
        sim
    }

    fn schedule_start(&mut self) {
        for pid in 0..self.sc.processes.count {
            let d = self.sc.processes.start.sample(&mut self.workers[pid as usize].rng);
            self.engine.at(Instant::ZERO + d, Ev::Start { pid });
            if let Some(rate) = self.sc.processes.arrival_rate {
                let first = exp_gap(&mut self.arrivals[pid as usize], rate);
                self.engine.at(Instant::ZERO + first, Ev::Job { pid });
            }
        }
        for (id, f) in self.sc.faults.iter().enumerate() {
            let id = id as u32;
            match f {
                FaultSpec::Kill { at: Some(at), .. } => self.engine.at(Instant(at.0), Ev::Kill { id }),
                FaultSpec::Kill { rate: Some(rate), .. } => {
                    let gap = exp_gap(&mut self.fault_rng, *rate);
                    self.engine.at(Instant::ZERO + gap, Ev::Kill { id });
                }
                FaultSpec::Clock { .. } => {
                    self.out.event(&Event::Fault {
                        t: 0,
                        id,
                        kind: f.fault_kind(),
                        start: true,
                    });
                }
                _ => {
                    if let Some((a, b)) = f.window() {
                        self.engine.at(Instant(a.0), Ev::Fault { id, start: true });
                        self.engine.at(Instant(b.0), Ev::Fault { id, start: false });
                    }
                }
            }
        }
    }

    /// Run to completion: until every worker is done, or the duration is reached.
    pub fn run(&mut self) -> Outcome {
        let limit = Instant(self.sc.duration.0);
        let mut last = Instant::ZERO;
        while self.active > 0 || self.sc.processes.arrival_rate.is_some() {
            let Some((t, ev)) = self.engine.pop_until(limit) else {
                break;
            };
            last = t;
            self.handle(ev);
        }
        let end = if self.engine.pending() > 0 && self.active > 0 {
            limit.max(last)
        } else {
            last
        };
        self.out.event(&Event::End { t: end.0 });
        Outcome {
            end,
            events: self.engine.processed(),
            store_ops: self.store.served,
        }
    }

    fn t(&self) -> u64 {
        self.engine.now().0
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Start { pid } => {
                self.workers[pid as usize].phase = Phase::Idle;
                self.next_job(pid, true);
            }
            Ev::Wake { pid, inc } => {
                if !self.current(pid, inc) {
                    return;
                }
                match self.workers[pid as usize].phase {
                    Phase::Idle => self.start_job(pid),
                    Phase::Retrying => self.acquire(pid),
                    Phase::SleepingToSlot => self.fetch_start(pid),
                    _ => {}
                }
            }
            Ev::Job { pid } => self.job_arrives(pid),
            Ev::StoreRecv { pid, inc, seq, op } => self.store_recv(pid, inc, seq, op),
            Ev::StoreFree => {
                if let Some(w) = self.store.release() {
                    self.serve(w);
                }
            }
            Ev::Reply {
                pid,
                inc,
                seq,
                op,
                reply,
            } => self.reply(pid, inc, seq, op, reply),
            Ev::StoreRefused { pid, inc, seq, op } => self.store_error(pid, inc, seq, op, StoreErrorKind::Refused),
            Ev::Timeout { pid, inc, seq, op } => self.store_error(pid, inc, seq, op, StoreErrorKind::Timeout),
            Ev::DestRecv { pid, inc } => self.dest_recv(pid, inc),
            Ev::FetchDone { pid, inc, status } => self.fetch_done(pid, inc, status),
            Ev::Fault { id, start } => self.fault_edge(id, start),
            Ev::Kill { id } => self.kill_fires(id),
            Ev::Restart { pid } => self.restart(pid),
            Ev::Limit { pid, inc, job, hard } => self.limit(pid, inc, job, hard),
            Ev::BackendTimer { token } => {
                let now = self.engine.now();
                let mut cx = Cx {
                    t: now,
                    out: &mut *self.out,
                    store_rng: &mut self.store.rng,
                    timers: &mut self.timers,
                };
                self.backend.on_timer(&mut cx, token);
            }
        }
        for (at, token) in self.timers.drain(..) {
            self.engine.at(at, Ev::BackendTimer { token });
        }
    }

    /// Is `(pid, inc)` the live incarnation?
    fn current(&self, pid: u32, inc: u32) -> bool {
        let w = &self.workers[pid as usize];
        w.incarnation == inc && w.phase != Phase::Dead
    }

    /// Call into the backend with a process's view. A macro so the borrows of the backend,
    /// the worker, the trace and the store's stream stay disjoint.
    fn with_backend<R>(&mut self, pid: u32, f: impl FnOnce(&mut dyn Backend, &mut Cx, &ProcView) -> R) -> R {
        let t = self.engine.now();
        let w = &self.workers[pid as usize];
        let view = ProcView {
            pid,
            mono: &w.mono,
            wall: &w.wall,
        };
        let mut cx = Cx {
            t,
            out: &mut *self.out,
            store_rng: &mut self.store.rng,
            timers: &mut self.timers,
        };
        f(self.backend.as_mut(), &mut cx, &view)
    }

    // ---- the worker's loop -------------------------------------------------------------

    /// Between jobs: finish, wait for a job, or think then start the next one.
    fn next_job(&mut self, pid: u32, first: bool) {
        let sc = self.sc;
        let w = &mut self.workers[pid as usize];
        if let Some(n) = sc.processes.requests
            && w.fetches >= n
        {
            w.phase = Phase::Finished;
            self.active -= 1;
            return;
        }
        w.phase = Phase::Idle;
        if sc.processes.arrival_rate.is_some() {
            if w.queued > 0 {
                w.queued -= 1;
                self.start_job(pid);
            }
            return;
        }
        let think = if first {
            Nanos::ZERO
        } else {
            sc.processes.think.sample(&mut w.rng)
        };
        if think.0 == 0 {
            self.start_job(pid);
        } else {
            let inc = w.incarnation;
            self.engine.after(think, Ev::Wake { pid, inc });
        }
    }

    fn job_arrives(&mut self, pid: u32) {
        let rate = self.sc.processes.arrival_rate.expect("jobs only in open loop");
        let gap = exp_gap(&mut self.arrivals[pid as usize], rate);
        self.engine.after(gap, Ev::Job { pid });
        let w = &mut self.workers[pid as usize];
        if w.phase == Phase::Idle {
            self.start_job(pid);
        } else {
            w.queued += 1;
        }
    }

    fn start_job(&mut self, pid: u32) {
        let now = self.engine.now();
        let sc = self.sc;
        let w = &mut self.workers[pid as usize];
        w.job_seq += 1;
        w.job_start = now;
        let (inc, job) = (w.incarnation, w.job_seq);
        if let Some(s) = sc.processes.soft_limit {
            self.engine.after(
                s,
                Ev::Limit {
                    pid,
                    inc,
                    job,
                    hard: false,
                },
            );
        }
        if let Some(h) = sc.processes.hard_limit {
            self.engine.after(
                h,
                Ev::Limit {
                    pid,
                    inc,
                    job,
                    hard: true,
                },
            );
        }
        self.acquire(pid);
    }

    fn acquire(&mut self, pid: u32) {
        let step = self.with_backend(pid, |b, cx, v| b.acquire(cx, v));
        self.apply(pid, step);
    }

    /// Carry out what the backend decided.
    fn apply(&mut self, pid: u32, step: Step) {
        let now = self.engine.now();
        match step {
            Step::Send(op) => self.send(pid, op),
            Step::FetchAt(wake) => {
                let w = &mut self.workers[pid as usize];
                w.phase = Phase::SleepingToSlot;
                let inc = w.incarnation;
                if self.take_kill(pid, KillPoint::SleepingToSlot) {
                    return;
                }
                if wake <= now {
                    self.fetch_start(pid);
                } else {
                    self.engine.at(wake, Ev::Wake { pid, inc });
                }
            }
            Step::RetryAt(at) => {
                let w = &mut self.workers[pid as usize];
                w.phase = Phase::Retrying;
                let inc = w.incarnation;
                self.engine.at(at.max(now), Ev::Wake { pid, inc });
            }
            Step::Done => self.next_job(pid, false),
        }
    }

    /// A process sends `op` to the store.
    fn send(&mut self, pid: u32, op: Op) {
        let now = self.engine.now();
        let t = now.0;
        let w = &mut self.workers[pid as usize];
        w.op_seq += 1;
        w.op_sent = now;
        w.phase = Phase::Awaiting(op);
        let (inc, seq) = (w.incarnation, w.op_seq);
        self.out.event(&Event::OpSent { t, pid, op: op.kind() });
        let there = self.store.one_way(&mut w.rng);
        self.engine.after(there, Ev::StoreRecv { pid, inc, seq, op });
        self.engine
            .after_in(TIMEOUTS, self.store.timeout, Ev::Timeout { pid, inc, seq, op });
    }

    /// An operation reaches the store: refused, ignored, or queued for the lock.
    fn store_recv(&mut self, pid: u32, inc: u32, seq: u64, op: Op) {
        match self.store.reachable(pid) {
            Err(OutageMode::Refuse) => {
                let back = self.store.one_way(&mut self.workers[pid as usize].rng);
                self.engine.after(back, Ev::StoreRefused { pid, inc, seq, op });
            }
            Err(OutageMode::Timeout) => {} // nothing answers; the client's timeout fires
            Ok(()) => {
                if let Some(w) = self.store.admit(Waiter::Op {
                    pid,
                    incarnation: inc,
                    seq,
                    op,
                }) {
                    self.serve(w);
                }
            }
        }
    }

    /// The store serves one waiter under its lock: the backend's atomic operation.
    fn serve(&mut self, waiter: Waiter) {
        let now = self.engine.now();
        match waiter {
            Waiter::Foreign { hold } => self.engine.after_in(LOCK, hold, Ev::StoreFree),
            Waiter::Op {
                pid,
                incarnation: inc,
                seq,
                op,
            } => {
                let store_now = self.store.now(now);
                let served = {
                    let mut cx = Cx {
                        t: now,
                        out: &mut *self.out,
                        store_rng: &mut self.store.rng,
                        timers: &mut self.timers,
                    };
                    self.backend.serve(&mut cx, pid, &op, store_now)
                };
                self.store.served += 1;
                let service = self.store.service_time();
                let back = self.store.one_way(&mut self.workers[pid as usize].rng);
                self.engine.after(
                    service + back,
                    Ev::Reply {
                        pid,
                        inc,
                        seq,
                        op,
                        reply: served.reply,
                    },
                );
                self.engine.after_in(LOCK, service + served.hold, Ev::StoreFree);
                if self.current(pid, inc) && matches!(op, Op::Reserve { .. } | Op::Gcra { .. }) {
                    self.take_kill(pid, KillPoint::MidReservation);
                }
                if served.hold.0 > 0 && self.current(pid, inc) {
                    self.take_kill(pid, KillPoint::InTransaction);
                }
            }
        }
    }

    fn reply(&mut self, pid: u32, inc: u32, seq: u64, op: Op, reply: Reply) {
        if !self.awaiting(pid, inc, seq) {
            return;
        }
        let step = self.with_backend(pid, |b, cx, v| b.on_reply(cx, v, &op, reply));
        let now = self.engine.now();
        let wait = match step {
            Step::FetchAt(w) => w.since(now).0,
            _ => 0,
        };
        self.out.event(&Event::Reply {
            t: now.0,
            pid,
            op: op.kind(),
            wait,
        });
        if matches!(reply, Reply::Locked { .. }) && self.take_kill(pid, KillPoint::HoldingLock) {
            return;
        }
        self.apply(pid, step);
    }

    fn awaiting(&self, pid: u32, inc: u32, seq: u64) -> bool {
        let w = &self.workers[pid as usize];
        self.current(pid, inc) && w.op_seq == seq && matches!(w.phase, Phase::Awaiting(_))
    }

    fn store_error(&mut self, pid: u32, inc: u32, seq: u64, op: Op, error: StoreErrorKind) {
        if !self.awaiting(pid, inc, seq) {
            return;
        }
        let t = self.t();
        self.out.event(&Event::StoreError { t, pid, error });
        let step = self.with_backend(pid, |b, cx, v| b.on_store_error(cx, v, &op));
        self.apply(pid, step);
    }

    fn fetch_start(&mut self, pid: u32) {
        let t = self.t();
        let w = &mut self.workers[pid as usize];
        w.phase = Phase::Fetching;
        let inc = w.incarnation;
        let there = self.sc.destination.latency.sample(&mut w.rng);
        self.out.event(&Event::FetchStart { t, pid });
        self.engine.after_in(TO_DESTINATION, there, Ev::DestRecv { pid, inc });
        self.take_kill(pid, KillPoint::MidFetch);
    }

    /// The request reaches the destination: the witness records it, whoever sent it.
    fn dest_recv(&mut self, pid: u32, inc: u32) {
        let now = self.engine.now();
        let status = self.dest.arrive(now);
        self.out.event(&Event::Arrival { t: now.0, pid, status });
        if self.current(pid, inc) {
            let d = self.sc.fetch.duration.sample(&mut self.workers[pid as usize].rng);
            self.engine.after(d, Ev::FetchDone { pid, inc, status });
        }
    }

    fn fetch_done(&mut self, pid: u32, inc: u32, status: u16) {
        if !self.current(pid, inc) || self.workers[pid as usize].phase != Phase::Fetching {
            return;
        }
        let t = self.t();
        self.out.event(&Event::FetchEnd { t, pid, status });
        self.workers[pid as usize].fetches += 1;
        let step = self.with_backend(pid, |b, cx, v| b.after_fetch(cx, v, status));
        self.apply(pid, step);
    }

    // ---- faults --------------------------------------------------------------------------

    fn fault_edge(&mut self, id: u32, start: bool) {
        let t = self.t();
        let f = &self.sc.faults[id as usize];
        self.out.event(&Event::Fault {
            t,
            id,
            kind: f.fault_kind(),
            start,
        });
        match f {
            FaultSpec::StoreOutage { mode, .. } => {
                if start {
                    self.store.outage_start(*mode)
                } else {
                    self.store.outage_end()
                }
            }
            FaultSpec::StoreLatency { added, .. } => {
                if start {
                    self.store.latency_start(added.clone())
                } else {
                    self.store.latency_end()
                }
            }
            FaultSpec::Partition { processes, .. } => {
                if start {
                    self.store.partition_start(processes)
                } else {
                    self.store.partition_end(processes)
                }
            }
            FaultSpec::LongTransaction { duration, .. } => {
                if start && let Some(w) = self.store.admit(Waiter::Foreign { hold: *duration }) {
                    self.serve(w);
                }
            }
            FaultSpec::StoreRestart { .. } => {
                if start {
                    self.store.outage_start(OutageMode::Refuse);
                    let now = self.engine.now();
                    let mut cx = Cx {
                        t: now,
                        out: &mut *self.out,
                        store_rng: &mut self.store.rng,
                        timers: &mut self.timers,
                    };
                    self.backend.on_store_restart(&mut cx);
                } else {
                    self.store.outage_end();
                }
            }
            // The destination applies its throttle windows itself, by arrival time.
            FaultSpec::Kill { .. } | FaultSpec::Clock { .. } | FaultSpec::DestinationThrottle { .. } => {}
        }
    }

    fn kill_fires(&mut self, id: u32) {
        let FaultSpec::Kill {
            rate,
            process,
            point,
            restart_after,
            ..
        } = self.sc.faults[id as usize].clone()
        else {
            return;
        };
        let n = self.sc.processes.count;
        let pid = process.unwrap_or_else(|| self.fault_rng.random_range(0..n));
        if let Some(r) = rate {
            let gap = exp_gap(&mut self.fault_rng, r);
            self.engine.after(gap, Ev::Kill { id });
        }
        match point {
            None => {
                if self.workers[pid as usize].is_active() {
                    self.kill(pid, CrashPoint::Immediate, restart_after);
                }
            }
            Some(point) => self.armed.push(ArmedKill {
                pid,
                point,
                restart_after,
            }),
        }
    }

    /// If a kill is armed for `pid` at `point`, carry it out. Returns true if it died.
    fn take_kill(&mut self, pid: u32, point: KillPoint) -> bool {
        let Some(i) = self.armed.iter().position(|k| k.pid == pid && k.point == point) else {
            return false;
        };
        let k = self.armed.remove(i);
        self.kill(pid, point.into(), k.restart_after);
        true
    }

    /// SIGKILL: the process stops at once; nothing it would have done next happens. What it
    /// leaves in the store is the backend's business.
    fn kill(&mut self, pid: u32, point: CrashPoint, restart_after: Option<Nanos>) {
        let t = self.t();
        let w = &mut self.workers[pid as usize];
        let was_active = w.is_active();
        w.phase = Phase::Dead;
        self.out.event(&Event::Crash { t, pid, point });
        let now = self.engine.now();
        {
            let mut cx = Cx {
                t: now,
                out: &mut *self.out,
                store_rng: &mut self.store.rng,
                timers: &mut self.timers,
            };
            self.backend.on_crash(&mut cx, pid);
        }
        match restart_after {
            Some(d) => self.engine.after(d, Ev::Restart { pid }),
            None => {
                if was_active {
                    self.active -= 1;
                }
            }
        }
    }

    /// A fresh process (new state, new random stream, new clock epoch) takes `pid`'s place.
    fn restart(&mut self, pid: u32) {
        let t = self.t();
        let old = &self.workers[pid as usize];
        let inc = old.incarnation + 1;
        let mut mono = old.mono.clone();
        if let Some(s) = self.epoch_spread[pid as usize] {
            mono.offset = draw_epoch(&mut self.fault_rng, s);
        }
        let r = rng::stream(self.sc.seed, Entity::Process { pid, incarnation: inc });
        let mut w = Worker::new(pid, inc, mono, old.wall.clone(), r);
        w.fetches = old.fetches;
        w.queued = old.queued;
        self.workers[pid as usize] = w;
        self.backend.on_restart(pid);
        self.out.event(&Event::Restart { t, pid });
        self.workers[pid as usize].phase = Phase::Idle;
        self.next_job(pid, true);
    }

    fn limit(&mut self, pid: u32, inc: u32, job: u64, hard: bool) {
        let w = &self.workers[pid as usize];
        if !self.current(pid, inc) || w.job_seq != job || matches!(w.phase, Phase::Idle | Phase::Finished) {
            return;
        }
        if hard {
            // Past the hard limit the job is killed; the pool starts a fresh worker.
            self.kill(pid, CrashPoint::HardLimit, Some(Nanos::ZERO));
        } else {
            let step = self.with_backend(pid, |b, cx, v| b.on_soft_limit(cx, v));
            let w = &mut self.workers[pid as usize];
            w.op_seq += 1; // any reply in flight is now stale
            w.phase = Phase::Idle;
            self.apply(pid, step);
        }
    }
}

fn exp_gap(r: &mut Rng, rate: f64) -> Nanos {
    let e = Exp::new(rate).expect("validated rate");
    Nanos::from_secs_f64(e.sample(r))
}

fn draw_epoch(r: &mut Rng, spread: Nanos) -> i64 {
    if spread.0 == 0 {
        0
    } else {
        r.random_range(0..spread.0) as i64
    }
}
