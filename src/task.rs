//! Download tasks through a broker (design record "platform lock and backfill"): the
//! `download_source(source)` task, its DownloadEvent, the subprocess timeout, the soft and hard
//! time limits, the recovery sweep, the re-run tick, and time-boxed backfill chunks.
//!
//! A scenario with a `[jobs]` table ([`JobsCfg`]) runs its worker processes as Celery workers
//! of one queue instead of loops of their own:
//!
//! 1. **The tick** (every `tick`, from t = 0) creates, for each source without an open event,
//!    a new event (`job_event` `pending`) and enqueues its task. A source whose backfill has
//!    not finished is enqueued again every tick: the re-run tick.
//! 2. **A free process** takes the oldest ready task and executes it: the backend's process
//!    side (the walk lock) gets the task's memory ([`TaskMemo`]: its first attempt's time, its
//!    walk length) and asks for permission. Each execution has fresh soft and hard limits.
//! 3. **On contention** the execution re-enqueues the task with a countdown (`requeued`; the
//!    same event stays pending, no new event). The process is free at once and takes the next
//!    ready task; the re-enqueued one is held (prefetched) by that process and becomes ready
//!    at its countdown, for whichever process is free.
//! 4. **The walk** (the gallery-dl subprocess) starts when the lock is taken (or the valve
//!    runs it uncapped): the event turns `running` and the subprocess budget starts (`870 s`
//!    in tick mode, `1170 s` for a backfill run, or one `chunk`). The walk ends by itself
//!    (rc = 0: the catalog's bottom) or at the budget (TimeoutExpired), releasing the lock.
//! 5. **Phase 3** persists the outcome (`persist`), then finalises the event: `complete`,
//!    `timeout` (an error), or for a chunk that advanced, `partial` (status ok); a backfill
//!    run decrements `backfill_runs_remaining`, a chunk counts against the cap.
//! 6. **The soft limit** raises in the task: with `catch_soft_limit` it is caught and the
//!    event finalised with reason `soft_limit` (and the backfill decremented); without, the
//!    event is left `running`. **The hard limit** SIGKILLs the process: the event is left
//!    `running`.
//! 7. **The recovery sweep** (every `sweep_every`) marks every event `running` for longer
//!    than `stranded_after` as `stranded`, which lets the tick re-run its source.
//! 8. **A SIGKILL** (a kill fault) of a process: with `redeliver` (acks_late) the task it was
//!    executing and those it held for their countdown return to the queue after
//!    `redeliver_after`, each with its first attempt's time (`redelivered`); without, they are
//!    lost and their events stay open.
//!
//! Everything here is deterministic: sources, events and tasks are numbered in creation
//! order, kept in vectors, and visited in that order.

use crate::time::{Instant, Nanos};
use crate::trace::{BackfillState, Event, JobState, Sink};

/// What a broker task carries from one execution to the next (a re-enqueue with a countdown,
/// or the broker delivering it again after its process was killed): the task's own memory,
/// which belongs to the task, not to the process that happens to run it. Only scenarios with a
/// `[jobs]` table run tasks through a broker (this module); elsewhere the process side
/// keeps its own state.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct TaskMemo {
    /// When the task first asked for permission (its first attempt): the safety valve counts
    /// from here.
    pub first_try: Option<Instant>,
    /// Fetches its walk makes; `None`: the backend's own default.
    pub walk: Option<u32>,
    /// The task's identity (its download event's number), for draws that must follow the task
    /// across executions and workers (`redis_lock`'s `valve_jitter`); `None` outside a broker.
    pub task: Option<u32>,
}

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

fn secs(s: u64) -> Nanos {
    Nanos(s * 1_000_000_000)
}

