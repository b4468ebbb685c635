//! The worker process model: the one worker loop, as a sans-IO state machine that both the
//! simulator (`src/sim/`) and the live worker ([`crate::live`]) drive.
//!
//! A worker loops: (think or wait for a job) -> acquire permission from its backend's process
//! side (possibly several store round trips) -> sleep until its slot -> fetch -> after-fetch
//! bookkeeping (report a response, release a lock) -> repeat. [`Worker`] holds the state and
//! writes the loop's own trace events (`op_sent`, `reply`, `store_error`, `fetch_start`,
//! `fetch_end`); it decides which protocol points an armed kill fires at. A driver does only the
//! I/O: the simulator schedules engine events, the live worker sleeps, talks to PostgreSQL or
//! Redis and calls the destination. Each method below is one step of the loop; both drivers
//! call them in the same order, so the two modes cannot drift apart.

use crate::backend::{ProcCx, ProcessSide, Step, StoreOp, StoreReply};
use crate::clock::Clock;
use crate::fault::KillPoint;
use crate::rng::Rng;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, OpKind, ReleaseReason, Sink, StoreErrorKind};

/// Where a worker is in its loop.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet.
    NotStarted,
    /// Between jobs: thinking (closed loop) or waiting for a job to arrive (open loop).
    Idle,
    /// Waiting for the backend to be asked again (a retry timer).
    Retrying,
    /// The job ended by re-enqueueing its task: the process is free, and a fresh execution
    /// (with fresh time limits) starts when the countdown ends.
    Requeued,
    /// An operation is in flight to or queued at the store.
    Awaiting,
    /// Permission granted; sleeping until the slot.
    SleepingToSlot,
    /// The fetch request left; waiting for the response.
    Fetching,
    /// A broker task's walk is over and its outcome is being persisted (the record's phase 3:
    /// finalising the download's event); its time limits still run ([`crate::task`]).
    Finalising,
    /// Waiting for one of its process's `max_concurrency` permits before its job begins.
    WaitingPermit,
    /// Finished every request it had.
    Finished,
    /// Killed, and not (yet) restarted.
    Dead,
}

/// A kill armed for a process: it fires when the process reaches `point`.
#[derive(Hash, Copy, Clone, Debug, PartialEq)]
pub struct Armed {
    /// The protocol point.
    pub point: KillPoint,
    /// Start a fresh process this long after the kill; `None`: stays dead.
    pub restart_after: Option<Nanos>,
}

/// What the driver does after a step of the process side.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Action<Op> {
    /// Send `op` to the store (already traced as `op_sent`); `seq` tells its reply from stale
    /// ones.
    Send {
        /// The operation.
        op: Op,
        /// Its sequence number.
        seq: u64,
    },
    /// Sleep until the slot, then fetch ([`Worker::fetch_start`]).
    FetchAt(Instant),
    /// Sleep, then ask again ([`Worker::retry`]).
    RetryAt(Instant),
    /// The job is over and its task re-enqueued: at this time start a fresh execution of it
    /// ([`Worker::start_job`], then [`Worker::retry`]), with fresh time limits.
    Requeue(Instant),
    /// The job is over ([`Worker::next_job`]).
    JobDone,
    /// An armed kill fired here: the process dies (the driver carries out the SIGKILL).
    Die(Armed),
}

/// What [`Worker::next_job`] decided.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum NextJob {
    /// Every request is done: the process finishes.
    Finished,
    /// Open loop, nothing queued: wait for a job to arrive.
    WaitForJob,
    /// Start the next job now ([`Worker::start_job`]).
    StartNow,
    /// Think this long, then start the next job.
    ThinkFor(Nanos),
}

/// The kill points a process passes once the store has applied `op` (the simulator checks
/// them at the instant the store serves it, a live worker when the reply is back: the same
/// point of the protocol, seen from each side): `mid_reservation` after any operation that
/// grants or refuses permission by a store-side decision (a reservation, a GCRA check, a
/// backend's own request), `in_transaction` when the caller's transaction stays open.
pub fn points_after_served(kind: OpKind, in_transaction: bool) -> [Option<KillPoint>; 2] {
    let reserves = matches!(kind, OpKind::Reserve | OpKind::Gcra | OpKind::Acquire);
    [
        reserves.then_some(KillPoint::MidReservation),
        in_transaction.then_some(KillPoint::InTransaction),
    ]
}

