//! The world: every part a run moves ([`Sim`]: workers, store, destination, the backend's
//! halves, fault state, the `[jobs]` broker) and the events between them ([`Ev`]). Built from a
//! scenario and a backend ([`Sim::with_source`]); each engine event is handled by one method
//! below, which states the protocol step it models and hands the worker loop's own steps to
//! [`crate::worker`]. The loop that pops the events is [`super::run`]'s.

use crate::backend::{Backend, ProcessSide, Session, StoreCx, StoreOp, StoreSide, Threads};
use crate::choice::{Hops, Source};
use crate::destination::Destination;
use crate::engine::{Engine, Lane};
use crate::fault::{FaultSpec, OutageMode};
use crate::rng::{self, Entity, Rng};
use crate::scenario::Scenario;
use crate::store::{Store, Waiter};
use crate::task::{After, End, Jobs, Tasks};
use crate::time::{Instant, Nanos};
use crate::trace::{CrashPoint, Event, Sink, StoreErrorKind};
use crate::worker::{Action, Armed, NextJob, Phase, Process, Sections, Tracked, Worker};
use rand::RngExt;
use rand_distr::{Distribution, Exp};

// Engine lanes (see `crate::engine`) for events that come in time order anyway.
/// The store lock's release: one pending at a time.
const LOCK: Lane = Lane(0);
/// Fetches on their way to the destination: in order whenever its latency is constant.
const TO_DESTINATION: Lane = Lane(1);

/// What happens next, on the engine's queue. `th` is the thread of process `pid` an event
/// belongs to (0 in a one-thread process).
#[derive(Hash, Clone, Debug)]
pub(super) enum Ev<Op, Reply> {
    /// Process `pid` starts (all its threads).
    Start { pid: u32 },
    /// A thread's timer fires; what it means depends on the thread's phase. `timer` tells the
    /// thread's current timer from one a soft limit or a re-enqueue made stale.
    Wake { pid: u32, th: u16, inc: u32, timer: u32 },
    /// Open loop: a job arrives for `pid`.
    Job { pid: u32 },
    /// An operation reaches the store.
    StoreRecv {
        pid: u32,
        th: u16,
        inc: u32,
        seq: u64,
        op: Op,
    },
    /// The store's lock frees.
    StoreFree,
    /// The reply to operation `seq` reaches the thread. (It, a refusal and a timeout carry no
    /// operation: they count only while the thread awaits `seq`, and the thread then holds it,
    /// `Worker::op_in_flight`. Events stay small: the engine moves and parks each one.)
    Reply {
        pid: u32,
        th: u16,
        inc: u32,
        seq: u64,
        reply: Reply,
    },
    /// The store refused operation `seq` (the error reaches the thread).
    StoreRefused { pid: u32, th: u16, inc: u32, seq: u64 },
    /// The client gave up waiting for operation `seq`.
    Timeout { pid: u32, th: u16, inc: u32, seq: u64 },
    /// A fetch reaches the destination (delivered even if the sender has since died); for
    /// platform `platform`, its job's when it started (0 without platforms).
    DestRecv { pid: u32, th: u16, inc: u32, platform: u32 },
    /// A fetch's response reaches the thread.
    FetchDone { pid: u32, th: u16, inc: u32, status: u16 },
    /// A fault window opens or closes.
    Fault { id: u32, start: bool },
    /// A kill fault fires (armed or immediate).
    Kill { id: u32 },
    /// A fresh process replaces a killed one.
    Restart { pid: u32 },
    /// A job's soft or hard time limit.
    Limit {
        pid: u32,
        th: u16,
        inc: u32,
        job: u64,
        hard: bool,
    },
    /// A timer the store side asked for.
    StoreTimer { token: u64 },
    /// `[jobs]`: the re-run tick.
    Tick,
    /// `[jobs]`: the recovery sweep.
    Sweep,
    /// `[jobs]`: the countdown of a re-enqueued task that `(pid, inc)` holds is over.
    Countdown { pid: u32, inc: u32, task: usize },
    /// `[jobs]`: the broker delivers a killed process's task again.
    Redeliver { task: usize },
    /// `[jobs]`: the subprocess budget of `pid`'s job `job` ran out.
    Budget { pid: u32, inc: u32, job: u64 },
    /// `[jobs]`: phase 3 of `pid`'s job `job` is done; the event is finalised as `state`.
    Persisted {
        pid: u32,
        inc: u32,
        job: u64,
        state: crate::trace::JobState,
    },
}

impl<Op: Clone, Reply: Clone> Ev<Op, Reply> {
    /// The event with its process named `name(pid)` (an explorer's form under symmetry
    /// reduction, [`crate::form::Form::pid`]). Every variant's pid is renamed; those that name
    /// no process (faults, kills, store timers, the jobs' broker) are left, and a world that
    /// has them forms with ids ([`crate::form::Form::raw_pids`]).
    pub(super) fn renamed(&self, name: impl Fn(u32) -> u32) -> Ev<Op, Reply> {
        let mut e = self.clone();
        match &mut e {
            Ev::Start { pid }
            | Ev::Wake { pid, .. }
            | Ev::Job { pid }
            | Ev::StoreRecv { pid, .. }
            | Ev::Reply { pid, .. }
            | Ev::StoreRefused { pid, .. }
            | Ev::Timeout { pid, .. }
            | Ev::DestRecv { pid, .. }
            | Ev::FetchDone { pid, .. }
            | Ev::Restart { pid }
            | Ev::Limit { pid, .. }
            | Ev::Countdown { pid, .. }
            | Ev::Budget { pid, .. }
            | Ev::Persisted { pid, .. } => *pid = name(*pid),
            Ev::StoreFree
            | Ev::Fault { .. }
            | Ev::Kill { .. }
            | Ev::StoreTimer { .. }
            | Ev::Tick
            | Ev::Sweep
            | Ev::Redeliver { .. } => {}
        }
        e
    }
}

