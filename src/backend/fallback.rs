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
//! **Going back to the store** (the records leave it open; `rejoin_after`):
//! - absent (pacesim's default): the process asks the store on every reservation (each attempt
//!   costs a round trip, or a timeout) and leaves fallback on the first success;
//! - `rejoin_after = "30s"`: a circuit breaker. A store error opens it: for that long the
//!   process paces locally without asking the store; the first reservation after it asks
//!   again (and an error opens it again). While it is open the process sends no reports
//!   either: the store never hears of those responses (its own pacer does).
//!
//! The in-process switch is [`crate::pacer::FallbackSwitch`], the loom-checked code.
//!
//! **A cut-off process throttles by itself.** The fallback is the process's own pacer, and the
//! records' pacers back off on 429/503 whatever paces them. A process cut off from the store
//! cannot read the shared multiplier, so its own pacer starts from the shared multiplier the
//! store last told it (in the reply to its last report, or to its last GCRA check; 1 before
//! any) and runs the `[backoff]` schedule on its own responses until it leaves fallback
//! ([`Pace::Shared`]); the `fallback` event states where it starts. Its steps are
//! `multiplier` events with its pid; the reports it still tries to send fail visibly
//! (`op_sent` report, then `store_error`), and the store never hears of those responses.
//! A backend whose process keeps its own multiplier anyway passes [`Pace::Own`]: that machine
//! already throttles, and the fallback only scales by it.

use crate::backend::options::{self, Fallback, OptionError};
use crate::backend::{ProcCx, Step};
use crate::pacer::{Backoff, BackoffConfig, FallbackPolicy, FallbackSwitch, Status};
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, FallbackMode};

/// The multiplier a process's fallback pace starts from, and who moves it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Pace {
    /// The fleet's shared multiplier as the process last saw it: in
    /// fallback the process runs the backoff schedule from there on its own responses.
    Shared(f64),
    /// The process's own multiplier (it keeps its own schedule in or out of fallback).
    Own(f64),
}

/// The fallback options in force (`[pacer] fallback` and `cap`).
#[derive(Copy, Clone, Debug)]
pub struct FallbackCfg {
    /// The mode.
    pub mode: Fallback,
    policy: FallbackPolicy,
    rate: f64,
    retry: Nanos,
    backoff: BackoffConfig,
    rejoin_after: Option<Nanos>,
}

crate::exact_hash!(FallbackCfg {
    mode,
    policy,
    rate: bits,
    retry,
    backoff,
    rejoin_after
});

impl FallbackCfg {
    /// From the options: `mode` (the backend's default when absent), `cap` (default
    /// `processes.count - 1`, pacesim's choice: the divided pace is then `rate / count`) and
    /// `rejoin_after` (default: none, every reservation asks the store; pacesim's choice).
    ///
    /// # Errors
    ///
    /// `rejoin_after` is zero.
    pub fn new(
        sc: &Scenario,
        mode: Fallback,
        cap: Option<u32>,
        rejoin_after: Option<Nanos>,
    ) -> Result<FallbackCfg, OptionError> {
        options::positive("rejoin_after", rejoin_after)?;
        let cap = cap.unwrap_or(sc.processes.count.saturating_sub(1));
        let policy = match mode {
            Fallback::FailOpen => FallbackPolicy::FailOpen,
            Fallback::Divided => FallbackPolicy::Divided { cap },
            Fallback::FailClosed => FallbackPolicy::FailClosed,
        };
        Ok(FallbackCfg {
            mode,
            policy,
            rate: sc.pacer.rate,
            retry: sc.interval(),
            backoff: sc.backoff_config(),
            rejoin_after,
        })
    }

    /// A backend's stated options with the fallback's added: `rejoin_after_ns` when set
    /// (absent: every reservation asks the store).
    pub fn stated(&self, mut detail: serde_json::Value) -> serde_json::Value {
        if let (Some(after), Some(map)) = (self.rejoin_after, detail.as_object_mut()) {
            map.insert("rejoin_after_ns".into(), after.0.into());
        }
        detail
    }

    /// The circuit breaker's cool-down, if any.
    pub fn rejoin_after(&self) -> Option<Nanos> {
        self.rejoin_after
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
            last_shared: None,
            own: None,
            paced_by: 1.0,
            breaker: None,
        }
    }
}

/// One process's fallback switch.
#[derive(Clone, Debug)]
pub struct ProcFallback {
    cfg: FallbackCfg,
    switch: FallbackSwitch,
    // the process's last shared slot (its monotonic clock): a fallback slot is never closer
    // than one fallback interval (scaled by the multiplier in force) after it, so a process
    // does not fetch twice in one of its intervals at the switch.
    last_shared: Option<u64>,
    // invariant: Some exactly while in fallback with a `Pace::Shared` start: the process's own
    // backoff machine, started at the shared multiplier it last saw.
    own: Option<Backoff>,
    // the multiplier the fallback pace was last scaled by
    paced_by: f64,
    // invariant: Some(t) only in fallback with `rejoin_after` set: before reference time t the
    // process paces locally without asking the store.
    breaker: Option<Instant>,
}

crate::exact_hash!(ProcFallback {
    cfg,
    switch,
    last_shared,
    own,
    paced_by: bits,
    breaker
});

