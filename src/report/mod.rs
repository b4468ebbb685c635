//! Reports for design reviews: `pacesim simulate` runs every scenario once per compared
//! backend (and per seed) ([`crate::run::compare`]), prints a comparison table per scenario,
//! and writes `reports/`.
//!
//! 1. [`table`] formats the figures (the same cells go to the terminal and to `index.md`).
//! 2. [`write()`] draws the plots (`src/plot/`), writes `<scenario>/summary.json`,
//!    `index.md` (`index`) and the same page as one self-contained `index.html` (`html`).
//!
//! Everything written is deterministic: the same scenarios and seeds give byte-identical files
//! (no timestamps, ordered collections only, fixed float formatting).

pub(crate) mod html;
pub(crate) mod index;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod table;

use crate::run::compare::{Row, ScenarioRuns, SeedStats};
use crate::timeline::Timeline;
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A scenario's directory name under `reports/`: its name with anything but letters, digits,
/// `-`, `_` and `.` replaced by `_`.
pub fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// Check that `scenarios` get one report directory each, before anything runs: two names
/// that are equal, or equal after [`slug`] (`a/b` and `a_b`), would write into one directory
/// and the index would link both to it; a name whose directory is the report's own
/// `index.md` could not be written at all.
pub(crate) fn distinct_dirs<'a>(
    scenarios: impl IntoIterator<Item = &'a crate::scenario::Scenario>,
) -> Result<(), ReportError> {
    let mut seen: std::collections::BTreeMap<String, &crate::scenario::Scenario> = std::collections::BTreeMap::new();
    for sc in scenarios {
        let s = slug(&sc.name);
        if s.eq_ignore_ascii_case("index.md") || s.eq_ignore_ascii_case("index.html") {
            return Err(ReportError::Reserved {
                place: sc.place("name"),
                name: sc.name.clone(),
            });
        }
        if let Some(first) = seen.insert(s.clone(), sc) {
            return Err(ReportError::SameDir {
                place: sc.place("name"),
                first_place: first.place("name"),
                first: first.name.clone(),
                second: sc.name.clone(),
                dir: s,
            });
        }
    }
    Ok(())
}

/// `<scenario>/summary.json`.
#[derive(Debug, Serialize)]
pub(crate) struct ScenarioJson<'a> {
    /// Scenario name.
    pub scenario: &'a str,
    /// Its description.
    pub description: &'a str,
    /// Backends compared.
    pub backends: &'a [String],
    /// Each compared backend as reports name it ([`crate::registry::label`]), in `backends`'
    /// order: its name and the options in which it differs from its defaults.
    pub labels: Vec<String>,
    /// Seeds run.
    pub seeds: &'a [u64],
    /// Every run, backend-major then seed.
    pub runs: Vec<RunJson<'a>>,
    /// Mean and 95% CI across seeds per backend (only with more than one seed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub across_seeds: Vec<SeedStats>,
}

/// One run in `summary.json`: its [`label`] and the run's figures (every field of
/// `pacesim run --json`, names unchanged).
#[derive(Debug, Serialize)]
pub(crate) struct RunJson<'a> {
    /// The backend as reports name it ([`label`]).
    pub label: String,
    /// The run.
    #[serde(flatten)]
    pub row: &'a Row,
}

/// How the reports name backend `backend` on scenario `sr` ([`crate::registry::label`]).
pub fn label(sr: &ScenarioRuns, backend: &str) -> String {
    crate::registry::label(&sr.scenario, backend)
}

/// A run's verdicts as a plot legend states them: `PASS`, `PASS (not judged: ...)`, or
/// `FAIL: ` and each failing check, the ceiling's with the burst the arrivals needed
/// (`FAIL: ceiling burst 31`).
pub(crate) fn legend_verdict(row: &Row) -> String {
    let s = &row.summary;
    let fails: Vec<String> = s
        .checks
        .iter()
        .filter(|c| c.1.failed())
        .map(|(n, _)| {
            if n == "ceiling" {
                format!("ceiling burst {}", s.burst_needed)
            } else if n == "slot_ceiling" {
                format!("slot_ceiling burst {}", s.slot_burst_needed)
            } else {
                n.clone()
            }
        })
        .collect();
    let unjudged = s.not_judged();
    if !fails.is_empty() {
        format!("FAIL: {}", fails.join(", "))
    } else if unjudged.is_empty() {
        "PASS".to_string()
    } else {
        format!("PASS (not judged: {})", unjudged.join(", "))
    }
}

/// What [`write()`] wrote for one scenario (paths relative to the output directory).
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Directory, relative.
    pub dir: String,
    /// Plot stems written (each as `.svg` and `.png`), in display order, with their captions.
    pub plots: Vec<(String, String)>,
}

/// A report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Creating a directory, or writing or removing a file, failed.
    #[error("{path}: {source}")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Two scenarios would share one report directory.
    #[error(
        "{place}: name: scenarios `{first}` and `{second}` would share the report directory `{dir}` \
         (`{first}` is named at {first_place}): give them distinct names"
    )]
    SameDir {
        /// Where the second is named (`file:line`).
        place: String,
        /// Where the first is named.
        first_place: String,
        /// The first scenario's name.
        first: String,
        /// The other scenario's name.
        second: String,
        /// The directory both map to.
        dir: String,
    },
    /// A scenario's directory would be the report's own `index.md`.
    #[error(
        "{place}: name: a scenario named `{name}` would write its report over the report's index.md or index.html: rename it"
    )]
    Reserved {
        /// Where it is named (`file:line`).
        place: String,
        /// The name.
        name: String,
    },
    /// A plot could not be drawn or written (names the file).
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
}

