//! Live mode driving external worker programs (issue 18): the four Python examples in
//! `examples/workers/` and their verdicts, `conform --worker-cmd`, cleanup of workers that
//! ignore SIGTERM, fork or never fetch, and the messages for workers that go wrong.
//!
//! Like tests/suite/live.rs, these print a loud `LIVE TESTS NOT RUN: ...` and pass when PostgreSQL,
//! Redis, or Python with psycopg and redis-py is missing; `.ci/run` installs and starts them.

use crate::common;

use pacesim::live::settings::{PgSettings, RedisSettings};
use pacesim::live::{LiveOptions, LiveRun, pg, run_blocking, worker_command};
use pacesim::scenario::Scenario;
use pacesim::trace::{CrashPoint, Event, KillPoint};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The stores and Python's packages, or why not (printed loudly).
fn ready(test: &str) -> Option<PgSettings> {
    let why = |w: String| {
        crate::common::live_not_run(test, &w);
        None
    };
    let pg = rt().block_on(PgSettings::from_env().connect_resolving_user(Duration::from_secs(2)));
    let pg = match pg {
        Ok((s, _)) => s,
        Err(e) => return why(e.to_string()),
    };
    if let Err(e) = RedisSettings::from_env().check(Duration::from_secs(2)) {
        return why(e.to_string());
    }
    let py = std::process::Command::new("python3")
        .args(["-c", "import psycopg, redis"])
        .output();
    match py {
        Ok(o) if o.status.success() => Some(pg),
        Ok(o) => why(format!(
            "python3 lacks psycopg or redis-py (pip install 'psycopg[binary]' redis): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => why(format!("no python3: {e}")),
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workers")
        .join(name)
}

/// Run an example's scenario live with its `[live] command`.
fn run_example(name: &str) -> (Scenario, LiveRun) {
    let file = example(name);
    let sc = pacesim::registry::load(&file).unwrap();
    let w = worker_command(&sc, &file, None)
        .unwrap()
        .expect("the example names its command");
    let r = run_blocking(
        &sc,
        &LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered).with_worker(w),
    )
    .unwrap();
    (sc, r)
}

fn verdict<'a>(r: &'a LiveRun, name: &str) -> &'a pacesim::summary::CheckOut {
    r.summary
        .checks
        .get(name)
        .unwrap_or_else(|| panic!("no {name} verdict: {:?}", r.summary.checks))
}

fn judged(r: &LiveRun, name: &str) -> bool {
    !verdict(r, name).detail.starts_with(pacesim::check::NOT_JUDGED)
}

