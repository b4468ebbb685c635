//! Scenario files (`sims/*.toml`): processes, backend, store, destination, faults, as data.
//!
//! Parsing is strict (`deny_unknown_fields`), and every error names the file, the line and the
//! field, in one line: `sims/x.toml:7: pacer.rate: must be above 0`.
//!
//! ```toml
//! name = "four-limiters"
//! seed = 1
//! duration = "5s"                 # virtual time limit
//! [pacer]
//! backend = "row"                 # see `pacesim backends`
//! rate = 50.0                     # the global ceiling, per second
//! [processes]
//! count = 4
//! requests = 10                   # per process, at least 1; omit to run until `duration`
//! [store]
//! latency = { dist = "constant", value = "0ms" }      # one-way, each direction
//! service = { dist = "constant", value = "0ms" }      # time an operation holds the row lock
//! [fetch]
//! duration = { dist = "lognormal", median = "50ms", sigma = 0.4 }
//! ```

pub use crate::destination::DestinationCfg;
use crate::dist::Dist;
use crate::fault::FaultSpec;
pub use crate::store::StoreCfg;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A scenario error, naming where the problem is.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: cannot read: {message}")]
    Io {
        /// File name.
        file: String,
        /// OS error.
        message: String,
    },
    /// The file parsed badly or a value is out of range.
    #[error("{file}:{line}: {field}: {message}")]
    Invalid {
        /// File name.
        file: String,
        /// 1-based line (0 when the field is absent from the file).
        line: usize,
        /// Dotted field path, e.g. `pacer.rate`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// A whole scenario. Every default is documented on its field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario name (used in reports and file names): 1 to [`MAX_NAME_CHARS`] characters,
    /// no control characters.
    pub name: String,
    /// One paragraph on what the scenario shows (optional).
    #[serde(default)]
    pub description: String,
    /// Scenario seed; every entity's random stream derives from it. Default 1.
    #[serde(default = "one")]
    pub seed: u64,
    /// Virtual-time limit of the run.
    pub duration: Nanos,
    /// The pacer under test.
    pub pacer: PacerCfg,
    /// The worker processes.
    pub processes: ProcessesCfg,
    /// The shared store. Default: zero latency, zero service time.
    #[serde(default)]
    pub store: StoreCfg,
    /// The fetch each worker makes. Default: zero duration.
    #[serde(default)]
    pub fetch: FetchCfg,
    /// The destination. Default: answers 200 instantly, no limit of its own.
    #[serde(default)]
    pub destination: DestinationCfg,
    /// The backoff schedule. Default: factor 2, cap 8, decay after 10 clean responses (all three
    /// pacesim's choices: the records give no values).
    #[serde(default)]
    pub backoff: BackoffCfg,
    /// Checker settings.
    #[serde(default)]
    pub checks: ChecksCfg,
    /// Fault schedule.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// Download tasks through a broker: sources, their events, the tick, the sweep, backfill
    /// (`crate::task::JobsCfg`). Absent: every process loops over jobs of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<crate::task::JobsCfg>,
    /// The platforms jobs go to, each with its own destination and ceiling
    /// (`crate::platform`). Default: none (one destination at `pacer.rate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<crate::platform::PlatformCfg>,
    /// What a design record claims about this scenario's situation; the report quotes it
    /// beside pacesim's figures (optional).
    #[serde(default)]
    pub record: Option<RecordClaim>,
    /// Live mode with an external worker program (`pacesim live`, `pacesim conform`); the
    /// simulator ignores it. Absent: live mode runs pacesim's own workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveCfg>,
    /// The file it was read from, for messages (not part of the scenario: never serialised,
    /// never compared).
    #[serde(skip)]
    pub origin: Origin,
}

/// Where a scenario was read from: the file and its text, so that a problem found after
/// parsing (a memory estimate, a backend variant, a clash of names) still names the file and
/// the line. Empty for a scenario built in code.
#[derive(Clone, Default)]
pub struct Origin {
    file: String,
    src: std::sync::Arc<str>,
}

impl Origin {
    /// The file the scenario was read from, as it was named (empty for one built in code).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// `file:line` of `field` (a dotted scenario path), or the file alone for a field that is
    /// not in it (a command-line option); `None` for a scenario built in code.
    pub fn place(&self, field: &str) -> Option<String> {
        if self.file.is_empty() {
            return None;
        }
        if field.starts_with('-') {
            return Some(self.file.clone());
        }
        // the table a field is in when the file does not give it (a default): its header
        let mut line = line_of_field(&self.src, field);
        let mut f = field;
        while line == 0
            && let Some((table, _)) = f.rsplit_once('.')
        {
            f = table;
            line = line_of_field(&self.src, f);
        }
        Some(format!("{}:{}", self.file, line.max(1)))
    }
}

impl PartialEq for Origin {
    // where a scenario came from is not what it is
    fn eq(&self, _: &Origin) -> bool {
        true
    }
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Origin({:?})", self.file)
    }
}

/// A design record's claim, as `[record]` states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordClaim {
    /// Which record and where in it (e.g. `global-pace-row, Requirement 4`).
    pub source: String,
    /// The claim, in the record's words where it has them.
    pub claim: String,
    /// What pacesim finds of the claim here, for the report's reviewer section: `confirms` or
    /// `refutes`. Absent: the scenario is not listed there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<Finding>,
    /// The finding in one sentence, as a reviewer must be told it (shown beside the figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where pacesim's figure disagrees with the record's own words or numbers (shown beside
    /// the finding, so a reviewer never reads "confirms" over a figure that says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagrees: Option<String>,
}

/// Whether a scenario confirms or refutes its record's claim (`[record] finding`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// The claim holds in pacesim's model of the scenario.
    Confirms,
    /// Part of it holds and part does not (`disagrees` says which).
    Partly,
    /// It does not: the figure shows how.
    Refutes,
}

