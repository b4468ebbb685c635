//! `pacesim explore` (issue 33): a racy two-step backend, found on every exploration while
//! sampled runs pass most seeds; shrinking to a minimal case; replay by choice file;
//! determinism; shards that merge to the whole; correct backends that pass exhaustively.

use pacesim::explore::{self, Method, Options, Site};
use std::path::{Path, PathBuf};

use crate::common::two_step::racy;

// ---- scenarios ----------------------------------------------------------------------------

use crate::common::two_step::SPREAD;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pacesim-explore-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn scenario_file(dir: &Path, text: &str, backend: &str) -> PathBuf {
    let p = dir.join("scenario.toml");
    std::fs::write(&p, text.replace("racy_two_step", backend)).unwrap();
    p
}

fn opts(method: Method) -> Options {
    Options {
        method,
        vary: vec![Site::StoreLatency, Site::Start],
        schedules: Some(20_000),
        ..Options::default()
    }
}

fn explore_file(file: &Path, o: &Options) -> explore::Report {
    explore::from_file(file, None, None, o, &mut |_| {})
        .expect("explores")
        .0
}

/// Sampled runs of `text` that pass every check, of `seeds`.
fn sampled_passes(text: &str, seeds: u64) -> u64 {
    let sc = pacesim::registry::parse("spread.toml", text).unwrap();
    (0..seeds)
        .filter(|&s| {
            let mut sc = sc.clone();
            sc.seed = s;
            let summary = pacesim::registry::simulate(&sc, None, None).unwrap();
            summary.checks.values().all(|v| !v.failed())
        })
        .count() as u64
}

// ---- the tests ----------------------------------------------------------------------------

/// The racy backend passes most sampled runs, and every exploration finds it (exhaustive,
/// pct, random, coverage; several search seeds), within a small budget.
#[test]
fn the_race_sampling_misses_is_found_every_time() {
    racy();
    let passes = sampled_passes(SPREAD, 40);
    eprintln!("sampled: {passes} of 40 seeds pass");
    assert!(
        passes >= 30,
        "the race should hide from most sampled runs: {passes}/40 pass"
    );
    let dir = tmp("every-time");
    let file = scenario_file(&dir, SPREAD, "racy_two_step");
    for method in [
        Method::Exhaustive,
        Method::Pct { depth: 2 },
        Method::Random,
        Method::Coverage,
    ] {
        for seed in 0..3 {
            let o = Options {
                seed,
                shrink: false,
                ..opts(method)
            };
            let r = explore_file(&file, &o);
            let c = r
                .counterexample
                .as_ref()
                .unwrap_or_else(|| panic!("{} seed {seed} missed the race: {}", method.name(), r.verdict()));
            assert!(
                c.violation.check == "ceiling" || c.violation.check == "slot_ceiling",
                "{}",
                c.violation.check
            );
            eprintln!("{}: found at schedule {}", method.name(), c.found_at);
            assert!(c.found_at <= 2_000, "{} took {} schedules", method.name(), c.found_at);
            if method == Method::Exhaustive {
                break; // (exhaustive has no seed)
            }
        }
    }
}

/// The shrunk case is minimal in processes (two: a race needs two), requests (two races) and
/// faults (none, though a kill was allowed and the case first found had one), it
/// replays with `run --choices` to the same violation, and explore is deterministic.
#[test]
fn a_counterexample_shrinks_replays_and_repeats() {
    racy();
    let dir = tmp("shrinks");
    let file = scenario_file(&dir, SPREAD, "racy_two_step");
    let o = Options {
        bounds: pacesim::choice::Bounds {
            kills: 1,
            ..Default::default()
        },
        ..opts(Method::Random)
    };
    let a = explore_file(&file, &o);
    let c = a.counterexample.as_ref().expect("found");
    // two processes that race twice take four slots where two are allowed; one process
    // cannot race, and two that race once take two
    assert_eq!(c.shrunk.processes, 2, "a race needs two: {:?}", c.shrunk);
    assert_eq!(c.shrunk.requests, Some(2), "two races: {:?}", c.shrunk);
    assert_eq!(c.shrunk.kills, 0, "no kill is needed: {:?}", c.shrunk);
    assert_eq!(c.kills, 0, "and the case runs without a kill budget");
    // determinism: the same schedules, the same counterexample
    let b = explore_file(&file, &o);
    let cb = b.counterexample.as_ref().unwrap();
    assert_eq!(
        (a.schedules, c.found_at, &c.choices),
        (b.schedules, cb.found_at, &cb.choices)
    );
    assert_eq!(c.scenario, cb.scenario);
    // the written case replays to the same violation, by `run --choices`
    let out = dir.join("out");
    let files = explore::write(&out, &a).unwrap();
    let stem = explore::stem(&a);
    let case = out.join(format!("{stem}.case.toml"));
    let choices = out.join(format!("{stem}.choices.json"));
    assert!(files.contains(&case) && files.contains(&choices));
    assert!(out.join(format!("{stem}-rate.png")).exists());
    let s = pacesim::run::one_with(&case, None, None, None, pacesim::run::Choices::Replay(&choices)).unwrap();
    assert!(s.checks[c.violation.check.as_str()].failed(), "{:?}", s.checks);
    assert_eq!(s.checks[c.violation.check.as_str()].detail, c.violation.detail);
    // without the choices, the case's own seed need not fail: the choices make it
    // a choice file of another seed is refused, naming the field
    let e = pacesim::run::one_with(&case, Some(99), None, None, pacesim::run::Choices::Replay(&choices)).unwrap_err();
    assert!(e.to_string().contains("field `seed`"), "{e}");
}

