//! Issue 17's reproducers, one named regression test each: malformed and extreme input is
//! refused with an error naming file, line and field (exit 2), never a panic, an abort or a
//! wrong answer with exit 0.

use crate::common;
use common::pacesim;
use pacesim::dist::Dist;
use pacesim::scenario::FOUR_LIMITERS;
use pacesim::time::Nanos;
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("robust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The parse error of scenario text `src`, as printed.
fn err(src: &str) -> String {
    match pacesim::registry::parse("t.toml", src) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// FOUR_LIMITERS with `backend` and one pacer option on line 7.
fn with_option(backend: &str, option: &str) -> String {
    FOUR_LIMITERS
        .replace("\"row\"", &format!("\"{backend}\""))
        .replace("rate = 50.0", &format!("rate = 50.0\n{option}"))
}

/// FOUR_LIMITERS (9 lines) with `tail` appended from line 10.
fn with_tail(tail: &str) -> String {
    format!("{FOUR_LIMITERS}{tail}")
}

/// Neither a panic (101) nor an abort (signal): a clean exit 2 with an error.
fn refused(args: &[&str]) -> String {
    let (code, out, err) = pacesim(args);
    assert_eq!(code, 2, "args {args:?}\nstdout: {out}\nstderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

// ---- item 1 ----

#[test]
fn i01_sweep_grid_backoff_factor_one_is_an_error_not_a_panic() {
    let d = tmp("i01");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let out = d.join("out");
    let e = refused(&[
        "sweep",
        f.to_str().unwrap(),
        "--grid",
        "backoff.factor=2.0,1.0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(e.contains("backoff.factor=1.0"), "{e}");
    assert!(
        e.contains("backoff.factor: backoff factor must be finite and > 1.0"),
        "{e}"
    );
    assert!(
        !out.join("runs.csv").exists(),
        "nothing runs when a grid point is invalid"
    );
}

// ---- items 3, 5, 6, 7 ----

#[test]
fn i03_poll_zero_is_rejected_for_redis_lock_and_advisory() {
    for b in ["redis_lock", "advisory", "claim_row"] {
        let e = err(&with_option(b, "poll = \"0s\""));
        assert_eq!(e, "t.toml:7: pacer.poll: must be above 0", "{b}");
    }
}

#[test]
fn i05_a_rate_the_nanosecond_interval_cannot_express_is_rejected_with_the_range() {
    for r in ["1e-10", "1e-11", "2e9", "1e300"] {
        let e = err(&FOUR_LIMITERS.replace("rate = 50.0", &format!("rate = {r}")));
        assert!(
            e.starts_with("t.toml:6: pacer.rate: must be between 1e-6 and 1e9 per second"),
            "{r}: {e}"
        );
    }
    // the ends of the range are valid
    for r in ["1e-6", "1e9"] {
        pacesim::registry::parse("t.toml", &FOUR_LIMITERS.replace("rate = 50.0", &format!("rate = {r}"))).unwrap();
    }
    // the same range for the destination's limit and the arrival rate
    let e = err(&with_tail("[destination]\nlimit = 1e-11\n"));
    assert!(e.starts_with("t.toml:11: destination.limit: must be between"), "{e}");
    let e = err(&FOUR_LIMITERS.replace("requests = 10", "arrival_rate = 1e12"));
    assert!(
        e.starts_with("t.toml:9: processes.arrival_rate: must be between"),
        "{e}"
    );
}

#[test]
fn i06_lognormal_sigma_is_bounded() {
    let lat = |sigma: &str| {
        with_tail(&format!(
            "[store]\nlatency = {{ dist = \"lognormal\", median = \"1ms\", sigma = {sigma} }}\n"
        ))
    };
    for s in ["1e300", "11.0", "inf", "nan", "-1.0"] {
        let e = err(&lat(s));
        assert!(
            e.starts_with("t.toml:11: store.latency: lognormal: sigma must be a number in [0, 10]"),
            "{s}: {e}"
        );
    }
    pacesim::registry::parse("t.toml", &lat("10.0")).unwrap();
}

#[test]
fn i06_draws_beyond_the_clock_saturate_never_become_zero() {
    // unvalidated parameters, as a library user could build them: half the draws overflow
    let d = Dist::Lognormal {
        median: Nanos(1_000_000),
        sigma: 1e300,
    };
    let mut rng = pacesim::rng::stream(3, pacesim::rng::Entity::Store);
    let draws: Vec<u64> = (0..200).map(|_| d.sample(&mut rng).0).collect();
    let top = draws.iter().filter(|&&v| v == 1_000_000_000_000_000_000).count();
    assert!(top > 50, "overflowing draws saturate to MAX_DRAW: {top} of 200");
}

/// Every silent coercion of the issue, each refused naming file, line and field.
#[test]
fn i07_silent_coercions_are_rejected_with_file_line_and_field() {
    let cases: Vec<(String, &str)> = vec![
        (
            with_option("redis_gcra", "burst = 0"),
            "t.toml:7: pacer.burst: must be at least 1",
        ),
        (
            with_option("advisory", "locks = 0"),
            "t.toml:7: pacer.locks: must be at least 1",
        ),
        (
            with_option("claim_row", "locks = 0"),
            "t.toml:7: pacer.locks: must be at least 1",
        ),
        (
            with_option("advisory", "connections = 0"),
            "t.toml:7: pacer.connections: must be at least 1",
        ),
        (
            with_option("redis_lock", "walk = 0"),
            "t.toml:7: pacer.walk: must be at least 1",
        ),
        (
            with_option("row", "stale_after = \"0s\""),
            "t.toml:7: pacer.stale_after: must be above 0",
        ),
        (
            with_tail("[destination]\nlimit = 5.0\nlimit_burst = 0\n"),
            "t.toml:12: destination.limit_burst: must be at least 1",
        ),
        (
            with_tail("[backoff]\ndecay_after = 0\n"),
            "t.toml:11: backoff.decay_after:",
        ),
        (
            with_tail("[checks]\nepsilon = nan\n"),
            "t.toml:11: checks.epsilon: must be a number in [0, 1], got NaN",
        ),
        (
            with_tail("[checks]\nepsilon = -5\n"),
            "t.toml:11: checks.epsilon: must be a number in [0, 1], got -5",
        ),
        (
            with_tail("[checks]\nepsilon = 7\n"),
            "t.toml:11: checks.epsilon: must be a number in [0, 1], got 7",
        ),
        (
            with_tail("[store]\ntimeout = \"0s\"\n"),
            "t.toml:11: store.timeout: must be above 0",
        ),
        (
            with_tail("[[faults]]\nkind = \"partition\"\nat = \"1s\"\nduration = \"1s\"\nprocesses = []\n"),
            "t.toml:14: faults[0].processes: a partition needs at least one process",
        ),
    ];
    for drift in ["nan", "inf", "-inf", "-2000000.0", "-1000000.0", "1e6"] {
        let src = with_tail(&format!("[[faults]]\nkind = \"clock\"\ndrift_ppm = {drift}\n"));
        let e = err(&src);
        assert!(
            e.starts_with("t.toml:12: faults[0].drift_ppm: must be a number above -1000000"),
            "{drift}: {e}"
        );
    }
    for (src, want) in cases {
        let e = err(&src);
        assert!(e.starts_with(want), "want `{want}`, got `{e}`");
    }
    // a drift the clock can run with is still valid
    pacesim::registry::parse(
        "t.toml",
        &with_tail("[[faults]]\nkind = \"clock\"\ndrift_ppm = -500.0\n"),
    )
    .unwrap();
}

// ---- item 8 ----

#[test]
fn i08_a_kill_after_the_runs_duration_is_rejected() {
    for at in ["5s", "6s", "1h"] {
        let e = err(&with_tail(&format!("[[faults]]\nkind = \"kill\"\nat = \"{at}\"\n")));
        assert!(
            e.starts_with("t.toml:12: faults[0].at: the kill can never happen"),
            "{at}: {e}"
        );
    }
    pacesim::registry::parse("t.toml", &with_tail("[[faults]]\nkind = \"kill\"\nat = \"4s\"\n")).unwrap();
}

// ---- items 2 and 10: `check` trusts nothing in the trace ----

/// A real trace of FOUR_LIMITERS, as lines.
fn real_trace(d: &Path) -> Vec<String> {
    let sc = d.join("s.toml");
    std::fs::write(&sc, FOUR_LIMITERS).unwrap();
    let t = d.join("t.jsonl");
    let (code, _, e) = pacesim(&["run", sc.to_str().unwrap(), "--trace", t.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    std::fs::read_to_string(&t).unwrap().lines().map(String::from).collect()
}

fn check_lines(d: &Path, name: &str, lines: &[String]) -> String {
    let p = d.join(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    refused(&["check", p.to_str().unwrap()])
}

fn edit(lines: &[String], i: usize, key: &str, value: serde_json::Value) -> Vec<String> {
    let mut out = lines.to_vec();
    let mut v: serde_json::Value = serde_json::from_str(&out[i]).unwrap();
    v[key] = value;
    out[i] = v.to_string();
    out
}

#[test]
fn i02_check_rejects_a_header_it_cannot_trust() {
    let d = tmp("i02h");
    let lines = real_trace(&d);
    let (code, _, e) = pacesim(&["check", d.join("t.jsonl").to_str().unwrap()]);
    assert_eq!(code, 0, "the untouched trace checks: {e}");
    for (i, (key, v)) in [
        ("rate", serde_json::json!(-50)),
        ("rate", serde_json::json!(0)),
        ("rate", serde_json::json!(1e-11)),
        ("processes", serde_json::json!(4_000_000_000u64)),
        ("processes", serde_json::json!(0)),
    ]
    .into_iter()
    .enumerate()
    {
        let e = check_lines(&d, &format!("h{i}.jsonl"), &edit(&lines, 0, key, v.clone()));
        assert!(e.contains(&format!("h{i}.jsonl:1: {key}: ")), "{key} = {v}: {e}");
    }
    // `--rate` is checked the same way
    let e = refused(&["check", d.join("t.jsonl").to_str().unwrap(), "--rate", "1e-11"]);
    assert!(e.contains("--rate must be between"), "{e}");
}

#[test]
fn i02_check_rejects_a_pid_or_status_out_of_range() {
    let d = tmp("i02e");
    let lines = real_trace(&d);
    let with_pid = lines.iter().position(|l| l.contains("\"pid\":")).unwrap();
    let with_status = lines.iter().position(|l| l.contains("\"status\":")).unwrap();
    for (name, i, key, v) in [
        ("pid-huge", with_pid, "pid", serde_json::json!(4_000_000_000u64)),
        ("pid-count", with_pid, "pid", serde_json::json!(4)),
        ("status-999", with_status, "status", serde_json::json!(999)),
        ("status-0", with_status, "status", serde_json::json!(0)),
    ] {
        let e = check_lines(&d, name, &edit(&lines, i, key, v));
        assert!(e.contains(&format!("{name}:{}: {key}: ", i + 1)), "{name}: {e}");
    }
}

#[test]
fn i02_check_and_run_of_dev_zero_fail_fast() {
    let t = std::time::Instant::now();
    let e = refused(&["check", "/dev/zero"]);
    assert!(e.contains("/dev/zero:1: (line): longer than"), "{e}");
    let e = refused(&["run", "/dev/zero"]);
    assert!(e.contains("/dev/zero: cannot read: larger than"), "{e}");
    let e = refused(&["sweep", "/dev/zero", "--grid", "rate=1,2"]);
    assert!(e.contains("/dev/zero: cannot read: larger than"), "{e}");
    assert!(t.elapsed().as_secs() < 20, "took {:?}", t.elapsed());
}

#[test]
fn i10_a_trace_cut_at_a_line_boundary_does_not_pass_as_complete() {
    let d = tmp("i10");
    let lines = real_trace(&d);
    assert!(lines.last().unwrap().contains("\"end\""));
    let cut = &lines[..lines.len() - 1];
    let e = check_lines(&d, "cut.jsonl", cut);
    assert!(
        e.contains(&format!("cut.jsonl:{}: end: the trace has no `end` event", cut.len())),
        "{e}"
    );
    // nor one cut in the middle
    let e = check_lines(&d, "half.jsonl", &lines[..lines.len() / 2]);
    assert!(e.contains(": end: "), "{e}");
}

// ---- items 11 to 13: sweeps, reports, paths ----

#[test]
fn i11_sweep_seeds_overflow_is_refused() {
    let d = tmp("i11s");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let out = d.join("out");
    let e = refused(&[
        "sweep",
        f.to_str().unwrap(),
        "--grid",
        "processes=2,4",
        "--seeds",
        "9223372036854775808",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        e.contains("2 grid points x 9223372036854775808 seeds is more than"),
        "{e}"
    );
}

#[test]
fn i11_sweep_repeated_axes_are_refused() {
    let d = tmp("i11a");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let out = d.join("out");
    let f = f.to_str().unwrap();
    let out = out.to_str().unwrap();
    let e = refused(&["sweep", f, "--grid", "rate=10,20", "--grid", "rate=30", "--out", out]);
    assert!(
        e.contains("--grid rate: sets `pacer.rate`, which --grid rate already sets"),
        "{e}"
    );
    let e = refused(&[
        "sweep",
        f,
        "--grid",
        "rate=10,20",
        "--grid",
        "pacer.rate=30",
        "--out",
        out,
    ]);
    assert!(
        e.contains("--grid pacer.rate: sets `pacer.rate`, which --grid rate already sets"),
        "{e}"
    );
}

#[test]
fn i12_two_scenarios_sharing_a_report_folder_are_refused() {
    let d = tmp("i12");
    let out = d.join("out");
    for (a, b) in [("same", "same"), ("a/b", "a_b")] {
        let fa = d.join("a.toml");
        let fb = d.join("b.toml");
        std::fs::write(&fa, FOUR_LIMITERS.replace("four-limiters", a)).unwrap();
        std::fs::write(&fb, FOUR_LIMITERS.replace("four-limiters", b)).unwrap();
        let e = refused(&[
            "simulate",
            fa.to_str().unwrap(),
            fb.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            e.contains(&format!("scenarios `{a}` and `{b}` would share the report directory")),
            "{e}"
        );
    }
}

#[test]
fn i13_merge_identifies_a_sweep_by_content_not_by_path_spelling() {
    let d = tmp("i13m");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let spelled = [f.to_str().unwrap().to_string(), format!("{}/./s.toml", d.display())];
    let mut shards = Vec::new();
    for (i, file) in spelled.iter().enumerate() {
        let out = d.join(format!("shard{i}"));
        let (code, _, e) = pacesim(&[
            "sweep",
            file,
            "--grid",
            "processes=2,4",
            "--shard",
            &format!("{i}/2"),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{e}");
        shards.push(out);
    }
    let merged = d.join("merged");
    let (code, out, e) = pacesim(&[
        "merge",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{e}");
}

// ---- item 4: memory estimated up front; long runs bounded ----

#[test]
fn i04_a_run_too_large_for_memory_is_refused_before_it_starts() {
    let d = tmp("i04");
    let cases = [
        (
            "procs",
            FOUR_LIMITERS.replace("count = 4", "count = 10000000"),
            "8: processes.count",
        ),
        ("locks", with_option("advisory", "locks = 4294967295"), "7: pacer.locks"),
        (
            "kills",
            with_tail("[[faults]]\nkind = \"kill\"\nrate = 1e9\nrestart_after = \"0s\"\n"),
            "12: faults[0].rate",
        ),
    ];
    let t = std::time::Instant::now();
    for (name, src, field) in cases {
        let f = d.join(format!("{name}.toml"));
        std::fs::write(&f, src).unwrap();
        let e = refused(&["run", f.to_str().unwrap()]);
        assert!(
            e.contains(&format!("{name}.toml:{field}: the run would need about ")),
            "{name}: {e}"
        );
        assert!(e.contains("above the limit of 4.0 GiB (--max-memory"), "{name}: {e}");
    }
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let f = f.to_str().unwrap();
    let e = refused(&["simulate", f, "--seeds", "1000000000000"]);
    assert!(e.contains("s.toml: --seeds: the run would need about"), "{e}");
    assert!(t.elapsed().as_secs() < 30, "refused before running: {:?}", t.elapsed());
    // the limit is the user's
    let e = refused(&["run", f, "--max-memory", "1MiB"]);
    assert!(e.contains("above the limit of 1 MiB"), "{e}");
    let (code, _, e) = pacesim(&["run", f, "--max-memory", "1GiB"]);
    assert_eq!(code, 0, "{e}");
    refused(&["run", f, "--max-memory", "lots"]);
}

#[test]
fn i04_max_wall_bounds_a_long_run() {
    let d = tmp("i04w");
    let f = d.join("long.toml");
    let long = FOUR_LIMITERS
        .replace("duration = \"5s\"", "duration = \"1h\"")
        .replace("rate = 50.0", "rate = 100000.0")
        .replace("requests = 10\n", "");
    std::fs::write(&f, long).unwrap();
    let t = std::time::Instant::now();
    // (the memory guard counts the fetches the rate allows: 7.2e8 here, past 4 GiB; the
    // run is stopped by the wall-clock bound long before it needs that)
    let e = refused(&["run", f.to_str().unwrap(), "--max-wall", "1s", "--max-memory", "64GiB"]);
    assert!(e.contains("--max-wall 1s: still running after 1s"), "{e}");
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
}

// ---- item 17: conform ----

#[test]
fn i17_conform_rejects_a_tolerance_that_is_not_a_number_at_least_zero() {
    for t in ["nan", "-1", "inf"] {
        let (code, _, e) = pacesim(&["conform", "sims/four-limiters.toml", "--tolerance", t]);
        assert_eq!(code, 2, "{t}: {e}");
        assert!(
            e.contains("--tolerance") && e.contains("must be a finite number >= 0"),
            "{t}: {e}"
        );
    }
}

// ---- item 16: live settings ----

/// `pacesim ARGS` with environment `vars`: exit code and stderr.
fn pacesim_env(args: &[&str], vars: &[(&str, &str)]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn i16_a_bad_pgport_is_named_and_a_redis_password_never_printed() {
    for port in ["abc", "99999"] {
        let (code, e) = pacesim_env(&["live", "sims/four-limiters.toml"], &[("PGPORT", port)]);
        assert_eq!(code, 2, "{e}");
        assert!(
            e.contains(&format!("setting PGPORT is invalid at PGPORT (`{port}` is not a port")),
            "{e}"
        );
    }
    let (code, e) = pacesim_env(
        &["live", "sims/redis-lock-short-ttl.toml"],
        &[("REDIS_URL", "redis://:s3cret@127.0.0.1:1/")],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("Redis is not reachable at redis://:***@127.0.0.1:1/"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
}

/// Issue 17 item 8: a kill armed at a point the backend never reaches is refused (it would
/// never fire and pass quietly): `holding_lock` on `row` (it takes no lock), `in_transaction`
/// on a `row` without `in_transaction`, `mid_reservation` on `advisory` (it reserves nothing).
/// A point only some backends of a `compare` list reach is refused too (issue 34 item 6: the
/// others would run with a kill that never fires).
#[test]
fn i08_a_kill_at_a_point_the_backend_never_reaches_is_rejected() {
    let kill = |point: &str| format!("[[faults]]\nkind = \"kill\"\nat = \"1s\"\npoint = \"{point}\"\n");
    let e = err(&with_tail(&kill("holding_lock")));
    assert_eq!(
        e,
        "t.toml:13: faults[0].point: the kill can never happen: backend `row` never reaches `holding_lock` \
         (it reaches: mid_reservation, sleeping_to_slot, mid_fetch); this scenario runs row"
    );
    let e = err(&with_tail(&kill("in_transaction")));
    assert!(e.starts_with("t.toml:13: faults[0].point:"), "{e}");
    let e = err(&format!(
        "{}{}",
        with_option("advisory", "locks = 2"),
        kill("mid_reservation")
    ));
    assert!(e.contains("reaches `mid_reservation`"), "{e}");
    // reached: accepted
    pacesim::registry::parse("t.toml", &with_tail(&kill("mid_reservation"))).unwrap();
    let tx = with_option(
        "row",
        "in_transaction = { hold = { dist = \"constant\", value = \"5ms\" } }",
    );
    pacesim::registry::parse("t.toml", &format!("{tx}{}", kill("in_transaction"))).unwrap();
    let cmp = with_option("row", "compare = [\"row\", \"advisory\"]");
    let e = err(&format!("{cmp}{}", kill("holding_lock")));
    assert!(e.contains("backend `row` never reaches `holding_lock`"), "{e}");
}

/// Issue 17 item 9: a steady kill stream that starves every request of the restarted fleet
/// (1 fetch of 40) fails self_heal, instead of passing as "no demand".
#[test]
fn i09_kills_that_starve_the_demand_fail_self_heal() {
    let src = with_tail(
        "[store]\nlatency = { dist = \"constant\", value = \"1ms\" }\n[fetch]\nduration = { dist = \"constant\", value = \"10ms\" }\n[[faults]]\nkind = \"kill\"\nrate = 200.0\nrestart_after = \"0s\"\n",
    );
    let sc = pacesim::registry::parse("t.toml", &src).unwrap();
    let s = pacesim::registry::simulate(&sc, None, None).unwrap();
    assert!(s.fetches < 5, "the stream starves the fleet: {} fetches", s.fetches);
    let v = &s.checks["self_heal"];
    assert!(v.failed(), "{}", v.detail);
    assert!(v.detail.starts_with("kills starved the demand"), "{}", v.detail);
    // a single kill with a restart heals: the same scenario passes
    let one = src.replace("rate = 200.0", "at = \"300ms\"");
    let s = pacesim::registry::simulate(&pacesim::registry::parse("t.toml", &one).unwrap(), None, None).unwrap();
    assert!(s.checks["self_heal"].passed(), "{}", s.checks["self_heal"].detail);
}

/// Issue 17's message nits: each error names the real problem, its line and its field.
#[test]
fn messages_name_the_real_problem() {
    let e = err(&FOUR_LIMITERS.replace("\"5s\"", "\"-5s\""));
    assert_eq!(
        e,
        "t.toml:3: duration: duration `-5s` is negative: a duration is 0 or more"
    );
    let e = err(&FOUR_LIMITERS.replace("\"5s\"", "\"1e308s\""));
    assert!(
        e.starts_with("t.toml:3: duration: duration `1e308s`: exponent notation"),
        "{e}"
    );
    // a missing [pacer] is named, not the first key of the file
    let no_pacer = "name = \"x\"\nduration = \"1s\"\n[processes]\ncount = 2\n";
    assert_eq!(err(no_pacer), "t.toml:0: pacer: missing field `pacer`");
    // a bad value inside a fault names the key, not only the fault
    let e = err(&with_tail("[[faults]]\nkind = \"kill\"\nat = 5\n"));
    assert!(e.starts_with("t.toml:12: faults[0].at: must be "), "{e}");
    // dotted keys and inline tables have a line
    let dotted = FOUR_LIMITERS.replace(
        "duration = \"5s\"",
        "duration = \"5s\"\nstore.latency = { dist = \"lognormal\", median = \"1ms\", sigma = 99.0 }",
    );
    assert!(err(&dotted).starts_with("t.toml:4: store.latency:"), "{}", err(&dotted));
    // a backend compared twice
    let twice = FOUR_LIMITERS.replace("rate = 50.0", "rate = 50.0\ncompare = [\"row\", \"row\"]");
    assert_eq!(err(&twice), "t.toml:7: pacer.compare: `row` is listed twice");
}

/// A UTF-8 byte-order mark is accepted before a trace's header (as before a scenario's first
/// line), and a zero-latency store's round trips print as 0 ms, not 1e-06.
#[test]
fn a_bom_is_accepted_in_traces_and_zero_latency_is_zero() {
    let d = tmp("bom");
    let lines = real_trace(&d);
    let p = d.join("bom.jsonl");
    std::fs::write(&p, format!("\u{feff}{}\n", lines.join("\n"))).unwrap();
    let (code, out, e) = pacesim(&["check", p.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{e}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reservation"]["p50_ms"], 0.0, "{}", v["reservation"]);
    assert_eq!(v["reservation"]["mean_ms"], 0.0);
}

/// Issue 17's sweep nit: an error in a grid point names the line of the user's file.
#[test]
fn a_sweep_error_cites_the_users_line() {
    let d = tmp("sweep-line");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let out = d.join("out");
    let (code, _, e) = pacesim(&[
        "sweep",
        f.to_str().unwrap(),
        "--grid",
        "rate=0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("[rate=0]:6: pacer.rate: must be a number above 0"), "{e}");
}

/// `--max-wall` would exit a live run before it cleans up (workers, schema, keys): refused.
#[test]
fn max_wall_is_refused_for_live_runs() {
    let e = refused(&["live", "sims/four-limiters.toml", "--max-wall", "1s"]);
    assert!(e.contains("--max-wall does not apply to live runs"), "{e}");
}

// ---- issue 34, items 11, 12, 14, 15 ----

/// FOUR_LIMITERS run to its duration (no request bound), 1 ms store, 10 ms fetches, with
/// `faults` appended.
fn unbounded(faults: &str) -> String {
    with_tail(&format!(
        "[store]\nlatency = {{ dist = \"constant\", value = \"1ms\" }}\n[fetch]\nduration = {{ dist = \"constant\", value = \"10ms\" }}\n{faults}"
    ))
    .replace("requests = 10\n", "")
}

/// The lines of a run's trace for scenario text `src`.
fn trace_of(d: &Path, src: &str) -> Vec<String> {
    let sc = d.join("s.toml");
    std::fs::write(&sc, src).unwrap();
    let t = d.join("t.jsonl");
    let (code, _, e) = pacesim(&["run", sc.to_str().unwrap(), "--trace", t.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{e}");
    std::fs::read_to_string(&t).unwrap().lines().map(String::from).collect()
}

/// `pacesim check` of `lines`: exit code and stdout.
fn check_of(d: &Path, name: &str, lines: &[String], args: &[&str]) -> (i32, String) {
    let p = d.join(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let mut a = vec!["check", p.to_str().unwrap()];
    a.extend(args);
    let (code, out, e) = pacesim(&a);
    assert!(!e.contains("panicked"), "{e}");
    (code, out)
}

/// The line of verdict `name` in a run's printed summary.
fn verdict_line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

/// Item 11: the pace heals after a kill, then no fetch starts for the rest of the run while
/// processes keep asking: the stall that runs to the end fails self_heal (it passed as
/// "largest stall 0.04s").
#[test]
fn i34_11_a_stall_that_runs_to_the_end_fails_self_heal() {
    let d = tmp("i34-11");
    let lines = trace_of(
        &d,
        &unbounded("[[faults]]\nkind = \"kill\"\nat = \"1s\"\nprocess = 1\nrestart_after = \"0s\"\n"),
    );
    let (code, out) = check_of(&d, "whole.jsonl", &lines, &[]);
    assert_eq!(code, 0, "the untouched run heals: {out}");
    // no fetch (start, arrival, end) from 2 s on: processes ask, the pace never serves them
    let stalled: Vec<String> = lines
        .iter()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let fetch = matches!(v["ev"].as_str(), Some("fetch_start" | "arrival" | "fetch_end"));
            !(fetch && v["t"].as_u64().unwrap() >= 2_000_000_000)
        })
        .cloned()
        .collect();
    let (code, out) = check_of(&d, "stalled.jsonl", &stalled, &[]);
    assert_eq!(code, 1, "{out}");
    let l = verdict_line(&out, "self_heal");
    assert!(l.contains("FAIL  wedge: after pid 1 killed at 1."), "{l}");
    assert!(l.contains("to the end at 5.000s while processes waited"), "{l}");
}

/// Item 11: a kill storm that leaves 5 fetches in 5 s (one at 0.24 s, then none) fails
/// self_heal; its witness names a few kills, not every one of hundreds (item 15).
#[test]
fn i34_11_a_kill_storm_with_a_few_fetches_fails_and_its_witness_is_short() {
    let d = tmp("i34-11s");
    let f = d.join("storm.toml");
    std::fs::write(
        &f,
        unbounded("[[faults]]\nkind = \"kill\"\nrate = 60.0\nrestart_after = \"0s\"\n"),
    )
    .unwrap();
    let (code, out, e) = pacesim(&["run", f.to_str().unwrap(), "--seed", "3"]);
    assert_eq!(code, 1, "{out}{e}");
    let l = verdict_line(&out, "self_heal");
    assert!(l.contains("FAIL  wedge: after pid "), "{l}");
    assert!(l.contains("other kills and the last, pid "), "{l}");
    assert!(l.len() < 1000, "{} bytes: {l}", l.len());
    // a 1000/s storm prints a short summary too
    std::fs::write(
        &f,
        unbounded("[[faults]]\nkind = \"kill\"\nrate = 1000.0\nrestart_after = \"0s\"\n"),
    )
    .unwrap();
    let (_, out, e) = pacesim(&["run", f.to_str().unwrap()]);
    assert!(out.len() < 5000, "{} bytes{e}", out.len());
}

/// Item 12: `requests = 0` would run nothing and pass every check.
#[test]
fn i34_12_zero_requests_are_refused() {
    let d = tmp("i34-12r");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS.replace("requests = 10", "requests = 0")).unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(e.contains("s.toml:9: processes.requests: must be at least 1"), "{e}");
}

/// Item 12: a header whose burst or multiplier cap no pacer could meet, a duplicated
/// arrival and a restart without a kill are refused (exit 2), not judged (exit 1).
#[test]
fn i34_12_check_refuses_what_no_run_writes() {
    let d = tmp("i34-12c");
    let lines = real_trace(&d);
    for (key, v) in [
        ("burst", serde_json::json!(0)),
        ("multiplier_cap", serde_json::json!(0.5)),
        ("multiplier_cap", serde_json::json!(-1)),
    ] {
        let e = check_lines(&d, "h.jsonl", &edit(&lines, 0, key, v.clone()));
        assert!(e.contains(&format!("h.jsonl:1: {key}: must be")), "{key} = {v}: {e}");
    }
    let i = lines.iter().position(|l| l.contains("\"arrival\"")).unwrap();
    let mut dup = lines.clone();
    dup.insert(i + 1, lines[i].clone());
    let e = check_lines(&d, "dup.jsonl", &dup);
    assert!(
        e.contains(&format!("dup.jsonl:{}: ev: arrival 2 of process", i + 2)),
        "{e}"
    );
    let mut restart = lines.clone();
    let t = serde_json::from_str::<serde_json::Value>(&lines[i]).unwrap()["t"].clone();
    restart.insert(i + 1, format!("{{\"ev\":\"restart\",\"t\":{t},\"pid\":2}}"));
    let e = check_lines(&d, "restart.jsonl", &restart);
    assert!(
        e.contains(&format!(
            "restart.jsonl:{}: ev: process 2 restarts, but it was never killed",
            i + 2
        )),
        "{e}"
    );
}

/// Item 12: 40 arrivals in the last second before `u64::MAX` are 40 in one second (the
/// window's arithmetic wrapped and counted 0).
#[test]
fn i34_12_the_largest_window_counts_near_the_end_of_the_clock() {
    let d = tmp("i34-12w");
    let lines = real_trace(&d);
    let base = u64::MAX - 900_000_000;
    let mut t = vec![lines[0].clone()];
    for k in 0..40u64 {
        let at = base + k * 20_000_000;
        let pid = k % 4;
        t.push(format!("{{\"ev\":\"fetch_start\",\"t\":{at},\"pid\":{pid}}}"));
        t.push(format!(
            "{{\"ev\":\"arrival\",\"t\":{at},\"pid\":{pid},\"status\":200}}"
        ));
    }
    t.push(format!("{{\"ev\":\"end\",\"t\":{}}}", u64::MAX));
    let (code, out) = check_of(&d, "late.jsonl", &t, &["--json"]);
    assert!(code == 0 || code == 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["max_window"]["count"], 40, "{}", v["max_window"]);
}

/// Item 12: a seed past TOML's integer range is refused by every command alike (`simulate`
/// and `matrix` wrapped `u64::MAX` to 0, 1; `sweep` refused it).
#[test]
fn i34_12_a_seed_past_the_toml_range_is_refused_everywhere() {
    let d = tmp("i34-12s");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        FOUR_LIMITERS.replace("duration", "seed = 18446744073709551615\nduration"),
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["run", f],
        vec!["simulate", f, "--seeds", "2"],
        vec!["matrix", f, "--cases", "2"],
    ] {
        let e = refused(&args);
        assert!(
            e.contains("s.toml:3: seed: must be at most 9223372036854775807"),
            "{args:?}: {e}"
        );
    }
    let out = d.join("out");
    let e = refused(&["sweep", f, "--grid", "rate=5,6", "--out", out.to_str().unwrap()]);
    assert!(e.contains("s.toml"), "{e}");
    // and on the command line
    let g = d.join("g.toml");
    std::fs::write(&g, FOUR_LIMITERS).unwrap();
    let e = refused(&["run", g.to_str().unwrap(), "--seed", "18446744073709551615"]);
    assert!(e.contains("g.toml: --seed: must be at most 9223372036854775807"), "{e}");
}

/// Item 12: a grid value given twice would run and average one point twice.
#[test]
fn i34_12_a_repeated_grid_value_is_refused() {
    let d = tmp("i34-12g");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let out = d.join("out");
    for (grid, a, b) in [("rate=5,5", "5", "5"), ("rate=5,7,5.0", "5", "5.0")] {
        let e = refused(&[
            "sweep",
            f.to_str().unwrap(),
            "--grid",
            grid,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(e.contains(&format!("`{a}` and `{b}` are the same value")), "{e}");
    }
    assert!(!out.exists(), "nothing ran");
}

/// Item 14: a distribution missing a field names its line and its table path.
#[test]
fn i34_14_a_distribution_missing_a_field_names_line_and_path() {
    let e = err(&with_tail(
        "[fetch]\nduration = { dist = \"lognormal\", sigma = 0.5 }\n",
    ));
    assert_eq!(e, "t.toml:11: fetch.duration.median: missing field `median`");
    let d = tmp("i34-14d");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        with_tail("[store]\nlatency = { dist = \"lognormal\", median = \"1ms\" }\n"),
    )
    .unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(
        e.contains("s.toml:11: store.latency.sigma: missing field `sigma`"),
        "{e}"
    );
}

/// Item 14: the memory guard names the file and line of the field that weighs most, the
/// limit in its own unit, and blames the limit itself when no field outweighs the base.
#[test]
fn i34_14_memory_guard_messages_name_the_file_and_the_real_cause() {
    let d = tmp("i34-14m");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS.replace("count = 4", "count = 10000000")).unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(e.contains("s.toml:8: processes.count: the run would need about"), "{e}");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let e = refused(&["run", f.to_str().unwrap(), "--max-memory", "1B"]);
    // the fixed part of a run (and, on two cores, the trace pipeline's batches)
    assert!(
        e.contains("s.toml: --max-memory: the run would need about ") && e.contains(" MiB"),
        "{e}"
    );
    assert!(e.contains("above the limit of 1 B"), "{e}");
    let e = refused(&["run", f.to_str().unwrap(), "--max-memory", "100KiB"]);
    assert!(e.contains("above the limit of 100 KiB"), "{e}");
}

/// Item 14: two scenarios of one name, a name that is the report's index, and a name too
/// long for a directory are refused before anything runs, naming the files.
#[test]
fn i34_14_report_names_are_checked_before_any_run() {
    let d = tmp("i34-14n");
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let fa = d.join("a.toml");
    let fb = d.join("b.toml");
    std::fs::write(&fa, FOUR_LIMITERS).unwrap();
    std::fs::write(&fb, FOUR_LIMITERS).unwrap();
    let (code, stdout, e) = pacesim(&["simulate", fa.to_str().unwrap(), fb.to_str().unwrap(), "--out", out]);
    assert_eq!(code, 2, "{e}");
    assert!(stdout.is_empty(), "nothing ran: {stdout}");
    assert!(
        e.contains("b.toml:2: name: scenarios `four-limiters` and `four-limiters`"),
        "{e}"
    );
    assert!(e.contains("a.toml:2"), "{e}");
    std::fs::write(&fa, FOUR_LIMITERS.replace("four-limiters", "index.md")).unwrap();
    let (code, stdout, e) = pacesim(&["simulate", fa.to_str().unwrap(), "--out", out]);
    assert_eq!(code, 2, "{e}");
    assert!(stdout.is_empty(), "nothing ran: {stdout}");
    assert!(e.contains("a.toml:2: name: a scenario named `index.md`"), "{e}");
    std::fs::write(&fa, FOUR_LIMITERS.replace("four-limiters", &"x".repeat(300))).unwrap();
    let e = refused(&["simulate", fa.to_str().unwrap(), "--out", out]);
    assert!(e.contains("a.toml:2: name: must be 1 to 100 characters"), "{e}");
}

/// Item 14: merging shards of different grids says how they differ; shards of a 2-way and
/// a 3-way split, or one shard twice, are named as such.
#[test]
fn i34_14_merge_messages_say_what_differs() {
    let d = tmp("i34-14g");
    let f = d.join("s.toml");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let f = f.to_str().unwrap();
    let shard = |name: &str, grid: &str, shard: &str| {
        let out = d.join(name);
        let (code, _, e) = pacesim(&[
            "sweep",
            f,
            "--grid",
            grid,
            "--shard",
            shard,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{e}");
        out
    };
    let a0 = shard("a0", "rate=10,20", "0/2");
    let b1 = shard("b1", "rate=30,40", "1/2");
    let c1 = shard("c1", "rate=10,20", "1/3");
    let m = d.join("m");
    let merge = |a: &Path, b: &Path| {
        refused(&[
            "merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            m.to_str().unwrap(),
        ])
    };
    let e = merge(&a0, &b1);
    assert!(e.contains("grid `rate=10,20`"), "{e}");
    assert!(e.contains("against `rate=30,40`"), "{e}");
    let e = merge(&a0, &c1);
    assert!(
        e.contains("shard 0/2 and shard 1/3 split the sweep 2 and 3 ways"),
        "{e}"
    );
    let e = merge(&a0, &a0);
    assert!(e.contains("shard 0/2 is given twice"), "{e}");
}

/// Item 15: a trace's scenario name cannot drive the terminal.
#[test]
fn i34_15_escape_sequences_from_a_trace_reach_the_terminal_inert() {
    let d = tmp("i34-15e");
    let lines = real_trace(&d);
    let edited = edit(
        &lines,
        0,
        "scenario",
        serde_json::json!("\u{1b}]0;owned\u{7}\u{1b}[2Jx"),
    );
    let (code, out) = check_of(&d, "esc.jsonl", &edited, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.contains("scenario \\u{1b}]0;owned\\u{7}\\u{1b}[2Jx  backend row"),
        "{out}"
    );
}

/// Item 15: `[record]` text goes into index.md as one line of text: no heading, no HTML.
#[test]
fn i34_15_record_text_is_escaped_in_the_index() {
    let d = tmp("i34-15r");
    let f = d.join("s.toml");
    let rec = "[record]\nsource = \"rec\\n# Injected heading\"\nclaim = \"<script>alert(1)</script> & more\"\n";
    std::fs::write(&f, with_tail(rec)).unwrap();
    let out = d.join("out");
    let (code, _, e) = pacesim(&["simulate", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    let md = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(!md.contains("<script>"), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("# Injected")), "{md}");
    assert!(
        md.contains(
            "**The record's claim** (rec # Injected heading): &lt;script&gt;alert(1)&lt;/script&gt; &amp; more"
        ),
        "{md}"
    );
}

/// Item 15: a huge number is quoted short, and `--max-wall 0s` is refused.
#[test]
fn i34_15_huge_numbers_are_quoted_short_and_max_wall_zero_is_refused() {
    let d = tmp("i34-15w");
    let f = d.join("s.toml");
    std::fs::write(&f, with_tail("[[faults]]\nkind = \"clock\"\ndrift_ppm = 1e300\n")).unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(
        e.contains("s.toml:12: faults[0].drift_ppm: ") && e.trim_end().ends_with("got 1e300"),
        "{e}"
    );
    assert!(e.len() < 250, "{e}");
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let e = refused(&["run", f.to_str().unwrap(), "--max-wall", "0s"]);
    assert!(e.contains("--max-wall must be above 0"), "{e}");
}

// ---- issue 52, item 4: an output path that is an input is refused ----

/// Item 4: every command refuses an output path that is one of its inputs (by identity: also
/// through a symbolic or a hard link, and a file an output directory would be written over),
/// before anything runs; the input is left as it was.
#[test]
fn s52_04_an_output_that_is_an_input_is_refused_by_every_command() {
    let d = tmp("s52-04");
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let mk = |name: &str, text: &str| {
        let f = d.join(name);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, text).unwrap();
    };
    let link = |from: &str, to: &str| {
        std::fs::create_dir_all(d.join(to).parent().unwrap()).unwrap();
        std::fs::hard_link(d.join(from), d.join(to)).unwrap();
    };
    mk("x.toml", FOUR_LIMITERS);
    std::os::unix::fs::symlink(d.join("x.toml"), d.join("sym.toml")).unwrap();
    link("x.toml", "hard.toml");
    mk("c.json", "{}");
    mk("e.toml", "[four-limiters.row]\nfail = []\n");
    mk("w.py", "print()\n");
    // files an output directory would be written over
    mk("ex/four-limiters-row.case.toml", FOUR_LIMITERS);
    link("x.toml", "ed/four-limiters-row.case.toml");
    mk("em/r.json", "{}");
    link("x.toml", "rep/index.md");
    link("x.toml", "rep/four-limiters/summary.json");
    link("x.toml", "sw/runs.csv");
    mk("sh/sweep.json", "{}");
    mk("sh/runs.jsonl", "");
    let x = p("x.toml");
    let cases: Vec<Vec<String>> = vec![
        vec!["run".into(), x.clone(), "--record-choices".into(), x.clone()],
        vec!["run".into(), x.clone(), "--trace".into(), p("sym.toml")],
        vec!["run".into(), x.clone(), "--junit".into(), p("hard.toml")],
        vec![
            "run".into(),
            x.clone(),
            "--choices".into(),
            p("c.json"),
            "--trace".into(),
            p("c.json"),
        ],
        vec!["explore".into(), x.clone(), "--junit".into(), p("hard.toml")],
        vec![
            "explore".into(),
            p("ex/four-limiters-row.case.toml"),
            "--out".into(),
            p("ex"),
        ],
        vec!["explore-defects".into(), x.clone(), "--out".into(), p("ed")],
        vec![
            "explore-defects".into(),
            x.clone(),
            "--expected".into(),
            p("e.toml"),
            "--out".into(),
            p("ed"),
        ],
        vec!["explore-merge".into(), p("em/r.json"), "--out".into(), p("em")],
        vec!["simulate".into(), x.clone(), "--junit".into(), p("sym.toml")],
        vec!["simulate".into(), x.clone(), "--out".into(), p("rep")],
        vec!["matrix".into(), x.clone(), "--junit".into(), x.clone()],
        vec![
            "matrix".into(),
            x.clone(),
            "--expected".into(),
            p("e.toml"),
            "--junit".into(),
            p("e.toml"),
        ],
        vec!["live".into(), x.clone(), "--trace".into(), p("hard.toml")],
        vec![
            "live".into(),
            x.clone(),
            "--worker-cmd".into(),
            format!("python3 {}", p("w.py")),
            "--junit".into(),
            p("w.py"),
        ],
        vec!["conform".into(), x.clone(), "--junit".into(), p("sym.toml")],
        vec!["sweep".into(), x.clone(), "--out".into(), p("sw")],
        vec!["merge".into(), p("sh"), "--out".into(), p("sh")],
    ];
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let e = refused(&args);
        assert!(
            e.contains("that is the input") && e.contains("would overwrite the input"),
            "{args:?}: {e}"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("x.toml")).unwrap(),
            FOUR_LIMITERS,
            "{args:?}"
        );
        assert_eq!(std::fs::read_to_string(d.join("c.json")).unwrap(), "{}", "{args:?}");
        assert_eq!(
            std::fs::read_to_string(d.join("w.py")).unwrap(),
            "print()\n",
            "{args:?}"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("sh/sweep.json")).unwrap(),
            "{}",
            "{args:?}"
        );
    }
    // an output beside the input, not over it, is written as always
    let (code, _, e) = pacesim(&["run", &x, "--trace", &p("t.jsonl"), "--record-choices", &p("r.json")]);
    assert_eq!(code, 0, "{e}");
    assert!(d.join("t.jsonl").exists() && d.join("r.json").exists());
}

// ---- issue 52, item 5: choice files that run out, or were made on another text ----

/// Item 5: `run --choices` on a recorded file cut short hung for ever (past its end every
/// word was zero, and a log-normal draw's rejection loop never ends on zeros); so did a
/// recording replayed on an edited scenario whose name, backend and seed still match. A file
/// made on another text of the scenario is refused naming `scenario_hash`; a replay that runs
/// past the words ends and is refused with the counts.
#[test]
fn s52_05_a_choice_file_that_runs_out_or_fits_another_text_ends() {
    let d = tmp("s52-05");
    let f = d.join("s.toml");
    let file = f.to_str().unwrap();
    let src = with_tail("[store]\nlatency = { dist = \"lognormal\", median = \"1ms\", sigma = 0.5 }\n");
    std::fs::write(&f, &src).unwrap();
    let rec = d.join("rec.json");
    let (code, _, e) = pacesim(&["run", file, "--record-choices", rec.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    let (code, _, e) = pacesim(&["run", file, "--choices", rec.to_str().unwrap()]);
    assert_eq!(code, 0, "the whole file replays: {e}");
    let recorded: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    assert!(recorded["scenario_hash"].is_string(), "{recorded}");
    assert!(recorded["words"].as_array().unwrap().len() > 40);
    // cut short, or all zeros: the run ends, refused with the counts (a bounded wait: the
    // watchdog's exit would name --max-wall instead)
    let cut = d.join("cut.json");
    for words in [
        serde_json::json!(recorded["words"].as_array().unwrap()[..3]),
        serde_json::json!(vec![0u64; 30]),
    ] {
        let mut c = recorded.clone();
        c["words"] = words;
        std::fs::write(&cut, c.to_string()).unwrap();
        let e = refused(&["run", file, "--choices", cut.to_str().unwrap(), "--max-wall", "20s"]);
        assert!(e.contains("cut.json: field `words`: the run drew"), "{e}");
        assert!(e.contains("the choices do not fit this scenario"), "{e}");
    }
    // an edited scenario, its name, backend and seed unchanged: refused up front
    std::fs::write(&f, src.replace("requests = 10", "requests = 30")).unwrap();
    let e = refused(&["run", file, "--choices", rec.to_str().unwrap(), "--max-wall", "20s"]);
    assert!(
        e.contains("rec.json: field `scenario_hash`: the choices were made on another text"),
        "{e}"
    );
    // a file from before the hash was recorded: the edited run ends, refused with the counts
    let mut old = recorded.clone();
    old.as_object_mut().unwrap().remove("scenario_hash");
    std::fs::write(&cut, old.to_string()).unwrap();
    let e = refused(&["run", file, "--choices", cut.to_str().unwrap(), "--max-wall", "20s"]);
    assert!(e.contains("field `words`: the run drew"), "{e}");
}

// ---- issue 52, "Messages" ----

/// Issue 52's messages: an `explore` flag out of range names the flag (not a line of the text
/// pacesim rewrote, nor `-1` for 2^64 - 1); `--seeds` and `--cases` past a scenario's seed
/// range are refused (a reproducer `run` refuses was printed); a quoted table name gives its
/// line and the field unquoted; a 100,000-character value is quoted short; a value of the
/// wrong type or an unknown name gets pacesim's wording with file, line and field; `merge`
/// names the directory that does not exist.
#[test]
fn s52_messages_name_the_flag_the_line_and_quote_values_short() {
    let d = tmp("s52-msg");
    let f = d.join("s.toml");
    let file = f.to_str().unwrap();
    std::fs::write(&f, FOUR_LIMITERS).unwrap();
    let e = refused(&["explore", file, "--processes", "0"]);
    assert!(e.contains("--processes") && !e.contains("s.toml:"), "{e}");
    let e = refused(&["explore", file, "--requests", "18446744073709551615"]);
    assert!(
        e.contains("--requests") && !e.contains("-1") && !e.contains("s.toml:"),
        "{e}"
    );
    // seeds past i64::MAX
    std::fs::write(
        &f,
        FOUR_LIMITERS.replace("duration", "seed = 9223372036854775807\nduration"),
    )
    .unwrap();
    let sweep_out = d.join("sweep");
    let sweep_out = sweep_out.to_str().unwrap();
    for args in [
        vec!["simulate", file, "--seeds", "2"],
        vec!["matrix", file, "--cases", "2"],
        vec!["sweep", file, "--seeds", "2", "--out", sweep_out],
    ] {
        let (code, out, e) = pacesim(&args);
        assert_eq!(code, 2, "{args:?}: {out}{e}");
        assert!(e.contains("is past the largest seed, 9223372036854775807"), "{e}");
        assert!(
            !out.contains("9223372036854775808") && !e.contains("--seed 9223372036854775808"),
            "{out}{e}"
        );
    }
    // a quoted table name
    let e = err(&FOUR_LIMITERS
        .replace("[pacer]", "[\"pacer\"]")
        .replace("rate = 50.0", "rate = 50.0\nbogus = 1"));
    assert!(e.starts_with("t.toml:7: pacer.bogus: "), "{e}");
    let e = err(&FOUR_LIMITERS
        .replace("[processes]", "[ 'processes' ]")
        .replace("count = 4", "count = \"x\""));
    assert!(
        e.starts_with("t.toml:8: processes.count: must be a whole number"),
        "{e}"
    );
    // a 100,000-character value
    let big = "x".repeat(100_000);
    let e = err(&FOUR_LIMITERS.replace("rate = 50.0", &format!("rate = \"{big}\"")));
    assert!(
        e.starts_with("t.toml:6: pacer.rate: must be a number, got \"xxx"),
        "{e}"
    );
    assert!(e.len() < 300 && e.contains("(100002 characters)"), "{e}");
    let e = err(&FOUR_LIMITERS.replace("rate = 50.0", &format!("rate = 50.0\nfallback = \"{big}\"")));
    assert!(
        e.starts_with("t.toml:7: pacer.fallback: must be one of `fail_open`"),
        "{e}"
    );
    assert!(e.len() < 300, "{e}");
    // pacesim's wording, not serde's
    let e = err(&FOUR_LIMITERS.replace("rate = 50.0", "rate = 50.0\nin_transaction = { hold = \"0s\" }"));
    assert!(
        e.starts_with("t.toml:7: pacer.in_transaction: must be a distribution, e.g. { dist = \"constant\""),
        "{e}"
    );
    assert!(e.ends_with("got \"0s\""), "{e}");
    let e = err(&FOUR_LIMITERS.replace("rate = 50.0", "rate = 50.0\nstreak = \"sideways\""));
    assert_eq!(
        e,
        "t.toml:7: pacer.streak: must be one of `global`, `per_process`, got `sideways`"
    );
    // merge names what does not exist
    let missing = d.join("nonexist");
    let e = refused(&["merge", missing.to_str().unwrap()]);
    assert!(e.contains("nonexist: no such shard directory"), "{e}");
}
