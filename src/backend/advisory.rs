//! `advisory`: K session-level PostgreSQL advisory locks (`pg_try_advisory_lock(k)`), the
//! cross-process primitive of the records' `stage_e_concurrency` module.
//!
//! - **In the store:** no rows. Each lock is held by a *session*; the server forgets it when
//!   the session ends.
//! - **Atomic operation:** `pg_try_advisory_lock(k)` (non-blocking) and
//!   `pg_advisory_unlock(k)`, each atomic in the server's lock manager.
//! - **Uses:** `lock_use = "concurrency"`: at most K fetches at once (the lock is held for the
//!   fetch). `lock_use = "fake_rate"` (rejected by the record): each lock is held for a fixed
//!   `hold` h, so at most K / h fetches per second: the rate follows how long a lock is held
//!   rather than how often it is acquired, and drifts from the target as fetch time, the
//!   polling interval `poll` or h vary. A lock cannot carry a rate: it stores no timestamp.
//! - **Sessions:** a holder occupies a store session for as long as it holds; with
//!   `connections = C`, a process that needs a session while C are held by holders is refused
//!   (it polls again).
//! - **Clock:** none in the store; the holder times `hold` with its own monotonic clock.
//! - **Store failure:** `fail_closed` by default (the record's concurrency module: an
//!   unavailable cap must not let unbounded work pile on); `fallback` overrides it. An unlock
//!   that fails broke the session: the server drops its lock.
//! - **SIGKILL leaves:** a lock held by a dead session until the server notices the session
//!   is gone (`detect_dead`, default 5 s), then it is released: self-healing, with a stall.
//!   A store restart drops every lock while the holders still believe they hold them.

