//! A livelock must fail, not hang (issue 37 item 1): a backend that keeps answering "retry
//! now" loops at one virtual instant; the run is stopped by the progress guard
//! ([`pacesim::builder::progress_bound`]) with `no progress at t = ...`, through `SimBuilder`, the
//! matrix and the command line's error path. The backends here are defective on purpose and
//! written only against the public API, as `examples/fixed_window.rs` is.

use pacesim::backend::{Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide};
use pacesim::builder::{NoProgress, SimBuilder, SimError};
use pacesim::clock::Reading;
use pacesim::scenario::Scenario;
use pacesim::summary::SimulateError;
use pacesim::trace::{Event, OpKind};
use std::time::{Duration, Instant};

/// The most wall-clock time a stopped livelock may take here (it takes about a second; the
/// margin is for a loaded two-core machine and the unoptimised profile).
const WITHIN: Duration = Duration::from_secs(60);

/// Ask for permission.
#[derive(Hash, Copy, Clone, Debug, PartialEq)]
struct Ask;

impl StoreOp for Ask {
    fn kind(&self) -> OpKind {
        OpKind::Acquire
    }
}

/// Always: not yet, but retry now (a denial with zero wait: GCRA's `now == tat - tau` mutant).
#[derive(Hash, Copy, Clone, Debug, PartialEq)]
struct RetryNow;

impl StoreReply for RetryNow {}

#[derive(Clone, Hash, Debug)]
struct DenyStore;

impl StoreSide for DenyStore {
    type Op = Ask;
    type Reply = RetryNow;
    fn serve(&mut self, cx: &mut StoreCx, from: Session, _op: &Ask, _now: Reading) -> Served<RetryNow> {
        cx.out.event(&Event::Deny {
            t: cx.t.0,
            pid: from.pid,
        });
        Served::now(RetryNow)
    }
}

/// A process that asks the store, or (`local`) decides alone and always says "retry now".
#[derive(Clone, Hash, Debug)]
struct Client {
    local: bool,
}

impl ProcessSide for Client {
    type Op = Ask;
    type Reply = RetryNow;
    fn acquire(&mut self, cx: &mut ProcCx) -> Step<Ask> {
        if self.local {
            Step::RetryAt(cx.t)
        } else {
            Step::Send(Ask)
        }
    }
    fn on_reply(&mut self, cx: &mut ProcCx, _op: &Ask, _reply: RetryNow) -> Step<Ask> {
        Step::RetryAt(cx.t)
    }
    fn on_store_error(&mut self, cx: &mut ProcCx, _op: &Ask) -> Step<Ask> {
        Step::FetchAt(cx.t)
    }
    fn after_fetch(&mut self, _cx: &mut ProcCx, _status: u16) -> Step<Ask> {
        Step::Done
    }
}

/// The defective backend: through the store (`local: false`) or in the process alone.
#[derive(Clone, Debug)]
struct Livelock {
    local: bool,
}