/// `[jobs]`: download tasks through a broker. Absent: every process loops over jobs of its
/// own (today's behaviour). Every default is stated on its field, with whose it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsCfg {
    /// Sources, each downloaded by its own `download_source(source)` task. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<u32>,
    /// The re-run tick: how often every source without an open event gets a new event and a
    /// task. Default 15m (pacesim's choice; the record gives no period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<Nanos>,
    /// The subprocess timeout of a tick-mode download. Default 870s (the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_budget: Option<Nanos>,
    /// Fetches a tick-mode walk makes (the new items since the last run). Default 10
    /// (pacesim's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_walk: Option<u32>,
    /// Pages in each source's catalog: a backfill walks them, resuming at its cursor (#689).
    /// Default 0: no backfill, every download is in tick mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<u32>,
    /// The subprocess timeout of a backfill run without chunks. Default 1170s (the record's
    /// `BACKFILL_TIMEOUT_SECONDS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_budget: Option<Nanos>,
    /// `backfill_runs_remaining` at the start (runs without chunks): phase 3 decrements it;
    /// at 0 the source is in tick mode. Default 3 (pacesim's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_runs: Option<u32>,
    /// Phase 3, persisting a download's outcome after its walk. Default 5s (pacesim's choice;
    /// the record only asks for "phase-3 persist headroom").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist: Option<Nanos>,
    /// The task catches its soft time limit and finalises the event with a reason (the
    /// record's fix, layer 2). Default false (the code before the fix).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catch_soft_limit: bool,
    /// How often the recovery sweep runs. Default 5m (pacesim's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_every: Option<Nanos>,
    /// The sweep marks an event stranded once it has been running this long. Default 30m (the
    /// record's "30-min DownloadEvent recovery sweep").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stranded_after: Option<Nanos>,
    /// `work_heal`: this many strands of one source in a row is "re-strands forever". Default 3
    /// (pacesim's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strand_limit: Option<u32>,
    /// A killed process's tasks are delivered again (acks_late; Celery's visibility timeout or
    /// `reject_on_worker_lost`). Default true (Celery with acks_late); false: they are lost (how
    /// pacesim modelled a kill before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeliver: Option<bool>,
    /// How long after the kill the broker delivers them again. Default 0s (pacesim's choice:
    /// `reject_on_worker_lost`; a Redis broker's visibility timeout is 1h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeliver_after: Option<Nanos>,
    /// Time-boxed backfill chunks (#693). Absent: backfill runs with a counter (#689).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunksCfg>,
}

/// `[jobs.chunks]`: the run-until-done backfill in time-boxed chunks (#693).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunksCfg {
    /// A chunk's subprocess budget. Default 600s (the record's `BACKFILL_CHUNK_SECONDS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Nanos>,
    /// The safety cap: after this many chunks a backfill is paused as stalled. Default 200 (the
    /// record's `BACKFILL_MAX_CHUNKS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chunks: Option<u32>,
    /// Sources whose walk is pathological: their cursor cannot pass page `stuck_at`. Default
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck_sources: Vec<u32>,
    /// Where a stuck source's cursor stops. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck_at: Option<u32>,
}

impl JobsCfg {
    /// Range checks. `Err((field, message))`, the field dotted from the scenario's root.
    pub fn validate(&self, soft_limit: Option<Nanos>, hard_limit: Option<Nanos>) -> Result<(), (String, String)> {
        let err = |f: &str, m: &str| Err((format!("jobs.{f}"), m.to_string()));
        if self.sources == Some(0) {
            return err("sources", "must be at least 1");
        }
        if self.sources.is_some_and(|s| s > 10_000) {
            return err("sources", "must be at most 10000");
        }
        for (f, d) in [
            ("tick", self.tick),
            ("tick_budget", self.tick_budget),
            ("backfill_budget", self.backfill_budget),
            ("sweep_every", self.sweep_every),
            ("stranded_after", self.stranded_after),
        ] {
            if d.is_some_and(|d| d.0 == 0) {
                return err(f, "must be above 0");
            }
        }
        if self.tick_walk == Some(0) {
            return err("tick_walk", "must be at least 1");
        }
        if self.strand_limit == Some(0) {
            return err("strand_limit", "must be at least 1");
        }
        if let Some(c) = &self.chunks {
            if c.chunk.is_some_and(|d| d.0 == 0) {
                return err("chunks.chunk", "must be above 0");
            }
            if c.max_chunks == Some(0) {
                return err("chunks.max_chunks", "must be at least 1");
            }
            let n = self.sources.unwrap_or(1);
            if let Some(s) = c.stuck_sources.iter().find(|&&s| s >= n) {
                return Err((
                    "jobs.chunks.stuck_sources".into(),
                    format!("source {s} does not exist (sources are 0 to {})", n - 1),
                ));
            }
        }
        if let (Some(s), Some(h)) = (soft_limit, hard_limit)
            && s > h
        {
            return Err((
                "processes.soft_limit".into(),
                "must not be above processes.hard_limit".into(),
            ));
        }
        Ok(())
    }
}