/// `[live]`: an external worker program and what it reports (see `docs/live.md`, "Your own
/// worker program", for the environment it gets and the lines it may print).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveCfg {
    /// The program and its arguments, run as is (no shell), in the scenario file's directory;
    /// `pacesim live --worker-cmd` overrides it. Absent: pacesim's own workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Kill points the worker reports by printing `{"ev":"point","name":"<point>"}` when it
    /// reaches them; a kill fault at any other point is refused (it could not fire). Default:
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kill_points: Vec<crate::fault::KillPoint>,
    /// The worker prints `{"ev":"job_start"}` and `{"ev":"job_end"}` around each job, so the
    /// hard and soft time limits (`processes.hard_limit`, `soft_limit`) can be enforced.
    /// Default false: a scenario with a time limit is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub jobs: bool,
    /// The signal sent when a job passes its soft time limit (`SIGUSR1`, as Celery's
    /// `soft_time_limit`; also `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGUSR2`, `SIGALRM`). Default
    /// `SIGUSR1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_signal: Option<String>,
    /// How long a worker has to exit after `SIGTERM` at the end of the run before its whole
    /// process group is SIGKILLed. Default 2 s, at most 5 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace: Option<Nanos>,
    /// Run once per run, after its schema and key prefix exist and before the workers start,
    /// with the run's environment (`docs/live.md`, "Your tables"): a program and its arguments
    /// (`["python", "manage.py", "migrate"]`, run as is in the scenario file's directory), or
    /// an SQL file (`"tables.sql"`, relative to the scenario file) run in the run's schema.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<LiveSetup>,
    /// How long an external worker program has to get ready (its first line on stdout, or its
    /// first request to the destination) before the run fails naming it; the scenario's clock
    /// starts when every worker is ready. Default 30 s, at most 10 min.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_timeout: Option<Nanos>,
}

/// `[live] setup`: a command (a list of words) or an SQL file (a string).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LiveSetup {
    /// A program and its arguments, run without a shell.
    Command(Vec<String>),
    /// An SQL file, run in the run's schema.
    Sql(String),
}

/// The signals `[live] soft_signal` may name, with their numbers.
pub(crate) const SOFT_SIGNALS: &[(&str, i32)] = &[
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGTERM", libc::SIGTERM),
    ("SIGINT", libc::SIGINT),
    ("SIGHUP", libc::SIGHUP),
    ("SIGALRM", libc::SIGALRM),
];

impl LiveCfg {
    /// The soft-limit signal's number (validated: one of [`SOFT_SIGNALS`]).
    pub(crate) fn soft_signal_number(&self) -> i32 {
        let name = self.soft_signal.as_deref().unwrap_or("SIGUSR1");
        SOFT_SIGNALS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(libc::SIGUSR1, |(_, s)| *s)
    }

    fn validate(&self) -> Result<(), (String, String)> {
        if let Some(c) = &self.command
            && c.first().is_none_or(|p| p.trim().is_empty())
        {
            return Err((
                "live.command".into(),
                "must name a program: [\"python3\", \"worker.py\"]".into(),
            ));
        }
        if let Some(s) = &self.soft_signal
            && !SOFT_SIGNALS.iter().any(|(n, _)| n == s)
        {
            let names: Vec<&str> = SOFT_SIGNALS.iter().map(|(n, _)| *n).collect();
            return Err((
                "live.soft_signal".into(),
                format!("unknown signal `{s}` (one of: {})", names.join(", ")),
            ));
        }
        // the runner gives stopping supervisors 10 s before it drops them (a SIGKILL then)
        if self.stop_grace.is_some_and(|g| g.0 > 5_000_000_000) {
            return Err(("live.stop_grace".into(), "must be at most 5s".into()));
        }
        if self.ready_timeout.is_some_and(|g| g.0 == 0 || g.0 > 600_000_000_000) {
            return Err(("live.ready_timeout".into(), "must be above 0 and at most 10m".into()));
        }
        match &self.setup {
            Some(LiveSetup::Command(c)) if c.first().is_none_or(|p| p.trim().is_empty()) => {
                return Err((
                    "live.setup".into(),
                    "must name a program: [\"python\", \"manage.py\", \"migrate\"], or an SQL file: \"tables.sql\""
                        .into(),
                ));
            }
            Some(LiveSetup::Sql(f)) if f.trim().is_empty() => {
                return Err(("live.setup".into(), "names no SQL file".into()));
            }
            _ => {}
        }
        Ok(())
    }
}

fn one() -> u64 {
    1
}

/// `[pacer]`: the backend and its options. Each backend reads its own options (its options
/// struct in `src/backend/<name>.rs` documents them and their defaults); an option the backend
/// does not use is rejected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PacerCfg {
    /// Backend name (`pacesim backends` lists them).
    pub backend: String,
    /// Backends `just simulate` compares on this scenario. Default: just `backend`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compare: Vec<String>,
    /// The global ceiling, requests per second.
    pub rate: f64,
    /// The backend's own options, as written (every other key of `[pacer]`).
    #[serde(flatten)]
    pub options: toml::Table,
}

impl PacerCfg {
    /// Set backend option `key` to `value` (a TOML value, e.g. `"\"fail_open\""` or `3`).
    pub fn set(&mut self, key: &str, value: &str) {
        let v: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .map(|mut t| t.remove("v").expect("the key just written"))
            .unwrap_or_else(|e| panic!("`{value}` is not a TOML value: {e}"));
        self.options.insert(key.to_string(), v);
    }
}

/// `[processes]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessesCfg {
    /// Number of worker processes N.
    pub count: u32,
    /// Closed loop: fetches per process; omit to run until `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Closed loop: think time between a fetch's end and the next reservation. Default 0.
    #[serde(default)]
    pub think: Dist,
    /// Open loop instead: each process receives jobs as a Poisson stream at this rate per
    /// second and serves them one at a time, in arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
    /// Start time of each process. Default 0 (every worker starts at once).
    #[serde(default)]
    pub start: Dist,
    /// Soft time limit of one job (from reservation to fetch end): past it the job finalises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_limit: Option<Nanos>,
    /// Hard time limit of one job: past it the worker is killed (SIGKILL) and restarted. (With
    /// `threads`, the limit is each thread's job's; passing it kills the whole process, as a
    /// pool's hard limit kills the worker process its job runs in.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_limit: Option<Nanos>,
    /// Threads M inside each process (the pooled runner's fetch thread pool): M loops sharing
    /// the process's clocks, its kills and restarts, its open-loop job queue and, as the
    /// backend says ([`crate::backend::Threads`]), its process side; each thread has its own
    /// store connection and random stream, and `requests` counts each thread's fetches.
    /// Default 1 (pacesim's: every scenario before threads ran one loop per process).
    #[serde(default = "one_thread", skip_serializing_if = "is_one_thread")]
    pub threads: u16,
    /// At most K jobs (so at most K fetches) in flight per process: a semaphore the thread takes
    /// before it asks the pacer and gives back when its job ends; a thread that finds none
    /// free waits for one (FIFO). A local resource bound, not a ceiling (the record:
    /// "max_concurrency stays per-process, deliberately"). Default: none, no bound beyond
    /// `threads` (pacesim's; the records give no number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u16>,
}

