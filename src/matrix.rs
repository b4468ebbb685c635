//! `pacesim matrix`: the defect matrix. Every backend and variant (each `sims/*.toml` scenario
//! run with each backend of its `compare` list) against every property checker; rows are
//! `scenario/backend`, columns are properties, cells are `pass`, `FAIL` with a one-line witness,
//! or `-` when the property does not apply to that run.
//!
//! With `--cases N` each run is repeated with the scenario's seed, seed + 1, ..., seed + N - 1; a
//! cell fails if any seed fails (its witness names the seed).
//!
//! `sims/expected-matrix.toml` states, from the design records' reasoning, which properties
//! each run must break; every property it does not list must pass (or not apply):
//!
//! ```toml
//! [four-limiters]
//! row = { fail = [], why = "one row, one strictly increasing sequence of slots" }
//! # `apply`: properties that must report (a kill that never fires must not pass vacuously)
//! local = { fail = ["ceiling", "slot_ceiling"], why = "N pacers at the full rate: N x rate" }
//! ```
//!
//! [`compare`] lists every difference between a matrix and its expectation; `tests/matrix.rs`
//! asserts there is none, and `pacesim matrix` exits 1 when there is one.

use crate::scenario::Scenario;
use crate::summary;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The properties, in column order (every checker verdict name).
pub const PROPERTIES: &[&str] = &[
    "ceiling",
    "slot_ceiling",
    "backoff_coherence",
    "self_heal",
    "degradation",
    "liveness",
    "mutual_exclusion",
    "fairness",
];

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
}

/// One row: a scenario run with one backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Scenario name.
    pub scenario: String,
    /// Backend.
    pub backend: String,
    /// Cells by property.
    pub cells: BTreeMap<String, Cell>,
}