/// The options in force (every default applied).
#[derive(Hash, Clone, Debug, PartialEq)]
pub struct Jobs {
    /// Sources.
    pub sources: u32,
    /// The re-run tick.
    pub tick: Nanos,
    /// Tick-mode subprocess budget.
    pub tick_budget: Nanos,
    /// Tick-mode walk length.
    pub tick_walk: u32,
    /// Catalog pages (0: no backfill).
    pub catalog: u32,
    /// Backfill-run subprocess budget (no chunks).
    pub backfill_budget: Nanos,
    /// `backfill_runs_remaining` at the start.
    pub backfill_runs: u32,
    /// Phase 3.
    pub persist: Nanos,
    /// The soft limit is caught.
    pub catch_soft_limit: bool,
    /// Sweep period.
    pub sweep_every: Nanos,
    /// Sweep threshold.
    pub stranded_after: Nanos,
    /// `work_heal`'s strand limit.
    pub strand_limit: u32,
    /// Redelivery after a kill: `Some(delay)`, or `None`: lost.
    pub redeliver: Option<Nanos>,
    /// Chunks: (budget, cap, stuck sources, stuck at).
    pub chunks: Option<(Nanos, u32, Vec<u32>, u32)>,
}

impl Jobs {
    /// `cfg` with its defaults applied.
    pub fn new(cfg: &JobsCfg) -> Jobs {
        Jobs {
            sources: cfg.sources.unwrap_or(1),
            tick: cfg.tick.unwrap_or(secs(900)),
            tick_budget: cfg.tick_budget.unwrap_or(secs(870)),
            tick_walk: cfg.tick_walk.unwrap_or(10),
            catalog: cfg.catalog.unwrap_or(0),
            backfill_budget: cfg.backfill_budget.unwrap_or(secs(1170)),
            backfill_runs: cfg.backfill_runs.unwrap_or(3),
            persist: cfg.persist.unwrap_or(secs(5)),
            catch_soft_limit: cfg.catch_soft_limit,
            sweep_every: cfg.sweep_every.unwrap_or(secs(300)),
            stranded_after: cfg.stranded_after.unwrap_or(secs(1800)),
            strand_limit: cfg.strand_limit.unwrap_or(3),
            redeliver: cfg
                .redeliver
                .unwrap_or(true)
                .then(|| cfg.redeliver_after.unwrap_or(Nanos::ZERO)),
            chunks: cfg.chunks.as_ref().map(|c| {
                (
                    c.chunk.unwrap_or(secs(600)),
                    c.max_chunks.unwrap_or(200),
                    c.stuck_sources.clone(),
                    c.stuck_at.unwrap_or(0),
                )
            }),
        }
    }

    /// What the trace header states of them (the keys `work_heal` reads, and the rest for
    /// people).
    pub fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "stranded_after_ns": self.stranded_after.0,
            "sweep_every_ns": self.sweep_every.0,
            "strand_limit": self.strand_limit,
            "jobs": {
                "sources": self.sources,
                "tick_ns": self.tick.0,
                "tick_budget_ns": self.tick_budget.0,
                "tick_walk": self.tick_walk,
                "catalog": self.catalog,
                "backfill_budget_ns": self.backfill_budget.0,
                "backfill_runs": self.backfill_runs,
                "persist_ns": self.persist.0,
                "catch_soft_limit": self.catch_soft_limit,
                "redeliver_after_ns": self.redeliver.map(|d| d.0),
                "chunk_ns": self.chunks.as_ref().map(|c| c.0.0),
                "max_chunks": self.chunks.as_ref().map(|c| c.1),
            },
        })
    }
}

/// Where an event is (the model's side; the trace's `job_event` says the same).
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
enum Phase {
    Pending,
    Running,
    Closed,
}

#[derive(Hash, Clone, Debug)]
struct DownloadEvent {
    source: u32,
    phase: Phase,
    // when it last turned running
    since: Instant,
}

#[derive(Hash, Clone, Debug)]
struct Source {
    // invariant: Some(event) while its event is open (pending or running).
    open: Option<u32>,
    // pages walked (#689's cursor)
    cursor: u32,
    // backfill_runs_remaining (without chunks) / the cap countdown (with chunks)
    runs_left: u32,
    chunks: u32,
    backfill: Option<BackfillState>,
}

