//! The simulator: builds the world from a scenario and a backend and runs it under virtual
//! time, emitting the trace.
//!
//! [`Sim`] owns the world (workers, store, destination, the backend's store side, fault state)
//! and one [`Engine`]. Each engine event is handled by one method below; each method states
//! the protocol step it models and hands the worker loop's own steps to [`crate::worker`]. No
//! wall clock is read anywhere here, no hash map is iterated, and every random draw comes from
//! the stream of the entity that makes it ([`crate::rng`]).
//!
//! Most callers go through [`crate::builder::SimBuilder`] (any backend value) or [`crate::registry::run`] (the
//! backend the scenario names).

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
use crate::trace::{CrashPoint, Detail, Event, Header, ScenarioSettings, Sink, StoreErrorKind, TRACE_VERSION};
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
enum Ev<Op, Reply> {
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

impl<Op, Reply> Ev<Op, Reply> {
    /// The event's kind, and the process it belongs to (if any): what a stuck run reports.
    fn describe(&self) -> (&'static str, Option<u32>) {
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

/// Figures about the run itself (not about the pacer: those come from the trace).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Virtual time when the run ended.
    pub end: Instant,
    /// Engine events processed (a lock release that was never queued, since nobody waited for
    /// it, is not one: see `Sim::hold_lock`).
    pub events: u64,
    /// Store operations served.
    pub store_ops: u64,
    /// The most events handled in a row at one virtual instant (what [`progress_bound`] is
    /// held against).
    pub same_instant_peak: u64,
    /// An explorer's run stopped at a state an earlier run reached ([`crate::choice`]): the
    /// trace stops there, without its `end` event.
    pub pruned: bool,
}

/// A run stopped making progress: virtual time stood still at `at` while `events` engine
/// events were handled in a row (a livelock, e.g. a pacer that keeps answering "retry now").
/// The run is abandoned there; its trace is incomplete and has no `end` event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no progress at t = {}: {events} events without time advancing; looping: {looping}", Nanos(at.0))]
pub struct NoProgress {
    /// The virtual instant time stood still at.
    pub at: Instant,
    /// Events handled in a row at that instant when the run was stopped.
    pub events: u64,
    /// What loops: the kinds of the last events handled there, each with how many and the
    /// processes they belong to, e.g. `store_recv x 86 (processes 0, 1, 2, 3), ...`.
    pub looping: String,
}

/// The most events a run of `sc` may handle in a row at one virtual instant before it is
/// stopped as a livelock ([`NoProgress`]): 2^20, plus 64 for each thread loop, fault, and
/// `[jobs]` source, times the largest burst the run allows, the backend's stated burst
/// (`burst`, its [`crate::backend::Facts`]) or `[checks] burst` (one grant per loop at an
/// instant needs about ten events: its start, operation, reply, fetch, wake). A run that
/// progresses handles a few events per loop at one instant (the busiest shipped scenario
/// stays below 1% of its bound: `tests/suite/livelock.rs`); a run that loops at one instant reaches
/// it within a second or two.
pub fn progress_bound(sc: &Scenario, burst: Option<u64>) -> u64 {
    let loops = u64::from(sc.processes.count) * u64::from(sc.processes.threads.max(1));
    let sources = sc
        .jobs
        .as_ref()
        .map_or(0, |j| u64::from(crate::task::Jobs::new(j).sources));
    let burst = burst.unwrap_or(1).max(1).max(sc.checks.burst.max(1));
    let things = loops.saturating_add(sc.faults.len() as u64).saturating_add(sources);
    (1u64 << 20).saturating_add(things.saturating_mul(64).saturating_mul(burst))
}

/// How many events past the bound are handled (and tallied) to say what loops.
const LOOP_SAMPLE: u64 = 4096;

/// How often (in events, a state's form weighing one per process) a steered run asks its
/// explorer whether to stop ([`crate::choice::Source::halt`]).
const HALT_EVERY: u64 = 1024;

/// The trace header for scenario `sc` run with a backend whose options in force are `detail`
/// (`source`: `sim` or `live`).
pub fn header_with(sc: &Scenario, backend: &str, detail: serde_json::Value, source: &str) -> Header {
    let backend_detail = with_settings(sc, detail);
    Header {
        ev: "header".into(),
        version: TRACE_VERSION,
        source: source.into(),
        scenario: sc.name.clone(),
        backend: backend.into(),
        seed: sc.seed,
        processes: sc.processes.count,
        rate: sc.pacer.rate,
        burst: sc.checks.burst,
        multiplier_cap: sc.backoff.cap,
        backend_detail,
    }
}

/// The backend's options in force (a JSON object; anything else is kept under `detail`),
/// plus the scenario settings checkers need.
fn with_settings(sc: &Scenario, d: serde_json::Value) -> Detail {
    let settings = ScenarioSettings {
        backoff_factor: sc.backoff.factor,
        decay_after: sc.backoff.decay_after,
        epsilon: sc.checks.epsilon,
        think_mean_ns: sc.processes.think.mean(),
        fetch_mean_ns: sc.fetch.duration.mean() + sc.destination.latency.mean(),
        arrival_rate: sc.processes.arrival_rate,
        wait_bound_ns: sc.checks.wait_bound.map(|b| b.0),
    };
    let mut d = if d.is_object() {
        d
    } else {
        serde_json::json!({ "detail": d })
    };
    if let (Some(j), Some(map)) = (&sc.jobs, d.as_object_mut()) {
        // each task's walk has its own length: the backend's `walk` does not bound it
        map.remove("walk");
        let jobs = crate::task::Jobs::new(j).detail();
        for (k, v) in jobs.as_object().into_iter().flatten() {
            map.insert(k.clone(), v.clone());
        }
    }
    // (stated only with threads, so a one-thread header is as it always was)
    if sc.processes.threads > 1 {
        d["threads"] = sc.processes.threads.into();
    }
    if let Some(k) = sc.processes.max_concurrency {
        d["max_concurrency"] = k.into();
    }
    Detail::new(d, settings)
}

/// The world and its engine, for backend `B`.
pub struct Sim<'a, B: Backend> {
    sc: &'a Scenario,
    out: &'a mut dyn Sink,
    backend: B,
    // how the threads of a process use its process side (with more than one thread)
    sharing: Threads,
    engine: Engine<Ev<B::Op, B::Reply>>,
    procs: Vec<Process<B::Process>>,
    store: Store<B::Op>,
    store_side: B::Store,
    dest: Destination,
    fault_rng: Rng,
    // invariant: the critical sections each process is in, as its events show them.
    sections: Sections,
    // invariant: number of thread loops that are neither finished nor dead-for-good, plus one
    // for each killed process awaiting its restart; the run ends when it reaches zero (closed
    // loop) or at the duration.
    active: u32,
    arrivals: Vec<Rng>,
    timers: Vec<(Instant, u64)>,
    // invariant: `Some` only inside one turn of `Sim::run`'s loop: a `DestRecv` due now, in
    // the place `(now, seq)` it was given, not yet queued nor handled.
    hop: Option<(u64, u32, u16, u32, u32)>,
    // invariant: `Some((at, seq))` only while the store's lock is held and nothing waits for
    // it: the lock's `StoreFree`, given its place `(at, seq)` in the firing order but not
    // queued (see `Sim::hold_lock`).
    lock_free: Option<(Instant, u64)>,
    // `[jobs]`: the broker, the sources and their events (None: processes loop on their own).
    tasks: Option<Tasks>,
    // the run's choice source, if it has one (`crate::choice`), entered while the world is
    // built and run
    source: Option<Source>,
    // invariant (with a source): operations sent and not yet at the store (`Hops::Racing`)
    to_store: u32,
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
        let sharing = if threads == 1 {
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
        };
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