impl Row {
    /// `scenario/backend`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.scenario, self.backend)
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

/// Run every scenario with every backend it compares, `cases` seeds each, in parallel;
/// deterministic (the rows and cells do not depend on scheduling).
pub fn run(scenarios: &[Scenario], cases: u64) -> Result<Matrix, String> {
    let cases = cases.max(1);
    let mut jobs = Vec::new();
    for sc in scenarios {
        for b in sc.compared_backends() {
            let v = sc.with_backend(&b)?;
            for i in 0..cases {
                let mut v = v.clone();
                v.seed = sc.seed.wrapping_add(i);
                jobs.push(v);
            }
        }
    }
    let results: Vec<Result<summary::Summary, String>> = jobs
        .par_iter()
        .map(|v| summary::simulate(v, None, None).map_err(|e| format!("{}: {e}", v.name)))
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    for (v, r) in jobs.iter().zip(results) {
        let s = r?;
        let row = match rows.last_mut() {
            Some(row) if row.scenario == v.name && row.backend == v.pacer.backend => row,
            _ => {
                rows.push(Row {
                    scenario: v.name.clone(),
                    backend: v.pacer.backend.clone(),
                    cells: PROPERTIES
                        .iter()
                        .map(|p| {
                            (
                                p.to_string(),
                                Cell {
                                    outcome: Outcome::NotApplicable,
                                    detail: String::new(),
                                    seed: v.seed,
                                },
                            )
                        })
                        .collect(),
                });
                rows.last_mut().expect("just pushed")
            }
        };
        for (name, c) in &s.checks {
            let cell = row.cells.entry(name.clone()).or_insert(Cell {
                outcome: Outcome::NotApplicable,
                detail: String::new(),
                seed: v.seed,
            });
            match (cell.outcome, c.pass) {
                (Outcome::NotApplicable, pass) => {
                    *cell = Cell {
                        outcome: if pass { Outcome::Pass } else { Outcome::Fail },
                        detail: c.detail.clone(),
                        seed: v.seed,
                    }
                }
                (Outcome::Pass, false) => {
                    *cell = Cell {
                        outcome: Outcome::Fail,
                        detail: c.detail.clone(),
                        seed: v.seed,
                    }
                }
                _ => {}
            }
        }
    }
    let mut columns: Vec<String> = PROPERTIES.iter().map(|p| p.to_string()).collect();
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

/// `sims/expected-matrix.toml`: scenario name -> backend -> expectation.
pub type Expected = BTreeMap<String, BTreeMap<String, Expectation>>;

/// Read and check an expected-matrix file.
pub fn load_expected(path: &Path) -> Result<Expected, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let e: Expected = toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    for (sc, rows) in &e {
        for (b, x) in rows {
            for p in x.fail.iter().chain(&x.apply) {
                if !PROPERTIES.contains(&p.as_str()) {
                    return Err(format!(
                        "{}: {sc}.{b}: unknown property `{p}` (known: {})",
                        path.display(),
                        PROPERTIES.join(", ")
                    ));
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
            if row.cells.get(p).is_none_or(|c| c.outcome == Outcome::NotApplicable) {
                out.push(format!(
                    "{}: {p} must apply (the scenario exists to exercise it) but did not report: did its fault fire?",
                    row.key()
                ));
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
        other => other,
    }
}

/// Print the matrix as a table, then the witness of every FAIL cell, one line each.
pub fn print(m: &Matrix) {
    let width = m.rows.iter().map(|r| r.key().len()).max().unwrap_or(8).max(8);
    let mut head = format!("{:<width$}", "scenario/backend");
    for c in &m.columns {
        head.push_str(&format!(" {:>8}", short(c)));
    }
    println!("{head}");
    for r in &m.rows {
        let mut line = format!("{:<width$}", r.key());
        for c in &m.columns {
            let s = match r.cells.get(c).map(|c| c.outcome) {
                Some(Outcome::Pass) => "pass",
                Some(Outcome::Fail) => "FAIL",
                _ => "-",
            };
            line.push_str(&format!(" {s:>8}"));
        }
        println!("{line}");
    }
    let fails: Vec<(&Row, &String, &Cell)> = m
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().map(move |(p, c)| (r, p, c)))
        .filter(|x| x.2.outcome == Outcome::Fail)
        .collect();
    if !fails.is_empty() {
        println!("\nwitnesses:");
        for (r, p, c) in fails {
            let mut d = c.detail.clone();
            if d.chars().count() > 220 {
                d = d.chars().take(217).collect::<String>() + "...";
            }
            println!("  {} {p} (seed {}): {d}", r.key(), c.seed);
        }
    }
}

/// `pacesim matrix`: run, print (table or JSON), compare with the expectation; the exit status.
pub fn main(files: Vec<std::path::PathBuf>, cases: u64, expected: Option<&Path>, json: bool) -> i32 {
    use crate::cli::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};
    let files = if files.is_empty() {
        crate::cli::default_scenarios()
    } else {
        files
    };
    if files.is_empty() {
        eprintln!("error: no scenario files (looked in sims/*.toml)");
        return EXIT_BAD_INPUT;
    }
    let mut scenarios = Vec::new();
    for f in &files {
        match Scenario::load(f) {
            Ok(s) => scenarios.push(s),
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    let default = Path::new("sims/expected-matrix.toml");
    let path = expected.or_else(|| default.exists().then_some(default));
    let exp = match path.map(load_expected).transpose() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let m = match run(&scenarios, cases) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let mismatches = exp.as_ref().map(|e| compare(&m, e)).unwrap_or_default();
    if json {
        let v = serde_json::json!({
            "columns": m.columns,
            "cases": m.cases,
            "rows": m.rows,
            "expected": path.map(|p| p.display().to_string()),
            "mismatches": mismatches,
        });
        println!("{v}");
    } else {
        print(&m);
        if let Some(p) = path {
            if mismatches.is_empty() {
                println!("\nmatches {}", p.display());
            } else {
                println!("\n{} difference(s) from {}:", mismatches.len(), p.display());
                for d in &mismatches {
                    println!("  {d}");
                }
            }
        }
    }
    if mismatches.is_empty() { EXIT_PASS } else { EXIT_FAIL }
}
