//! Compared runs: what `pacesim simulate` runs, and what the report and the plots are made
//! from. Every scenario runs once per backend it compares (and per seed):
//!
//! 1. [`plan`] turns scenarios into runs `(scenario, backend, seed)`, validating each variant
//!    before anything runs.
//! 2. [`run_all`] simulates them in parallel (rayon), streaming each trace into the summary's
//!    figures and checkers plus a [`Timeline`] (the plots' bins); results come back in plan
//!    order, so output never depends on scheduling.
//! 3. Each run is a [`Row`] (the summary plus [`Derived`] figures) and its timeline, grouped
//!    per scenario as [`ScenarioRuns`]; [`SeedStats`] summarise the [`HEADLINES`] across seeds.
//!
//! [`crate::report`] writes these as tables, `summary.json` and `index.md`, and draws them
//! (`src/plot/`).

use crate::scenario::Scenario;
use crate::stats::{self, MeanCi};
use crate::summary::{self, Summary};
use crate::timeline::Timeline;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;
use std::io::IsTerminal;

/// One run's figures: the summary (exactly what `pacesim run --json` prints) plus the figures
/// the report derives from the same trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The run's summary.
    #[serde(flatten)]
    pub summary: Summary,
    /// Figures derived for the report.
    pub derived: Derived,
}

/// Figures the report adds to a summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Derived {
    /// `achieved_rate / rate`: the share of the ceiling delivered (above 1 is overshoot).
    pub(crate) utilisation: f64,
    /// `max_window.count / max_window.bound`: above 1, some 1 s window held more arrivals
    /// than a paced sequence can.
    pub(crate) max_window_overshoot: f64,
    /// The largest stall after a kill, seconds (see [`crate::timeline`]); `None` without kills.
    pub(crate) largest_stall_after_kill_s: Option<f64>,
}

impl Derived {
    /// Derive from a run's summary and timeline.
    pub fn of(s: &Summary, tl: &Timeline) -> Derived {
        Derived {
            utilisation: if s.rate > 0.0 { s.achieved_rate / s.rate } else { 0.0 },
            max_window_overshoot: if s.max_window.bound > 0 {
                s.max_window.count as f64 / s.max_window.bound as f64
            } else {
                0.0
            },
            largest_stall_after_kill_s: tl.largest_stall_after_kill().map(|n| n as f64 / 1e9),
        }
    }
}

/// One run: its row and its timeline.
#[derive(Debug)]
pub struct Run {
    /// Backend.
    pub backend: String,
    /// Seed.
    pub seed: u64,
    /// Figures.
    pub row: Row,
    /// Binned series (kept in full for the first seed only when plotting).
    pub timeline: Timeline,
}

/// Every run of one scenario, backend-major then seed.
#[derive(Debug)]
pub struct ScenarioRuns {
    /// The scenario as loaded.
    pub scenario: Scenario,
    /// Backends compared, in the scenario's order.
    pub backends: Vec<String>,
    /// Seeds run, the scenario's own first.
    pub seeds: Vec<u64>,
    /// Runs, `backends × seeds`, backend-major.
    pub runs: Vec<Run>,
}

impl ScenarioRuns {
    /// The first seed's run of each backend, in backend order (the table's rows).
    pub fn base(&self) -> Vec<&Run> {
        self.runs.iter().filter(|r| r.seed == self.seeds[0]).collect()
    }
    /// Every run of `backend`, in seed order.
    pub fn of(&self, backend: &str) -> Vec<&Run> {
        self.runs.iter().filter(|r| r.backend == backend).collect()
    }
    /// Statistics across seeds, one per backend.
    pub(crate) fn seed_stats(&self) -> Vec<SeedStats> {
        self.backends.iter().map(|b| SeedStats::of(b, &self.of(b))).collect()
    }
    /// True when any run had a kill.
    pub fn has_kills(&self) -> bool {
        self.runs.iter().any(|r| r.row.summary.crashes > 0)
    }
}