/// An ordinary run's words, recorded, replay it exactly (the same trace hash).
#[test]
fn a_recorded_run_replays_exactly() {
    let dir = tmp("record");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/kill-mid-reservation.toml");
    let rec = dir.join("words.json");
    let a = pacesim::run::one_with(&file, None, None, None, pacesim::run::Choices::Record(&rec)).unwrap();
    let plain = pacesim::run::one(&file, None, None, None).unwrap();
    assert_eq!(a.trace_hash, plain.trace_hash, "recording changes nothing");
    let b = pacesim::run::one_with(&file, None, None, None, pacesim::run::Choices::Replay(&rec)).unwrap();
    assert_eq!(a.trace_hash, b.trace_hash);
    // the words make the run: other words, another run
    let mut f = pacesim::run::choices::ChoiceFile::read(&rec).unwrap();
    if let pacesim::run::choices::Body::Words { words } = &mut f.body {
        assert!(!words.is_empty());
        for w in words.iter_mut() {
            *w = w.wrapping_mul(3);
        }
    }
    f.write(&rec).unwrap();
    let c = pacesim::run::one_with(&file, None, None, None, pacesim::run::Choices::Replay(&rec)).unwrap();
    assert_ne!(a.trace_hash, c.trace_hash);
}

/// The shrunk case's scenario, choices and failing property, for a look.
#[allow(dead_code)]
fn show(c: &explore::Counterexample) {
    eprintln!("{}\n{:?}\n{:?}", c.scenario, c.choices, c.violation);
}

/// A bad choice file is refused with its file, line or field, never a panic.
#[test]
fn a_bad_choice_file_names_what_is_wrong() {
    let dir = tmp("bad");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/four-limiters.toml");
    let p = dir.join("c.json");
    for (text, want) in [
        ("{", "c.json:1:"),
        (
            r#"{"version": 9, "scenario": "four-limiters", "backend": "row", "seed": 1, "mode": "words", "words": []}"#,
            "field `version`",
        ),
        (
            r#"{"version": 1, "scenario": "other", "backend": "row", "seed": 1, "mode": "words", "words": []}"#,
            "field `scenario`",
        ),
        (
            r#"{"version": 1, "scenario": "four-limiters", "backend": "row", "seed": 1, "mode": "steered", "choices": [],
               "bounds": {"quantiles": [0.5], "kills": 1, "kill_points": ["nowhere"], "restart_after": null, "order_width": 8}}"#,
            "field `bounds.kill_points`",
        ),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = pacesim::run::one_with(&file, None, None, None, pacesim::run::Choices::Replay(&p)).unwrap_err();
        assert!(e.to_string().contains(want), "{text}: {e}");
    }
}

/// Correct backends pass every schedule of small bounds (the tree explored to its end), and
/// the explorer says how many schedules and states that was: two processes x two requests,
/// then two x one with a kill at any of the backend's kill points. (`just explore` runs
/// larger bounds.)
#[test]
fn correct_backends_pass_every_schedule() {
    let dir = tmp("correct");
    for backend in ["row", "redis_gcra", "shared_cache", "local_divided"] {
        let file = scenario_file(&dir, SPREAD, backend);
        for (requests, kills) in [(2, 0), (1, 1)] {
            let o = Options {
                processes: Some(2),
                requests: Some(requests),
                vary: vec![Site::StoreLatency, Site::Start],
                bounds: pacesim::choice::Bounds {
                    kills,
                    ..Default::default()
                },
                schedules: Some(200_000),
                ..Options::default()
            };
            let r = explore_file(&file, &o);
            eprintln!("{backend} 2 x {requests}, {kills} kill: {}", r.verdict());
            assert!(r.counterexample.is_none(), "{backend}: {}", r.verdict());
            assert!(r.complete, "{backend}: {}", r.verdict());
            assert!(r.schedules > 1, "{backend}: {}", r.verdict());
        }
    }
}

/// The shards of an exhaustive exploration split the tree: their schedules sum to the whole's
/// (without pruning, which a shard does on its own), and merged they give its verdict.
#[test]
fn shards_merge_to_the_whole() {
    let dir = tmp("shards");
    let file = scenario_file(&dir, SPREAD, "row");
    let base = Options {
        processes: Some(3),
        requests: Some(1),
        prune: false,
        ..opts(Method::Exhaustive)
    };
    let whole = explore_file(&file, &base);
    assert!(whole.complete && whole.counterexample.is_none(), "{}", whole.verdict());
    let parts: Vec<explore::Report> = (0..3)
        .map(|i| {
            explore_file(
                &file,
                &Options {
                    shard: Some((i, 3)),
                    ..base.clone()
                },
            )
        })
        .collect();
    assert!(parts.iter().all(|p| p.schedules > 0), "every shard has work");
    let merged = explore::merge(&parts).unwrap();
    assert_eq!(merged.schedules, whole.schedules);
    assert!(merged.complete);
    assert!(explore::merge(&parts[..2]).is_err(), "a missing shard is refused");
}

