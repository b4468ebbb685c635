//! `pacesim matrix`: the defect matrix. Every backend and variant (each `sims/*.toml` scenario
//! run with each backend of its `compare` list) against every property checker; rows are
//! `scenario/backend`, columns are properties, cells are `pass`, `FAIL` with a one-line witness,
//! or `-` when the property does not apply to that run.
//!
//! With `--cases N` each run is repeated with the scenario's seed, seed + 1, ..., seed + N - 1; a
//! cell fails if any seed fails (its witness names the seed).
//!
//! `tests/expected-matrix.toml` states, from the design records' reasoning, which properties
//! each run must break; every property it does not list must pass (or not apply):
//!
//! ```toml
//! [four-limiters]
//! row = { fail = [], why = "one row, one strictly increasing sequence of slots" }
//! # `apply`: properties that must report (a kill that never fires must not pass vacuously)
//! local = { fail = ["ceiling", "slot_ceiling"], why = "N pacers at the full rate: N x rate" }
//! ```
//!
//! [`compare`] lists every difference between a matrix and its expectation; `tests/suite/matrix.rs`
//! asserts there is none, and `pacesim matrix` exits 1 when there is one.
//!
//! A run that stops making progress (a livelock: [`crate::builder::NoProgress`]) does not stop the
//! matrix: its row records the failure ([`Row::failed`]), its cells keep what the seeds that
//! finished showed, and the row is a difference whatever the expectation (also without one), so
//! the matrix still ends with its verdict.

use crate::run::LoadError;
use crate::scenario::Scenario;
use crate::summary;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where `pacesim matrix` finds the expected matrix by default (relative to the working
/// directory): beside the tests that compare with it, not among the scenarios in `sims/`.
pub(crate) const DEFAULT_EXPECTED: &str = "tests/expected-matrix.toml";

/// The properties, in column order: every checker's verdict name, pacesim's then a team's
/// ([`crate::check::names`]).
pub fn properties() -> Vec<&'static str> {
    crate::check::names()
}

/// One cell's outcome.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The property held on every seed.
    Pass,
    /// The property failed on at least one seed.
    Fail,
    /// The checker did not report (the property does not apply to this run).
    NotApplicable,
    /// The checker reported that the run lacks what it needs, on every seed that reported
    /// and failed on none ([`crate::check::Status::NotJudged`]): it neither passed nor failed.
    NotJudged,
}

impl Outcome {
    /// Which outcome a cell keeps across seeds: the higher rank (a failure over not judged
    /// over a pass over not applicable); at equal rank, the first seed's.
    fn rank(self) -> u8 {
        match self {
            Outcome::NotApplicable => 0,
            Outcome::Pass => 1,
            Outcome::NotJudged => 2,
            Outcome::Fail => 3,
        }
    }
}

/// One cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Outcome.
    pub outcome: Outcome,
    /// The witness of the first failing seed, or the passing figure of the first seed.
    pub detail: String,
    /// The seed the detail comes from.
    pub seed: u64,
    /// For a FAIL, the command that reproduces it (`pacesim run FILE --seed N --backend B`),
    /// when the scenario's file is known ([`evaluate`] fills it in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
}

/// One row: a scenario run with one backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Scenario name.
    pub scenario: String,
    /// Backend.
    pub backend: String,
    /// The backend as reports name it: its name and the options in which this scenario's
    /// differ from its defaults (`row (clock=process_monotonic)`, [`crate::registry::label`]).
    pub label: String,
    /// Cells by property.
    pub cells: BTreeMap<String, Cell>,
    /// The first seed whose run did not finish (it stopped making progress), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<RunFailure>,
}

/// A run of a row that did not finish.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunFailure {
    /// Its seed.
    pub seed: u64,
    /// Why: `no progress at t = ...: ... events without time advancing; looping: ...`.
    pub message: String,
    /// The command that reproduces it, when the scenario's file is known ([`evaluate`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
}

impl Row {
    /// `scenario/label` (`process-clock/row (clock=process_monotonic, stale_after=10s)`): a
    /// variant is never shown by its base backend's name alone.
    pub fn key(&self) -> String {
        format!("{}/{}", self.scenario, self.label)
    }
    /// The properties that failed.
    pub fn failing(&self) -> BTreeSet<String> {
        self.cells
            .iter()
            .filter(|c| c.1.outcome == Outcome::Fail)
            .map(|c| c.0.clone())
            .collect()
    }
}

