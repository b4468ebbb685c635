//! `pacesim sweep` and `pacesim merge`: one scenario over a grid of parameter values times a
//! range of seeds, run in parallel, one row per run and a summary with confidence intervals
//! per grid point; shardable across machines and mergeable back into the same result.
//!
//! ```text
//! pacesim sweep sims/r1-small.toml --grid 'processes=4,16,64' --grid 'rate=7,50' --seeds 100
//! pacesim sweep FILE ... --shard 0/4 --out out/0     # on each of 4 machines: 0/4 .. 3/4
//! pacesim merge out/0 out/1 out/2 out/3 --out out/all
//! ```
//!
//! # The plan
//!
//! A `--grid KEY=V1,V2,...` axis sets one scenario field to each value in turn; several axes
//! form their cross product, the first axis varying slowest. `KEY` is a dotted path into the
//! scenario file (`store.service.value`, `checks.burst`, ...) or one of the short names in
//! [`ALIASES`] (`processes`, `rate`, `backend`, `requests`, `duration`, `burst`). A value is
//! read as TOML (`7`, `0.5`, `"row"`), or else taken as a string (`row`, `0.6ms`), and every
//! grid point is validated like a scenario file before anything runs. Each grid point runs
//! with `--seeds N` seeds: the scenario's own seed, seed + 1, ..., seed + N - 1.
//!
//! Runs are numbered in that order (`run = point * seeds + seed offset`). `--shard i/n` runs
//! exactly the runs whose number is `i` modulo `n`, so `n` machines that each run one shard
//! cover the sweep once, with nothing to coordinate but the command line.
//!
//! # The shard from a cluster scheduler
//!
//! Without `--shard`, the shard comes from the scheduler's environment ([`Shard::resolve`]):
//!
//! - a Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` is the index; the count is the Job's
//!   `completions`, which Kubernetes does not export: pass it as `--shards N` or
//!   `PACESIM_SHARDS=N`;
//! - a Slurm job array: index `SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN` (divided by
//!   `SLURM_ARRAY_TASK_STEP` when the array has a step), count `SLURM_ARRAY_TASK_COUNT` (or
//!   `--shards N`);
//! - a GitHub Actions matrix has no such variable: pass `--shard ${{ matrix.shard }}/N`.
//!
//! `--shard` always wins; neither `--shard` nor a scheduler variable means the whole sweep.
//!
//! # Outputs (in `--out`, default `reports/sweep/<scenario>`)
//!
//! - `runs.csv` and `runs.jsonl`: one row per run, by run number: grid values, seed, fetches,
//!   achieved rate, bursts needed, the largest 1 s window, reservation p99, `pass` (every
//!   check judged and passed: a run with a check not judged is not a pass), the failing
//!   checks, the checks not judged, and the trace hash;
//! - `summary.csv`: per grid point, the pass count, the count of runs with a check not
//!   judged, and for each figure the mean over seeds with its 95% Student-t confidence
//!   interval ([`crate::stats::mean_ci`]);
//! - `sweep.json`: the plan (file, axes, seeds, total runs, a hash of the scenario text) and
//!   which shard this is, so `merge` can refuse shards of different sweeps.
//!
//! Figures are recorded at six decimals, and summaries are computed from the recorded rows in
//! run order, so `merge` of all shards writes byte for byte what one unsharded sweep writes
//! (`tests/suite/sweep.rs` checks it).

use crate::scenario::{Scenario, ScenarioError};
use crate::stats::{LEVEL, mean_ci};
use crate::summary::{self, Summary};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The most runs one sweep plans (grid points x seeds): more is not a sweep that finishes.
pub const MAX_RUNS: u64 = 1_000_000;

/// Short grid keys and the scenario fields they set.
pub const ALIASES: &[(&str, &str)] = &[
    ("processes", "processes.count"),
    ("rate", "pacer.rate"),
    ("backend", "pacer.backend"),
    ("requests", "processes.requests"),
    ("duration", "duration"),
    ("burst", "checks.burst"),
];

/// One grid axis: a scenario field and the values it takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The key as the user wrote it (a column name in the outputs).
    pub key: String,
    /// The dotted scenario path it sets.
    pub path: String,
    /// The values, as written.
    pub values: Vec<String>,
}

impl Axis {
    /// Parse `KEY=V1,V2,...`.
    pub fn parse(spec: &str) -> Result<Axis, SweepError> {
        let (key, values) = spec
            .split_once('=')
            .ok_or_else(|| SweepError::Grid { spec: spec.into() })?;
        let key = key.trim();
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if key.is_empty() || values.iter().any(String::is_empty) {
            return Err(SweepError::GridEmpty { spec: spec.into() });
        }
        // the same value twice would run (and average) the same grid point twice: numbers
        // compare by value (`5` is `5.0`), anything else as written, quotes aside
        let same = |v: &str| match v.parse::<f64>() {
            Ok(x) => format!("{x:?}"),
            Err(_) => v.trim_matches(['"', '\'']).to_string(),
        };
        let mut seen = std::collections::HashMap::new();
        for v in &values {
            if let Some(first) = seen.insert(same(v), v) {
                return Err(SweepError::GridRepeated {
                    spec: spec.into(),
                    first: first.clone(),
                    again: v.clone(),
                });
            }
        }
        let path = ALIASES.iter().find(|a| a.0 == key).map_or(key, |a| a.1).to_string();
        if path == "seed" {
            return Err(SweepError::GridSeed);
        }
        Ok(Axis {
            key: key.to_string(),
            path,
            values,
        })
    }
}

/// `--shard i/n`: this process runs the runs numbered `i` modulo `n`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which slice, `0..count`.
    pub index: u64,
    /// How many slices.
    pub count: u64,
}

impl Shard {
    /// Parse `i/n` with `0 <= i < n`.
    pub fn parse(spec: &str) -> Result<Shard, SweepError> {
        let err = || SweepError::Shard { spec: spec.into() };
        let (i, n) = spec.split_once('/').ok_or_else(err)?;
        let (index, count): (u64, u64) = (
            i.trim().parse().map_err(|_| err())?,
            n.trim().parse().map_err(|_| err())?,
        );
        if count == 0 || index >= count {
            return Err(err());
        }
        Ok(Shard { index, count })
    }

