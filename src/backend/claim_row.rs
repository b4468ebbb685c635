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

use crate::backend::lockset::{Holders, LockTable};
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::scenario::{Fallback, Scenario};

/// The claimed-row backend.
#[derive(Debug)]
pub struct ClaimRow {
    // ---- in the store: the slot rows ----
    rows: LockTable,
    // ---- each process ----
    procs: Holders,
}

impl ClaimRow {
    /// Build from a scenario.
    pub fn new(sc: &Scenario) -> ClaimRow {
        let procs = Holders::new(sc, "claim_row", Fallback::FailClosed);
        ClaimRow {
            rows: LockTable::new(procs.proto().k),
            procs,
        }
    }
}

impl Backend for ClaimRow {
    fn name(&self) -> &'static str {
        "claim_row"
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "locks": self.procs.proto().k, "lock_use": "concurrency", "poll_ns": self.procs.proto().poll.0, "fallback": self.procs.fallback_name() })
    }

    fn acquire(&mut self, _cx: &mut Cx, p: &ProcView) -> Step {
        self.procs.acquire(p.pid)
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, _now: Reading) -> Served {
        let s = self.procs.session(pid);
        match *op {
            Op::TryLock { lock } => Served::now(self.rows.try_take(cx, lock, s)),
            Op::Unlock { lock } => {
                self.rows.end_section(cx, lock, s);
                Served::now(Reply::Unlocked)
            }
            other => unreachable!("claim_row never sends {other:?}"),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, op: &Op, reply: Reply) -> Step {
        self.procs.on_reply(cx, p.pid, op, reply)
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match op {
            // A failed release leaves the claim in place (nothing retries it): part of the defect.
            Op::Unlock { .. } => self.procs.released(p.pid),
            _ => self.procs.fall_back(cx, p),
        }
    }

    fn after_fetch(&mut self, _cx: &mut Cx, p: &ProcView, _status: u16) -> Step {
        // Released at once (a claim is only ever a concurrency slot), and only once.
        self.procs.unlock_once(p.pid)
    }

    fn on_restart(&mut self, pid: u32) {
        self.procs.restart(pid);
    }

    fn on_crash(&mut self, cx: &mut Cx, pid: u32) {
        // The holder's work ends; its claim does not.
        self.rows.holder_died(cx, self.procs.session(pid));
    }
}
