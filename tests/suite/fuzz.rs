//! Issue 17's "what must hold": mutated scenario files (from `sims/`), edited traces (real
//! `--trace` output) and the command line's arguments never panic or abort. A scenario either
//! loads or is refused naming file, line and field; a trace either checks or is refused; the
//! binary exits 0, 1 or 2. `just fuzz` runs it deeper (`PROPTEST_CASES`).

use pacesim::scenario::FOUR_LIMITERS;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(17),
        ),
        ..ProptestConfig::default()
    }
}

/// Every shipped scenario's text, by file name.
fn sims() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pacesim::run::default_scenarios()
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// Values that have broken parsers and simulators before.
const NASTY: &[&str] = &[
    "0",
    "-1",
    "1",
    "4294967295",
    "18446744073709551615",
    "9223372036854775808",
    "1e300",
    "1e-11",
    "nan",
    "inf",
    "-inf",
    "0.0",
    "\"0s\"",
    "\"-5s\"",
    "\"1e308s\"",
    "\"1ns\"",
    "\"100000h\"",
    "\"\"",
    "\"../../../x\"",
    "\"/tmp/x\"",
    "[]",
    "[1, 2]",
    "{}",
    "true",
    "{ dist = \"lognormal\", median = \"1ms\", sigma = 1e300 }",
    "{ dist = \"uniform\", low = \"2s\", high = \"1s\" }",
    // issue 34: a distribution missing a field, names a report cannot hold or a terminal
    // must not see, a huge drift
    "{ dist = \"lognormal\", sigma = 0.5 }",
    "\"index.md\"",
    "\"\\u001b]0;x\\u0007\\u001b[2J\"",
    "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
    "-1e300",
];

/// One edit of a scenario file.
#[derive(Clone, Debug)]
enum Edit {
    /// Replace the value of the `key = value` line at this index (modulo their count).
    Value(usize, &'static str),
    /// Delete a line.
    Delete(usize),
    /// Duplicate a line.
    Duplicate(usize),
    /// Cut the file at a byte offset (a char boundary at or before it).
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), proptest::sample::select(NASTY)).prop_map(|(i, v)| Edit::Value(i, v)),
        1 => any::<usize>().prop_map(Edit::Delete),
        1 => any::<usize>().prop_map(Edit::Duplicate),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(src: &str, e: &Edit) -> String {
    let lines: Vec<&str> = src.lines().collect();
    match *e {
        Edit::Value(i, v) => {
            let kv: Vec<usize> = (0..lines.len())
                .filter(|&j| {
                    let t = lines[j].trim_start();
                    !t.starts_with('#') && !t.starts_with('[') && t.contains(" = ")
                })
                .collect();
            if kv.is_empty() {
                return src.to_string();
            }
            let j = kv[i % kv.len()];
            let key = lines[j].split(" = ").next().unwrap();
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            out[j] = format!("{key} = {v}");
            out.join("\n") + "\n"
        }
        Edit::Delete(i) if !lines.is_empty() => {
            let mut out = lines.clone();
            out.remove(i % lines.len());
            out.join("\n") + "\n"
        }
        Edit::Duplicate(i) if !lines.is_empty() => {
            let mut out = lines.clone();
            let j = i % lines.len();
            out.insert(j, lines[j]);
            out.join("\n") + "\n"
        }
        Edit::Truncate(i) => {
            let mut k = i % (src.len() + 1);
            while !src.is_char_boundary(k) {
                k -= 1;
            }
            src[..k].to_string()
        }
        _ => src.to_string(),
    }
}

/// An error line must be `t.toml:LINE: FIELD: message`, on one line.
fn assert_names_file_line_field(e: &str) {
    assert!(!e.contains('\n'), "one line: {e}");
    let rest = e
        .strip_prefix("t.toml:")
        .unwrap_or_else(|| panic!("names the file: {e}"));
    let (line, rest) = rest.split_once(": ").unwrap_or_else(|| panic!("names the line: {e}"));
    assert!(line.parse::<usize>().is_ok(), "a line number: {e}");
    let (field, _) = rest.split_once(": ").unwrap_or_else(|| panic!("names the field: {e}"));
    assert!(!field.is_empty() && !field.contains(' '), "a field: {e}");
}

