//! `row`: the global pace row (design record "Make the 7/s fetch cap global", #648).
//!
//! - **In the store:** one row per destination: `next_allowed_at`, and (with
//!   `backoff = "global"`) `backoff_multiplier` and `clean_streak`.
//! - **Atomic operation:** one autocommit statement under the row lock:
//!   `UPDATE pace SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at) +
//!   interval * backoff_multiplier RETURNING slot, clock_timestamp(), multiplier`, i.e.
//!   `slot = max(now, next_allowed_at); next_allowed_at = slot + interval * multiplier`.
//!   Concurrent reservers serialise on the row lock, so slots form one strictly increasing
//!   sequence spaced by the interval in force.
//! - **Clock:** the store's (`clock_timestamp()`). Variant `clock = "process_monotonic"`
//!   (defect): each process sends its own monotonic reading, whose epoch is per process, and
//!   the statement uses that instead. As the record describes it, a process whose epoch is
//!   behind the row's writer sees a pace far ahead and sleeps until its own clock reaches it
//!   (it starves), while the furthest-ahead process paces alone. Recovery code such a design
//!   tends to grow, `stale_after` (an option, off by default: the record has none), takes a
//!   pace further ahead than that for a stale row and overwrites it: then processes with
//!   different epochs keep resetting each other's pace and each runs free, N x rate while
//!   looking coordinated.
//! - **Wait:** `relative` sleeps `slot - now` from when the reply arrives (skew-immune);
//!   `absolute` sleeps until the host's wall clock reads `slot` (host/store skew shifts it).
//! - **Transaction:** autocommit releases the row lock the instant the statement commits (the
//!   store model's commit stage, `[store] commit`: the WAL flush, under the row lock).
//!   Variant `in_transaction` (defect): the reservation runs inside the caller's transaction,
//!   so the row lock is held until it commits and every other reserver waits behind it:
//!   throughput falls to about 1 / hold.
//! - **Store failure:** the process falls back (`super::fallback`), logging the switch; it
//!   paces its fallback by its own multiplier, or the shared one its last report was answered
//!   with.
//! - **SIGKILL leaves:** at most one reserved-but-unused slot: the pace is at most one interval
//!   ahead, and self-heals within one interval. No claim, nothing to reconcile. (Killed inside
//!   an open transaction, the update is rolled back when the store notices the session died.)

use crate::backend::backoff::{BackoffReply, LocalBackoff, Placed, SharedBackoff, Signal};
use crate::backend::fallback::{FallbackCfg, Pace, ProcFallback};
use crate::backend::options::{self, Fallback, OptionError, Placement};
use crate::backend::{
    Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide, Threads,
};
use crate::clock::Reading;
use crate::dist::Dist;
use crate::fault::KillPoint;
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::OpKind;
use serde::{Deserialize, Serialize};

/// Whose clock a reservation reads.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The store's `clock_timestamp()`: one clock for everyone (correct).
    Store,
    /// Each process's own monotonic reading, whose epoch is per process (defect).
    ProcessMonotonic,
}

/// How a worker sleeps to its slot.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitMode {
    /// Sleep `slot - store_now` from when the reply arrives (skew-immune).
    Relative,
    /// Sleep until the host's wall clock reads `slot` (host/store skew matters).
    Absolute,
}

/// The in-transaction defect's options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InTransaction {
    /// How long the caller's transaction stays open after the reservation.
    pub hold: Dist,
}

