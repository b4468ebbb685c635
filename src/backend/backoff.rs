//! Where backoff state lives: the multiplier and the clean streak, each either in the shared
//! store (`global`) or in each process's memory (`per_process`).
//!
//! The schedule itself is [`crate::pacer::Backoff`] (429/503 multiply, K clean responses
//! divide, clamped to `[1, cap]`). The records name a defect for each piece kept per process:
//! diverging multipliers write conflicting paces into one row (each reservation advances it by
//! its own process's interval x multiplier), and per-process streaks cross the decay threshold
//! together (the records say "N times too fast"; `tests/suite/stories.rs` story 3 measures clustered
//! steps at the same average rate). So the two are placed independently:
//!
//! | multiplier | streak      | after a response the process...                                 |
//! |------------|-------------|-----------------------------------------------------------------|
//! | global     | global      | sends the status; the store runs the whole schedule             |
//! | global     | per_process | counts its own streak; sends `bump` on 429/503, `decay` on K    |
//! | per_process| global      | bumps its own multiplier; sends clean/other to the shared streak |
//! | per_process| per_process | runs the whole schedule itself; the store never hears of it     |
//!
//! The store side is [`SharedBackoff`] (the multiplier and clean-streak columns); the process
//! side is [`LocalBackoff`] (its own machine, and what it reports).

use crate::backend::options::Placement;
use crate::backend::{ProcCx, Step, StoreCx};
use crate::pacer::{Backoff, BackoffConfig, Status};
use crate::trace::{Event, MultiplierCause, Sink};

/// What a process tells the shared backoff state.
#[derive(Hash, Copy, Clone, Debug, PartialEq)]
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

/// The store's answer to a [`Signal`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct BackoffReply {
    /// Shared multiplier after the report.
    pub multiplier: f64,
    /// True when a shared streak reached its threshold (a per-process multiplier decays).
    pub decay: bool,
}

crate::exact_hash!(BackoffReply {
    multiplier: bits,
    decay
});

/// The placement of the two pieces, and the schedule.
#[derive(Hash, Copy, Clone, Debug)]
pub struct Placed {
    /// Where the multiplier lives.
    pub multiplier: Placement,
    /// Where the streak lives.
    pub streak: Placement,
    /// The schedule.
    pub config: BackoffConfig,
}

impl Placed {
    /// From `[pacer] backoff` (default `global`, the pace-row record: "a global rate ceiling
    /// requires a global backoff term"), `streak` (default: wherever the multiplier lives) and
    /// the validated `[backoff]` schedule.
    pub fn new(multiplier: Option<Placement>, streak: Option<Placement>, config: BackoffConfig) -> Placed {
        let multiplier = multiplier.unwrap_or(Placement::Global);
        Placed {
            multiplier,
            streak: streak.unwrap_or(multiplier),
            config,
        }
    }

    /// A fresh state machine.
    pub fn fresh(&self) -> Backoff {
        Backoff::new(self.config)
    }

    /// The store side, rested.
    pub fn shared(&self) -> SharedBackoff {
        SharedBackoff {
            placed: *self,
            shared: self.fresh(),
        }
    }

    /// A process side, rested.
    pub fn local(&self) -> LocalBackoff {
        LocalBackoff {
            placed: *self,
            local: self.fresh(),
        }
    }
}

/// The shared backoff columns in the store (used as the placement says).
#[derive(Clone, Hash, Debug)]
pub struct SharedBackoff {
    placed: Placed,
    // the multiplier and clean-streak columns
    shared: Backoff,
}

impl SharedBackoff {
    /// The shared multiplier column.
    pub fn multiplier(&self) -> f64 {
        self.shared.multiplier()
    }

    /// The columns vanished (`state_lost`): they come back rested, as the statement that
    /// recreates them writes them; a multiplier above 1 drops to 1 (a `multiplier` event, cause
    /// `state_lost`).
    pub fn lost(&mut self, cx: &mut StoreCx) {
        let from = self.shared.multiplier();
        self.shared = self.placed.fresh();
        if from != 1.0 {
            cx.out.event(&Event::Multiplier {
                t: cx.t.0,
                pid: None,
                from,
                to: 1.0,
                cause: MultiplierCause::StateLost,
            });
        }
    }