/// The whole matrix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Matrix {
    /// Property columns, in order.
    pub columns: Vec<String>,
    /// Rows, in scenario then `compare` order.
    pub rows: Vec<Row>,
    /// Seeds per run.
    pub cases: u64,
}

impl Matrix {
    /// The cells not judged, as `scenario/backend property`.
    pub fn not_judged(&self) -> Vec<String> {
        self.rows
            .iter()
            .flat_map(|r| {
                r.cells
                    .iter()
                    .filter(|(_, c)| c.outcome == Outcome::NotJudged)
                    .map(move |(p, _)| format!("{} {p}", r.key()))
            })
            .collect()
    }
}

/// Run every scenario with every backend it compares, `cases` seeds each, in parallel;
/// deterministic (the rows and cells do not depend on scheduling).
pub fn run(scenarios: &[Scenario], cases: u64) -> Result<Matrix, MatrixError> {
    let cases = cases.max(1);
    let mut jobs = Vec::new();
    for sc in scenarios {
        for b in sc.compared_backends() {
            let v = crate::registry::with_backend(sc, &b).map_err(MatrixError::Variant)?;
            for i in 0..cases {
                let mut v = v.clone();
                v.seed = crate::scenario::seed_plus(sc.seed, i)
                    .map_err(|e| MatrixError::Variant(format!("{}: --cases {cases}: {e}", sc.name)))?;
                jobs.push(v);
            }
        }
    }
    let results: Vec<Result<summary::Summary, summary::SimulateError>> = jobs
        .par_iter()
        .map(|v| crate::registry::simulate(v, None, None))
        .collect();
    from_runs(jobs.iter().zip(results), cases)
}