proptest! {
    #![proptest_config(config(256))]

    /// Any edit of any shipped scenario parses, or is refused naming file, line and field;
    /// whatever parses fits the memory estimate's arithmetic (no overflow, no panic).
    #[test]
    fn mutated_scenarios_load_or_name_file_line_and_field(
        file in 0usize..64,
        edits in proptest::collection::vec(edit(), 1..4),
    ) {
        let all = sims();
        let (_, text) = &all[file % all.len()];
        let mut src = text.clone();
        for e in &edits {
            src = apply(&src, e);
        }
        match pacesim::registry::parse("t.toml", &src) {
            Ok(sc) => {
                let _ = pacesim::run::budget::estimate(&sc, 1);
                let _ = sc.interval();
            }
            Err(e) => assert_names_file_line_field(&e.to_string()),
        }
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A real trace of FOUR_LIMITERS with a kill, as lines (made once).
fn real_trace() -> Vec<String> {
    static TRACE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TRACE.get_or_init(make_trace).clone()
}

fn make_trace() -> Vec<String> {
    let src = format!("{FOUR_LIMITERS}[[faults]]\nkind = \"kill\"\nat = \"100ms\"\nrestart_after = \"50ms\"\n");
    let sc = pacesim::registry::parse("t.toml", &src).unwrap();
    let d = tmp("trace");
    let p = d.join("t.jsonl");
    let f = std::fs::File::create(&p).unwrap();
    pacesim::registry::simulate(&sc, Some(Box::new(std::io::BufWriter::new(f))), None).unwrap();
    std::fs::read_to_string(&p).unwrap().lines().map(String::from).collect()
}

/// JSON values to put in a trace field.
const NASTY_JSON: &[&str] = &[
    "0",
    "-1",
    "-50",
    "1e300",
    "4000000000",
    "18446744073709551615",
    "0.5",
    "null",
    "\"x\"",
    "[]",
    "{}",
    "true",
    "999",
    "1e-11",
];

proptest! {
    #![proptest_config(config(64))]

    /// Any edit of a real trace (a field set to a nasty value, a line dropped or cut) checks or
    /// is refused with an error; never a panic or an abort.
    #[test]
    fn edited_traces_check_or_are_refused(
        line in any::<usize>(),
        field in any::<usize>(),
        value in proptest::sample::select(NASTY_JSON),
        cut in any::<bool>(),
        drop_line in any::<bool>(),
        dup_line in any::<bool>(),
    ) {
        let mut lines = real_trace();
        let i = line % lines.len();
        // issue 34: a line given twice (an arrival counted twice, a restart without a kill)
        let invented = dup_line && (lines[i].contains("\"arrival\"") || lines[i].contains("\"restart\""));
        if dup_line {
            lines.insert(i, lines[i].clone());
        } else if drop_line {
            lines.remove(i);
        } else if let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str::<serde_json::Value>(&lines[i]) {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = keys[field % keys.len()].clone();
            m.insert(k, serde_json::from_str(value).unwrap());
            lines[i] = serde_json::Value::Object(m).to_string();
        }
        let mut text = lines.join("\n") + "\n";
        if cut {
            text.truncate(text.len() * (field % 100) / 100);
        }
        let d = tmp("edit");
        let p = d.join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        let r = pacesim::run::check(&p, None);
        if invented && !cut {
            assert!(r.is_err(), "a duplicated line {} must be refused", lines[i]);
        }
        if let Err(e) = r {
            assert!(!e.to_string().is_empty());
        }
    }
}

proptest! {
    #![proptest_config(config(12))]

    /// The binary on mutated scenarios and arguments: exit 0, 1 or 2, never a panic (101) or a
    /// signal; `--max-wall` bounds each run, and its address space is capped at 6 GiB (the
    /// default `--max-memory` is 4 GiB): a run that outgrew it would abort on allocation, a
    /// signal, and fail here.
    #[test]
    fn the_command_line_exits_0_1_or_2(
        file in 0usize..64,
        edits in proptest::collection::vec(edit(), 0..3),
        command in proptest::sample::select(&["run", "simulate", "check", "sweep"][..]),
        seed in proptest::sample::select(&["0", "1", "18446744073709551615", "-1", "x"][..]),
    ) {
        let all = sims();
        let (_, text) = &all[file % all.len()];
        let mut src = text.clone();
        for e in &edits {
            src = apply(&src, e);
        }
        let d = tmp("cli");
        let p = d.join("t.toml");
        std::fs::write(&p, &src).unwrap();
        let p = p.to_str().unwrap();
        let out_dir = d.join("out");
        let out_dir = out_dir.to_str().unwrap();
        let args: Vec<&str> = match command {
            "run" => vec!["run", p, "--seed", seed, "--max-wall", "5s"],
            "simulate" => vec!["simulate", p, "--seeds", seed, "--max-wall", "5s"],
            // issue 34: a repeated grid value, refused before anything runs
            "sweep" => vec!["sweep", p, "--grid", "processes=2,2", "--out", out_dir, "--max-wall", "5s"],
            _ => vec!["check", p, "--max-wall", "5s"],
        };
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"));
        cmd.args(&args).current_dir(env!("CARGO_MANIFEST_DIR"));
        // SAFETY: only setrlimit (async-signal-safe) between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                let cap = 6u64 << 30;
                let lim = libc::rlimit { rlim_cur: cap, rlim_max: cap };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let code = out.status.code();
        let err = String::from_utf8_lossy(&out.stderr);
        prop_assert!(matches!(code, Some(0..=2)), "{args:?}: {code:?}\n{err}");
        prop_assert!(!err.contains("panicked"), "{args:?}: {err}");
        if command == "sweep" {
            prop_assert_eq!(code, Some(2), "{:?}: {}", args, err);
        }
    }
}

/// Issue 34: a scenario of any backend, an optional `compare` list, threads, a kill point,
/// a tiny period or limit and a huge rate, driven by every route that picks the backend
/// (`run`, `run --backend`, `simulate`, `matrix`, `sweep --grid backend=`).
#[allow(clippy::too_many_arguments)]
fn generated(
    backend: &str,
    compare: &[&str],
    threads: u16,
    point: Option<&str>,
    option: Option<(&str, &str)>,
    limit: Option<(&str, &str)>,
    rate: &str,
) -> String {
    let mut s = format!("name = \"g\"\nseed = 3\nduration = \"1s\"\n[pacer]\nbackend = \"{backend}\"\nrate = {rate}\n");
    if !compare.is_empty() {
        let list: Vec<String> = compare.iter().map(|b| format!("\"{b}\"")).collect();
        s.push_str(&format!("compare = [{}]\n", list.join(", ")));
    }
    if let Some((k, v)) = option {
        s.push_str(&format!("{k} = {v}\n"));
    }
    s.push_str(&format!("[processes]\ncount = 2\nrequests = 3\nthreads = {threads}\n"));
    if let Some((k, v)) = limit {
        s.push_str(&format!("{k} = {v}\n"));
    }
    if let Some(p) = point {
        s.push_str(&format!(
            "[[faults]]\nkind = \"kill\"\nat = \"100ms\"\npoint = \"{p}\"\nrestart_after = \"10ms\"\n"
        ));
    }
    s
}

use crate::common::BACKENDS;

proptest! {
    #![proptest_config(config(16))]

    /// Threads x backends x routes, tiny durations, huge rates: every route exits 0, 1 or 2,
    /// never a panic or a signal, and a scenario that parses runs with every backend it names.
    #[test]
    fn threads_backends_routes_tiny_durations_and_huge_rates(
        backend in proptest::sample::select(BACKENDS),
        compare in proptest::sample::subsequence(BACKENDS, 0..3),
        threads in proptest::sample::select(&[1u16, 2, 8][..]),
        point in proptest::option::of(proptest::sample::select(
            &["mid_reservation", "holding_lock", "sleeping_to_slot", "mid_fetch", "in_transaction"][..])),
        option in proptest::option::of(proptest::sample::select(&[
            ("poll", "\"1ns\""), ("ttl", "\"1ns\""), ("stale_after", "\"1ns\""), ("max_wait", "\"1ns\""),
            ("locks", "1"), ("burst", "1"),
        ][..])),
        limit in proptest::option::of(proptest::sample::select(&[
            ("hard_limit", "\"1ns\""), ("hard_limit", "\"0s\""), ("soft_limit", "\"1ns\""),
            ("hard_limit", "\"10000000000000000000ns\""),
        ][..])),
        rate in proptest::sample::select(&["7.0", "1e8", "1e9"][..]),
        route in 0usize..5,
        other in proptest::sample::select(BACKENDS),
    ) {
        let src = generated(backend, &compare, threads, point, option, limit, rate);
        let d = tmp("routes");
        let p = d.join("t.toml");
        std::fs::write(&p, &src).unwrap();
        let out_dir = d.join("sweep");
        let _ = std::fs::remove_dir_all(&out_dir);
        let (p, o) = (p.to_str().unwrap(), out_dir.to_str().unwrap());
        let grid = format!("backend={other}");
        let args: Vec<&str> = match route {
            0 => vec!["run", p, "--max-wall", "5s"],
            1 => vec!["run", p, "--backend", other, "--max-wall", "5s"],
            2 => vec!["simulate", p, "--max-wall", "5s"],
            3 => vec!["matrix", p, "--max-wall", "5s"],
            _ => vec!["sweep", p, "--grid", &grid, "--out", o, "--max-wall", "5s"],
        };
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let code = out.status.code();
        let err = String::from_utf8_lossy(&out.stderr);
        prop_assert!(matches!(code, Some(0..=2)), "{args:?}: {code:?}\n{src}\n{err}");
        prop_assert!(!err.contains("panicked"), "{args:?}: {src}\n{err}");
        if code == Some(2) {
            prop_assert!(err.starts_with("error: "), "{args:?}: {err}");
        }
        // the library route: a scenario that parses runs with each backend it names, through
        // the registry (and so `SimBuilder`), or says why not
        if let Ok(sc) = pacesim::registry::parse("t.toml", &src)
            && rate == "7.0"
        {
            // (refused, as by the command line, when the budget refuses it: a 1 ns time limit
            // schedules 1e9 events a second, and collecting them once took 21 GB)
            let budget = pacesim::budget::check(&sc, 1);
            for b in sc.runnable_backends() {
                let spec = pacesim::registry::spec(&b).unwrap();
                let mut sink = pacesim::trace::Collect::default();
                match (spec.simulate(&sc, &mut sink), &budget) {
                    (Ok(_), Ok(())) => {}
                    (Err(pacesim::builder::SimError::Budget(e)), Err(want)) => prop_assert_eq!(&e, want),
                    (r, _) => prop_assert!(false, "{b}: {:?} with budget {:?}: {src}", r.err(), budget),
                }
            }
        }
    }
}

// ---- issue 52: choice files and the size of messages (items 5 and "Messages") ----

/// A short run with log-normal draws (the store's latency, the fetch's duration), and the
/// words a recording of it drew.
fn recorded() -> &'static (PathBuf, pacesim::run::choices::ChoiceFile) {
    static REC: std::sync::OnceLock<(PathBuf, pacesim::run::choices::ChoiceFile)> = std::sync::OnceLock::new();
    REC.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-s52-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("s.toml");
        std::fs::write(
            &f,
            format!(
                "{FOUR_LIMITERS}[store]\nlatency = {{ dist = \"lognormal\", median = \"1ms\", sigma = 0.5 }}\n\
                 [fetch]\nduration = {{ dist = \"lognormal\", median = \"5ms\", sigma = 0.4 }}\n"
            ),
        )
        .unwrap();
        let rec = d.join("rec.json");
        pacesim::run::one_with(&f, None, None, None, pacesim::run::Choices::Record(&rec)).unwrap();
        let cf = pacesim::run::choices::ChoiceFile::read(&rec).unwrap();
        (f, cf)
    })
}