use crate::backend::fallback::FallbackCfg;
use crate::backend::lockset::{LockOp, LockProcess, LockReply, LockTable, LockUse, Protocol, Release};
use crate::backend::options::{self, Fallback, OptionError};
use crate::backend::{Backend, Served, Session, StoreCx, StoreSide};
use crate::clock::Reading;
use crate::fault::KillPoint;
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::ReleaseReason;
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `advisory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvisoryOptions {
    /// Number of locks K. Default 1.
    pub locks: Option<u32>,
    /// `concurrency` (default; the record's module) or `fake_rate` (the record's rejected
    /// alternative).
    pub lock_use: Option<LockUse>,
    /// `fake_rate`: how long each lock is held. Default one interval, `1 / rate` (the
    /// record: "holding each of N locks for exactly 1/R seconds").
    pub hold: Option<Nanos>,
    /// Wait before trying again when every lock is taken. Default 100ms (pacesim's choice).
    pub poll: Option<Nanos>,
    /// How long the server takes to notice a killed session. Default 5s (pacesim's choice;
    /// a live server on loopback notices at once).
    pub detect_dead: Option<Nanos>,
    /// Maximum simultaneous store sessions held by holders. Default: no limit.
    pub connections: Option<u32>,
    /// What a process does when the store is unreachable. Default `fail_closed` (the record's
    /// concurrency module).
    pub fallback: Option<Fallback>,
    /// The divided fallback's cap. Default `processes.count - 1`.
    pub cap: Option<u32>,
    /// In fallback, how long a store error keeps the process from asking the store again (a
    /// circuit breaker). Default: none, every reservation asks (pacesim's choice; the records
    /// do not say).
    pub rejoin_after: Option<Nanos>,
}

/// The advisory-lock backend.
#[derive(Clone, Debug)]
pub struct Advisory {
    proto: Protocol,
    detect_dead: Nanos,
    connections: Option<u32>,
    fallback: FallbackCfg,
}

impl Advisory {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: AdvisoryOptions) -> Result<Advisory, OptionError> {
        options::at_least_one("locks", o.locks)?;
        options::at_least_one("connections", o.connections)?;
        options::positive("poll", o.poll)?;
        options::positive("hold", o.hold)?;
        Ok(Advisory {
            proto: Protocol {
                k: o.locks.unwrap_or(1),
                lock_use: o.lock_use.unwrap_or(LockUse::Concurrency),
                hold: o.hold.unwrap_or(sc.interval()),
                poll: o.poll.unwrap_or(Nanos::from_millis(100)),
            },
            detect_dead: o.detect_dead.unwrap_or(Nanos(5_000_000_000)),
            connections: o.connections,
            fallback: FallbackCfg::new(sc, o.fallback.unwrap_or(Fallback::FailClosed), o.cap, o.rejoin_after)?,
        })
    }
}

impl Backend for Advisory {
    type Op = LockOp;
    type Reply = LockReply;
    type Process = LockProcess;
    type Store = AdvisoryStore;

    fn name(&self) -> &str {
        "advisory"
    }

    fn detail(&self) -> serde_json::Value {
        let proto = &self.proto;
        let detail = serde_json::json!({
            "hold_ns": proto.hold.0,
            "poll_ns": proto.poll.0,
            "connections": self.connections,
        });
        self.fallback.stated(detail)
    }

    fn facts(&self) -> crate::backend::Facts {
        crate::backend::Facts {
            locks: Some(u64::from(self.proto.k)),
            lock_use: Some(self.proto.lock_use.into()),
            detect_dead_ns: Some(self.detect_dead.0),
            fallback: Some(self.fallback.trace_mode().into()),
            ..Default::default()
        }
    }

    fn process(&self, pid: u32) -> LockProcess {
        // unlocked after the fetch (`concurrency`) or after the hold (`fake_rate`); an unlock
        // cut short is sent again by the next acquire
        LockProcess::new(pid, self.proto, Release::Marked, &self.fallback)
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![KillPoint::HoldingLock, KillPoint::SleepingToSlot, KillPoint::MidFetch]
    }

    fn store(&self) -> AdvisoryStore {
        AdvisoryStore {
            locks: LockTable::new(self.proto.k),
            detect_dead: self.detect_dead,
            connections: self.connections,
        }
    }
}

/// The server's lock manager.
#[derive(Clone, Hash, Debug)]
pub struct AdvisoryStore {
    locks: LockTable,
    detect_dead: Nanos,
    connections: Option<u32>,
}

impl StoreSide for AdvisoryStore {
    type Op = LockOp;
    type Reply = LockReply;

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &LockOp, _now: Reading) -> Served<LockReply> {
        match *op {
            LockOp::TryLock { lock } => {
                if let Some(c) = self.connections
                    && self.locks.held() >= c
                    && self.locks.held_by(s).is_none()
                {
                    return Served::now(LockReply::Busy); // too many connections
                }
                Served::now(self.locks.try_take(cx, lock, s))
            }
            LockOp::Unlock { lock } => {
                self.locks.end_section(cx, lock, s);
                Served::now(LockReply::Unlocked)
            }
            // `redis_lock`'s platform cooldown: this design keeps none
            LockOp::CoolDown { .. } | LockOp::Cooling { .. } => Served::now(LockReply::NotCooling),
        }
    }

    fn on_error(&mut self, cx: &mut StoreCx, s: Session, op: &LockOp) {
        // The session broke during the unlock: the server drops its lock when it notices.
        if let LockOp::Unlock { lock } = *op {
            self.locks.end_section(cx, lock, s);
        }
    }

    fn on_crash(&mut self, cx: &mut StoreCx, s: Session) {
        if let Some(lock) = self.locks.held_by(s) {
            // The server notices the dead session after `detect_dead` and frees its lock.
            cx.timers.push((
                cx.t + self.detect_dead,
                ((s.incarnation as u64) << 40) | ((s.pid as u64) << 8) | lock as u64,
            ));
        }
    }

    fn on_timer(&mut self, cx: &mut StoreCx, token: u64) {
        let s = Session {
            incarnation: (token >> 40) as u32,
            pid: ((token >> 8) & 0xFFFF_FFFF) as u32,
            thread: 0, // one thread per process (`Backend::threads`)
        };
        self.locks
            .release(cx, (token & 0xFF) as u32, s, ReleaseReason::SessionGone);
    }

    fn on_store_restart(&mut self, cx: &mut StoreCx) {
        self.locks.clear(cx, ReleaseReason::StoreRestart);
    }
}

impl crate::backend::Configure for AdvisoryOptions {
    type Backend = Advisory;
    fn build(self, sc: &Scenario) -> Result<Advisory, OptionError> {
        Advisory::new(sc, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use crate::trace::{Collect, Event};

    /// What the store side writes to: its trace and its timers.
    struct World {
        sink: Collect,
        timers: Vec<(Instant, u64)>,
        rng: crate::rng::Rng,
    }

    impl World {
        fn at(&mut self, t: u64) -> StoreCx<'_> {
            StoreCx {
                t: Instant(t),
                out: &mut self.sink,
                rng: &mut self.rng,
                timers: &mut self.timers,
            }
        }
    }

    fn session(pid: u32, incarnation: u32) -> Session {
        Session {
            pid,
            incarnation,
            thread: 0,
        }
    }

    /// Issue 37 item 2: a holder that dies is released by the server `detect_dead` later, for
    /// any holder and any lock. (A mutant that decoded the pid from the wrong bits of the
    /// timer's token survived: the only kill scenario killed process 0 on lock 0.)
    #[test]
    fn a_dead_holders_lock_is_freed_at_detect_dead_for_any_pid_and_lock() {
        let sc = crate::registry::parse(
            "t",
            "name='t'\nduration='1m'\n[pacer]\nbackend='advisory'\nrate=2.0\nlocks=4\ndetect_dead='5s'\n[processes]\ncount=6\n",
        )
        .unwrap();
        let b = Advisory::new(&sc, options::parse("advisory", &sc.pacer.options, true).unwrap()).unwrap();
        for (pid, incarnation, lock) in [(0u32, 0u32, 0u32), (1, 0, 1), (5, 3, 3), (4, 1, 2)] {
            let mut store = b.store();
            let mut w = World {
                sink: Collect::default(),
                timers: Vec::new(),
                rng: crate::rng::stream(1, crate::rng::Entity::Store),
            };
            // others hold every lock below `lock`, so `lock` is the one the holder gets
            for other in 0..lock {
                store.serve(
                    &mut w.at(0),
                    session(100 + other, 0),
                    &LockOp::TryLock { lock: other },
                    0,
                );
            }
            let s = session(pid, incarnation);
            assert_eq!(
                store.serve(&mut w.at(0), s, &LockOp::TryLock { lock }, 0).reply,
                LockReply::Locked { lock }
            );
            store.on_crash(&mut w.at(10_000_000_000), s);
            let (due, token) = *w.timers.last().expect("a dead-session timer");
            assert_eq!(
                due,
                Instant(15_000_000_000),
                "pid {pid}: released at kill + detect_dead"
            );
            store.on_timer(&mut w.at(15_000_000_000), token);
            assert!(
                w.sink.events.iter().any(|e| matches!(
                    e,
                    Event::LockReleased { t: 15_000_000_000, pid: p, lock: l, reason: ReleaseReason::SessionGone }
                        if *p == pid && *l == lock
                )),
                "pid {pid} lock {lock}: no session_gone release: {:?}",
                w.sink.events
            );
            // and the lock is free for someone else
            assert_eq!(
                store
                    .serve(&mut w.at(15_000_000_001), session(99, 0), &LockOp::TryLock { lock }, 0)
                    .reply,
                LockReply::Locked { lock },
                "pid {pid} lock {lock}: still held after its session was gone"
            );
        }
    }
}