/// `[pacer]` options of `row`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowOptions {
    /// Whose clock the reservation reads: `store` (default; the record's `clock_timestamp()`)
    /// or `process_monotonic` (the defect the record warns of).
    pub clock: Option<ClockSource>,
    /// How the worker waits for its slot: `relative` (default; the record's "sleeps to its
    /// slot locally") or `absolute`.
    pub wait: Option<WaitMode>,
    /// Run the reservation inside the caller's transaction, held open for `hold` (the
    /// record's correctness bug). Default: autocommit.
    pub in_transaction: Option<InTransaction>,
    /// What a process does when the store is unreachable. Default `divided` (#649's fallback;
    /// #648 as written was `fail_open`).
    pub fallback: Option<Fallback>,
    /// Maximum concurrent dispatches; the divided pace is `rate / (cap + 1)`. Default
    /// `processes.count - 1` (pacesim's choice: the divided pace is then `rate / count`).
    pub cap: Option<u32>,
    /// Where the backoff multiplier lives: `global` (default; the record's row column) or
    /// `per_process`.
    pub backoff: Option<Placement>,
    /// Where the clean streak lives. Default: wherever the multiplier lives.
    pub streak: Option<Placement>,
    /// For `process_monotonic`: a stored pace further ahead than this is taken for a stale row
    /// and overwritten (recovery code such a design tends to grow). Default: none, no reset
    /// (the record describes none).
    pub stale_after: Option<Nanos>,
    /// In fallback, how long a store error keeps the process from asking the store again (a
    /// circuit breaker). Default: none, every reservation asks (pacesim's choice; the records
    /// do not say).
    pub rejoin_after: Option<Nanos>,
}

impl RowOptions {
    /// Range checks serde cannot express.
    pub fn validate(&self) -> Result<(), OptionError> {
        if let Some(it) = &self.in_transaction {
            it.hold
                .validate()
                .map_err(|m| OptionError::new("in_transaction.hold", m))?;
        }
        options::positive("stale_after", self.stale_after)
    }
}

/// An operation of the pace backends (`row`, `shared_cache`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum PaceOp {
    /// Reserve a slot. `proc_now` is the sender's monotonic reading (used only by the
    /// process-clock defect); `multiplier` is the sender's own multiplier when it keeps one.
    Reserve {
        /// Sender's monotonic clock reading when it sent the operation.
        proc_now: Reading,
        /// Per-process multiplier, when backoff state is per process.
        multiplier: Option<f64>,
    },
    /// Tell shared backoff state about a response.
    Report(Signal),
}

/// Every part exact, the multiplier by its bits.
impl std::hash::Hash for PaceOp {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            PaceOp::Reserve { proc_now, multiplier } => (proc_now, multiplier.map(f64::to_bits)).hash(h),
            PaceOp::Report(signal) => signal.hash(h),
        }
    }
}

impl StoreOp for PaceOp {
    fn kind(&self) -> OpKind {
        match self {
            PaceOp::Reserve { .. } => OpKind::Reserve,
            PaceOp::Report(_) => OpKind::Report,
        }
    }
}

/// The store's answer to a [`PaceOp`].
#[derive(Hash, Copy, Clone, Debug, PartialEq)]
pub enum PaceReply {
    /// A slot, in the authority's clock frame, and that clock's reading when it granted.
    // (kept to two words: a simulator event carries it, and events fit one cache line)
    Slot {
        /// The slot.
        slot: Reading,
        /// The authority's `now`.
        now: Reading,
    },
    /// Shared backoff state after a report.
    Backoff(BackoffReply),
}

impl StoreReply for PaceReply {}

/// The row backend: its options in force.
#[derive(Clone, Debug)]
pub struct Row {
    name: &'static str,
    interval: Nanos,
    clock: ClockSource,
    wait: WaitMode,
    in_transaction: Option<Dist>,
    stale_after: Option<Nanos>,
    fallback: FallbackCfg,
    placed: Placed,
}

impl Row {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: RowOptions) -> Result<Row, OptionError> {
        o.validate()?;
        Ok(Row {
            name: "row",
            interval: sc.interval(),
            clock: o.clock.unwrap_or(ClockSource::Store),
            wait: o.wait.unwrap_or(WaitMode::Relative),
            in_transaction: o.in_transaction.map(|t| t.hold),
            stale_after: o.stale_after,
            fallback: FallbackCfg::new(sc, o.fallback.unwrap_or(Fallback::Divided), o.cap, o.rejoin_after)?,
            placed: Placed::new(o.backoff, o.streak, sc.backoff_config()),
        })
    }

    /// The same statement kept under another name (see `super::shared_cache`).
    pub fn renamed(mut self, name: &'static str) -> Row {
        self.name = name;
        self
    }

    /// The reservation clock in force.
    pub fn clock(&self) -> ClockSource {
        self.clock
    }

    /// The `in_transaction` hold, if the defect is on.
    pub fn in_transaction(&self) -> Option<&Dist> {
        self.in_transaction.as_ref()
    }

    /// `stale_after` in force (`None`: a far-ahead pace is never reset).
    pub fn stale_after(&self) -> Option<Nanos> {
        self.stale_after
    }

    /// The base interval.
    pub fn interval(&self) -> Nanos {
        self.interval
    }
}