/// A headline figure's mean and 95% confidence interval across seeds, per backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeedStats {
    /// Backend.
    pub backend: String,
    /// Number of seeds.
    pub n: usize,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// Achieved rate, per second.
    pub achieved_rate: MeanCi,
    /// Max-window overshoot (`max_window.count / bound`).
    pub(crate) max_window_overshoot: MeanCi,
    /// Reservation round trip p99, milliseconds (runs without round trips are left out; `None`
    /// when no run had any).
    pub(crate) reservation_p99_ms: Option<MeanCi>,
    /// Burst the arrivals needed.
    pub burst_needed: MeanCi,
}

/// The headline figures [`SeedStats`] and the seed plot summarise, as `(key, label, unit)`.
pub const HEADLINES: [(&str, &str, &str); 4] = [
    ("achieved_rate", "achieved rate", "per second"),
    ("max_window_overshoot", "max 1 s window / bound", "ratio"),
    ("reservation_p99_ms", "reservation p99", "ms"),
    ("burst_needed", "burst needed", "requests"),
];

/// The value of headline `key` in a row; `None` for a p99 without round trips.
pub(crate) fn headline(row: &Row, key: &str) -> Option<f64> {
    let s = &row.summary;
    match key {
        "achieved_rate" => Some(s.achieved_rate),
        "max_window_overshoot" => Some(row.derived.max_window_overshoot),
        "reservation_p99_ms" => (s.reservation.count > 0).then_some(s.reservation.p99_ms),
        "burst_needed" => Some(s.burst_needed as f64),
        _ => None,
    }
}

impl SeedStats {
    /// Statistics over `runs` (one backend's, in seed order).
    pub fn of(backend: &str, runs: &[&Run]) -> SeedStats {
        let vals = |k: &str| -> Vec<f64> { runs.iter().filter_map(|r| headline(&r.row, k)).collect() };
        let ci = |k: &str| stats::mean_ci(&vals(k), stats::LEVEL);
        let empty = MeanCi {
            n: 0,
            mean: 0.0,
            std_dev: None,
            level: stats::LEVEL,
            half_width: None,
            lo: None,
            hi: None,
        };
        SeedStats {
            backend: backend.to_string(),
            n: runs.len(),
            seeds: runs.iter().map(|r| r.seed).collect(),
            achieved_rate: ci("achieved_rate").unwrap_or_else(|| empty.clone()),
            max_window_overshoot: ci("max_window_overshoot").unwrap_or_else(|| empty.clone()),
            reservation_p99_ms: ci("reservation_p99_ms"),
            burst_needed: ci("burst_needed").unwrap_or(empty),
        }
    }
}

/// Why compared runs could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A scenario does not validate with one of the backends it compares (the message names
    /// the scenario and the field).
    #[error("{0}")]
    Variant(String),
    /// The runs would need more memory than `--max-memory`.
    #[error(transparent)]
    Memory(#[from] super::budget::BudgetError),
    /// A run failed to stream its events.
    #[error("{scenario} / {backend}: {source}")]
    Io {
        /// Scenario name.
        scenario: String,
        /// Backend.
        backend: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A run stopped making progress (a livelock in the backend under test): which run, and
    /// when and what loops.
    #[error("{scenario} / {backend} (seed {seed}): {source}")]
    NoProgress {
        /// Scenario name.
        scenario: String,
        /// The scenario's position in the list run (the command line names its file).
        index: usize,
        /// Backend.
        backend: String,
        /// Seed.
        seed: u64,
        /// When, and what loops.
        source: crate::sim::NoProgress,
    },
}

impl CompareError {
    /// True when a run itself failed (it stopped making progress); false for input that
    /// cannot be used.
    pub fn is_failed_run(&self) -> bool {
        matches!(self, CompareError::NoProgress { .. })
    }
}

/// One planned run.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Index of its scenario.
    pub scenario: usize,
    /// Backend.
    pub backend: String,
    /// Seed.
    pub seed: u64,
    /// The variant to simulate (backend and seed applied, validated).
    pub variant: Scenario,
}