#[derive(Hash, Clone, Debug)]
struct Task {
    event: u32,
    first_try: Option<Instant>,
}

/// How an execution's walk ended, as the task sees it.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// The subprocess budget ran out (TimeoutExpired).
    Budget,
    /// The soft limit raised in the task.
    SoftLimit,
}

#[derive(Hash, Clone, Debug)]
struct Exec {
    task: usize,
    job: u64,
    walking: bool,
    backfill: bool,
    end: Option<End>,
    progress: u32,
}

/// What the task does once its walk is over.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum After {
    /// Persist, then finalise the event in this state.
    Persist(JobState),
    /// Nothing: the event is left as it is (an uncaught soft limit leaves it running).
    Abandon,
}

/// The broker, the sources and their events.
#[derive(Hash, Clone, Debug)]
pub struct Tasks {
    /// The options in force.
    pub cfg: Jobs,
    sources: Vec<Source>,
    events: Vec<DownloadEvent>,
    tasks: Vec<Task>,
    // invariant: task ids ready to run, oldest first.
    ready: VecDeque<usize>,
    // invariant: execs[pid] is the task execution pid is in, if any.
    execs: Vec<Option<Exec>>,
    // invariant: held[pid] lists the re-enqueued tasks pid holds until their countdown.
    held: Vec<Vec<usize>>,
}

impl Tasks {
    /// Sources with their backfill armed (when there is a catalog), no events yet.
    pub fn new(cfg: Jobs, processes: u32) -> Tasks {
        let backfill = (cfg.catalog > 0).then_some(BackfillState::Running);
        let runs_left = if let Some((_, cap, ..)) = cfg.chunks {
            cap
        } else {
            cfg.backfill_runs
        };
        let sources = (0..cfg.sources)
            .map(|_| Source {
                open: None,
                cursor: 0,
                runs_left,
                chunks: 0,
                backfill,
            })
            .collect();
        Tasks {
            cfg,
            sources,
            events: Vec::new(),
            tasks: Vec::new(),
            ready: VecDeque::new(),
            execs: vec![None; processes as usize],
            held: vec![Vec::new(); processes as usize],
        }
    }

    fn job_event(&self, t: Instant, event: u32, pid: Option<u32>, state: JobState, out: &mut dyn Sink) {
        out.event(&Event::JobEvent {
            t: t.0,
            source: self.events[event as usize].source,
            event,
            pid,
            state,
        });
    }

    /// Does `source` run a backfill now (rather than a tick-mode download)?
    fn backfilling(&self, source: u32) -> bool {
        let s = &self.sources[source as usize];
        match self.cfg.chunks {
            Some(_) => s.backfill == Some(BackfillState::Running),
            None => s.backfill == Some(BackfillState::Running) && s.runs_left > 0,
        }
    }

    /// 1. The tick: a new event and task for every source without an open event.
    pub fn tick(&mut self, t: Instant, out: &mut dyn Sink) {
        for source in 0..self.cfg.sources {
            if self.sources[source as usize].open.is_some() {
                continue;
            }
            let event = self.events.len() as u32;
            self.events.push(DownloadEvent {
                source,
                phase: Phase::Pending,
                since: t,
            });
            self.sources[source as usize].open = Some(event);
            self.tasks.push(Task { event, first_try: None });
            self.ready.push_back(self.tasks.len() - 1);
            self.job_event(t, event, None, JobState::Pending, out);
        }
    }

    /// The oldest ready task, taken off the queue.
    pub fn take_ready(&mut self) -> Option<usize> {
        self.ready.pop_front()
    }

    /// Is a task ready?
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// 2. `pid` starts executing `task` as its job number `job`: the memory its execution
    ///    gets. The task's first attempt is now, unless it had one.
    pub fn begin(&mut self, pid: u32, task: usize, job: u64, t: Instant) -> TaskMemo {
        let tk = &mut self.tasks[task];
        let first_try = *tk.first_try.get_or_insert(t);
        let event = tk.event;
        let source = self.events[event as usize].source;
        let backfill = self.backfilling(source);
        let s = &self.sources[source as usize];
        let walk = if backfill {
            match &self.cfg.chunks {
                Some((.., stuck, at)) if stuck.contains(&source) && s.cursor >= *at => u32::MAX,
                _ => self.cfg.catalog.saturating_sub(s.cursor).max(1),
            }
        } else {
            self.cfg.tick_walk
        };
        self.execs[pid as usize] = Some(Exec {
            task,
            job,
            walking: false,
            backfill,
            end: None,
            progress: 0,
        });
        TaskMemo {
            first_try: Some(first_try),
            walk: Some(walk),
            task: Some(event),
        }
    }