impl<Op, Reply> Ev<Op, Reply> {
    /// The event's kind, and the process it belongs to (if any): what a stuck run reports.
    /// (Inline: a steered run's loop, in `run.rs`, asks it of every event.)
    #[inline]
    pub(super) fn describe(&self) -> (&'static str, Option<u32>) {
        match *self {
            Ev::Start { pid } => ("start", Some(pid)),
            Ev::Wake { pid, .. } => ("wake", Some(pid)),
            Ev::Job { pid } => ("job", Some(pid)),
            Ev::StoreRecv { pid, .. } => ("store_recv", Some(pid)),
            Ev::StoreFree => ("store_free", None),
            Ev::Reply { pid, .. } => ("reply", Some(pid)),
            Ev::StoreRefused { pid, .. } => ("store_refused", Some(pid)),
            Ev::Timeout { pid, .. } => ("timeout", Some(pid)),
            Ev::DestRecv { pid, .. } => ("dest_recv", Some(pid)),
            Ev::FetchDone { pid, .. } => ("fetch_done", Some(pid)),
            Ev::Fault { .. } => ("fault", None),
            Ev::Kill { .. } => ("kill", None),
            Ev::Restart { pid } => ("restart", Some(pid)),
            Ev::Limit { pid, .. } => ("limit", Some(pid)),
            Ev::StoreTimer { .. } => ("store_timer", None),
            Ev::Tick => ("tick", None),
            Ev::Sweep => ("sweep", None),
            Ev::Countdown { pid, .. } => ("countdown", Some(pid)),
            Ev::Redeliver { .. } => ("redeliver", None),
            Ev::Budget { pid, .. } => ("budget", Some(pid)),
            Ev::Persisted { pid, .. } => ("persisted", Some(pid)),
        }
    }
}

/// The store's queue keeps `(pid, incarnation, seq)` for each operation; the sender's thread
/// rides in the top 16 bits of `seq` (a thread's operation numbers stay far below 2^48).
fn tag_seq(seq: u64, th: u16) -> u64 {
    seq | (u64::from(th) << 48)
}

fn untag_seq(tagged: u64) -> (u64, u16) {
    (tagged & ((1 << 48) - 1), (tagged >> 48) as u16)
}

/// The world and its engine, for backend `B`.
pub struct Sim<'a, B: Backend> {
    pub(super) sc: &'a Scenario,
    pub(super) out: &'a mut dyn Sink,
    pub(super) backend: B,
    // how the threads of a process use its process side (with more than one thread)
    pub(super) sharing: Threads,
    pub(super) engine: Engine<Ev<B::Op, B::Reply>>,
    pub(super) procs: Vec<Process<B::Process>>,
    pub(super) store: Store<B::Op>,
    pub(super) store_side: B::Store,
    pub(super) dest: Destination,
    pub(super) fault_rng: Rng,
    // invariant: the critical sections each process is in, as its events show them.
    pub(super) sections: Sections,
    // invariant: number of thread loops that are neither finished nor dead-for-good, plus one
    // for each killed process awaiting its restart; the run ends when it reaches zero (closed
    // loop) or at the duration.
    pub(super) active: u32,
    pub(super) arrivals: Vec<Rng>,
    pub(super) timers: Vec<(Instant, u64)>,
    // invariant: `Some` only inside one turn of `Sim::run`'s loop: a `DestRecv` due now, in
    // the place `(now, seq)` it was given, not yet queued nor handled.
    pub(super) hop: Option<(u64, u32, u16, u32, u32)>,
    // invariant: `Some((at, seq))` only while the store's lock is held and nothing waits for
    // it: the lock's `StoreFree`, given its place `(at, seq)` in the firing order but not
    // queued (see `Sim::hold_lock`).
    pub(super) lock_free: Option<(Instant, u64)>,
    // `[jobs]`: the broker, the sources and their events (None: processes loop on their own).
    pub(super) tasks: Option<Tasks>,
    // the run's choice source, if it has one (`crate::choice`), entered while the world is
    // built and run
    pub(super) source: Option<Source>,
    // invariant (with a source): operations sent and not yet at the store (`Hops::Racing`)
    pub(super) to_store: u32,
}

impl<B: Backend> std::fmt::Debug for Sim<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.engine.now())
            .field("active", &self.active)
            .finish()
    }
}