/// Processes whose environment carries this run's id (a worker, or anything it forked).
fn processes_of_run(run_id: &str) -> Vec<u32> {
    let needle = format!("PACESIM_RUN_ID={run_id}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(e.path().join("environ"))
            && env.split(|b| *b == 0).any(|v| v == needle.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// Nothing of the run is left: no process with its id, no schema, no keys.
fn nothing_left(r: &LiveRun, pgs: &PgSettings) {
    let left = processes_of_run(&r.run_id);
    assert!(left.is_empty(), "processes of run {} left behind: {left:?}", r.run_id);
    let rt = rt();
    if let Some(schema) = &r.schema {
        let c = rt.block_on(pgs.connect(Duration::from_secs(2))).unwrap();
        assert!(
            !rt.block_on(pg::schema_exists(&c, schema)).unwrap(),
            "schema {schema} left"
        );
    }
    if let Some(prefix) = &r.key_prefix {
        let mut c = RedisSettings::from_env().connect(None, Duration::from_secs(2)).unwrap();
        let keys = pacesim::live::redis::keys_with_prefix(&mut c, prefix).unwrap();
        assert!(keys.is_empty(), "keys left: {keys:?}");
    }
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Run up to three times while `attempt` fails on timing (a loaded 2-core machine can stall a
/// Python worker past an interval); structural failures panic inside at once.
fn with_retry(test: &str, mut attempt: impl FnMut() -> Result<(), String>) {
    for i in 1..=3 {
        match attempt() {
            Ok(()) => return,
            Err(e) if i < 3 => eprintln!("{test}: attempt {i} failed on timing ({e}); once more"),
            Err(e) => panic!("{test}: {e}"),
        }
    }
}

#[test]
fn the_records_pace_row_passes_with_a_kill_and_an_outage() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pgs) = ready("the_records_pace_row_passes_with_a_kill_and_an_outage") else {
        return;
    };
    with_retry("pace_row", || {
        let (sc, r) = run_example("pace_row.toml");
        nothing_left(&r, &pgs);
        let s = &r.summary;
        let evs = r.events();
        // the kill and the restart happened, and the outage window is in the trace
        assert_eq!(s.crashes, 1, "one SIGKILL");
        assert!(
            evs.iter().any(|e| matches!(e, Event::Restart { pid: 1, .. })),
            "restarted"
        );
        assert!(
            evs.iter().any(|e| matches!(e, Event::Fallback { enter: true, .. })),
            "fell back in the outage"
        );
        // every check is judged (the worker reports grants), and each one passes
        for c in [
            "ceiling",
            "slot_ceiling",
            "self_heal",
            "degradation",
            "liveness",
            "backoff_coherence",
        ] {
            assert!(judged(&r, c), "{c} not judged: {}", verdict(&r, c).detail);
        }
        for (name, c) in &s.checks {
            if c.failed() {
                return Err(format!("{name} failed: {}", c.detail));
            }
        }
        let rate = sc.pacer.rate;
        if !(0.8 * rate..=1.1 * rate).contains(&s.achieved_rate) {
            return Err(format!("achieved {:.2}/s against {rate}/s", s.achieved_rate));
        }
        Ok(())
    });
}

#[test]
fn a_per_process_pacer_fails_the_ceiling_at_n_times_the_rate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if ready("a_per_process_pacer_fails_the_ceiling_at_n_times_the_rate").is_none() {
        return;
    }
    let (sc, r) = run_example("per_process.toml");
    let s = &r.summary;
    let c = verdict(&r, "ceiling");
    assert!(c.failed(), "the per-process pacer must fail the ceiling: {}", c.detail);
    let n = sc.processes.count as f64;
    let ratio = s.achieved_rate / sc.pacer.rate;
    assert!(
        (0.7 * n..=1.15 * n).contains(&ratio),
        "about N x the rate: {:.2}/s is {ratio:.2} x {}/s",
        s.achieved_rate,
        sc.pacer.rate
    );
    // it reports no grants: the slot ceiling is not judged, and says what it needs
    let slots = verdict(&r, "slot_ceiling");
    assert!(
        !slots.judged() && slots.detail.starts_with("not judged: needs grant events"),
        "{}",
        slots.detail
    );
}

#[test]
fn a_reservation_inside_the_callers_transaction_fails_liveness() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pgs) = ready("a_reservation_inside_the_callers_transaction_fails_liveness") else {
        return;
    };
    let (sc, r) = run_example("in_transaction.toml");
    nothing_left(&r, &pgs);
    // judged from the arrivals alone: the worker prints no event lines
    let live = verdict(&r, "liveness");
    assert!(
        live.failed(),
        "the open transaction serialises the fleet: {}",
        live.detail
    );
    assert!(live.detail.contains("throughput collapsed"), "{}", live.detail);
    assert!(verdict(&r, "ceiling").passed(), "{}", verdict(&r, "ceiling").detail);
    // one fetch at a time: about 1 / fetch duration, well below the rate
    assert!(
        r.summary.achieved_rate < 0.6 * sc.pacer.rate,
        "{}",
        r.summary.achieved_rate
    );
}

