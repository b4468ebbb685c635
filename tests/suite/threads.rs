//! Issue 16, item 5: threads inside a process (`[processes] threads`, `max_concurrency`).
//!
//! What the `sims/threads-*.toml` scenarios show, asserted: a process's threads share its
//! pacer (the pooled runner gets a genuine 7/s), so the per-process defect scales with the
//! processes and not with the threads (the conveyor: N x 7/s, not N x M x 7/s); the row keeps
//! 7/s under threads with its lock rarely taken; independent limiter instances on threads
//! (#653's weaker witness) fail like M processes, while the record's shared limiter on threads
//! passes; `max_concurrency` bounds the fetches in flight, not the rate.

use pacesim::scenario::Scenario;
use pacesim::summary::Summary;
use pacesim::trace::{Collect, Event};
use std::collections::BTreeMap;
use std::path::Path;

fn load(name: &str) -> Scenario {
    pacesim::registry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

/// Run `sc` with `backend`: its summary and its events.
fn run(sc: &Scenario, backend: &str) -> (Summary, Vec<Event>) {
    let sc = pacesim::registry::with_backend(sc, backend).unwrap();
    let mut c = Collect::default();
    let s = pacesim::registry::simulate(&sc, None, Some(&mut c)).unwrap();
    (s, c.events)
}

fn passes(s: &Summary, check: &str) -> bool {
    s.checks.get(check).is_none_or(|v| v.passed())
}

/// The most fetches any process had in flight (between `fetch_start` and `fetch_end`).
fn max_in_flight(events: &[Event]) -> BTreeMap<u32, u32> {
    let mut now: BTreeMap<u32, u32> = BTreeMap::new();
    let mut max: BTreeMap<u32, u32> = BTreeMap::new();
    for e in events {
        match *e {
            Event::FetchStart { pid, .. } => {
                let n = now.entry(pid).or_default();
                *n += 1;
                let m = max.entry(pid).or_default();
                *m = (*m).max(*n);
            }
            Event::FetchEnd { pid, .. } => *now.entry(pid).or_default() -= 1,
            _ => {}
        }
    }
    max
}

/// The threads that fetched, per process.
fn fetching_threads(events: &[Event]) -> BTreeMap<u32, std::collections::BTreeSet<u16>> {
    let mut m: BTreeMap<u32, std::collections::BTreeSet<u16>> = BTreeMap::new();
    for e in events {
        if let Event::FetchStart { pid, thread, .. } = *e {
            m.entry(pid).or_default().insert(thread);
        }
    }
    m
}

#[test]
fn the_pooled_runner_gets_a_genuine_seven_per_second() {
    let sc = load("threads-pooled-runner.toml");
    assert_eq!(sc.processes.threads, 8);
    let (s, evs) = run(&sc, "local");
    assert!(
        (s.achieved_rate - 7.0).abs() < 0.1,
        "one process's 8 threads share its pacer: {}",
        s.achieved_rate
    );
    assert!(passes(&s, "ceiling") && passes(&s, "slot_ceiling"), "{:?}", s.checks);
    assert_eq!(fetching_threads(&evs)[&0].len(), 8, "every thread fetches");
    let (r, _) = run(&sc, "row");
    assert!((r.achieved_rate - 7.0).abs() < 0.1, "{}", r.achieved_rate);
    assert!(r.checks.values().all(|v| v.passed()), "{:?}", r.checks);
}

#[test]
fn the_conveyor_runs_at_n_times_the_rate_not_n_times_m() {
    let sc = load("threads-conveyor.toml");
    let (n, m) = (sc.processes.count, sc.processes.threads);
    assert_eq!((n, m), (2, 8));
    let (s, evs) = run(&sc, "local");
    assert!(
        (s.achieved_rate - 14.0).abs() < 0.3,
        "N x 7 = 14/s, not N x M x 7 = 112/s: {}",
        s.achieved_rate
    );
    assert!(!passes(&s, "ceiling"));
    // max_concurrency = 3 holds each process at 3 fetches in flight, and binds (fetches of
    // ~300 ms at 7/s would otherwise overlap more), without bounding the rate: 3 / 0.3 s is
    // above 7/s, so each process still fetches at its pacer's 7/s.
    let k = u32::from(sc.processes.max_concurrency.unwrap());
    assert_eq!(max_in_flight(&evs).values().copied().max(), Some(k));
    let mut unbounded = sc.clone();
    unbounded.processes.max_concurrency = None;
    let (u, uevs) = run(&unbounded, "local");
    assert!(
        max_in_flight(&uevs).values().copied().max().unwrap() > k,
        "the bound binds"
    );
    assert!(
        (u.achieved_rate - s.achieved_rate).abs() < 0.3,
        "and the rate is the pacer's either way: {} vs {}",
        u.achieved_rate,
        s.achieved_rate
    );
    for b in ["row", "local_divided"] {
        let (r, _) = run(&sc, b);
        assert!(r.achieved_rate < 7.1, "{b}: {}", r.achieved_rate);
        assert!(passes(&r, "ceiling"), "{b}: {:?}", r.checks);
    }
}

#[test]
fn max_concurrency_that_binds_below_the_pace_bounds_the_rate_per_process_only() {
    // Little's law: K fetches of D each allow at most K / D per process. One permit and
    // ~300 ms fetches hold each conveyor process near 3.3/s; the fleet still scales with N.
    let mut sc = load("threads-conveyor.toml");
    sc.processes.max_concurrency = Some(1);
    let (s, evs) = run(&sc, "local");
    assert_eq!(max_in_flight(&evs).values().copied().max(), Some(1));
    let per_process = s.achieved_rate / f64::from(sc.processes.count);
    assert!(per_process < 3.5 && per_process > 2.8, "{per_process}");
}

#[test]
fn the_row_under_threads_keeps_the_rate_with_its_lock_rarely_taken() {
    let sc = load("threads-row.toml");
    // no contention: a reservation's round trip is the network both ways and the statement
    // (mean 2 x 0.6 e^(0.5^2/2) + 1.3 e^(0.4^2/2) = 2.77 ms), with hardly a wait behind another
    // thread's statement on the row lock
    let unloaded = 2.0 * 0.6 * (0.125f64).exp() + 1.3 * (0.08f64).exp();
    for b in ["row", "shared_cache", "redis_gcra"] {
        let (s, evs) = run(&sc, b);
        assert!((s.achieved_rate - 7.0).abs() < 0.15, "{b}: {}", s.achieved_rate);
        assert!(s.checks.values().all(|v| v.passed()), "{b}: {:?}", s.checks);
        assert_eq!(fetching_threads(&evs)[&0].len(), 8, "{b}: every thread fetches");
        if b != "redis_gcra" {
            // (a GCRA denies and the threads ask again: more round trips, not a queue)
            let mean = s.reservation.mean_ms;
            assert!(
                mean < unloaded * 1.1,
                "{b}: mean round trip {mean} ms vs {unloaded} unloaded"
            );
        }
    }
}

#[test]
fn independent_limiters_on_threads_fail_but_the_shared_one_passes() {
    let sc = load("threads-four-limiters.toml");
    let (s, _) = run(&sc, "local");
    assert!(!passes(&s, "ceiling"), "per-thread limiters: 4 x 50/s");
    assert!(s.achieved_rate > 200.0, "{}", s.achieved_rate);
    assert!(s.end_s < 0.2, "40 requests in about 0.18 s: {}", s.end_s);
    // the record's limiter is one per process, shared by its threads: on threads the same
    // test passes, so it cannot witness a per-process defect
    let mut shared = sc.clone();
    shared.pacer.options.remove("per");
    let (p, _) = run(&shared, "local");
    assert!(p.checks.values().all(|v| v.passed()), "{:?}", p.checks);
    assert!((p.achieved_rate - 50.0).abs() < 1.0, "{}", p.achieved_rate);
    // the same 4 x 10 requests on four processes, each with its own limiter, fail
    let procs = load("four-limiters.toml");
    let (f, _) = run(&procs, "local");
    assert!(!passes(&f, "ceiling"));
}

#[test]
fn one_thread_is_the_default_and_changes_nothing() {
    let sc = load("four-limiters.toml");
    assert_eq!(sc.processes.threads, 1);
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/four-limiters.toml")).unwrap();
    let explicit = pacesim::registry::parse("x.toml", &src.replace("count = 4", "count = 4\nthreads = 1")).unwrap();
    for b in ["row", "local"] {
        assert_eq!(run(&sc, b).0.trace_hash, run(&explicit, b).0.trace_hash, "{b}");
    }
}

#[test]
fn bad_thread_settings_are_refused_naming_the_field() {
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/threads-conveyor.toml")).unwrap();
    let err = |s: &str| pacesim::registry::parse("c.toml", s).unwrap_err().to_string();
    let e = err(&src.replace("threads = 8", "threads = 0"));
    assert!(
        e.starts_with("c.toml:") && e.contains("processes.threads: must be at least 1"),
        "{e}"
    );
    let e = err(&src.replace("max_concurrency = 3", "max_concurrency = 0"));
    assert!(e.contains("processes.max_concurrency: must be at least 1"), "{e}");
    // a backend whose process side keeps one operation in flight runs one thread per process
    for b in ["advisory", "claim_row", "redis_lock"] {
        let e = err(&src.replace(
            "backend = \"local\"\ncompare = [\"local\", \"row\", \"local_divided\"]",
            &format!("backend = \"{b}\""),
        ));
        assert!(
            e.contains("processes.threads") && e.contains(&format!("backend `{b}` runs one thread per process")),
            "{e}"
        );
    }
    // ... and so does `--backend` naming one that is not on the scenario's compare list (it
    // used to reach the simulator and panic there)
    let sc = pacesim::registry::parse("c.toml", &src).unwrap();
    for b in ["advisory", "claim_row", "redis_lock"] {
        let e = pacesim::registry::with_backend(&sc, b).unwrap_err();
        assert!(
            e.contains(&format!("processes.threads: backend `{b}` runs one thread per process")),
            "{e}"
        );
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
            .args(["run", "sims/threads-conveyor.toml", "--backend", b])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with("error: sims/threads-conveyor.toml") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    assert!(pacesim::registry::with_backend(&sc, "row").is_ok());
}

#[test]
fn live_mode_refuses_threads_before_connecting() {
    let sc = load("threads-pooled-runner.toml");
    let opts = pacesim::live::LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered);
    let e = pacesim::live::run_blocking(&sc, &opts).unwrap_err().to_string();
    assert!(e.contains("threads = 8") && e.contains("simulated only"), "{e}");
    // an external worker is refused too: it would not be told a thread count
    let mut w = opts.clone();
    w.worker = Some(pacesim::live::external::WorkerCommand::resolve(vec!["true".into()], None).unwrap());
    let e = pacesim::live::run_blocking(&sc, &w).unwrap_err().to_string();
    assert!(e.contains("PACESIM_THREADS"), "{e}");
}

#[test]
fn a_killed_process_loses_every_thread_and_restarts_with_all_of_them() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/threads-row.toml")).unwrap();
    let src = format!(
        "{src}\n[[faults]]\nkind = \"kill\"\nat = \"10s\"\nprocess = 0\npoint = \"sleeping_to_slot\"\nrestart_after = \"1s\"\n"
    );
    let sc = pacesim::registry::parse("k.toml", &src).unwrap();
    let (s, evs) = run(&sc, "row");
    let crash = evs.iter().position(|e| matches!(e, Event::Crash { .. })).unwrap();
    let restart = evs.iter().position(|e| matches!(e, Event::Restart { .. })).unwrap();
    assert!(
        !evs[crash..restart]
            .iter()
            .any(|e| matches!(e, Event::FetchStart { .. } | Event::OpSent { .. })),
        "no thread of the killed process acts until its restart"
    );
    let after: std::collections::BTreeSet<u16> = evs[restart..]
        .iter()
        .filter_map(|e| match e {
            Event::FetchStart { thread, .. } => Some(*thread),
            _ => None,
        })
        .collect();
    assert_eq!(after.len(), 8, "the restarted process runs all 8 threads");
    assert!(s.checks.values().all(|v| v.passed()), "{:?}", s.checks);
}