/// One worker loop: a one-thread process, or one thread of a process of several (see
/// [`Process`]): the loop's state and the backend's process side while it holds it.
#[derive(Clone, Debug)]
// Laid out by hand, on cache-line boundaries: the simulator visits a worker several times a
// fetch, each time after many other workers' visits have pushed it out of the core's first-level
// cache. The fields a visit reads come first (the loop's numbers and random stream, then its
// kills and queue, lent by its `Process` at every step, its timeout and clock) and the wall
// clock, rarely read, last: a visit touches three lines, not four.
#[repr(C, align(64))]
pub struct Worker<P: ProcessSide> {
    /// The process's random stream (think times, fetch durations, network draws it makes).
    pub rng: Rng,
    // invariant: increases on every store operation sent (and at a soft limit); a reply or
    // timeout carrying an older number is stale and ignored.
    /// Sequence number of the store operation in flight.
    pub op_seq: u64,
    /// When the operation in flight was sent.
    pub op_sent: Instant,
    /// Sequence number of the current job (for time limits).
    pub job_seq: u64,
    /// Process id (stable across restarts).
    pub pid: u32,
    /// 0 for the first process with this id; +1 on each restart. Events addressed to an older
    /// incarnation are dropped: a killed process hears nothing.
    pub incarnation: u32,
    // invariant: a process has at most one timer that counts, the one armed last (a driver
    // that can hold several tells them apart by this number).
    /// Number of the timer armed last ([`Worker::arm_timer`]).
    pub timer: u32,
    /// The thread of its process this loop runs on (0 in a one-thread process).
    pub thread: u16,
    /// Current phase.
    pub phase: Phase,
    /// The backend's process side (a restart builds a fresh one). Boxed: the loop's own
    /// fields stay together in few cache lines, whatever the size of a backend's state. Held
    /// for good by a one-thread process and by a thread with its own instance
    /// ([`crate::backend::Threads::PerThread`]); a process side its threads share is lent by
    /// the [`Process`] for one step at a time, and is `None` between steps.
    pub process: Option<Box<P>>,
    /// Kills armed for this process, in arming order (they outlive an incarnation).
    pub armed: Vec<Armed>,
    /// The simulator's handle on the client timeout of the operation in flight, to cancel it
    /// once the answer is in (a driver's bookkeeping, not the loop's state).
    pub op_timeout: Option<crate::engine::TimerId>,
    /// When the current job began.
    pub job_start: Instant,
    /// Fetches completed (across incarnations).
    pub fetches: u64,
    /// Open loop: jobs waiting to be served.
    pub queued: u64,
    /// The process's monotonic clock.
    pub mono: Clock,
    /// The simulator's copy of the operation in flight (number `op_seq`): a reply, refusal or
    /// timeout names only its number, and counts only while the loop awaits it (a driver's
    /// bookkeeping, not the loop's state).
    pub op_in_flight: Option<P::Op>,
    /// The host's wall clock.
    pub wall: Clock,
}

impl<P: ProcessSide> Worker<P> {
    /// An explorer's form of the loop at reference time `now` ([`Process::form`]).
    fn form(&self, f: &mut crate::form::Form, now: Instant) {
        use crate::choice::fingerprint;
        // (every field named: one added later is placed here, or the build fails)
        let Worker {
            rng,
            op_seq,
            op_sent: _, // read by live mode's driver only (the simulator never reads it back)
            job_seq,
            pid,
            incarnation,
            timer,
            thread,
            phase,
            process,
            armed,
            op_timeout,
            job_start: _, // written, never read back by the simulator
            fetches,
            queued,
            mono,
            op_in_flight,
            wall,
        } = self;
        // Under symmetry reduction (`Form::relabels`) the process is named by its label and its
        // random stream is left out: the reduction runs only where an explorer steers every
        // draw (a steered draw takes the explorer's quantile and leaves the stream as it was
        // made), and a stream differs from process to process only by the id it was made for.
        let stream = if f.relabels() { None } else { Some(rng) };
        f.word(fingerprint(&(
            stream,
            (op_seq, job_seq, timer),
            (f.pid(*pid), incarnation, thread, phase),
            armed,
            op_timeout,
            (fetches, queued),
            op_in_flight,
        )));
        mono.form(f, now);
        wall.form(f, now);
        match process {
            Some(p) => p.form(f, mono.read(now).max(0) as u64),
            None => f.word(1),
        }
    }

    /// A process that has not started.
    pub fn new(pid: u32, incarnation: u32, mono: Clock, wall: Clock, rng: Rng, process: P) -> Worker<P> {
        Worker {
            process: Some(Box::new(process)),
            ..Worker::sharing(pid, 0, incarnation, mono, wall, rng)
        }
    }

    /// The same loop on thread `thread` of its process.
    pub fn on_thread(mut self, thread: u16) -> Worker<P> {
        self.thread = thread;
        self
    }

    /// A loop on thread `thread` that holds no process side: its process lends it the shared
    /// one for each step ([`Process::lend`]).
    pub fn sharing(pid: u32, thread: u16, incarnation: u32, mono: Clock, wall: Clock, rng: Rng) -> Worker<P> {
        Worker {
            pid,
            thread,
            incarnation,
            phase: Phase::NotStarted,
            mono,
            wall,
            rng,
            fetches: 0,
            queued: 0,
            op_seq: 0,
            op_sent: Instant::ZERO,
            job_seq: 0,
            job_start: Instant::ZERO,
            timer: 0,
            op_timeout: None,
            op_in_flight: None,
            armed: Vec::new(),
            process: None,
        }
    }