/// Every run, scenario-major, then backend, then seed (`seed, seed + 1, ...`, `seeds` of
/// them). Fails on the first variant that does not validate.
pub fn plan(scenarios: &[Scenario], seeds: u64) -> Result<Vec<Planned>, CompareError> {
    let mut v = Vec::new();
    for (i, sc) in scenarios.iter().enumerate() {
        let runs = (sc.compared_backends().len() as u64).saturating_mul(seeds.max(1));
        super::budget::check(sc, runs)?;
        for b in sc.compared_backends() {
            let variant = crate::registry::with_backend(sc, &b).map_err(CompareError::Variant)?;
            for k in 0..seeds.max(1) {
                let mut s = variant.clone();
                // (a scenario's seed range: the reproducer `run --seed` takes)
                s.seed = crate::scenario::seed_plus(sc.seed, k)
                    .map_err(|e| CompareError::Variant(format!("{}: --seeds {seeds}: {e}", sc.name)))?;
                v.push(Planned {
                    scenario: i,
                    backend: b.clone(),
                    seed: s.seed,
                    variant: s,
                });
            }
        }
    }
    Ok(v)
}

/// How to run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Seeds per scenario and backend (at least 1).
    pub seeds: u64,
    /// Keep the plots' series (for `--out`).
    pub series: bool,
    /// Show a progress bar (when stderr is a terminal and there are many runs).
    pub progress: bool,
}

/// Show a progress bar from this many runs on.
pub(crate) const PROGRESS_FROM_RUNS: usize = 8;

/// Simulate one planned run; `series` keeps the plots' series in its timeline.
pub(crate) fn run_one(p: &Planned, series: bool) -> Result<Run, summary::SimulateError> {
    let mut tl = Timeline::with_series(series);
    let summary = crate::registry::simulate(&p.variant, None, Some(&mut tl))?;
    let derived = Derived::of(&summary, &tl);
    Ok(Run {
        backend: p.backend.clone(),
        seed: p.seed,
        row: Row { summary, derived },
        timeline: tl,
    })
}

/// Plan and simulate every run in parallel, grouped by scenario in input order.
pub fn run_all(scenarios: &[Scenario], opts: Options) -> Result<Vec<ScenarioRuns>, CompareError> {
    let planned = plan(scenarios, opts.seeds)?;
    let pb = if opts.progress && planned.len() >= PROGRESS_FROM_RUNS && std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(planned.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{spinner} simulating [{bar:40}] {pos}/{len} runs, {elapsed} (eta {eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    let results: Vec<Result<Run, summary::SimulateError>> = planned
        .par_iter()
        .map(|p| {
            let first_seed = scenarios[p.scenario].seed == p.seed;
            let r = run_one(p, opts.series && first_seed);
            pb.inc(1);
            r
        })
        .collect();
    pb.finish_and_clear();
    let mut out: Vec<ScenarioRuns> = scenarios
        .iter()
        .map(|sc| ScenarioRuns {
            scenario: sc.clone(),
            backends: sc.compared_backends(),
            seeds: (0..opts.seeds.max(1)).map(|k| sc.seed.wrapping_add(k)).collect(),
            runs: Vec::new(),
        })
        .collect();
    for (p, r) in planned.iter().zip(results) {
        let scenario = scenarios[p.scenario].name.clone();
        let run = r.map_err(|e| match e {
            summary::SimulateError::Io(source) => CompareError::Io {
                scenario,
                backend: p.backend.clone(),
                source,
            },
            summary::SimulateError::NoProgress(source) => CompareError::NoProgress {
                scenario,
                index: p.scenario,
                backend: p.backend.clone(),
                seed: p.seed,
                source,
            },
        })?;
        out[p.scenario].runs.push(run);
    }
    Ok(out)
}
