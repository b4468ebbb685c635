//! `pacesim explore` (issue 33): a racy two-step backend, found on every exploration while
//! sampled runs pass most seeds; shrinking to a minimal case; replay by choice file;
//! determinism; shards that merge to the whole; correct backends that pass exhaustively.

use pacesim::explore::{self, Method, Options, Site};
use pacesim::scenario::Scenario;
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
    let sc = Scenario::parse("spread.toml", text).unwrap();
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
