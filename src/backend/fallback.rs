//! Fallback composition: what a process using a store-backed backend does when the store is
//! unreachable (an error or a timeout), and how it returns. Process side only.
//!
//! - `fail_open`: pace locally at the full rate. Each process is individually paced, so the
//!   fleet runs at N x rate during the outage: the defect returns exactly when nobody watches
//!   (the pace-row record as written, #648).
//! - `divided`: pace locally at `rate / (cap + 1)`; while at most `cap + 1` processes run, the
//!   fleet stays within the rate (the record's winner, #649).
//! - `fail_closed`: stop fetching; ask the store again after one interval (the records'
//!   concurrency module).
//!
//! The process keeps trying the store on every reservation (each attempt costs a round trip,
//! or a timeout) and leaves fallback on the first success. The in-process switch is
//! [`crate::pacer::FallbackSwitch`], the loom-checked code.

use crate::backend::options::Fallback;
use crate::backend::{ProcCx, Step};
use crate::pacer::{FallbackPolicy, FallbackSwitch};
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, FallbackMode};

/// The fallback options in force (`[pacer] fallback` and `cap`).
#[derive(Copy, Clone, Debug)]
pub struct FallbackCfg {
    /// The mode.
    pub mode: Fallback,
    policy: FallbackPolicy,
    rate: f64,
    retry: Nanos,
}

impl FallbackCfg {
    /// From the options: `mode` (the backend's default when absent) and `cap` (default
    /// `processes.count - 1`, pacesim's choice: the divided pace is then `rate / count`).
    pub fn new(sc: &Scenario, mode: Fallback, cap: Option<u32>) -> FallbackCfg {
        let cap = cap.unwrap_or(sc.processes.count.saturating_sub(1));
        let policy = match mode {
            Fallback::FailOpen => FallbackPolicy::FailOpen,
            Fallback::Divided => FallbackPolicy::Divided { cap },
            Fallback::FailClosed => FallbackPolicy::FailClosed,
        };
        FallbackCfg {
            mode,
            policy,
            rate: sc.pacer.rate,
            retry: sc.interval(),
        }
    }

    /// The mode's name, as in scenario files.
    pub fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    /// The mode, as the trace names it.
    pub fn trace_mode(&self) -> FallbackMode {
        match self.mode {
            Fallback::FailOpen => FallbackMode::FailOpen,
            Fallback::Divided => FallbackMode::Divided,
            Fallback::FailClosed => FallbackMode::FailClosed,
        }
    }

    /// A process's switch, outside fallback.
    pub fn fresh(&self) -> ProcFallback {
        ProcFallback {
            cfg: *self,
            switch: FallbackSwitch::new(self.policy, self.rate),
            floor: 0,
        }
    }
}

/// One process's fallback switch.
#[derive(Debug)]
pub struct ProcFallback {
    cfg: FallbackCfg,
    switch: FallbackSwitch,
    // invariant: floor = the process's last shared slot (its monotonic clock) plus one
    // fallback interval: entering fallback never schedules a fetch closer than that to the
    // last shared one, so a process does not fetch twice in one interval at the switch.
    floor: u64,
}

impl ProcFallback {
    /// The store failed the process: enter fallback if not already in it, and pace locally
    /// (the local interval scaled by `multiplier`).
    pub fn on_error<Op>(&mut self, cx: &mut ProcCx, multiplier: f64) -> Step<Op> {
        if self.switch.enter_fallback() {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid: cx.pid,
                enter: true,
                mode: self.cfg.trace_mode(),
            });
        }
        let now = cx.mono_ns();
        let from = now.max(self.floor);
        match self.switch.reserve_fallback_scaled(from, multiplier.max(1.0)) {
            Ok(slot) => Step::FetchAt(cx.after_mono(Nanos(slot.saturating_sub(now)))),
            Err(_) => Step::RetryAt(cx.t + self.cfg.retry),
        }
    }

    /// The process was granted a shared slot at reference time `wake`: a later fallback must
    /// not schedule its next fetch closer than one fallback interval after it.
    pub fn note_slot(&mut self, cx: &ProcCx, wake: Instant) {
        let gap = self.switch.fallback_interval().unwrap_or(0);
        self.floor = cx.mono_ns_at(wake).saturating_add(gap);
    }

    /// The store answered again: leave fallback.
    pub fn on_success(&mut self, cx: &mut ProcCx) {
        if self.switch.exit_fallback().is_some() {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid: cx.pid,
                enter: false,
                mode: self.cfg.trace_mode(),
            });
        }
    }
}