/// Every defective cell of the expected matrix is caught by exploring it: a violation of a
/// property the matrix expects, within small bounds where it shows there, shrunk. (The same
/// as `pacesim explore-defects`, whose table docs/explore.md shows.)
#[test]
fn every_defective_cell_of_the_matrix_is_caught() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = explore::defects::files_in(&root.join("sims"));
    let expected = pacesim::matrix::load_expected(&root.join("tests/expected-matrix.toml")).unwrap();
    let cells = explore::defects::explore_all(
        &files,
        &expected,
        &explore::defects::default_options(),
        &[],
        &mut |_| {},
    )
    .unwrap();
    let defective = expected
        .values()
        .flat_map(|r| r.values())
        .filter(|x| !x.fail.is_empty())
        .count();
    assert_eq!(cells.len(), defective, "every defective cell explored");
    let missed: Vec<String> = cells.iter().filter(|c| !c.caught()).map(|c| c.line()).collect();
    assert!(missed.is_empty(), "not caught:\n{}", missed.join("\n"));
    // the shrunk cases never need a kill the scenario does not have, nor more processes
    for c in &cells {
        let x = c.report.counterexample.as_ref().unwrap();
        assert!(x.shrunk.processes <= x.found.processes, "{}", c.line());
        assert_eq!(x.shrunk.kills, 0, "{}", c.line());
    }
}

/// `--hops racing` varies a permission hop only while another operation is on its way to the
/// store: fewer schedules than `permission` on the same bounds, and the race is still found.
#[test]
fn racing_hops_explore_less_and_still_find_the_race() {
    racy();
    let dir = tmp("racing");
    let row = scenario_file(&dir, SPREAD, "row");
    let with = |hops| Options {
        processes: Some(3),
        requests: Some(2),
        vary: vec![Site::StoreLatency],
        bounds: pacesim::choice::Bounds {
            hops,
            ..Default::default()
        },
        ..Options::default()
    };
    let all = explore_file(&row, &with(pacesim::choice::Hops::Permission));
    let racing = explore_file(&row, &with(pacesim::choice::Hops::Racing));
    assert!(all.complete && racing.complete);
    assert!(
        racing.schedules < all.schedules,
        "racing {} vs permission {}",
        racing.schedules,
        all.schedules
    );
    let racy_file = scenario_file(&tmp("racing-racy"), SPREAD, "racy_two_step");
    let o = Options {
        vary: vec![Site::StoreLatency, Site::Start],
        ..with(pacesim::choice::Hops::Racing)
    };
    assert!(explore_file(&racy_file, &o).counterexample.is_some());
}

/// Pruning changes the work, never the verdict: the same bounds explored with and without it
/// find the same property broken (or none, the tree explored to its end), and pruning runs
/// fewer schedules. A racy design, a design whose processes pace alone (with a kill), and two
/// correct ones (a denied GCRA request's retries, a kill at any point). Whether pruning merges
/// only states that go on alike is audited in `src/explore/prune_audit.rs`.
#[test]
fn pruning_changes_the_work_not_the_verdict() {
    racy();
    let dir = tmp("prune");
    let racers = Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/explore-three-racers.toml");
    let spread = scenario_file(&dir, SPREAD, "racy_two_step");
    let kill = |kills| pacesim::choice::Bounds {
        kills,
        restart_after: None,
        ..Default::default()
    };
    let cases: [(&Path, &str, u32, u64, u32); 4] = [
        (&spread, "racy_two_step", 2, 2, 0),
        (&racers, "local_divided", 3, 3, 1),
        (&racers, "redis_gcra", 3, 1, 0),
        (&racers, "row", 2, 2, 1),
    ];
    for (file, backend, processes, requests, kills) in cases {
        let run = |prune| {
            let o = Options {
                processes: Some(processes),
                requests: Some(requests),
                bounds: kill(kills),
                prune,
                shrink: false,
                schedules: Some(2_000_000),
                ..Options::default()
            };
            explore::from_file(file, Some(backend), None, &o, &mut |_| {})
                .expect("explores")
                .0
        };
        let (with, without) = (run(true), run(false));
        eprintln!("{backend}: pruned: {}; not: {}", with.verdict(), without.verdict());
        let broke = |r: &explore::Report| r.counterexample.as_ref().map(|c| c.violation.check.clone());
        assert_eq!(broke(&with), broke(&without), "{backend}");
        if broke(&with).is_none() {
            assert!(with.complete && without.complete, "{backend}");
            assert!(with.schedules <= without.schedules, "{backend}");
            if backend == "redis_gcra" {
                // a denied request's hop, whatever it was, leaves the retry at one instant
                assert!(
                    with.schedules * 4 < without.schedules,
                    "{backend}: pruning saved little"
                );
            }
        }
    }
}