impl ProcFallback {
    /// An explorer's form of the fallback at the process's monotonic reading `mono_now`
    /// ([`crate::form`]): while it never left the shared pace, its configuration, and its last
    /// shared slot only while that can still hold a fallback slot back (less than one
    /// fallback interval at the highest multiplier before now), relative to now. Once it has
    /// fallen back (its local pacer's slots, its breaker), absolute.
    pub fn form(&self, f: &mut crate::form::Form, mono_now: u64) {
        use crate::choice::fingerprint;
        let ProcFallback {
            cfg,
            switch,
            last_shared,
            own,
            paced_by,
            breaker,
        } = self;
        f.word(fingerprint(&(cfg, own, paced_by.to_bits())));
        if switch.epoch().0 != 0 || breaker.is_some() {
            f.word(fingerprint(&(switch, last_shared, breaker)));
            f.absolute();
            return;
        }
        let reach = switch
            .fallback_interval()
            .map_or(0, |gap| crate::pacer::scale_interval(gap, cfg.backoff.cap()));
        match last_shared {
            _ if crate::form::plant::planted(crate::form::plant::Plant::GcraTatAndEveryMirror) => {}
            Some(s) if s.saturating_add(reach) > mono_now => f.word(s.wrapping_sub(mono_now)),
            _ => f.word(u64::MAX),
        }
    }

    /// The store failed the process: enter fallback if not already in it, and pace locally
    /// (the local interval scaled by the multiplier `pace` gives, or by the process's own
    /// fallback machine once it runs one).
    pub fn on_error<Op>(&mut self, cx: &mut ProcCx, pace: Pace) -> Step<Op> {
        let entering = self.switch.enter_fallback();
        if entering && let Pace::Shared(m) = pace {
            let cap = self.cfg.backoff.cap();
            self.own = Backoff::restore(self.cfg.backoff, m.clamp(1.0, cap), 0).ok();
        }
        if let Some(after) = self.cfg.rejoin_after {
            self.breaker = Some(cx.t + after);
        }
        self.local(cx, pace, entering)
    }

    /// Before asking the store: while the breaker is open the process paces locally, without
    /// asking (`None`: ask the store).
    pub fn short_circuit<Op>(&mut self, cx: &mut ProcCx, pace: Pace) -> Option<Step<Op>> {
        match self.breaker {
            Some(until) if cx.t < until => Some(self.local(cx, pace, false)),
            _ => None,
        }
    }

    /// After a fetch: while the breaker is open the process does not ask the store, so a
    /// report it would send is dropped (the store never hears of that response).
    pub fn hold_report<Op>(&self, cx: &ProcCx, step: Step<Op>) -> Step<Op> {
        match (step, self.breaker) {
            (Step::Send(_), Some(until)) if cx.t < until => Step::Done,
            (step, _) => step,
        }
    }

    /// The next local slot (or, fail_closed, the next time to ask), in fallback.
    fn local<Op>(&mut self, cx: &mut ProcCx, pace: Pace, entering: bool) -> Step<Op> {
        let multiplier = match (&self.own, pace) {
            (Some(b), _) => b.multiplier(),
            (None, Pace::Shared(m) | Pace::Own(m)) => m.max(1.0),
        };
        self.paced_by = multiplier;
        if entering {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid: cx.pid,
                enter: true,
                mode: self.cfg.trace_mode(),
                multiplier,
            });
        }
        let now = cx.mono_ns();
        let floor = match (self.last_shared, self.switch.fallback_interval()) {
            (Some(slot), Some(gap)) => slot.saturating_add(crate::pacer::scale_interval(gap, multiplier)),
            _ => 0,
        };
        let from = now.max(floor);
        match self.switch.reserve_fallback_scaled(from, multiplier) {
            Ok(slot) => Step::FetchAt(cx.after_mono(Nanos(slot.saturating_sub(now)))),
            Err(_) => Step::RetryAt(cx.t + self.cfg.retry),
        }
    }

    /// The process was granted a shared slot at reference time `wake`: a later fallback must
    /// not schedule its next fetch closer than one fallback interval (times the multiplier in
    /// force then) after it.
    pub fn note_slot(&mut self, cx: &ProcCx, wake: Instant) {
        self.last_shared = Some(cx.mono_ns_at(wake));
    }

    /// A response arrived: a process in fallback with its own machine runs the schedule on it
    /// (a step is a `multiplier` event with its pid).
    pub fn on_response(&mut self, cx: &mut ProcCx, code: u16) {
        if let Some(b) = &mut self.own
            && let Some(c) = b.on_response(Status::from_http(code))
        {
            cx.out.event(&Event::Multiplier {
                t: cx.t.0,
                pid: Some(cx.pid),
                from: c.from,
                to: c.to,
                cause: crate::backend::backoff::cause_of(c.cause),
            });
        }
    }

    /// The store answered again: leave fallback (the process's own machine is dropped: the
    /// shared multiplier is in force again).
    pub fn on_success(&mut self, cx: &mut ProcCx) {
        let own = self.own.take();
        self.breaker = None;
        if self.switch.exit_fallback().is_some() {
            cx.out.event(&Event::Fallback {
                t: cx.t.0,
                pid: cx.pid,
                enter: false,
                mode: self.cfg.trace_mode(),
                multiplier: own.map_or(self.paced_by, |b| b.multiplier()),
            });
        }
    }
}
