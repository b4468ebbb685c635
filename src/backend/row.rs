//! `row`: the global pace row (design record "Make the 7/s fetch cap global").
//!
//! - **In the store:** one row per destination: `next_allowed_at`, and (with
//!   `backoff = "global"`) `backoff_multiplier` and `clean_streak`.
//! - **Atomic operation:** one autocommit statement under the row lock:
//!   `UPDATE pace SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at) +
//!   interval * backoff_multiplier RETURNING slot, clock_timestamp()`, i.e.
//!   `slot = max(now, next_allowed_at); next_allowed_at = slot + interval * multiplier`.
//!   Concurrent reservers serialise on the row lock, so slots form one strictly increasing
//!   sequence spaced by the interval in force.
//! - **Clock:** the store's (`clock_timestamp()`). Variant `clock = "process_monotonic"`
//!   (defect): each process sends its own monotonic reading, whose epoch is per process, and
//!   the statement uses that instead; a stored pace further ahead than `stale_after` is taken
//!   for a stale row and overwritten, so processes with different epochs keep resetting each
//!   other's pace and each runs free: N x rate while looking coordinated.
//! - **Wait:** `relative` sleeps `slot - now` from when the reply arrives (skew-immune);
//!   `absolute` sleeps until the host's wall clock reads `slot` (host/store skew shifts it).
//! - **Transaction:** autocommit releases the row lock the instant the statement returns.
//!   Variant `in_transaction` (defect): the reservation runs inside the caller's transaction,
//!   so the row lock is held until it commits and every other reserver waits behind it:
//!   throughput falls to about 1 / hold.
//! - **Store failure:** the process falls back ([`super::fallback`]), logging the switch.
//! - **SIGKILL leaves:** at most one reserved-but-unused slot: the pace is at most one interval
//!   ahead, and self-heals within one interval. No claim, nothing to reconcile. (Killed inside
//!   an open transaction, the update is rolled back when the store notices the session died.)

use crate::backend::backoff::Backoffs;
use crate::backend::fallback::Fallbacks;
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::dist::Dist;
use crate::scenario::{ClockSource, Scenario, WaitMode};
use crate::time::{Instant, Nanos};
use crate::trace::Event;

/// The row backend.
#[derive(Debug)]
pub struct Row {
    name: &'static str,
    // ---- the row, in the store ----
    // invariant: every slot granted is >= the previous slot + its interval, so slots strictly
    // increase (store clock); `None` until the first reservation creates the row.
    next_allowed_at: Option<Reading>,
    // the backoff_multiplier and clean_streak columns, and each process's own machine
    backoff: Backoffs,
    // ---- options ----
    interval: Nanos,
    clock: ClockSource,
    wait: WaitMode,
    in_transaction: Option<Dist>,
    // The caller's transaction still open on the row, if any: (holder, the row's value before
    // its update, when it commits). A holder killed before the commit is rolled back.
    open_tx: Option<(u32, Option<Reading>, Instant)>,
    stale_after: Nanos,
    // ---- each process's memory ----
    fallbacks: Fallbacks,
}

impl Row {
    /// Build from a scenario.
    pub fn new(sc: &Scenario) -> Row {
        let p = &sc.pacer;
        Row {
            name: "row",
            next_allowed_at: None,
            open_tx: None,
            backoff: Backoffs::new(sc),
            interval: sc.interval(),
            clock: p.clock.unwrap_or(ClockSource::Store),
            wait: p.wait.unwrap_or(WaitMode::Relative),
            in_transaction: p.in_transaction.as_ref().map(|t| t.hold.clone()),
            stale_after: p.stale_after.unwrap_or(Nanos(10_000_000_000)),
            fallbacks: Fallbacks::new(sc),
        }
    }

    /// The same statement kept under a cache key (see [`super::shared_cache`]).
    pub fn renamed(mut self, name: &'static str) -> Row {
        self.name = name;
        self
    }

    /// The stored `next_allowed_at` (tests).
    pub fn next_allowed_at(&self) -> Option<Reading> {
        self.next_allowed_at
    }

    /// The statement: `slot = GREATEST(now, next_allowed_at); next_allowed_at = slot + I * m`.
    /// Returns `(slot, interval applied)`.
    pub fn reserve(&mut self, now: Reading, multiplier: f64) -> (Reading, Nanos) {
        let interval = self.interval.scale(multiplier);
        let mut slot = self.next_allowed_at.map_or(now, |next| next.max(now));
        if self.clock == ClockSource::ProcessMonotonic && slot - now > self.stale_after.0 as i64 {
            slot = now; // "stale row": the recovery code a per-process clock design needs
        }
        self.next_allowed_at = Some(slot + interval.0 as i64);
        (slot, interval)
    }
}