impl ProcessesCfg {
    /// The processes as reports name them: `4 processes`, or with threads `2 processes of 8
    /// threads` (and `, at most 3 fetches in flight each` under `max_concurrency`).
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("{} processes", self.count);
        if self.threads > 1 {
            s.push_str(&format!(" of {} threads", self.threads));
        }
        if let Some(k) = self.max_concurrency {
            s.push_str(&format!(", at most {k} fetches in flight each"));
        }
        s
    }
}

/// The most threads a process may run (`[processes] threads`): pacesim's limit.
pub(crate) const MAX_THREADS: u16 = 1024;

fn one_thread() -> u16 {
    1
}

fn is_one_thread(n: &u16) -> bool {
    *n == 1
}

/// `[fetch]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchCfg {
    /// From the request reaching the destination to the response reaching the worker.
    #[serde(default)]
    pub duration: Dist,
    /// Stuck files: a share of fetches whose every attempt hangs until the downloader's
    /// timeout ([`crate::fault::StuckCfg`]). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<crate::fault::StuckCfg>,
}

/// `[backoff]`: the records' schedule (429/503 multiply the interval, a clean streak divides
/// it); the values are pacesim's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffCfg {
    /// A 429 or 503 multiplies the interval by this. Default 2.
    #[serde(default = "two")]
    pub factor: f64,
    /// The multiplier never exceeds this. Default 8.
    #[serde(default = "eight")]
    pub cap: f64,
    /// This many clean responses in a row divide the multiplier by `factor`. Default 10.
    #[serde(default = "ten")]
    pub decay_after: u32,
}

fn two() -> f64 {
    2.0
}
fn eight() -> f64 {
    8.0
}
fn ten() -> u32 {
    10
}

impl BackoffCfg {
    /// The schedule as [`crate::pacer::BackoffConfig`], through its one validator: `factor`
    /// above 1, `cap` at least 1, `decay_after` at least 1.
    pub fn config(&self) -> Result<crate::pacer::BackoffConfig, crate::pacer::BackoffConfigError> {
        crate::pacer::BackoffConfig::new(self.factor, self.cap, self.decay_after)
    }
}

impl Default for BackoffCfg {
    fn default() -> Self {
        BackoffCfg {
            factor: 2.0,
            cap: 8.0,
            decay_after: 10,
        }
    }
}

/// `[checks]`: checker settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksCfg {
    /// The burst the ceiling check tolerates (1 = perfectly paced). Default 2: one request
    /// of slack for network jitter between slot and arrival.
    #[serde(default = "default_burst")]
    pub burst: u64,
    /// Liveness: achieved throughput must reach `(1 - epsilon)` of the offered/effective rate.
    #[serde(default = "default_epsilon")]
    pub epsilon: f64,
    /// Starvation: the longest a process may wait for permission (from asking to its fetch
    /// start, across re-enqueued executions) before `fairness` fails. Absent (the default,
    /// pacesim's: what wait is too long is the team's to say): `fairness` is reported, not a
    /// verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_bound: Option<Nanos>,
}

fn default_burst() -> u64 {
    2
}
fn default_epsilon() -> f64 {
    0.2
}

impl Default for ChecksCfg {
    fn default() -> Self {
        ChecksCfg {
            burst: default_burst(),
            epsilon: default_epsilon(),
            wait_bound: None,
        }
    }
}

impl Scenario {
    /// What in the scenario tells its processes apart, if anything (for symmetry reduction:
    /// `crate::explore::symmetry`, and each state's form): its faults and broker jobs name
    /// processes by id, open-loop arrivals draw from each process's own stream, platforms give
    /// each process's job its own. `None`: every process runs alike (one `[processes]` table).
    pub fn tells_processes_apart(&self) -> Option<&'static str> {
        if !self.faults.is_empty() {
            Some("the scenario's faults name processes")
        } else if self.processes.arrival_rate.is_some() {
            Some("open-loop arrivals")
        } else if self.jobs.is_some() {
            Some("broker jobs name processes")
        } else if !self.platforms.is_empty() {
            Some("platforms")
        } else {
            None
        }
    }

    /// The pacing interval, `1 s / rate`.
    pub fn interval(&self) -> Nanos {
        Nanos::interval_of_rate(self.pacer.rate)
    }

    /// The `[backoff]` schedule as the pacer's own config (validated by [`Scenario::parse`]).
    pub(crate) fn backoff_config(&self) -> crate::pacer::BackoffConfig {
        self.backoff.config().expect("a validated [backoff]")
    }

    /// Load a scenario file, validated with `rules` for its backends (as [`Scenario::parse`]).
    pub fn load(path: &Path, rules: &dyn BackendRules) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let src = read_bounded(path)?;
        Scenario::parse(&file, &src, rules)
    }
}

/// What validating a scenario asks of the backends it names. A scenario file names backends,
/// but this module knows none: whoever reads one hands [`Scenario::parse`], [`Scenario::load`],
/// [`Scenario::with_backend`] and [`Scenario::validate`] the rules to judge them by. The
/// registry's (`registry::Rules`, above the layers that build backends) know every backend
/// pacesim ships and every registered one; `registry::parse`, `registry::load` and
/// `registry::with_backend` read with them. [`Structure`] checks no backend.
pub trait BackendRules {
    /// Check what `sc` asks of every backend it runs: that each exists, its `[pacer]`
    /// options, its threads, its kill points, `[[platforms]]` and `[jobs]`.
    /// `Err((field, message))`.
    fn check(&self, sc: &Scenario) -> Result<(), (String, String)>;
}