    /// Is `pid`'s execution walking (its subprocess running, no end decided yet)?
    pub fn walking(&self, pid: u32, job: u64) -> bool {
        self.execs[pid as usize]
            .as_ref()
            .is_some_and(|e| e.job == job && e.walking && e.end.is_none())
    }

    /// 4. `pid`'s walk starts (its first paced fetch is scheduled): the event turns running.
    ///    Returns the subprocess budget to arm, once per execution.
    pub fn walk_starts(&mut self, pid: u32, t: Instant, out: &mut dyn Sink) -> Option<(u64, Nanos)> {
        let e = self.execs[pid as usize].as_mut()?;
        if e.walking {
            return None;
        }
        e.walking = true;
        let (job, backfill, task) = (e.job, e.backfill, e.task);
        let event = self.tasks[task].event;
        let ev = &mut self.events[event as usize];
        ev.phase = Phase::Running;
        ev.since = t;
        self.job_event(t, event, Some(pid), JobState::Running, out);
        let budget = match (&self.cfg.chunks, backfill) {
            (Some((chunk, ..)), true) => *chunk,
            (None, true) => self.cfg.backfill_budget,
            (_, false) => self.cfg.tick_budget,
        };
        Some((job, budget))
    }

    /// A fetch of `pid`'s walk ended: a backfill's cursor moves (unless the walk is stuck).
    pub fn fetched(&mut self, pid: u32) {
        let Some(e) = self.execs[pid as usize].as_mut() else {
            return;
        };
        if !e.backfill || !e.walking {
            return;
        }
        let source = self.events[self.tasks[e.task].event as usize].source;
        let s = &mut self.sources[source as usize];
        let stop = match &self.cfg.chunks {
            Some((.., stuck, at)) if stuck.contains(&source) => (*at).min(self.cfg.catalog),
            _ => self.cfg.catalog,
        };
        if s.cursor < stop {
            s.cursor += 1;
            e.progress += 1;
        }
    }

    /// The walk of `pid`'s execution must end now, for `why` (the driver then stops the walk).
    pub fn ending(&mut self, pid: u32, why: End) {
        if let Some(e) = self.execs[pid as usize].as_mut()
            && e.end.is_none()
        {
            e.end = Some(why);
        }
    }

    /// 3. `pid`'s execution found the lock taken and re-enqueued its task: `pid` holds it
    ///    until its countdown. The event stays pending. Returns the task.
    pub fn requeued(&mut self, pid: u32, t: Instant, out: &mut dyn Sink) -> Option<usize> {
        let e = self.execs[pid as usize].take()?;
        self.held[pid as usize].push(e.task);
        let event = self.tasks[e.task].event;
        self.job_event(t, event, Some(pid), JobState::Requeued, out);
        Some(e.task)
    }

    /// The countdown of `task`, held by `pid`, is over: it is ready (false if `pid` no
    /// longer holds it: it was killed meanwhile).
    pub fn countdown_over(&mut self, pid: u32, task: usize) -> bool {
        let h = &mut self.held[pid as usize];
        let Some(i) = h.iter().position(|&x| x == task) else {
            return false;
        };
        h.remove(i);
        self.ready.push_back(task);
        true
    }

    /// 5./6. `pid`'s walk is over (the process side released the lock): what the task does.
    pub fn walk_over(&mut self, pid: u32) -> After {
        let Some(e) = self.execs[pid as usize].as_ref() else {
            return After::Abandon;
        };
        let state = match e.end {
            None => JobState::Complete,
            Some(End::Budget) => {
                if self.cfg.chunks.is_some() && e.backfill && e.progress > 0 {
                    JobState::Partial
                } else {
                    JobState::Timeout
                }
            }
            Some(End::SoftLimit) => {
                if self.cfg.catch_soft_limit {
                    JobState::SoftLimit
                } else {
                    self.execs[pid as usize] = None;
                    return After::Abandon;
                }
            }
        };
        After::Persist(state)
    }