proptest! {
    #![proptest_config(config(24))]

    /// Item 5: a recorded choice file cut short, or with words replaced (zeros among them: an
    /// all-zero word once kept a normal draw's rejection loop going for ever), replays to an
    /// end: the recorded run, another run, or an error naming the words; never a hang.
    #[test]
    fn s52_a_cut_or_edited_choice_file_ends_quickly(
        keep in 0.0f64..1.2,
        edits in proptest::collection::vec((0.0f64..1.0, prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]), 0..40),
    ) {
        let (file, cf) = recorded();
        let mut cf = cf.clone();
        let pacesim::run::choices::Body::Words { words } = &mut cf.body else { unreachable!() };
        let n = words.len();
        prop_assert!(n > 0);
        words.truncate(((n as f64) * keep) as usize);
        for (at, w) in &edits {
            if !words.is_empty() {
                let i = ((words.len() as f64) * at) as usize % words.len();
                words[i] = *w;
            }
        }
        let held = words.len();
        let p = file.with_file_name(format!("c-{}.json", std::thread::current().name().unwrap_or("t").replace(':', "_")));
        cf.write(&p).unwrap();
        // (on a thread, waited for with a bound: a replay that loops fails rather than hangs)
        let (tx, rx) = std::sync::mpsc::channel();
        let f = file.clone();
        std::thread::spawn(move || {
            let r = pacesim::run::one_with(&f, None, None, None, pacesim::run::Choices::Replay(&p));
            let _ = tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
        });
        let r = rx.recv_timeout(std::time::Duration::from_secs(20));
        prop_assert!(r.is_ok(), "the replay of {held} words did not end within 20 s");
        if let Ok(Err(e)) = r {
            prop_assert!(e.contains("field `words`") && e.contains(&format!("the file holds {held}")), "{e}");
        }
    }

    /// Messages: a scenario value of any size, in any field, is refused (or loads) with a
    /// message of bounded size naming the field, never the value echoed whole.
    #[test]
    fn s52_extreme_values_give_bounded_messages(
        field in 0usize..8,
        size in prop_oneof![0usize..100, 1_000usize..200_000],
        c in prop_oneof![Just('x'), Just('9'), Just(' '), Just('é')],
        quoted in any::<bool>(),
    ) {
        let value: String = std::iter::repeat_n(c, size).collect();
        let value = if quoted { format!("\"{value}\"") } else { value };
        let (anchor, new) = match field {
            0 => ("rate = 50.0", format!("rate = {value}")),
            1 => ("name = \"four-limiters\"", format!("name = {value}")),
            2 => ("duration = \"5s\"", format!("duration = {value}")),
            3 => ("count = 4", format!("count = {value}")),
            4 => ("requests = 10", format!("requests = {value}")),
            5 => ("rate = 50.0", format!("rate = 50.0\nfallback = {value}")),
            6 => ("rate = 50.0", format!("rate = 50.0\nstreak = {value}")),
            _ => ("rate = 50.0", format!("rate = 50.0\nin_transaction = {{ hold = {value} }}")),
        };
        let src = FOUR_LIMITERS.replace(anchor, &new);
        if let Err(e) = pacesim::registry::parse("t.toml", &src) {
            let e = e.to_string();
            let head: String = e.chars().take(300).collect();
            prop_assert!(e.len() < 1_200, "{} bytes: {head}", e.len());
            prop_assert!(e.starts_with("t.toml:"), "{head}");
        }
    }
}

