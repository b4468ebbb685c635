//! The simulator and live mode cannot drift apart: one process side, driven through both
//! drivers (the simulator's engine and the live worker's async loop) on the same script of
//! replies and errors, writes the same events in the same order.
//!
//! The backend here is defined only through the public API (a scripted store side, and a live
//! store that plays the same script); errors come from a one-operation store outage in the
//! simulator and from the live store's own refusal.

use pacesim::backend::{Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide};
use pacesim::builder::SimBuilder;
use pacesim::clock::Reading;
use pacesim::fault::{FaultSpec, OutageMode};
use pacesim::live::adapter::{Executed, LiveStore, StoreFailure};
use pacesim::live::clock::{RunClock, mono_ns};
use pacesim::live::proto::{ToParent, WorkerSpec};
use pacesim::live::worker::{Driver, Fetcher, LiveOut};
use pacesim::rng::Rng;
use pacesim::scenario::Scenario;
use pacesim::time::Nanos;
use pacesim::trace::{Event, OpKind, Sink, StoreErrorKind};

#[derive(Copy, Clone, Debug, PartialEq)]
enum Outcome {
    Grant(u64),
    Deny(u64),
    Fail,
}

const MS: u64 = 1_000_000;
const SCRIPT: &[Outcome] = &[
    Outcome::Grant(5 * MS),
    Outcome::Deny(4 * MS),
    Outcome::Grant(3 * MS),
    Outcome::Fail,
    Outcome::Grant(2 * MS),
    Outcome::Deny(2 * MS),
    Outcome::Grant(MS),
    Outcome::Fail,
    Outcome::Grant(MS),
    Outcome::Grant(MS),
    Outcome::Grant(MS),
];

#[derive(Hash, Copy, Clone, Debug, PartialEq)]
enum Op {
    Ask(usize),
    Report,
}

impl StoreOp for Op {
    fn kind(&self) -> OpKind {
        match self {
            Op::Ask(_) => OpKind::Acquire,
            Op::Report => OpKind::Report,
        }
    }
}

#[derive(Hash, Copy, Clone, Debug, PartialEq)]
enum Reply {
    Grant(u64),
    Deny(u64),
    Ack,
}

impl StoreReply for Reply {}

fn reply_to(n: usize) -> Option<Reply> {
    match SCRIPT[n] {
        Outcome::Grant(w) => Some(Reply::Grant(w)),
        Outcome::Deny(r) => Some(Reply::Deny(r)),
        Outcome::Fail => None,
    }
}

struct Scripted;

#[derive(Clone, Hash, Debug, Default)]
struct Proc {
    asks: usize,
    fetches: u32,
}

impl ProcessSide for Proc {
    type Op = Op;
    type Reply = Reply;
    fn acquire(&mut self, _cx: &mut ProcCx) -> Step<Op> {
        self.asks += 1;
        Step::Send(Op::Ask(self.asks - 1))
    }
    fn on_reply(&mut self, cx: &mut ProcCx, _op: &Op, reply: Reply) -> Step<Op> {
        match reply {
            Reply::Grant(w) => Step::FetchAt(cx.t + Nanos(w)),
            Reply::Deny(r) => Step::RetryAt(cx.t + Nanos(r)),
            Reply::Ack => Step::Done,
        }
    }
    fn on_store_error(&mut self, cx: &mut ProcCx, op: &Op) -> Step<Op> {
        match op {
            Op::Ask(_) => Step::FetchAt(cx.t), // fail open
            Op::Report => Step::Done,
        }
    }
    fn after_fetch(&mut self, _cx: &mut ProcCx, _status: u16) -> Step<Op> {
        self.fetches += 1;
        if self.fetches.is_multiple_of(2) {
            Step::Send(Op::Report)
        } else {
            Step::Done
        }
    }
}

#[derive(Clone, Hash, Debug)]
struct Store;

impl StoreSide for Store {
    type Op = Op;
    type Reply = Reply;
    fn serve(&mut self, _cx: &mut StoreCx, _from: Session, op: &Op, _now: Reading) -> Served<Reply> {
        Served::now(match *op {
            // (only the probe runs that place the outage get here with a failing ask)
            Op::Ask(n) => reply_to(n).unwrap_or(Reply::Grant(0)),
            Op::Report => Reply::Ack,
        })
    }
}

