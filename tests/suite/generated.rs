//! Generated whole scenarios (proptest): every correct backend passes every applicable checker;
//! every defective variant is found failing. The first failing case of a property is printed
//! at once, unshrunk, as a ready-to-run TOML file (written under `target/proptest-failures/`;
//! `pacesim run that.toml` reproduces it exactly), straight to stderr past the test harness's
//! capture, so a CI log shows it while shrinking runs. Shrinking is bounded (about a minute,
//! [`SHRINK_MS`]; `PROPTEST_MAX_SHRINK_TIME` in ms overrides it), then the shrunk case is
//! printed the same way as the test's failure. Regressions persist in
//! `proptest-regressions/` (committed). The depth is 48 cases per property, 480 for
//! `correct_backends_pass_everything` (cheap, and its false alarms need many cases to show);
//! `PROPTEST_CASES` sets every property's depth.

use pacesim::dist::Dist;
use pacesim::fault::{FaultSpec, KillPoint, OutageMode};
use pacesim::registry::simulate;
use pacesim::scenario::Scenario;
use pacesim::summary::Summary;
use pacesim::time::Nanos;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};
use std::cell::Cell;
use std::io::Write as _;

/// How long a failing property may shrink, in milliseconds: the shrunk case is printed within
/// about this long of the first failure (proptest checks between cases; a case takes well under
/// a second).
const SHRINK_MS: u32 = 60_000;
/// At most this many shrinking steps, whatever the time.
const SHRINK_ITERS: u32 = 2_000;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

fn config() -> ProptestConfig {
    config_times(1)
}

/// `factor` times the default depth, for cheap properties whose false alarms need many cases to
/// show (every correct-backend false alarm fixed so far needed thousands). `PROPTEST_CASES`, when
/// set, overrides it (proptest applies the variable over any configuration).
fn config_times(factor: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases().saturating_mul(factor),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/generated.txt",
        ))),
        // A fixed seed keeps CI deterministic; set PROPTEST_RNG_SEED (or run `just deep`) to
        // explore further.
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20261129),
        ),
        max_shrink_time: if std::env::var_os("PROPTEST_MAX_SHRINK_TIME").is_some() {
            ProptestConfig::default().max_shrink_time
        } else {
            SHRINK_MS
        },
        max_shrink_iters: if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_some() {
            ProptestConfig::default().max_shrink_iters
        } else {
            SHRINK_ITERS
        },
        ..ProptestConfig::default()
    }
}

thread_local! {
    /// Whether this property (each runs on its own test thread) has announced its first failure.
    static ANNOUNCED: Cell<bool> = const { Cell::new(false) };
}

/// The verdict of one case: on failure, announce the first failing case of this property at
/// once (unshrunk), then fail the case so proptest shrinks it.
fn verdict(pass: bool, what: &str, repro: &Repro) -> Result<(), TestCaseError> {
    if pass {
        return Ok(());
    }
    if let Some(dir) = repro.file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&repro.file, &repro.toml);
    let msg = &repro.msg;
    if !ANNOUNCED.with(|a| a.replace(true)) {
        let name = std::thread::current().name().unwrap_or("generated").to_string();
        // std::io::stderr() directly, not eprintln!: the harness captures the macros' output
        // until the test ends, which is after shrinking.
        let _ = writeln!(
            std::io::stderr(),
            "\n=== {name}: FIRST FAILING CASE (unshrunk; shrinking for at most {} s now): {what}{msg}=== end of the unshrunk case",
            SHRINK_MS / 1000
        );
    }
    Err(TestCaseError::fail(format!("{what}{msg}")))
}

fn ms(x: u64) -> Nanos {
    Nanos::from_millis(x)
}

fn latency() -> impl Strategy<Value = Dist> {
    prop_oneof![
        (0u64..1500).prop_map(|us| Dist::Constant {
            value: Nanos(us * 1000)
        }),
        (0u64..500, 0u64..1000).prop_map(|(a, b)| Dist::Uniform {
            low: Nanos(a * 1000),
            high: Nanos((a + b) * 1000)
        }),
        (1u64..600).prop_map(|us| Dist::Exponential { mean: Nanos(us * 1000) }),
        (100u64..900, 0.0f64..0.5).prop_map(|(us, s)| Dist::Lognormal {
            median: Nanos(us * 1000),
            sigma: s
        }),
    ]
}

