//! `local`: a pacer in each process's memory at the full rate. **Defective** (the classic one).
//!
//! - **In the store:** nothing. Each process holds its own `next_allowed` (a
//!   [`crate::pacer::LocalPacer`], the loom-checked in-process code).
//! - **Atomic operation:** a compare-and-swap on the process's own `next_allowed`; it
//!   serialises only the threads of one process.
//! - **Clock:** the process's monotonic clock (harmless here: nobody else reads the value).
//! - **Store failure:** not applicable; there is no store.
//! - **SIGKILL leaves:** nothing; a restarted process starts with a fresh pacer.
//!
//! N processes therefore fetch at N x rate: correct for one process, wrong for a fleet.

use crate::backend::backoff::{LocalBackoff, Placed};
use crate::backend::options::{OptionError, Placement};
use crate::backend::{Backend, NoOp, NoStore, ProcCx, ProcessSide, Step};
use crate::fault::KillPoint;
use crate::pacer::LocalPacer;
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::Event;
use serde::{Deserialize, Serialize};

/// `local` takes no options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalOptions {}

/// The per-process pacer backend: every process paces at `interval`.
#[derive(Clone, Debug)]
pub struct Local {
    name: &'static str,
    interval: Nanos,
    placed: Placed,
}

impl Local {
    /// Every process paces at the full rate.
    pub fn new(sc: &Scenario, _o: LocalOptions) -> Result<Local, OptionError> {
        Ok(Local::with_interval(sc, "local", sc.interval()))
    }

    /// Every process paces at `interval` (see also `local_divided`); backoff per process.
    pub fn with_interval(sc: &Scenario, name: &'static str, interval: Nanos) -> Local {
        Local {
            name,
            interval,
            placed: Placed::new(
                Some(Placement::PerProcess),
                Some(Placement::PerProcess),
                sc.backoff_config(),
            ),
        }
    }
}

impl Backend for Local {
    type Op = NoOp;
    type Reply = NoOp;
    type Process = LocalProcess;
    type Store = NoStore;

    fn name(&self) -> &str {
        self.name
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "interval_ns": self.interval.0, "backoff": "per_process" })
    }

    fn process(&self, _pid: u32) -> LocalProcess {
        LocalProcess {
            interval: self.interval,
            pacer: LocalPacer::new(self.interval.0),
            backoff: self.placed.local(),
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![KillPoint::SleepingToSlot, KillPoint::MidFetch]
    }

    fn store(&self) -> NoStore {
        NoStore
    }
}

/// One process's own pacer and backoff machine.
#[derive(Debug)]
pub struct LocalProcess {
    interval: Nanos,
    pacer: LocalPacer,
    backoff: LocalBackoff,
}

impl ProcessSide for LocalProcess {
    type Op = NoOp;
    type Reply = NoOp;

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<NoOp> {
        let now = cx.mono_ns();
        let m = self.backoff.multiplier();
        let slot = self.pacer.reserve_scaled(now, m);
        let interval = self.interval.scale(m).0;
        cx.out.event(&Event::Grant {
            t: cx.t.0,
            pid: cx.pid,
            slot: slot as i64,
            now: now as i64,
            interval,
            multiplier: m,
        });
        Step::FetchAt(cx.after_mono(Nanos(slot - now)))
    }

    fn on_reply(&mut self, _cx: &mut ProcCx, op: &NoOp, _reply: NoOp) -> Step<NoOp> {
        match *op {}
    }

    fn on_store_error(&mut self, _cx: &mut ProcCx, op: &NoOp) -> Step<NoOp> {
        match *op {}
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, status: u16) -> Step<NoOp> {
        self.backoff.after_response(cx, status);
        Step::Done
    }
}