    /// The soft limit raised while `pid` persisted: caught, the handler finalises at once
    /// (`Some`); uncaught, persisting stops and the event is left running (`None`).
    pub fn soft_limit_in_phase3(&mut self, pid: u32) -> Option<JobState> {
        if self.cfg.catch_soft_limit {
            Some(JobState::SoftLimit)
        } else {
            self.execs[pid as usize] = None;
            None
        }
    }

    /// Phase 3 done: `pid`'s event is finalised as `state`; the source's counters move.
    pub fn finalise(&mut self, pid: u32, state: JobState, t: Instant, out: &mut dyn Sink) {
        let Some(e) = self.execs[pid as usize].take() else {
            return;
        };
        let event = self.tasks[e.task].event;
        let ev = &mut self.events[event as usize];
        let source = ev.source;
        let was_open = ev.phase != Phase::Closed;
        ev.phase = Phase::Closed;
        self.job_event(t, event, Some(pid), state, out);
        let s = &mut self.sources[source as usize];
        if was_open && s.open == Some(event) {
            s.open = None;
        }
        if !e.backfill {
            return;
        }
        let chunked = self.cfg.chunks.is_some();
        let reached_bottom = state == JobState::Complete;
        s.runs_left = s.runs_left.saturating_sub(1);
        if chunked {
            s.chunks += 1;
        }
        let next = if reached_bottom {
            Some(BackfillState::Complete)
        } else if chunked && (state == JobState::Timeout || s.runs_left == 0) {
            // the stall guard (no cursor progress), or the safety cap
            Some(BackfillState::Stalled)
        } else if !chunked && s.runs_left == 0 {
            // the counter ran out: the source is back in tick mode
            None
        } else {
            Some(BackfillState::Running)
        };
        let changed = next != s.backfill;
        s.backfill = next;
        if let Some(state) = next
            && (changed || chunked)
        {
            out.event(&Event::Backfill {
                t: t.0,
                source,
                state,
                chunks: s.chunks,
            });
        }
    }

    /// 7. The sweep: every event running since `stranded_after` ago or longer is stranded.
    pub fn sweep(&mut self, t: Instant, out: &mut dyn Sink) {
        for event in 0..self.events.len() {
            let ev = &self.events[event];
            if ev.phase != Phase::Running || t.since(ev.since) < self.cfg.stranded_after {
                continue;
            }
            let source = ev.source;
            self.events[event].phase = Phase::Closed;
            let s = &mut self.sources[source as usize];
            if s.open == Some(event as u32) {
                s.open = None;
            }
            self.job_event(t, event as u32, None, JobState::Stranded, out);
        }
    }

    /// 8. `pid` was SIGKILLed (`hard`: by its hard time limit, which fails the task rather
    ///    than losing it): the tasks to deliver again (its execution's unless `hard`, and
    ///    those it held), and after how long; empty when they are lost.
    pub fn killed(&mut self, pid: u32, hard: bool) -> (Vec<usize>, Nanos) {
        let exec = self.execs[pid as usize].take();
        let mut tasks: Vec<usize> = Vec::new();
        if let Some(e) = exec
            && !hard
        {
            tasks.push(e.task);
        }
        tasks.append(&mut self.held[pid as usize]);
        match self.cfg.redeliver {
            Some(after) => (tasks, after),
            None => (Vec::new(), Nanos::ZERO),
        }
    }

