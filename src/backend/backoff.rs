//! Where backoff state lives: the multiplier and the clean streak, each either in the shared
//! store (`global`) or in each process's memory (`per_process`).
//!
//! The schedule itself is [`crate::pacer::Backoff`] (429/503 multiply, K clean responses
//! divide, clamped to `[1, cap]`). The records name a defect for each piece kept per process:
//! diverging multipliers write conflicting paces into one row (each reservation advances it by
//! its own process's interval x multiplier), and per-process streaks cross the decay threshold
//! together (the records say "N times too fast"; `tests/stories.rs` story 3 measures clustered
//! steps at the same average rate). So the two are placed
//! independently:
//!
//! | multiplier | streak      | after a response the process...                                 |
//! |------------|-------------|-----------------------------------------------------------------|
//! | global     | global      | sends the status; the store runs the whole schedule             |
//! | global     | per_process | counts its own streak; sends `bump` on 429/503, `decay` on K    |
//! | per_process| global      | bumps its own multiplier; sends clean/other to the shared streak |
//! | per_process| per_process | runs the whole schedule itself; the store never hears of it     |

use crate::backend::{Cx, Op, Reply, Step};
use crate::pacer::{Backoff, BackoffConfig, Status};
use crate::scenario::{BackoffCfg, Placement, Scenario};
use crate::trace::{Event, MultiplierCause};

/// What a process tells the shared backoff state.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Signal {
    /// Run the whole schedule on this response (both pieces global).
    Response(Status),
    /// Multiply the shared multiplier (the streak is kept elsewhere).
    Bump(Status),
    /// Divide the shared multiplier (a per-process streak reached K).
    Decay,
    /// Count this response in the shared streak only; the reply says whether it reached K.
    Streak(Status),
}

/// The placement of the two pieces, and the schedule.
#[derive(Copy, Clone, Debug)]
pub struct Placed {
    /// Where the multiplier lives.
    pub multiplier: Placement,
    /// Where the streak lives.
    pub streak: Placement,
    /// The schedule.
    pub config: BackoffConfig,
}

impl Placed {
    /// From the scenario (`[pacer] backoff`, `streak`, and `[backoff]`).
    pub fn new(multiplier: Option<Placement>, streak: Option<Placement>, cfg: &BackoffCfg) -> Placed {
        let multiplier = multiplier.unwrap_or(Placement::Global);
        Placed {
            multiplier,
            streak: streak.unwrap_or(multiplier),
            config: BackoffConfig::new(cfg.factor, cfg.cap, cfg.decay_after.max(1)).expect("validated backoff"),
        }
    }

    /// A fresh state machine.
    pub fn fresh(&self) -> Backoff {
        Backoff::new(self.config)
    }

    /// The multiplier a process sends with its reservation, when it keeps its own.
    pub fn own_multiplier(&self, local: &Backoff) -> Option<f64> {
        (self.multiplier == Placement::PerProcess).then(|| local.multiplier())
    }

    /// Process side, after a response: update local state, and say what to tell the store.
    pub fn after_response(&self, cx: &mut Cx, pid: u32, local: &mut Backoff, code: u16) -> Option<Signal> {
        let status = Status::from_http(code);
        use Placement::*;
        match (self.multiplier, self.streak) {
            (Global, Global) => Some(Signal::Response(status)),
            (PerProcess, PerProcess) => {
                if let Some(c) = local.on_response(status) {
                    emit(cx, Some(pid), c.from, c.to, status);
                }
                None
            }
            (Global, PerProcess) => {
                // The local machine counts the streak; its multiplier only detects "reached K".
                let before = local.clean_streak();
                local.on_response(status);
                if status.is_rate_pressure() {
                    Some(Signal::Bump(status))
                } else if status.is_clean() && local.clean_streak() == 0 && before + 1 >= self.config.decay_after() {
                    Some(Signal::Decay)
                } else {
                    None
                }
            }
            (PerProcess, Global) => {
                if status.is_rate_pressure()
                    && let Some(c) = local.back_off(status)
                {
                    emit(cx, Some(pid), c.from, c.to, status);
                }
                Some(Signal::Streak(status))
            }
        }
    }

