//! `claim_row`: a concurrency slot claimed by writing a row. **Defective** in crash scenarios
//! (the design the records' advisory-lock module rejected for crash safety).
//!
//! - **In the store:** K slot rows `(slot, holder)`.
//! - **Atomic operation:** `UPDATE slots SET holder = $me WHERE slot = k AND holder IS NULL`
//!   (claim) and `UPDATE slots SET holder = NULL WHERE slot = k AND holder = $me` (release),
//!   each under the slot row's lock.
//! - **Clock:** none.
//! - **Store failure:** `fail_closed` by default, like the concurrency module it stands in for.
//!   A failed release leaves the claim in place (nothing retries it): part of the defect.
//! - **SIGKILL leaves:** the claim. Nothing ever clears a dead holder's row, so its slot stays
//!   claimed forever and throughput drops for good: a wedge. (The record's point: the same
//!   property that makes a row unsafe for a *claim* makes it correct for a *pace*, which holds
//!   only a timestamp.)

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

/// `[pacer]` options of `claim_row`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRowOptions {
    /// Number of slot rows K. Default 1.
    pub locks: Option<u32>,
    /// Wait before trying again when every slot is claimed. Default 100ms (pacesim's choice).
    pub poll: Option<Nanos>,
    /// What a process does when the store is unreachable. Default `fail_closed`.
    pub fallback: Option<Fallback>,
    /// The divided fallback's cap. Default `processes.count - 1`.
    pub cap: Option<u32>,
    /// In fallback, how long a store error keeps the process from asking the store again (a
    /// circuit breaker). Default: none, every reservation asks (pacesim's choice; the records
    /// do not say).
    pub rejoin_after: Option<Nanos>,
}

/// The claimed-row backend.
#[derive(Clone, Debug)]
pub struct ClaimRow {
    proto: Protocol,
    fallback: FallbackCfg,
}

impl ClaimRow {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: ClaimRowOptions) -> Result<ClaimRow, OptionError> {
        options::at_least_one("locks", o.locks)?;
        options::positive("poll", o.poll)?;
        Ok(ClaimRow {
            proto: Protocol {
                k: o.locks.unwrap_or(1),
                lock_use: LockUse::Concurrency,
                hold: sc.interval(),
                poll: o.poll.unwrap_or(Nanos::from_millis(100)),
            },
            fallback: FallbackCfg::new(sc, o.fallback.unwrap_or(Fallback::FailClosed), o.cap, o.rejoin_after)?,
        })
    }
}

impl Backend for ClaimRow {
    type Op = LockOp;
    type Reply = LockReply;
    type Process = LockProcess;
    type Store = ClaimRowStore;

    fn name(&self) -> &str {
        "claim_row"
    }

    fn detail(&self) -> serde_json::Value {
        let detail = serde_json::json!({ "poll_ns": self.proto.poll.0 });
        self.fallback.stated(detail)
    }

    fn facts(&self) -> crate::backend::Facts {
        crate::backend::Facts {
            locks: Some(u64::from(self.proto.k)),
            lock_use: Some(crate::trace::LockUse::Concurrency),
            fallback: Some(self.fallback.trace_mode().into()),
            ..Default::default()
        }
    }

    fn process(&self, pid: u32) -> LockProcess {
        // released at once (a claim is only ever a concurrency slot), and only once
        LockProcess::new(pid, self.proto, Release::Once, &self.fallback)
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![KillPoint::HoldingLock, KillPoint::SleepingToSlot, KillPoint::MidFetch]
    }

    fn store(&self) -> ClaimRowStore {
        ClaimRowStore {
            rows: LockTable::new(self.proto.k),
        }
    }
}

/// The slot rows.
#[derive(Clone, Hash, Debug)]
pub struct ClaimRowStore {
    rows: LockTable,
}

impl StoreSide for ClaimRowStore {
    type Op = LockOp;
    type Reply = LockReply;

    /// A claim and a release are both row updates.
    fn durable(&self, _op: &LockOp) -> bool {
        true
    }

    /// The slot rows are truncated: every claim vanishes under its live holder (which goes on
    /// fetching): the wedge clears, and a second process can claim the slot its holder still
    /// uses.
    fn on_state_lost(&mut self, cx: &mut StoreCx) {
        self.rows.clear(cx, ReleaseReason::StateLost);
    }

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &LockOp, _now: Reading) -> Served<LockReply> {
        match *op {
            LockOp::TryLock { lock } => Served::now(self.rows.try_take(cx, lock, s)),
            LockOp::Unlock { lock } => {
                self.rows.end_section(cx, lock, s);
                Served::now(LockReply::Unlocked)
            }
            // `redis_lock`'s platform cooldown: this design keeps none
            LockOp::CoolDown { .. } | LockOp::Cooling { .. } => Served::now(LockReply::NotCooling),
        }
    }
    // A crash leaves the claim: no hook. The holder's work ends; its claim does not.
}

impl crate::backend::Configure for ClaimRowOptions {
    type Backend = ClaimRow;
    fn build(self, sc: &Scenario) -> Result<ClaimRow, OptionError> {
        ClaimRow::new(sc, self)
    }
}