#[test]
fn the_redis_walk_lock_excludes_and_the_next_walk_starts_at_ttl_expiry() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pgs) = ready("the_redis_walk_lock_excludes_and_the_next_walk_starts_at_ttl_expiry") else {
        return;
    };
    with_retry("redis_walk_lock", || {
        let (sc, r) = run_example("redis_walk_lock.toml");
        nothing_left(&r, &pgs);
        let me = verdict(&r, "mutual_exclusion");
        assert!(judged(&r, "mutual_exclusion") && me.passed(), "{}", me.detail);
        let evs = r.events();
        // killed at the cooperative point, right after taking the lock
        let (kt, victim) = evs
            .iter()
            .find_map(|e| match *e {
                Event::Crash {
                    t,
                    pid,
                    point: CrashPoint::At(KillPoint::HoldingLock),
                } => Some((t, pid)),
                _ => None,
            })
            .ok_or("the holding_lock kill never fired")?;
        let taken = evs
            .iter()
            .filter_map(|e| match *e {
                Event::LockAcquired { t, pid, .. } if pid == victim && t <= kt => Some(t),
                _ => None,
            })
            .next_back()
            .expect("the victim held the lock");
        let next = evs
            .iter()
            .find_map(|e| match *e {
                Event::LockAcquired { t, .. } if t > kt => Some(t),
                _ => None,
            })
            .ok_or("no walk after the kill")?;
        let ttl = 1_500_000_000u64;
        let poll = 50_000_000u64;
        // the key outlives its holder until its TTL: nobody walks before, and the next walk
        // starts within one poll (plus scheduling) of the expiry
        assert!(
            next >= taken + ttl - 5_000_000,
            "a walk began {} ms before the TTL expired",
            (taken + ttl - next) / 1_000_000
        );
        if next > taken + ttl + poll + 250_000_000 {
            return Err(format!(
                "next walk {} ms after TTL expiry",
                (next - taken - ttl) / 1_000_000
            ));
        }
        let sh = verdict(&r, "self_heal");
        assert!(judged(&r, "self_heal"), "{}", sh.detail);
        if sh.failed() {
            return Err(sh.detail.clone());
        }
        let _ = sc;
        Ok(())
    });
}

#[test]
fn conform_runs_the_external_worker_beside_the_model() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if ready("conform_runs_the_external_worker_beside_the_model").is_none() {
        return;
    }
    let (code, out, err) = common::pacesim(&[
        "conform",
        "examples/workers/per_process.toml",
        "--worker-cmd",
        "python3 examples/workers/per_process.py",
        "--tolerance",
        "0.25",
    ]);
    assert!(
        out.contains("live: external worker `python3 examples/workers/per_process.py`"),
        "{out}\n{err}"
    );
    for row in [
        "achieved rate /s",
        "max in 1 s",
        "burst needed",
        "stall after kill ms",
        "check ceiling",
    ] {
        assert!(out.contains(row), "no {row} row:\n{out}");
    }
    // the model of `local` and the Python twin agree: both overshoot about 4 x
    assert_eq!(code, 0, "conform disagreed:\n{out}\n{err}");
    // against the model of the shared row they do not: the tolerance verdict fails
    let (code, out, err) = common::pacesim(&[
        "conform",
        "examples/workers/per_process.toml",
        "--backend",
        "row",
        "--worker-cmd",
        "python3 examples/workers/per_process.py",
        "--tolerance",
        "0.25",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("conform: achieved rate: live "), "{err}");
    assert!(err.contains("check ceiling: simulated pass, live FAIL"), "{err}");
}

/// A scenario file for a shell worker, in a fresh directory.
fn shell_scenario(test: &str, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pacesim-ext-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"{test}\"\nduration = \"2s\"\n[pacer]\nbackend = \"local\"\nrate = 10.0\n[processes]\ncount = 3\n{extra}"
        ),
    )
    .unwrap();
    f
}