/// Rules that check no backend: the scenario's own structure only (a scenario read to be
/// inspected, or built in by a lower layer).
#[derive(Copy, Clone, Debug, Default)]
pub struct Structure;

impl BackendRules for Structure {
    fn check(&self, _sc: &Scenario) -> Result<(), (String, String)> {
        Ok(())
    }
}

/// Read a scenario file's text, at most [`MAX_FILE_BYTES`]: a device (`/dev/zero`) or a huge
/// file is refused after reading one byte past the limit, never read whole.
pub(crate) fn read_bounded(path: &Path) -> Result<String, ScenarioError> {
    use std::io::Read;
    let file = path.display().to_string();
    let io = |message: String| ScenarioError::Io {
        file: file.clone(),
        message,
    };
    let f = std::fs::File::open(path).map_err(|e| io(e.to_string()))?;
    // read at most one byte past the limit: a device or a huge file fails fast
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io(format!(
            "larger than {} MiB: not a scenario file",
            MAX_FILE_BYTES >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| io(format!("not UTF-8 text: {e}")))
}

impl Scenario {
    /// Parse and validate scenario text (`file` names it in errors): its structure, and what
    /// it asks of the backends it names, judged by `rules` ([`BackendRules`]: the registry's
    /// know every backend; [`Structure`] checks none).
    pub fn parse(file: &str, src: &str, rules: &dyn BackendRules) -> Result<Scenario, ScenarioError> {
        let mut sc: Scenario = toml::from_str(src).map_err(|e| {
            let mut line = e.span().map(|s| line_of_offset(src, s.start)).unwrap_or(0);
            let mut field = if line > 0 {
                field_at_line(src, line)
            } else {
                String::from("(document)")
            };
            let message = e.message().trim().replace('\n', " ");
            // a bad value in a tagged table (a fault) is reported at the table's header: find
            // the key whose value is the one the message quotes
            if message.starts_with("invalid ")
                && let Some(lit) = message.split('`').nth(1)
                && src
                    .lines()
                    .nth(line.saturating_sub(1))
                    .is_some_and(|l| l.trim_start().starts_with("[["))
            {
                let hs = headers(src);
                let table = hs.get(line.saturating_sub(1)).cloned().unwrap_or_default();
                let hit = src
                    .lines()
                    .enumerate()
                    .skip(line)
                    .take_while(|(i, _)| hs[*i] == table)
                    .find(|(_, l)| {
                        l.split_once('=')
                            .is_some_and(|(_, v)| v.split('#').next().unwrap_or("").trim().trim_matches('"') == lit)
                    });
                if let Some((i, l)) = hit
                    && let Some(k) = key_of(l)
                {
                    (line, field) = (i + 1, format!("{table}.{}", bare(k)));
                }
            }
            // a missing field or table: name it, not the key the parser happened to be at
            if let Some(key) = message
                .strip_prefix("missing field `")
                .and_then(|r| r.split('`').next())
            {
                let table = headers(src).get(line.saturating_sub(1)).cloned().unwrap_or_default();
                let is_header = src
                    .lines()
                    .nth(line.saturating_sub(1))
                    .is_some_and(|l| l.trim_start().starts_with('['));
                // an inline table (`duration = { dist = "lognormal" }`) is reported at its key's
                // line: name the table path through that key
                let inline = src
                    .lines()
                    .nth(line.saturating_sub(1))
                    .filter(|l| line > 0 && l.contains('{'))
                    .and_then(key_of)
                    .map(bare);
                field = match &inline {
                    Some(k) if table.is_empty() => format!("{k}.{key}"),
                    Some(k) => format!("{table}.{k}.{key}"),
                    None if table.is_empty() || !is_header => key.to_string(),
                    None => format!("{table}.{key}"),
                };
                if inline.is_none() && (table.is_empty() || !is_header) {
                    line = 0;
                }
            }
            // A tagged table (a fault) reports an unknown key at its header: point at the key.
            if let Some(key) = message
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                .filter(|_| line > 0 && key_of(src.lines().nth(line - 1).unwrap_or("")).is_none())
            {
                let dotted = format!("{field}.{key}");
                let l = line_of_field(src, &dotted);
                if l != line {
                    (line, field) = (l, dotted);
                }
            }
            ScenarioError::Invalid {
                file: file.to_string(),
                line,
                field: bounded(&field),
                message: bounded(&reworded(&message)),
            }
        })?;
        sc.validate(rules).map_err(|(field, message)| ScenarioError::Invalid {
            file: file.to_string(),
            line: line_of_field(src, &field),
            field: bounded(&field),
            message: bounded(&reworded(&message)),
        })?;
        sc.origin = Origin {
            file: file.to_string(),
            src: src.into(),
        };
        Ok(sc)
    }

    /// Range checks that serde cannot express, then what `rules` ask of the backends the
    /// scenario names. `Err((field, message))`.
    pub fn validate(&self, rules: &dyn BackendRules) -> Result<(), (String, String)> {
        self.validate_structure()?;
        rules.check(self)
    }

    /// The checks that need no backend: ranges and combinations serde cannot express.
    /// `Err((field, message))`.
    pub(crate) fn validate_structure(&self) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_string(), m));
        if !(self.pacer.rate.is_finite() && self.pacer.rate > 0.0) {
            return err(
                "pacer.rate",
                format!("must be a number above 0, got {}", self.pacer.rate),
            );
        }
        if let Err(m) = rate_in_range(self.pacer.rate) {
            return err("pacer.rate", m);
        }
        if self.processes.count == 0 {
            return err("processes.count", "must be at least 1".into());
        }
        if self.processes.threads == 0 {
            return err("processes.threads", "must be at least 1".into());
        }
        if self.processes.threads > MAX_THREADS {
            return err(
                "processes.threads",
                format!(
                    "at most {MAX_THREADS} threads per process (pacesim's limit), got {}",
                    self.processes.threads
                ),
            );
        }
        if self.processes.max_concurrency == Some(0) {
            return err("processes.max_concurrency", "must be at least 1".into());
        }
        for (f, l) in [
            ("processes.soft_limit", self.processes.soft_limit),
            ("processes.hard_limit", self.processes.hard_limit),
        ] {
            if l.is_some_and(|l| l.0 == 0) {
                return err(f, "must be above 0: no job finishes in no time".into());
            }
        }
        if self.duration.0 == 0 {
            return err("duration", "must be above 0".into());
        }
        // the name is a directory under `reports/` and a line on the terminal
        if self.name.trim().is_empty() || self.name.chars().count() > MAX_NAME_CHARS {
            return err(
                "name",
                format!(
                    "must be 1 to {MAX_NAME_CHARS} characters (it names the report's directory), got {}",
                    self.name.chars().count()
                ),
            );
        }
        if let Some(c) = self.name.chars().find(|c| c.is_control()) {
            return err(
                "name",
                format!("must not hold control characters, got {}", c.escape_unicode()),
            );
        }
        if self.seed > i64::MAX as u64 {
            // TOML integers are signed 64-bit: `sweep` rewrites the file and cannot hold more,
            // and seeds `seed, seed + 1, ...` must not wrap
            return err(
                "seed",
                format!("must be at most {} (TOML's integer range), got {}", i64::MAX, self.seed),
            );
        }
        if self.processes.requests == Some(0) {
            // no fetch at all: every check would pass on nothing
            return err(
                "processes.requests",
                "must be at least 1 (omit it to run until `duration`)".into(),
            );
        }
        if self.processes.requests.is_none()
            && self.processes.arrival_rate.is_none()
            && self.duration.0 > 365 * 86400 * 1_000_000_000
        {
            return err("duration", "an unbounded run needs a duration under a year".into());
        }
        if let Some(r) = self.processes.arrival_rate
            && !(r.is_finite() && r > 0.0)
        {
            return err("processes.arrival_rate", format!("must be above 0, got {r}"));
        }
        if let Some(r) = self.processes.arrival_rate
            && let Err(m) = rate_in_range(r)
        {
            return err("processes.arrival_rate", m);
        }
        for (f, d) in [
            ("store.latency", &self.store.latency),
            ("store.service", &self.store.service),
            ("store.commit", &self.store.commit),
            ("fetch.duration", &self.fetch.duration),
            ("destination.latency", &self.destination.latency),
            ("processes.think", &self.processes.think),
            ("processes.start", &self.processes.start),
        ] {
            if let Err(m) = d.validate() {
                return err(f, m);
            }
        }
        if !(0.0..=1.0).contains(&self.destination.p503) {
            return err(
                "destination.p503",
                format!("must be a probability in [0, 1], got {}", self.destination.p503),
            );
        }
        if let Some(s) = &self.fetch.stuck {
            s.validate()?;
        }
        if let Some(l) = self.destination.limit
            && !(l.is_finite() && l > 0.0)
        {
            return err("destination.limit", format!("must be above 0, got {l}"));
        }
        if let Some(l) = self.destination.limit
            && let Err(m) = rate_in_range(l)
        {
            return err("destination.limit", m);
        }
        if self.destination.limit_burst == Some(0) {
            return err("destination.limit_burst", "must be at least 1".into());
        }
        if self.store.timeout.is_some_and(|t| t.0 == 0) {
            return err("store.timeout", "must be above 0".into());
        }
        self.backoff.config().map_err(|e| {
            use crate::pacer::BackoffConfigError as E;
            let f = match e {
                E::Factor(_) => "backoff.factor",
                E::Cap(_) => "backoff.cap",
                E::DecayAfter => "backoff.decay_after",
                _ => "backoff",
            };
            (f.to_string(), e.to_string())
        })?;
        if self.checks.burst == 0 {
            return err("checks.burst", "must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.checks.epsilon) {
            return err(
                "checks.epsilon",
                format!("must be a number in [0, 1], got {}", self.checks.epsilon),
            );
        }
        if self.checks.wait_bound.is_some_and(|b| b.0 == 0) {
            return err("checks.wait_bound", "must be above 0".into());
        }
        for (i, b) in self.pacer.compare.iter().enumerate() {
            if self.pacer.compare[..i].contains(b) {
                return err("pacer.compare", format!("`{b}` is listed twice"));
            }
        }
        crate::platform::validate(&self.platforms)?;
        if !self.platforms.is_empty() {
            if self.jobs.is_some() {
                return err(
                    "platforms",
                    "[[platforms]] with [jobs] is not modelled yet: download tasks do not pick a platform; \
                     declare one or the other"
                        .into(),
                );
            }
            if self.destination.limit.is_some() {
                return err(
                    "destination.limit",
                    "with [[platforms]] each platform's `limit` is its own destination's ceiling; one limit \
                     for every platform is not modelled"
                        .into(),
                );
            }
        }
        for (i, f) in self.faults.iter().enumerate() {
            f.validate(self.processes.count, self.duration)
                .map_err(|(field, m)| (format!("faults[{i}].{field}"), m))?;
        }
        if let Some(l) = &self.live {
            l.validate()?;
        }
        if let Some(j) = &self.jobs {
            j.validate(self.processes.soft_limit, self.processes.hard_limit)?;
            if self.processes.requests.is_some() {
                return err(
                    "processes.requests",
                    "a [jobs] scenario runs until its duration: its work comes from the tick".into(),
                );
            }
            if self.processes.max_concurrency.is_some() {
                return err(
                    "processes.max_concurrency",
                    "a [jobs] scenario runs one task per worker process; max_concurrency bounds threads".into(),
                );
            }
            if self.processes.arrival_rate.is_some() {
                return err(
                    "processes.arrival_rate",
                    "a [jobs] scenario's work comes from the tick, not from arrivals".into(),
                );
            }
        }
        Ok(())
    }

    /// The same scenario with another backend (for `--backend` and comparisons). A backend
    /// outside the `compare` list runs alone: the list is dropped and its options, threads and
    /// kill points are judged for that backend only.
    pub fn with_backend(&self, backend: &str, rules: &dyn BackendRules) -> Result<Scenario, String> {
        let mut s = self.clone();
        s.pacer.backend = backend.to_string();
        if !s.pacer.compare.iter().any(|b| b == backend) {
            s.pacer.compare.clear();
        }
        s.validate(rules)
            .map_err(|(f, m)| format!("{}: {f}: {m}", self.place(&f)))?;
        Ok(s)
    }

    /// Where `field` is, for a message: `file:line`, or the scenario's name when it was not
    /// read from a file.
    pub fn place(&self, field: &str) -> String {
        self.origin.place(field).unwrap_or_else(|| self.name.clone())
    }

    /// The hash of the text it was read from ([`text_hash`]); `None` for a scenario built in
    /// code.
    pub fn text_hash(&self) -> Option<String> {
        (!self.origin.file.is_empty()).then(|| text_hash(&self.origin.src))
    }

    /// Every backend some route runs this scenario with: `[pacer] backend` (`run`, sweeps)
    /// and the `compare` list (`simulate`, `matrix`), each once, in that order.
    pub fn runnable_backends(&self) -> Vec<String> {
        let mut v = vec![self.pacer.backend.clone()];
        for b in &self.pacer.compare {
            if !v.contains(b) {
                v.push(b.clone());
            }
        }
        v
    }

    /// The backends `simulate` runs on this scenario.
    pub fn compared_backends(&self) -> Vec<String> {
        if self.pacer.compare.is_empty() {
            vec![self.pacer.backend.clone()]
        } else {
            self.pacer.compare.clone()
        }
    }
}

