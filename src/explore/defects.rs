//! `pacesim explore-defects`: explore every defective cell of the expected matrix (each
//! scenario x backend whose expectation lists properties that must fail), and say for each
//! whether the explorer found a violation of one of those properties, after how many
//! schedules, within which bounds, and what the shrunk case is.
//!
//! Each cell is explored first within small bounds (at most 3 processes, at most
//! [`SMALL_REQUESTS`] requests each), then, if that finds nothing, with the scenario's own
//! processes and requests (a defect that needs a long run: a backoff schedule over seconds,
//! an outage window). Only the properties the matrix expects to fail count as violations.

use super::{ExploreError, Method, Options, Report};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most requests per process of the small bounds.
pub const SMALL_REQUESTS: u64 = 5;

/// One defective cell, explored.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    /// The scenario's name.
    pub scenario: String,
    /// The scenario file.
    pub file: PathBuf,
    /// The backend.
    pub backend: String,
    /// The properties the matrix expects to fail.
    pub expected: BTreeSet<String>,
    /// `small` (at most 3 processes x [`SMALL_REQUESTS`]) or `scenario` (its own counts):
    /// the bounds that found it (or were tried last).
    pub bounds: String,
    /// The exploration that found it (or the last one tried).
    pub report: Report,
}

impl Cell {
    /// Found a violation of an expected property.
    pub fn caught(&self) -> bool {
        self.report
            .counterexample
            .as_ref()
            .is_some_and(|c| self.expected.contains(&c.violation.check))
    }

    /// One line: what was found and the shrunk case.
    pub fn line(&self) -> String {
        match &self.report.counterexample {
            Some(c) => format!(
                "{} / {}: {} after {} schedules ({} bounds); shrunk to {} processes x {} requests, {} s, {} kills",
                self.scenario,
                self.backend,
                c.violation.check,
                c.found_at,
                self.bounds,
                c.shrunk.processes,
                c.shrunk.requests.map_or("open".into(), |r| r.to_string()),
                crate::time::short(c.shrunk.seconds),
                c.shrunk.kills
            ),
            None => format!(
                "{} / {}: NOT FOUND ({}), expected {:?}",
                self.scenario,
                self.backend,
                self.report.verdict(),
                self.expected
            ),
        }
    }
}

/// Explore every defective cell of `expected` among `files` (each a scenario file), with
/// `base`'s strategy, budget and bounds (its `checks`, `processes` and `requests` are set per
/// cell). `only`: scenario names to keep (empty: all).
pub fn explore_all(
    files: &[PathBuf],
    expected: &crate::matrix::Expected,
    base: &Options,
    only: &[String],
    progress: &mut dyn FnMut(&Cell),
) -> Result<Vec<Cell>, ExploreError> {
    let mut cells = Vec::new();
    for file in files {
        let sc = crate::run::load_scenario(file).map_err(|e| ExploreError::Scenario(e.to_string()))?;
        if !only.is_empty() && !only.contains(&sc.name) {
            continue;
        }
        let Some(row) = expected.get(&sc.name) else {
            continue;
        };
        for (backend, x) in row {
            if x.fail.is_empty() {
                continue;
            }
            let checks: Vec<String> = x.fail.iter().cloned().collect();
            let small = Options {
                processes: Some(sc.processes.count.min(3)),
                requests: sc.processes.requests.map(|r| r.min(SMALL_REQUESTS)),
                checks: checks.clone(),
                ..base.clone()
            };
            // (small bounds a scenario cannot take, a fault naming a process beyond them, are
            // skipped for its own)
            let mut report = match super::from_file(file, Some(backend), None, &small, &mut |_| {}) {
                Ok((r, _)) => Some(r),
                Err(ExploreError::Scenario(_)) => None,
                Err(e) => return Err(e),
            };
            let mut bounds = "small";
            if report.as_ref().is_none_or(|r| r.counterexample.is_none()) {
                let own = Options { checks, ..base.clone() };
                report = Some(super::from_file(file, Some(backend), None, &own, &mut |_| {})?.0);
                bounds = "scenario";
            }
            let report = report.expect("explored within one of the bounds");
            let cell = Cell {
                scenario: sc.name.clone(),
                file: file.clone(),
                backend: backend.clone(),
                expected: x.fail.clone(),
                bounds: bounds.to_string(),
                report,
            };
            progress(&cell);
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// The options `explore-defects` uses by default: random schedules over every distribution
/// of the scenario (the scenarios' own faults fire as written; no extra kills), 200 at most
/// per bound, shrinking within 300 runs.
pub fn default_options() -> Options {
    Options {
        method: Method::Random,
        vary: super::Site::ALL.to_vec(),
        schedules: Some(200),
        shrink_runs: 300,
        ..Options::default()
    }
}

/// The cells as a Markdown table.
pub fn table(cells: &[Cell]) -> String {
    let mut s = String::from(
        "| scenario | backend | expected to fail | found | after | bounds | shrunk to (processes x requests, duration, kills) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        let expected: Vec<&str> = c.expected.iter().map(String::as_str).collect();
        match &c.report.counterexample {
            Some(x) => s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} x {}, {} s, {} |\n",
                c.scenario,
                c.backend,
                expected.join(", "),
                x.violation.check,
                x.found_at,
                c.bounds,
                x.shrunk.processes,
                x.shrunk.requests.map_or("open".into(), |r| r.to_string()),
                crate::time::short(x.shrunk.seconds),
                x.shrunk.kills
            )),
            None => s.push_str(&format!(
                "| {} | {} | {} | **not found** | {} | {} | |\n",
                c.scenario,
                c.backend,
                expected.join(", "),
                c.report.schedules,
                c.bounds
            )),
        }
    }
    s
}

/// The scenario files of `dir` (`*.toml`), sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    crate::run::scenario_files_in(dir)
}