/// Workers 0 and 1 fetch; worker 1 ignores SIGTERM and forks a child that ignores it too and
/// sleeps forever; worker 2 fetches once, then hangs. Every one of them, and the child, is
/// gone when the run returns. Each reports what it did in a file of the directory given as
/// its argument (the test waits on those, not on the clock).
const UNRULY: &str = r#"
import os, signal, sys, time, urllib.request
me = int(os.environ["PACESIM_PROCESS"])
out = sys.argv[1]
def note(name, text):
    with open(os.path.join(out, name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(out, name + ".tmp"), os.path.join(out, name))
if me == 0:
    note("run", os.environ["PACESIM_RUN_ID"])
if me == 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        note("child", str(os.getpid()))
        while True: time.sleep(1)
if me == 2:
    urllib.request.urlopen(os.environ["PACESIM_DESTINATION_URL"]).read()
    note("w2", "1")
    while True: time.sleep(1)
n = 0
while True:
    urllib.request.urlopen(os.environ["PACESIM_DESTINATION_URL"]).read()
    n += 1
    note("w%d" % me, str(n))
    time.sleep(0.1)
"#;

/// Issue 52 item 21: this held only on an idle machine (a 2 s run, its three Python workers
/// starting within it, and the whole run within 6 s). Now the run is long (60 s, a bound) and
/// the test ends it once every worker has done its part, as seen in the files they write
/// (worker 0 fetched 4 times, worker 1 forked its child and fetched, worker 2 fetched once):
/// from the stop, SIGTERM, 0.5 s of grace and SIGKILL must take well under the 10 s after
/// which the runner would drop its supervisors anyway.
#[test]
fn workers_that_ignore_sigterm_fork_or_hang_are_all_gone_after_the_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_) = ready("workers_that_ignore_sigterm_fork_or_hang_are_all_gone_after_the_run") else {
        return;
    };
    let f = shell_scenario("unruly", "[live]\nstop_grace = \"500ms\"\n");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("duration = \"2s\"", "duration = \"60s\"");
    std::fs::write(&f, text).unwrap();
    let dir = f.parent().unwrap().to_path_buf();
    let notes = dir.join("notes");
    let _ = std::fs::remove_dir_all(&notes);
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(f.with_file_name("unruly.py"), UNRULY).unwrap();
    let sc = pacesim::registry::load(&f).unwrap();
    let w = worker_command(
        &sc,
        &f,
        Some(&format!(
            "python3 {} {}",
            f.with_file_name("unruly.py").display(),
            notes.display()
        )),
    )
    .unwrap()
    .unwrap();
    let read = |name: &str| std::fs::read_to_string(notes.join(name)).ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let opts = LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered).with_worker(w);
    let run = rt.spawn(async move { pacesim::live::run(&sc, &opts, cancelled).await });
    // every worker did its part, or 50 s passed (a bound, far above a loaded start-up)
    let deadline = std::time::Instant::now() + Duration::from_secs(50);
    let done = |read: &dyn Fn(&str) -> Option<String>| {
        read("w0").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n >= 4)
            && read("w1").is_some()
            && read("w2").is_some()
            && read("child").is_some()
            && read("run").is_some()
    };
    while !done(&read) && std::time::Instant::now() < deadline && !run.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let all_started = done(&read);
    let stopped = std::time::Instant::now();
    let _ = cancel.send(true);
    let r = rt.block_on(run).unwrap();
    let took = stopped.elapsed();
    let run_id = read("run").unwrap_or_default();
    let child: Option<u32> = read("child").and_then(|p| p.trim().parse().ok());
    let left = if run_id.is_empty() {
        Vec::new()
    } else {
        processes_of_run(&run_id)
    };
    let child_alive = child.is_some_and(|p| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            !matches!(
                s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()),
                Some("Z" | "X")
            )
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        all_started,
        "not every worker did its part within 50 s: w0 {:?}, w1 {}, w2 {}, child {child:?}, run {:?}",
        read("w0"),
        read("w1").is_some(),
        read("w2").is_some(),
        r.as_ref().err()
    );
    assert!(
        matches!(r, Err(pacesim::live::LiveError::Interrupted)),
        "the run was stopped: {r:?}"
    );
    assert!(left.is_empty(), "processes of run {run_id} left behind: {left:?}");
    assert!(!child_alive, "worker 1's forked child {child:?} outlived the run");
    assert!(
        took < Duration::from_secs(9),
        "the run took {took:?} from its stop: 0.5 s of grace, then SIGKILL"
    );
}