    /// True while the process is alive and has not finished.
    pub fn is_active(&self) -> bool {
        !matches!(self.phase, Phase::Finished | Phase::Dead)
    }

    /// Call the process side with this process's view.
    // (a wrapper that only builds the view: always inlined, so each handler has the process
    // side's step inline too; left to the inliner, one handler's copy or the step behind it
    // stayed out of line, a different one from build to build: `retry`'s, `after_fetch`)
    #[inline(always)]
    fn call<R>(&mut self, t: Instant, out: &mut dyn Sink, f: impl FnOnce(&mut P, &mut ProcCx) -> R) -> R {
        let mut cx = ProcCx {
            t,
            pid: self.pid,
            thread: self.thread,
            mono: &self.mono,
            wall: &self.wall,
            out,
        };
        let p = self
            .process
            .as_mut()
            .expect("a loop holds its process side while it steps (Process::lend)");
        f(p, &mut cx)
    }

    /// A timer is armed: any timer armed before it no longer counts. Its number.
    pub fn arm_timer(&mut self) -> u32 {
        self.timer = self.timer.wrapping_add(1);
        self.timer
    }

    /// If a kill is armed at `point`, take it: the process dies there.
    /// In an explorer's run ([`crate::choice`]) a kill may also fire here by its choice.
    #[inline(always)]
    pub fn take_kill(&mut self, point: KillPoint) -> Option<Armed> {
        // nearly always: nothing armed and no explorer, two loads here. (With the explorer's
        // question inline too, the handlers that pass kill points grew past inlining: on
        // R1-small, 2.3M more instructions, 1.4% of the whole run.)
        if self.armed.is_empty() && !crate::choice::active() {
            return None;
        }
        self.take_kill_at(point)
    }

    /// [`Worker::take_kill`] when a kill is armed or an explorer may choose one.
    #[inline(never)]
    fn take_kill_at(&mut self, point: KillPoint) -> Option<Armed> {
        if let Some(i) = self.armed.iter().position(|k| k.point == point) {
            return Some(self.armed.remove(i));
        }
        if !crate::choice::active() {
            return None;
        }
        let restart = crate::choice::with(|s| s.kill(self.pid, point))?;
        Some(Armed {
            point,
            restart_after: restart.map(Nanos),
        })
    }

    // ---- the loop ------------------------------------------------------------------------

    /// 1. Between jobs: finish, wait for a job, or think, then start the next one. `first`:
    ///    no think time before the first job of an incarnation.
    pub fn next_job(
        &mut self,
        requests: Option<u64>,
        open_loop: bool,
        think: &crate::dist::Dist,
        first: bool,
    ) -> NextJob {
        if let Some(n) = requests
            && self.fetches >= n
        {
            self.phase = Phase::Finished;
            return NextJob::Finished;
        }
        self.phase = Phase::Idle;
        if open_loop {
            if self.queued > 0 {
                self.queued -= 1;
                return NextJob::StartNow;
            }
            return NextJob::WaitForJob;
        }
        let d = if first {
            Nanos::ZERO
        } else {
            think.sample(&mut self.rng)
        };
        if d.0 == 0 {
            NextJob::StartNow
        } else {
            NextJob::ThinkFor(d)
        }
    }

    /// 2. A job begins: its number, for the time limits the driver arms before it asks for
    ///    permission ([`Worker::retry`]).
    pub fn start_job(&mut self, t: Instant) -> u64 {
        self.job_seq += 1;
        self.job_start = t;
        self.job_seq
    }

    /// Ask the process side for permission again (a retry timer fired).
    pub fn retry(&mut self, t: Instant, out: &mut dyn Sink) -> Action<P::Op> {
        let step = self.call(t, out, |p, cx| p.acquire(cx));
        self.apply(t, step, out)
    }

    /// 3. Carry out what the process side decided.
    pub fn apply(&mut self, t: Instant, step: Step<P::Op>, out: &mut dyn Sink) -> Action<P::Op> {
        match step {
            Step::Send(op) => {
                self.op_seq += 1;
                self.op_sent = t;
                self.phase = Phase::Awaiting;
                out.op_sent(t.0, self.pid, self.thread, op.kind());
                Action::Send { op, seq: self.op_seq }
            }
            Step::FetchAt(wake) => {
                self.phase = Phase::SleepingToSlot;
                match self.take_kill(KillPoint::SleepingToSlot) {
                    Some(k) => Action::Die(k),
                    None => Action::FetchAt(wake),
                }
            }
            Step::RetryAt(at) => {
                self.phase = Phase::Retrying;
                Action::RetryAt(at.max(t))
            }
            Step::Requeue(at) => {
                self.phase = Phase::Requeued;
                Action::Requeue(at.max(t))
            }
            Step::Done => Action::JobDone,
        }
    }