/// On two threads (the subtrees below a split dealt out, one table of seen states shared) an
/// exhaustive search gives the one thread's verdict, and its counterexample: the same
/// violation, choices and schedule found at (the search is run again on one thread to it).
/// A correct design is explored to its end, pruned against the shared table; unpruned, the
/// threads judge every schedule once between them.
#[test]
fn threads_share_the_work_not_the_verdict() {
    racy();
    let dir = tmp("threads");
    let racers = Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/explore-three-racers.toml");
    let spread = scenario_file(&dir, SPREAD, "racy_two_step");
    let cases: [(&Path, &str, u32, u64, u32); 3] = [
        (&spread, "racy_two_step", 2, 2, 0),
        (&racers, "redis_gcra", 3, 1, 0),
        (&racers, "row", 2, 2, 1),
    ];
    for (file, backend, processes, requests, kills) in cases {
        let run = |threads, prune| {
            let o = Options {
                processes: Some(processes),
                requests: Some(requests),
                bounds: pacesim::choice::Bounds {
                    kills,
                    restart_after: None,
                    ..Default::default()
                },
                threads,
                prune,
                schedules: Some(2_000_000),
                ..Options::default()
            };
            explore::from_file(file, Some(backend), None, &o, &mut |_| {})
                .expect("explores")
                .0
        };
        let (one, two) = (run(1, true), run(2, true));
        eprintln!("{backend}: one thread: {}; two: {}", one.verdict(), two.verdict());
        // unpruned, every schedule is judged once on whichever thread: the same count
        let (one_all, two_all) = (run(1, false), run(2, false));
        if one_all.counterexample.is_none() {
            assert_eq!(one_all.schedules, two_all.schedules, "{backend}: every subtree once");
            assert!(two_all.complete, "{backend}: {}", two_all.verdict());
        }
        assert_eq!(two.threads, 2);
        match (&one.counterexample, &two.counterexample) {
            (Some(a), Some(b)) => {
                assert_eq!(a.violation, b.violation, "{backend}");
                assert_eq!(a.found_at, b.found_at, "{backend}");
                assert_eq!(a.choices, b.choices, "{backend}");
            }
            (None, None) => {
                assert!(one.complete && two.complete, "{backend}: {}", two.verdict());
                assert_eq!(two.stopped, None, "{backend}");
                assert!(two.schedules > 0 && two.states > 0, "{backend}: {}", two.verdict());
            }
            _ => panic!("{backend}: one thread: {}; two: {}", one.verdict(), two.verdict()),
        }
    }
}

// ---- honest verdicts and limits (issue 52 items 7, 8, 9, 14) -------------------------------

use crate::common::{pacesim, pacesim_env};

const RACERS: &str = "sims/explore-three-racers.toml";

/// A JUnit file's counts of skipped and failed cases.
fn junit_counts(path: &Path) -> (String, String) {
    let x = std::fs::read_to_string(path).unwrap();
    let attr = |name: &str| {
        let at = x
            .find(&format!(" {name}=\""))
            .unwrap_or_else(|| panic!("{name} in {x}"))
            + name.len()
            + 3;
        x[at..].split('"').next().unwrap().to_string()
    };
    (attr("skipped"), attr("failures"))
}