/// The longest scenario name, in characters: it is a directory name (at most 255 bytes on
/// most file systems) and a table heading.
pub const MAX_NAME_CHARS: usize = 100;

/// The hash of a scenario file's text a choice file records (`scenario_hash`,
/// [`crate::run::choices`]): FNV-1a, 64 bits, in hex.
pub fn text_hash(text: &str) -> String {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{h:016x}")
}

/// Seed `seed + k` of a scenario run with several seeds (`--seeds`, `--cases`), within a
/// scenario's seed range (`seed` in a file and `run --seed` stop at `i64::MAX`, so a
/// reproducer of a seed past it would be refused); past it, what is wrong.
pub(crate) fn seed_plus(seed: u64, k: u64) -> Result<u64, String> {
    seed.checked_add(k)
        .filter(|s| *s <= i64::MAX as u64)
        .ok_or_else(|| format!("seed {seed} + {k} is past the largest seed, {}", i64::MAX))
}

/// The longest message about a scenario value that is printed whole, in characters.
pub const MAX_MESSAGE_CHARS: usize = 400;

/// The longest word of such a message quoted whole (a value echoed back), in characters.
pub const MAX_WORD_CHARS: usize = 64;

/// `message` bounded: a word (a value echoed back) longer than [`MAX_WORD_CHARS`] is cut to
/// its start with its length, and the whole to [`MAX_MESSAGE_CHARS`], so a 100,000-character
/// value is not printed back whole.
pub fn bounded(message: &str) -> String {
    let mut out = String::new();
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let n = word.chars().count();
        if n > MAX_WORD_CHARS {
            out.extend(word.chars().take(MAX_WORD_CHARS / 2));
            out.push_str(&format!("... ({n} characters)"));
        } else {
            out.push_str(word);
        }
    }
    let n = out.chars().count();
    if n > MAX_MESSAGE_CHARS {
        let mut cut: String = out.chars().take(MAX_MESSAGE_CHARS).collect();
        cut.push_str(&format!("... ({n} characters)"));
        return cut;
    }
    out
}