    /// Run to completion: until every worker is done, or the duration is reached.
    ///
    /// # Errors
    ///
    /// More than [`progress_bound`] events in a row at one virtual instant: the run is
    /// stopped there ([`NoProgress`]), without its `end` event.
    pub fn run(&mut self) -> Result<Outcome, NoProgress> {
        match self.source.clone() {
            None => self.run_loop::<false>(),
            Some(s) => {
                let _entered = crate::choice::enter(s);
                self.run_loop::<true>()
            }
        }
    }

    /// The run loop; `STEERED` (a run with a choice source) adds the explorer's steps, which
    /// an ordinary run's loop does not carry at all.
    fn run_loop<const STEERED: bool>(&mut self) -> Result<Outcome, NoProgress> {
        let limit = Instant(self.sc.duration.0);
        let bound = progress_bound(self.sc, self.backend.facts().burst);
        let mut last = Instant::ZERO;
        // invariant: events handled in a row at `last`; `peak` the most before `last`
        let (mut same, mut peak) = (0u64, 0u64);
        let mut ev = Ev::Tick; // (overwritten by each pop)
        // (steered: the work since the explorer's limits were last asked, in events)
        let mut work = 0u64;
        let form_weight = u64::from(self.sc.processes.count) * u64::from(self.sc.processes.threads.max(1));
        while self.active > 0 || self.sc.processes.arrival_rate.is_some() || self.tasks.is_some() {
            let Some(t) = self.engine.pop_into(limit, &mut ev) else {
                break;
            };
            // the progress guard: one compare per event, the rest only when time moves
            if t == last {
                same += 1;
                if same > bound {
                    return Err(self.no_progress(t, same, limit, &mut ev));
                }
            } else {
                peak = peak.max(same);
                same = 1;
            }
            last = t;
            if STEERED {
                crate::choice::set_pid(ev.describe().1);
                if matches!(ev, Ev::StoreRecv { .. }) {
                    self.choose_order(t, &mut ev);
                }
            }
            self.turn(t, &ev);
            if STEERED && let Some(src) = &self.source {
                // (a form reads every process: it weighs as many events)
                work += 1 + u64::from(src.would_visit()) * form_weight;
                // the explorer's limits (its time, its memory, a signal) hold inside a run too,
                // asked every so often; and a run at a state an earlier run reached stops: either
                // way here, unjudged (the explorer reads `Source::halted`)
                let halt = work >= HALT_EVERY && {
                    work = 0;
                    src.halt()
                };
                if halt || (src.take_fresh() && self.form(src).is_some_and(|key| !src.visit(key, limit.0))) {
                    return Ok(Outcome {
                        end: t,
                        events: self.engine.processed(),
                        store_ops: self.store.served,
                        same_instant_peak: peak.max(same),
                        pruned: true,
                    });
                }
            }
        }
        // A release of the lock never queued (nobody waited for it) counts as it would have:
        // popped if due by the limit, else pending. (Only when the loop ran out of events:
        // when the last loop finished first, it was pending, as now, and `end` is `last`.)
        let mut pending = self.engine.pending();
        if let Some((at, _)) = self.lock_free
            && self.active > 0
        {
            if at <= limit {
                last = last.max(at);
            } else {
                pending += 1;
            }
        }
        let end = if pending > 0 && self.active > 0 {
            limit.max(last)
        } else {
            last
        };
        if STEERED && let Some(src) = &self.source {
            // (cut: the duration stopped a run with work left, as `end` says; a run whose
            // processes were all done stops whatever is pending, at any instant alike)
            src.ended(end.0, pending > 0 && self.active > 0);
        }
        self.out.event(&Event::End { t: end.0 });
        Ok(Outcome {
            end,
            events: self.engine.processed(),
            store_ops: self.store.served,
            same_instant_peak: peak.max(same),
            pruned: false,
        })
    }