impl ReportError {
    /// An I/O error on `path`, for `map_err`.
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
        move |source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Files a report directory may hold from an earlier run; removed before writing.
fn is_generated(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("svg" | "png"))
        || p.file_name().is_some_and(|n| n == "summary.json")
}

/// Write `out/<scenario>/` (plots and `summary.json`) for every scenario, `out/index.md`,
/// which names `command` as the way to regenerate it, and `out/index.html`, the same page
/// self-contained (`html`).
pub fn write(out: &Path, all: &[ScenarioRuns], command: &str) -> Result<Vec<Written>, ReportError> {
    distinct_dirs(all.iter().map(|sr| &sr.scenario))?;
    std::fs::create_dir_all(out).map_err(ReportError::io(out))?;
    let written: Vec<Result<Written, ReportError>> = all.par_iter().map(|sr| write_scenario(out, sr)).collect();
    let written: Vec<Written> = written.into_iter().collect::<Result<_, _>>()?;
    let md = index::markdown(all, &written, command);
    let p = out.join("index.md");
    std::fs::write(&p, &md).map_err(ReportError::io(&p))?;
    let p = out.join("index.html");
    std::fs::write(&p, html::page(&md, out)).map_err(ReportError::io(&p))?;
    Ok(written)
}

fn write_scenario(out: &Path, sr: &ScenarioRuns) -> Result<Written, ReportError> {
    use crate::plot;
    let slug = slug(&sr.scenario.name);
    let dir: PathBuf = out.join(&slug);
    std::fs::create_dir_all(&dir).map_err(ReportError::io(&dir))?;
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut old: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_generated(p))
            .collect();
        old.sort();
        for p in old {
            std::fs::remove_file(&p).map_err(ReportError::io(&p))?;
        }
    }
    let mut w = Written {
        dir: slug.clone(),
        plots: Vec::new(),
    };
    let base = sr.base();
    let sc = &sr.scenario;
    let seed = sr.seeds[0];

    // every plot names a variant by its label, drawn in its backend's colour
    let labels: Vec<String> = base.iter().map(|r| label(sr, &r.backend)).collect();
    let runs: Vec<(&str, &Timeline, f64)> = base
        .iter()
        .zip(&labels)
        .map(|(r, l)| (l.as_str(), &r.timeline, r.row.summary.achieved_rate))
        .collect();
    let mut fig = plot::rate::RateFigure::new(&sc.name, seed, sc.pacer.rate, &runs);
    for (r, l) in base.iter().zip(&labels) {
        let fails_ceiling = r.row.summary.checks.get("ceiling").is_some_and(|c| c.failed());
        fig.set_verdict(l, &legend_verdict(&r.row), fails_ceiling);
    }
    plot::write(&fig, &dir, "rate")?;
    w.plots.push((
        "rate".into(),
        if fig.platforms.is_empty() {
            "Aggregate arrival rate over time, one line per backend, against the ceiling".into()
        } else {
            "Arrival rate per platform over time, one line per backend, each against its own platform's limit".into()
        },
    ));

    let fig = plot::processes::ProcessFigure::new(&sc.name, seed, sc.pacer.rate, &runs);
    plot::write(&fig, &dir, "processes")?;
    w.plots.push((
        "processes".into(),
        if fig.platforms.is_empty() {
            "Each process's contribution to the arrival rate".into()
        } else {
            "Each process's contribution to each platform's arrival rate, under that platform's limit".into()
        },
    ));

    if let Some(fig) = plot::jobs::JobsFigure::new(&sc.name, seed, &runs) {
        plot::write(&fig, &dir, "jobs")?;
        w.plots.push((
            "jobs".into(),
            "Each download event's life per source: pending, walking, finalised (by reason) or stranded by the sweep"
                .into(),
        ));
    }

    if let Some(fig) = plot::latency::LatencyFigure::new(&sc.name, seed, &runs) {
        plot::write(&fig, &dir, "latency")?;
        w.plots.push((
            "latency".into(),
            "Reservation round trip (store operation sent to reply), cumulative distribution".into(),
        ));
    }
    if let Some(fig) = plot::multiplier::MultiplierFigure::new(&sc.name, seed, &runs) {
        plot::write(&fig, &dir, "multiplier")?;
        w.plots
            .push(("multiplier".into(), "Backoff multiplier over time".into()));
    }
    if sr.seeds.len() > 1 {
        let fig = plot::seeds::SeedsFigure::new(sr);
        plot::write(&fig, &dir, "seeds")?;
        w.plots.push((
            "seeds".into(),
            format!(
                "Spread of the headline figures across {} seeds (box: quartiles; whiskers: range; black: mean and 95% CI)",
                sr.seeds.len()
            ),
        ));
    }

    let json = ScenarioJson {
        scenario: &sc.name,
        description: &sc.description,
        backends: &sr.backends,
        labels: sr.backends.iter().map(|b| label(sr, b)).collect(),
        seeds: &sr.seeds,
        runs: sr
            .runs
            .iter()
            .map(|r| RunJson {
                label: label(sr, &r.backend),
                row: &r.row,
            })
            .collect(),
        across_seeds: if sr.seeds.len() > 1 {
            sr.seed_stats()
        } else {
            Vec::new()
        },
    };
    let mut s = serde_json::to_string_pretty(&json).expect("summaries serialise");
    s.push('\n');
    let p = dir.join("summary.json");
    std::fs::write(&p, s).map_err(ReportError::io(&p))?;
    Ok(w)
}