/// A TOML parser's message in pacesim's words: `must be <what>, got <value>` for a value of
/// the wrong type or an unknown name (`invalid type: string "0s", expected internally tagged
/// enum Dist`, `unknown variant `x`, expected `global` or `per_process``); other messages as
/// they are.
pub(crate) fn reworded(message: &str) -> String {
    let what = |expected: &str| -> String {
        let e = expected.trim();
        match e {
            "internally tagged enum Dist" | "enum Dist" => {
                "a distribution, e.g. { dist = \"constant\", value = \"1ms\" } or \
                 { dist = \"lognormal\", median = \"1ms\", sigma = 0.5 }"
                    .into()
            }
            "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number at least 0".into(),
            "i8" | "i16" | "i32" | "i64" => "a whole number".into(),
            "f32" | "f64" => "a number".into(),
            "a boolean" | "bool" => "true or false".into(),
            "string only" | "a string" | "string" => "a string".into(),
            _ => e.to_string(),
        }
    };
    if let Some(rest) = message.strip_prefix("unknown variant ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        let expected = expected
            .strip_prefix("one of ")
            .unwrap_or(expected)
            .replace(" or ", ", ");
        return format!("must be one of {expected}, got {got}");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((got, expected)) = rest.rsplit_once(", expected ")
        {
            let got = got
                .strip_prefix("string ")
                .or_else(|| got.strip_prefix("integer "))
                .or_else(|| got.strip_prefix("floating point "))
                .or_else(|| got.strip_prefix("boolean "))
                .unwrap_or(got);
            return format!("must be {}, got {got}", what(expected));
        }
    }
    message.to_string()
}

/// A dotted TOML key or table name as pacesim names fields: each segment trimmed and
/// unquoted (`"pacer" . rate` is `pacer.rate`).
fn bare(name: &str) -> String {
    name.split('.')
        .map(|seg| {
            let seg = seg.trim();
            let quoted = seg.len() >= 2
                && ((seg.starts_with('"') && seg.ends_with('"')) || (seg.starts_with('\'') && seg.ends_with('\'')));
            if quoted { &seg[1..seg.len() - 1] } else { seg }
        })
        .collect::<Vec<_>>()
        .join(".")
}

pub(crate) use crate::time::rate_in_range;
pub use crate::time::{MAX_RATE, MIN_RATE, short};

/// The largest scenario file read, in bytes: anything larger is not a scenario (`/dev/zero`).
pub(crate) const MAX_FILE_BYTES: u64 = 4 << 20;

/// The design record's key test in its smallest form, as scenario-file text: four processes,
/// 10 requests each, through one `row` at 50/s, within 5 s; everything else defaulted. For
/// tests that start from a valid scenario and change one thing. Its lines are fixed (parse
/// errors name them): `name` on line 2, `rate` on line 6, `requests` on line 9.
pub const FOUR_LIMITERS: &str = r#"
name = "four-limiters"
duration = "5s"
[pacer]
backend = "row"
rate = 50.0
[processes]
count = 4
requests = 10
"#;