    /// This process's shard: `--shard i/n` when given (`shards`, `--shards N`, must then agree
    /// with `n`), else from a cluster scheduler's environment (see the module docs), else
    /// `None` (the whole sweep). `env` reads an environment variable. Returns the shard and
    /// where it came from (`--shard`, `JOB_COMPLETION_INDEX`, `SLURM_ARRAY_TASK_ID`).
    pub fn resolve(
        shard: Option<&str>,
        shards: Option<u64>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<(Shard, &'static str)>, SweepError> {
        let var = |name: &'static str| -> Result<Option<u64>, SweepError> {
            match env(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| SweepError::ShardEnv {
                    message: format!("{name}={v}: not a whole number"),
                }),
            }
        };
        let shards = match (shards, var("PACESIM_SHARDS")?) {
            (Some(0), _) | (None, Some(0)) => {
                return Err(SweepError::ShardEnv {
                    message: "the shard count (--shards or PACESIM_SHARDS) must be at least 1".into(),
                });
            }
            (Some(n), _) | (None, Some(n)) => Some(n),
            (None, None) => None,
        };
        let check = |index: u64, count: u64, from: &'static str| {
            if index >= count {
                Err(SweepError::ShardEnv {
                    message: format!("{from}: shard index {index} is not below the shard count {count}"),
                })
            } else {
                Ok(Some((Shard { index, count }, from)))
            }
        };
        if let Some(spec) = shard {
            let s = Shard::parse(spec)?;
            if let Some(n) = shards.filter(|&n| n != s.count) {
                return Err(SweepError::ShardEnv {
                    message: format!("--shard {spec} and a shard count of {n} disagree"),
                });
            }
            return Ok(Some((s, "--shard")));
        }
        if let Some(index) = var("JOB_COMPLETION_INDEX")? {
            let Some(count) = shards else {
                return Err(SweepError::ShardEnv {
                    message: format!(
                        "JOB_COMPLETION_INDEX={index} (a Kubernetes Indexed Job) but no shard count: \
                         pass --shards N or set PACESIM_SHARDS=N (the Job's completions)"
                    ),
                });
            };
            return check(index, count, "JOB_COMPLETION_INDEX");
        }
        if let Some(id) = var("SLURM_ARRAY_TASK_ID")? {
            let min = var("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = var("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let count = match (shards, var("SLURM_ARRAY_TASK_COUNT")?) {
                (Some(n), _) | (None, Some(n)) => n,
                (None, None) => {
                    return Err(SweepError::ShardEnv {
                        message: format!("SLURM_ARRAY_TASK_ID={id} but no SLURM_ARRAY_TASK_COUNT: pass --shards N"),
                    });
                }
            };
            if id < min || (id - min) % step != 0 {
                return Err(SweepError::ShardEnv {
                    message: format!(
                        "SLURM_ARRAY_TASK_ID={id} is not in the array {min}, {min}+{step}, ...: \
                         use a contiguous array (--array=0-{})",
                        count.saturating_sub(1)
                    ),
                });
            }
            return check((id - min) / step, count, "SLURM_ARRAY_TASK_ID");
        }
        if let Some(n) = shards {
            return Err(SweepError::ShardEnv {
                message: format!(
                    "a shard count of {n} but no shard index: pass --shard i/{n}, or run under a \
                     Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a Slurm array (SLURM_ARRAY_TASK_ID)"
                ),
            });
        }
        Ok(None)
    }

    /// Does run number `run` belong to this shard?
    pub fn owns(&self, run: u64) -> bool {
        run % self.count == self.index
    }
}

/// What a sweep runs: written to `sweep.json` so shards can be checked against each other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The scenario file, as given.
    pub file: String,
    /// The scenario's name.
    pub scenario: String,
    /// FNV-1a 64 of the scenario file's text: shards of different files do not merge.
    pub source_hash: String,
    /// The grid axes, in order (the first varies slowest).
    pub axes: Vec<Axis>,
    /// Seeds per grid point.
    pub seeds: u64,
    /// The first seed (the scenario's own).
    pub first_seed: u64,
    /// Runs in the whole sweep: grid points x seeds.
    pub runs: u64,
    /// The slice these outputs hold; `None` for a whole sweep (or a merge of all shards).
    pub shard: Option<Shard>,
}

/// A sweep ready to run: the manifest and one validated scenario per grid point.
#[derive(Debug)]
pub struct Plan {
    /// What runs.
    pub manifest: Manifest,
    // invariant: one scenario per grid point, in run order; each already validated.
    points: Vec<(Vec<String>, Scenario)>,
}

impl Plan {
    /// Read `file` and build every grid point's scenario (validated, so a bad value fails
    /// here, before anything runs).
    pub fn new(file: &Path, axes: Vec<Axis>, seeds: u64) -> Result<Plan, SweepError> {
        let label = file.display().to_string();
        let text = crate::scenario::read_bounded(file)?;
        Plan::from_text(&label, &text, axes, seeds)
    }