impl Backend for Scripted {
    type Op = Op;
    type Reply = Reply;
    type Process = Proc;
    type Store = Store;
    fn name(&self) -> &str {
        "scripted"
    }
    fn facts(&self) -> pacesim::backend::Facts {
        // one slot at a time (facts that state nothing are refused)
        pacesim::backend::Facts {
            burst: Some(1),
            ..Default::default()
        }
    }
    fn detail(&self) -> serde_json::Value {
        serde_json::json!({})
    }
    fn process(&self, _pid: u32) -> Proc {
        Proc::default()
    }
    fn store(&self) -> Store {
        Store
    }
}

fn scenario() -> Scenario {
    let src = r#"
name = "drift"
duration = "10s"
[pacer]
backend = "local"
rate = 10.0
[processes]
count = 1
requests = 7
[store]
latency = { dist = "constant", value = "1ms" }
"#;
    pacesim::registry::parse("drift.toml", src).unwrap()
}

/// The worker loop's own events, without times (the two drivers' clocks differ).
fn shape(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            Some(match *e {
                Event::OpSent { pid, op, .. } => format!("op_sent {pid} {}", op.name()),
                Event::Reply { pid, op, .. } => format!("reply {pid} {}", op.name()),
                Event::StoreError { pid, error, .. } => format!("store_error {pid} {}", error.name()),
                Event::FetchStart { pid, .. } => format!("fetch_start {pid}"),
                Event::FetchEnd { pid, status, .. } => format!("fetch_end {pid} {status}"),
                _ => return None,
            })
        })
        .collect()
}

fn simulated() -> Vec<String> {
    // Each failing ask meets a store outage one nanosecond long when it reaches the store:
    // find when it is sent (the run is the same up to there), then rerun with the window.
    let mut sc = scenario();
    for (n, _) in SCRIPT.iter().enumerate().filter(|(_, o)| **o == Outcome::Fail) {
        let report = SimBuilder::new(sc.clone()).run(Scripted).unwrap();
        let sent = report
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::OpSent {
                        op: OpKind::Acquire,
                        ..
                    }
                )
            })
            .nth(n)
            .expect("the failing ask is sent")
            .t();
        sc.faults.push(FaultSpec::StoreOutage {
            at: Nanos(sent + MS),
            duration: Nanos(1),
            mode: OutageMode::Refuse,
        });
    }
    let report = SimBuilder::new(sc).run(Scripted).unwrap();
    shape(&report.events)
}

struct LiveScript;

impl LiveStore for LiveScript {
    type Op = Op;
    type Reply = Reply;
    async fn execute(&mut self, op: &Op, _rng: &mut Rng) -> Result<Executed<Reply>, StoreFailure> {
        match *op {
            Op::Ask(n) => reply_to(n)
                .map(Executed::reply)
                .ok_or(StoreFailure(StoreErrorKind::Refused)),
            Op::Report => Ok(Executed::reply(Reply::Ack)),
        }
    }
    fn reset(&mut self) {}
}

struct Ok200;

impl Fetcher for Ok200 {
    async fn send(&mut self, _pid: u32, _hold_ns: u64) -> std::io::Result<()> {
        Ok(())
    }
    async fn status(&mut self) -> std::io::Result<u16> {
        Ok(200)
    }
}

#[derive(Default)]
struct Record(Vec<Event>);

impl Sink for Record {
    fn event(&mut self, ev: &Event) {
        self.0.push(*ev);
    }
}

impl LiveOut for Record {
    fn msg(&mut self, _m: &ToParent) {}
    fn die(&mut self) {
        panic!("no kill is armed here");
    }
}

fn live() -> Vec<String> {
    let sc = scenario();
    let spec = WorkerSpec {
        run_id: "drift".into(),
        pid: 0,
        incarnation: 0,
        done: 0,
        scenario: sc,
        origin: None,
        dest: String::new(),
        pg: None,
        redis: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let clock = RunClock::new(mono_ns());
        let mut d = Driver::new(
            &spec,
            &Scripted,
            LiveScript,
            Ok200,
            clock,
            Record::default(),
            Default::default(),
        );
        d.run().await.unwrap();
        shape(&d.out.0)
    })
}

#[test]
fn one_process_side_writes_the_same_events_through_both_drivers() {
    let sim = simulated();
    let live = live();
    assert!(
        sim.iter().filter(|e| e.starts_with("store_error")).count() == 2,
        "{sim:#?}"
    );
    assert!(
        sim.iter().filter(|e| e.starts_with("fetch_end")).count() == 7,
        "{sim:#?}"
    );
    assert_eq!(sim, live);
}
