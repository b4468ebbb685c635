//! A racy two-step pace row, a test backend (issue 33): `read` answers the row's
//! `next_allowed_at`, the process takes `max(now, next)` as its slot and `write`s `slot +
//! interval` back, as two store operations. Between the two another process may read the same
//! `next`: both take one slot. Shared by `tests/suite/explore.rs` and the `explore` benchmarks
//! (`benches/perf`, by `#[path]`).

use pacesim::backend::options::OptionError;
use pacesim::backend::{
    Backend, Configure, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide,
};
use pacesim::clock::Reading;
use pacesim::fault::KillPoint;
use pacesim::registry::{BackendSpec, OpsOf};
use pacesim::scenario::Scenario;
use pacesim::time::Nanos;
use pacesim::trace::OpKind;

/// `racy_two_step`'s options: none.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TwoStepOptions {}

/// A pace row advanced in two steps: `read` answers `next_allowed_at`, the process takes
/// `max(now, next)` as its slot and `write`s `slot + interval` back. Between the two, another
/// process may read the same `next`: both take one slot.
#[derive(Clone, Debug)]
pub struct TwoStep {
    interval: Nanos,
}

impl Configure for TwoStepOptions {
    type Backend = TwoStep;
    fn build(self, sc: &Scenario) -> Result<TwoStep, OptionError> {
        Ok(TwoStep {
            interval: sc.interval(),
        })
    }
}

#[derive(Hash, Copy, Clone, Debug, PartialEq)]
pub enum TwoOp {
    Read,
    Write { slot: Reading },
}

impl StoreOp for TwoOp {
    fn kind(&self) -> OpKind {
        match self {
            TwoOp::Read => OpKind::Acquire,
            TwoOp::Write { .. } => OpKind::Complete,
        }
    }
}

#[derive(Hash, Copy, Clone, Debug, PartialEq)]
pub enum TwoReply {
    /// The row's `next_allowed_at`, and the store's clock when it read it.
    Next { next: Reading, now: Reading },
    /// Written: sleep this long, then fetch.
    Wait(Nanos),
}

impl StoreReply for TwoReply {}

#[derive(Clone, Hash, Debug)]
pub struct TwoStore {
    next: Reading,
    interval: Nanos,
}

impl StoreSide for TwoStore {
    type Op = TwoOp;
    type Reply = TwoReply;
    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &TwoOp, now: Reading) -> Served<TwoReply> {
        match *op {
            TwoOp::Read => Served::now(TwoReply::Next { next: self.next, now }),
            TwoOp::Write { slot } => {
                // the defect: written whatever the row holds now
                self.next = slot + self.interval.0 as i64;
                cx.out.grant(cx.t.0, s.pid, s.thread, slot, now, self.interval.0, 1.0);
                Served::now(TwoReply::Wait(Nanos((slot - now).max(0) as u64)))
            }
        }
    }
}

#[derive(Clone, Hash, Debug)]
pub struct TwoProcess;

impl ProcessSide for TwoProcess {
    type Op = TwoOp;
    type Reply = TwoReply;
    fn acquire(&mut self, _cx: &mut ProcCx) -> Step<TwoOp> {
        Step::Send(TwoOp::Read)
    }
    fn on_reply(&mut self, cx: &mut ProcCx, _op: &TwoOp, reply: TwoReply) -> Step<TwoOp> {
        match reply {
            TwoReply::Next { next, now } => Step::Send(TwoOp::Write { slot: next.max(now) }),
            TwoReply::Wait(d) => Step::FetchAt(cx.after_mono(d)),
        }
    }
    fn on_store_error(&mut self, cx: &mut ProcCx, _op: &TwoOp) -> Step<TwoOp> {
        Step::RetryAt(cx.after_mono(Nanos::from_millis(100)))
    }
    fn after_fetch(&mut self, _cx: &mut ProcCx, _status: u16) -> Step<TwoOp> {
        Step::Done
    }
}

impl Backend for TwoStep {
    type Op = TwoOp;
    type Reply = TwoReply;
    type Process = TwoProcess;
    type Store = TwoStore;
    fn name(&self) -> &str {
        "racy_two_step"
    }
    fn facts(&self) -> pacesim::backend::Facts {
        pacesim::backend::Facts {
            fallback: Some(pacesim::trace::StoreFallback::FailClosed),
            ..Default::default()
        }
    }
    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "interval_ns": self.interval.0, "steps": "read, then write" })
    }
    fn process(&self, _pid: u32) -> TwoProcess {
        TwoProcess
    }
    fn store(&self) -> TwoStore {
        TwoStore {
            next: i64::MIN / 2,
            interval: self.interval,
        }
    }
    fn kill_points(&self) -> Vec<KillPoint> {
        vec![
            KillPoint::MidReservation,
            KillPoint::SleepingToSlot,
            KillPoint::MidFetch,
        ]
    }
}

/// Registered once for the whole test binary (the registry takes one registration).
pub fn racy() -> &'static BackendSpec {
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        pacesim::registry::register(vec![BackendSpec {
            name: "racy_two_step",
            summary: "a pace row read, then written, as two store operations: racy (a test backend)",
            defective: true,
            ops: &OpsOf::<TwoStepOptions>::NEW,
            live: None,
            colour: None,
        }])
        .expect("registers once");
    });
    pacesim::registry::spec("racy_two_step").expect("registered")
}

/// Three processes starting anywhere in the first second, three requests each at 10/s. With
/// the destination's burst of 2, a broken slot shows only when all three read the row within
/// a round trip of each other: when their starts nearly coincide.
pub const SPREAD: &str = r#"
name = "spread-starts"
seed = 1
duration = "10s"
[pacer]
backend = "racy_two_step"
rate = 10.0
[processes]
count = 3
requests = 3
start = { dist = "uniform", low = "0ms", high = "1s" }
[store]
latency = { dist = "lognormal", median = "1ms", sigma = 0.5 }
service = { dist = "constant", value = "100us" }
[fetch]
duration = { dist = "constant", value = "5ms" }
"#;