/// The matrix of runs already made, in row order: each scenario variant (backend and seed
/// applied) with its summary, or why its run gave none, `cases` seeds per row. A run that
/// stopped making progress marks its row ([`Row::failed`]); an I/O error fails the whole
/// matrix.
pub fn from_runs<'a>(
    runs: impl IntoIterator<Item = (&'a Scenario, Result<summary::Summary, summary::SimulateError>)>,
    cases: u64,
) -> Result<Matrix, MatrixError> {
    let mut rows: Vec<Row> = Vec::new();
    for (v, r) in runs {
        let r = match r {
            Ok(s) => Ok(s),
            Err(summary::SimulateError::NoProgress(e)) => Err(e),
            Err(summary::SimulateError::Io(source)) => {
                return Err(MatrixError::Io {
                    scenario: v.name.clone(),
                    source,
                });
            }
        };
        let row = match rows.last_mut() {
            Some(row) if row.scenario == v.name && row.backend == v.pacer.backend => row,
            _ => {
                rows.push(Row {
                    scenario: v.name.clone(),
                    backend: v.pacer.backend.clone(),
                    label: crate::registry::label(v, &v.pacer.backend),
                    cells: properties()
                        .iter()
                        .map(|p| {
                            (
                                p.to_string(),
                                Cell {
                                    outcome: Outcome::NotApplicable,
                                    detail: String::new(),
                                    seed: v.seed,
                                    reproduce: None,
                                },
                            )
                        })
                        .collect(),
                    failed: None,
                });
                rows.last_mut().expect("just pushed")
            }
        };
        let s = match r {
            Ok(s) => s,
            Err(e) => {
                if row.failed.is_none() {
                    row.failed = Some(RunFailure {
                        seed: v.seed,
                        message: e.to_string(),
                        reproduce: None,
                    });
                }
                continue;
            }
        };
        for (name, c) in &s.checks {
            let cell = row.cells.entry(name.clone()).or_insert(Cell {
                outcome: Outcome::NotApplicable,
                detail: String::new(),
                seed: v.seed,
                reproduce: None,
            });
            // a failing seed decides the cell; a seed not judged outranks a pass
            let outcome = match c.verdict {
                crate::check::Status::Pass => Outcome::Pass,
                crate::check::Status::Fail => Outcome::Fail,
                crate::check::Status::NotJudged => Outcome::NotJudged,
            };
            if outcome.rank() > cell.outcome.rank() {
                *cell = Cell {
                    outcome,
                    detail: c.detail.clone(),
                    seed: v.seed,
                    reproduce: None,
                };
            }
        }
    }
    let mut columns: Vec<String> = properties().iter().map(|p| p.to_string()).collect();
    for row in &rows {
        for k in row.cells.keys() {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    Ok(Matrix { columns, rows, cases })
}

/// One expected row: the properties a run must break, and why (from the design records).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Properties that must FAIL; every other must pass or not apply.
    pub fail: BTreeSet<String>,
    /// Properties that must apply (report a verdict): the ones the scenario exists to exercise,
    /// so a fault that never fires cannot pass vacuously.
    #[serde(default)]
    pub apply: BTreeSet<String>,
    /// The reasoning.
    #[serde(default)]
    pub why: String,
}

/// `tests/expected-matrix.toml`: scenario name -> backend -> expectation.
pub type Expected = BTreeMap<String, BTreeMap<String, Expectation>>;

/// Read and check an expected-matrix file.
pub fn load_expected(path: &Path) -> Result<Expected, MatrixError> {
    let text = std::fs::read_to_string(path).map_err(|source| MatrixError::ReadExpected {
        path: path.to_path_buf(),
        source,
    })?;
    let e: Expected = toml::from_str(&text).map_err(|e| MatrixError::ParseExpected {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })?;
    for (sc, rows) in &e {
        for (b, x) in rows {
            for p in x.fail.iter().chain(&x.apply) {
                if !properties().contains(&p.as_str()) {
                    return Err(MatrixError::UnknownProperty {
                        path: path.to_path_buf(),
                        scenario: sc.clone(),
                        backend: b.clone(),
                        property: p.clone(),
                    });
                }
            }
        }
    }
    Ok(e)
}

/// Every difference between a matrix and its expectation, one line each. Scenarios that were
/// not run are not reported missing (a subset of files may be run).
pub fn compare(m: &Matrix, e: &Expected) -> Vec<String> {
    let mut out = Vec::new();
    let ran: BTreeSet<&str> = m.rows.iter().map(|r| r.scenario.as_str()).collect();
    for row in &m.rows {
        if let Some(f) = &row.failed {
            out.push(failed_line(row, f));
            continue;
        }
        let Some(x) = e.get(&row.scenario).and_then(|s| s.get(&row.backend)) else {
            let f: Vec<String> = row.failing().into_iter().collect();
            out.push(format!(
                "{}: not in the expected matrix (it fails [{}]): add it, with the reasoning",
                row.key(),
                f.join(", ")
            ));
            continue;
        };
        for p in &x.apply {
            match row.cells.get(p) {
                None
                | Some(Cell {
                    outcome: Outcome::NotApplicable,
                    ..
                }) => out.push(format!(
                    "{}: {p} must apply (the scenario exists to exercise it) but did not report: did its fault fire?",
                    row.key()
                )),
                Some(c) if c.outcome == Outcome::NotJudged => out.push(format!(
                    "{}: {p} must apply (the scenario exists to exercise it) but was not judged (seed {}): {}",
                    row.key(),
                    c.seed,
                    c.detail
                )),
                _ => {}
            }
        }
        for (p, cell) in &row.cells {
            let must_fail = x.fail.contains(p);
            match (must_fail, cell.outcome) {
                (true, Outcome::Pass) => out.push(format!(
                    "{}: {p} must FAIL ({}) but passed (seed {}): {}",
                    row.key(),
                    x.why,
                    cell.seed,
                    cell.detail
                )),
                (true, Outcome::NotApplicable) => {
                    out.push(format!("{}: {p} must FAIL ({}) but did not apply", row.key(), x.why))
                }
                (true, Outcome::NotJudged) => out.push(format!(
                    "{}: {p} must FAIL ({}) but was not judged (seed {}): {}",
                    row.key(),
                    x.why,
                    cell.seed,
                    cell.detail
                )),
                (false, Outcome::Fail) => out.push(format!(
                    "{}: {p} must pass but FAILED (seed {}): {}",
                    row.key(),
                    cell.seed,
                    cell.detail
                )),
                _ => {}
            }
        }
    }
    for (sc, rows) in e {
        if !ran.contains(sc.as_str()) {
            continue;
        }
        for b in rows.keys() {
            if !m.rows.iter().any(|r| &r.scenario == sc && &r.backend == b) {
                out.push(format!(
                    "{sc}/{b}: expected but not run (not in the scenario's compare list)"
                ));
            }
        }
    }
    out
}

/// The difference a run that did not finish makes, one line.
fn failed_line(row: &Row, f: &RunFailure) -> String {
    format!("{}: the run did not finish (seed {}): {}", row.key(), f.seed, f.message)
}

/// The rows whose runs did not finish, one line each: differences from any expectation.
pub fn failures(m: &Matrix) -> Vec<String> {
    m.rows
        .iter()
        .filter_map(|r| r.failed.as_ref().map(|f| failed_line(r, f)))
        .collect()
}

fn short(p: &str) -> &str {
    match p {
        "ceiling" => "ceiling",
        "slot_ceiling" => "slots",
        "backoff_coherence" => "backoff",
        "self_heal" => "heal",
        "degradation" => "degrade",
        "liveness" => "live",
        "mutual_exclusion" => "mutex",
        "fairness" => "fair",
        "work_heal" => "work",
        other => other,
    }
}

/// The matrix as a table (`pass`, `FAIL`, `n/j` not judged, `-` not applicable), then the
/// witness of every FAIL cell, one line each.
pub fn table(m: &Matrix) -> String {
    let mut out = String::new();
    let width = m.rows.iter().map(|r| r.key().len()).max().unwrap_or(8).max(8);
    let mut head = format!("{:<width$}", "scenario/backend");
    for c in &m.columns {
        head.push_str(&format!(" {:>8}", short(c)));
    }
    let _ = writeln!(out, "{head}");
    for r in &m.rows {
        let mut line = format!("{:<width$}", r.key());
        for c in &m.columns {
            let s = match r.cells.get(c).map(|c| c.outcome) {
                _ if r.failed.is_some() => "ERROR",
                Some(Outcome::Pass) => "pass",
                Some(Outcome::Fail) => "FAIL",
                Some(Outcome::NotJudged) => "n/j",
                _ => "-",
            };
            line.push_str(&format!(" {s:>8}"));
        }
        let _ = writeln!(out, "{line}");
    }
    if !m.not_judged().is_empty() {
        let _ = writeln!(
            out,
            "(n/j: not judged, the run lacks what the check needs; -: does not apply)"
        );
    }
    let unfinished: Vec<(&Row, &RunFailure)> = m
        .rows
        .iter()
        .filter_map(|r| r.failed.as_ref().map(|f| (r, f)))
        .collect();
    if !unfinished.is_empty() {
        let _ = writeln!(out, "\nruns that did not finish (ERROR: no property was judged):");
        for (r, f) in unfinished {
            let _ = writeln!(out, "  {} (seed {}): {}", r.key(), f.seed, f.message);
            if let Some(cmd) = &f.reproduce {
                let _ = writeln!(out, "      reproduce: {cmd}");
            }
        }
    }
    let fails: Vec<(&Row, &String, &Cell)> = m
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().map(move |(p, c)| (r, p, c)))
        .filter(|x| x.2.outcome == Outcome::Fail)
        .collect();
    if !fails.is_empty() {
        let _ = writeln!(out, "\nwitnesses:");
        for (r, p, c) in fails {
            let mut d = c.detail.clone();
            if d.chars().count() > 220 {
                d = d.chars().take(217).collect::<String>() + "...";
            }
            let _ = writeln!(out, "  {} {p} (seed {}): {d}", r.key(), c.seed);
            if let Some(cmd) = &c.reproduce {
                let _ = writeln!(out, "      reproduce: {cmd}");
            }
        }
    }
    out
}