    /// Store side, atomic: apply a signal to the shared state.
    pub fn serve(&mut self, cx: &mut StoreCx, signal: Signal) -> BackoffReply {
        let cfg = self.placed.config;
        let shared = &mut self.shared;
        let mut decay = false;
        match signal {
            Signal::Response(s) | Signal::Bump(s) => {
                if let Some(c) = shared.on_response(s) {
                    emit(cx.out, cx.t.0, None, c.from, c.to, s);
                }
            }
            Signal::Decay => {
                if let Some(c) = shared.decay() {
                    emit(cx.out, cx.t.0, None, c.from, c.to, Status::Ok);
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
        BackoffReply {
            multiplier: shared.multiplier(),
            decay,
        }
    }
}

/// A process's own backoff machine, and the steps every pace backend takes on it the same way
/// (its request carries its own multiplier; after the fetch it reports the response; the
/// store's answer to a report ends the job).
#[derive(Clone, Hash, Debug)]
pub struct LocalBackoff {
    placed: Placed,
    local: Backoff,
}

impl LocalBackoff {
    /// The multiplier the process sends with its request, when it keeps its own.
    pub fn own_multiplier(&self) -> Option<f64> {
        (self.placed.multiplier == Placement::PerProcess).then(|| self.local.multiplier())
    }

    /// After a response: update local state, and say what to tell the store.
    pub fn after_response(&mut self, cx: &mut ProcCx, code: u16) -> Option<Signal> {
        let status = Status::from_http(code);
        let local = &mut self.local;
        use Placement::*;
        match (self.placed.multiplier, self.placed.streak) {
            (Global, Global) => Some(Signal::Response(status)),
            (PerProcess, PerProcess) => {
                if let Some(c) = local.on_response(status) {
                    emit(cx.out, cx.t.0, Some(cx.pid), c.from, c.to, status);
                }
                None
            }
            (Global, PerProcess) => {
                // The local machine counts the streak; its multiplier only detects "reached K".
                let before = local.clean_streak();
                local.on_response(status);
                if status.is_rate_pressure() {
                    Some(Signal::Bump(status))
                } else if status.is_clean()
                    && local.clean_streak() == 0
                    && before + 1 >= self.placed.config.decay_after()
                {
                    Some(Signal::Decay)
                } else {
                    None
                }
            }
            (PerProcess, Global) => {
                if status.is_rate_pressure()
                    && let Some(c) = local.back_off(status)
                {
                    emit(cx.out, cx.t.0, Some(cx.pid), c.from, c.to, status);
                }
                Some(Signal::Streak(status))
            }
        }
    }

    /// After the fetch: report the response when the store keeps a piece (`report` wraps the
    /// signal in the backend's operation); otherwise the job is done.
    pub fn after_fetch<Op>(&mut self, cx: &mut ProcCx, status: u16, report: impl FnOnce(Signal) -> Op) -> Step<Op> {
        match self.after_response(cx, status) {
            Some(signal) => Step::Send(report(signal)),
            None => Step::Done,
        }
    }

    /// The store answered a report: a per-process multiplier decays when the shared streak
    /// reached K. The job is done.
    pub fn on_reply<Op>(&mut self, cx: &mut ProcCx, reply: BackoffReply) -> Step<Op> {
        if reply.decay
            && self.placed.multiplier == Placement::PerProcess
            && let Some(c) = self.local.decay()
        {
            emit(cx.out, cx.t.0, Some(cx.pid), c.from, c.to, Status::Ok);
        }
        Step::Done
    }

    /// The machine's multiplier (a per-process pacer's).
    pub fn multiplier(&self) -> f64 {
        self.local.multiplier()
    }
}

fn emit(out: &mut dyn Sink, t: u64, pid: Option<u32>, from: f64, to: f64, cause: Status) {
    out.event(&Event::Multiplier {
        t,
        pid,
        from,
        to,
        cause: cause_of(cause),
    });
}

/// The trace's name for the status that moved a multiplier (a clean one decays it).
pub fn cause_of(status: Status) -> MultiplierCause {
    match status {
        Status::TooManyRequests => MultiplierCause::TooManyRequests,
        Status::Unavailable => MultiplierCause::Unavailable,
        Status::Ok => MultiplierCause::Decay,
        Status::Error => MultiplierCause::Error,
    }
}