impl Backend for Livelock {
    type Op = Ask;
    type Reply = RetryNow;
    type Process = Client;
    type Store = DenyStore;
    fn name(&self) -> &str {
        if self.local { "retry_now_local" } else { "retry_now" }
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
    fn process(&self, _pid: u32) -> Client {
        Client { local: self.local }
    }
    fn store(&self) -> DenyStore {
        DenyStore
    }
}

/// `sims/four-limiters.toml`'s fleet: four processes, a zero-latency store, the first asks at
/// 250 ms.
fn scenario() -> Scenario {
    let src = r#"
name = "livelock"
seed = 1
duration = "5s"
[pacer]
backend = "row"
rate = 50.0
[processes]
count = 4
requests = 10
start = { dist = "constant", value = "250ms" }
[store]
latency = { dist = "constant", value = "0ms" }
service = { dist = "constant", value = "0ms" }
[fetch]
duration = { dist = "constant", value = "0ms" }
"#;
    pacesim::registry::parse("livelock.toml", src).expect("a valid scenario")
}

/// Run `backend` through `SimBuilder`: the guard's error, and how long it took.
fn stopped(backend: Livelock) -> (NoProgress, Duration) {
    let t0 = Instant::now();
    let r = SimBuilder::new(scenario()).run(backend);
    let took = t0.elapsed();
    match r {
        Err(SimError::NoProgress(e)) => (e, took),
        Err(e) => panic!("refused instead: {e}"),
        Ok(r) => panic!("a livelock finished: {:?}", r.summary.checks),
    }
}

#[test]
fn a_backend_that_always_says_retry_now_is_stopped_with_what_loops() {
    let (e, took) = stopped(Livelock { local: false });
    eprintln!("stopped in {took:?}: {e}");
    assert!(took < WITHIN, "took {took:?}");
    let bound = pacesim::builder::progress_bound(&scenario(), None);
    assert_eq!(e.at, pacesim::time::Instant(250_000_000));
    assert!(e.events > bound, "{} events, bound {bound}", e.events);
    let msg = e.to_string();
    assert!(
        msg.starts_with("no progress at t = 250ms: ") && msg.contains(" events without time advancing; looping: "),
        "{msg}"
    );
    // the loop: the operation reaches the store, its reply the process, which wakes to ask again
    for kind in ["store_recv x ", "reply x ", "wake x "] {
        assert!(msg.contains(kind), "{kind}: {msg}");
    }
    assert!(msg.contains("(processes 0, 1, 2, 3)"), "{msg}");
}

#[test]
fn a_process_that_retries_now_without_the_store_is_stopped_too() {
    let (e, took) = stopped(Livelock { local: true });
    eprintln!("stopped in {took:?}: {e}");
    assert!(took < WITHIN, "took {took:?}");
    let msg = e.to_string();
    assert!(msg.contains("looping: wake x 4096 (processes 0, 1, 2, 3)"), "{msg}");
    assert!(!msg.contains("store_recv"), "{msg}");
}

/// `run_into` streams the trace up to where the run stopped, with no `end` event.
#[test]
fn the_trace_stops_where_the_run_stopped() {
    let mut c = pacesim::trace::Collect::default();
    let e = SimBuilder::new(scenario())
        .run_into(Livelock { local: false }, &mut c)
        .unwrap_err();
    assert!(matches!(e, SimError::NoProgress(_)), "{e}");
    assert!(c.header.is_some());
    assert!(!c.events.iter().any(|e| matches!(e, Event::End { .. })));
    assert!(c.events.iter().all(|e| e.t() <= 250_000_000));
}

/// The matrix reports the stopped run on its row and still ends with a verdict (the row is a
/// difference from any expectation); its JUnit cases fail with the message. (`pacesim matrix`
/// runs only the registry's backends, none of which loops, so the matrix is built here from
/// runs made with the defective backend: [`pacesim::matrix::from_runs`] is what
/// `matrix::run` folds its runs with.)
#[test]
fn the_matrix_reports_the_run_that_did_not_finish_and_ends_with_a_verdict() {
    let (e, _) = stopped(Livelock { local: false });
    let mut v = scenario();
    v.pacer.backend = "retry_now".into();
    let ok = pacesim::registry::simulate(&scenario(), None, None).expect("row progresses");
    let mut row = scenario();
    row.pacer.backend = "row".into();
    let m = pacesim::matrix::from_runs([(&row, Ok(ok)), (&v, Err(SimulateError::NoProgress(e.clone())))], 1).unwrap();
    assert_eq!(m.rows.len(), 2);
    assert!(m.rows[0].failed.is_none());
    let f = m.rows[1].failed.as_ref().expect("the stopped run marks its row");
    assert_eq!((f.seed, f.message.as_str()), (1, e.to_string().as_str()));
    // a difference without an expectation, and with one that expects nothing to fail
    let diffs = pacesim::matrix::failures(&m);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].starts_with("livelock/retry_now: the run did not finish (seed 1): no progress at t = 250ms"),
        "{diffs:?}"
    );
    let o = pacesim::matrix::MatrixOutcome {
        matrix: m.clone(),
        expected: None,
        mismatches: diffs,
    };
    assert!(!o.matches());
    let expected: pacesim::matrix::Expected =
        toml::from_str("[livelock]\nrow = { fail = [] }\nretry_now = { fail = [] }\n").unwrap();
    let diffs = pacesim::matrix::compare(&m, &expected);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    let table = pacesim::matrix::table(&m);
    assert!(table.contains("ERROR"), "{table}");
    assert!(table.contains("runs that did not finish"), "{table}");
    let cases = pacesim::matrix::junit_cases(&m);
    let stopped: Vec<_> = cases.iter().filter(|c| c.backend == "retry_now").collect();
    assert!(!stopped.is_empty());
    for c in stopped {
        assert!(
            matches!(&c.outcome, pacesim::junit::CaseOutcome::Fail { witness, .. } if witness.contains("no progress at t = 250ms")),
            "{c:?}"
        );
    }
    assert!(
        o.json()["rows"][1]["failed"]["message"]
            .as_str()
            .unwrap()
            .contains("no progress")
    );
}

