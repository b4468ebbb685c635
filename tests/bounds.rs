//! Issue 34, items 6 to 10: crashes and unbounded work. Every route that picks the backend a
//! run uses validates that backend (threads, kill points, options); work and memory a run
//! cannot finish are refused up front (exit 2, with the figure); durations the virtual clock
//! cannot represent are refused with file, line and field.

use pacesim::backend::registry::Configure;
use pacesim::builder::SimBuilder;
use pacesim::scenario::{FOUR_LIMITERS, Scenario};
use std::path::{Path, PathBuf};
mod common;
use common::pacesim;

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bounds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The parse error of scenario text `src`, as printed.
fn err(src: &str) -> String {
    match Scenario::parse("t.toml", src) {
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
    let sc = Scenario::parse("t.toml", &threads).unwrap();
    let adv = pacesim::backend::advisory::AdvisoryOptions::default()
        .build(&sc)
        .unwrap();
    let e = SimBuilder::new(sc.clone()).run(adv).unwrap_err();
    assert_eq!(e.field, "processes.threads");
    assert!(
        e.message.contains("backend `advisory` runs one thread per process"),
        "{e:?}"
    );
    let kill = Scenario::parse("k.toml", &sim("kill-mid-reservation.toml")).unwrap();
    let local = pacesim::backend::local::LocalOptions::default().build(&kill).unwrap();
    let mut out = pacesim::trace::Collect::default();
    let e = SimBuilder::new(kill.clone()).run_into(local, &mut out).unwrap_err();
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
    Scenario::parse(
        "t.toml",
        &FOUR_LIMITERS.replace("duration = \"5s\"", "duration = \"1000000000000000000ns\""),
    )
    .unwrap();
    // the command line too
    let e = refused(&["run", "sims/four-limiters.toml", "--max-wall", "10000000000000000000ns"]);
    assert!(e.contains("beyond what the virtual clock"), "{e}");
}