    /// An explorer's form of the state now ([`crate::form`]): what the sink keeps
    /// ([`Sink::form`]: what every checker's verdict depends on), the kills the explorer may
    /// still fire (more is worse: a state with a kill left has every continuation of one
    /// without), and the world ([`Sim::world_form`]). `None` when the sink cannot say.
    #[cold]
    #[inline(never)]
    fn form(&self, src: &crate::choice::Source) -> Option<crate::form::Key> {
        let mut f = crate::form::Form::new(self.engine.now().0);
        if !self.out.form(&mut f) {
            return None;
        }
        f.more_is_worse(i64::from(src.kills_left()));
        if !crate::form::plant::planted(crate::form::plant::Plant::WorldLeftOut) {
            self.world_form(&mut f);
        }
        Some(f.key())
    }

    /// The world's part of an explorer's form: each process (its threads, clocks, streams,
    /// and its backend side; a dead one by what a restart reads), the store and its queue, the
    /// backend's store side, the destination, the critical sections each process is in, and
    /// every pending event with how far ahead it is due. Two worlds with the same form go on
    /// alike. Instants are relative to now where every part says how (a backend's sides by
    /// their forms, its operations and replies holding none: `StoreSide::TIMELESS_MESSAGES`);
    /// open-loop arrivals and broker tasks keep theirs as they are, and make it absolute.
    fn world_form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        // (every field named: one added later is fingerprinted, or said here why not, or the
        // build fails)
        let Sim {
            sc: _,      // the scenario: the same for every run of an exploration
            out: _,     // the sink: its part is its own (`Sink::form`)
            backend: _, // the backend's configuration: the same for every run
            sharing: _, // likewise
            engine,
            procs,
            store,
            store_side,
            dest,
            fault_rng,
            sections,
            active,
            arrivals,
            timers: _, // empty between turns (filled and drained within one)
            hop: _,    // `None` between turns
            lock_free,
            tasks,
            source: _, // the explorer's own: its state is the choices, not the world's
            to_store,
        } = self;
        let now = engine.now();
        let mut pending = 0u64;
        // (a sum: the same events pending in another order of scheduling are the same)
        engine.for_each_pending(|at, e| {
            let due = if crate::form::plant::planted(crate::form::plant::Plant::PendingDue) {
                0
            } else {
                at.0 - now.0
            };
            pending = pending.wrapping_add(rng::mix64(fingerprint(&(due, e))));
        });
        f.word(pending);
        f.word(fingerprint(&lock_free.map(|(at, _)| at.0 - now.0)));
        for p in procs {
            p.form(f, now);
        }
        store.form(f, now);
        store_side.form(f, store.clock.read(now));
        dest.form(f, now);
        f.word(fingerprint(&(active, fault_rng, sections, to_store)));
        f.word(fingerprint(&(arrivals, tasks)));
        if !<B::Store as StoreSide>::TIMELESS_MESSAGES || self.sc.processes.arrival_rate.is_some() || tasks.is_some() {
            f.absolute();
        }
    }

