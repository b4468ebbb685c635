//! Running scenarios: the pipeline the commands share, from scenario files to summaries.
//!
//! - **Inputs.** [`load`] reads one scenario file and applies `--seed` / `--backend`;
//!   [`scenarios`] loads the files a command names, or else every `sims/*.toml`
//!   ([`default_scenarios`]).
//! - **One run.** [`one`] (`pacesim run`) simulates a scenario, optionally writing its trace,
//!   and summarises it ([`crate::registry::simulate`]); [`check`] (`pacesim check`) summarises
//!   an existing trace ([`crate::summary::from_trace`]), optionally against another ceiling.
//! - **Compared runs.** [`compare`] (`pacesim simulate`): every scenario once per backend it
//!   compares and per seed, with the timelines the plots and the report are made from.
//!
//! Everything here returns a typed result and prints nothing; the command line decides what
//! is printed and the exit status.

pub use crate::budget;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod choices;
pub mod compare;
pub(crate) mod input;
pub mod live;
pub(crate) mod progress;

use crate::scenario::{Scenario, ScenarioError};
use crate::summary::{self, Summary};
use crate::trace::ReadError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why the scenarios of a command could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read, or a value in it is invalid (names file, line and field).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// `--backend` names a backend the scenario cannot run with.
    #[error("{file}: --backend: {message}")]
    Backend {
        /// The scenario file.
        file: PathBuf,
        /// What is wrong (names the scenario and the field).
        message: String,
    },
    /// The file is TOML (or JSON) but not a scenario at all: `what` says what it is.
    #[error("{file}: not a scenario: {what}")]
    NotAScenario {
        /// The file.
        file: PathBuf,
        /// What the file is instead, and what to do with it.
        what: String,
    },
    /// `--seed` is past the seeds a scenario file can hold.
    #[error("{file}: --seed: must be at most {} (a scenario's seed range), got {seed}", i64::MAX)]
    Seed {
        /// The scenario file.
        file: PathBuf,
        /// The seed given.
        seed: u64,
    },
    /// No files were named and `sims/` holds none.
    #[error("no scenario files (looked in sims/*.toml)")]
    NoScenarios,
}

/// Load a scenario and apply `--seed` / `--backend` overrides.
pub fn load(file: &Path, seed: Option<u64>, backend: Option<&str>) -> Result<Scenario, LoadError> {
    let mut sc = load_scenario(file)?;
    if let Some(s) = seed {
        // the range a scenario file's seed has (`seed` in the file is refused past it too)
        if s > i64::MAX as u64 {
            return Err(LoadError::Seed {
                file: file.to_path_buf(),
                seed: s,
            });
        }
        sc.seed = s;
    }
    if let Some(b) = backend {
        sc = crate::registry::with_backend(&sc, b).map_err(|message| LoadError::Backend {
            file: file.to_path_buf(),
            message,
        })?;
    }
    Ok(sc)
}

/// The top-level keys of a scenario file ([`Scenario`]'s fields): a TOML file with none of
/// them is not a scenario with a mistake in it but another kind of file.
const SCENARIO_KEYS: &[&str] = &[
    "name",
    "description",
    "seed",
    "duration",
    "pacer",
    "processes",
    "store",
    "fetch",
    "destination",
    "backoff",
    "checks",
    "faults",
];

/// Load one scenario file. A file that is not a scenario at all (an expected matrix, a trace,
/// TOML without any scenario key) is reported as what it is, in one line, rather than by the
/// first key the scenario parser does not know.
pub(crate) fn load_scenario(file: &Path) -> Result<Scenario, LoadError> {
    crate::registry::load(file).map_err(|e| match not_a_scenario(file) {
        Some(what) => LoadError::NotAScenario {
            file: file.to_path_buf(),
            what,
        },
        None => e.into(),
    })
}

/// The shape of an expected matrix (`pacesim matrix --expected`): scenario -> backend -> a
/// table with `fail`.
fn expected_matrix_shape(table: &toml::Table) -> bool {
    table.values().all(|v| {
        v.as_table().is_some_and(|bs| {
            !bs.is_empty()
                && bs
                    .values()
                    .all(|b| b.as_table().is_some_and(|e| e.contains_key("fail")))
        })
    })
}