impl<'a, B: Backend> Sim<'a, B> {
    /// Build the world: workers, clocks, store, destination, the backend's halves, fault
    /// schedule; every random stream of the run tied to `source` ([`crate::choice`]) when there
    /// is one: recorded, replayed or steered. The header is the caller's to write.
    ///
    /// # Panics
    ///
    /// With `[processes] threads` above 1 and a backend that runs one thread per process
    /// ([`Threads::Single`]; every route refuses that first: a scenario when it is read,
    /// `--backend` and sweep points when they are validated, `SimBuilder` in its `check`).
    pub fn with_source(sc: &'a Scenario, backend: B, out: &'a mut dyn Sink, source: Option<Source>) -> Sim<'a, B> {
        let n = sc.processes.count;
        // (the world's first draws, start times and the first arrivals, are the source's too)
        let _entered = source.clone().map(crate::choice::enter);
        let threads = sc.processes.threads.max(1);
        let sharing = Sim::sharing(sc, &backend);
        let fault_rng = rng::stream(sc.seed, Entity::Faults);
        let store = Store::new(&sc.store, rng::stream(sc.seed, Entity::Store));
        let dest = Destination::new(&sc.destination, rng::stream(sc.seed, Entity::Destination))
            .with_throttles(crate::fault::throttles(&sc.faults))
            .with_platforms(
                sc.platforms
                    .iter()
                    .map(|p| (p.limit(sc.pacer.rate), p.burst.unwrap_or(sc.checks.burst))),
            );
        let mut sim = Sim {
            sc,
            out,
            store_side: backend.store(),
            backend,
            sharing,
            engine: Engine::new(),
            procs: Vec::with_capacity(n as usize),
            store,
            dest,
            fault_rng,
            sections: Sections::new(n),
            active: n * u32::from(threads),
            arrivals: (0..n).map(|pid| rng::stream(sc.seed, Entity::Arrivals(pid))).collect(),
            timers: Vec::new(),
            hop: None,
            lock_free: None,
            tasks: sc.jobs.as_ref().map(|j| Tasks::new(Jobs::new(j), n)),
            source,
            to_store: 0,
        };
        for pid in 0..n {
            let (threads, side) = sim.incarnation(pid, 0);
            sim.procs
                .push(Process::new(threads, side, sc.processes.max_concurrency));
        }
        sim.schedule_start();
        sim
    }

    /// How the threads of a process of `sc` share `backend`'s process side (see
    /// [`Sim::with_source`] for the panic).
    pub(super) fn sharing(sc: &Scenario, backend: &B) -> Threads {
        let threads = sc.processes.threads.max(1);
        if threads == 1 {
            Threads::PerThread
        } else {
            match backend.threads() {
                Threads::Single(why) => panic!(
                    "backend `{}` runs one thread per process ({why}); scenario `{}` asks for {threads}",
                    backend.name(),
                    sc.name
                ),
                t => t,
            }
        }
    }

    /// The thread loops of incarnation `inc` of process `pid`, and the process side they share
    /// (if they share one). Thread 0 draws from the process's stream.
    fn incarnation(&self, pid: u32, inc: u32) -> (Vec<Worker<B::Process>>, Option<B::Process>) {
        let sc = self.sc;
        let (mono, wall) = crate::fault::clocks(sc.seed, &sc.faults, pid, inc, &self.store.clock);
        let threads = sc.processes.threads.max(1);
        let shared = self.sharing == Threads::Shared;
        let workers = (0..threads)
            .map(|th| {
                let r = if th == 0 {
                    rng::stream(sc.seed, Entity::Process { pid, incarnation: inc })
                } else {
                    rng::stream(
                        sc.seed,
                        Entity::Thread {
                            pid,
                            incarnation: inc,
                            thread: th,
                        },
                    )
                };
                if shared {
                    Worker::sharing(pid, th, inc, mono.clone(), wall.clone(), r)
                } else {
                    Worker::new(pid, inc, mono.clone(), wall.clone(), r, self.backend.process(pid)).on_thread(th)
                }
            })
            .collect();
        (workers, shared.then(|| self.backend.process(pid)))
    }

    fn schedule_start(&mut self) {
        if let Some(tk) = &self.tasks {
            let sweep = tk.cfg.sweep_every;
            self.engine.at(Instant::ZERO, Ev::Tick);
            self.engine.at(Instant::ZERO + sweep, Ev::Sweep);
        }
        for pid in 0..self.sc.processes.count {
            let d = self
                .sc
                .processes
                .start
                .sample(&mut self.procs[pid as usize].thread_mut(0).rng);
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

    fn t(&self) -> u64 {
        self.engine.now().0
    }

    pub(super) fn handle(&mut self, ev: &Ev<B::Op, B::Reply>) {
        // by reference: only an operation or a reply (which may own data) is cloned out
        match *ev {
            Ev::Start { pid } => self.start_threads(pid, 0),
            Ev::Wake { pid, th, inc, timer } => {
                if !self.current(pid, inc) || self.thread(pid, th).timer != timer {
                    return;
                }
                match self.thread(pid, th).phase {
                    Phase::Idle | Phase::Requeued => self.start_job(pid, th),
                    Phase::Retrying => {
                        let a = self.step(pid, th, |w, t, out| w.retry(t, out));
                        self.act(pid, th, a);
                    }
                    Phase::SleepingToSlot => self.fetch_start(pid, th),
                    _ => {}
                }
            }
            Ev::Job { pid } => self.job_arrives(pid),
            Ev::StoreRecv {
                pid,
                th,
                inc,
                seq,
                ref op,
            } => {
                if self.source.is_some() {
                    self.to_store -= 1;
                }
                self.store_recv(pid, th, inc, seq, op.clone())
            }
            Ev::StoreFree => {
                if let Some(w) = self.store.release() {
                    self.serve(w);
                }
            }
            Ev::Reply {
                pid,
                th,
                inc,
                seq,
                ref reply,
            } => self.reply(pid, th, inc, seq, reply.clone()),
            Ev::StoreRefused { pid, th, inc, seq } => self.store_error(pid, th, inc, seq, StoreErrorKind::Refused),
            Ev::Timeout { pid, th, inc, seq } => self.store_error(pid, th, inc, seq, StoreErrorKind::Timeout),
            Ev::DestRecv { pid, th, inc, platform } => self.dest_recv(pid, th, inc, platform),
            Ev::FetchDone { pid, th, inc, status } => self.fetch_done(pid, th, inc, status),
            Ev::Fault { id, start } => self.fault_edge(id, start),
            Ev::Kill { id } => self.kill_fires(id),
            Ev::Restart { pid } => self.restart(pid),
            Ev::Limit {
                pid,
                th,
                inc,
                job,
                hard,
            } => self.limit(pid, th, inc, job, hard),
            Ev::StoreTimer { token } => {
                let now = self.engine.now();
                self.with_store(now, |s, cx| s.on_timer(cx, token));
            }
            Ev::Tick => self.tick(),
            Ev::Sweep => self.sweep(),
            Ev::Countdown { pid, inc, task } => self.countdown_over(pid, inc, task),
            Ev::Redeliver { task } => self.redeliver(task),
            Ev::Budget { pid, inc, job } => self.budget(pid, inc, job),
            Ev::Persisted { pid, inc, job, state } => self.persisted(pid, inc, job, state),
        }
        if !self.timers.is_empty() {
            for (at, token) in self.timers.drain(..) {
                self.engine.at(at, Ev::StoreTimer { token });
            }
        }
    }

    /// Thread `th` of process `pid`.
    fn thread(&mut self, pid: u32, th: u16) -> &mut Worker<B::Process> {
        self.procs[pid as usize].thread_mut(th)
    }

    /// Run one step of thread `th`'s loop, holding what its process shares (the trace followed
    /// for critical sections).
    fn step<R>(
        &mut self,
        pid: u32,
        th: u16,
        f: impl FnOnce(&mut Worker<B::Process>, Instant, &mut dyn Sink) -> R,
    ) -> R {
        let now = self.engine.now();
        let p = &mut self.procs[pid as usize];
        let r = f(p.lend(th), now, &mut Tracked::new(self.out, &mut self.sections));
        p.reclaim(th);
        r
    }

    /// Is `(pid, inc)` the live incarnation?
    fn current(&self, pid: u32, inc: u32) -> bool {
        let w = self.procs[pid as usize].thread(0);
        w.incarnation == inc && w.phase != Phase::Dead
    }

    /// Call the store side with its context (the trace followed for critical sections).
    fn with_store<R>(&mut self, t: Instant, f: impl FnOnce(&mut B::Store, &mut StoreCx) -> R) -> R {
        let mut out = Tracked::new(self.out, &mut self.sections);
        let mut cx = StoreCx {
            t,
            out: &mut out,
            rng: &mut self.store.rng,
            timers: &mut self.timers,
        };
        f(&mut self.store_side, &mut cx)
    }

    // ---- the worker's loop -------------------------------------------------------------

    /// Between jobs: finish, wait for a job, or think then start the next one.
    fn next_job(&mut self, pid: u32, th: u16, first: bool) {
        if self.tasks.is_some() {
            self.thread(pid, th).phase = Phase::Idle;
            return self.take_task(pid);
        }
        let sc = self.sc;
        let next = self.step(pid, th, |w, _, _| {
            w.next_job(
                sc.processes.requests,
                sc.processes.arrival_rate.is_some(),
                &sc.processes.think,
                first,
            )
        });
        match next {
            NextJob::Finished => self.active -= 1,
            NextJob::WaitForJob => {}
            NextJob::StartNow => self.start_job(pid, th),
            NextJob::ThinkFor(d) => {
                let w = self.thread(pid, th);
                let (inc, timer) = (w.incarnation, w.arm_timer());
                self.engine.after(d, Ev::Wake { pid, th, inc, timer });
            }
        }
    }

    fn job_arrives(&mut self, pid: u32) {
        let rate = self.sc.processes.arrival_rate.expect("jobs only in open loop");
        let gap = exp_gap(&mut self.arrivals[pid as usize], rate);
        self.engine.after(gap, Ev::Job { pid });
        if let Some(th) = self.procs[pid as usize].job_arrives() {
            self.start_job(pid, th);
        }
    }

    /// A thread begins a job, once it holds one of its process's permits (if they are
    /// bounded: `max_concurrency`).
    fn start_job(&mut self, pid: u32, th: u16) {
        if self.procs[pid as usize].take_permit(th) {
            self.begin_job(pid, th);
        }
    }

    /// A thread holding a permit (or needing none) begins its job: its time limits are armed,
    /// and it asks for permission.
    fn begin_job(&mut self, pid: u32, th: u16) {
        let now = self.engine.now();
        let sc = self.sc;
        let w = self.thread(pid, th);
        let (inc, job) = (w.incarnation, w.start_job(now));
        for (limit, hard) in [(sc.processes.soft_limit, false), (sc.processes.hard_limit, true)] {
            if let Some(d) = limit {
                self.engine.after(
                    d,
                    Ev::Limit {
                        pid,
                        th,
                        inc,
                        job,
                        hard,
                    },
                );
            }
        }
        let a = self.step(pid, th, |w, t, out| w.retry(t, out));
        self.act(pid, th, a);
    }

    /// A thread's job is over: its permit goes to the first thread waiting for one.
    fn job_over(&mut self, pid: u32) {
        if let Some(waiter) = self.procs[pid as usize].give_permit() {
            self.begin_job(pid, waiter);
        }
    }

    /// Carry out what the worker loop decided.
    fn act(&mut self, pid: u32, th: u16, a: Action<B::Op>) {
        let now = self.engine.now();
        match a {
            Action::Send { op, seq } => self.send(pid, th, seq, op),
            Action::FetchAt(wake) => {
                self.walk_starts(pid);
                if wake <= now {
                    self.fetch_start(pid, th);
                } else {
                    let w = self.thread(pid, th);
                    let (inc, timer) = (w.incarnation, w.arm_timer());
                    self.engine.at(wake, Ev::Wake { pid, th, inc, timer });
                }
            }
            Action::Requeue(at) if self.tasks.is_some() => self.task_requeued(pid, at),
            Action::JobDone if self.tasks.is_some() => self.walk_over(pid),
            Action::RetryAt(at) => {
                let w = self.thread(pid, th);
                let (inc, timer) = (w.incarnation, w.arm_timer());
                self.engine.at(at, Ev::Wake { pid, th, inc, timer });
            }
            Action::Requeue(at) => {
                let w = self.thread(pid, th);
                let (inc, timer) = (w.incarnation, w.arm_timer());
                self.engine.at(at, Ev::Wake { pid, th, inc, timer });
                self.job_over(pid);
            }
            Action::JobDone => {
                let inc = self.thread(pid, th).incarnation;
                self.job_over(pid);
                // (the next thread in line may have died at its first step, with its process)
                if self.current(pid, inc) {
                    self.next_job(pid, th, false);
                }
            }
            Action::Die(k) => self.kill(pid, k.point.into(), k.restart_after),
        }
    }

    /// A thread sends `op` (already traced) to the store. The timeout of its previous
    /// operation, if still armed (an operation it did not wait for, a report), can only fire
    /// into [`Sim::awaiting`]'s refusal now (a thread's operation numbers only grow): it is
    /// cancelled, or every such timeout would stay queued for `store.timeout`, the queue
    /// growing with the operation rate times the timeout.
    fn send(&mut self, pid: u32, th: u16, seq: u64, op: B::Op) {
        let w = self.procs[pid as usize].thread_mut(th);
        if let Some(id) = w.op_timeout.take() {
            self.engine.cancel(id);
        }
        let w = self.procs[pid as usize].thread_mut(th);
        let inc = w.incarnation;
        let racing = self.source.is_some() && (self.to_store > 0 || self.store.busy() || self.store.waiting() > 0);
        let steered = self.source.is_some();
        let there = self.store.one_way_if(steered, &mut w.rng, |h| {
            let permission = op.kind().asks_permission() || op.kind() == crate::trace::OpKind::Complete;
            match h {
                Hops::Permission => permission,
                Hops::Racing => permission && racing,
                Hops::Sent | Hops::All => true,
            }
        });
        if steered {
            self.to_store += 1;
        }
        self.engine.after(
            there,
            Ev::StoreRecv {
                pid,
                th,
                inc,
                seq,
                op: op.clone(),
            },
        );
        let timeout = self
            .engine
            .timer_after(self.store.timeout, Ev::Timeout { pid, th, inc, seq });
        let w = self.thread(pid, th);
        w.op_timeout = Some(timeout);
        w.op_in_flight = Some(op);
    }

    /// The answer to operation `seq` is in: once the thread no longer awaits it (it never will
    /// again: a thread's operation numbers only grow), its timeout is cancelled. It would
    /// have fired into [`Sim::awaiting`]'s refusal; cancelled, it is never popped, and the
    /// engine counts as pending only the timeouts of operations in flight.
    fn settled(&mut self, pid: u32, th: u16, seq: u64) {
        let w = self.thread(pid, th);
        if !w.awaiting(seq)
            && let Some(id) = w.op_timeout.take()
        {
            self.engine.cancel(id);
        }
    }

    /// An operation reaches the store: refused, ignored, or queued for the lock.
    fn store_recv(&mut self, pid: u32, th: u16, inc: u32, seq: u64, op: B::Op) {
        match self.store.reachable(pid) {
            Err(OutageMode::Refuse) => {
                let back = self.store.one_way_if(
                    self.source.is_some(),
                    &mut self.procs[pid as usize].thread_mut(th).rng,
                    |h| h == Hops::All,
                );
                self.engine.after(back, Ev::StoreRefused { pid, th, inc, seq });
            }
            Err(OutageMode::Timeout) => {} // nothing answers; the client's timeout fires
            Ok(()) => {
                let w = Waiter::Op {
                    pid,
                    incarnation: inc,
                    seq: tag_seq(seq, th),
                    op,
                };
                if let Some(w) = self.admit(w) {
                    self.serve(w);
                }
            }
        }
    }

    /// The lock, just taken by the waiter being served, is held for `d`. Its release is an
    /// event, `StoreFree`, that hands the lock to the next waiter; while nobody waits, it has
    /// nothing to do but mark the lock free, so it is only given its place in the firing order
    /// (`lock_free`) and queued there if a waiter arrives before it is due ([`Sim::admit`]).
    /// Measured on R1-large, where half the reservations find the lock free: one event a fetch
    /// fewer.
    fn hold_lock(&mut self, d: Nanos) {
        debug_assert!(self.lock_free.is_none());
        if self.store.waiting() == 0 {
            let at = self.engine.now() + d;
            self.lock_free = Some((at, self.engine.reserve()));
        } else {
            self.engine.after_in(LOCK, d, Ev::StoreFree);
        }
    }

    /// A waiter reaches the store's lock ([`Store::admit`]): returned if it takes the lock now.
    /// A release not queued (`lock_free`) has happened if its place comes before the event
    /// being handled; if not, and the waiter must wait, the release is queued in its place.
    // (inlined by hand: after issue 32 and 33 grew its callers it was left a call of its own,
    // 1.04M instructions on R1-small)
    #[inline(always)]
    fn admit(&mut self, w: Waiter<B::Op>) -> Option<Waiter<B::Op>> {
        if let Some((at, seq)) = self.lock_free
            && self.engine.before_current(at, seq)
        {
            self.lock_free = None;
            let next = self.store.release();
            debug_assert!(next.is_none(), "nobody waits while a release is not queued");
        }
        let w = self.store.admit(w);
        if w.is_none()
            && let Some((at, seq)) = self.lock_free.take()
        {
            self.engine.at_reserved(at, seq, Ev::StoreFree);
        }
        w
    }

    /// The store serves one waiter under its lock: the backend's atomic operation.
    fn serve(&mut self, waiter: Waiter<B::Op>) {
        let now = self.engine.now();
        let (pid, inc, (seq, th), op) = match waiter {
            Waiter::Foreign { hold } => return self.hold_lock(hold),
            Waiter::Op {
                pid,
                incarnation,
                seq,
                op,
            } => (pid, incarnation, untag_seq(seq), op),
        };
        let store_now = self.store.now(now);
        let from = Session {
            pid,
            incarnation: inc,
            thread: th,
        };
        let served = self.with_store(now, |s, cx| s.serve(cx, from, &op, store_now));
        self.store.served += 1;
        let service = self.store.service_time();
        // the commit stage, under the lock: an autocommit reply waits for it; an open
        // transaction commits at its end, after `hold`
        let commit = if self.store_side.durable(&op) {
            self.store.commit_time()
        } else {
            Nanos::ZERO
        };
        let reply_after = if served.hold.0 > 0 { service } else { service + commit };
        let back = self.store.one_way_if(
            self.source.is_some(),
            &mut self.procs[pid as usize].thread_mut(th).rng,
            |h| h == Hops::All,
        );
        self.engine.after(
            reply_after + back,
            Ev::Reply {
                pid,
                th,
                inc,
                seq,
                reply: served.reply,
            },
        );
        self.hold_lock(service + served.hold + commit);
        if self.current(pid, inc)
            && let Some(k) = self.step(pid, th, |w, _, _| w.served(&op, served.hold.0 > 0))
        {
            self.kill(pid, k.point.into(), k.restart_after);
        }
    }

    fn reply(&mut self, pid: u32, th: u16, inc: u32, seq: u64, reply: B::Reply) {
        if !self.awaiting(pid, th, inc, seq) {
            return;
        }
        let op = self.in_flight(pid, th);
        let a = self.step(pid, th, |w, t, out| w.reply(t, &op, reply, out));
        self.settled(pid, th, seq);
        self.act(pid, th, a);
    }

    fn awaiting(&self, pid: u32, th: u16, inc: u32, seq: u64) -> bool {
        self.current(pid, inc) && self.procs[pid as usize].thread(th).awaiting(seq)
    }

    /// The operation a thread awaits (once [`Sim::awaiting`] said so).
    fn in_flight(&mut self, pid: u32, th: u16) -> B::Op {
        self.thread(pid, th)
            .op_in_flight
            .clone()
            .expect("a thread awaiting an operation sent it (Sim::send)")
    }

    fn store_error(&mut self, pid: u32, th: u16, inc: u32, seq: u64, error: StoreErrorKind) {
        if !self.awaiting(pid, th, inc, seq) {
            return;
        }
        let op = self.in_flight(pid, th);
        let now = self.engine.now();
        self.procs[pid as usize]
            .thread_mut(th)
            .store_error_event(now, error, self.out);
        let from = Session {
            pid,
            incarnation: inc,
            thread: th,
        };
        self.with_store(now, |s, cx| s.on_error(cx, from, &op));
        let a = self.step(pid, th, |w, t, out| w.store_error(t, &op, out));
        self.settled(pid, th, seq);
        self.act(pid, th, a);
    }

    fn fetch_start(&mut self, pid: u32, th: u16) {
        let now = self.engine.now();
        let w = self.procs[pid as usize].thread_mut(th);
        w.fetch_start(now, self.out);
        let inc = w.incarnation;
        let there = self.sc.destination.latency.sample(&mut w.rng);
        let platform = self.sections.platform(pid);
        if there == Nanos::ZERO && self.hop.is_none() {
            // due now: it may never need queueing (see `Sim::run`)
            self.hop = Some((self.engine.reserve(), pid, th, inc, platform));
        } else {
            self.engine
                .after_in(TO_DESTINATION, there, Ev::DestRecv { pid, th, inc, platform });
        }
        if let Some(k) = self.step(pid, th, |w, _, _| w.fetch_sent()) {
            self.kill(pid, k.point.into(), k.restart_after);
        }
    }

    /// The request reaches the destination: the witness records it, whoever sent it.
    pub(super) fn dest_recv(&mut self, pid: u32, th: u16, inc: u32, platform: u32) {
        let now = self.engine.now();
        let status = self.dest.arrive(now, platform);
        self.out.arrival(now.0, pid, th, status);
        if self.current(pid, inc) {
            let sc = self.sc;
            let rng = &mut self.thread(pid, th).rng;
            let mut d = sc.fetch.duration.sample(rng);
            let mut status = status;
            // a stuck file (drawn only when the scenario has them: others keep their streams)
            if let Some(stuck) = &sc.fetch.stuck
                && rng.random_bool(stuck.share)
            {
                d = stuck.cost();
                status = crate::destination::status::TIMED_OUT;
            }
            self.engine.after(d, Ev::FetchDone { pid, th, inc, status });
        }
    }

    fn fetch_done(&mut self, pid: u32, th: u16, inc: u32, status: u16) {
        if !self.current(pid, inc) || self.thread(pid, th).phase != Phase::Fetching {
            return;
        }
        if let Some(tk) = &mut self.tasks {
            tk.fetched(pid);
        }
        let a = self.step(pid, th, |w, t, out| w.fetch_end(t, status, out));
        self.act(pid, th, a);
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
                if start && let Some(w) = self.admit(Waiter::Foreign { hold: *duration }) {
                    self.serve(w);
                }
            }
            FaultSpec::StoreRestart { .. } => {
                if start {
                    self.store.outage_start(OutageMode::Refuse);
                    let now = self.engine.now();
                    self.with_store(now, |s, cx| s.on_store_restart(cx));
                } else {
                    self.store.outage_end();
                }
            }
            FaultSpec::StateLost { .. } => {
                if start {
                    let now = self.engine.now();
                    self.with_store(now, |s, cx| s.on_state_lost(cx));
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
        let pid = match (process, self.source.as_ref().and_then(|s| s.target(n))) {
            (Some(p), _) => p,
            (None, Some(chosen)) => chosen,
            (None, None) => self.fault_rng.random_range(0..n),
        };
        if let Some(r) = rate {
            let gap = exp_gap(&mut self.fault_rng, r);
            self.engine.after(gap, Ev::Kill { id });
        }
        match point {
            None => {
                if self.procs[pid as usize].threads().any(|w| w.is_active()) {
                    self.kill(pid, CrashPoint::Immediate, restart_after);
                }
            }
            Some(point) => self.procs[pid as usize].arm(Armed { point, restart_after }),
        }
    }

    /// SIGKILL: the process stops at once, every thread of it; nothing it would have done next
    /// happens. Its critical sections end; what each thread's session leaves in the store is
    /// the store side's business.
    fn kill(&mut self, pid: u32, point: CrashPoint, restart_after: Option<Nanos>) {
        let now = self.engine.now();
        let p = &mut self.procs[pid as usize];
        let was_active = p.die();
        let sessions: Vec<Session> = p.sessions().collect();
        self.out.event(&Event::Crash { t: now.0, pid, point });
        self.sections.died(pid, now.0, self.out);
        for s in sessions {
            self.with_store(now, |st, cx| st.on_crash(cx, s));
        }
        if let Some(tk) = &mut self.tasks {
            let (tasks, after) = tk.killed(pid, point == CrashPoint::HardLimit);
            for task in tasks {
                self.engine.after(after, Ev::Redeliver { task });
            }
        }
        self.active -= was_active;
        if let Some(d) = restart_after {
            self.active += 1; // the restart to come
            self.engine.after(d, Ev::Restart { pid });
        }
    }

    /// A fresh process (new state, new random streams, new clock epoch) takes `pid`'s place,
    /// with all its threads.
    fn restart(&mut self, pid: u32) {
        let t = self.t();
        let inc = self.procs[pid as usize].thread(0).incarnation + 1;
        let (threads, side) = self.incarnation(pid, inc);
        self.procs[pid as usize].restarted(threads, side);
        self.out.event(&Event::Restart { t, pid });
        self.active -= 1;
        self.active += u32::from(self.sc.processes.threads.max(1));
        self.start_threads(pid, inc);
    }

    /// Incarnation `inc` of process `pid` starts its threads, in order, unless one of them
    /// dies on the way (a kill armed at the first protocol point one of them reaches: then the
    /// rest never start, and the kill has counted them).
    fn start_threads(&mut self, pid: u32, inc: u32) {
        for th in 0..self.sc.processes.threads.max(1) {
            if !self.current(pid, inc) {
                return;
            }
            self.thread(pid, th).phase = Phase::Idle;
            self.next_job(pid, th, true);
        }
    }

    fn limit(&mut self, pid: u32, th: u16, inc: u32, job: u64, hard: bool) {
        let current = self.current(pid, inc);
        let w = self.thread(pid, th);
        if !current
            || w.job_seq != job
            || matches!(
                w.phase,
                Phase::Idle | Phase::Requeued | Phase::WaitingPermit | Phase::Finished
            )
        {
            return;
        }
        if hard {
            // Past the hard limit the job is killed with its process; the pool starts a fresh
            // one.
            self.kill(pid, CrashPoint::HardLimit, Some(Nanos::ZERO));
        } else if self.tasks.is_some() {
            // The soft limit raises in the download task (one thread per process: `[jobs]`
            // needs `redis_lock`, which refuses threads).
            let now = self.engine.now();
            let finalising = self.thread(pid, th).phase == Phase::Finalising;
            let tk = self.tasks.as_mut().expect("checked");
            if finalising {
                if let Some(state) = tk.soft_limit_in_phase3(pid) {
                    tk.finalise(pid, state, now, self.out);
                }
                return self.next_job(pid, th, false);
            }
            tk.ending(pid, End::SoftLimit);
            let a = self.step(pid, th, |w, t, out| w.soft_limit(t, out));
            self.act(pid, th, a);
        } else {
            let a = self.step(pid, th, |w, t, out| w.soft_limit(t, out));
            self.act(pid, th, a);
        }
    }
}

// ---- `[jobs]`: download tasks through a broker (`crate::task`) -----------------------------

impl<B: Backend> Sim<'_, B> {
    /// The re-run tick: new events and tasks, then free processes take them.
    fn tick(&mut self) {
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        tk.tick(now, self.out);
        let every = tk.cfg.tick;
        self.engine.after(every, Ev::Tick);
        self.hand_out();
    }

    /// The recovery sweep.
    fn sweep(&mut self) {
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        tk.sweep(now, self.out);
        let every = tk.cfg.sweep_every;
        self.engine.after(every, Ev::Sweep);
        self.hand_out();
    }

    /// Every idle process, in pid order, takes a ready task while there is one.
    fn hand_out(&mut self) {
        for pid in 0..self.sc.processes.count {
            if !self.tasks.as_ref().is_some_and(Tasks::has_ready) {
                return;
            }
            if self.thread(pid, 0).phase == Phase::Idle {
                self.take_task(pid);
            }
        }
    }

    /// `pid` is free: it executes the oldest ready task, if any (else it stays idle).
    fn take_task(&mut self, pid: u32) {
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        let Some(task) = tk.take_ready() else { return };
        let p = &mut self.procs[pid as usize];
        let w = p.lend(0);
        let memo = tk.begin(pid, task, w.job_seq + 1, now);
        w.process.as_mut().expect("a lent process side").begin_task(memo);
        p.reclaim(0);
        self.start_job(pid, 0);
    }

    /// The execution re-enqueued its task with a countdown: `pid` holds it until then and is
    /// free meanwhile.
    fn task_requeued(&mut self, pid: u32, at: Instant) {
        let now = self.engine.now();
        let inc = self.thread(pid, 0).incarnation;
        let Some(tk) = &mut self.tasks else { return };
        if let Some(task) = tk.requeued(pid, now, self.out) {
            self.engine.at(at, Ev::Countdown { pid, inc, task });
        }
        self.next_job(pid, 0, false);
    }

    fn countdown_over(&mut self, pid: u32, inc: u32, task: usize) {
        if !self.current(pid, inc) {
            return; // the kill already handed the task back (or lost it)
        }
        let Some(tk) = &mut self.tasks else { return };
        if tk.countdown_over(pid, task) {
            self.hand_out();
        }
    }

    fn redeliver(&mut self, task: usize) {
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        tk.redeliver(task, now, self.out);
        self.hand_out();
    }

    /// The walk begins (its first fetch is scheduled): the event runs, the budget starts.
    fn walk_starts(&mut self, pid: u32) {
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        if let Some((job, budget)) = tk.walk_starts(pid, now, self.out) {
            let inc = self.procs[pid as usize].thread(0).incarnation;
            self.engine.after(budget, Ev::Budget { pid, inc, job });
        }
    }

    /// The subprocess budget ran out: the walk stops (TimeoutExpired) and releases the lock.
    fn budget(&mut self, pid: u32, inc: u32, job: u64) {
        if !self.current(pid, inc) || self.thread(pid, 0).job_seq != job {
            return;
        }
        let Some(tk) = &mut self.tasks else { return };
        if !tk.walking(pid, job)
            || !matches!(
                self.procs[pid as usize].thread(0).phase,
                Phase::SleepingToSlot | Phase::Fetching
            )
        {
            return;
        }
        tk.ending(pid, End::Budget);
        let a = self.step(pid, 0, |w, t, out| w.soft_limit(t, out));
        self.act(pid, 0, a);
    }

    /// The walk is over (the lock released): phase 3, or the event is left as it is.
    fn walk_over(&mut self, pid: u32) {
        let Some(tk) = &mut self.tasks else { return };
        match tk.walk_over(pid) {
            After::Persist(state) => {
                let w = self.procs[pid as usize].thread_mut(0);
                w.phase = Phase::Finalising;
                let (inc, job) = (w.incarnation, w.job_seq);
                let persist = tk.cfg.persist;
                self.engine.after(persist, Ev::Persisted { pid, inc, job, state });
            }
            After::Abandon => self.next_job(pid, 0, false),
        }
    }

    fn persisted(&mut self, pid: u32, inc: u32, job: u64, state: crate::trace::JobState) {
        let w = self.procs[pid as usize].thread(0);
        if !self.current(pid, inc) || w.job_seq != job || w.phase != Phase::Finalising {
            return;
        }
        let now = self.engine.now();
        let Some(tk) = &mut self.tasks else { return };
        tk.finalise(pid, state, now, self.out);
        self.next_job(pid, 0, false);
    }
}

fn exp_gap(r: &mut Rng, rate: f64) -> Nanos {
    // (steered: the explorer's quantile of the gap)
    if let Some((q, _)) = crate::choice::with(|s| s.value(crate::choice::pid())) {
        return Nanos::from_secs_f64(-(1.0 - q).ln() / rate);
    }
    let e = Exp::new(rate).expect("validated rate");
    Nanos::from_secs_f64(e.sample(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::row::Row;
    use crate::engine::calendar::Parked;

    /// The row backend's engine events are 48 bytes, so one parked in the engine's slab with
    /// its key fills one cache line: a step of the calendar's walk, or a pop and the event it
    /// pops, touch one line.
    #[test]
    fn a_parked_event_fills_one_cache_line() {
        type E = Ev<<Row as Backend>::Op, <Row as Backend>::Reply>;
        assert_eq!(std::mem::size_of::<E>(), 48);
        assert_eq!(std::mem::size_of::<Parked<E>>(), 64);
        assert_eq!(std::mem::align_of::<Parked<E>>(), 64);
    }
}