    /// Is a reply or an error for operation `seq` still awaited?
    pub fn awaiting(&self, seq: u64) -> bool {
        self.op_seq == seq && self.phase == Phase::Awaiting
    }

    /// 4a. The store applied `op` (see [`points_after_served`]): an armed kill may fire.
    pub fn served(&mut self, op: &P::Op, in_transaction: bool) -> Option<Armed> {
        points_after_served(op.kind(), in_transaction)
            .into_iter()
            .flatten()
            .find_map(|p| self.take_kill(p))
    }

    /// 4b. The reply to `op` arrived: the process side decides; the `reply` event says how long
    ///     it will sleep. A reply that hands it a lock passes the `holding_lock` point.
    pub fn reply(&mut self, t: Instant, op: &P::Op, reply: P::Reply, out: &mut dyn Sink) -> Action<P::Op> {
        let took_lock = reply.took_lock();
        let step = self.call(t, out, |p, cx| p.on_reply(cx, op, reply));
        let wait = match step {
            Step::FetchAt(w) => w.since(t).0,
            _ => 0,
        };
        out.reply(t.0, self.pid, self.thread, op.kind(), wait);
        if took_lock && let Some(k) = self.take_kill(KillPoint::HoldingLock) {
            return Action::Die(k);
        }
        self.apply(t, step, out)
    }

    /// 4c. `op` failed (`error` is `refused` or `timeout`): traced first; the driver then lets
    ///     the store side react ([`crate::backend::StoreSide::on_error`]) and calls
    ///     [`Worker::store_error`].
    pub fn store_error_event(&mut self, t: Instant, error: StoreErrorKind, out: &mut dyn Sink) {
        out.event(&Event::StoreError {
            t: t.0,
            pid: self.pid,
            thread: self.thread,
            error,
        });
    }

    /// 4d. The process side decides what a failed `op` means.
    pub fn store_error(&mut self, t: Instant, op: &P::Op, out: &mut dyn Sink) -> Action<P::Op> {
        let step = self.call(t, out, |p, cx| p.on_store_error(cx, op));
        self.apply(t, step, out)
    }

    /// 5. The fetch starts (the driver sends it; then [`Worker::fetch_sent`]).
    pub fn fetch_start(&mut self, t: Instant, out: &mut dyn Sink) {
        self.phase = Phase::Fetching;
        out.fetch_start(t.0, self.pid, self.thread);
    }

    /// The request has left for the destination: the `mid_fetch` point.
    pub fn fetch_sent(&mut self) -> Option<Armed> {
        self.take_kill(KillPoint::MidFetch)
    }

    /// 6. The response arrived with `status`: after-fetch bookkeeping.
    // (one caller, `Sim::fetch_done`: inlined by hand, as it was before issues 32 and 33 grew
    // its caller past the inliner's threshold)
    #[inline(always)]
    pub fn fetch_end(&mut self, t: Instant, status: u16, out: &mut dyn Sink) -> Action<P::Op> {
        out.fetch_end(t.0, self.pid, self.thread, status);
        self.fetches += 1;
        let step = self.call(t, out, |p, cx| p.after_fetch(cx, status));
        self.apply(t, step, out)
    }

    /// The job passed its soft time limit: it finalises as the process side says; any reply
    /// in flight is now stale.
    pub fn soft_limit(&mut self, t: Instant, out: &mut dyn Sink) -> Action<P::Op> {
        let step = self.call(t, out, |p, cx| p.on_soft_limit(cx));
        self.op_seq += 1;
        self.phase = Phase::Idle;
        self.apply(t, step, out)
    }
}