fn line_of_offset(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// For each line, whether it begins inside a multi-line string (`"""` or `'''`): such a line
/// is prose, never a key or a table header, however it looks.
fn in_long_string(src: &str) -> Vec<bool> {
    let mut out = Vec::new();
    let mut open: Option<&str> = None;
    for line in src.lines() {
        out.push(open.is_some());
        let mut rest = line;
        loop {
            match open {
                Some(d) => match rest.find(d) {
                    Some(i) => {
                        rest = &rest[i + 3..];
                        open = None;
                    }
                    None => break,
                },
                None => {
                    // a comment ends the line; the first long-string opener starts one
                    let code = rest.split('#').next().unwrap_or("");
                    let next = ["\"\"\"", "'''"]
                        .into_iter()
                        .filter_map(|d| code.find(d).map(|i| (i, d)))
                        .min();
                    match next {
                        Some((i, d)) => {
                            rest = &rest[i + 3..];
                            open = Some(d);
                        }
                        None => break,
                    }
                }
            }
        }
    }
    out
}

/// The table header in force at each line, e.g. `pacer`, `faults[1]`.
fn headers(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    let prose = in_long_string(src);
    for (i, line) in src.lines().enumerate() {
        let t = line.trim();
        if prose[i] {
            out.push(cur.clone());
            continue;
        }
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = bare(name);
            let n = match counts.iter_mut().find(|c| c.0 == name) {
                Some(c) => {
                    c.1 += 1;
                    c.1
                }
                None => {
                    counts.push((name.clone(), 0));
                    0
                }
            };
            cur = format!("{name}[{n}]");
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            cur = bare(name);
        }
        out.push(cur.clone());
    }
    out
}

fn key_of(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.starts_with('[') || t.starts_with('#') {
        return None;
    }
    let k = t.split('=').next()?.trim();
    (!k.is_empty() && k.len() < t.len() && is_toml_key(k)).then_some(k)
}

