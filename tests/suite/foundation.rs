//! Foundation acceptance: the four-limiters story, determinism, the row/local property, bad
//! input handling.

use crate::common;
use common::pacesim;
use pacesim::registry::simulate;
use pacesim::scenario::Scenario;
use pacesim::summary::Summary;
use pacesim::trace::{Collect, Event};
use proptest::prelude::*;
use std::path::Path;

fn load(name: &str) -> Scenario {
    pacesim::registry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

fn run(sc: &Scenario) -> Summary {
    simulate(sc, None, None).unwrap()
}

#[test]
fn four_limiters_row_is_global_and_local_overshoots() {
    let sc = load("four-limiters.toml");
    let row = run(&pacesim::registry::with_backend(&sc, "row").unwrap());
    assert_eq!(row.fetches, 40);
    assert!(row.last_start_s >= 0.78, "row last start {}", row.last_start_s);
    assert_eq!(row.burst_needed, 1);
    assert!(row.all_pass(), "{:?}", row.checks);

    let local = run(&pacesim::registry::with_backend(&sc, "local").unwrap());
    assert_eq!(local.fetches, 40);
    assert!(
        (local.last_start_s - 0.18).abs() < 0.005,
        "local last start {}",
        local.last_start_s
    );
    assert!(local.burst_needed >= 4, "local burst {}", local.burst_needed);
    assert!(local.checks["ceiling"].failed());
    // Both fit inside one 1 s window: that figure alone cannot see the defect.
    assert!(local.max_window.count <= local.max_window.bound);
}

fn every_scenario() -> Vec<Scenario> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sims");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| pacesim::registry::load(&p).unwrap())
        .collect()
}

#[test]
fn every_scenario_is_deterministic() {
    for sc in every_scenario() {
        // keep the self-check quick on the long reference scenarios
        let mut sc = sc;
        sc.duration = sc.duration.min(pacesim::time::Nanos(120_000_000_000));
        for b in sc.compared_backends() {
            let v = pacesim::registry::with_backend(&sc, &b).unwrap();
            let a = run(&v).trace_hash;
            let b2 = run(&v).trace_hash;
            assert_eq!(a, b2, "{} / {b}: trace hash differs between identical runs", sc.name);
        }
    }
}

#[test]
fn a_different_seed_gives_a_different_trace_when_there_are_draws() {
    let src = r#"
name = "draws"
duration = "3s"
[pacer]
backend = "row"
rate = 20.0
[processes]
count = 3
requests = 10
[store]
latency = { dist = "lognormal", median = "0.6ms", sigma = 0.5 }
[fetch]
duration = { dist = "exponential", mean = "20ms" }
"#;
    let mut sc = pacesim::registry::parse("draws", src).unwrap();
    let a = run(&sc).trace_hash;
    sc.seed = 2;
    let b = run(&sc).trace_hash;
    assert_ne!(a, b);
    sc.seed = 1;
    assert_eq!(a, run(&sc).trace_hash);
}

#[test]
fn adding_a_process_does_not_change_the_others_draws() {
    // With `local` nothing is shared, so process 0's fetch times must not move when a third
    // process joins: each entity draws from its own stream.
    let src = |n: u32| {
        format!(
            "name='x'\nduration='2s'\n[pacer]\nbackend='local'\nrate=10.0\n[processes]\ncount={n}\nrequests=5\n\
             think={{ dist='exponential', mean='30ms' }}\n[fetch]\nduration={{ dist='uniform', low='1ms', high='9ms' }}\n"
        )
    };
    let starts = |n: u32| {
        let sc = pacesim::registry::parse("x", &src(n)).unwrap();
        let mut c = Collect::default();
        pacesim::registry::run(&sc, &mut c).expect("the run progresses");
        c.events
            .iter()
            .filter(|e| matches!(e, Event::FetchStart { pid: 0, .. }))
            .map(|e| e.t())
            .collect::<Vec<_>>()
    };
    assert_eq!(starts(2), starts(3));
}

fn scenario(backend: &str, n: u32, rate: f64, requests: u64, latency: &str) -> Scenario {
    let src = format!(
        "name='prop'\nduration='600s'\n[pacer]\nbackend='{backend}'\nrate={rate}\n[processes]\ncount={n}\nrequests={requests}\n\
         [store]\nlatency={latency}\nservice={{ dist='constant', value='20us' }}\n[destination]\nlatency={latency}\n"
    );
    pacesim::registry::parse("prop", &src).unwrap()
}