#[test]
fn workers_that_go_wrong_get_a_message_naming_them_and_exit_2() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if ready("workers_that_go_wrong_get_a_message_naming_them_and_exit_2").is_none() {
        return;
    }
    // issue 51: a worker that never gets ready fails the run at `ready_timeout`
    let f = shell_scenario("wrong", "[live]\nready_timeout = \"3s\"\n");
    let file = f.display().to_string();
    let live = |cmd: &str| {
        let started = std::time::Instant::now();
        let (code, out, err) = common::pacesim(&["live", &file, "--worker-cmd", cmd]);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{cmd}: took {:?}",
            started.elapsed()
        );
        (code, out, err)
    };
    for (cmd, says) in [
        (
            "no-such-program-pacesim x.py",
            "--worker-cmd: worker program `no-such-program-pacesim`: not found on PATH",
        ),
        (
            "/nonexistent-pacesim/worker.py",
            "--worker-cmd: worker program `/nonexistent-pacesim/worker.py`: no such file",
        ),
        ("/etc/passwd", "is not executable"),
        ("python3 'unterminated", "--worker-cmd: unterminated single quote"),
        (
            "python3 -c 'import sys; print(\"boom\", file=sys.stderr); sys.exit(3)'",
            "exited (exit status: 3) after",
        ),
        (
            "python3 -c 'print(\"hello\")'",
            "printed on stdout, line 1: \"hello\", which is not an event line",
        ),
        (
            "python3 -c 'print(\"{\\\"ev\\\": \\\"arrival\\\", \\\"status\\\": 200}\")'",
            "an `arrival` event: only the harness records those",
        ),
        (
            "python3 -c 'import time; time.sleep(30)'",
            "workers 0, 1, 2 (`python3 -c 'import time; time.sleep(30)'`) not ready within 3.00 s",
        ),
        (
            "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:9/\")'",
            "without ever reaching the destination",
        ),
        // issue 34 item 13: a clean exit before the run's end, with no PACESIM_REQUESTS
        (
            "python3 -c 'import os, urllib.request; urllib.request.urlopen(os.environ[\"PACESIM_DESTINATION_URL\"]).read()'",
            "exited (exit status: 0) after",
        ),
        // one worker never fetches (nor asks the store) while the others run
        (
            "python3 -c 'import os, time, urllib.request\nwhile os.environ[\"PACESIM_PROCESS\"] == \"2\": time.sleep(1)\nwhile True: urllib.request.urlopen(os.environ[\"PACESIM_DESTINATION_URL\"]).read(); time.sleep(0.1)'",
            "worker 2 (`python3 -c 'import os, time, urllib.request",
        ),
    ] {
        let (code, out, err) = live(cmd);
        assert_eq!(code, 2, "{cmd}:\n{out}\n{err}");
        assert!(err.contains(says), "{cmd}: expected {says:?} in:\n{err}");
    }
    // with PACESIM_REQUESTS: a worker that exits 0 after 2 of its 10 requests
    let h = shell_scenario("early", "requests = 10\n");
    let (code, _, err) = live_file(
        &h,
        "python3 -c 'import os, urllib.request\nfor _ in range(2): urllib.request.urlopen(os.environ[\"PACESIM_DESTINATION_URL\"]).read()'",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("having made 2 of its 10 requests"), "{err}");
    let _ = std::fs::remove_dir_all(h.parent().unwrap());
    // a worker that exits at once: the message names the worker and quotes its stderr
    let (_, _, err) = live("python3 -c 'import sys; print(\"boom\", file=sys.stderr); sys.exit(3)'");
    assert!(err.contains("worker ") && err.contains("boom"), "{err}");
    // a kill point the worker does not report is refused before anything starts
    let g = shell_scenario(
        "point",
        "[[faults]]\nkind = \"kill\"\nat = \"1s\"\nprocess = 0\npoint = \"mid_fetch\"\n",
    );
    let (code, _, err) = common::pacesim(&["live", &g.display().to_string(), "--worker-cmd", "python3 -c pass"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("faults[0]: a kill at point `mid_fetch` is unavailable with an external worker"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(f.parent().unwrap());
    let _ = std::fs::remove_dir_all(g.parent().unwrap());
}

/// `pacesim live FILE --worker-cmd CMD`: exit code, stdout, stderr.
fn live_file(f: &Path, cmd: &str) -> (i32, String, String) {
    common::pacesim(&["live", &f.display().to_string(), "--worker-cmd", cmd])
}

/// A worker that reports its jobs. Its first incarnation ignores the soft-limit signal and
/// overruns its first job: the hard limit kills it. The next one ends a job early when the
/// soft limit's signal comes, and notes it in the file named by its argument.
const JOBS: &str = r#"
import json, os, signal, sys, time, urllib.request
first = os.environ["PACESIM_INCARNATION"] == "0"
class Soft(Exception): pass
def soft(*_):
    with open(sys.argv[1], "a") as f: f.write("soft\n")
    raise Soft()
signal.signal(signal.SIGUSR1, signal.SIG_IGN if first else soft)
while True:
    print(json.dumps({"ev": "job_start"}), flush=True)
    urllib.request.urlopen(os.environ["PACESIM_DESTINATION_URL"]).read()
    try:
        time.sleep(2.0)
    except Soft:
        pass
    print(json.dumps({"ev": "job_end"}), flush=True)
"#;

#[test]
fn time_limits_signal_and_kill_a_worker_that_reports_its_jobs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pgs) = ready("time_limits_signal_and_kill_a_worker_that_reports_its_jobs") else {
        return;
    };
    let f = shell_scenario(
        "limits",
        "soft_limit = \"400ms\"\nhard_limit = \"800ms\"\n[live]\njobs = true\n",
    );
    let src = std::fs::read_to_string(&f).unwrap().replace("count = 3", "count = 1");
    std::fs::write(&f, src.replace("duration = \"2s\"", "duration = \"4s\"")).unwrap();
    let script = f.with_file_name("jobs.py");
    let marker = f.with_file_name("soft.txt");
    std::fs::write(&script, JOBS).unwrap();
    let sc = pacesim::registry::load(&f).unwrap();
    let cmd = format!("python3 {} {}", script.display(), marker.display());
    let w = worker_command(&sc, &f, Some(&cmd)).unwrap().unwrap();
    let r = run_blocking(
        &sc,
        &LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered).with_worker(w),
    )
    .unwrap();
    nothing_left(&r, &pgs);
    let evs = r.events();
    let crash = evs
        .iter()
        .find_map(|e| match *e {
            Event::Crash {
                t,
                point: CrashPoint::HardLimit,
                ..
            } => Some(t),
            _ => None,
        })
        .expect("the first job overran its hard limit and was killed");
    assert!(
        evs.iter().any(|e| matches!(e, Event::Restart { t, .. } if *t >= crash)),
        "restarted"
    );
    let soft = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(
        soft.contains("soft"),
        "the restarted worker never got the soft limit's signal"
    );
    // the second incarnation's jobs end at the soft limit, well before their 2 s sleep
    let after: Vec<u64> = evs
        .iter()
        .filter_map(|e| match *e {
            Event::Arrival { t, .. } if t > crash => Some(t),
            _ => None,
        })
        .collect();
    assert!(after.len() >= 2, "jobs ended early and more began: {after:?}");
    assert!(
        evs.iter().filter(|e| matches!(e, Event::Crash { .. })).count() == 1,
        "only the first incarnation ignored the soft limit"
    );
    let _ = std::fs::remove_dir_all(f.parent().unwrap());
}