/// One process of one or more thread loops, and what its threads share (`[processes]
/// threads`): the process side when they share it ([`crate::backend::Threads::Shared`]), the
/// kills armed for the process, its open-loop job queue, and its `max_concurrency` permits.
///
/// Each [`Worker`] stays one thread's loop, with its own phase, timers, operation in flight,
/// job and random stream; a driver runs a thread's step between [`Process::lend`] (the shared
/// parts move into the thread's loop) and [`Process::reclaim`] (they move back), so every
/// step of the loop is written once, for one thread. A step runs alone, as the record's
/// limiter runs under its `threading.Lock`. A one-thread process lends nothing but its armed
/// kills and its queue, and steps exactly as a [`Worker`] alone.
#[derive(Clone, Debug)]
// Laid out by hand, as `Worker` is: what every step reads (the parts it lends, and whether it
// lends a shared side) and what every job's start reads (its permits) fill the first cache
// line; thread 0's loop, which every event of a one-thread process visits, follows in place
// (at a fixed offset from the process, not behind a pointer: a visit's loads do not wait on
// one another); then the shared side, lent only when `shared`, and the line of threads waiting
// for a permit.
#[repr(C, align(64))]
pub struct Process<P: ProcessSide> {
    // the loops of threads 1 and up (none in a one-thread process)
    rest: Vec<Worker<P>>,
    // kills armed for the process (they outlive an incarnation); lent to the stepping thread
    armed: Vec<Armed>,
    // open loop: jobs waiting for a free thread; lent to the stepping thread
    queued: u64,
    shared: bool,
    // invariant: true once a kill was armed or a job queued (the parts a step lends may then be
    // other than empty): until then a step lends nothing
    lends: bool,
    // `max_concurrency`: permits free now (`None`: no bound)
    permits: Option<u16>,
    // thread 0's loop
    first: Worker<P>,
    // invariant: Some between steps iff `shared` (the threads share one process side); during
    // a step it is lent to the stepping thread.
    side: Option<Box<P>>,
    bound: Option<u16>,
    // invariant: the threads waiting for a permit (phase WaitingPermit), in the order they
    // asked.
    waiting: std::collections::VecDeque<u16>,
}

impl<P: ProcessSide> Process<P> {
    /// A process of `threads`, sharing `side` if given (then no thread holds one), with at most
    /// `max_concurrency` jobs in flight.
    ///
    /// # Panics
    ///
    /// With no thread.
    pub fn new(mut threads: Vec<Worker<P>>, side: Option<P>, max_concurrency: Option<u16>) -> Process<P> {
        assert!(!threads.is_empty(), "a process runs at least one thread");
        let first = threads.remove(0);
        Process {
            rest: threads,
            first,
            shared: side.is_some(),
            lends: false,
            side: side.map(Box::new),
            armed: Vec::new(),
            queued: 0,
            permits: max_concurrency,
            bound: max_concurrency,
            waiting: Default::default(),
        }
    }

    /// Thread `th`'s loop.
    #[inline(always)]
    pub fn thread(&self, th: u16) -> &Worker<P> {
        if th == 0 {
            &self.first
        } else {
            &self.rest[th as usize - 1]
        }
    }

    /// Thread `th`'s loop, to change.
    #[inline(always)]
    pub fn thread_mut(&mut self, th: u16) -> &mut Worker<P> {
        if th == 0 {
            &mut self.first
        } else {
            &mut self.rest[th as usize - 1]
        }
    }

    /// The threads' loops, by thread number.
    pub fn threads(&self) -> impl Iterator<Item = &Worker<P>> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    /// The threads' loops, by thread number, to change.
    pub fn threads_mut(&mut self) -> impl Iterator<Item = &mut Worker<P>> {
        std::iter::once(&mut self.first).chain(&mut self.rest)
    }

    /// Thread `th`'s loop, holding the shared parts for one step.
    #[inline(always)]
    pub fn lend(&mut self, th: u16) -> &mut Worker<P> {
        self.exchange(th, true)
    }

    /// Thread `th`'s step is over: the shared parts come back.
    #[inline(always)]
    pub fn reclaim(&mut self, th: u16) {
        self.exchange(th, false);
    }

    /// The shared parts move to thread `th`'s loop (`lend`) or back from it; the loop.
    #[inline(always)]
    fn exchange(&mut self, th: u16, lend: bool) -> &mut Worker<P> {
        let Process {
            rest,
            armed,
            queued,
            shared,
            lends,
            first,
            side,
            ..
        } = self;
        let w = if th == 0 { first } else { &mut rest[th as usize - 1] };
        // (`side` is only ever Some when shared: the flag, in the first line, spares the
        // shared side's load)
        if *shared {
            if lend {
                if let Some(side) = side.take() {
                    w.process = Some(side);
                }
            } else {
                *side = w.process.take();
            }
        }
        if *lends {
            std::mem::swap(&mut w.armed, armed);
            std::mem::swap(&mut w.queued, queued);
        }
        w
    }

    /// Arm a kill for the process: it fires at the first of its threads to reach the point.
    pub fn arm(&mut self, k: Armed) {
        self.armed.push(k);
        self.lends = true;
    }

    /// Open loop: a job arrives for the process. The first thread waiting for a job takes it
    /// (`Some(thread)`), else it queues.
    pub fn job_arrives(&mut self) -> Option<u16> {
        let idle = self.threads().position(|w| w.phase == Phase::Idle);
        match idle {
            Some(th) => Some(th as u16),
            None => {
                self.queued += 1;
                self.lends = true;
                None
            }
        }
    }

    /// Thread `th` wants to begin a job: true if it holds a permit now (or nothing bounds the
    /// process); otherwise it waits in line ([`Phase::WaitingPermit`]).
    pub fn take_permit(&mut self, th: u16) -> bool {
        match &mut self.permits {
            None => true,
            Some(0) => {
                self.thread_mut(th).phase = Phase::WaitingPermit;
                self.waiting.push_back(th);
                false
            }
            Some(n) => {
                *n -= 1;
                true
            }
        }
    }

