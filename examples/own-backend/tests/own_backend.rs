//! The team's backends through pacesim: its API (the registry, a run, the defect matrix, the
//! options' errors) and its command line (this crate's binary: `simulate`, `matrix`, `live`,
//! `conform`). The live tests need Redis (`REDIS_URL`, loopback by default); without it they
//! print "LIVE TESTS NOT RUN" and pass, as pacesim's own live tests do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

fn file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)
}

fn registered() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        pacesim::registry::register(own_backend::backends()).unwrap();
        pacesim::check::register(own_backend::checkers()).unwrap();
    });
}

/// This crate's binary: pacesim's command line with its backends.
fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_own-backend"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_log_holds_and_its_racy_twin_breaks_the_ceiling_through_the_api() {
    registered();
    let names = pacesim::registry::names();
    assert!(names.contains(&"sliding_log") && names.contains(&"sliding_log_racy"));
    let sc = file("sliding-log.toml");
    let log = pacesim::run::one(&sc, None, None, None).unwrap();
    assert_eq!(log.backend, "sliding_log");
    assert!(log.all_pass(), "{:?}", log.checks);
    // the team's own checker judged it beside pacesim's
    assert!(log.checks["log_limit"].passed(), "{:?}", log.checks["log_limit"]);
    // a window's worth at once, never more: the burst the log states
    assert!(
        log.checks["ceiling"].detail.contains("need burst 10"),
        "{}",
        log.checks["ceiling"].detail
    );
    for seed in 1..=10 {
        let racy = pacesim::run::one(&sc, Some(seed), Some("sliding_log_racy"), None).unwrap();
        assert!(
            racy.checks["ceiling"].failed(),
            "seed {seed}: {}",
            racy.checks["ceiling"].detail
        );
        assert!(
            racy.checks["log_limit"].failed(),
            "seed {seed}: {}",
            racy.checks["log_limit"].detail
        );
    }
    // pacesim's own designs: the team's property does not apply to them
    let row = pacesim::run::one(&sc, None, Some("row"), None).unwrap();
    assert!(!row.checks.contains_key("log_limit"), "{:?}", row.checks.keys());
    let m = pacesim::matrix::evaluate(vec![sc], 1, Some(&file("expected-matrix.toml"))).unwrap();
    assert!(m.matches(), "{:?}", m.mismatches);
}

#[test]
fn its_options_are_checked_with_file_line_and_field() {
    registered();
    let src = std::fs::read_to_string(file("sliding-log.toml")).unwrap();
    let err = |from: &str, to: &str| {
        assert!(src.contains(from), "{from}");
        pacesim::registry::parse("s.toml", &src.replace(from, to))
            .unwrap_err()
            .to_string()
    };
    // 11 in 200 ms at 50/s: more than the rate allows
    let e = err("window = \"200ms\"", "window = \"200ms\"\nlimit = 11");
    assert!(
        e.contains("s.toml:") && e.contains("pacer.limit: 11 grants per 200 ms window exceed"),
        "{e}"
    );
    let e = err("window = \"200ms\"", "window = \"10ms\"");
    assert!(
        e.contains("pacer.window: 10 ms holds no request at the rate 50/s"),
        "{e}"
    );
    let e = err("window = \"200ms\"", "window = 3");
    assert!(e.contains("pacer.window"), "{e}");
    let e = err("window = \"200ms\"", "window = \"200ms\"\nwindo = \"1s\"");
    assert!(e.contains("windo"), "{e}");
}