fn latency() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..2000).prop_map(|us| format!("{{ dist='constant', value='{us}us' }}")),
        (0u64..500, 0u64..1500).prop_map(|(a, b)| format!("{{ dist='uniform', low='{a}us', high='{}us' }}", a + b)),
        (1u64..800).prop_map(|us| format!("{{ dist='exponential', mean='{us}us' }}")),
        (100u64..1000, 0.0f64..0.5).prop_map(|(us, s)| format!("{{ dist='lognormal', median='{us}us', sigma={s} }}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64), ..ProptestConfig::default() })]

    /// The row's granted slots are strictly increasing and spaced by at least one interval,
    /// and its ceiling check passes, for any fleet size, rate and latency.
    #[test]
    fn row_slots_are_spaced_and_the_ceiling_holds(n in 1u32..64, rate in 1.0f64..60.0, requests in 1u64..6, lat in latency()) {
        let sc = scenario("row", n, rate, requests, &lat);
        let interval = sc.interval().0 as i64;
        let mut c = Collect::default();
        pacesim::registry::run(&sc, &mut c).expect("the run progresses");
        let slots: Vec<i64> = c.events.iter().filter_map(|e| match e { Event::Grant { slot, .. } => Some(*slot), _ => None }).collect();
        prop_assert_eq!(slots.len() as u64, n as u64 * requests);
        for w in slots.windows(2) {
            prop_assert!(w[1] - w[0] >= interval, "slots {} then {} (interval {})", w[0], w[1], interval);
        }
        let s = run(&sc);
        prop_assert!(s.checks["ceiling"].passed(), "{}", s.checks["ceiling"].detail);
        prop_assert!(s.checks["slot_ceiling"].passed(), "{}", s.checks["slot_ceiling"].detail);
    }

    /// The same generator finds `local` failing whenever N >= 2 and demand exceeds the rate.
    #[test]
    fn local_fails_the_ceiling_with_two_or_more(n in 2u32..64, rate in 1.0f64..60.0, requests in 4u64..8, lat in latency()) {
        let s = run(&scenario("local", n, rate, requests, &lat));
        prop_assert!(s.checks["ceiling"].failed(), "local passed: {}", s.checks["ceiling"].detail);
    }
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let dir = std::env::temp_dir().join(format!("pacesim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/four-limiters.toml")).unwrap();
    let cases = [
        (
            "malformed",
            "name = \"x\"\nduration = [\n".to_string(),
            "malformed.toml:",
        ),
        (
            "unknown-key",
            good.replace("requests = 10", "requests = 10\nbogus = 1"),
            "processes.bogus: unknown field",
        ),
        (
            "unknown-backend",
            good.replace("backend = \"row\"", "backend = \"nope\""),
            "pacer.backend: unknown backend `nope`",
        ),
        (
            "rate-zero",
            good.replace("rate = 50.0", "rate = 0"),
            "pacer.rate: must be a number above 0",
        ),
        (
            "count-zero",
            good.replace("count = 4", "count = 0"),
            "processes.count: must be at least 1",
        ),
    ];
    for (name, text, expect) in cases {
        let f = dir.join(format!("{name}.toml"));
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = pacesim(&["run", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: more than one line: {err}");
        assert!(err.contains(expect), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let (code, _, err) = pacesim(&["run", "sims/four-limiters.toml", "--backend", "nope"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = pacesim(&["run", "does-not-exist.toml"]);
    assert_eq!(code, 2, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cli_exit_status_and_json_fields() {
    let (code, out, _) = pacesim(&["run", "sims/four-limiters.toml", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in [
        "scenario",
        "backend",
        "seed",
        "processes",
        "fetches",
        "first_start_s",
        "last_start_s",
        "achieved_rate",
        "rate",
        "max_window",
        "burst_needed",
        "slot_burst_needed",
        "trace_hash",
        "checks",
        "backend_detail",
        "fallback_s",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["max_window"]["bound"], 51);
    let (code, _, _) = pacesim(&["run", "sims/four-limiters.toml", "--backend", "local"]);
    assert_eq!(code, 1);
}

/// `pacesim ... | head` ends quietly when the reader goes: no panic, no backtrace.
#[test]
#[cfg(unix)]
fn a_closed_stdout_ends_the_cli_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(["simulate", "sims/four-limiters.toml", "sims/outage-divided.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes before the first line
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?} {err}", out.status);
}

#[test]
fn check_reads_a_trace_and_agrees_with_run() {
    let dir = std::env::temp_dir().join(format!("pacesim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("t.jsonl");
    let (_, out, _) = pacesim(&[
        "run",
        "sims/four-limiters.toml",
        "--backend",
        "local",
        "--json",
        "--trace",
        t.to_str().unwrap(),
    ]);
    let (code, out2, _) = pacesim(&["check", t.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    let mut a: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let b: serde_json::Value = serde_json::from_str(out2.trim()).unwrap();
    // `run` names the command that reproduces its failure; a trace has no scenario file to name
    let reproduce = a.as_object_mut().unwrap().remove("reproduce");
    assert_eq!(
        reproduce,
        Some(serde_json::json!(
            "pacesim run sims/four-limiters.toml --seed 1 --backend local"
        ))
    );
    assert_eq!(a, b, "check on the trace must reproduce run's figures exactly");
    // against a 1000/s ceiling only the four simultaneous first fetches remain a burst
    let (_, out3, _) = pacesim(&["check", t.to_str().unwrap(), "--rate", "1000", "--json"]);
    let c: serde_json::Value = serde_json::from_str(out3.trim()).unwrap();
    assert_eq!(a["burst_needed"], 31);
    assert_eq!(c["burst_needed"], 4);
    std::fs::remove_dir_all(&dir).ok();
}

// ---- issue 52, item 16: the shrunk case is written as it ran ----

/// Issue 52 item 16: when the shrinker cuts processes, the case it writes is the scenario
/// its shrunk run ran (its processes and requests), not the text it started from; and that
/// case replays to the same violation. Five processes of one request each: a race of one
/// request each needs three, and the requests are already as few as can be (so no later pass
/// rewrites the text).
#[test]
fn s52_16_a_case_shrunk_to_fewer_processes_is_written_with_them() {
    use pacesim::explore::{self, Method, Options, Site};
    common::two_step::racy();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("foundation-s52-16-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("spread.toml");
    let text = common::two_step::SPREAD.replace("count = 3\nrequests = 3", "count = 5\nrequests = 1");
    assert_ne!(text, common::two_step::SPREAD);
    std::fs::write(&file, &text).unwrap();
    let o = Options {
        method: Method::Random,
        vary: vec![Site::StoreLatency, Site::Start],
        schedules: Some(20_000),
        ..Options::default()
    };
    let (report, _) = explore::from_file(&file, None, None, &o, &mut |_| {}).expect("explores");
    let c = report.counterexample.as_ref().expect("the race is found");
    assert_eq!(c.found.processes, 5);
    assert!(c.shrunk.processes < 5, "{:?}", c.shrunk);
    let written = pacesim::registry::parse("case.toml", &c.scenario).unwrap();
    assert_eq!(
        (written.processes.count, written.processes.requests),
        (c.shrunk.processes, c.shrunk.requests),
        "the written case is not the shrunk run's scenario:\n{}",
        c.scenario
    );
    assert_eq!(written.duration.0 as f64 / 1e9, c.shrunk.seconds);
    // replayed, it breaks the same property the same way
    let out = dir.join("out");
    explore::write(&out, &report).unwrap();
    let stem = explore::stem(&report);
    let s = pacesim::run::one_with(
        &out.join(format!("{stem}.case.toml")),
        None,
        None,
        None,
        pacesim::run::Choices::Replay(&out.join(format!("{stem}.choices.json"))),
    )
    .unwrap();
    assert_eq!(s.processes, c.shrunk.processes);
    assert!(s.checks[c.violation.check.as_str()].failed(), "{:?}", s.checks);
    assert_eq!(s.checks[c.violation.check.as_str()].detail, c.violation.detail);
}

// ---- issue 52, item 5: a replayed tape never holds a draw in its rejection loop ----

/// Issue 52 item 5: a replayed tape of zeros, or one that has run out, gave every draw zero
/// words, and a normal draw (a log-normal's) rejects those for ever. Past its end the tape
/// gives the stream's own words: each draw ends, and the tape counts how far it went. (On a
/// thread, waited for with a bound: a draw that loops fails the test rather than hang it.)
#[test]
fn s52_05_a_draw_from_a_tape_of_zeros_or_past_its_end_ends() {
    use pacesim::choice::{Source, Tape, enter};
    use pacesim::dist::Dist;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let source = Source::new(Tape::replay(vec![0; 1000]));
        let _in = enter(source.clone());
        let mut rng = pacesim::rng::stream(1, pacesim::rng::Entity::Store);
        let d = Dist::Lognormal {
            median: pacesim::time::Nanos(1_000_000),
            sigma: 0.5,
        };
        let draws: Vec<u64> = (0..10).map(|_| d.sample(&mut rng).0).collect();
        let _ = tx.send((draws, source.replayed()));
    });
    let (draws, replayed) = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("ten log-normal draws from a tape of zeros end");
    assert_eq!(draws.len(), 10);
    let (drawn, held) = replayed.expect("a replay");
    assert_eq!(held, 1000);
    assert!(
        drawn > held,
        "the zeros were all drawn, then the stream's own words: {drawn}"
    );
}