/// A fault the correct backends must survive.
fn survivable_fault(n: u32) -> impl Strategy<Value = FaultSpec> {
    let point = prop_oneof![
        Just(None),
        Just(Some(KillPoint::MidReservation)),
        Just(Some(KillPoint::SleepingToSlot)),
        Just(Some(KillPoint::MidFetch)),
    ];
    prop_oneof![
        // A killed worker is replaced (a worker pool): a process lost for good is lost
        // capacity, not a pacer defect.
        (0..n, 500u64..4000, point, 100u64..2000).prop_map(|(p, at, point, r)| FaultSpec::Kill {
            at: Some(ms(at)),
            rate: None,
            process: Some(p),
            point,
            restart_after: Some(ms(r)),
        }),
        (
            500u64..3000,
            300u64..3000,
            prop_oneof![Just(OutageMode::Refuse), Just(OutageMode::Timeout)]
        )
            .prop_map(|(at, d, mode)| FaultSpec::StoreOutage {
                at: ms(at),
                duration: ms(d),
                mode
            }),
        (500u64..3000, 300u64..2000).prop_map(|(at, d)| FaultSpec::StoreLatency {
            at: ms(at),
            duration: ms(d),
            added: Dist::Constant { value: ms(2) }
        }),
    ]
}

fn base(backend: &str, n: u32, rate: f64, lat: Dist, service_us: u64, fetch: Dist) -> Scenario {
    let src = format!(
        "name = 'generated'\nduration = '6s'\n[pacer]\nbackend = '{backend}'\nrate = {rate}\n[processes]\ncount = {n}\n"
    );
    let mut sc = pacesim::registry::parse("generated", &src).expect("valid base");
    sc.store.latency = lat.clone();
    sc.store.service = Dist::Constant {
        value: Nanos(service_us * 1000),
    };
    sc.destination.latency = lat;
    sc.fetch.duration = fetch;
    sc
}

fn scenario_strategy(backends: &'static [&'static str]) -> impl Strategy<Value = Scenario> {
    (
        prop::sample::select(backends),
        1u32..64,
        1.0f64..40.0,
        latency(),
        0u64..60,
        prop_oneof![
            Just(Dist::Constant { value: Nanos::ZERO }),
            (1u64..80).prop_map(|m| Dist::Lognormal {
                median: ms(m),
                sigma: 0.4
            })
        ],
        any::<u64>(),
    )
        .prop_flat_map(|(b, n, rate, lat, svc, fetch, seed)| {
            let sc = base(b, n, (rate * 10.0).round() / 10.0, lat, svc, fetch);
            (
                Just(sc),
                // At most one kill per scenario: two kills within one interval lose two slots,
                // which the self_heal checker's one-interval allowance does not count yet.
                prop::collection::vec(survivable_fault(n), 0..3),
                Just(seed % 1000),
            )
        })
        .prop_map(|(mut sc, faults, seed)| {
            sc.seed = seed;
            let outages = faults
                .iter()
                .filter(|f| matches!(f, FaultSpec::StoreOutage { .. }))
                .count() as u64;
            if outages > 0 {
                // The divided fallback keeps the rate while everyone is in it, but the switch back is
                // a transient: the first process back finds the row's pace stale and is granted
                // "now" at the full rate while the others still hold one fallback slot each. For
                // about one divided interval the fleet can run at up to twice the rate: two rounds
                // of cap + 1 slots (the figure a design review should know;
                // sims/outage-divided.toml shows it). The shared pace never pays that excess back
                // (under full demand it then runs at exactly the rate), so each outage adds its
                // own two rounds.
                sc.checks.burst = outages * 2 * (sc.processes.count.saturating_sub(1) as u64 + 1) + 1;
            }
            sc.faults = faults;
            sc
        })
}

/// What the fleet would fetch per second unpaced: each process loops over one store round trip,
/// one destination round trip and the fetch (the scenarios here have no think time).
fn offered_load(sc: &Scenario) -> f64 {
    let cycle = 2.0 * sc.store.latency.mean() + 2.0 * sc.destination.latency.mean() + sc.fetch.duration.mean();
    f64::from(sc.processes.count) / (cycle / 1e9).max(1e-9)
}

/// A case's reproducer: the scenario as TOML, the file it goes to when the case fails, and the
/// failure's explanation.
struct Repro {
    file: std::path::PathBuf,
    toml: String,
    msg: String,
}