impl Backend for Row {
    type Op = PaceOp;
    type Reply = PaceReply;
    type Process = RowProcess;
    type Store = RowStore;

    fn name(&self) -> &str {
        self.name
    }

    fn detail(&self) -> serde_json::Value {
        let detail = serde_json::json!({
            "storage": if self.name == "row" { "pace row (migration)" } else { "reserved key in the shared cache table" },
            "interval_ns": self.interval.0,
            "clock": self.clock,
            "wait": self.wait,
            "in_transaction": self.in_transaction,
            "streak": self.placed.streak,
        });
        self.fallback.stated(detail)
    }

    fn facts(&self) -> crate::backend::Facts {
        crate::backend::Facts {
            fallback: Some(self.fallback.trace_mode().into()),
            backoff: Some(self.placed.multiplier.into()),
            ..Default::default()
        }
    }

    /// Shared: the record's limiter is one per process; its backoff machine, the shared
    /// multiplier it last saw and its fallback switch ("falls back to its own per-process
    /// pacer") are per process, and nothing is kept per operation in flight (each thread's
    /// reservation travels on its own connection).
    fn threads(&self) -> Threads {
        Threads::Shared
    }

    fn process(&self, _pid: u32) -> RowProcess {
        RowProcess {
            clock: self.clock,
            wait: self.wait,
            backoff: self.placed.local(),
            fallback: self.fallback.fresh(),
            shared_multiplier: 1.0,
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        let mut v = vec![
            KillPoint::MidReservation,
            KillPoint::SleepingToSlot,
            KillPoint::MidFetch,
        ];
        if self.in_transaction.is_some() {
            v.push(KillPoint::InTransaction);
        }
        v
    }

    fn store(&self) -> RowStore {
        RowStore {
            next_allowed_at: None,
            backoff: self.placed.shared(),
            interval: self.interval,
            clock: self.clock,
            in_transaction: self.in_transaction.clone(),
            open_tx: None,
            stale_after: self.stale_after,
        }
    }
}

/// The row in the store.
#[derive(Clone, Hash, Debug)]
pub struct RowStore {
    // invariant: every slot granted is >= the previous slot + its interval, so slots strictly
    // increase (store clock); `None` until the first reservation creates the row.
    next_allowed_at: Option<Reading>,
    // the backoff_multiplier and clean_streak columns
    backoff: SharedBackoff,
    interval: Nanos,
    clock: ClockSource,
    in_transaction: Option<Dist>,
    // The caller's transaction still open on the row, if any: (holder, the row's value before
    // its update, when it commits). A holder killed before the commit is rolled back.
    open_tx: Option<(Session, Option<Reading>, Instant)>,
    stale_after: Option<Nanos>,
}

impl RowStore {
    /// The stored `next_allowed_at` (tests).
    pub fn next_allowed_at(&self) -> Option<Reading> {
        self.next_allowed_at
    }

    /// The statement: `slot = GREATEST(now, next_allowed_at); next_allowed_at = slot + I * m`.
    /// Returns `(slot, interval applied)`.
    pub fn reserve(&mut self, now: Reading, multiplier: f64) -> (Reading, Nanos) {
        let interval = self.interval.scale(multiplier);
        let mut slot = self.next_allowed_at.map_or(now, |next| next.max(now));
        if self.clock == ClockSource::ProcessMonotonic && self.stale_after.is_some_and(|s| slot - now > s.0 as i64) {
            slot = now; // "stale row": the recovery code a per-process clock design needs
        }
        self.next_allowed_at = Some(slot + interval.0 as i64);
        (slot, interval)
    }
}

impl StoreSide for RowStore {
    type Op = PaceOp;
    type Reply = PaceReply;

    /// Every statement updates the row (a reservation; a report to the backoff columns).
    fn durable(&self, _op: &PaceOp) -> bool {
        true
    }