/// The matrix as JUnit test cases ([`crate::junit`]): one per row x property column; a FAIL
/// carries its witness and reproducer, a property that does not apply is skipped.
pub fn junit_cases(m: &Matrix) -> Vec<crate::junit::Case> {
    use crate::junit::{Case, CaseOutcome};
    let mut out = Vec::new();
    for r in &m.rows {
        for p in &m.columns {
            let outcome = match (r.cells.get(p), &r.failed) {
                // the run did not finish: no property of it was judged
                (_, Some(f)) => CaseOutcome::Fail {
                    witness: format!("seed {}: the run did not finish: {}", f.seed, f.message),
                    reproduce: f.reproduce.clone().unwrap_or_else(|| {
                        format!(
                            "pacesim run <{}.toml> --seed {} --backend {}",
                            r.scenario, f.seed, r.backend
                        )
                    }),
                },
                (Some(c), None) if c.outcome == Outcome::Pass => CaseOutcome::Pass,
                (Some(c), None) if c.outcome == Outcome::Fail => CaseOutcome::Fail {
                    witness: format!("seed {}: {}", c.seed, c.detail),
                    reproduce: c.reproduce.clone().unwrap_or_else(|| {
                        format!(
                            "pacesim run <{}.toml> --seed {} --backend {}",
                            r.scenario, c.seed, r.backend
                        )
                    }),
                },
                (Some(c), None) if c.outcome == Outcome::NotJudged => CaseOutcome::NotJudged {
                    needs: format!("seed {}: {}", c.seed, c.detail),
                },
                _ => CaseOutcome::Skipped,
            };
            out.push(Case {
                scenario: r.scenario.clone(),
                backend: r.backend.clone(),
                property: p.clone(),
                outcome,
            });
        }
    }
    out
}