/// What a file that failed to load as a scenario is, when it is clearly something else.
fn not_a_scenario(file: &Path) -> Option<String> {
    // bounded like the scenario read itself (`/dev/zero` fails fast)
    let text = crate::scenario::read_bounded(file).ok()?;
    let table: toml::Table = match toml::from_str(&text) {
        Ok(t) => t,
        Err(_) if text.trim_start().starts_with('{') => {
            return Some("it is JSON (a trace? `pacesim check FILE` checks a trace)".into());
        }
        Err(_) => return None, // a scenario with a syntax error: the parser says where
    };
    if table.keys().any(|k| SCENARIO_KEYS.contains(&k.as_str())) {
        return None; // a scenario with a mistake in it: the parser names the field
    }
    if !table.is_empty() && expected_matrix_shape(&table) {
        return Some(
            "it is an expected matrix (scenario -> backend -> verdicts); \
             `pacesim matrix --expected FILE` reads it"
                .into(),
        );
    }
    Some(format!(
        "it has none of a scenario's keys ({})",
        SCENARIO_KEYS.join(", ")
    ))
}

/// The scenario files a command runs by default: `sims/*.toml`, sorted.
pub fn default_scenarios() -> Vec<PathBuf> {
    scenario_files_in(Path::new("sims"))
}

/// The `*.toml` files of `dir`, sorted (none when it cannot be read).
pub fn scenario_files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Load `files`, in order; no files means [`default_scenarios`]. Fails on the first file that
/// does not load, or when there is no file at all.
pub fn scenarios(files: Vec<PathBuf>) -> Result<Vec<Scenario>, LoadError> {
    let files = if files.is_empty() { default_scenarios() } else { files };
    if files.is_empty() {
        return Err(LoadError::NoScenarios);
    }
    files.iter().map(|f| load_scenario(f)).collect()
}

pub use crate::summary::reproduce;