/// Run, and prepare the explanation of a failure with a reproducible file.
fn run_explained(sc: &Scenario) -> (Summary, Repro) {
    let s = simulate(sc, None, None).expect("simulate");
    let toml = toml::to_string(sc).expect("scenarios serialise");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/proptest-failures");
    let file = dir.join(format!("{}-{}.toml", sc.pacer.backend, s.trace_hash));
    let failed: Vec<String> = s
        .checks
        .iter()
        .filter(|c| c.1.failed())
        .map(|c| format!("{}: {}", c.0, c.1.detail))
        .collect();
    let msg = format!(
        "\n{}\n--- reproduce: pacesim run {}\n--- scenario:\n{toml}",
        failed.join("\n"),
        file.display()
    );
    (s, Repro { file, toml, msg })
}

proptest! {
    #![proptest_config(config_times(10))]

    /// Correct backends pass every applicable checker, with kills, outages and store latency.
    #[test]
    fn correct_backends_pass_everything(sc in scenario_strategy(&["row", "shared_cache", "redis_gcra"])) {
        let (s, repro) = run_explained(&sc);
        verdict(s.all_pass(), "a correct backend failed a check", &repro)?;
    }
}

proptest! {
    #![proptest_config(config())]

    /// Per-process pacing at the full rate is caught whenever two or more processes have
    /// more demand than the rate.
    #[test]
    fn local_is_caught(sc in scenario_strategy(&["local"]).prop_filter("needs N >= 2", |s| s.processes.count >= 2)) {
        let mut sc = sc;
        sc.faults.clear();
        sc.checks.burst = 2;
        sc.fetch.duration = Dist::Constant { value: Nanos::ZERO };
        sc.processes.requests = Some(6);
        let (s, repro) = run_explained(&sc);
        verdict(s.checks["ceiling"].failed(), "local escaped the ceiling check", &repro)?;
    }

    /// Per-process monotonic clocks with different epochs are caught: always by some check
    /// (when the fleet asks for less than the rate, only the slot spacing shows it:
    /// backoff_coherence), and by the ceiling once the fleet asks for twice the rate.
    #[test]
    fn process_clock_is_caught(sc in scenario_strategy(&["row"]).prop_filter("needs N >= 2", |s| s.processes.count >= 2)) {
        let mut sc = sc;
        sc.faults = vec![FaultSpec::Clock { processes: vec![], epoch_spread: Some(Nanos(3_600_000_000_000)), drift_ppm: 0.0, step: None, step_at: None, wall_offset: None }];
        sc.pacer.set("clock", "'process_monotonic'");
        sc.pacer.set("stale_after", "'10s'"); // the reset that turns starvation into N x rate
        sc.checks.burst = 2;
        let (s, repro) = run_explained(&sc);
        verdict(!s.all_pass(), "process clocks escaped every check", &repro)?;
        if offered_load(&sc) >= 2.0 * sc.pacer.rate {
            verdict(s.checks["ceiling"].failed(), "process clocks escaped the ceiling check at twice the rate's demand", &repro)?;
        }
    }

    /// A reservation inside a 300 ms transaction is caught once demand exceeds what the held
    /// lock lets through: by liveness (throughput ~ 1 / hold), or, when the queue behind the
    /// lock outlasts the client timeout, by the ceiling (every timed-out process falls back
    /// at once).
    #[test]
    fn in_transaction_is_caught(sc in scenario_strategy(&["row"]).prop_filter("demand above 1/hold", |s| s.processes.count >= 4 && s.pacer.rate >= 8.0)) {
        let mut sc = sc;
        sc.faults.clear();
        sc.checks.burst = 2;
        sc.pacer.set("in_transaction", "{ hold = { dist = 'constant', value = '300ms' } }");
        let (s, repro) = run_explained(&sc);
        verdict(s.checks["liveness"].failed() || s.checks["ceiling"].failed(), "in-transaction serialisation escaped", &repro)?;
    }

    /// Per-process backoff state is caught by backoff coherence when 429s happen.
    #[test]
    fn per_process_backoff_is_caught(sc in scenario_strategy(&["row"]).prop_filter("a fleet", |s| s.processes.count >= 3 && s.pacer.rate >= 4.0)) {
        let mut sc = sc;
        sc.faults.clear();
        sc.checks.burst = 2;
        sc.duration = Nanos(20_000_000_000);
        sc.destination.limit = Some(sc.pacer.rate * 0.6);
        sc.pacer.set("backoff", "'per_process'");
        let (s, repro) = run_explained(&sc);
        verdict(s.checks["backoff_coherence"].failed(), "per-process backoff escaped coherence", &repro)?;
    }
}
