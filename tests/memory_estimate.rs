//! Issue 34 item 8: the memory guard's estimate is an upper bound of the peak resident memory
//! the kernel measures for a run. In a test binary of its own: a child's peak (`ru_maxrss`)
//! counts the memory of the process that spawned it at the spawn, which in a busy test binary
//! would be other tests' (these spawn from a process of a few MiB).

#[path = "suite/common/mod.rs"]
mod common;

use common::run_measured;
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("memory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sim(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

/// Peak resident memory, measured by the kernel for each run, never exceeds the guard's
/// estimate: many processes, threads, a long run over the rate (its checkers' memory grows
/// with the arrivals), `[jobs]`, a lock backend. Each runs in about a second.
#[test]
fn i08_the_memory_estimate_bounds_the_measured_peak() {
    let d = tmp("i08");
    let base = |backend: &str, n: u32, tail: &str, duration: &str, rate: f64| {
        format!(
            "name = \"m\"\nseed = 1\nduration = \"{duration}\"\n[pacer]\nbackend = \"{backend}\"\nrate = {rate:?}\n[processes]\ncount = {n}\n{tail}"
        )
    };
    let cases = [
        ("processes", base("row", 100_000, "requests = 1\n", "5s", 50.0)),
        ("local", base("local", 100_000, "requests = 1\n", "5s", 50.0)),
        (
            "threads",
            base("row", 20_000, "requests = 1\nthreads = 8\n", "5s", 50.0),
        ),
        ("long", base("local", 8, "", "300s", 1000.0)),
        ("jobs", sim("backfill-chunks.toml").replace("count = 2", "count = 2000")),
        // issue 52 item 6: a restart every microsecond, and an hour-long limit's timer parked
        // by each of 2 million jobs
        ("hard-limit", base("row", 2, "hard_limit = \"1us\"\n", "500ms", 10.0)),
        (
            "parked",
            base(
                "row",
                100,
                "hard_limit = \"1h\"\n[fetch]\nduration = { dist = \"constant\", value = \"1us\" }\n",
                "20s",
                1e5,
            ),
        ),
    ];
    for (name, src) in cases {
        let f = d.join(format!("{name}.toml"));
        std::fs::write(&f, &src).unwrap();
        let sc = pacesim::registry::parse("m.toml", &src).unwrap();
        let (estimate, _) = pacesim::run::budget::estimate(&sc, 1);
        let (code, e, peak) = run_measured(&["run", f.to_str().unwrap(), "--max-wall", "60s"]);
        assert!(code == 0 || code == 1, "{name}: exit {code}: {e}");
        assert!(
            peak <= estimate,
            "{name}: measured peak {} MiB above the estimate {} MiB",
            peak >> 20,
            estimate >> 20
        );
    }
}