/// Issue 51 item 3: the record's pace row with process 1 taking 3 s to start (a slow Python
/// start-up under load, as the template's took 1.4-2.1 s), killed at the scenario's 1.5 s.
/// The scenario's clock starts when every worker is ready, so the kill lands mid-protocol,
/// after the process asked the store, and `self_heal` judges it. (Before: the kill at 1.5 s of
/// the spawn clock landed while process 1 was still asleep, and `self_heal` passed untested.)
#[test]
fn a_worker_that_takes_3_s_to_start_is_killed_mid_protocol() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pgs) = ready("a_worker_that_takes_3_s_to_start_is_killed_mid_protocol") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pacesim-ext-slow-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("slow.toml");
    let script = example("pace_row.py");
    std::fs::write(
        &f,
        format!(
            "name = \"slow-start\"\nduration = \"4s\"\n[pacer]\nbackend = \"row\"\nrate = 20.0\nfallback = \"divided\"\n\
             [processes]\ncount = 3\n[fetch]\nduration = {{ dist = \"constant\", value = \"20ms\" }}\n[checks]\nburst = 5\n\
             [live]\ncommand = [\"sh\", \"-c\", \"if [ \\\"$PACESIM_PROCESS\\\" = 1 ] && [ \\\"$PACESIM_INCARNATION\\\" = 0 ]; then sleep 3; fi; exec python3 {}\"]\n\
             [[faults]]\nkind = \"kill\"\nat = \"1.5s\"\nprocess = 1\nrestart_after = \"300ms\"\n",
            script.display()
        ),
    )
    .unwrap();
    let sc = pacesim::registry::load(&f).unwrap();
    let w = worker_command(&sc, &f, None).unwrap().expect("a command");
    with_retry("slow start", || {
        let r = run_blocking(
            &sc,
            &LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered)
                .with_worker(w.clone()),
        )
        .unwrap();
        nothing_left(&r, &pgs);
        let evs = r.events();
        let crash = evs
            .iter()
            .find_map(|e| match e {
                Event::Crash { t, pid: 1, .. } => Some(*t),
                _ => None,
            })
            .expect("process 1 was killed");
        let first_ask = evs.iter().find_map(|e| match e {
            Event::OpSent { t, pid: 1, .. } => Some(*t),
            _ => None,
        });
        assert!(
            first_ask.is_some_and(|a| a < crash),
            "killed at {crash} ns, before its first request to the store ({first_ask:?}); ready at {} ns; notes {:?}",
            r.ready_ns,
            r.notes
        );
        assert!(
            r.ready_ns >= 3_000_000_000,
            "the clock started when process 1 was ready, after its 3 s start-up: {} ns",
            r.ready_ns
        );
        assert!(
            crash >= r.ready_ns + 1_500_000_000,
            "the kill counts from readiness ({} ns): at {crash} ns",
            r.ready_ns
        );
        assert!(judged(&r, "self_heal"), "{}", verdict(&r, "self_heal").detail);
        assert!(
            !r.notes.iter().any(|n| n.contains("before the process asked")),
            "{:?}",
            r.notes
        );
        match verdict(&r, "self_heal") {
            c if c.passed() => Ok(()),
            c => Err(format!("self_heal: {}", c.detail)),
        }
    });
}