/// `pacesim run` reports a run that stopped as a failed run (exit 1, with the command that
/// reproduces it), not as bad input (2). (No backend of pacesim loops, so the error is made
/// here from the defective backend's and given to the status the command line chooses.)
#[test]
fn the_command_line_exits_1_for_a_run_that_did_not_finish() {
    let (e, _) = stopped(Livelock { local: false });
    let err = pacesim::run::RunError::NoProgress {
        file: "sims/livelock.toml".into(),
        reproduce: pacesim::run::reproduce(std::path::Path::new("sims/livelock.toml"), 1, "retry_now"),
        source: e,
    };
    assert_eq!(pacesim::cli::run_error_status(&err), pacesim::cli::EXIT_FAIL);
    assert!(
        err.to_string()
            .starts_with("sims/livelock.toml: no progress at t = 250ms: "),
        "{err}"
    );
    let bad = pacesim::run::RunError::BadRate(-1.0);
    assert_eq!(pacesim::cli::run_error_status(&bad), pacesim::cli::EXIT_BAD_INPUT);
}

/// Keeps nothing.
struct Discard;

impl pacesim::trace::Sink for Discard {
    fn event(&mut self, _ev: &Event) {}
}

/// The bound is generous: no shipped scenario, with any backend it compares, comes within a
/// hundredth of it (the busiest instant is about a few events per process).
#[test]
fn no_shipped_scenario_comes_near_the_bound() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sims");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut busiest = (0.0, String::new());
    for p in files.iter().filter(|p| p.extension().is_some_and(|e| e == "toml")) {
        let mut sc = pacesim::registry::load(p).unwrap();
        // as `every_scenario_is_deterministic` does: the long reference scenarios, shortened
        sc.duration = sc.duration.min(pacesim::time::Nanos(120_000_000_000));
        for b in sc.compared_backends() {
            let v = pacesim::registry::with_backend(&sc, &b).unwrap();
            let bound = pacesim::builder::progress_bound(&v, pacesim::registry::header(&v, "sim").backend_detail.burst);
            let mut sink = Discard;
            let o = pacesim::registry::run(&v, &mut sink).unwrap_or_else(|e| panic!("{} / {b}: {e}", v.name));
            let share = o.same_instant_peak as f64 / bound as f64;
            if share > busiest.0 {
                busiest = (share, format!("{} / {b}: {} of {bound}", v.name, o.same_instant_peak));
            }
            assert!(
                share < 0.01,
                "{} / {b}: {} events at one instant, bound {bound}",
                v.name,
                o.same_instant_peak
            );
        }
    }
    eprintln!("busiest instant: {}", busiest.1);
}