    /// The broker delivers `task` again: ready, with its first attempt's time.
    pub fn redeliver(&mut self, task: usize, t: Instant, out: &mut dyn Sink) {
        let event = self.tasks[task].event;
        self.ready.push_back(task);
        self.job_event(t, event, None, JobState::Redelivered, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Collect;

    fn jobs(extra: impl FnOnce(&mut JobsCfg)) -> Tasks {
        let mut c = JobsCfg {
            catalog: Some(100),
            ..JobsCfg::default()
        };
        extra(&mut c);
        Tasks::new(Jobs::new(&c), 2)
    }

    fn states(out: &Collect) -> Vec<JobState> {
        out.events
            .iter()
            .filter_map(|e| match e {
                Event::JobEvent { state, .. } => Some(*state),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_contended_task_keeps_its_event_and_first_attempt() {
        let mut t = jobs(|_| {});
        let mut out = Collect::default();
        t.tick(Instant(0), &mut out);
        let task = t.take_ready().unwrap();
        let memo = t.begin(0, task, 1, Instant(5));
        assert_eq!(memo.first_try, Some(Instant(5)));
        assert_eq!(t.requeued(0, Instant(6), &mut out), Some(task));
        // the tick makes no second event while this one is open
        t.tick(Instant(900), &mut out);
        assert!(!t.has_ready());
        assert!(t.countdown_over(0, task));
        let task2 = t.take_ready().unwrap();
        assert_eq!(task2, task);
        assert_eq!(t.begin(1, task, 1, Instant(99)).first_try, Some(Instant(5)));
        assert_eq!(states(&out), [JobState::Pending, JobState::Requeued]);
    }

    #[test]
    fn a_killed_holder_redelivers_or_loses_its_tasks() {
        for (redeliver, expect) in [(None, 1), (Some(false), 0)] {
            let mut t = jobs(|c| c.redeliver = redeliver);
            let mut out = Collect::default();
            t.tick(Instant(0), &mut out);
            let task = t.take_ready().unwrap();
            t.begin(0, task, 1, Instant(0));
            t.requeued(0, Instant(1), &mut out);
            let (tasks, _) = t.killed(0, false);
            assert_eq!(tasks.len(), expect);
            assert!(!t.countdown_over(0, task), "a dead holder's countdown does not fire");
        }
    }

    #[test]
    fn old_limits_strand_and_the_sweep_recovers() {
        let mut t = jobs(|_| {});
        let mut out = Collect::default();
        t.tick(Instant(0), &mut out);
        let task = t.take_ready().unwrap();
        t.begin(0, task, 1, Instant(0));
        assert_eq!(t.walk_starts(0, Instant(0), &mut out), Some((1, secs(1170))));
        t.ending(0, End::SoftLimit);
        assert_eq!(t.walk_over(0), After::Abandon);
        t.sweep(Instant(secs(1799).0), &mut out);
        t.tick(Instant(secs(1799).0), &mut out);
        assert!(!t.has_ready(), "still running: no new event");
        t.sweep(Instant(secs(1800).0), &mut out);
        t.tick(Instant(secs(1800).0), &mut out);
        assert!(t.has_ready(), "stranded: the tick re-runs the source");
        assert_eq!(
            states(&out),
            [
                JobState::Pending,
                JobState::Running,
                JobState::Stranded,
                JobState::Pending
            ]
        );
    }

    #[test]
    fn chunks_advance_as_partial_then_stall_without_progress_or_at_the_cap() {
        let mut t = jobs(|c| {
            c.chunks = Some(ChunksCfg {
                max_chunks: Some(3),
                stuck_sources: vec![0],
                stuck_at: Some(2),
                ..ChunksCfg::default()
            })
        });
        let mut out = Collect::default();
        let run = |t: &mut Tasks, fetches: u32, out: &mut Collect| {
            t.tick(Instant(0), out);
            let task = t.take_ready().unwrap();
            t.begin(0, task, 1, Instant(0));
            t.walk_starts(0, Instant(0), out);
            for _ in 0..fetches {
                t.fetched(0);
            }
            t.ending(0, End::Budget);
            let After::Persist(s) = t.walk_over(0) else {
                panic!("a chunk persists")
            };
            t.finalise(0, s, Instant(1), out);
            s
        };
        assert_eq!(run(&mut t, 5, &mut out), JobState::Partial, "advanced 0 -> 2");
        assert_eq!(run(&mut t, 5, &mut out), JobState::Timeout, "stuck at 2");
        assert_eq!(t.sources[0].backfill, Some(BackfillState::Stalled));
        let mut t = jobs(|c| {
            c.chunks = Some(ChunksCfg {
                max_chunks: Some(2),
                ..ChunksCfg::default()
            })
        });
        run(&mut t, 5, &mut out);
        assert_eq!(t.sources[0].backfill, Some(BackfillState::Running));
        run(&mut t, 5, &mut out);
        assert_eq!(t.sources[0].backfill, Some(BackfillState::Stalled), "the cap");
    }
}