/// A worker that never gets ready (no line, no request) within `[live] ready_timeout` fails
/// the run with a message naming it, exit 2.
#[test]
fn a_worker_never_ready_fails_the_run_naming_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if ready("a_worker_never_ready_fails_the_run_naming_it").is_none() {
        return;
    }
    let f = shell_scenario("never-ready", "[live]\nready_timeout = \"2s\"\n");
    let script = f.with_file_name("never_ready.py");
    std::fs::write(
        &script,
        "import os, time, urllib.request\n\
         if os.environ['PACESIM_PROCESS'] == '2':\n    time.sleep(30)\n\
         while True:\n    urllib.request.urlopen(os.environ['PACESIM_DESTINATION_URL']).read()\n    time.sleep(0.2)\n",
    )
    .unwrap();
    let cmd = format!("python3 {}", script.display());
    let started = std::time::Instant::now();
    let (code, _, err) = live_file(&f, &cmd);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("worker 2 ") && err.contains("not ready within 2.00 s"),
        "{err}"
    );
    assert!(!err.contains("workers 0") && !err.contains("worker 0 "), "{err}");
    assert!(started.elapsed() < Duration::from_secs(25), "bounded wait");
}

/// Issue 51 item 4: the live summary of a worker that reports no grants says `slots -` (not a
/// count of 1: `slot_ceiling` is not judged) and ends with the command that runs it again; and
/// `pacesim live ... | head -1` ends quietly (exit 0, no panic on the closed pipe).
#[test]
fn the_live_summary_reproduces_and_a_closed_pipe_is_no_panic() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if ready("the_live_summary_reproduces_and_a_closed_pipe_is_no_panic").is_none() {
        return;
    }
    let f = shell_scenario("summary", "");
    let script = f.with_file_name("fetcher.py");
    std::fs::write(
        &script,
        "import os, time, urllib.request\n\
         while True:\n    urllib.request.urlopen(os.environ['PACESIM_DESTINATION_URL']).read()\n    time.sleep(0.35)\n",
    )
    .unwrap();
    let cmd = format!("python3 {}", script.display());
    let (code, out, err) = live_file(&f, &cmd);
    // (a verdict either way: three unpaced fetchers that start together may need a burst of 3;
    // what is asserted is the summary's lines, not the worker's design)
    assert!(code == 0 || code == 1, "exit {code}: {out}{err}");
    assert!(out.contains("slots -"), "{out}");
    assert!(
        out.contains("reproduce: pacesim live ") && out.contains("--worker-cmd"),
        "{out}"
    );
    // as `| head -1` when head has gone before the summary is printed: the pipe is closed
    // before the first line (a pipe's buffer would take every line of the summary at once)
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(["live", &f.display().to_string(), "--worker-cmd", &cmd])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