/// The backoff reference follows each thread's responses and reports: with threads, the
/// row's one global schedule still passes `backoff_coherence`, and the per-process defects
/// it exists to catch are still caught.
#[test]
fn backoff_coherence_with_threads_passes_the_global_schedule_and_catches_the_defects() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/threads-row.toml")).unwrap();
    let src = src
        .replace("count = 1\nthreads = 8", "count = 2\nthreads = 4")
        .replace("seed = 7", "seed = 3")
        .replace("compare = [\"row\", \"shared_cache\", \"redis_gcra\"]\n", "")
        + "\n[[faults]]\nkind = \"destination_throttle\"\nat = \"10s\"\nduration = \"4s\"\nstatus = 429\n";
    let with = |extra: &str| {
        let s = src.replace("rate = 7.0", &format!("rate = 7.0\n{extra}"));
        run(&pacesim::registry::parse("b.toml", &s).unwrap(), "row").0
    };
    let global = with("");
    assert!(global.status_429 > 0);
    assert!(
        global.checks["backoff_coherence"].passed(),
        "{}",
        global.checks["backoff_coherence"].detail
    );
    for defect in ["backoff = \"per_process\"", "streak = \"per_process\""] {
        let s = with(defect);
        assert!(
            s.checks["backoff_coherence"].failed(),
            "{defect}: {}",
            s.checks["backoff_coherence"].detail
        );
    }
}