    /// A job ended and gives its permit back: the first waiting thread, if any, gets it (it
    /// begins its job now).
    pub fn give_permit(&mut self) -> Option<u16> {
        let n = self.permits.as_mut()?;
        match self.waiting.pop_front() {
            Some(th) => Some(th),
            None => {
                *n += 1;
                None
            }
        }
    }

    /// The process was killed: every thread is dead; its permits are free again for the
    /// process that replaces it. How many of its threads were still active.
    pub fn die(&mut self) -> u32 {
        let mut active = 0;
        for w in self.threads_mut() {
            active += u32::from(w.is_active());
            w.phase = Phase::Dead;
        }
        self.permits = self.bound;
        self.waiting.clear();
        active
    }

    /// What an explorer fingerprints of the process (the simulator's world): all of it while it
    /// lives; once killed (every thread [`Phase::Dead`]) only what a restart carries over or
    /// reads (each thread's number, incarnation, fetch count and job queue, the armed kills,
    /// the wall clock, the permits), since nothing else of a dead process is read again
    /// (events for it are dropped; a restart builds fresh loops, streams, clocks and process
    /// side). Two runs that killed a process at different moments of its loop, or left it
    /// different streams and timers, then meet.
    #[cfg(test)]
    pub fn explored_form(&self) -> ExploredForm<'_, P> {
        ExploredForm(self, self.first.pid)
    }

    /// An explorer's form of the process at reference time `now` ([`crate::form`]): a dead
    /// one as [`Process::explored_form`] prints it (nothing in it is an instant but its wall
    /// clock's, taken as the clock's form); a live one field by field, each thread's instants
    /// (when its operation left, when its job began) and clocks relative to now, and its
    /// backend side by the side's own form.
    pub fn form(&self, f: &mut crate::form::Form, now: Instant) {
        use crate::choice::fingerprint;
        if self.threads().all(|w| w.phase == Phase::Dead) {
            f.word(fingerprint(&ExploredForm(self, f.pid(self.first.pid))));
            for w in self.threads() {
                w.wall.form(f, now);
            }
            return;
        }
        // (every field named: one added later is placed here, or the build fails)
        let Process {
            rest: _,
            armed,
            queued,
            shared,
            lends,
            permits,
            first: _,
            side,
            bound,
            waiting,
        } = self;
        f.word(fingerprint(&(armed, queued, shared, lends, permits, bound, waiting)));
        for w in self.threads() {
            w.form(f, now);
        }
        match side {
            Some(s) => s.form(f, self.first.mono.read(now).max(0) as u64),
            None => f.word(0),
        }
    }

    /// A fresh process in this one's place: `threads` new loops (each thread's fetch count
    /// carries over), sharing `side` if given; the armed kills and the job queue carry over.
    pub fn restarted(&mut self, mut threads: Vec<Worker<P>>, side: Option<P>) {
        for (new, old) in threads.iter_mut().zip(self.threads()) {
            new.fetches = old.fetches;
        }
        assert!(!threads.is_empty(), "a process runs at least one thread");
        self.first = threads.remove(0);
        self.rest = threads;
        self.side = side.map(Box::new);
    }

    /// The sessions of the process's threads (one store connection each).
    pub fn sessions(&self) -> impl Iterator<Item = crate::backend::Session> + '_ {
        self.threads().map(|w| crate::backend::Session {
            pid: w.pid,
            incarnation: w.incarnation,
            thread: w.thread,
        })
    }
}

/// The critical sections each process is in, read off the trace (`lock_acquired` /
/// `lock_released` events, whoever wrote them): a SIGKILL ends every one of them
/// (`holder_died`). Both drivers keep one, so a crash ends sections the same way in both.
#[derive(Hash, Clone, Debug, Default)]
pub struct Sections {
    // invariant: held[pid] lists the locks pid's events show it holding, in acquisition order.
    held: Vec<Vec<u32>>,
    // invariant: platform[pid] is the platform of pid's latest `platform` event (0 before one).
    platform: Vec<u32>,
}

impl Sections {
    /// An explorer's form of the sections: each process's locks held and platform, by the
    /// process's name ([`crate::form::Form::per_pid`]).
    pub fn form(&self, f: &mut crate::form::Form) {
        let Sections { held, platform } = self;
        f.per_pid(
            (held.iter().zip(platform))
                .enumerate()
                .map(|(pid, (h, p))| (pid as u32, (h, p))),
        );
    }

    /// Nobody holds anything.
    pub fn new(processes: u32) -> Sections {
        Sections {
            held: vec![Vec::new(); processes as usize],
            platform: vec![0; processes as usize],
        }
    }