impl Backend for Row {
    fn name(&self) -> &'static str {
        self.name
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "storage": if self.name == "row" { "pace row (migration)" } else { "reserved key in the shared cache table" },
            "interval_ns": self.interval.0,
            "clock": self.clock,
            "wait": self.wait,
            "in_transaction": self.in_transaction,
            "fallback": self.fallbacks.mode_name(),
            "backoff": self.backoff.placed.multiplier,
            "streak": self.backoff.placed.streak,
        })
    }

    fn acquire(&mut self, cx: &mut Cx, p: &ProcView) -> Step {
        Step::Send(Op::Reserve {
            proc_now: p.mono.read(cx.t),
            multiplier: self.backoff.own_multiplier(p.pid),
        })
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, now: Reading) -> Served {
        match *op {
            Op::Reserve { proc_now, multiplier } => {
                let now = match self.clock {
                    ClockSource::Store => now,
                    ClockSource::ProcessMonotonic => proc_now,
                };
                let m = multiplier.unwrap_or(self.backoff.shared_multiplier());
                let before = self.next_allowed_at;
                let (slot, interval) = self.reserve(now, m);
                cx.out.event(&Event::Grant {
                    t: cx.t.0,
                    pid,
                    slot,
                    now,
                    interval: interval.0,
                    multiplier: m,
                });
                let hold = self
                    .in_transaction
                    .as_ref()
                    .map_or(Nanos::ZERO, |d| d.sample(cx.store_rng));
                self.open_tx = (hold.0 > 0).then_some((pid, before, cx.t + hold));
                Served {
                    reply: Reply::Slot { slot, now },
                    hold,
                }
            }
            Op::Report(signal) => Served::now(self.backoff.serve(cx, signal)),
            other => unreachable!("{} never sends {other:?}", self.name),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, _op: &Op, reply: Reply) -> Step {
        self.fallbacks.on_success(cx, p.pid);
        match reply {
            Reply::Slot { slot, now } => {
                let wake: Instant = match (self.wait, self.clock) {
                    (WaitMode::Relative, ClockSource::Store) => {
                        cx.t + p.mono.ref_duration(Nanos((slot - now).max(0) as u64))
                    }
                    (WaitMode::Relative, ClockSource::ProcessMonotonic) => {
                        let mine = p.mono.read(cx.t);
                        cx.t + p.mono.ref_duration(Nanos((slot - mine).max(0) as u64))
                    }
                    (WaitMode::Absolute, _) => p.wall.when_reads(cx.t, slot),
                };
                self.fallbacks.note_slot(p, wake);
                Step::FetchAt(wake)
            }
            Reply::Backoff { .. } => self.backoff.on_reply(cx, p.pid, reply),
            other => unreachable!("{} never gets {other:?}", self.name),
        }
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match op {
            Op::Reserve { .. } => self.fallbacks.on_error(cx, p, self.backoff.in_force(p.pid)),
            // A lost report: the response is forgotten, as a failed UPDATE would be.
            _ => Step::Done,
        }
    }

    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, status: u16) -> Step {
        self.backoff.after_fetch(cx, p.pid, status)
    }

    fn on_restart(&mut self, pid: u32) {
        self.backoff.reset(pid);
        self.fallbacks.reset(pid);
    }

    fn on_crash(&mut self, cx: &mut Cx, pid: u32) {
        // Killed inside its open transaction: the server aborts it, so the update never
        // happened. (The row lock is modelled as held until the transaction's planned end.)
        if let Some((holder, before, commit)) = self.open_tx
            && holder == pid
            && cx.t < commit
        {
            self.next_allowed_at = before;
            self.open_tx = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn row(extra: &str) -> Row {
        let src =
            format!("name='t'\nduration='1s'\n[pacer]\nbackend='row'\nrate=10.0\n{extra}\n[processes]\ncount=2\n");
        Row::new(&Scenario::parse("t", &src).unwrap())
    }

    #[test]
    fn statement_arithmetic_with_multiplier() {
        let mut r = row("");
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
    fn process_clock_resets_a_far_ahead_pace() {
        let mut r = row("clock='process_monotonic'\nstale_after='1s'");
        let far = 3_600_000_000_000; // a process whose epoch is an hour ahead
        assert_eq!(r.reserve(far, 1.0).0, far);
        // a process with epoch zero sees a pace an hour ahead, takes it for stale, resets it
        assert_eq!(r.reserve(5, 1.0).0, 5);
        // and the hour-ahead process now sees a pace in its past: it goes at once
        assert_eq!(r.reserve(far + 1, 1.0).0, far + 1);
    }

    #[test]
    fn a_holder_killed_in_its_transaction_is_rolled_back() {
        let mut r = row("in_transaction={ hold={ dist='constant', value='500ms' } }");
        let mut sink = crate::trace::Collect::default();
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Store);
        let mut timers = Vec::new();
        let mut cx = Cx {
            t: Instant(1_000),
            out: &mut sink,
            store_rng: &mut rng,
            timers: &mut timers,
        };
        let op = Op::Reserve {
            proc_now: 0,
            multiplier: None,
        };
        let served = r.serve(&mut cx, 0, &op, 1_000);
        assert_eq!(served.hold, Nanos::from_millis(500));
        assert_eq!(r.next_allowed_at(), Some(1_000 + 100_000_000));
        r.serve(&mut cx, 1, &op, 1_000);
        // killed inside its (second) transaction: the server aborts it
        cx.t = Instant(2_000);
        r.on_crash(&mut cx, 1);
        assert_eq!(
            r.next_allowed_at(),
            Some(1_000 + 100_000_000),
            "the aborted update is rolled back"
        );
        // a kill after the commit changes nothing
        r.serve(&mut cx, 2, &op, 2_000);
        cx.t = Instant(900_000_000);
        r.on_crash(&mut cx, 2);
        assert_eq!(r.next_allowed_at(), Some(1_000 + 200_000_000));
    }
}