// ---- explore: bounds and merges (issue 52) --------------------------------------------------

mod explore_fuzz {
    use super::config;
    use pacesim::explore::{self, Method, Options, Outcome, Report, Stopped};
    use proptest::prelude::*;
    use std::path::Path;

    const RACERS: &str = "sims/explore-three-racers.toml";

    fn edge_u64() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(3),
            Just(1 << 32),
            Just(i64::MAX as u64),
            Just(i64::MAX as u64 + 1),
            Just(u64::MAX),
            0..8u64,
        ]
    }

    fn edge_u32() -> impl Strategy<Value = u32> {
        prop_oneof![
            Just(0u32),
            Just(1),
            Just(2),
            Just(3),
            Just(32),
            Just(33),
            Just(5_000),
            Just(u32::MAX),
            0..5u32,
        ]
    }

    proptest! {
        #![proptest_config(config(12))]

        /// Explore's bounds (processes, requests, pct depth, schedules, kills; 0 and huge
        /// included) end with an error or a verdict, quickly, never a panic; a verdict never
        /// reads as a pass when nothing was judged, and never judges more than it was given.
        #[test]
        fn explore_bounds_end_with_a_verdict_or_an_error(
            processes in edge_u32(),
            requests in edge_u64(),
            depth in edge_u32(),
            schedules in edge_u64(),
            kills in edge_u32(),
            strategy in 0..4usize,
            backend in prop_oneof![Just("row"), Just("redis_gcra"), Just("local")],
        ) {
            let method = match strategy {
                0 => Method::Exhaustive,
                1 => Method::Pct { depth },
                2 => Method::Random,
                _ => Method::Coverage,
            };
            let o = Options {
                method,
                processes: Some(processes),
                requests: Some(requests),
                bounds: pacesim::choice::Bounds { kills, ..Default::default() },
                schedules: Some(schedules),
                time: Some(std::time::Duration::from_millis(300)),
                shrink_runs: 50,
                ..Options::default()
            };
            let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(RACERS);
            let t = std::time::Instant::now();
            let r = explore::from_file(&file, Some(backend), None, &o, &mut |_| {});
            let took = t.elapsed();
            prop_assert!(took < std::time::Duration::from_secs(30), "{o:?}: {took:?}");
            match r {
                Ok((r, _)) => {
                    prop_assert!(r.schedules <= schedules, "{}", r.verdict());
                    if r.schedules == 0 && r.counterexample.is_none() {
                        prop_assert_eq!(r.outcome(), Outcome::Nothing, "{}", r.verdict());
                        prop_assert!(r.verdict().contains("NOTHING JUDGED"), "{}", r.verdict());
                    }
                    if r.outcome() == Outcome::Pass && method == Method::Exhaustive {
                        prop_assert!(r.complete && r.stopped.is_none(), "{}", r.verdict());
                    }
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }

    /// Two shards of one exploration (row, 3 x 1, no pruning), made once.
    fn shards() -> &'static [Report] {
        static SHARDS: std::sync::OnceLock<Vec<Report>> = std::sync::OnceLock::new();
        SHARDS.get_or_init(|| {
            let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(RACERS);
            (0..2)
                .map(|i| {
                    let o = Options {
                        processes: Some(3),
                        requests: Some(1),
                        prune: false,
                        shard: Some((i, 2)),
                        ..Options::default()
                    };
                    explore::from_file(&file, None, None, &o, &mut |_| {}).unwrap().0
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(config(64))]

        /// A shard's report edited (its fields, or its JSON text) is refused or merged, never a
        /// wrong "complete": an edit that makes it another exploration's, an index out of
        /// place, a stop it contradicts or counts that overflow are refused; an honest
        /// incomplete shard makes the whole incomplete; text edits never panic.
        #[test]
        fn an_edited_shard_is_refused_or_merged_never_a_wrong_complete(
            field in 0..11usize,
            value in edge_u64(),
            cut in 0..2000usize,
            byte in any::<u8>(),
        ) {
            let parts = shards();
            let mut b = parts[1].clone();
            // (whether the edit leaves it one shard of this exploration, complete)
            let same = match field {
                0 => { b.bounds.kills = 1 + (value % 3) as u32; false }
                1 => { b.processes = b.processes.wrapping_add(1 + (value % 5) as u32); false }
                2 => { b.requests = Some(value.max(2)); false }
                3 => { b.text_hash = format!("{value:016x}"); false }
                4 => { b.shard = Some((value, 2)); value == 1 }
                5 => { b.shard = Some((1, value)); value == 2 }
                6 => { b.stopped = Some(Stopped::Time); false }
                7 => { b.schedules = u64::MAX; false }
                8 => { b.complete = false; b.stopped = Some(Stopped::Schedules); false }
                9 => { b.backend = "local".into(); false }
                _ => { b.method = Method::Random; false }
            };
            match explore::merge(&[parts[0].clone(), b]) {
                Ok(m) => {
                    if m.complete || m.outcome() == Outcome::Pass {
                        prop_assert!(same, "edit {field} ({value}) merged to a pass: {}", m.verdict());
                    }
                    prop_assert!(m.schedules >= parts[0].schedules);
                }
                Err(e) => prop_assert!(!same, "edit {field} ({value}) refused: {e}"),
            }
            // the JSON text cut short or a byte changed: read or refused, merged or refused
            let text = serde_json::to_string(&parts[1]).unwrap();
            let mut bytes = text.into_bytes();
            let at = cut % bytes.len();
            if byte % 2 == 0 {
                bytes.truncate(at);
            } else {
                bytes[at] = byte;
            }
            if let Ok(r) = serde_json::from_slice::<Report>(&bytes) {
                let _ = explore::merge(&[parts[0].clone(), r]);
            }
        }
    }
}
