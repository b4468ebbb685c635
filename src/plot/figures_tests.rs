//! The figures' data, from shipped scenarios run as `pacesim simulate` runs them (the SVG and
//! PNG files they draw are checked through the public API in `tests/suite/report.rs`).

use super::jobs::{JobsFigure, Kind};
use super::processes::ProcessFigure;
use super::rate::RateFigure;
use crate::run::compare::{self, Options};
use crate::scenario::Scenario;
use crate::timeline::Timeline;
use crate::trace::JobState;
use std::collections::BTreeMap;
use std::path::Path;

fn load(name: &str) -> Scenario {
    crate::registry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

fn runs_of(name: &str) -> compare::ScenarioRuns {
    compare::run_all(
        &[load(name)],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap()
    .remove(0)
}

fn figure_runs(sr: &compare::ScenarioRuns) -> Vec<(&str, &Timeline, f64)> {
    sr.base()
        .into_iter()
        .map(|r| (r.backend.as_str(), &r.timeline, r.row.summary.achieved_rate))
        .collect()
}

/// Arrivals per platform, counted from the trace itself: each arrival goes to the platform of
/// its process's last `platform` event.
fn arrivals_per_platform(sc: &Scenario) -> Vec<u64> {
    use crate::trace::{Collect, Event};
    let mut c = Collect::default();
    crate::registry::run(sc, &mut c).expect("the run progresses");
    let mut job: BTreeMap<u32, u32> = BTreeMap::new();
    let mut n = vec![0u64; sc.platforms.len()];
    for e in &c.events {
        match *e {
            Event::Platform { pid, platform, .. } => {
                job.insert(pid, platform);
            }
            Event::Arrival { pid, .. } => n[job[&pid] as usize] += 1,
            _ => {}
        }
    }
    n
}

/// A run with platforms draws each platform's arrivals against that platform's own limit:
/// patreon (serialised) at 2.5/s, deviantart (uncapped) at 10/s; never the fleet's
/// arrivals against `pacer.rate` (2/s), which no destination has.
#[test]
fn platform_figures_draw_each_platform_against_its_own_limit() {
    for (name, serialised) in [
        ("platforms.toml", [true, false]),
        ("platforms-unserialized.toml", [false, false]),
    ] {
        let sr = runs_of(name);
        let sc = &sr.scenario;
        let runs = figure_runs(&sr);
        let tl = runs[0].1;

        // the series the figure is built from: every arrival on exactly one platform, as the
        // trace places it
        let want = arrivals_per_platform(sc);
        assert_eq!(tl.platform_totals(), &want[..], "{name}");
        assert_eq!(tl.unplaced_arrivals(), 0, "{name}");
        let width = tl
            .platform_arrivals()
            .iter()
            .map(|g| g.width())
            .chain([tl.arrivals().width()])
            .max()
            .unwrap();
        let cells = |g: &crate::timeline::Grid<u32>| {
            let mut g = g.clone();
            g.coarsen_to(width);
            g.cells().to_vec()
        };
        let fleet = cells(tl.arrivals());
        let mut sum = vec![0u32; fleet.len()];
        for g in tl.platform_arrivals() {
            for (i, c) in cells(g).into_iter().enumerate() {
                sum[i] += c;
            }
        }
        assert_eq!(sum, fleet, "{name}: the platforms' bins add up to the fleet's");

        let fig = RateFigure::new(&sc.name, sc.seed, sc.pacer.rate, &runs);
        let got: Vec<(&str, f64, bool, u64)> = fig
            .platforms
            .iter()
            .map(|p| (p.name.as_str(), p.limit, p.serialized, p.lines[0].total))
            .collect();
        assert_eq!(
            got,
            vec![
                ("patreon", 2.5, serialised[0], want[0]),
                ("deviantart", 10.0, serialised[1], want[1])
            ],
            "{name}"
        );
        // patreon's own line: serialised, within its limit and the one early arrival its burst
        // of 2 allows in a window (2.5 + 1); unserialised, over twice its limit
        let peak = fig.platforms[0].lines[0].points.iter().map(|p| p.1).fold(0.0, f64::max);
        if serialised[0] {
            assert!(peak <= 3.5, "{name}: patreon's peak {peak}/s");
        } else {
            assert!(peak > 5.0, "{name}: patreon's peak {peak}/s");
        }

        let procs = ProcessFigure::new(&sc.name, sc.seed, sc.pacer.rate, &runs);
        let limits: Vec<(Option<usize>, f64)> = procs
            .panels
            .iter()
            .map(|p| (p.platform, procs.platforms[p.platform.unwrap()].limit))
            .collect();
        assert_eq!(limits, vec![(Some(0), 2.5), (Some(1), 10.0)], "{name}");
        let stacked: Vec<u64> = procs.panels.iter().map(|p| p.totals.iter().sum()).collect();
        assert_eq!(stacked, want, "{name}: each panel stacks its platform's arrivals");
    }
}

/// The jobs figure's data: under the old limits the source re-strands every run (each walk
/// cut by the soft limit at 900 s, the event left running until the sweep strands it at
/// 1800 s, never finalised); with the fix every run is finalised and nothing strands.
#[test]
fn the_jobs_figure_shows_the_strands_and_the_fix() {
    let sr = runs_of("stranded-old-limits.toml");
    let fig = JobsFigure::new(&sr.scenario.name, sr.scenario.seed, &figure_runs(&sr)).unwrap();
    let row = &fig.panels[0].rows[0];
    assert_eq!(row.source, 0);
    let stranded: Vec<_> = row.events.iter().filter(|e| e.stranded()).collect();
    assert_eq!(stranded.len(), 5, "{row:?}");
    assert_eq!(row.events.iter().filter(|e| e.finalised()).count(), 0);
    assert_eq!(row.longest_strand_streak(), 5);
    for e in &stranded {
        let kinds: Vec<Kind> = e.segments.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, vec![Kind::Stranded, Kind::LeftRunning], "{e:?}");
        let (walk, left) = (&e.segments[0], &e.segments[1]);
        let ran = walk.to - walk.from;
        assert!((898.0..=900.0).contains(&ran), "walk of {ran} s: {e:?}");
        assert_eq!(left.to - walk.from, 1800.0, "stranded 1800 s after it started: {e:?}");
        assert_eq!(e.closed.map(|c| c.0), Some(left.to));
    }

    for name in [
        "stranded-fixed.toml",
        "stranded-raise-only.toml",
        "stranded-catch-only.toml",
    ] {
        let sr = runs_of(name);
        let fig = JobsFigure::new(&sr.scenario.name, sr.scenario.seed, &figure_runs(&sr)).unwrap();
        let row = &fig.panels[0].rows[0];
        assert!(!row.events.iter().any(|e| e.stranded()), "{name}: {row:?}");
        assert_eq!(row.longest_strand_streak(), 0);
        assert!(
            !row.events
                .iter()
                .flat_map(|e| &e.segments)
                .any(|s| s.kind == Kind::LeftRunning)
        );
        let finalised = row.events.iter().filter(|e| e.finalised()).count();
        assert_eq!(finalised, row.events.len() - 1, "{name}: all but the last finalised");
        // the backfill runs down, then the source is in tick mode: complete
        assert_eq!(
            row.events.iter().rev().nth(1).and_then(|e| e.closed).map(|c| c.1),
            Some(JobState::Complete),
            "{name}"
        );
    }
}

/// The jobs figure refuses a run without job events.
#[test]
fn no_jobs_figure_without_job_events() {
    let sr = runs_of("four-limiters.toml");
    assert!(JobsFigure::new("four-limiters", 1, &figure_runs(&sr)).is_none());
}