/// Item 8: an exploration that judged nothing (`--schedules 0`, `--time 1ns`) or that a
/// budget stopped before the tree ended is not a pass: it says so, exits 1, and its JUnit case
/// is skipped, not passed; `--allow-incomplete` asks for exit 0 and still says it.
#[test]
fn an_exploration_that_judged_nothing_or_stopped_at_a_budget_is_not_a_pass() {
    let dir = tmp("nothing");
    let junit = dir.join("j.xml");
    let j = junit.to_str().unwrap();
    let small = ["explore", RACERS, "--processes", "2", "--requests", "1", "--junit", j];
    for (extra, word) in [
        (&["--schedules", "0"][..], "NOTHING JUDGED"),
        (&["--time", "1ns"][..], "NOTHING JUDGED"),
        (&["--schedules", "3"][..], "INCOMPLETE"),
        (&["--strategy", "random", "--schedules", "0"][..], "NOTHING JUDGED"),
    ] {
        let args: Vec<&str> = small.iter().chain(extra).copied().collect();
        let (code, out, err) = pacesim(&args);
        assert_eq!(code, 1, "{extra:?}: {out}{err}");
        assert!(out.contains(word) && out.contains("not a pass"), "{extra:?}: {out}");
        assert!(!out.contains("no violation in all"), "{extra:?}: {out}");
        assert_eq!(
            junit_counts(&junit),
            ("1".into(), "0".into()),
            "{extra:?}: skipped, not passed"
        );
        let args: Vec<&str> = args.into_iter().chain(["--allow-incomplete"]).collect();
        let (code, out, _) = pacesim(&args);
        assert_eq!(code, 0, "{extra:?} --allow-incomplete: {out}");
        assert!(out.contains(word), "{out}");
    }
    // the tree explored to its end is a pass, and a sampled search that ran the schedules it
    // was given is one too
    let (code, out, err) = pacesim(&small);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no violation in all"), "{out}");
    assert_eq!(junit_counts(&junit), ("0".into(), "0".into()));
    let args: Vec<&str> = small
        .iter()
        .copied()
        .chain(["--strategy", "random", "--schedules", "5"])
        .collect();
    let (code, out, err) = pacesim(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no violation in 5 sampled schedules"), "{out}");
}

/// Item 8: a shard index left in the environment (Slurm) is named, and a shard that gets no
/// schedule is not a pass, even for a defective design.
#[test]
fn an_implicit_shard_is_named_and_an_empty_shard_is_not_a_pass() {
    let env = [("SLURM_ARRAY_TASK_ID", "3"), ("SLURM_ARRAY_TASK_COUNT", "4")];
    let args = [
        "explore",
        RACERS,
        "--backend",
        "local",
        "--processes",
        "2",
        "--requests",
        "1",
    ];
    let (code, out, err) = pacesim_env(&args, &env);
    assert!(err.contains("shard 3/4, from SLURM_ARRAY_TASK_ID"), "{err}");
    assert!(
        out.contains("from SLURM_ARRAY_TASK_ID") && out.contains("NOTHING JUDGED"),
        "{out}"
    );
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = pacesim(&args);
    assert_eq!(code, 0, "without the variable, the whole tree: {out}{err}");
}

/// `--require-judged` (docs/commands.md: every command) holds for explore: a check no
/// schedule judged (liveness, with too little demand) fails the command; without the flag it
/// is reported.
#[test]
fn explore_honours_require_judged() {
    let args = [
        "explore",
        RACERS,
        "--backend",
        "redis_gcra",
        "--processes",
        "2",
        "--requests",
        "1",
    ];
    let (code, out, err) = pacesim(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("| checks no schedule judged | liveness |"), "{out}");
    let strict: Vec<&str> = ["--require-judged"].into_iter().chain(args).collect();
    let (code, out, err) = pacesim(&strict);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("not judged (--require-judged): liveness"), "{err}");
    // only the checks counted (`--checks`) must be judged
    let some: Vec<&str> = strict.iter().copied().chain(["--checks", "ceiling"]).collect();
    let (code, out, err) = pacesim(&some);
    assert_eq!(code, 0, "{out}{err}");
}

