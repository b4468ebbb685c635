//! Results nobody here produced: the design records' figures and published rate-limiter
//! behaviour, each asserted against pacesim (issue 9). governor's GCRA as an oracle lives in
//! tests/suite/gcra_governor.rs; the live cost table in tests/suite/live.rs.

use pacesim::registry::simulate;
use pacesim::scenario::Scenario;
use pacesim::stats::mean_ci;
use pacesim::trace::{Collect, Event};
use std::path::Path;

fn load(name: &str) -> Scenario {
    pacesim::registry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

fn grants(sc: &Scenario) -> Vec<(u32, i64, i64)> {
    let mut c = Collect::default();
    pacesim::registry::run(sc, &mut c).expect("the run progresses");
    c.events
        .iter()
        .filter_map(|e| match *e {
            Event::Grant { pid, slot, now, .. } => Some((pid, slot, now)),
            _ => None,
        })
        .collect()
}

/// Record: "8 concurrent reservers each get a distinct, correctly-spaced slot".
#[test]
fn eight_concurrent_reservers_get_distinct_correctly_spaced_slots() {
    let sc = load("eight-reservers.toml");
    for b in ["row", "shared_cache"] {
        let g = grants(&pacesim::registry::with_backend(&sc, b).unwrap());
        assert_eq!(g.len(), 8);
        let mut pids: Vec<u32> = g.iter().map(|x| x.0).collect();
        pids.sort();
        pids.dedup();
        assert_eq!(pids.len(), 8, "{b}: one slot per reserver");
        for w in g.windows(2) {
            assert_eq!(
                w[1].1 - w[0].1,
                sc.interval().0 as i64,
                "{b}: slots exactly one interval apart"
            );
        }
    }
}

/// Record: four limiters x 10 at 50/s take at least 0.780 s globally; per process ~0.18 s
/// (~221/s measured there: 40 requests over 0.181 s).
#[test]
fn four_limiters_match_the_records_figures() {
    let sc = load("four-limiters.toml");
    let row = simulate(&pacesim::registry::with_backend(&sc, "row").unwrap(), None, None).unwrap();
    let local = simulate(&pacesim::registry::with_backend(&sc, "local").unwrap(), None, None).unwrap();
    assert!(row.last_start_s >= 0.780);
    assert!((local.last_start_s - 0.18).abs() < 0.002);
    // the record's 221/s is 40 / 0.181 s; ours is 39 / 0.18 s between first and last start
    let record_style = 40.0 / local.last_start_s;
    assert!(
        (record_style - 221.0).abs() < 2.0,
        "40 requests / {} s = {record_style}/s",
        local.last_start_s
    );
}

/// Queueing: a split bucket (N pacers at R/N) waits longer than one shared pace at R, at the
/// same offered load. Ten seeds, mean pacing wait with a 95% Student-t interval.
#[test]
fn splitting_the_bucket_costs_latency() {
    let sc = load("split-bucket.toml");
    let mean_wait = |backend: &str, seed: u64| {
        let mut v = pacesim::registry::with_backend(&sc, backend).unwrap();
        v.seed = seed;
        let g = grants(&v);
        g.iter().map(|x| (x.1 - x.2).max(0) as f64 / 1e6).sum::<f64>() / g.len() as f64
    };
    let seeds: Vec<u64> = (0..10).map(|i| sc.seed + i).collect();
    let shared: Vec<f64> = seeds.iter().map(|&s| mean_wait("row", s)).collect();
    let split: Vec<f64> = seeds.iter().map(|&s| mean_wait("local_divided", s)).collect();
    let a = mean_ci(&shared, 0.95).unwrap();
    let b = mean_ci(&split, 0.95).unwrap();
    eprintln!("mean pacing wait over 10 seeds: shared row {a:?} ms; split bucket {b:?} ms");
    assert!(
        a.hi.unwrap() < b.lo.unwrap(),
        "the split bucket's wait must be higher beyond doubt: {a:?} vs {b:?}"
    );
}

/// Start-up bunching: an idle pacer's first slot is "now" and starts late by the reply's
/// latency; slots conform with burst 1 while arrivals need 2.
#[test]
fn startup_bunching_slots_conform_arrivals_bunch() {
    let sc = load("startup-bunching.toml");
    let mut bunched = 0;
    for seed in 0..5 {
        let mut v = sc.clone();
        v.seed = sc.seed + seed;
        let s = simulate(&v, None, None).unwrap();
        assert_eq!(s.slot_burst_needed, 1, "slots are perfectly paced");
        assert!(s.checks["ceiling"].passed(), "a burst of 2 is within the tolerance");
        if s.burst_needed >= 2 {
            bunched += 1;
        }
    }
    assert!(bunched >= 3, "arrivals bunched in {bunched} of 5 seeds");
}