/// A TOML key, possibly dotted: segments bare (`A-Za-z0-9_-`) or quoted. Prose that happens to
/// contain `=` (a line of a multi-line string) is not one.
fn is_toml_key(k: &str) -> bool {
    k.split('.').all(|seg| {
        let seg = seg.trim();
        let quoted = seg.len() >= 2
            && ((seg.starts_with('"') && seg.ends_with('"')) || (seg.starts_with('\'') && seg.ends_with('\'')));
        quoted || (!seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    })
}

fn field_at_line(src: &str, line: usize) -> String {
    let hs = headers(src);
    // inside a multi-line string, the field is the key that opened it
    let prose = in_long_string(src);
    let mut line = line.min(prose.len().max(1));
    while line > 1 && prose.get(line - 1) == Some(&true) {
        line -= 1;
    }
    let text = src.lines().nth(line - 1).unwrap_or("");
    let table = hs.get(line - 1).cloned().unwrap_or_default();
    // `a . b = 1` is the key `a.b`
    let key = key_of(text).map(bare);
    match key.as_deref() {
        Some(k) if table.is_empty() => k.to_string(),
        Some(k) => format!("{table}.{k}"),
        None if table.is_empty() => "(document)".into(),
        None => table,
    }
}

/// The line of a dotted field such as `pacer.rate` or `faults[1].at` in scenario text `src`;
/// 0 when absent.
pub(crate) fn line_of_field(src: &str, field: &str) -> usize {
    let (table, key) = match field.rsplit_once('.') {
        Some((t, k)) => (t, k),
        None => ("", field),
    };
    let hs = headers(src);
    let prose = in_long_string(src);
    for (i, line) in src.lines().enumerate() {
        if !prose[i] && hs[i] == table && key_of(line).map(bare).as_deref() == Some(key) {
            return i + 1;
        }
    }
    // a dotted key (`store.latency = ...`), or a field inside an inline table on one line
    // (`latency = { median = ... }` for `store.latency.median`)
    for (i, line) in src.lines().enumerate() {
        if let Some(k) = key_of(line).filter(|_| !prose[i]) {
            let k = bare(k);
            let full = if hs[i].is_empty() { k } else { format!("{}.{k}", hs[i]) };
            if field == full || field.starts_with(&format!("{full}.")) {
                return i + 1;
            }
        }
    }
    // fall back to the table header's line
    hs.iter().position(|h| h == table).map(|i| i + 1).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = FOUR_LIMITERS;

    #[test]
    fn parses_minimal() {
        let s = crate::registry::parse("t.toml", GOOD).unwrap();
        assert_eq!(s.processes.count, 4);
        assert_eq!(s.interval(), Nanos(20_000_000));
    }

    fn err(src: &str) -> String {
        crate::registry::parse("t.toml", src).unwrap_err().to_string()
    }

    #[test]
    fn the_live_table_is_checked_and_named_in_errors() {
        let with = |t: &str| format!("{GOOD}\n[live]\n{t}\n");
        let s = crate::registry::parse(
            "t.toml",
            &with("command = [\"python3\", \"w.py\"]\nkill_points = [\"holding_lock\"]\njobs = true\nsoft_signal = \"SIGTERM\"\nstop_grace = \"1s\""),
        )
        .unwrap();
        let l = s.live.as_ref().unwrap();
        assert_eq!(l.command.as_deref().unwrap(), ["python3", "w.py"]);
        assert_eq!(l.kill_points, [crate::fault::KillPoint::HoldingLock]);
        assert_eq!(l.soft_signal_number(), libc::SIGTERM);
        assert_eq!(
            crate::registry::parse("t.toml", GOOD).unwrap().live,
            None,
            "absent: pacesim's own workers"
        );
        let line = GOOD.lines().count() + 3;
        assert_eq!(
            err(&with("command = []")),
            format!("t.toml:{line}: live.command: must name a program: [\"python3\", \"worker.py\"]")
        );
        assert!(err(&with("soft_signal = \"SIGSTOP\"")).contains("live.soft_signal: unknown signal `SIGSTOP`"));
        assert!(err(&with("stop_grace = \"1m\"")).contains("live.stop_grace: must be at most 5s"));
        assert!(err(&with("kill_points = [\"nowhere\"]")).contains("live.kill_points"));
        assert!(err(&with("bogus = 1")).contains("unknown field `bogus`"));
    }

    /// A syntax error inside a multi-line string names the key that opened it, not prose that
    /// looks like a key (`waits. SERIALIZED_PLATFORMS={patreon}` is a line of the record's claim).
    #[test]
    fn an_error_inside_a_long_string_names_its_key() {
        let src = format!(
            "{GOOD}\n[record]\nclaim = \"\"\"\nonly a second walk\nwaits. SERIALIZED_PLATFORMS={{patreon}} \\q\n\"\"\"\n"
        );
        let e = err(&src);
        let line = GOOD.lines().count() + 5;
        assert!(e.starts_with(&format!("t.toml:{line}: record.claim: ")), "{e}");
        // a header-looking line of prose does not open a table either
        let src = format!("{GOOD}\n[record]\nclaim = \"\"\"\n[pacer]\n\"\"\"\nbogus = 1\n");
        assert!(err(&src).contains(": record.bogus: "), "{}", err(&src));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        assert_eq!(
            err(&GOOD.replace("rate = 50.0", "rate = 0")),
            "t.toml:6: pacer.rate: must be a number above 0, got 0"
        );
        assert!(err(&GOOD.replace("count = 4", "count = 0")).starts_with("t.toml:8: processes.count:"));
        let e = err(&GOOD.replace("requests = 10", "requests = 10\nbogus = 1"));
        assert!(
            e.starts_with("t.toml:10: processes.bogus: unknown field `bogus`"),
            "{e}"
        );
        let e = err(&GOOD.replace("\"row\"", "\"nope\""));
        assert!(e.starts_with("t.toml:5: pacer.backend: unknown backend `nope`"), "{e}");
        let e = err("name = \"x\"\nduration = [");
        assert!(e.starts_with("t.toml:2:"), "{e}");
        let e = err(&GOOD.replace("\"5s\"", "\"5 lightyears\""));
        assert!(e.starts_with("t.toml:3: duration:"), "{e}");
        assert!(!e.contains('\n'));
    }

    const THROTTLE: &str = "\n[[faults]]\nkind = \"destination_throttle\"\nat = \"5s\"\nduration = \"3s\"\n";

    #[test]
    fn parses_a_destination_throttle() {
        let s = crate::registry::parse("t.toml", &format!("{GOOD}{THROTTLE}")).unwrap();
        let f = &s.faults[0];
        assert_eq!(
            *f,
            FaultSpec::DestinationThrottle {
                at: Nanos(5_000_000_000),
                duration: Nanos(3_000_000_000),
                status: 429
            }
        );
        assert_eq!(f.kind(), "destination_throttle");
        assert_eq!(f.window(), Some((Nanos(5_000_000_000), Nanos(8_000_000_000))));
        let s = crate::registry::parse("t.toml", &format!("{GOOD}{THROTTLE}status = 503\n")).unwrap();
        assert_eq!(
            crate::fault::throttles(&s.faults),
            [(5_000_000_000, 8_000_000_000, 503)]
        );
    }

    #[test]
    fn backoff_goes_through_the_pacers_one_validator() {
        let e = err(&format!("{GOOD}[backoff]\nfactor = 1.0\n"));
        assert!(
            e.starts_with("t.toml:11: backoff.factor: backoff factor must be finite and > 1.0"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[backoff]\ndecay_after = 0\n"));
        assert!(e.starts_with("t.toml:11: backoff.decay_after:"), "{e}");
        assert!(crate::registry::parse("t.toml", &format!("{GOOD}[backoff]\nfactor = 1.5\n")).is_ok());
    }

    #[test]
    fn each_backend_reads_its_own_options() {
        // one backend: an option it does not use is an error naming it
        let e = err(&GOOD.replace("rate = 50.0", "rate = 50.0\nttl = \"5s\""));
        assert_eq!(e, "t.toml:7: pacer.ttl: backend `row` does not use option `ttl`");
        // a bad value names the option
        let e = err(&GOOD.replace("rate = 50.0", "rate = 50.0\nfallback = \"sideways\""));
        assert!(e.starts_with("t.toml:7: pacer.fallback:"), "{e}");
        // a compare list: each backend checks the options it uses ...
        let cmp = GOOD.replace(
            "rate = 50.0",
            "rate = 50.0\ncompare = [\"row\", \"redis_lock\"]\nttl = \"5s\"",
        );
        assert!(crate::registry::parse("t.toml", &cmp).is_ok());
        let e = err(&cmp.replace("ttl = \"5s\"", "ttl = \"0s\""));
        assert_eq!(e, "t.toml:8: pacer.ttl: must be above 0");
        // ... and an option none of them uses is an error
        let e = err(&cmp.replace("ttl = \"5s\"", "burst = 3"));
        assert_eq!(
            e,
            "t.toml:8: pacer.burst: no backend this scenario runs (row, redis_lock) uses option `burst`"
        );
        // options reach the backend
        let sc = crate::registry::parse(
            "t.toml",
            &GOOD.replace("rate = 50.0", "rate = 50.0\nfallback = \"fail_open\""),
        )
        .unwrap();
        let d = crate::registry::spec("row").unwrap().detail(&sc).unwrap();
        assert_eq!(d["fallback"], "fail_open");
    }

    #[test]
    fn a_bad_destination_throttle_names_file_line_and_field() {
        // GOOD ends at line 10; THROTTLE's `duration` is line 14, a field appended is line 15.
        let e = err(&format!("{GOOD}{THROTTLE}status = 500\n"));
        assert_eq!(e, "t.toml:15: faults[0].status: must be 429 or 503, got 500");
        let e = err(&format!("{GOOD}{THROTTLE}").replace("\"3s\"", "\"0s\""));
        assert_eq!(e, "t.toml:14: faults[0].duration: must be above 0");
        let e = err(&format!("{GOOD}{THROTTLE}probability = 1.0\n"));
        assert!(e.starts_with("t.toml:15: faults[0].probability: unknown field"), "{e}");
    }
}