    /// One turn of the run loop: handle the event popped at `t`.
    #[inline(always)]
    fn turn(&mut self, t: Instant, ev: &Ev<B::Op, B::Reply>) {
        self.handle(ev);
        // A fetch that reaches the destination at the instant it starts (no latency: the
        // default) has its place in the firing order, taken when it started. When nothing
        // pending comes before that place, which is nearly always, it is handled here,
        // exactly as if it had been queued and popped; otherwise queued in its place.
        if let Some((seq, pid, th, inc, platform)) = self.hop.take() {
            if self.engine.next_is(seq) {
                self.dest_recv(pid, th, inc, platform);
            } else {
                self.engine.at_reserved(t, seq, Ev::DestRecv { pid, th, inc, platform });
            }
        }
    }

    /// An explorer's run: `ev`, an operation reaching the store at `t`, and those reaching it
    /// at the same instant right after it (up to the source's width) are candidates; the
    /// source chooses which is served first, and the others go back to their places in the
    /// firing order (each of them is a choice again when popped). Other events due at `t`
    /// touch one process's own state only, and are not reordered (they commute).
    #[cold]
    #[inline(never)]
    fn choose_order(&mut self, t: Instant, ev: &mut Ev<B::Op, B::Reply>) {
        // (nearly always alone at its instant: then there is nothing to order, nor to allocate)
        if !matches!(self.engine.peek_now(), Some(Ev::StoreRecv { .. })) {
            return;
        }
        let Some(src) = self.source.clone() else {
            return;
        };
        let width = src.order_width();
        if width < 2 {
            return;
        }
        let mut cands = vec![(self.engine.current_seq(), ev.clone())];
        while cands.len() < width && matches!(self.engine.peek_now(), Some(Ev::StoreRecv { .. })) {
            let mut next = Ev::Tick;
            if self.engine.pop_into(t, &mut next).is_none() {
                break;
            }
            cands.push((self.engine.current_seq(), next));
        }
        if cands.len() < 2 {
            return;
        }
        let pids: Vec<u32> = cands.iter().map(|(_, e)| e.describe().1.unwrap_or(0)).collect();
        let i = src.order(&pids).unwrap_or(0) as usize;
        let (seq, chosen) = cands.remove(i.min(cands.len() - 1));
        for (s, e) in cands {
            self.engine.at_reserved(t, s, e);
        }
        self.engine.set_current(seq);
        *ev = chosen;
    }

    /// The run is stuck at `t` after `same` events there, `ev` popped and not yet handled:
    /// handle it and up to [`LOOP_SAMPLE`] more while time stands still, tallying their kinds
    /// and processes, and say what loops. (Cold: reached once, by a run that is over.)
    #[cold]
    #[inline(never)]
    fn no_progress(&mut self, t: Instant, mut same: u64, limit: Instant, ev: &mut Ev<B::Op, B::Reply>) -> NoProgress {
        // kind -> (events, processes), in first-seen order: a few kinds, no hash map
        let mut tally: Vec<(&'static str, u64, std::collections::BTreeSet<u32>)> = Vec::new();
        for _ in 0..LOOP_SAMPLE {
            let (kind, pid) = ev.describe();
            let i = tally.iter().position(|k| k.0 == kind).unwrap_or_else(|| {
                tally.push((kind, 0, std::collections::BTreeSet::new()));
                tally.len() - 1
            });
            tally[i].1 += 1;
            tally[i].2.extend(pid);
            self.turn(t, ev);
            match self.engine.pop_into(limit, ev) {
                Some(next) if next == t => same += 1,
                _ => break, // (it moved on after all, or ran out: still far past the bound)
            }
        }
        tally.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let looping = tally
            .iter()
            .map(|(kind, n, pids)| {
                let mut s = format!("{kind} x {n}");
                if !pids.is_empty() {
                    let shown: Vec<String> = pids.iter().take(8).map(u32::to_string).collect();
                    let more = pids.len().saturating_sub(8);
                    let word = if pids.len() == 1 { "process" } else { "processes" };
                    s.push_str(&format!(" ({word} {}", shown.join(", ")));
                    if more > 0 {
                        s.push_str(&format!(" and {more} more"));
                    }
                    s.push(')');
                }
                s
            })
            .collect::<Vec<_>>()
            .join(", ");
        NoProgress {
            at: t,
            events: same,
            looping,
        }
    }

    fn t(&self) -> u64 {
        self.engine.now().0
    }

    fn handle(&mut self, ev: &Ev<B::Op, B::Reply>) {
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
    fn dest_recv(&mut self, pid: u32, th: u16, inc: u32, platform: u32) {
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