    /// [`Plan::new`] on scenario text; `label` names it in errors and in the manifest.
    pub fn from_text(label: &str, text: &str, axes: Vec<Axis>, seeds: u64) -> Result<Plan, SweepError> {
        if seeds == 0 {
            return Err(SweepError::NoSeeds);
        }
        if let Some((i, a)) = axes
            .iter()
            .enumerate()
            .find_map(|(i, a)| axes[..i].iter().find(|b| b.path == a.path).map(|b| (i, b)))
        {
            return Err(SweepError::RepeatedAxis {
                first: a.key.clone(),
                again: axes[i].key.clone(),
                path: a.path.clone(),
            });
        }
        let base = crate::registry::parse(label, text)?;
        let doc: toml::Table = toml::from_str(text).map_err(|source| SweepError::Toml {
            label: label.into(),
            source,
        })?;
        let points_n = axes.iter().try_fold(1u64, |n, a| n.checked_mul(a.values.len() as u64));
        match points_n.and_then(|p| p.checked_mul(seeds)) {
            Some(r) if r <= MAX_RUNS => {}
            _ => {
                return Err(SweepError::TooManyRuns {
                    points: points_n.map_or_else(|| "too many".to_string(), |p| p.to_string()),
                    seeds,
                });
            }
        }
        // every seed a run takes is one `run --seed` takes (its reproducer's)
        if let Err(e) = crate::scenario::seed_plus(base.seed, seeds - 1) {
            return Err(ScenarioError::Invalid {
                file: label.into(),
                line: crate::scenario::line_of_field(text, "seed"),
                field: "seed".into(),
                message: format!("with --seeds {seeds}, {e}"),
            }
            .into());
        }
        let mut points = Vec::new();
        for values in cross_product(&axes) {
            let mut d = doc.clone();
            for (axis, v) in axes.iter().zip(&values) {
                set_path(&mut d, &axis.path, toml_value(v)).map_err(|table| SweepError::NotATable {
                    key: axis.key.clone(),
                    table,
                })?;
            }
            let point = axes
                .iter()
                .zip(&values)
                .map(|(a, v)| format!("{}={v}", a.key))
                .collect::<Vec<_>>()
                .join(" ");
            let src = toml::to_string(&d).map_err(|source| SweepError::Point {
                label: format!("{label} [{point}]"),
                source,
            })?;
            // an error names the line of the user's file (not of the regenerated text), or 0
            // when the field is only on the grid
            let sc = crate::registry::parse(&format!("{label} [{point}]"), &src).map_err(|e| match e {
                crate::scenario::ScenarioError::Invalid {
                    file, field, message, ..
                } => crate::scenario::ScenarioError::Invalid {
                    line: crate::scenario::line_of_field(text, &field),
                    file,
                    field,
                    message,
                },
                other => other,
            })?;
            crate::run::budget::check(&sc, seeds)?;
            points.push((values, sc));
        }
        let runs = points.len() as u64 * seeds;
        Ok(Plan {
            manifest: Manifest {
                file: label.to_string(),
                scenario: base.name.clone(),
                source_hash: format!("{:016x}", fnv1a(text.as_bytes())),
                axes,
                seeds,
                first_seed: base.seed,
                runs,
                shard: None,
            },
            points,
        })
    }

    /// The scenario of run number `run`, and its grid values.
    fn scenario(&self, run: u64) -> (&[String], Scenario) {
        let (values, sc) = &self.points[(run / self.manifest.seeds) as usize];
        let mut sc = sc.clone();
        sc.seed = self.manifest.first_seed.wrapping_add(run % self.manifest.seeds);
        (values, sc)
    }

    /// Run the runs `shard` owns (all of them for `None`) in parallel, with a progress bar on
    /// a terminal; returns their rows by run number.
    ///
    /// # Errors
    ///
    /// A run stopped making progress ([`SweepError::NoProgress`]: the first by run number).
    pub fn run(&self, shard: Option<Shard>) -> Result<Vec<Row>, SweepError> {
        let runs: Vec<u64> = (0..self.manifest.runs)
            .filter(|r| shard.is_none_or(|s| s.owns(*r)))
            .collect();
        let bar = if std::io::stderr().is_terminal() {
            ProgressBar::new(runs.len() as u64).with_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} runs  {elapsed} elapsed, eta {eta}")
                    .expect("valid progress template"),
            )
        } else {
            ProgressBar::hidden()
        };
        let rows: Result<Vec<Row>, SweepError> = runs
            .par_iter()
            .map(|&run| {
                let (values, sc) = self.scenario(run);
                let s = match crate::registry::simulate(&sc, None, None) {
                    Ok(s) => s,
                    Err(summary::SimulateError::NoProgress(source)) => {
                        let point: Vec<String> = self
                            .manifest
                            .axes
                            .iter()
                            .zip(values.iter())
                            .map(|(a, v)| format!("{}={v}", a.key))
                            .collect();
                        return Err(SweepError::NoProgress {
                            run,
                            point: point.join(" "),
                            seed: sc.seed,
                            source,
                        });
                    }
                    Err(summary::SimulateError::Io(e)) => unreachable!("no trace file, so no I/O error: {e}"),
                };
                bar.inc(1);
                Ok(Row::new(run, &self.manifest.axes, values, &s))
            })
            .collect();
        bar.finish_and_clear();
        rows
    }
}

/// Every combination of the axes' values, the first axis varying slowest.
fn cross_product(axes: &[Axis]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for a in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                a.values.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(v.clone());
                    p
                })
            })
            .collect();
    }
    out
}

/// A grid value as TOML (`7`, `0.5`, `true`, `"row"`), or else as a string (`row`, `0.6ms`).
fn toml_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Set the dotted `path` in a TOML document, creating tables on the way; on failure, the
/// prefix of `path` that is not a table.
fn set_path(doc: &mut toml::Table, path: &str, v: toml::Value) -> Result<(), String> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut t = doc;
    for (i, p) in parts.iter().enumerate() {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry.as_table_mut().ok_or_else(|| parts[..=i].join("."))?;
    }
    t.insert(last.to_string(), v);
    Ok(())
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// A figure recorded at six decimals: the value `merge` reads back from `runs.jsonl` exactly
/// (a decimal with at most 15 significant digits parses to the same `f64` it printed from).
fn six(x: f64) -> f64 {
    if x.is_finite() { (x * 1e6).round() / 1e6 } else { x }
}

