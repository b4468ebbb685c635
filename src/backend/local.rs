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
//!
//! **Threads** (`[processes] threads = M`): the pacer is the process's, shared by its M threads
//! ([`Threads::Shared`]), as the record's limiter is: one process of any number of threads
//! fetches at the rate ("a genuine 7/s - correct, but by accident"), N processes at N x rate
//! whatever M is. Variant `per = "thread"` (defect): each thread builds its own limiter
//! instance ([`Threads::PerThread`]), so a process of M threads fetches at M x rate: #653's
//! "independent limiter instances on threads", the weaker witness of a per-process defect.

use crate::backend::backoff::{LocalBackoff, Placed};
use crate::backend::options::{OptionError, Placement};
use crate::backend::{Backend, NoOp, NoStore, ProcCx, ProcessSide, Step, Threads};
use crate::fault::KillPoint;
use crate::pacer::LocalPacer;
use crate::scenario::Scenario;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `local`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalOptions {
    /// Whose limiter instance a thread uses: `process` (default; the record's one
    /// `_DestinationLimiter` per process) or `thread` (one instance per thread: #653's
    /// independent limiters on threads).
    pub per: Option<Per>,
}

/// Whose limiter instance a thread of a process uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// One per process, shared by its threads.
    Process,
    /// One per thread.
    Thread,
}

/// The per-process pacer backend: every process paces at `interval`.
#[derive(Clone, Debug)]
pub struct Local {
    name: &'static str,
    interval: Nanos,
    placed: Placed,
    per: Per,
}

impl Local {
    /// Every process paces at the full rate.
    pub fn new(sc: &Scenario, o: LocalOptions) -> Result<Local, OptionError> {
        let mut l = Local::with_interval(sc, "local", sc.interval());
        l.per = o.per.unwrap_or(Per::Process);
        Ok(l)
    }

    /// Every process paces at `interval` (see also `local_divided`); backoff per process.
    pub(crate) fn with_interval(sc: &Scenario, name: &'static str, interval: Nanos) -> Local {
        Local {
            name,
            interval,
            placed: Placed::new(
                Some(Placement::PerProcess),
                Some(Placement::PerProcess),
                sc.backoff_config(),
            ),
            per: Per::Process,
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
        let mut d = serde_json::json!({ "interval_ns": self.interval.0 });
        if self.per == Per::Thread {
            d["per"] = serde_json::json!(self.per);
        }
        d
    }

    fn facts(&self) -> crate::backend::Facts {
        crate::backend::Facts {
            backoff: Some(crate::trace::BackoffPlace::PerProcess),
            process_spacing_ns: Some(self.interval.0),
            ..Default::default()
        }
    }

    fn threads(&self) -> Threads {
        match self.per {
            Per::Process => Threads::Shared,
            Per::Thread => Threads::PerThread,
        }
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
#[derive(Clone, Hash, Debug)]
pub struct LocalProcess {
    interval: Nanos,
    pacer: LocalPacer,
    backoff: LocalBackoff,
}

impl ProcessSide for LocalProcess {
    type Op = NoOp;
    type Reply = NoOp;
    // (it keeps no process id: its pacer, its backoff)
    const SYMMETRIC: bool = true;

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<NoOp> {
        let now = cx.mono_ns();
        let m = self.backoff.multiplier();
        let slot = self.pacer.reserve_scaled(now, m);
        let interval = self.interval.scale(m).0;
        cx.out
            .grant(cx.t.0, cx.pid, cx.thread, slot as i64, now as i64, interval, m);
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

impl crate::backend::Configure for LocalOptions {
    type Backend = Local;
    fn build(self, sc: &Scenario) -> Result<Local, OptionError> {
        Local::new(sc, self)
    }
}