    /// The platform of `pid`'s current job, as its latest `platform` event says (0 without
    /// platforms): where its fetches go.
    pub fn platform(&self, pid: u32) -> u32 {
        self.platform.get(pid as usize).copied().unwrap_or(0)
    }

    /// Follow one event.
    pub fn observe(&mut self, ev: &Event) {
        match *ev {
            Event::LockAcquired { pid, lock, .. } => {
                if let Some(h) = self.held.get_mut(pid as usize) {
                    h.push(lock);
                }
            }
            Event::LockReleased { pid, lock, .. } => {
                if let Some(h) = self.held.get_mut(pid as usize) {
                    h.retain(|&l| l != lock);
                }
            }
            Event::Platform { pid, platform, .. } => {
                if let Some(p) = self.platform.get_mut(pid as usize) {
                    *p = platform;
                }
            }
            _ => {}
        }
    }

    /// `pid` died at `t`: its sections end (`holder_died`), written to `out`.
    pub fn died(&mut self, pid: u32, t: u64, out: &mut dyn Sink) {
        if let Some(h) = self.held.get_mut(pid as usize) {
            for lock in h.drain(..) {
                out.event(&Event::LockReleased {
                    t,
                    pid,
                    lock,
                    reason: ReleaseReason::HolderDied,
                });
            }
        }
    }
}

/// A sink that follows the critical sections of the events passing through it.
pub struct Tracked<'a> {
    /// Where events go.
    pub out: &'a mut dyn Sink,
    /// What they tell of critical sections.
    pub sections: &'a mut Sections,
}

impl<'a> Tracked<'a> {
    /// Follow `sections` in what passes to `out`.
    pub fn new(out: &'a mut dyn Sink, sections: &'a mut Sections) -> Tracked<'a> {
        Tracked { out, sections }
    }
}

impl std::fmt::Debug for Tracked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracked").finish()
    }
}

impl Sink for Tracked<'_> {
    fn event(&mut self, ev: &Event) {
        self.sections.observe(ev);
        self.out.event(ev);
    }
    // invariant: no kind below opens or closes a section (`Sections::observe` ignores them),
    // so they pass straight on, to be built in place (see `Sink`'s docs)
    crate::trace::event::with_events!(crate::trace::event::own_methods [[forward out]]);
}

/// A process as an explorer fingerprints it ([`Process::explored_form`]), named by its label
/// (its pid, unless the explorer reduces by symmetry: [`crate::form::Form::pid`]).
pub struct ExploredForm<'a, P: ProcessSide>(&'a Process<P>, u32);

impl<P: ProcessSide> std::fmt::Debug for ExploredForm<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.0;
        if !p.threads().all(|w| w.phase == Phase::Dead) {
            return p.fmt(f);
        }
        // (every field named: one added later is placed here, or the build fails)
        let Process {
            rest: _,
            armed,
            queued,
            shared,
            lends,
            permits,
            first: _,
            side: _,
            bound,
            waiting,
        } = p;
        let mut d = f.debug_struct("Dead");
        d.field("armed", armed)
            .field("queued", queued)
            .field("shared", shared)
            .field("lends", lends)
            .field("permits", permits)
            .field("bound", bound)
            .field("waiting", waiting);
        for w in p.threads() {
            d.field(
                "thread",
                &(w.thread, w.pid, w.incarnation, w.fetches, w.queued, &w.armed, &w.wall),
            );
        }
        d.finish()
    }
}