/// One run's row in `runs.csv` / `runs.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Run number: `point * seeds + seed offset`.
    pub run: u64,
    /// Scenario name.
    pub scenario: String,
    /// Backend.
    pub backend: String,
    /// Grid values by axis key.
    pub grid: BTreeMap<String, String>,
    /// Seed.
    pub seed: u64,
    /// Fetches that reached the destination.
    pub fetches: u64,
    /// Fetches per second between the first and last fetch start.
    pub achieved_rate: f64,
    /// Smallest burst the destination arrivals conform to.
    pub burst_needed: u64,
    /// Smallest burst the granted slots conform to.
    pub slot_burst_needed: u64,
    /// Largest number of arrivals in any 1 s window.
    pub max_window: u64,
    /// Reservation round trip, 99th percentile, milliseconds.
    pub p99_ms: f64,
    /// Did every check pass? (False when one failed, and when one was not judged: missing
    /// evidence is not a pass.)
    pub pass: bool,
    /// The checks that failed, by name.
    pub failed: Vec<String>,
    /// The checks not judged (the run lacks what they need), by name.
    pub not_judged: Vec<String>,
    /// The run's trace hash (replays with `pacesim run FILE --seed SEED`).
    pub trace_hash: String,
}

impl Row {
    fn new(run: u64, axes: &[Axis], values: &[String], s: &Summary) -> Row {
        Row {
            run,
            scenario: s.scenario.clone(),
            backend: s.backend.clone(),
            grid: axes.iter().map(|a| a.key.clone()).zip(values.iter().cloned()).collect(),
            seed: s.seed,
            fetches: s.fetches,
            achieved_rate: six(s.achieved_rate),
            burst_needed: s.burst_needed,
            slot_burst_needed: s.slot_burst_needed,
            max_window: s.max_window.count,
            p99_ms: six(s.reservation.p99_ms),
            pass: s.all_pass() && s.all_judged(),
            failed: s.checks.iter().filter(|c| c.1.failed()).map(|c| c.0.clone()).collect(),
            not_judged: s.not_judged().into_iter().map(String::from).collect(),
            trace_hash: s.trace_hash.clone(),
        }
    }
}

/// A figure summarised per grid point: its column name and how to read it from a row.
type Figure = (&'static str, fn(&Row) -> f64);

/// The figures summarised per grid point, in column order.
const FIGURES: &[Figure] = &[
    ("achieved_rate", |r| r.achieved_rate),
    ("burst_needed", |r| r.burst_needed as f64),
    ("slot_burst_needed", |r| r.slot_burst_needed as f64),
    ("max_window", |r| r.max_window as f64),
    ("p99_ms", |r| r.p99_ms),
];

/// One CSV field, quoted when it needs to be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_line(fields: impl IntoIterator<Item = String>) -> String {
    let mut line = fields.into_iter().map(|f| csv_field(&f)).collect::<Vec<_>>().join(",");
    line.push('\n');
    line
}

/// `runs.csv`: a header, then one line per row.
pub fn runs_csv(m: &Manifest, rows: &[Row]) -> String {
    let mut head = vec!["run".to_string(), "scenario".into(), "backend".into()];
    head.extend(m.axes.iter().map(|a| a.key.clone()));
    head.extend(
        [
            "seed",
            "fetches",
            "achieved_rate",
            "burst_needed",
            "slot_burst_needed",
            "max_window",
            "p99_ms",
            "pass",
            "failed",
            "not_judged",
            "trace_hash",
        ]
        .map(String::from),
    );
    let mut out = csv_line(head);
    for r in rows {
        let mut f = vec![r.run.to_string(), r.scenario.clone(), r.backend.clone()];
        f.extend(m.axes.iter().map(|a| r.grid.get(&a.key).cloned().unwrap_or_default()));
        f.extend([
            r.seed.to_string(),
            r.fetches.to_string(),
            format!("{:.6}", r.achieved_rate),
            r.burst_needed.to_string(),
            r.slot_burst_needed.to_string(),
            r.max_window.to_string(),
            format!("{:.6}", r.p99_ms),
            r.pass.to_string(),
            r.failed.join(";"),
            r.not_judged.join(";"),
            r.trace_hash.clone(),
        ]);
        out.push_str(&csv_line(f));
    }
    out
}

/// `runs.jsonl`: one JSON object per row.
pub fn runs_jsonl(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| serde_json::to_string(r).expect("rows serialise") + "\n")
        .collect()
}

/// One grid point's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSummary {
    /// The grid values, in axis order.
    pub values: Vec<String>,
    /// Runs (seeds) at this point.
    pub runs: usize,
    /// Runs where every check passed (judged, and none failed).
    pub passed: usize,
    /// Runs with a check not judged.
    pub not_judged: usize,
    /// Per figure (achieved rate, burst, slot burst, largest 1 s window, p99 ms): the mean
    /// and the 95% half-width (`None` for one run).
    pub figures: Vec<(f64, Option<f64>)>,
}

/// Summarise rows (sorted by run number) per grid point, in grid order.
pub fn summarise(m: &Manifest, rows: &[Row]) -> Vec<PointSummary> {
    let mut out: Vec<PointSummary> = Vec::new();
    for point in rows.chunk_by(|a, b| a.run / m.seeds == b.run / m.seeds) {
        let figures = FIGURES
            .iter()
            .map(|(_, f)| {
                let xs: Vec<f64> = point.iter().map(f).collect();
                let ci = mean_ci(&xs, LEVEL).expect("a grid point has at least one run");
                (ci.mean, ci.half_width)
            })
            .collect();
        out.push(PointSummary {
            values: m
                .axes
                .iter()
                .map(|a| point[0].grid.get(&a.key).cloned().unwrap_or_default())
                .collect(),
            runs: point.len(),
            passed: point.iter().filter(|r| r.pass).count(),
            not_judged: point.iter().filter(|r| !r.not_judged.is_empty()).count(),
            figures,
        });
    }
    out
}

/// `summary.csv`: per grid point, runs, passes, runs with a check not judged, and each
/// figure's mean and 95% half-width.
pub fn summary_csv(m: &Manifest, points: &[PointSummary]) -> String {
    let mut head: Vec<String> = m.axes.iter().map(|a| a.key.clone()).collect();
    head.extend(["runs".to_string(), "passed".into(), "not_judged".into()]);
    for (name, _) in FIGURES {
        head.push(format!("{name}_mean"));
        head.push(format!("{name}_ci95"));
    }
    let mut out = csv_line(head);
    for p in points {
        let mut f = p.values.clone();
        f.extend([p.runs.to_string(), p.passed.to_string(), p.not_judged.to_string()]);
        for (mean, half) in &p.figures {
            f.push(format!("{mean:.6}"));
            f.push(half.map(|h| format!("{h:.6}")).unwrap_or_default());
        }
        out.push_str(&csv_line(f));
    }
    out
}

