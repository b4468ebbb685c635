//! `just bench`: pacesim's performance figures, as one table.
//!
//! - **engine**: the event queue alone, in the hold model (pop the earliest event, schedule
//!   one new one a random delay later), with as many events pending as R1-large and the
//!   100,000-process scale run keep: events per second, one event = one schedule + one pop;
//! - **R1-small / R1-large** (`sims/r1-*.toml`) end to end through
//!   [`pacesim::summary::simulate`]: simulator, trace hash, figures and checkers streaming, no
//!   trace file; simulated fetches per second of wall time and peak memory. The `no hash`
//!   rows skip only the trace hash ([`pacesim::summary::simulate_unhashed`]);
//! - **bare loop**: the hand-written reference loop of `bare.rs` on the same scenarios; the
//!   harness's cost is the ratio `harness fetches/s / bare fetches/s`;
//! - **property suite**: small random `row` scenarios (the shape `tests/suite/foundation.rs`
//!   generates) simulated and checked, scenarios per second;
//! - **explore** (`pacesim explore`): exhaustive `row` on `sims/explore-three-racers.toml` (3
//!   processes x 3 requests, three latency values), schedules per second and distinct states
//!   per second, with and without pruning; and the schedules and time to the first
//!   counterexample of two defective designs (the racy two-step row of
//!   `tests/suite/common/two_step.rs` and `local_divided` at burst 2, both with spread starts),
//!   sampled runs seed after seed vs random vs pct vs exhaustive, summed over ten searches.
//!
//! Each case runs in its own child process (peak memory is that case's `VmHWM`); timings are
//! the best of `REPS` repetitions inside it. `cargo bench --bench perf -- --quick` runs one
//! repetition of each; `-- --only large` only the cases whose name contains `large`.

mod bare;
#[path = "../common/mod.rs"]
mod common;
/// The event queue is internal to pacesim, so the engine case compiles its source here: the
/// same file, monomorphised for this payload as the simulator's is for its events (`Engine` is
/// generic, so either way the queue is compiled into the crate that uses it). Its one import,
/// `crate::time`, is pacesim's, below.
#[path = "../../src/engine/mod.rs"]
#[allow(dead_code, unused_imports)]
mod engine;
#[path = "../../tests/suite/common/two_step.rs"]
mod two_step;
use pacesim::time;

use common::{Timing, best_of, case_arg, mib, num, report, run_child, scenario, thousands};
use engine::Engine;
use pacesim::scenario::Scenario;
use pacesim::time::{Instant, Nanos};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};

const REPS: usize = 3;

fn reps() -> usize {
    if std::env::args().any(|a| a == "--quick") {
        1
    } else {
        REPS
    }
}

/// A child's result line: the work done and its best timings.
fn done(work: u64, t: Timing) {
    report(&[
        ("work", work.to_string()),
        ("wall", t.wall.to_string()),
        ("cpu", t.cpu.to_string()),
    ]);
}

/// The hold model: `pending` events in the queue, `ops` pops each followed by one schedule.
fn engine_case(pending: usize, ops: u64) {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let exp = Exp::new(1.0 / 1e6).expect("valid rate"); // mean 1 ms
    let delays: Vec<Nanos> = (0..1 << 16).map(|_| Nanos(exp.sample(&mut rng) as u64)).collect();
    // a payload the size of the simulator's own events
    type Payload = [u64; 8];
    let ((), t) = best_of(reps(), || {
        let mut e: Engine<Payload> = Engine::new();
        for i in 0..pending {
            e.at(Instant(rng.random_range(0..1_000_000)), [i as u64; 8]);
        }
        for i in 0..ops {
            let (_, ev) = e.pop_until(Instant(u64::MAX)).expect("never empty");
            e.after(delays[i as usize & 0xffff], std::hint::black_box(ev));
        }
        std::hint::black_box(e.pending());
    });
    done(ops, t);
}