    fn serve(&mut self, cx: &mut StoreCx, from: Session, op: &PaceOp, now: Reading) -> Served<PaceReply> {
        match *op {
            PaceOp::Reserve { proc_now, multiplier } => {
                let now = match self.clock {
                    ClockSource::Store => now,
                    ClockSource::ProcessMonotonic => proc_now,
                };
                let m = multiplier.unwrap_or(self.backoff.multiplier());
                let before = self.next_allowed_at;
                let (slot, interval) = self.reserve(now, m);
                cx.out.grant(cx.t.0, from.pid, from.thread, slot, now, interval.0, m);
                let hold = self.in_transaction.as_ref().map_or(Nanos::ZERO, |d| d.sample(cx.rng));
                self.open_tx = (hold.0 > 0).then_some((from, before, cx.t + hold));
                Served {
                    reply: PaceReply::Slot { slot, now },
                    hold,
                }
            }
            PaceOp::Report(signal) => Served::now(PaceReply::Backoff(self.backoff.serve(cx, signal))),
        }
    }

    /// The row is gone (a truncated table; for `shared_cache`, the cache culled the key): the
    /// next reservation recreates it at `now` ("a truncated table recreates its row rather
    /// than wedging"), so at most one request goes early; the backoff columns come back rested.
    fn on_state_lost(&mut self, cx: &mut StoreCx) {
        self.next_allowed_at = None;
        self.open_tx = None;
        self.backoff.lost(cx);
    }

    fn on_crash(&mut self, cx: &mut StoreCx, s: Session) {
        // Killed inside its open transaction: the server aborts it, so the update never
        // happened. (The row lock is modelled as held until the transaction's planned end.)
        if let Some((holder, before, commit)) = self.open_tx
            && holder == s
            && cx.t < commit
        {
            self.next_allowed_at = before;
            self.open_tx = None;
        }
    }
}

/// One process's side of the pace row: its wait, its backoff machine, its fallback.
#[derive(Clone, Debug)]
pub struct RowProcess {
    clock: ClockSource,
    wait: WaitMode,
    backoff: LocalBackoff,
    fallback: ProcFallback,
    // The shared multiplier as the store last reported it (the answer to its last report):
    // what paces a fallback when the multiplier is kept in the store.
    shared_multiplier: f64,
}

crate::exact_hash!(RowProcess {
    clock,
    wait,
    backoff,
    fallback,
    shared_multiplier: bits
});

impl RowProcess {
    /// What its fallback pace starts from: its own multiplier, or the shared one it last saw.
    fn pace(&self) -> Pace {
        match self.backoff.own_multiplier() {
            Some(m) => Pace::Own(m),
            None => Pace::Shared(self.shared_multiplier),
        }
    }
}

impl ProcessSide for RowProcess {
    type Op = PaceOp;
    type Reply = PaceReply;

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<PaceOp> {
        if let Some(step) = self.fallback.short_circuit(cx, self.pace()) {
            return step;
        }
        Step::Send(PaceOp::Reserve {
            proc_now: cx.mono.read(cx.t),
            multiplier: self.backoff.own_multiplier(),
        })
    }

