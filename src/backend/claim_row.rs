//! `claim_row`: a concurrency slot claimed by writing a row. **Defective** in crash scenarios
//! (the design the records' advisory-lock module rejected for crash safety).
//!
//! - **In the store:** K slot rows `(slot, holder)`.
//! - **Atomic operation:** `UPDATE slots SET holder = $me WHERE slot = k AND holder IS NULL`
//!   (claim) and `UPDATE slots SET holder = NULL WHERE slot = k AND holder = $me` (release),
//!   each under the slot row's lock.
//! - **Clock:** none.
//! - **Store failure:** `fail_closed` by default, like the concurrency module it stands in for.
//! - **SIGKILL leaves:** the claim. Nothing ever clears a dead holder's row, so its slot stays
//!   claimed forever and throughput drops for good: a wedge. (The record's point: the same
//!   property that makes a row unsafe for a *claim* makes it correct for a *pace*, which holds
//!   only a timestamp.)

use crate::backend::fallback::Fallbacks;
use crate::backend::lockset::{Holder, LockTable, Protocol};
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::scenario::{Fallback, Scenario};
use crate::trace::Event;

/// The claimed-row backend.
#[derive(Debug)]
pub struct ClaimRow {
    // ---- in the store: the slot rows ----
    rows: LockTable,
    // ---- options ----
    proto: Protocol,
    // ---- each process ----
    procs: Vec<Holder>,
    fallbacks: Fallbacks,
}

impl ClaimRow {
    /// Build from a scenario.
    pub fn new(sc: &Scenario) -> ClaimRow {
        let proto = Protocol::new(sc);
        ClaimRow {
            rows: LockTable::new(proto.k),
            proto,
            procs: vec![Holder::default(); sc.processes.count as usize],
            fallbacks: Fallbacks::with_default(sc, Fallback::FailClosed),
        }
    }
}

impl Backend for ClaimRow {
    fn name(&self) -> &'static str {
        "claim_row"
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "locks": self.proto.k, "lock_use": "concurrency", "poll_ns": self.proto.poll.0, "fallback": self.fallbacks.mode_name() })
    }

    fn acquire(&mut self, _cx: &mut Cx, p: &ProcView) -> Step {
        self.procs[p.pid as usize].tried = 0;
        Step::Send(Op::TryLock {
            lock: self.proto.first(p.pid),
        })
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, _now: Reading) -> Served {
        let s = (pid, self.procs[pid as usize].session);
        match *op {
            Op::TryLock { lock } => Served::now(self.rows.try_take(cx, lock, s)),
            Op::Unlock { lock } => {
                if !self.rows.release(cx, lock, s, "release") {
                    cx.out.event(&Event::LockReleased {
                        t: cx.t.0,
                        pid,
                        lock,
                        reason: "release".into(),
                    });
                }
                Served::now(Reply::Unlocked)
            }
            other => unreachable!("claim_row never sends {other:?}"),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, op: &Op, reply: Reply) -> Step {
        self.fallbacks.on_success(cx, p.pid);
        let h = &mut self.procs[p.pid as usize];
        match (*op, reply) {
            (Op::Unlock { .. }, _) => {
                h.held = None;
                Step::Done
            }
            (Op::TryLock { lock }, r) => match self.proto.on_try_reply(h, cx.t, lock, r) {
                Ok(step) => step,
                Err(next) => Step::Send(Op::TryLock { lock: next }),
            },
            (other, _) => unreachable!("claim_row never sends {other:?}"),
        }
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match op {
            // A failed release leaves the claim in place (nothing retries it): part of the defect.
            Op::Unlock { .. } => {
                self.procs[p.pid as usize].held = None;
                Step::Done
            }
            _ => self.fallbacks.on_error(cx, p, 1.0),
        }
    }

    fn after_fetch(&mut self, _cx: &mut Cx, p: &ProcView, _status: u16) -> Step {
        match self.procs[p.pid as usize].held {
            Some(lock) => Step::Send(Op::Unlock { lock }),
            None => Step::Done,
        }
    }

    fn on_restart(&mut self, pid: u32) {
        let h = &mut self.procs[pid as usize];
        *h = Holder {
            session: h.session + 1,
            ..Holder::default()
        };
        self.fallbacks.reset(pid);
    }

    fn on_crash(&mut self, cx: &mut Cx, pid: u32) {
        let s = (pid, self.procs[pid as usize].session);
        if let Some(lock) = self.rows.held_by(s) {
            // The holder's work ends; its claim does not.
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid,
                lock,
                reason: "holder_died".into(),
            });
        }
    }
}