fn harness_case(file: &str, hash: bool) {
    let sc = scenario(file);
    let (s, t) = best_of(reps(), || {
        if hash {
            pacesim::registry::simulate(&sc, None, None).expect("no trace file, no I/O")
        } else {
            pacesim::registry::simulate_unhashed(&sc)
        }
    });
    assert!(s.all_pass(), "{file}: a check failed: {:?}", s.checks);
    done(s.fetches, t);
}

/// The simulator alone, its events dropped: what the model costs before any consumer.
fn sim_only_case(file: &str) {
    struct Count(u64);
    impl pacesim::trace::Sink for Count {
        fn event(&mut self, ev: &pacesim::trace::Event) {
            self.0 += u64::from(matches!(ev, pacesim::trace::Event::FetchStart { .. }));
        }
    }
    let sc = scenario(file);
    let (n, t) = best_of(reps(), || {
        let mut c = Count(0);
        pacesim::registry::run(&sc, &mut c).expect("the run progresses");
        c.0
    });
    done(n, t);
}

fn bare_case(file: &str) {
    let r1 = bare::R1::from(&scenario(file));
    let (fetches, t) = best_of(reps(), || bare::run(&r1));
    done(fetches, t);
}

/// One small random `row` scenario, like the property tests generate.
fn random_scenario(rng: &mut rand_pcg::Pcg64Mcg) -> Scenario {
    let n = rng.random_range(1..64u32);
    let rate = rng.random_range(1.0..60.0f64);
    let requests = rng.random_range(1..6u64);
    let latency = match rng.random_range(0..4u32) {
        0 => format!("{{ dist='constant', value='{}us' }}", rng.random_range(0..2000u64)),
        1 => {
            let a = rng.random_range(0..500u64);
            format!(
                "{{ dist='uniform', low='{a}us', high='{}us' }}",
                a + rng.random_range(0..1500u64)
            )
        }
        2 => format!("{{ dist='exponential', mean='{}us' }}", rng.random_range(1..800u64)),
        _ => format!(
            "{{ dist='lognormal', median='{}us', sigma={} }}",
            rng.random_range(100..1000u64),
            rng.random_range(0.0..0.5f64)
        ),
    };
    let src = format!(
        "name='prop'\nduration='600s'\n[pacer]\nbackend='row'\nrate={rate}\n[processes]\ncount={n}\n\
         requests={requests}\n[store]\nlatency={latency}\nservice={{ dist='constant', value='20us' }}\n\
         [destination]\nlatency={latency}\n"
    );
    pacesim::registry::parse("prop", &src).expect("generated scenario is valid")
}

fn props_case(count: u64) {
    let (n, t) = best_of(reps(), || {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let mut passed = 0u64;
        for _ in 0..count {
            let sc = random_scenario(&mut rng);
            let s = pacesim::registry::simulate(&sc, None, None).expect("no I/O");
            passed += u64::from(s.checks["ceiling"].passed());
        }
        assert_eq!(passed, count, "the row pacer must pass every generated scenario");
        count
    });
    done(n, t);
}

fn child(case: &str) {
    match case {
        "engine-1k" => engine_case(1 << 10, 20_000_000),
        "engine-128k" => engine_case(1 << 17, 10_000_000),
        "r1-small" => harness_case("sims/r1-small.toml", true),
        "r1-small-nohash" => harness_case("sims/r1-small.toml", false),
        "bare-small" => bare_case("sims/r1-small.toml"),
        "r1-large" => harness_case("sims/r1-large.toml", true),
        "r1-large-nohash" => harness_case("sims/r1-large.toml", false),
        "bare-large" => bare_case("sims/r1-large.toml"),
        "sim-large" => sim_only_case("sims/r1-large.toml"),
        "props" => props_case(500),
        "explore-row" => explore_exhaustive(true),
        "explore-row-noprune" => explore_exhaustive(false),
        c if c.starts_with("first-") => first_counterexample(c),
        other => panic!("unknown bench case {other}"),
    }
}