/// The files [`write`] writes into a sweep's output directory.
pub const WRITES: [&str; 4] = ["sweep.json", "runs.csv", "runs.jsonl", "summary.csv"];

/// Refuse to write into `dir` when that would overwrite one of `inputs` (the same file by
/// identity, through links too): the directory itself given as a shard, or one of the files
/// [`write`] writes. The command line checks the paths it is given (`--out`); this checks the
/// default directory, known only once the scenario is read.
fn refuse_overwrite(dir: &Path, inputs: &[&Path]) -> Result<(), SweepError> {
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    for input in inputs {
        let written = std::iter::once(dir.to_path_buf()).chain(WRITES.iter().map(|n| dir.join(n)));
        if let Some(output) = written.into_iter().find(|w| same(w, input)) {
            return Err(SweepError::Overwrite {
                output,
                input: input.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Write a sweep's (or a merge's) outputs into `dir`.
pub fn write(dir: &Path, m: &Manifest, rows: &[Row]) -> Result<(), SweepError> {
    let io = |source| SweepError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let files = [
        (
            "sweep.json",
            serde_json::to_string_pretty(m).expect("manifest serialises") + "\n",
        ),
        ("runs.csv", runs_csv(m, rows)),
        ("runs.jsonl", runs_jsonl(rows)),
        ("summary.csv", summary_csv(m, &summarise(m, rows))),
    ];
    debug_assert!(files.iter().map(|f| f.0).eq(WRITES));
    for (name, text) in files {
        std::fs::write(dir.join(name), text).map_err(io)?;
    }
    Ok(())
}

/// Read one shard's outputs: `path` is its directory or its `runs.jsonl`.
pub fn read_shard(path: &Path) -> Result<(Manifest, Vec<Row>), SweepError> {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    let mpath = dir.join("sweep.json");
    let text = std::fs::read_to_string(&mpath).map_err(|source| SweepError::Io {
        path: mpath.clone(),
        source,
    })?;
    let m: Manifest = serde_json::from_str(&text).map_err(|source| SweepError::Manifest {
        path: mpath.clone(),
        source,
    })?;
    let rpath = dir.join("runs.jsonl");
    let text = std::fs::read_to_string(&rpath).map_err(|source| SweepError::Io {
        path: rpath.clone(),
        source,
    })?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let r: Row = serde_json::from_str(line).map_err(|source| SweepError::Row {
            path: rpath.clone(),
            line: i + 1,
            source,
        })?;
        rows.push(r);
    }
    Ok((m, rows))
}

/// Combine shards into the whole sweep: they must share one plan and cover every run exactly
/// once. Returns the whole sweep's manifest and rows, by run number.
pub fn merge(shards: Vec<(Manifest, Vec<Row>)>) -> Result<(Manifest, Vec<Row>), SweepError> {
    // shards of one split: the same count, each index once (a 2-way and a 3-way split of one
    // sweep overlap, and so does a shard given twice)
    let mut seen: Vec<Shard> = Vec::new();
    for sh in shards.iter().filter_map(|(m, _)| m.shard) {
        if let Some(&first) = seen.iter().find(|f| f.count != sh.count) {
            return Err(SweepError::MixedShards { first, other: sh });
        }
        if seen.contains(&sh) {
            return Err(SweepError::ShardTwice { shard: sh });
        }
        seen.push(sh);
    }
    let mut it = shards.into_iter();
    let (first, mut rows) = it.next().ok_or(SweepError::NoInputs)?;
    let plan = Manifest { shard: None, ..first };
    for (m, r) in it {
        // a sweep is its content (the scenario text's hash, axes, seeds), not how its file
        // path was spelled (`a.toml`, `./a.toml`, an absolute path)
        let original = m.file.clone();
        let m = Manifest {
            shard: None,
            file: plan.file.clone(),
            ..m
        };
        if m != plan {
            return Err(SweepError::DifferentSweeps {
                first: Box::new(plan),
                other: Box::new(Manifest { file: original, ..m }),
            });
        }
        rows.extend(r);
    }
    rows.sort_by_key(|r| r.run);
    if let Some(w) = rows.windows(2).find(|w| w[0].run == w[1].run) {
        return Err(SweepError::Twice { run: w[0].run });
    }
    if rows.len() as u64 != plan.runs || rows.last().is_some_and(|r| r.run >= plan.runs) {
        let have: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.run).collect();
        let missing: Vec<u64> = (0..plan.runs).filter(|r| !have.contains(r)).take(5).collect();
        return Err(SweepError::Incomplete {
            present: rows.len() as u64,
            runs: plan.runs,
            missing,
        });
    }
    Ok((plan, rows))
}

/// The summary as a table.
pub fn summary_table(m: &Manifest, points: &[PointSummary]) -> String {
    let mut out = String::new();
    let keys: Vec<&str> = m.axes.iter().map(|a| a.key.as_str()).collect();
    let _ = writeln!(
        out,
        "\n== sweep {} ({} runs: {} grid points x {} seeds; mean ± 95% CI)",
        m.scenario,
        m.runs,
        points.len(),
        m.seeds
    );
    let head: Vec<String> = keys.iter().map(|k| format!("{k:>10}")).collect();
    let _ = writeln!(
        out,
        "{} {:>7} {:>7} {:>22} {:>16} {:>16} {:>16}",
        head.join(" "),
        "pass",
        "n/j",
        "rate/s",
        "burst",
        "max1s",
        "p99 ms"
    );
    let ci = |(mean, half): (f64, Option<f64>), digits: usize| match half {
        Some(h) => format!("{mean:.digits$} ± {h:.digits$}"),
        None => format!("{mean:.digits$}"),
    };
    for p in points {
        let vals: Vec<String> = p.values.iter().map(|v| format!("{v:>10}")).collect();
        // (`pass`: runs with every check judged and passed; `n/j`: runs with a check not judged)
        let _ = writeln!(
            out,
            "{} {:>7} {:>7} {:>22} {:>16} {:>16} {:>16}",
            vals.join(" "),
            format!("{}/{}", p.passed, p.runs),
            p.not_judged,
            ci(p.figures[0], 3),
            ci(p.figures[1], 1),
            ci(p.figures[3], 1),
            ci(p.figures[4], 3)
        );
    }
    out
}

/// The default output directory of a sweep of `scenario`.
pub fn default_out(scenario: &str, shard: Option<Shard>) -> PathBuf {
    // the name is the user's text: one safe path component, never `..` or an absolute path
    let base = Path::new("reports").join("sweep").join(crate::report::slug(scenario));
    match shard {
        Some(s) => base.join(format!("shard-{}-of-{}", s.index, s.count)),
        None => base,
    }
}

/// What `pacesim sweep` or `pacesim merge` wrote.
#[derive(Debug)]
pub struct Swept {
    /// The plan, and which shard (if any) the rows are.
    pub manifest: Manifest,
    /// The rows, by run number.
    pub rows: Vec<Row>,
    /// The directory the outputs went to.
    pub dir: PathBuf,
    /// Where the shard came from (`--shard`, `JOB_COMPLETION_INDEX`, `SLURM_ARRAY_TASK_ID`),
    /// for a sharded sweep.
    pub shard_from: Option<&'static str>,
}

impl Swept {
    /// The checks not judged, one entry per run that has any, as `run N (backend, seed S):
    /// check, check` (for `--require-judged`).
    pub fn not_judged(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| !r.not_judged.is_empty())
            .map(|r| {
                format!(
                    "run {} ({}, seed {}): {}",
                    r.run,
                    r.backend,
                    r.seed,
                    r.not_judged.join(", ")
                )
            })
            .collect()
    }

    /// The summary per grid point, as a table ([`summary_table`]).
    pub fn table(&self) -> String {
        summary_table(&self.manifest, &summarise(&self.manifest, &self.rows))
    }
}

/// `pacesim sweep`: plan `file` over the `grid` axes (`KEY=V1,V2,...`) and `seeds`, run the
/// runs this process's shard owns ([`Shard::resolve`]: `shard` (`i/n`), else the scheduler's
/// environment with `shards` as the count), or all, and write the outputs into `out` (default
/// [`default_out`]).
pub fn sweep_file(
    file: &Path,
    grid: &[String],
    seeds: u64,
    out: Option<&Path>,
    shard: Option<&str>,
    shards: Option<u64>,
) -> Result<Swept, SweepError> {
    let axes = grid.iter().map(|g| Axis::parse(g)).collect::<Result<Vec<_>, _>>()?;
    let resolved = Shard::resolve(shard, shards, &|k| std::env::var(k).ok())?;
    let shard = resolved.map(|r| r.0);
    let plan = Plan::new(file, axes, seeds)?;
    let dir = out.map_or_else(|| default_out(&plan.manifest.scenario, shard), Path::to_path_buf);
    refuse_overwrite(&dir, &[file])?;
    let rows = plan.run(shard)?;
    let manifest = Manifest {
        shard,
        ..plan.manifest.clone()
    };
    write(&dir, &manifest, &rows)?;
    Ok(Swept {
        manifest,
        rows,
        dir,
        shard_from: resolved.map(|r| r.1),
    })
}

/// `pacesim merge`: read the shards' outputs (directories or their `runs.jsonl` files),
/// [`merge`] them, and write the whole sweep's outputs into `out` (default [`default_out`]).
pub fn merge_files(inputs: &[PathBuf], out: Option<&Path>) -> Result<Swept, SweepError> {
    let shards = inputs.iter().map(|p| read_shard(p)).collect::<Result<Vec<_>, _>>()?;
    let (manifest, rows) = merge(shards)?;
    let dir = out.map_or_else(|| default_out(&manifest.scenario, None), Path::to_path_buf);
    refuse_overwrite(&dir, &inputs.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    write(&dir, &manifest, &rows)?;
    Ok(Swept {
        manifest,
        rows,
        dir,
        shard_from: None,
    })
}

/// What tells two sweeps' plans apart, field by field (`seeds: 2 in a.toml, 3 in b.toml`).
fn differences(a: &Manifest, b: &Manifest) -> String {
    let axes = |m: &Manifest| {
        let v: Vec<String> = m
            .axes
            .iter()
            .map(|x| format!("{}={}", x.key, x.values.join(",")))
            .collect();
        if v.is_empty() {
            "(none)".to_string()
        } else {
            v.join(" ")
        }
    };
    let fields: [(&str, String, String); 6] = [
        ("scenario", a.scenario.clone(), b.scenario.clone()),
        ("scenario text (hash)", a.source_hash.clone(), b.source_hash.clone()),
        ("grid", axes(a), axes(b)),
        ("seeds", a.seeds.to_string(), b.seeds.to_string()),
        ("first seed", a.first_seed.to_string(), b.first_seed.to_string()),
        ("runs", a.runs.to_string(), b.runs.to_string()),
    ];
    let diff: Vec<String> = fields
        .iter()
        .filter(|f| f.1 != f.2)
        .map(|(k, x, y)| format!("{k} `{x}` (from {}) against `{y}` (from {})", a.file, b.file))
        .collect();
    diff.join("; ")
}

/// Why a sweep or a merge did not complete.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A run stopped making progress (a livelock in the backend under test).
    #[error("sweep run {run} [{point}] seed {seed}: {source}")]
    NoProgress {
        /// The run's number.
        run: u64,
        /// Its grid point, `key=value ...`.
        point: String,
        /// Its seed.
        seed: u64,
        /// When, and what loops.
        source: crate::sim::NoProgress,
    },
    /// A `--grid` axis is not `KEY=V1,V2,...`.
    #[error("--grid `{spec}`: expected KEY=V1,V2,...")]
    Grid {
        /// The axis as given.
        spec: String,
    },
    /// A `--grid` axis has an empty key or value.
    #[error("--grid `{spec}`: expected KEY=V1,V2,... with no empty part")]
    GridEmpty {
        /// The axis as given.
        spec: String,
    },
    /// A `--grid` axis names the seed.
    #[error("--grid: vary the seed with --seeds, not a grid axis")]
    GridSeed,
    /// A `--grid` axis gives the same value twice (`rate=5,5`, `rate=5,5.0`).
    #[error("--grid `{spec}`: `{first}` and `{again}` are the same value (give each value once)")]
    GridRepeated {
        /// The axis as given.
        spec: String,
        /// The first spelling of the value.
        first: String,
        /// Its repetition.
        again: String,
    },
    /// A grid path runs through a value that is not a table.
    #[error("--grid {key}: `{table}` is not a table")]
    NotATable {
        /// The axis key.
        key: String,
        /// The dotted prefix of its path that is not a table.
        table: String,
    },
    /// The output directory (the default one: `--out` is checked on the command line) would
    /// overwrite an input.
    #[error(
        "{}: that is the input {} (the same file): writing it would overwrite the input; give --out another directory",
        output.display(),
        input.display()
    )]
    Overwrite {
        /// The path that would be written.
        output: PathBuf,
        /// The input it is.
        input: PathBuf,
    },
    /// `--shard` is not `i/n` with `0 <= i < n`.
    #[error("--shard `{spec}`: expected i/n with 0 <= i < n, e.g. 0/4")]
    Shard {
        /// The shard as given.
        spec: String,
    },
    /// The shard from the scheduler's environment (or `--shards`) is missing or inconsistent.
    #[error("sweep shard: {message}")]
    ShardEnv {
        /// What is wrong, naming the variable.
        message: String,
    },
    /// `--seeds 0`.
    #[error("--seeds must be at least 1")]
    NoSeeds,
    /// A grid point would need more memory than `--max-memory`.
    #[error(transparent)]
    Memory(#[from] crate::run::budget::BudgetError),
    /// Two `--grid` axes set the same scenario field.
    #[error("--grid {again}: sets `{path}`, which --grid {first} already sets (give each field one axis)")]
    RepeatedAxis {
        /// The first axis's key.
        first: String,
        /// The repeated axis's key.
        again: String,
        /// The scenario field both set.
        path: String,
    },
    /// Grid points x seeds is more than [`MAX_RUNS`].
    #[error("sweep: {points} grid points x {seeds} seeds is more than {MAX_RUNS} runs")]
    TooManyRuns {
        /// Grid points (as text: the product may itself overflow).
        points: String,
        /// `--seeds`.
        seeds: u64,
    },
    /// The scenario, or a grid point of it, is invalid (names file, line and field).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The scenario file is not TOML.
    #[error("{label}: {source}")]
    Toml {
        /// The scenario file.
        label: String,
        /// Where and what.
        source: toml::de::Error,
    },
    /// A grid point's scenario could not be written back as TOML.
    #[error("{label}: {source}")]
    Point {
        /// The scenario file and the grid point, `file [key=value ...]`.
        label: String,
        /// What went wrong.
        source: toml::ser::Error,
    },
    /// Reading or writing an output file or directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A shard's `sweep.json` does not parse.
    #[error("{path}: {source}")]
    Manifest {
        /// The `sweep.json` file.
        path: PathBuf,
        /// Where and what.
        source: serde_json::Error,
    },
    /// A line of a shard's `runs.jsonl` does not parse.
    #[error("{path}:{line}: {source}")]
    Row {
        /// The `runs.jsonl` file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        source: serde_json::Error,
    },
    /// `merge` was given nothing.
    #[error("merge: no inputs")]
    NoInputs,
    /// The shards come from different sweeps.
    #[error("merge: shards of different sweeps: {}", differences(first, other))]
    DifferentSweeps {
        /// The first shard's plan.
        first: Box<Manifest>,
        /// The plan of a shard that differs from it.
        other: Box<Manifest>,
    },
    /// Shards of splits into different counts (`0/2` and `1/3`).
    #[error(
        "merge: shard {}/{} and shard {}/{} split the sweep {} and {} ways: give the shards of one split",
        first.index, first.count, other.index, other.count, first.count, other.count
    )]
    MixedShards {
        /// A shard of the first split.
        first: Shard,
        /// A shard of another.
        other: Shard,
    },
    /// The same shard given twice.
    #[error("merge: shard {}/{} is given twice (its runs would count twice)", shard.index, shard.count)]
    ShardTwice {
        /// The shard.
        shard: Shard,
    },
    /// A run appears in two shards.
    #[error("merge: run {run} appears twice (a shard given twice?)")]
    Twice {
        /// The run number.
        run: u64,
    },
    /// Runs are missing.
    #[error("merge: {present} of {runs} runs present; missing runs include {missing:?} (a shard left out?)")]
    Incomplete {
        /// Runs present.
        present: u64,
        /// Runs in the whole sweep.
        runs: u64,
        /// The first few missing run numbers.
        missing: Vec<u64>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_and_shards_parse() {
        let a = Axis::parse("processes=4, 16,64").unwrap();
        assert_eq!((a.path.as_str(), a.values.len()), ("processes.count", 3));
        assert_eq!(
            Axis::parse("store.latency.median=0.6ms").unwrap().path,
            "store.latency.median"
        );
        assert!(Axis::parse("rate").is_err());
        assert!(Axis::parse("rate=7,,8").is_err());
        assert!(Axis::parse("seed=1,2").is_err());
        assert_eq!(Shard::parse("1/4").unwrap(), Shard { index: 1, count: 4 });
        for bad in ["4/4", "1/0", "x/2", "3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shard_comes_from_the_scheduler_when_not_given() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|v| v.0 == k).map(|v| v.1.to_string())
        };
        let r = |shard, shards, vars| Shard::resolve(shard, shards, &env(vars));
        let s = |index, count| Shard { index, count };
        assert_eq!(r(None, None, &[]).unwrap(), None);
        assert_eq!(r(Some("1/3"), None, &[]).unwrap(), Some((s(1, 3), "--shard")));
        // --shard wins over the environment
        let k8s: &[(&str, &str)] = &[("JOB_COMPLETION_INDEX", "2"), ("PACESIM_SHARDS", "4")];
        assert_eq!(r(Some("0/4"), None, k8s).unwrap(), Some((s(0, 4), "--shard")));
        assert_eq!(r(None, None, k8s).unwrap(), Some((s(2, 4), "JOB_COMPLETION_INDEX")));
        assert_eq!(
            r(None, Some(4), &[("JOB_COMPLETION_INDEX", "3")]).unwrap(),
            Some((s(3, 4), "JOB_COMPLETION_INDEX"))
        );
        let slurm: &[(&str, &str)] = &[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_MIN", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ];
        assert_eq!(r(None, None, slurm).unwrap(), Some((s(2, 4), "SLURM_ARRAY_TASK_ID")));
        let stepped: &[(&str, &str)] = &[
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ];
        assert_eq!(r(None, None, stepped).unwrap(), Some((s(2, 3), "SLURM_ARRAY_TASK_ID")));
        for (shard, shards, vars, says) in [
            (None, None, &[("JOB_COMPLETION_INDEX", "2")][..], "no shard count"),
            (None, Some(2), &[("JOB_COMPLETION_INDEX", "2")][..], "not below"),
            (
                None,
                None,
                &[("JOB_COMPLETION_INDEX", "x"), ("PACESIM_SHARDS", "2")][..],
                "not a whole number",
            ),
            (
                None,
                None,
                &[("SLURM_ARRAY_TASK_ID", "1")][..],
                "no SLURM_ARRAY_TASK_COUNT",
            ),
            (None, Some(3), &[][..], "no shard index"),
            (Some("0/2"), Some(3), &[][..], "disagree"),
            (None, Some(0), &[("JOB_COMPLETION_INDEX", "0")][..], "at least 1"),
        ] {
            let e = r(shard, shards, vars).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn grid_values_are_typed_and_validated() {
        assert_eq!(toml_value("7"), toml::Value::Integer(7));
        assert_eq!(toml_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(toml_value("row"), toml::Value::String("row".into()));
        assert_eq!(toml_value("0.6ms"), toml::Value::String("0.6ms".into()));
        let src = "name='t'\nduration='1s'\n[pacer]\nbackend='row'\nrate=10.0\n[processes]\ncount=2\nrequests=1\n";
        let axes = vec![
            Axis::parse("rate=7,50").unwrap(),
            Axis::parse("checks.burst=3").unwrap(),
        ];
        let p = Plan::from_text("t.toml", src, axes, 3).unwrap();
        assert_eq!(p.manifest.runs, 6);
        let (values, sc) = p.scenario(4);
        assert_eq!(
            (values[0].as_str(), sc.pacer.rate, sc.seed, sc.checks.burst),
            ("50", 50.0, 2, 3)
        );
        let e = Plan::from_text("t.toml", src, vec![Axis::parse("rate=0").unwrap()], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("[rate=0]") && e.contains("pacer.rate"), "{e}");
        // a table a path creates must still be a valid one
        let e = Plan::from_text("t.toml", src, vec![Axis::parse("store.latency.value=1ms").unwrap()], 1);
        assert!(e.unwrap_err().to_string().contains("missing field `dist`"));
    }

    #[test]
    fn six_decimals_round_trip_through_json() {
        for x in [
            6.999_999_063_118_225,
            9_999.960_001,
            0.1 + 0.2,
            1e-7,
            123_456_789.123_456_7,
        ] {
            let r = six(x);
            let back: f64 = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(back.to_bits(), r.to_bits(), "{x}");
        }
    }

    /// A sweep's scenario: three processes sharing 20/s, `row` against `local` (the suite's
    /// sweep tests use it too).
    const SWEEP_SCENARIO: &str = include_str!("../tests/suite/common/sweep-test.toml");

    #[test]
    fn shards_of_different_sweeps_do_not_merge_and_rows_replay() {
        let plan = |seeds| {
            Plan::from_text(
                "s.toml",
                SWEEP_SCENARIO,
                vec![
                    Axis::parse("rate=10,20").unwrap(),
                    Axis::parse("store.service.value=0.1ms").unwrap(),
                ],
                seeds,
            )
            .unwrap()
        };
        let a = plan(2);
        let s0 = Shard::parse("0/2").unwrap();
        let rows0 = a.run(Some(s0)).unwrap();
        let other = plan(3);
        let rows1 = other.run(Some(Shard::parse("1/2").unwrap())).unwrap();
        let e = merge(vec![
            (a.manifest.clone(), rows0.clone()),
            (other.manifest.clone(), rows1),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("different sweeps"), "{e}");
        let e = merge(vec![
            (a.manifest.clone(), rows0.clone()),
            (a.manifest.clone(), rows0.clone()),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("appears twice"), "{e}");

        // a row's seed and grid values replay it: the same trace hash as a plain run
        let r = &rows0[1];
        assert_eq!((r.run, r.seed), (2, 5));
        assert_eq!(r.grid["store.service.value"], "0.1ms");
        let mut sc = crate::registry::parse("s.toml", SWEEP_SCENARIO).unwrap();
        sc.pacer.rate = 20.0;
        sc.store.service = crate::dist::Dist::constant(crate::time::Nanos(100_000));
        sc.seed = r.seed;
        let s = crate::registry::simulate(&sc, None, None).unwrap();
        assert_eq!(s.trace_hash, r.trace_hash);
    }

    /// Issue 17's reproducer I13 (`tests/suite/robust.rs` has the rest): a scenario's name never
    /// takes a sweep's default output out of `reports/sweep`.
    #[test]
    fn i13_a_scenario_name_never_escapes_reports() {
        for name in ["../../../x", "/tmp/x", "..", "a/../../b"] {
            let p = default_out(name, None);
            let parts: Vec<_> = p.components().collect();
            assert_eq!(parts.len(), 3, "{name}: {}", p.display());
            assert!(p.starts_with("reports/sweep"), "{name}: {}", p.display());
            assert!(
                matches!(parts[2], std::path::Component::Normal(_)),
                "{name}: {}",
                p.display()
            );
        }
    }
}