/// Item 7: `--depth` past what pct can state a bound for is refused at once (4294967295 used
/// to allocate 34 GB).
#[test]
fn a_huge_pct_depth_is_refused_not_allocated() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(RACERS);
    for depth in [33, 1_000_000, u32::MAX] {
        let o = Options {
            method: Method::Pct { depth },
            schedules: Some(2),
            ..Options::default()
        };
        let e = explore::from_file(&file, None, None, &o, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("--depth"), "{e}");
    }
    let (code, _, err) = pacesim(&["explore", RACERS, "--strategy", "pct", "--depth", "4294967295"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--depth: a bug depth is 1 to 32"), "{err}");
    // --processes 0 and a request count past the file's integers are the options' errors
    let (code, _, err) = pacesim(&["explore", RACERS, "--processes", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--processes"), "{err}");
    let (code, _, err) = pacesim(&["explore", RACERS, "--requests", "18446744073709551615"]);
    assert_eq!(code, 2);
    assert!(err.contains("--requests") && !err.contains("-1"), "{err}");
}

/// Item 7: the seen states count against `--max-memory` with the run's own estimate (28 MiB
/// here): a limit the table passes stops the exploration there, INCOMPLETE, exit 1.
#[test]
fn the_seen_states_count_against_max_memory() {
    let args = [
        "explore",
        RACERS,
        "--backend",
        "redis_gcra",
        "--processes",
        "3",
        "--requests",
        "2",
    ];
    // (without symmetry reduction: with it the tree's states fit)
    let tight: Vec<&str> = ["--max-memory", "30MiB"]
        .into_iter()
        .chain(args)
        .chain(["--threads", "1", "--no-symmetry"])
        .collect();
    let (code, out, err) = pacesim(&tight);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("INCOMPLETE") && out.contains("the memory limit (--max-memory)"),
        "{out}"
    );
    // on two threads, each run's own memory counts twice: the limit is reached sooner
    let two: Vec<&str> = ["--max-memory", "30MiB"]
        .into_iter()
        .chain(args)
        .chain(["--threads", "2", "--no-symmetry"])
        .collect();
    let (code, out, err) = pacesim(&two);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("the memory limit (--max-memory)"), "{out}");
    let (code, out, err) = pacesim(&args);
    assert_eq!(code, 0, "under the default limit it ends: {out}{err}");
}

/// Issue 50 item 4: `--max-wall` stops an exploration as its time budget does, and the partial
/// report is written (the watchdog waits for it): INCOMPLETE, exit 1, not exit 2 with nothing.
#[test]
fn max_wall_stops_an_exploration_with_its_partial_report() {
    let dir = tmp("max-wall");
    let out_dir = dir.join("out");
    let (code, out, err) = pacesim(&[
        "--max-wall",
        "2s",
        "explore",
        RACERS,
        "--backend",
        "redis_gcra",
        "--processes",
        "3",
        "--requests",
        "3",
        "--kills",
        "1",
        "--restart-after",
        "never",
        "--schedules",
        "1000000000",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("INCOMPLETE") || out.contains("NOTHING JUDGED"),
        "{out}{err}"
    );
    let report = std::fs::read_to_string(out_dir.join("explore-three-racers-redis_gcra.json")).expect("the report");
    assert!(report.contains("\"stopped\": \"time\""), "{report}");
}

/// Item 7: `--time` holds inside a run: one schedule of 3,000 processes at a million requests
/// a second runs for many minutes (every decision reads every process's state); the
/// exploration stops within seconds of its time, reports what it did (nothing judged, stopped
/// by its time), and is not a pass.
#[test]
fn the_time_budget_holds_inside_a_run() {
    let dir = tmp("long-run");
    let file = dir.join("long.toml");
    std::fs::write(
        &file,
        "name = \"long\"\nduration = \"10s\"\n[pacer]\nbackend = \"row\"\nrate = 1000000.0\n\
         [processes]\ncount = 3000\n[store]\nlatency = { dist = \"lognormal\", median = \"1ms\", sigma = 0.5 }\n",
    )
    .unwrap();
    let o = Options {
        time: Some(std::time::Duration::from_millis(500)),
        ..Options::default()
    };
    // (on a thread: a bounded wait for its report)
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(explore::from_file(&file, None, None, &o, &mut |_| {}).map(|r| r.0));
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("explore --time 500ms ends within 30 s")
        .unwrap();
    assert_eq!(r.stopped, Some(explore::Stopped::Time), "{}", r.verdict());
    assert_eq!(r.outcome(), explore::Outcome::Nothing, "{}", r.verdict());
    assert!(r.verdict().contains("NOTHING JUDGED"), "{}", r.verdict());
}

/// Item 7: SIGINT and SIGTERM stop an exploration part way, and it writes what it explored:
/// the report (marked incomplete, stopped by the signal), its `--out` files and its JUnit (a
/// skipped case), and exits 128 + the signal's number.
#[test]
fn an_interrupted_exploration_writes_its_partial_report() {
    use std::io::BufRead;
    for (sig, name, code) in [(libc::SIGINT, "SIGINT", 130), (libc::SIGTERM, "SIGTERM", 143)] {
        let dir = tmp(&format!("interrupted-{name}"));
        let (out, junit) = (dir.join("out"), dir.join("j.xml"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
            .args([
                "explore",
                RACERS,
                "--backend",
                "redis_gcra",
                "--processes",
                "3",
                "--requests",
                "3",
            ])
            .args(["--schedules", "100000000", "--json", "--out"])
            .arg(&out)
            .arg("--junit")
            .arg(&junit)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // the line it prints once its handlers are in place, read on a thread: a bounded wait
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("started") {
                    let _ = tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("explore started");
        // SAFETY: signalling our own child, by its pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, sig);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: still running 60 s after it"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let err = reader.join().unwrap();
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
        assert_eq!(status.code(), Some(code), "{name}: {err}");
        let r: explore::Report = serde_json::from_str(stdout.trim()).expect("the report on stdout");
        assert_eq!(r.stopped, Some(explore::Stopped::Signal(sig)), "{name}");
        assert!(!r.complete && r.counterexample.is_none());
        assert!(
            r.verdict().contains(&format!("interrupted ({name})")),
            "{}",
            r.verdict()
        );
        let written: explore::Report =
            serde_json::from_str(&std::fs::read_to_string(out.join("explore-three-racers-redis_gcra.json")).unwrap())
                .unwrap();
        assert_eq!(written.stopped, r.stopped);
        assert_eq!(junit_counts(&junit), ("1".into(), "0".into()), "{name}");
        assert!(err.contains(&format!("stopped by {name}")), "{err}");
    }
}

/// A shard of the three racers (row, 3 x 1, no pruning) with `o` changed by `edit`.
fn shard_of(file: &Path, i: u64, n: u64, edit: impl Fn(&mut Options)) -> explore::Report {
    let mut o = Options {
        processes: Some(3),
        requests: Some(1),
        prune: false,
        shard: Some((i, n)),
        ..opts(Method::Exhaustive)
    };
    edit(&mut o);
    explore_file(file, &o)
}

/// Item 9: `explore-merge` refuses shards that are not of one exploration (other bounds,
/// processes, requests, scenario text, shard counts), indices past the count, duplicates and
/// missing shards, self-contradicting reports and counts that overflow; never a wrong
/// "complete".
#[test]
fn merge_refuses_shards_of_different_explorations() {
    let dir = tmp("merge-refuses");
    let file = scenario_file(&dir, SPREAD, "row");
    let parts: Vec<explore::Report> = (0..2).map(|i| shard_of(&file, i, 2, |_| {})).collect();
    let m = explore::merge(&parts).unwrap();
    assert!(m.complete && m.outcome() == explore::Outcome::Pass, "{}", m.verdict());
    let refused = |other: explore::Report, want: &str| {
        let e = explore::merge(&[parts[0].clone(), other]).unwrap_err();
        assert!(e.contains(want), "{want}: {e}");
    };
    refused(shard_of(&file, 1, 2, |o| o.bounds.kills = 1), "its bounds differs");
    refused(
        shard_of(&file, 1, 2, |o| o.processes = Some(2)),
        "its processes differs",
    );
    refused(shard_of(&file, 1, 2, |o| o.requests = Some(2)), "its requests differs");
    // another scenario text of the same name and backend
    let other = scenario_file(&tmp("merge-other"), &SPREAD.replace("seed = ", "seed = 1"), "row");
    refused(shard_of(&other, 1, 2, |_| {}), "scenario text");
    refused(shard_of(&file, 1, 3, |_| {}), "different shard counts");
    let mut past = parts[1].clone();
    past.shard = Some((7, 2));
    refused(past, "not below the count");
    refused(parts[0].clone(), "given twice");
    let mut lying = parts[1].clone();
    lying.stopped = Some(explore::Stopped::Time);
    refused(lying, "says it is complete, yet it was stopped");
    let mut huge = parts[1].clone();
    huge.schedules = u64::MAX;
    refused(huge, "overflow");
    let mut old = parts[1].clone();
    old.text_hash.clear();
    refused(old, "older pacesim");
    // a shard stopped by its budget merges, incomplete: not a pass
    let cut = shard_of(&file, 1, 2, |o| o.schedules = Some(1));
    let m = explore::merge(&[parts[0].clone(), cut]).unwrap();
    assert!(
        !m.complete && matches!(m.outcome(), explore::Outcome::Incomplete(_)),
        "{}",
        m.verdict()
    );
    // the command line: exit 2 and the reason; the whole merged is a pass
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, serde_json::to_string(&parts[0]).unwrap()).unwrap();
    std::fs::write(
        &b,
        serde_json::to_string(&shard_of(&file, 1, 2, |o| o.bounds.kills = 1)).unwrap(),
    )
    .unwrap();
    let (code, _, err) = pacesim(&["explore-merge", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("of another exploration"), "{err}");
    std::fs::write(&b, serde_json::to_string(&parts[1]).unwrap()).unwrap();
    let (code, out, err) = pacesim(&["explore-merge", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Item 7: `explore-merge --out` runs a shard's counterexample again for its trace: one larger
/// than what was explored, or past `--max-memory`, is refused instead of run.
#[test]
fn merge_refuses_a_counterexample_larger_than_its_exploration() {
    let dir = tmp("merge-case");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(RACERS);
    let o = Options {
        processes: Some(3),
        requests: Some(3),
        ..Options::default()
    };
    let r = explore::from_file(&file, Some("local"), None, &o, &mut |_| {})
        .unwrap()
        .0;
    assert!(r.counterexample.is_some(), "{}", r.verdict());
    let write = |r: &explore::Report, limit: &str| {
        let p = dir.join("r.json");
        std::fs::write(&p, serde_json::to_string(r).unwrap()).unwrap();
        let out = dir.join("out");
        pacesim(&[
            "--max-memory",
            limit,
            "explore-merge",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (code, _, err) = write(&r, "4GiB");
    assert_eq!(code, 1, "the case as found merges and is written: {err}");
    // (its run's estimate is about 28 MiB)
    let (code, _, err) = write(&r, "20MiB");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-memory"), "{err}");
    let mut edited = r.clone();
    let c = edited.counterexample.as_mut().unwrap();
    // (its own duration, shrunk, on a line of its own before any table)
    let lines: Vec<String> = c
        .scenario
        .lines()
        .map(|l| {
            if l.starts_with("duration = ") {
                "duration = \"100000s\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(lines.iter().any(|l| l == "duration = \"100000s\""), "{}", c.scenario);
    c.scenario = lines.join("\n");
    let (code, _, err) = write(&edited, "4GiB");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than what was explored"), "{err}");
}

/// Item 14: `run --choices` prints a reproducer that replays the choices: run, it gives the
/// same trace and the same failure.
#[test]
fn the_reproducer_of_a_replayed_run_replays_its_choices() {
    let dir = tmp("reproduce");
    let out = dir.join("out");
    let (code, _, err) = pacesim(&[
        "explore",
        RACERS,
        "--backend",
        "local",
        "--processes",
        "3",
        "--requests",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    let case = out.join("explore-three-racers-local.case.toml");
    let choices = out.join("explore-three-racers-local.choices.json");
    let (code, first, err) = pacesim(&[
        "run",
        case.to_str().unwrap(),
        "--choices",
        choices.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 1, "{first}{err}");
    let first: serde_json::Value = serde_json::from_str(first.trim()).unwrap();
    let cmd = first["reproduce"].as_str().expect("a reproducer").to_string();
    assert!(cmd.contains("--choices"), "{cmd}");
    // the printed command, run (its words are plain: no quoting here)
    let words: Vec<&str> = cmd.split_whitespace().skip(1).chain(["--json"]).collect();
    let (code, again, err) = pacesim(&words);
    assert_eq!(code, 1, "{cmd}: {again}{err}");
    let again: serde_json::Value = serde_json::from_str(again.trim()).unwrap();
    assert_eq!(again["trace_hash"], first["trace_hash"], "{cmd}");
    assert_eq!(again["checks"], first["checks"], "{cmd}");
    // the table's `reproduce:` line says the same
    let (_, table, _) = pacesim(&["run", case.to_str().unwrap(), "--choices", choices.to_str().unwrap()]);
    assert!(table.contains(&format!("reproduce: {cmd}")), "{table}");
}

/// Branching from saved worlds (docs/explore.md): trees of every backend, with and without a
/// kill (the killed process restarting, or staying down), explored on one thread going on from
/// the worlds earlier runs saved and again replaying every run from its start (`--replay`):
/// the same schedules, distinct states, pruned runs and verdicts, and the same first violation
/// where there is one (`claim_row` leaks a slot when its holder is killed; `local` at three
/// processes breaks the ceiling). (`advisory` with a kill holds millions of states: left out.)
#[test]
fn a_search_that_branches_from_saved_worlds_is_the_search_that_replays() {
    let backends = crate::common::BACKENDS;
    // the racers with every backend in the list
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(RACERS)).unwrap();
    let compare = text
        .lines()
        .find(|l| l.starts_with("compare = "))
        .expect("a compare list");
    let listed = format!("compare = {backends:?}");
    let dir = tmp("branching");
    let racers = dir.join("racers.toml");
    std::fs::write(&racers, text.replace(compare, &listed)).unwrap();
    let (stays, restarts) = (None, Some(1_000_000));
    let mut trees = Vec::new();
    for &backend in backends {
        trees.push((backend, 2, 2, 0, stays));
        // (advisory's trees with a kill hold millions of states)
        if backend != "advisory" {
            trees.push((backend, 2, 2, 1, stays));
            trees.push((backend, 2, 2, 1, restarts));
        }
    }
    trees.push(("local", 3, 2, 0, stays));
    let mut violations = 0;
    for (backend, processes, requests, kills, restart) in trees {
        let mut o = Options {
            processes: Some(processes),
            requests: Some(requests),
            schedules: Some(1_000_000),
            ..Options::default()
        };
        o.bounds.kills = kills;
        o.bounds.restart_after = restart;
        let branched = explore::from_file(&racers, Some(backend), None, &o, &mut |_| {})
            .unwrap()
            .0;
        o.replay = true;
        let replayed = explore::from_file(&racers, Some(backend), None, &o, &mut |_| {})
            .unwrap()
            .0;
        let case = format!("{backend} {processes} x {requests}, {kills} kill(s), restart {restart:?}");
        assert!(branched.stopped.is_none(), "{case}: {}", branched.verdict());
        assert_eq!(branched.verdict(), replayed.verdict(), "{case}");
        assert_eq!(
            (branched.schedules, branched.states, branched.pruned),
            (replayed.schedules, replayed.states, replayed.pruned),
            "{case}"
        );
        assert_eq!(
            branched.counterexample.as_ref().map(|c| &c.choices),
            replayed.counterexample.as_ref().map(|c| &c.choices),
            "{case}"
        );
        violations += usize::from(branched.counterexample.is_some());
    }
    // (the defective designs' trees hold violations: the comparison covers finding one)
    assert!(violations >= 2, "{violations} trees with a violation");
}

/// Issue 50 item 3: symmetry reduction is on where the backend declares it and says so; it
/// judges the same tree (the same verdict) with fewer states, `--no-symmetry` turns it off, and
/// a backend whose sides keep process ids (`row`'s open transaction) is searched as before.
#[test]
fn symmetry_reduction_says_where_it_is_on_and_keeps_the_verdict() {
    let args = [
        "explore",
        RACERS,
        "--processes",
        "3",
        "--requests",
        "2",
        "--threads",
        "1",
    ];
    let run = |more: &[&str]| {
        let all: Vec<&str> = args.iter().chain(more).copied().collect();
        let (code, out, err) = pacesim(&all);
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let states = |out: &str| -> u64 {
        let line = out.lines().find(|l| l.starts_with("| distinct states |")).expect(out);
        line.split('|').nth(2).unwrap().trim().parse().unwrap()
    };
    let on = run(&["--backend", "redis_gcra"]);
    assert!(
        on.contains("| symmetry reduction | 3 interchangeable processes |"),
        "{on}"
    );
    assert!(
        on.contains("distinct states up to symmetry, 3 interchangeable processes"),
        "{on}"
    );
    let off = run(&["--backend", "redis_gcra", "--no-symmetry"]);
    assert!(off.contains("| symmetry reduction | off: --no-symmetry |"), "{off}");
    assert!(
        off.contains("no violation in all 4266 schedules (35874 distinct states,"),
        "{off}"
    );
    assert!(states(&on) * 5 < states(&off), "{on}{off}");
    let row = run(&["--backend", "row"]);
    assert!(
        row.contains("| symmetry reduction | off: the backend's sides do not declare SYMMETRIC |"),
        "{row}"
    );
}