    fn on_reply(&mut self, cx: &mut ProcCx, _op: &PaceOp, reply: PaceReply) -> Step<PaceOp> {
        self.fallback.on_success(cx);
        match reply {
            PaceReply::Slot { slot, now } => {
                let wake: Instant = match (self.wait, self.clock) {
                    (WaitMode::Relative, ClockSource::Store) => cx.after_mono(Nanos((slot - now).max(0) as u64)),
                    (WaitMode::Relative, ClockSource::ProcessMonotonic) => {
                        let mine = cx.mono.read(cx.t);
                        cx.after_mono(Nanos((slot - mine).max(0) as u64))
                    }
                    (WaitMode::Absolute, _) => cx.wall.when_reads(cx.t, slot),
                };
                self.fallback.note_slot(cx, wake);
                Step::FetchAt(wake)
            }
            PaceReply::Backoff(r) => {
                self.shared_multiplier = r.multiplier;
                self.backoff.on_reply(cx, r)
            }
        }
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, op: &PaceOp) -> Step<PaceOp> {
        match op {
            PaceOp::Reserve { .. } => {
                let pace = self.pace();
                self.fallback.on_error(cx, pace)
            }
            // A lost report: the response is forgotten, as a failed UPDATE would be.
            PaceOp::Report(_) => Step::Done,
        }
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, status: u16) -> Step<PaceOp> {
        self.fallback.on_response(cx, status);
        let step = self.backoff.after_fetch(cx, status, PaceOp::Report);
        self.fallback.hold_report(cx, step)
    }
}

impl crate::backend::Configure for RowOptions {
    type Backend = Row;
    fn build(self, sc: &Scenario) -> Result<Row, OptionError> {
        Row::new(sc, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(extra: &str) -> Row {
        let src =
            format!("name='t'\nduration='1s'\n[pacer]\nbackend='row'\nrate=10.0\n{extra}\n[processes]\ncount=2\n");
        let sc = crate::registry::parse("t", &src).unwrap();
        let o = options::parse("row", &sc.pacer.options, true).unwrap();
        Row::new(&sc, o).unwrap()
    }

    fn s(pid: u32) -> Session {
        Session {
            pid,
            incarnation: 0,
            thread: 0,
        }
    }

    #[test]
    fn statement_arithmetic_with_multiplier() {
        let mut r = row("").store();
        assert_eq!(r.reserve(1_000, 1.0), (1_000, Nanos(100_000_000)));
        // a second reserver at the same instant gets the next slot
        assert_eq!(r.reserve(1_000, 1.0).0, 100_001_000);
        // with multiplier 4 the *next* slot is 4 intervals on
        assert_eq!(r.reserve(1_000, 4.0), (200_001_000, Nanos(400_000_000)));
        assert_eq!(r.next_allowed_at(), Some(600_001_000));
        // an idle pacer grants now
        assert_eq!(r.reserve(10_000_000_000, 1.0).0, 10_000_000_000);
    }

    #[test]
    fn process_clock_without_a_reset_makes_the_behind_process_wait() {
        // the record as written: nothing resets a pace written on another process's clock
        let mut r = row("clock='process_monotonic'").store();
        let far = 3_600_000_000_000;
        assert_eq!(r.reserve(far, 1.0).0, far);
        // a process whose epoch is an hour behind gets the next slot in the hour-ahead frame:
        // it sleeps about an hour
        assert_eq!(r.reserve(5, 1.0).0, far + 100_000_000);
    }

    #[test]
    fn process_clock_resets_a_far_ahead_pace() {
        let mut r = row("clock='process_monotonic'\nstale_after='1s'").store();
        let far = 3_600_000_000_000; // a process whose epoch is an hour ahead
        assert_eq!(r.reserve(far, 1.0).0, far);
        // a process with epoch zero sees a pace an hour ahead, takes it for stale, resets it
        assert_eq!(r.reserve(5, 1.0).0, 5);
        // and the hour-ahead process now sees a pace in its past: it goes at once
        assert_eq!(r.reserve(far + 1, 1.0).0, far + 1);
    }

    #[test]
    fn a_holder_killed_in_its_transaction_is_rolled_back() {
        let mut r = row("in_transaction={ hold={ dist='constant', value='500ms' } }").store();
        let mut sink = crate::trace::Collect::default();
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Store);
        let mut timers = Vec::new();
        let mut cx = StoreCx {
            t: Instant(1_000),
            out: &mut sink,
            rng: &mut rng,
            timers: &mut timers,
        };
        let op = PaceOp::Reserve {
            proc_now: 0,
            multiplier: None,
        };
        let served = r.serve(&mut cx, s(0), &op, 1_000);
        assert_eq!(served.hold, Nanos::from_millis(500));
        assert_eq!(r.next_allowed_at(), Some(1_000 + 100_000_000));
        r.serve(&mut cx, s(1), &op, 1_000);
        // killed inside its (second) transaction: the server aborts it
        cx.t = Instant(2_000);
        r.on_crash(&mut cx, s(1));
        assert_eq!(
            r.next_allowed_at(),
            Some(1_000 + 100_000_000),
            "the aborted update is rolled back"
        );
        // a kill after the commit changes nothing
        r.serve(&mut cx, s(2), &op, 2_000);
        cx.t = Instant(900_000_000);
        r.on_crash(&mut cx, s(2));
        assert_eq!(r.next_allowed_at(), Some(1_000 + 200_000_000));
    }
}