    /// Store side, atomic: apply a signal to the shared state.
    pub fn serve(&self, cx: &mut Cx, shared: &mut Backoff, signal: Signal) -> Reply {
        let cfg = self.config;
        let mut decay = false;
        match signal {
            Signal::Response(s) | Signal::Bump(s) => {
                if let Some(c) = shared.on_response(s) {
                    emit(cx, None, c.from, c.to, s);
                }
            }
            Signal::Decay => {
                if let Some(c) = shared.decay() {
                    emit(cx, None, c.from, c.to, Status::Ok);
                }
            }
            Signal::Streak(s) => {
                let before = shared.clean_streak();
                // Only the streak column is meaningful here; keep the shared multiplier at 1.
                let mut m = Backoff::restore(cfg, 1.0, before).expect("valid state");
                m.on_response(s);
                decay = s.is_clean() && m.clean_streak() == 0;
                *shared = Backoff::restore(cfg, 1.0, m.clean_streak()).expect("valid state");
            }
        }
        Reply::Backoff {
            multiplier: shared.multiplier(),
            decay,
        }
    }

    /// Process side: the store's answer to a signal.
    pub fn on_reply(&self, cx: &mut Cx, pid: u32, local: &mut Backoff, reply: Reply) {
        if let Reply::Backoff { decay: true, .. } = reply
            && self.multiplier == Placement::PerProcess
            && let Some(c) = local.decay()
        {
            emit(cx, Some(pid), c.from, c.to, Status::Ok);
        }
    }
}

/// A pace backend's backoff state, placed as [`Placed`] says: the shared columns in the store
/// and each process's own machine, with the steps every pace backend takes on them the same way
/// (its request carries the process's own multiplier; after the fetch it reports the response;
/// the store's answer to a report ends the job).
#[derive(Debug)]
pub struct Backoffs {
    /// Where the pieces live, and the schedule.
    pub placed: Placed,
    // ---- in the store: the multiplier and clean-streak columns (used as `placed` says) ----
    shared: Backoff,
    // ---- each process's memory ----
    local: Vec<Backoff>,
}

impl Backoffs {
    /// From the scenario (`[pacer] backoff`, `streak`, and `[backoff]`), everything rested.
    pub fn new(sc: &Scenario) -> Backoffs {
        let placed = Placed::new(sc.pacer.backoff, sc.pacer.streak, &sc.backoff);
        Backoffs {
            placed,
            shared: placed.fresh(),
            local: (0..sc.processes.count).map(|_| placed.fresh()).collect(),
        }
    }

    /// Store side: the shared multiplier column.
    pub fn shared_multiplier(&self) -> f64 {
        self.shared.multiplier()
    }

    /// Process side: the multiplier `pid` sends with its request, when it keeps its own.
    pub fn own_multiplier(&self, pid: u32) -> Option<f64> {
        self.placed.own_multiplier(&self.local[pid as usize])
    }

    /// The multiplier in force for `pid`: its own if it keeps one, else the shared one (what
    /// paces its fallback when the store fails it).
    pub fn in_force(&self, pid: u32) -> f64 {
        self.own_multiplier(pid).unwrap_or(self.shared.multiplier())
    }

    /// Store side, atomic: apply a report to the shared columns.
    pub fn serve(&mut self, cx: &mut Cx, signal: Signal) -> Reply {
        self.placed.serve(cx, &mut self.shared, signal)
    }

    /// Process side: the store answered `pid`'s report; its job is done.
    pub fn on_reply(&mut self, cx: &mut Cx, pid: u32, reply: Reply) -> Step {
        self.placed.on_reply(cx, pid, &mut self.local[pid as usize], reply);
        Step::Done
    }

    /// Process side, after the fetch: update `pid`'s own state and report the response when
    /// the store keeps a piece; otherwise the job is done.
    pub fn after_fetch(&mut self, cx: &mut Cx, pid: u32, status: u16) -> Step {
        match self
            .placed
            .after_response(cx, pid, &mut self.local[pid as usize], status)
        {
            Some(signal) => Step::Send(Op::Report(signal)),
            None => Step::Done,
        }
    }

    /// A fresh process starts with a rested machine.
    pub fn reset(&mut self, pid: u32) {
        self.local[pid as usize] = self.placed.fresh();
    }
}

fn emit(cx: &mut Cx, pid: Option<u32>, from: f64, to: f64, cause: Status) {
    let cause = match cause {
        Status::TooManyRequests => MultiplierCause::TooManyRequests,
        Status::Unavailable => MultiplierCause::Unavailable,
        Status::Ok => MultiplierCause::Decay,
        Status::Error => MultiplierCause::Error,
    };
    cx.out.event(&Event::Multiplier {
        t: cx.t.0,
        pid,
        from,
        to,
        cause,
    });
}