/// Why one run (`pacesim run`) or one trace check (`pacesim check`) gave no summary.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The trace file could not be created.
    #[error("{path}: {source}")]
    CreateTrace {
        /// The trace file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Writing the trace failed part way.
    #[error("writing trace: {0}")]
    WriteTrace(#[source] std::io::Error),
    /// The trace file to check could not be opened.
    #[error("{path}: {source}")]
    OpenTrace {
        /// The trace file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A choice file cannot be read, written, or does not fit the scenario (names the file
    /// and field).
    #[error("{0}")]
    Choices(String),
    /// `--rate` is not a usable ceiling.
    #[error("--rate must be between {min:e} and {max:e} per second, got {0}", min = crate::scenario::MIN_RATE, max = crate::scenario::MAX_RATE)]
    BadRate(f64),
    /// The run would need more memory than `--max-memory`.
    #[error(transparent)]
    Memory(#[from] budget::BudgetError),
    /// The trace file is not a trace the checkers can judge (names file, line and field).
    #[error(transparent)]
    BadTrace(#[from] input::InputError),
    /// The trace does not read (names file and line).
    #[error(transparent)]
    ReadTrace(#[from] ReadError),
    /// The run stopped making progress (a livelock in the backend under test): a failed run,
    /// not bad input.
    #[error("{}: {source}", file.display())]
    NoProgress {
        /// The scenario file.
        file: PathBuf,
        /// The command that reproduces the run ([`reproduce`]).
        reproduce: String,
        /// When, and what loops.
        source: crate::sim::NoProgress,
    },
}

impl RunError {
    /// True when the run itself failed (it stopped making progress), as a failed check does;
    /// false for input that cannot be used.
    pub fn is_failed_run(&self) -> bool {
        matches!(self, RunError::NoProgress { .. })
    }
}

/// `pacesim run`: load `file` with the overrides, simulate it, write its trace to `trace`
/// (JSON Lines) if given, and summarise it.
pub fn one(file: &Path, seed: Option<u64>, backend: Option<&str>, trace: Option<&Path>) -> Result<Summary, RunError> {
    one_with(file, seed, backend, trace, Choices::Seeded)
}

/// Where a run's decisions come from ([`crate::choice`]).
#[derive(Copy, Clone, Debug)]
pub enum Choices<'a> {
    /// The seeded streams, as always.
    Seeded,
    /// The seeded streams, every word written to this choice file after the run.
    Record(&'a Path),
    /// The decisions in this choice file (an explorer's counterexample, or a recorded run).
    Replay(&'a Path),
}

/// [`one`], its decisions recorded or replayed (`run --record-choices`, `run --choices`).
pub fn one_with(
    file: &Path,
    seed: Option<u64>,
    backend: Option<&str>,
    trace: Option<&Path>,
    choices: Choices<'_>,
) -> Result<Summary, RunError> {
    let replay = match choices {
        Choices::Replay(p) => Some(choices::ChoiceFile::read(p).map_err(RunError::Choices)?),
        _ => None,
    };
    // the choices' seed and backend unless the command line names others (then refused)
    let seed = seed.or(replay.as_ref().map(|f| f.seed));
    let sc = load(file, seed, backend.or(replay.as_ref().map(|f| f.backend.as_str())))?;
    let source = match (choices, &replay) {
        (Choices::Replay(p), Some(f)) => {
            f.fits(p, &sc).map_err(RunError::Choices)?;
            Some(f.source())
        }
        (Choices::Record(_), _) => Some(crate::choice::Source::new(crate::choice::Tape::record())),
        _ => None,
    };
    budget::check(&sc, 1)?;
    let out: Option<Box<dyn Write + Send>> = match trace {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some(Box::new(std::io::BufWriter::new(f))),
            Err(source) => {
                return Err(RunError::CreateTrace {
                    path: p.to_path_buf(),
                    source,
                });
            }
        },
        None => None,
    };
    let mut progress = progress::Progress::on_terminal(sc.duration);
    let extra = progress.as_mut().map(|p| p as &mut dyn crate::trace::Sink);
    let summary = crate::registry::simulate_from(&sc, source.as_ref(), out, extra).map_err(|e| match e {
        summary::SimulateError::Io(e) => RunError::WriteTrace(e),
        summary::SimulateError::NoProgress(source) => RunError::NoProgress {
            file: file.to_path_buf(),
            reproduce: reproduce(file, sc.seed, &sc.pacer.backend),
            source,
        },
    })?;
    // a replay that drew other words than the file's was not the recorded run
    if let (Choices::Replay(p), Some(f), Some(src)) = (choices, &replay, &source) {
        f.replayed_whole(p, src).map_err(RunError::Choices)?;
    }
    if let (Choices::Record(p), Some(src)) = (choices, &source) {
        let f = choices::ChoiceFile {
            version: choices::VERSION,
            scenario: sc.name.clone(),
            backend: sc.pacer.backend.clone(),
            seed: sc.seed,
            scenario_hash: sc.text_hash(),
            body: choices::Body::Words { words: src.words() },
        };
        f.write(p).map_err(RunError::Choices)?;
    }
    Ok(summary)
}

/// `pacesim check`: summarise the trace file `trace` (the checkers' verdicts included),
/// against the ceiling `rate` instead of the header's when given.
pub fn check(trace: &Path, rate: Option<f64>) -> Result<Summary, RunError> {
    let open = || {
        std::fs::File::open(trace).map_err(|source| RunError::OpenTrace {
            path: trace.to_path_buf(),
            source,
        })
    };
    let name = trace.display().to_string();
    if let Some(r) = rate
        && !(r.is_finite() && r > 0.0 && crate::scenario::rate_in_range(r).is_ok())
    {
        return Err(RunError::BadRate(r));
    }
    // nothing in the file is trusted: one bounded pass first, then the checkers read it
    input::validate(&name, std::io::BufReader::new(open()?), rate)?;
    let reader = std::io::BufReader::new(open()?);
    let summary = match rate {
        None => summary::from_trace(&name, reader),
        Some(r) if r.is_finite() && r > 0.0 => summary::from_trace(&name, RateOverride::new(reader, r)),
        Some(r) => return Err(RunError::BadRate(r)),
    };
    Ok(summary?)
}

/// Rewrites the header's rate as the trace streams by (for `check --rate`).
struct RateOverride<R> {
    inner: R,
    rate: f64,
    first: bool,
    buf: Vec<u8>,
    pos: usize,
}

impl<R: std::io::BufRead> RateOverride<R> {
    fn new(inner: R, rate: f64) -> Self {
        RateOverride {
            inner,
            rate,
            first: true,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

impl<R: std::io::BufRead> std::io::Read for RateOverride<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let avail = std::io::BufRead::fill_buf(self)?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for RateOverride<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.inner.read_until(b'\n', &mut self.buf)?;
            if self.first && !self.buf.is_empty() {
                self.first = false;
                if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&self.buf) {
                    v["rate"] = serde_json::json!(self.rate);
                    self.buf = serde_json::to_vec(&v).unwrap_or_default();
                    self.buf.push(b'\n');
                }
            }
        }
        Ok(&self.buf[self.pos..])
    }
    fn consume(&mut self, amt: usize) {
        self.pos += amt;
    }
}
