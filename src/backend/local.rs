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

use crate::backend::backoff::Placed;
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::pacer::{Backoff, LocalPacer};
use crate::scenario::{Placement, Scenario};
use crate::time::Nanos;
use crate::trace::Event;

/// The per-process pacer backend.
#[derive(Debug)]
pub struct Local {
    name: &'static str,
    interval: Nanos,
    placed: Placed,
    pacers: Vec<LocalPacer>,
    backoff: Vec<Backoff>,
}

impl Local {
    /// Build from a scenario: every process paces at the full rate.
    pub fn new(sc: &Scenario) -> Local {
        Local::with_interval(sc, "local", sc.interval())
    }

    /// Every process paces at `interval` (see also `local_divided`).
    pub fn with_interval(sc: &Scenario, name: &'static str, interval: Nanos) -> Local {
        let placed = Placed::new(Some(Placement::PerProcess), Some(Placement::PerProcess), &sc.backoff);
        let n = sc.processes.count as usize;
        Local {
            name,
            interval,
            placed,
            pacers: (0..n).map(|_| LocalPacer::new(interval.0)).collect(),
            backoff: (0..n).map(|_| placed.fresh()).collect(),
        }
    }
}

impl Backend for Local {
    fn name(&self) -> &'static str {
        self.name
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "interval_ns": self.interval.0, "backoff": "per_process" })
    }

    fn acquire(&mut self, cx: &mut Cx, p: &ProcView) -> Step {
        let now = p.mono_ns(cx.t);
        let m = self.backoff[p.pid as usize].multiplier();
        let slot = self.pacers[p.pid as usize].reserve_scaled(now, m);
        let interval = self.interval.scale(m).0;
        cx.out.event(&Event::Grant {
            t: cx.t.0,
            pid: p.pid,
            slot: slot as i64,
            now: now as i64,
            interval,
            multiplier: m,
        });
        Step::FetchAt(cx.t + p.mono.ref_duration(Nanos(slot - now)))
    }

    fn serve(&mut self, _cx: &mut Cx, _pid: u32, op: &Op, _now: Reading) -> Served {
        unreachable!("local never sends {op:?} to a store")
    }

    fn on_reply(&mut self, _cx: &mut Cx, _p: &ProcView, _op: &Op, _reply: Reply) -> Step {
        Step::Done
    }

    fn on_store_error(&mut self, _cx: &mut Cx, _p: &ProcView, _op: &Op) -> Step {
        Step::Done
    }

    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, status: u16) -> Step {
        self.placed
            .after_response(cx, p.pid, &mut self.backoff[p.pid as usize], status);
        Step::Done
    }

    fn on_restart(&mut self, pid: u32) {
        self.pacers[pid as usize] = LocalPacer::new(self.interval.0);
        self.backoff[pid as usize] = self.placed.fresh();
    }
}
