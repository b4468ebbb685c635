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
//!   unavailable cap must not let unbounded work pile on); `fallback` overrides it.
//! - **SIGKILL leaves:** a lock held by a dead session until the server notices the session
//!   is gone (`detect_dead`, default 5 s), then it is released: self-healing, with a stall.
//!   A store restart drops every lock while the holders still believe they hold them.

use crate::backend::lockset::{Holders, LockTable};
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::scenario::{Fallback, Scenario};
use crate::time::Nanos;
use crate::trace::ReleaseReason;

/// The advisory-lock backend.
#[derive(Debug)]
pub struct Advisory {
    // ---- in the store ----
    locks: LockTable,
    // ---- options ----
    detect_dead: Nanos,
    connections: Option<u32>,
    // ---- each process ----
    procs: Holders,
}

impl Advisory {
    /// Build from a scenario.
    pub fn new(sc: &Scenario) -> Advisory {
        let procs = Holders::new(sc, "advisory", Fallback::FailClosed);
        Advisory {
            locks: LockTable::new(procs.proto().k),
            detect_dead: sc.pacer.detect_dead.unwrap_or(Nanos(5_000_000_000)),
            connections: sc.pacer.connections,
            procs,
        }
    }
}

impl Backend for Advisory {
    fn name(&self) -> &'static str {
        "advisory"
    }

    fn detail(&self) -> serde_json::Value {
        let proto = self.procs.proto();
        serde_json::json!({
            "locks": proto.k,
            "lock_use": proto.lock_use,
            "hold_ns": proto.hold.0,
            "poll_ns": proto.poll.0,
            "detect_dead_ns": self.detect_dead.0,
            "connections": self.connections,
            "fallback": self.procs.fallback_name(),
        })
    }

    fn acquire(&mut self, _cx: &mut Cx, p: &ProcView) -> Step {
        self.procs.acquire(p.pid)
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, _now: Reading) -> Served {
        let s = self.procs.session(pid);
        match *op {
            Op::TryLock { lock } => {
                if let Some(c) = self.connections
                    && self.locks.held() >= c
                    && self.locks.held_by(s).is_none()
                {
                    return Served::now(Reply::Busy); // too many connections
                }
                Served::now(self.locks.try_take(cx, lock, s))
            }
            Op::Unlock { lock } => {
                self.locks.end_section(cx, lock, s);
                Served::now(Reply::Unlocked)
            }
            other => unreachable!("advisory never sends {other:?}"),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, op: &Op, reply: Reply) -> Step {
        self.procs.on_reply(cx, p.pid, op, reply)
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match *op {
            // The session broke: the server drops its lock when it notices.
            Op::Unlock { lock } => {
                self.locks.end_section(cx, lock, self.procs.session(p.pid));
                self.procs.released(p.pid)
            }
            _ => self.procs.fall_back(cx, p),
        }
    }

    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, _status: u16) -> Step {
        // Unlocked now (`concurrency`) or after the hold (`fake_rate`); an unlock cut short
        // is sent again by the next acquire.
        self.procs.after_fetch(cx.t, p.pid)
    }

    fn on_restart(&mut self, pid: u32) {
        self.procs.restart(pid);
    }

    fn on_crash(&mut self, cx: &mut Cx, pid: u32) {
        let s = self.procs.session(pid);
        if let Some(lock) = self.locks.holder_died(cx, s) {
            // The server notices the dead session after `detect_dead` and frees its lock.
            cx.timers.push((
                cx.t + self.detect_dead,
                ((s.1 as u64) << 40) | ((pid as u64) << 8) | lock as u64,
            ));
        }
    }

    fn on_timer(&mut self, cx: &mut Cx, token: u64) {
        let (session, pid, lock) = (
            (token >> 40) as u32,
            ((token >> 8) & 0xFFFF_FFFF) as u32,
            (token & 0xFF) as u32,
        );
        self.locks.release(cx, lock, (pid, session), ReleaseReason::SessionGone);
    }

    fn on_store_restart(&mut self, cx: &mut Cx) {
        self.locks.clear(cx, ReleaseReason::StoreRestart);
    }
}