#[test]
fn simulate_prints_it_beside_row_with_plots() {
    let out = std::env::temp_dir().join(format!("own-backend-simulate-{}", std::process::id()));
    let o = cli(&["simulate", "sims/sliding-log.toml", "--out", out.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let line = |b: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("{b} ")))
            .unwrap_or_else(|| panic!("no {b} line: {t}"))
            .to_string()
    };
    assert!(line("sliding_log").ends_with("all pass"), "{t}");
    assert!(line("row").ends_with("all pass"), "{t}");
    assert!(
        line("sliding_log_racy").contains("FAIL: backoff_coherence, ceiling, log_limit, slot_ceiling"),
        "{t}"
    );
    for plot in ["rate.svg", "rate.png", "latency.svg", "processes.svg"] {
        assert!(out.join("sliding-log").join(plot).exists(), "{plot}: {t}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn the_matrix_passes_with_the_racy_twin_failing_ceiling() {
    let o = cli(&[
        "matrix",
        "sims/sliding-log.toml",
        "--expected",
        "sims/expected-matrix.toml",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("matches sims/expected-matrix.toml"), "{t}");
    assert!(
        t.contains("sliding_log_racy (window=200ms) ceiling (seed 1): arrivals need burst"),
        "{t}"
    );
    // and an expectation that is wrong fails it: the racy twin is not excused
    let wrong = std::env::temp_dir().join(format!("own-backend-wrong-{}.toml", std::process::id()));
    let m = std::fs::read_to_string(file("expected-matrix.toml")).unwrap();
    std::fs::write(
        &wrong,
        m.replace(
            r#"fail = ["ceiling", "slot_ceiling", "backoff_coherence", "log_limit"]"#,
            "fail = []",
        ),
    )
    .unwrap();
    let o = cli(&["matrix", "sims/sliding-log.toml", "--expected", wrong.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    std::fs::remove_file(&wrong).unwrap();
}

#[test]
fn its_own_checker_is_judged_in_every_output_and_searched_for_by_explore() {
    // `run --json`: the team's verdict beside pacesim's, three-valued like them
    let o = cli(&[
        "run",
        "sims/sliding-log.toml",
        "--backend",
        "sliding_log_racy",
        "--json",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &json["checks"]["log_limit"];
    assert_eq!(v["verdict"], "fail", "{t}");
    assert!(
        v["detail"].as_str().unwrap().contains("the log promised at most 10"),
        "{t}"
    );
    // JUnit: a test case of its own
    let junit = std::env::temp_dir().join(format!("own-backend-junit-{}.xml", std::process::id()));
    let o = cli(&["run", "sims/sliding-log.toml", "--junit", junit.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"sliding_log: log_limit\""), "{xml}");
    std::fs::remove_file(&junit).unwrap();
    // explore, counting only the team's property: the racy twin breaks it, shrunk
    let o = cli(&[
        "explore",
        "sims/sliding-log.toml",
        "--backend",
        "sliding_log_racy",
        "--processes",
        "3",
        "--requests",
        "5",
        "--checks",
        "log_limit",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("violation of log_limit"), "{t}");
    // a check nobody reports is bad input, not a search that finds nothing
    let o = cli(&["explore", "sims/sliding-log.toml", "--checks", "log_limt"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("--checks: no check `log_limt`") && t.contains("log_limit"),
        "{t}"
    );
}

// ---- live: its Lua on the real Redis ----------------------------------------------------

static LIVE: Mutex<()> = Mutex::new(());

/// Redis, or the loud line.
fn redis(test: &str) -> bool {
    match pacesim::live::settings::RedisSettings::from_env().check(std::time::Duration::from_secs(2)) {
        Ok(()) => true,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "LIVE TESTS NOT RUN ({test}): {e}");
            false
        }
    }
}

/// The run's key prefix, from the `live:` line.
fn prefix(t: &str) -> String {
    t.split("key prefix ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no key prefix: {t}"))
        .to_string()
}

/// No key of the run is left behind (pacesim's cleanup, keys the team's Lua wrote included).
fn no_keys_left(prefix: &str) {
    let mut c = pacesim::live::settings::RedisSettings::from_env()
        .connect(None, std::time::Duration::from_secs(2))
        .unwrap();
    let keys: Vec<String> = pacesim::live::adapter::redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut c)
        .unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[test]
fn live_runs_its_lua_against_redis_and_the_racy_twin_is_caught_there_too() {
    if !redis("own-backend live") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let o = cli(&["live", "sims/sliding-log.toml"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("backend sliding_log ") && t.contains("ceiling          pass"),
        "{t}"
    );
    // the team's own checker, on the grants its Lua reported on the server's clock
    assert!(t.contains("log_limit        pass"), "{t}");
    no_keys_left(&prefix(&t));

    let o = cli(&["live", "sims/sliding-log.toml", "--backend", "sliding_log_racy"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("ceiling          FAIL"), "{t}");
    assert!(t.contains("log_limit        FAIL"), "{t}");
    no_keys_left(&prefix(&t));
}

#[test]
fn conform_compares_it_with_its_own_model() {
    if !redis("own-backend conform") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let o = cli(&["conform", "sims/sliding-log.toml"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("conform sliding-log (backend sliding_log"), "{t}");
    assert!(t.contains("check ceiling                    pass         pass"), "{t}");
}