/// Exhaustive `row` on the three racers: schedules (work) and, reported apart, distinct states.
fn explore_exhaustive(prune: bool) {
    use pacesim::explore::{Options, from_file};
    let o = Options {
        prune,
        ..Options::default()
    };
    let file = std::path::Path::new("sims/explore-three-racers.toml");
    let (r, t) = best_of(reps(), || {
        from_file(file, Some("row"), None, &o, &mut |_| {}).expect("explores").0
    });
    assert!(r.complete && r.counterexample.is_none(), "{}", r.verdict());
    report(&[
        ("work", r.schedules.to_string()),
        ("wall", t.wall.to_string()),
        ("cpu", t.cpu.to_string()),
        ("states", r.states.to_string()),
    ]);
}

/// `first-<design>-<method>`: ten searches (search seeds 0..10; exhaustive has none, so once)
/// for the first counterexample: schedules judged in all (work) and the time.
fn first_counterexample(case: &str) {
    use pacesim::explore::{Method, Options, Site, from_file};
    let mut parts = case.split('-').skip(1);
    let (design, method) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (backend, text) = match design {
        "racy" => {
            two_step::racy();
            ("racy_two_step", two_step::SPREAD.to_string())
        }
        _ => (
            "local_divided",
            two_step::SPREAD.replace("racy_two_step", "local_divided"),
        ),
    };
    let dir = std::env::temp_dir().join(format!("pacesim-bench-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("spread.toml");
    std::fs::write(&file, text).expect("written");
    if method == "seeds" {
        // ordinary sampled runs, seed after seed, until one breaks a property (ten searches,
        // from seeds 0, 1000, 2000, ...)
        let sc = pacesim::registry::load(&file).expect("loads");
        let (runs, t) = best_of(reps(), || {
            (0..10u64)
                .map(|search| {
                    (0..100_000u64)
                        .find(|k| {
                            let mut v = sc.clone();
                            v.seed = search * 1000 + k;
                            let s = pacesim::registry::simulate(&v, None, None).expect("runs");
                            s.checks.values().any(|c| c.failed())
                        })
                        .map_or(100_000, |k| k + 1)
                })
                .sum::<u64>()
        });
        let _ = std::fs::remove_dir_all(&dir);
        return report(&[
            ("work", runs.to_string()),
            ("wall", t.wall.to_string()),
            ("cpu", t.cpu.to_string()),
        ]);
    }
    let (method, searches) = match method {
        "random" => (Method::Random, 10),
        "pct" => (Method::Pct { depth: 2 }, 10),
        _ => (Method::Exhaustive, 1),
    };
    let (found, t) = best_of(reps(), || {
        (0..searches)
            .map(|seed| {
                let o = Options {
                    method,
                    seed,
                    vary: vec![Site::StoreLatency, Site::Start],
                    shrink: false,
                    schedules: Some(100_000),
                    ..Options::default()
                };
                let r = from_file(&file, Some(backend), None, &o, &mut |_| {})
                    .expect("explores")
                    .0;
                r.counterexample.map_or(r.schedules, |c| c.found_at)
            })
            .sum::<u64>()
    });
    let _ = std::fs::remove_dir_all(&dir);
    report(&[
        ("work", found.to_string()),
        ("wall", t.wall.to_string()),
        ("cpu", t.cpu.to_string()),
    ]);
}

fn main() {
    if let Some(case) = case_arg() {
        child(&case);
        return;
    }
    let smoke = common::under_cargo_test();
    if smoke {
        println!("(run by cargo test: R1-small once as a smoke test; `just bench` measures)");
    }
    let quick: Vec<&str> = if reps() == 1 || smoke { vec!["--quick"] } else { vec![] };
    let rows: &[(&str, &str, &str)] = &[
        ("engine-1k", "engine, 1,024 pending", "events"),
        ("engine-128k", "engine, 131,072 pending", "events"),
        ("r1-small", "R1-small harness", "fetches"),
        ("r1-small-nohash", "R1-small harness, no hash", "fetches"),
        ("bare-small", "R1-small bare loop", "fetches"),
        ("r1-large", "R1-large harness", "fetches"),
        ("r1-large-nohash", "R1-large harness, no hash", "fetches"),
        ("sim-large", "R1-large simulator only", "fetches"),
        ("bare-large", "R1-large bare loop", "fetches"),
        ("props", "property suite", "scenarios"),
        ("explore-row", "explore: row 3x3, exhaustive", "schedules"),
        ("explore-row-noprune", "explore: same, no pruning", "schedules"),
        ("first-racy-seeds", "first cex: racy, seeds x10", "runs"),
        ("first-racy-random", "first cex: racy, random x10", "schedules"),
        ("first-racy-pct", "first cex: racy, pct x10", "schedules"),
        ("first-racy-exhaustive", "first cex: racy, exhaustive", "schedules"),
        ("first-divided-seeds", "first cex: divided, seeds x10", "runs"),
        ("first-divided-random", "first cex: divided, random x10", "schedules"),
        ("first-divided-pct", "first cex: divided, pct x10", "schedules"),
        (
            "first-divided-exhaustive",
            "first cex: divided, exhaustive",
            "schedules",
        ),
    ];
    // `-- --only large` runs the cases whose name contains the text (a ratio needs its
    // harness, no-hash and bare rows)
    let args: Vec<String> = std::env::args().collect();
    let small = "small".to_string();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .or(smoke.then_some(&small));
    println!(
        "pacesim benchmarks: release build, each case in its own process, best of {}",
        reps()
    );
    println!(
        "{:<28} {:>22} {:>9} {:>9} {:>20} {:>12}",
        "case", "work", "wall", "cpu", "rate (wall)", "peak memory"
    );
    let mut states: Vec<(String, f64, f64)> = Vec::new();
    let mut wall_rate = std::collections::BTreeMap::new();
    let mut cpu_rate = std::collections::BTreeMap::new();
    for (case, label, unit) in rows {
        if only.is_some_and(|o| !case.contains(o.as_str())) {
            continue;
        }
        let m = run_child(case, &quick);
        let (work, wall, cpu) = (num(&m, "work"), num(&m, "wall"), num(&m, "cpu"));
        if m.contains_key("states") {
            states.push((label.to_string(), num(&m, "states"), wall));
        }
        wall_rate.insert(*case, work / wall);
        cpu_rate.insert(*case, work / cpu);
        println!(
            "{:<28} {:>22} {:>8.3}s {:>8.3}s {:>20} {:>12}",
            label,
            format!("{} {unit}", thousands(work)),
            wall,
            cpu,
            format!("{} {unit}/s", thousands(work / wall)),
            mib(num(&m, "peak_bytes"))
        );
    }
    println!();
    for (label, n, wall) in states.iter().filter(|s| s.1 > 0.0) {
        println!(
            "{label}: {} distinct states, {} states/s",
            thousands(*n),
            thousands(n / wall)
        );
    }
    for (size, h, nh, b) in [
        ("R1-small", "r1-small", "r1-small-nohash", "bare-small"),
        ("R1-large", "r1-large", "r1-large-nohash", "bare-large"),
    ] {
        if ![h, nh, b].iter().all(|c| wall_rate.contains_key(c)) {
            continue;
        }
        println!(
            "{size} against the in-repo bare loop (benches/perf/bare.rs), in process, same build: \
             bare / harness {:.2} by wall, {:.2} by CPU (no hash: {:.2} by wall, {:.2} by CPU)",
            wall_rate[h] / wall_rate[b],
            cpu_rate[h] / cpu_rate[b],
            wall_rate[nh] / wall_rate[b],
            cpu_rate[nh] / cpu_rate[b],
        );
    }
}