/// A dead process by what a restart carries over or reads (as its `Debug` prints it); a live
/// one also by each thread's stream, operation numbers and phase.
impl<P: ProcessSide> std::hash::Hash for ExploredForm<'_, P> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let ExploredForm(p, name) = self;
        // (every field named: one added later is placed here, or the build fails)
        let Process {
            rest: _,
            armed,
            queued,
            shared,
            lends,
            permits,
            first: _,
            side,
            bound,
            waiting,
        } = p;
        (armed, queued, shared, lends, permits, bound, waiting).hash(h);
        let dead = p.threads().all(|w| w.phase == Phase::Dead);
        for w in p.threads() {
            (w.thread, name, w.incarnation, w.fetches, w.queued, &w.armed, &w.wall).hash(h);
            if !dead {
                (&w.rng, w.op_seq, w.job_seq, w.phase).hash(h);
            }
        }
        if !dead {
            side.hash(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::row::RowProcess;
    use std::mem::{offset_of, size_of};

    /// An explorer fingerprints a dead process by what a restart carries over or reads, and
    /// nothing else: the stream, operation numbers and instants it died with are never read
    /// again, its fetch count and incarnation are.
    #[test]
    fn a_dead_process_is_fingerprinted_by_what_a_restart_reads() {
        use crate::backend::Backend;
        use crate::choice::fingerprint;
        use crate::rng::{Entity, stream};
        let sc = crate::scenario::Scenario::parse(
            "sims/explore-three-racers.toml",
            include_str!("../sims/explore-three-racers.toml"),
            &crate::scenario::Structure,
        )
        .expect("a scenario");
        let local = crate::backend::local::Local::new(&sc, Default::default()).expect("a backend");
        let make = |seed: u64| {
            let rng = stream(seed, Entity::Process { pid: 0, incarnation: 0 });
            let w = Worker::new(0, 0, Clock::reference(), Clock::reference(), rng, local.process(0));
            Process::new(vec![w], None, None)
        };
        let form = |p: &Process<crate::backend::local::LocalProcess>| fingerprint(&p.explored_form());
        let (mut a, mut b) = (make(1), make(2));
        assert_ne!(form(&a), form(&b), "alive, another stream is another process");
        a.first.op_seq = 3;
        a.first.op_sent = Instant(5_000);
        a.first.phase = Phase::Awaiting;
        a.die();
        b.die();
        assert_eq!(
            form(&a),
            form(&b),
            "dead: its stream, operations and phase are never read again"
        );
        b.first.fetches = 1;
        assert_ne!(form(&a), form(&b), "a restart carries the fetch count over");
        b.first.fetches = 0;
        b.first.incarnation = 1;
        assert_ne!(form(&a), form(&b), "a restart numbers the next incarnation from it");
        b.first.incarnation = 0;
        b.armed.push(Armed {
            point: KillPoint::MidFetch,
            restart_after: None,
        });
        assert_ne!(form(&a), form(&b), "armed kills outlive an incarnation");
    }

    /// `Tracked` passes the kinds with their own `Sink` methods straight on, unobserved: none
    /// of them opens or closes a critical section, and through `Tracked` each reaches the sink
    /// as the event `event` would have passed on.
    #[test]
    fn the_kinds_tracked_passes_on_leave_sections_alone() {
        use crate::trace::Collect;
        let mut sections = Sections::new(1);
        sections.observe(&Event::LockAcquired { t: 0, pid: 0, lock: 7 });
        let before = sections.held.clone();
        let mut direct = Collect::default();
        let mut out = Collect::default();
        let kinds = [
            Event::OpSent {
                t: 1,
                pid: 0,
                thread: 2,
                op: OpKind::Reserve,
            },
            Event::Grant {
                t: 2,
                pid: 0,
                thread: 2,
                slot: 3,
                now: -4,
                interval: 5,
                multiplier: 1.5,
            },
            Event::Reply {
                t: 3,
                pid: 0,
                thread: 2,
                op: OpKind::Report,
                wait: 6,
            },
            Event::FetchStart {
                t: 4,
                pid: 0,
                thread: 2,
            },
            Event::Arrival {
                t: 5,
                pid: 0,
                thread: 2,
                status: 429,
            },
            Event::FetchEnd {
                t: 6,
                pid: 0,
                thread: 2,
                status: 503,
            },
        ];
        let mut tracked = Tracked::new(&mut out, &mut sections);
        for ev in &kinds {
            direct.event(ev);
            assert!(ev.to_own_method(&mut tracked), "{ev:?} has its own method");
        }
        assert_eq!(out.events, direct.events);
        for ev in &kinds {
            sections.observe(ev);
        }
        assert_eq!(sections.held, before);
    }

    /// The layout [`Process`] is written for: aligned to a cache line, every field a step
    /// reads within its first line, and thread 0's loop right after it.
    #[test]
    fn a_step_reads_one_line_of_its_process() {
        type P = Process<RowProcess>;
        assert_eq!(std::mem::align_of::<P>(), 64);
        assert_eq!(offset_of!(P, first), 64);
        for end in [
            offset_of!(P, rest) + size_of::<Vec<Worker<RowProcess>>>(),
            offset_of!(P, armed) + size_of::<Vec<Armed>>(),
            offset_of!(P, queued) + 8,
            offset_of!(P, shared) + 1,
            offset_of!(P, lends) + 1,
            offset_of!(P, permits) + size_of::<Option<u16>>(),
        ] {
            assert!(end <= 64, "a field a step reads ends at byte {end}");
        }
    }

    /// The layout [`Worker`] is written for: aligned to a cache line, and with the row
    /// backend's operation every field a visit reads within its first three lines; only the
    /// wall clock beyond them.
    #[test]
    fn a_visit_reads_three_cache_lines() {
        type W = Worker<RowProcess>;
        assert_eq!(std::mem::align_of::<W>(), 64);
        let hot_end = offset_of!(W, op_in_flight) + size_of::<Option<<RowProcess as ProcessSide>::Op>>();
        assert!(hot_end <= 192, "the hot fields end at byte {hot_end}");
        assert!(offset_of!(W, wall) >= hot_end);
        assert_eq!(size_of::<W>(), 256);
    }
}
