//! Issue 34, items 6 to 10: crashes and unbounded work. Every route that picks the backend a
//! run uses validates that backend (threads, kill points, options); work and memory a run
//! cannot finish are refused up front (exit 2, with the figure); durations the virtual clock
//! cannot represent are refused with file, line and field.

use crate::common;
use common::{pacesim, run_measured};
use pacesim::builder::{SimBuilder, SimError};
use pacesim::registry::Configure;
use pacesim::scenario::FOUR_LIMITERS;
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bounds-{name}-{}", std::process::id()));
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

/// Neither a panic (101) nor an abort (signal): a clean exit 2 with an error.
fn refused(args: &[&str]) -> String {
    let (code, out, err) = pacesim(args);
    assert_eq!(code, 2, "args {args:?}\nstdout: {out}\nstderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn sim(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

// ---- item 6: the backend that runs is the backend validated, on every route ----

#[test]
fn i06_sweep_grid_backend_with_threads_is_refused_not_a_panic() {
    let d = tmp("i06-sweep");
    let out = d.join("out");
    let e = refused(&[
        "sweep",
        "sims/threads-row.toml",
        "--grid",
        "backend=advisory",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(e.contains("pacer.backend") && e.contains("advisory"), "{e}");
    // the same on a scenario without a compare list names the threads
    let f = d.join("one.toml");
    std::fs::write(
        &f,
        sim("threads-row.toml").replace("compare = [\"row\", \"shared_cache\", \"redis_gcra\"]\n", ""),
    )
    .unwrap();
    let e = refused(&[
        "sweep",
        f.to_str().unwrap(),
        "--grid",
        "backend=row,advisory",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        e.contains("processes.threads: backend `advisory` runs one thread per process"),
        "{e}"
    );
    assert!(!out.join("runs.csv").exists(), "nothing runs");
}

#[test]
fn i06_pacer_backend_outside_compare_is_validated() {
    let src = sim("threads-row.toml");
    // a lock backend as `backend`, the compare list pace backends: `run` would panic
    let e = err(&src.replace("backend = \"row\"", "backend = \"advisory\""));
    assert!(e.starts_with("t.toml:"), "{e}");
    assert!(
        e.contains("pacer.backend: `advisory` is not in the `compare` list"),
        "{e}"
    );
    // an option only the compare list uses, with `run` running another backend
    let src = FOUR_LIMITERS.replace(
        "backend = \"row\"\nrate = 50.0",
        "backend = \"redis_lock\"\nrate = 50.0\ncompare = [\"row\", \"local\"]\nstale_after = \"1s\"",
    );
    let e = err(&src);
    assert!(
        e.contains("pacer.backend: `redis_lock` is not in the `compare` list"),
        "{e}"
    );
}

#[test]
fn i06_run_backend_judges_options_and_kill_points_of_the_backend_it_runs() {
    // a kill at a point `local` never reaches: it used to run with 0 crash events
    let e = refused(&["run", "sims/kill-mid-reservation.toml", "--backend", "local"]);
    assert!(
        e.contains("faults[0].point: the kill can never happen: backend `local` never reaches `mid_reservation`"),
        "{e}"
    );
    // an option of the compare list's row, on `--backend redis_lock` (outside the list)
    let d = tmp("i06-run");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        FOUR_LIMITERS.replace(
            "rate = 50.0",
            "rate = 50.0\ncompare = [\"row\", \"local\"]\nstale_after = \"1s\"",
        ),
    )
    .unwrap();
    let e = refused(&["run", f.to_str().unwrap(), "--backend", "redis_lock"]);
    assert!(
        e.contains("pacer.stale_after: backend `redis_lock` does not use option `stale_after`"),
        "{e}"
    );
    // one on the list keeps the list's options (and runs: `local` fails its ceiling, exit 1)
    let (code, _, e) = pacesim(&["run", f.to_str().unwrap(), "--backend", "local"]);
    assert!(code == 0 || code == 1, "{e}");
}

#[test]
fn i06_a_kill_every_compared_backend_must_reach() {
    let kill = "[[faults]]\nkind = \"kill\"\nat = \"1s\"\npoint = \"holding_lock\"\n";
    let cmp = FOUR_LIMITERS.replace("rate = 50.0", "rate = 50.0\ncompare = [\"row\", \"advisory\"]");
    let e = err(&format!("{cmp}{kill}"));
    assert!(
        e.contains("faults[0].point: the kill can never happen: backend `row` never reaches `holding_lock`"),
        "{e}"
    );
    // `simulate` and `matrix` refuse it before running anything
    let d = tmp("i06-sim");
    let f = d.join("s.toml");
    std::fs::write(&f, format!("{cmp}{kill}")).unwrap();
    let e = refused(&["simulate", f.to_str().unwrap()]);
    assert!(e.contains("never reaches `holding_lock`"), "{e}");
    let e = refused(&["matrix", f.to_str().unwrap()]);
    assert!(e.contains("never reaches `holding_lock`"), "{e}");
}

#[test]
fn i06_sim_builder_refuses_what_its_backend_cannot_run() {
    let threads = sim("threads-row.toml");
    let sc = pacesim::registry::parse("t.toml", &threads).unwrap();
    let adv = pacesim::backend::advisory::AdvisoryOptions::default()
        .build(&sc)
        .unwrap();
    let Err(SimError::Refused(e)) = SimBuilder::new(sc.clone()).run(adv) else {
        panic!("refused")
    };
    assert_eq!(e.field, "processes.threads");
    assert!(
        e.message.contains("backend `advisory` runs one thread per process"),
        "{e:?}"
    );
    let kill = pacesim::registry::parse("k.toml", &sim("kill-mid-reservation.toml")).unwrap();
    let local = pacesim::backend::local::LocalOptions::default().build(&kill).unwrap();
    let mut out = pacesim::trace::Collect::default();
    let Err(SimError::Refused(e)) = SimBuilder::new(kill.clone()).run_into(local, &mut out) else {
        panic!("refused")
    };
    assert_eq!(e.field, "faults[0].point");
    assert!(out.header.is_none(), "nothing is written");
    // a backend that can: runs
    let row = pacesim::backend::row::RowOptions::default().build(&sc).unwrap();
    assert!(SimBuilder::new(sc).run(row).is_ok());
}

// ---- item 10: durations the virtual clock cannot represent ----

#[test]
fn i10_a_duration_past_the_clock_is_refused_with_file_line_and_field() {
    // 1e19 ns was accepted; virtual time stops at 2^63 ns (about 9.2e18)
    let e = err(&FOUR_LIMITERS.replace("duration = \"5s\"", "duration = \"10000000000000000000ns\""));
    assert!(e.starts_with("t.toml:3: duration:"), "{e}");
    assert!(e.contains("beyond what the virtual clock can represent"), "{e}");
    let e = err(&FOUR_LIMITERS.replace("duration = \"5s\"", "duration = \"300000000h\""));
    assert!(e.starts_with("t.toml:3: duration:"), "{e}");
    // a fault's time, a distribution's value
    let e = err(&format!(
        "{FOUR_LIMITERS}[[faults]]\nkind = \"kill\"\nat = \"9000000000000000000ns\"\n"
    ));
    assert!(
        e.starts_with("t.toml:") && e.contains("faults[0]") && e.contains("beyond what the virtual clock"),
        "{e}"
    );
    let e = err(&format!(
        "{FOUR_LIMITERS}[fetch]\nduration = {{ dist = \"constant\", value = \"5000000000000000000ns\" }}\n"
    ));
    assert!(
        e.contains("t.toml:11:") && e.contains("beyond what the virtual clock"),
        "{e}"
    );
    // the longest accepted
    pacesim::registry::parse(
        "t.toml",
        &FOUR_LIMITERS.replace("duration = \"5s\"", "duration = \"1000000000000000000ns\""),
    )
    .unwrap();
    // the command line too
    let e = refused(&["run", "sims/four-limiters.toml", "--max-wall", "10000000000000000000ns"]);
    assert!(e.contains("beyond what the virtual clock"), "{e}");
}

// ---- item 7: limits too small to make progress ----

#[test]
fn i07_a_time_limit_too_small_to_make_progress_is_refused() {
    let with = |field: &str| FOUR_LIMITERS.replace("requests = 10", &format!("requests = 10\n{field}"));
    for f in ["hard_limit", "soft_limit"] {
        let e = err(&with(&format!("{f} = \"0s\"")));
        assert!(
            e.starts_with(&format!("t.toml:10: processes.{f}: must be above 0")),
            "{e}"
        );
    }
    // one nanosecond: every job killed as it starts, a billion times a second
    let d = tmp("i07");
    let f = d.join("s.toml");
    std::fs::write(&f, with("hard_limit = \"1ns\"")).unwrap();
    // (each firing a restart to keep: by memory first, issue 52 item 6; then by work)
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(e.contains("processes.hard_limit: the run would need about"), "{e}");
    let e = refused(&["run", f.to_str().unwrap(), "--max-memory", "1000TiB"]);
    assert!(e.contains("processes.hard_limit: the run would schedule about"), "{e}");
    // a lock polled every nanosecond
    std::fs::write(
        &f,
        FOUR_LIMITERS
            .replace("\"row\"", "\"advisory\"")
            .replace("rate = 50.0", "rate = 50.0\npoll = \"1ns\""),
    )
    .unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(e.contains("pacer.poll: the run would schedule about"), "{e}");
}

// ---- item 9: work without bound ----

#[test]
fn i09_a_period_of_a_nanosecond_is_refused_with_the_figure() {
    let src = sim("backfill-chunks.toml");
    let d = tmp("i09-jobs");
    let f = d.join("s.toml");
    for (field, line) in [
        ("tick", "tick = \"1ns\""),
        ("sweep_every", "tick = \"15m\"\nsweep_every = \"1ns\""),
    ] {
        std::fs::write(&f, src.replace("tick = \"15m\"", line)).unwrap();
        let e = refused(&["run", f.to_str().unwrap()]);
        assert!(
            e.contains(&format!("jobs.{field}: the run would schedule about")),
            "{e}"
        );
        assert!(e.contains("e14 events, above the limit of 1e10"), "{e}");
        let e = refused(&["simulate", f.to_str().unwrap()]);
        assert!(e.contains(&format!("jobs.{field}")), "{e}");
    }
    // the shipped period runs
    std::fs::write(&f, &src).unwrap();
    pacesim::registry::parse("s.toml", &src).unwrap();
    assert!(pacesim::run::budget::work(&pacesim::registry::parse("s.toml", &src).unwrap()).0 < 1e8);
}

/// Item 7's first reproducer: `row` at 1e8/s for 10 s (a billion fetches) aborted allocating
/// 4 GiB. The fetches the pacer allows are in both estimates: refused up front, naming the
/// rate, by memory and (with the memory limit raised) by work; a bounded `requests` lifts it.
#[test]
fn i07_a_huge_rate_is_refused_before_it_runs() {
    let d = tmp("i07-rate");
    let f = d.join("s.toml");
    let src =
        "name = \"huge-rate\"\nduration = \"10s\"\n[pacer]\nbackend = \"row\"\nrate = 1e8\n[processes]\ncount = 4\n";
    std::fs::write(&f, src).unwrap();
    let file = f.to_str().unwrap();
    let e = refused(&["run", file]);
    assert!(e.contains("s.toml:5: pacer.rate: the run would need about"), "{e}");
    let e = refused(&["run", file, "--max-memory", "64GiB"]);
    assert!(e.contains("pacer.rate: the run would schedule about"), "{e}");
    let sc = pacesim::registry::parse("s.toml", &src.replace("count = 4", "count = 4\nrequests = 1000")).unwrap();
    pacesim::run::budget::check(&sc, 1).unwrap();
}

#[test]
fn i09_the_backoff_checkers_reordering_search_is_bounded() {
    // row with a 1 ms store timeout (reports time out: their fate floats) and a 429 window:
    // 80 s and 1.5 GB in the reordering search
    let d = tmp("i09-backoff");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        r#"name = "bo"
seed = 5
duration = "20s"
[pacer]
backend = "row"
rate = 50.0
backoff = "global"
[processes]
count = 16
[store]
latency = { dist = "lognormal", median = "0.6ms", sigma = 0.5 }
service = { dist = "constant", value = "0.05ms" }
timeout = "1ms"
[fetch]
duration = { dist = "lognormal", median = "50ms", sigma = 0.4 }
[[faults]]
kind = "destination_throttle"
at = "2s"
duration = "10s"
[backoff]
factor = 2.0
cap = 8.0
decay_after = 10
"#,
    )
    .unwrap();
    let (code, e, peak) = run_measured(&["run", f.to_str().unwrap(), "--max-wall", "40s"]);
    assert!(code == 0 || code == 1, "exit {code}: {e}");
    assert!(peak < 256 << 20, "peak {} MiB", peak >> 20);
}

#[test]
fn i09_long_fault_lists_are_near_linear() {
    let d = tmp("i09-faults");
    let base =
        "name = \"p\"\nseed = 1\nduration = \"5s\"\n[pacer]\nbackend = \"row\"\nrate = 50.0\n[processes]\ncount = 4\n";
    // a partition naming a million processes (one, a million times): 33 s, quadratic
    let f = d.join("part.toml");
    let pids = vec!["1"; 1_000_000].join(",");
    std::fs::write(
        &f,
        format!("{base}[[faults]]\nkind = \"partition\"\nat = \"1s\"\nduration = \"2s\"\nprocesses = [{pids}]\n"),
    )
    .unwrap();
    let (code, e, _) = run_measured(&["run", f.to_str().unwrap(), "--max-wall", "20s"]);
    assert!(code == 0 || code == 1, "exit {code}: {e}");
    // 40,000 overlapping outages (> 30 s: every checker follows every open window at every
    // event): refused, with the figure
    let f = d.join("outages.toml");
    let mut src = base.to_string();
    for i in 0..40_000 {
        src.push_str(&format!(
            "[[faults]]\nkind = \"store_outage\"\nat = \"{}ms\"\nduration = \"3s\"\n",
            1000 + i % 1000
        ));
    }
    std::fs::write(&f, &src).unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(
        e.contains("faults[") && e.contains("40000 fault windows are open at once (at 1999ms), above the limit of 256"),
        "{e}"
    );
    // as many one after the other run
    let mut src = base.to_string();
    for i in 0..40_000u64 {
        src.push_str(&format!(
            "[[faults]]\nkind = \"store_outage\"\nat = \"{}us\"\nduration = \"50us\"\n",
            1000 + i * 100
        ));
    }
    std::fs::write(&f, &src).unwrap();
    let (code, e, _) = run_measured(&["run", f.to_str().unwrap(), "--max-wall", "20s"]);
    assert!(code == 0 || code == 1, "exit {code}: {e}");
}

/// Issue 34 item 7: row at 1e8/s (zero latency: two million fetches in 20 ms) with a 10 s
/// store timeout. Each fetch's report, which its thread does not wait for, left its timeout
/// queued for the full 10 s: 280 MB here, 4 GiB and an abort at 10 s of run.
#[test]
fn i07_timeouts_of_operations_no_longer_awaited_do_not_pile_up() {
    let d = tmp("i07-rate-library");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        "name = \"h\"\nseed = 1\nduration = \"20ms\"\n[pacer]\nbackend = \"row\"\nrate = 1e8\n[processes]\ncount = 64\n[store]\ntimeout = \"10s\"\n",
    )
    .unwrap();
    let (code, e, peak) = run_measured(&["run", f.to_str().unwrap(), "--max-wall", "60s"]);
    assert!(code == 0 || code == 1, "exit {code}: {e}");
    assert!(peak < 128 << 20, "peak {} MiB", peak >> 20);
}

/// Issue 34 (a `just fuzz` find): the library routes kept no budget. A scenario that the
/// command line refuses (a 1 ns soft limit schedules about 1e9 events a second) ran through
/// `BackendSpec::simulate` and `SimBuilder`, and collecting its trace took 21 GB before the
/// kernel killed the test. Both now refuse it with the command line's error, before anything
/// runs.
#[test]
fn i07_the_library_routes_refuse_what_the_budget_refuses() {
    let src = "name = \"g\"\nseed = 3\nduration = \"1s\"\n[pacer]\nbackend = \"row\"\nrate = 7.0\n\
               [processes]\ncount = 2\nrequests = 3\nsoft_limit = \"1ns\"\n";
    let sc = pacesim::registry::parse("g.toml", src).unwrap();
    let want = pacesim::budget::check(&sc, 1).unwrap_err();
    assert!(want.to_string().contains("processes.soft_limit"), "{want}");
    let spec = pacesim::registry::spec("row").unwrap();
    let mut sink = pacesim::trace::Collect::default();
    match spec.simulate(&sc, &mut sink) {
        Err(SimError::Budget(e)) => assert_eq!(e, want),
        other => panic!("{:?}", other.err()),
    }
    assert!(sink.events.is_empty(), "nothing ran");
    let row = pacesim::backend::row::RowOptions::default().build(&sc).unwrap();
    match SimBuilder::new(sc.clone()).run(row) {
        Err(SimError::Budget(e)) => assert_eq!(e, want),
        other => panic!("{:?}", other.err().map(|e| e.to_string())),
    }
}

// ---- issue 52, item 6: time limits, parked timers and fleets that pace alone ----

/// Item 6: `hard_limit = "1us"` killed and restarted every process every microsecond (4
/// million restarts a second of virtual time: 755 MB and 1.3 GB of trace in 9 s for one
/// second), `soft_limit = "10us"` ended a job every 10 us, and a job's time limits park a
/// timer each in the queue until they pass (`hard_limit = "1h"` at 1e5 jobs a second: 86 B a
/// job). The estimate counts each firing and each parked timer: refused up front, naming the
/// field and `--max-memory`. (Nothing here runs the scenarios refused.)
#[test]
fn s52_06_time_limits_and_their_parked_timers_are_counted_up_front() {
    let d = tmp("s52-06");
    let f = d.join("s.toml");
    let file = f.to_str().unwrap();
    for (limit, field) in [
        ("hard_limit = \"1us\"", "processes.hard_limit"),
        ("soft_limit = \"10us\"", "processes.soft_limit"),
    ] {
        let src = format!(
            "name = \"lim\"\nduration = \"60s\"\n[pacer]\nbackend = \"row\"\nrate = 10.0\n[processes]\ncount = 4\n{limit}\n"
        );
        let sc = pacesim::registry::parse("s.toml", &src).unwrap();
        let e = pacesim::budget::check(&sc, 1).expect_err(limit).to_string();
        assert!(
            e.contains(&format!("s.toml:8: {field}: the run would need about")),
            "{e}"
        );
        std::fs::write(&f, &src).unwrap();
        let e = refused(&["run", file, "--max-wall", "60s"]);
        assert!(e.contains(&format!("{field}: the run would need about")), "{e}");
        assert!(e.contains("(--max-memory to change it)"), "{e}");
    }
    // parked timers: every job of 2e7 parks its hour-long limit
    let src = "name = \"parked\"\nduration = \"100s\"\n[pacer]\nbackend = \"row\"\nrate = 1e5\n[processes]\n\
               count = 100\nhard_limit = \"1h\"\n[fetch]\nduration = { dist = \"constant\", value = \"1us\" }\n";
    let sc = pacesim::registry::parse("s.toml", src).unwrap();
    let (bytes, field) = pacesim::budget::estimate(&sc, 1);
    assert_eq!(field, "processes.hard_limit");
    assert!(bytes > 2_000_000_000, "{bytes}");
    // a realistic limit (the stranded scenarios': 1,500 s) costs next to nothing
    let sc = pacesim::registry::parse("s.toml", &src.replace("1h", "1500s").replace("1e5", "7.0")).unwrap();
    assert!(pacesim::budget::estimate(&sc, 1).0 < 64 << 20);
}

/// Item 6: a design whose processes pace alone (`local`) fetches at N times the ceiling, and
/// a `fail_open` fallback does while the store is out; the estimates counted the ceiling
/// alone (1,000 `local` processes at 1e7/s were accepted: about 13 hours). Refused up front,
/// naming the rate and why; the same fleet sharing one pace still runs.
#[test]
fn s52_06_fleets_that_pace_alone_are_counted_n_times() {
    let d = tmp("s52-06n");
    let f = d.join("s.toml");
    let file = f.to_str().unwrap();
    let local =
        "name = \"alone\"\nduration = \"10s\"\n[pacer]\nbackend = \"local\"\nrate = 1e7\n[processes]\ncount = 1000\n";
    let sc = pacesim::registry::parse("s.toml", local).unwrap();
    assert!(pacesim::budget::check(&sc, 1).is_err(), "1,000 x 1e7/s accepted");
    std::fs::write(&f, local).unwrap();
    let e = refused(&["run", file, "--max-wall", "60s"]);
    assert!(e.contains("s.toml:5: pacer.rate: the run would need about"), "{e}");
    assert!(
        e.contains("`local`: each of the 1000 pacers paces alone, at up to the rate (--max-memory to change it)"),
        "{e}"
    );
    let e = refused(&["run", file, "--max-wall", "60s", "--max-memory", "100TiB"]);
    assert!(e.contains("pacer.rate: the run would schedule about"), "{e}");
    assert!(e.contains("each of the 1000 pacers paces alone"), "{e}");
    assert!(e.contains("no option raises this limit"), "{e}");
    // the same numbers through a shared pace: the ceiling bounds them
    let shared = pacesim::registry::parse("s.toml", &local.replace("local", "row")).unwrap();
    pacesim::budget::check(&shared, 1).unwrap();
    // fail_open while the store is out: every process at the full rate
    let open = "name = \"open\"\nduration = \"100s\"\n[pacer]\nbackend = \"row\"\nrate = 1e5\nfallback = \"fail_open\"\n\
                [processes]\ncount = 1000\n[[faults]]\nkind = \"store_outage\"\nat = \"0s\"\nduration = \"100s\"\nmode = \"refuse\"\n";
    let sc = pacesim::registry::parse("s.toml", open).unwrap();
    let e = pacesim::budget::check(&sc, 1).expect_err("fail_open").to_string();
    assert!(e.contains("pacer.rate"), "{e}");
    assert!(
        e.contains("`row` fails open: each of the 1000 processes paces at the rate while the store is out"),
        "{e}"
    );
    let closed = pacesim::registry::parse("s.toml", &open.replace("fail_open", "fail_closed")).unwrap();
    pacesim::budget::check(&closed, 1).unwrap();
}

// ---- issue 52, item 19: a kill point every compared backend must reach ----

/// Issue 52 item 19: a kill at a point `[pacer] backend` reaches but another backend of the
/// `compare` list never does is refused, by `run` too (which runs `[pacer] backend` alone):
/// `simulate` would run the other, whose kill never fires, and pass it quietly.
#[test]
fn s52_19_a_kill_point_the_rest_of_compare_never_reaches_is_refused() {
    let kill = "[[faults]]\nkind = \"kill\"\nat = \"1s\"\npoint = \"holding_lock\"\n";
    let src = FOUR_LIMITERS
        .replace("\"row\"", "\"advisory\"")
        .replace("rate = 50.0", "rate = 50.0\ncompare = [\"advisory\", \"row\"]");
    // alone, advisory reaches it
    pacesim::registry::parse(
        "t.toml",
        &format!("{}{kill}", FOUR_LIMITERS.replace("\"row\"", "\"advisory\"")),
    )
    .unwrap();
    let e = err(&format!("{src}{kill}"));
    assert!(
        e.contains("faults[0].point: the kill can never happen: backend `row` never reaches `holding_lock`"),
        "{e}"
    );
    let d = tmp("s52-19");
    let f = d.join("s.toml");
    std::fs::write(&f, format!("{src}{kill}")).unwrap();
    let e = refused(&["run", f.to_str().unwrap()]);
    assert!(e.contains("backend `row` never reaches `holding_lock`"), "{e}");
}

/// Issue 54: one reachability check ([`KillPoint::reached_by`]). Every route that arms a kill
/// at a protocol point refuses a point its backend never reaches with that check's message:
/// the backend, the point, and the points it does reach. The routes: reading a scenario (the
/// registry's rules), the builder given a backend, the explorer's `--kill-points`, and an
/// external worker's declared `[live] kill_points`.
///
/// [`KillPoint::reached_by`]: pacesim::fault::KillPoint::reached_by
#[test]
fn every_route_refuses_an_unreachable_kill_point_with_one_message() {
    use pacesim::fault::KillPoint;
    // what `row` (without `in_transaction`) reaches
    let reached = [
        KillPoint::MidReservation,
        KillPoint::SleepingToSlot,
        KillPoint::MidFetch,
    ];
    let want = |backend: &str| {
        KillPoint::HoldingLock
            .reached_by(backend, &reached)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        want("row"),
        "backend `row` never reaches `holding_lock` (it reaches: mid_reservation, sleeping_to_slot, mid_fetch)"
    );
    let kill = "[[faults]]\nkind = \"kill\"\nat = \"1s\"\nprocess = 0\npoint = \"holding_lock\"\n";
    // 1. reading the scenario
    let e = err(&format!("{FOUR_LIMITERS}{kill}"));
    assert!(
        e.contains(&format!("faults[0].point: the kill can never happen: {}", want("row"))),
        "{e}"
    );
    // a scenario whose own backend (advisory) reaches the point, handed to `row`:
    let adv = FOUR_LIMITERS.replace("\"row\"", "\"advisory\"");
    let sc = pacesim::registry::parse("t.toml", &format!("{adv}{kill}")).unwrap();
    // 2. the builder
    let row = pacesim::backend::row::RowOptions::default().build(&sc).unwrap();
    let Err(SimError::Refused(e)) = SimBuilder::new(sc.clone()).run(row) else {
        panic!("the builder ran a kill `row` never reaches")
    };
    assert_eq!(e.field, "faults[0].point");
    assert_eq!(e.message, format!("the kill can never happen: {}", want("row")));
    // 3. the explorer's --kill-points
    let spec = pacesim::registry::spec("row").unwrap();
    let e = pacesim::explore::kill_mask(spec, &sc, &[KillPoint::HoldingLock]).unwrap_err();
    assert_eq!(e.to_string(), format!("--kill-points: {}", want("row")));
    let (mask, kept) = pacesim::explore::kill_mask(spec, &sc, &[]).unwrap();
    assert_eq!((mask, kept.as_slice()), (KillPoint::mask(&reached), reached.as_slice()));
    // 4. an external worker that reports row's points
    let live = "[live]\nkill_points = [\"mid_reservation\", \"sleeping_to_slot\", \"mid_fetch\"]\n";
    let ext = pacesim::registry::parse("t.toml", &format!("{adv}{live}{kill}")).unwrap();
    let e = pacesim::live::external::unsupported(&ext).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "faults[0]: a kill at point `holding_lock` is unavailable with an external worker ({})",
            want("external")
        )),
        "{e}"
    );
}