/// `liveness` judges a threaded closed loop by its threads' offered load (M per process, at
/// most K at once under `max_concurrency`), not one loop's.
#[test]
fn liveness_counts_every_thread_s_offered_load() {
    let sc = load("threads-pooled-runner.toml");
    let (s, _) = run(&sc, "row");
    let d = &s.checks["liveness"].detail;
    assert!(
        !d.contains("not judged"),
        "8 threads of ~300 ms fetches offer ~25/s against 7/s: {d}"
    );
}

/// A 429 window under threads: the reservations granted before the 429 (at multiplier 1)
/// still fetch at their slots after the shared multiplier has risen, while sibling threads of
/// the same process already hold x2..x8 grants. Each arrival is charged the multiplier of the
/// grant that authorised it, its own thread's, not whichever grant its process got last: the
/// row and the shared cache keep the ceiling with threads exactly as the same fleet does
/// without them, and every fetch starts at its own thread's slot.
#[test]
fn a_429_window_under_threads_charges_each_arrival_its_own_grant_s_multiplier() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/threads-row.toml")).unwrap();
    let src = src
        .replace("count = 1\nthreads = 8", "count = 2\nthreads = 4")
        .replace("seed = 7", "seed = 3")
        + "\n[[faults]]\nkind = \"destination_throttle\"\nat = \"10s\"\nduration = \"4s\"\nstatus = 429\n";
    let threaded = pacesim::registry::parse("t.toml", &src).unwrap();
    let flat = pacesim::registry::parse(
        "f.toml",
        &src.replace("count = 2\nthreads = 4", "count = 8\nthreads = 1"),
    )
    .unwrap();
    for b in ["row", "shared_cache", "redis_gcra"] {
        let (s, evs) = run(&threaded, b);
        assert!(s.status_429 > 0, "{b}: the window throttles");
        // the model: each thread fetches at the slot of its own latest grant (a relative
        // wait, so a reply's return latency late, never early, never a stale or skipped slot)
        let mut slot: BTreeMap<(u32, u16), i64> = BTreeMap::new();
        for e in &evs {
            match *e {
                Event::Grant {
                    t,
                    pid,
                    thread,
                    slot: at,
                    now,
                    ..
                } => {
                    slot.insert((pid, thread), t as i64 + (at - now).max(0));
                }
                Event::FetchStart { t, pid, thread } => {
                    let due = slot.remove(&(pid, thread)).expect("a fetch follows its own grant");
                    let late = t as i64 - due;
                    assert!(
                        (0..20_000_000).contains(&late),
                        "{b}: pid {pid} thread {thread} fetched {late} ns after its slot"
                    );
                }
                _ => {}
            }
        }
        // the destination's witness names the thread whose request arrived
        let threads: std::collections::BTreeSet<u16> = evs
            .iter()
            .filter_map(|e| match *e {
                Event::Arrival { thread, .. } => Some(thread),
                _ => None,
            })
            .collect();
        assert_eq!(threads.len(), 4, "{b}: {threads:?}");
        assert!(
            s.checks.values().all(|v| v.passed()),
            "{b}: with threads: {:?}",
            s.checks
        );
        let (f, _) = run(&flat, b);
        assert!(
            f.checks.values().all(|v| v.passed()),
            "{b}: without threads: {:?}",
            f.checks
        );
        assert!(s.burst_needed <= 2, "{b}: {}", s.burst_needed);
    }
}
