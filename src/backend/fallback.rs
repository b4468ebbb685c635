//! Fallback composition: what a process using a store-backed backend does when the store is
//! unreachable (an error or a timeout), and how it returns.
//!
//! - `fail_open`: pace locally at the full rate. Each process is individually paced, so the
//!   fleet runs at N x rate during the outage: the defect returns exactly when nobody watches.
//! - `divided`: pace locally at `rate / (cap + 1)`; while at most `cap + 1` processes run, the
//!   fleet stays within the rate.
//! - `fail_closed`: stop fetching; ask the store again after one interval.
//!
//! The process keeps trying the store on every reservation (each attempt costs a round trip,
//! or a timeout) and leaves fallback on the first success. The in-process switch is
//! [`crate::pacer::FallbackSwitch`], the loom-checked code.

use crate::backend::{Cx, ProcView, Step};
use crate::pacer::{FallbackPolicy, FallbackSwitch};
use crate::scenario::{Fallback, Scenario};
use crate::time::Nanos;
use crate::trace::{Event, FallbackMode};

/// Each process's fallback switch.
#[derive(Debug)]
pub struct Fallbacks {
    mode: Fallback,
    policy: FallbackPolicy,
    rate: f64,
    retry: Nanos,
    switches: Vec<FallbackSwitch>,
    // invariant: floor[pid] = the process's last shared slot (its monotonic clock) plus one
    // fallback interval: entering fallback never schedules a fetch closer than that to the
    // last shared one, so a process does not fetch twice in one interval at the switch.
    floor: Vec<u64>,
}

impl Fallbacks {
    /// One switch per process, from `[pacer] fallback` (default `divided`) and `cap`.
    pub fn new(sc: &Scenario) -> Fallbacks {
        Fallbacks::with_default(sc, Fallback::Divided)
    }

    /// As [`Fallbacks::new`], with a backend-specific default mode.
    pub fn with_default(sc: &Scenario, default: Fallback) -> Fallbacks {
        let mode = sc.pacer.fallback.unwrap_or(default);
        let policy = match mode {
            Fallback::FailOpen => FallbackPolicy::FailOpen,
            Fallback::Divided => FallbackPolicy::Divided { cap: sc.cap() },
            Fallback::FailClosed => FallbackPolicy::FailClosed,
        };
        let rate = sc.pacer.rate;
        Fallbacks {
            mode,
            policy,
            rate,
            retry: sc.interval(),
            switches: (0..sc.processes.count)
                .map(|_| FallbackSwitch::new(policy, rate))
                .collect(),
            floor: vec![0; sc.processes.count as usize],
        }
    }

    /// The mode's name, as in scenario files.
    pub fn mode_name(&self) -> &'static str {
        self.trace_mode().name()
    }

    /// The mode, as `fallback` trace events carry it.
    pub fn trace_mode(&self) -> FallbackMode {
        match self.mode {
            Fallback::FailOpen => FallbackMode::FailOpen,
            Fallback::Divided => FallbackMode::Divided,
            Fallback::FailClosed => FallbackMode::FailClosed,
        }
    }

    /// The store failed `p`: enter fallback if not already in it, and pace locally.
    pub fn on_error(&mut self, cx: &mut Cx, p: &ProcView, multiplier: f64) -> Step {
        let sw = &self.switches[p.pid as usize];
        if sw.enter_fallback() {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid: p.pid,
                enter: true,
                mode: self.trace_mode(),
            });
        }
        let now = p.mono_ns(cx.t);
        let from = now.max(self.floor[p.pid as usize]);
        match sw.reserve_fallback_scaled(from, multiplier.max(1.0)) {
            Ok(slot) => Step::FetchAt(cx.t + p.mono.ref_duration(Nanos(slot.saturating_sub(now)))),
            Err(_) => Step::RetryAt(cx.t + self.retry),
        }
    }

    /// `p` was granted a shared slot at reference time `wake`: a later fallback must not
    /// schedule its next fetch closer than one fallback interval after it.
    pub fn note_slot(&mut self, p: &ProcView, wake: crate::time::Instant) {
        let gap = self.switches[p.pid as usize].fallback_interval().unwrap_or(0);
        self.floor[p.pid as usize] = p.mono_ns(wake).saturating_add(gap);
    }

    /// The store answered `p` again: leave fallback.
    pub fn on_success(&mut self, cx: &mut Cx, pid: u32) {
        if self.switches[pid as usize].exit_fallback().is_some() {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid,
                enter: false,
                mode: self.trace_mode(),
            });
        }
    }

    /// A fresh process starts outside fallback.
    pub fn reset(&mut self, pid: u32) {
        self.switches[pid as usize] = FallbackSwitch::new(self.policy, self.rate);
        self.floor[pid as usize] = 0;
    }
}