/// Why the matrix could not be made or compared.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The scenario files did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The expected matrix could not be read.
    #[error("{path}: {source}")]
    ReadExpected {
        /// The expected-matrix file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The expected matrix is not valid TOML of the expected shape.
    #[error("{path}: {message}")]
    ParseExpected {
        /// The expected-matrix file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The expected matrix names a property no checker reports.
    #[error("{path}: {scenario}.{backend}: unknown property `{property}` (known: {known})", known = properties().join(", "))]
    UnknownProperty {
        /// The expected-matrix file.
        path: PathBuf,
        /// Scenario name (the table).
        scenario: String,
        /// Backend (the key).
        backend: String,
        /// The unknown property.
        property: String,
    },
    /// A scenario does not validate with one of the backends it compares (the message names
    /// the scenario and the field).
    #[error("{0}")]
    Variant(String),
    /// A run failed to stream its events.
    #[error("{scenario}: {source}")]
    Io {
        /// Scenario name.
        scenario: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// `pacesim matrix`: the matrix of some scenario files and how it compares with its
/// expectation.
#[derive(Debug)]
pub struct MatrixOutcome {
    /// The matrix.
    pub matrix: Matrix,
    /// The expected-matrix file it was compared with, if any.
    pub expected: Option<PathBuf>,
    /// Every difference from the expectation ([`compare`]); without one, only the runs that
    /// did not finish ([`failures`]).
    pub mismatches: Vec<String>,
}

impl MatrixOutcome {
    /// True when the matrix equals its expectation (or there is none) and every run finished.
    pub fn matches(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// The `--json` object: columns, cases, rows, the expected file and the mismatches.
    pub fn json(&self) -> serde_json::Value {
        let m = &self.matrix;
        serde_json::json!({
            "columns": m.columns,
            "cases": m.cases,
            "rows": m.rows,
            "expected": self.expected.as_ref().map(|p| p.display().to_string()),
            "mismatches": self.mismatches,
        })
    }
}

/// `pacesim matrix`: load `files` (default: every `sims/*.toml`) and `expected` (default:
/// `tests/expected-matrix.toml` when it exists), run the matrix with `cases` seeds per run,
/// and compare.
pub fn evaluate(files: Vec<PathBuf>, cases: u64, expected: Option<&Path>) -> Result<MatrixOutcome, MatrixError> {
    let files = if files.is_empty() {
        crate::run::default_scenarios()
    } else {
        files
    };
    let scenarios = crate::run::scenarios(files.clone())?;
    let default = Path::new(DEFAULT_EXPECTED);
    let path = expected.or_else(|| default.exists().then_some(default));
    let exp = path.map(load_expected).transpose()?;
    let mut matrix = run(&scenarios, cases)?;
    for row in &mut matrix.rows {
        let Some(file) = scenarios
            .iter()
            .zip(&files)
            .find(|x| x.0.name == row.scenario)
            .map(|x| x.1)
        else {
            continue;
        };
        for cell in row.cells.values_mut().filter(|c| c.outcome == Outcome::Fail) {
            cell.reproduce = Some(crate::run::reproduce(file, cell.seed, &row.backend));
        }
        if let Some(f) = &mut row.failed {
            f.reproduce = Some(crate::run::reproduce(file, f.seed, &row.backend));
        }
    }
    // a run that did not finish is a difference from any expectation, and without one
    let mismatches = match &exp {
        Some(e) => compare(&matrix, e),
        None => failures(&matrix),
    };
    Ok(MatrixOutcome {
        matrix,
        expected: path.map(Path::to_path_buf),
        mismatches,
    })
}
