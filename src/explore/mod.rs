//! `pacesim explore`: search the schedules of a scenario instead of sampling them.
//!
//! A seed decides every latency, every tie and every fault moment of a run, and a race shows
//! only when the dice land on it. The explorer makes those decisions choices
//! ([`crate::choice`]) and walks them:
//!
//! - **exhaustive**: depth first over the choice tree, within bounds the user sets (processes,
//!   requests per process, the quantiles a varied distribution's draw chooses among, at most
//!   K kills at any of the backend's kill points, how many operations reaching the store at
//!   one instant are ordered), each run re-executed from the start with a prefix of choices
//!   (stateless model checking, as CHESS does). A state a seen one covers stops a run (its
//!   continuations are explored where the seen one was reached; [`crate::form`]): the form
//!   covers what every checker keeps ([`crate::trace::Sink::form`]), every process, the store,
//!   the backend's sides, the pending events (the simulator, `src/sim.rs`) and the kills
//!   left. The tree ends with "no violation in all S schedules (D distinct states) within
//!   these bounds", or a counterexample; stopped before its end (by `--schedules`, `--time`,
//!   `--max-memory` or a signal, each held inside a run too: [`Stopped`]) it is INCOMPLETE, and
//!   with no schedule judged NOTHING JUDGED: neither is a pass ([`Report::outcome`]). On
//!   more than one thread (`Options::threads`) the subtrees below a split are handed out to
//!   threads sharing one table of seen states, with the one thread's verdict and
//!   counterexample (`threaded`);
//! - **pct**: probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010) carried over
//!   to messages: each run gives the processes random priorities, serves the store's
//!   simultaneous operations highest priority first, gives a high-priority process its fast
//!   latencies and a low one its slow ones, and lowers the running process's priority at
//!   `depth - 1` random decisions; a bug of depth `d` is found by one run with probability at
//!   least `1 / (n k^(d-1))` (`n` processes, `k` decisions);
//! - **random**: every choice uniform;
//! - **coverage**: random runs that keep, as seeds for mutation, the choice sequences whose
//!   traces showed something new (a pair of consecutive event kinds with a gap of a new
//!   magnitude), as coverage-guided fuzzers do.
//!
//! Every checker judges every complete schedule; the first violation is shrunk by shrinking
//! its choice sequence (fewer processes, fewer kills, fewer requests, an earlier end, smaller
//! choices: `shrink`) and written as a runnable scenario and choice file
//! ([`crate::run::choices`]): `pacesim run CASE.toml --choices CASE.choices.json` replays it.
//!
//! Random choices are the explorer's own streams, seeded by `--seed`: the same options give
//! the same schedules and the same counterexample. The clock read here is the explorer's
//! budget and progress only, never a simulated one.

pub mod defects;
#[cfg(test)]
mod prune_audit;

/// The seen-state table, kept beside the forms it compares (`crate::form::seen`): the choice
/// source, a layer below, stops runs at its states.
pub use crate::form::seen;
pub(crate) mod shrink;
pub(crate) mod strategy;

use crate::choice::{Bounds, Choice, Kind, Source, Tape};
use crate::fault::KillPoint;
use crate::registry::BackendSpec;
use crate::scenario::Scenario;
use crate::trace::{Event, Header, Sink};
use seen::{Done, Seen};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant as WallInstant};

/// The signal that asked the command line's exploration to stop (0: none): the `explore`
/// command's handlers of SIGINT, SIGTERM and SIGHUP store its number here, and the explorer
/// ([`Options::interrupt`]) stops at its next check, inside a run too, and reports what it did.
pub static INTERRUPT: AtomicI32 = AtomicI32::new(0);

/// The deepest bug `--strategy pct --depth` states its bound for.
pub const MAX_PCT_DEPTH: u32 = 32;

/// How the explorer walks the choice tree.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "name")]
pub enum Method {
    /// Depth first over every choice, within the bounds.
    Exhaustive,
    /// Probabilistic concurrency testing for bugs of depth `depth`.
    Pct {
        /// The bug depth the bound is stated for (1 or more).
        depth: u32,
    },
    /// Every choice uniform.
    Random,
    /// Random runs guided by what their traces newly show.
    Coverage,
}

impl Method {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Exhaustive => "exhaustive",
            Method::Pct { .. } => "pct",
            Method::Random => "random",
            Method::Coverage => "coverage",
        }
    }
}

/// A distribution of the scenario an explorer may vary (the others are held at their
/// medians).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Site {
    /// `[store] latency`: each one-way hop to and from the store.
    StoreLatency,
    /// `[store] service`: the store's time per operation.
    StoreService,
    /// `[store] commit`.
    StoreCommit,
    /// `[processes] think`.
    Think,
    /// `[processes] start`.
    Start,
    /// `[fetch] duration`.
    Fetch,
    /// `[destination] latency`.
    Destination,
}

impl Site {
    /// Every site.
    pub const ALL: &'static [Site] = &[
        Site::StoreLatency,
        Site::StoreService,
        Site::StoreCommit,
        Site::Think,
        Site::Start,
        Site::Fetch,
        Site::Destination,
    ];

    /// Its name on the command line: the scenario's table and key.
    pub fn name(self) -> &'static str {
        match self {
            Site::StoreLatency => "store.latency",
            Site::StoreService => "store.service",
            Site::StoreCommit => "store.commit",
            Site::Think => "processes.think",
            Site::Start => "processes.start",
            Site::Fetch => "fetch.duration",
            Site::Destination => "destination.latency",
        }
    }

    /// The site named `s` (as [`Site::name`] gives, or its key alone when unambiguous).
    pub fn parse(s: &str) -> Option<Site> {
        let s = s.trim();
        Site::ALL.iter().copied().find(|x| x.name() == s).or(match s {
            "store" | "latency" => Some(Site::StoreLatency),
            "service" => Some(Site::StoreService),
            "commit" => Some(Site::StoreCommit),
            "think" => Some(Site::Think),
            "start" => Some(Site::Start),
            "fetch" => Some(Site::Fetch),
            "destination" => Some(Site::Destination),
            _ => None,
        })
    }

    fn dist(self, sc: &Scenario) -> &crate::dist::Dist {
        match self {
            Site::StoreLatency => &sc.store.latency,
            Site::StoreService => &sc.store.service,
            Site::StoreCommit => &sc.store.commit,
            Site::Think => &sc.processes.think,
            Site::Start => &sc.processes.start,
            Site::Fetch => &sc.fetch.duration,
            Site::Destination => &sc.destination.latency,
        }
    }
}

/// What to explore and how far.
#[derive(Clone, Debug)]
pub struct Options {
    /// How to walk the tree.
    pub method: Method,
    /// Run this many processes instead of the scenario's.
    pub processes: Option<u32>,
    /// Each process makes this many requests instead of the scenario's.
    pub requests: Option<u64>,
    /// The distributions whose draws are choices (the others are held at their medians).
    pub vary: Vec<Site>,
    /// Quantiles, kills, kill points (empty: every point the backend has), restart delay,
    /// order width.
    pub bounds: Bounds,
    /// Stop after this many schedules.
    pub schedules: Option<u64>,
    /// Stop after this long (the explorer's own clock).
    pub time: Option<Duration>,
    /// The explorer's seed (random, pct, coverage).
    pub seed: u64,
    /// This process's slice of the tree, `(index, count)`.
    pub shard: Option<(u64, u64)>,
    /// Stop runs at states already seen.
    pub prune: bool,
    /// Only these checks count as violations (empty: every check).
    pub checks: Vec<String>,
    /// Shrink a counterexample.
    pub shrink: bool,
    /// The most runs shrinking makes.
    pub shrink_runs: u64,
    /// Where the shard came from when the command line did not name it (`SLURM_ARRAY_TASK_ID`,
    /// `JOB_COMPLETION_INDEX`), as the report says.
    pub shard_from: Option<String>,
    /// A flag that stops the exploration when set (a signal's number: [`INTERRUPT`]).
    pub interrupt: Option<&'static AtomicI32>,
    /// Threads an exhaustive search walks its tree on (1: one, in order; more: subtrees
    /// handed out to threads that share one seen-state table). Other strategies use one.
    pub threads: usize,
    /// Checkers judged beside pacesim's and the registered ones ([`crate::check::register`]),
    /// for this exploration alone (the prune audit's goals are such checkers).
    pub more_checkers: Vec<crate::check::CheckerSpec>,
    /// With `checks`: a schedule is a violation only when it breaks every one of them (a
    /// conjunction; pruning stays sound, each check being monotone in the slack it declares),
    /// not any one.
    pub every_check: bool,
    /// Replay every run from its start rather than go on from a world an earlier run saved
    /// where their decisions part (`--replay`: the same search, slower; a check of the saving).
    pub replay: bool,
    /// Reduce by symmetry where the search can ([`symmetry`]): states that differ only in
    /// which of the interchangeable processes is which are one (`--no-symmetry`: off).
    pub symmetry: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            method: Method::Exhaustive,
            processes: None,
            requests: None,
            vary: vec![Site::StoreLatency, Site::StoreService],
            bounds: Bounds::default(),
            schedules: None,
            time: None,
            seed: 0,
            shard: None,
            prune: true,
            checks: Vec::new(),
            shrink: true,
            shrink_runs: shrink::MAX_RUNS,
            shard_from: None,
            interrupt: None,
            threads: 1,
            more_checkers: Vec::new(),
            every_check: false,
            replay: false,
            symmetry: true,
        }
    }
}

/// What stopped an exploration before its tree (exhaustive) was explored to its end, or a
/// sampled search before its schedules (`--schedules`) or time (`--time`) were spent.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// `--schedules` ran out (exhaustive).
    Schedules,
    /// `--time` ran out (exhaustive).
    Time,
    /// `--max-memory` would have been passed: the run's estimate and the seen states.
    Memory,
    /// A signal (its number: SIGINT 2, SIGTERM 15, SIGHUP 1).
    Signal(i32),
}

impl Stopped {
    /// What stopped it, in words.
    pub fn describe(self) -> String {
        match self {
            Stopped::Schedules => "the schedule budget (--schedules) ran out".into(),
            Stopped::Time => "the time budget (--time) ran out".into(),
            Stopped::Memory => "the memory limit (--max-memory) was reached".into(),
            Stopped::Signal(n) => format!("it was interrupted ({})", signal_name(n)),
        }
    }
}

/// A signal's name: `SIGINT`, `SIGTERM`, `SIGHUP`, or `signal N`.
pub fn signal_name(n: i32) -> String {
    match n {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

/// What an exploration's report amounts to ([`Report::outcome`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A violation was found.
    Violation,
    /// No violation: exhaustive, the whole tree (this shard's part) within the bounds; or a
    /// sampled search that judged the schedules (or spent the time) it was given.
    Pass,
    /// No violation in what was judged, but the exploration stopped before its end (by a
    /// budget, the memory limit or a signal): not a pass.
    Incomplete(Stopped),
    /// No schedule was judged at all (`--schedules 0`, `--time 1ns`, an empty shard): not a
    /// pass.
    Nothing,
}

/// A property that broke on a schedule.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Violation {
    /// The check (`ceiling`, ...; `no_progress` for a run that stopped making progress).
    pub check: String,
    /// Its witness.
    pub detail: String,
}

/// A violation, shrunk, as a runnable case.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Counterexample {
    /// What broke, on the shrunk case.
    pub violation: Violation,
    /// The schedule that first showed it (1 first).
    pub found_at: u64,
    /// Processes, requests and kills as found.
    pub found: Size,
    /// Processes, requests and kills after shrinking.
    pub shrunk: Size,
    /// Runs the shrinking made.
    pub shrink_runs: u64,
    /// The kill budget the shrunk case runs with (its choice file's `bounds.kills`).
    pub kills: u32,
    /// The shrunk case's choices.
    pub choices: Vec<Choice>,
    /// The shrunk case's scenario, as TOML (what `--out` writes).
    pub scenario: String,
}

/// The size of a case.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Size {
    /// Processes.
    pub processes: u32,
    /// Requests per process (`None`: open loop or unbounded).
    pub requests: Option<u64>,
    /// The scenario's duration, seconds.
    #[serde(default)]
    pub seconds: f64,
    /// Kills the choices fire.
    pub kills: u32,
    /// Choices.
    pub choices: usize,
}

/// What an exploration did.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The backend explored.
    pub backend: String,
    /// How.
    pub method: Method,
    /// Processes and requests explored.
    pub processes: u32,
    /// Requests per process.
    pub requests: Option<u64>,
    /// The distributions varied.
    pub vary: Vec<Site>,
    /// The bounds.
    pub bounds: Bounds,
    /// Complete schedules judged.
    pub schedules: u64,
    /// Runs stopped at a state already seen.
    pub pruned: u64,
    /// Distinct states seen (0 without pruning).
    pub states: u64,
    /// The most choices one run made.
    pub depth: usize,
    /// Seconds spent.
    pub seconds: f64,
    /// Exhaustive: the whole tree (this shard's part of it) was explored.
    pub complete: bool,
    /// Which shard, `(index, count)`.
    pub shard: Option<(u64, u64)>,
    /// The first violation, shrunk.
    pub counterexample: Option<Counterexample>,
    /// For pct: the probability a bug of the stated depth escapes every run, at most (the
    /// bound `(1 - 1/(n k^(d-1)))^runs`).
    pub escape_bound: Option<f64>,
    /// What stopped it before its end (`None`: it ran to its end, or found a violation
    /// first). An exploration stopped so is incomplete: not a pass.
    #[serde(default)]
    pub stopped: Option<Stopped>,
    /// The explored scenario's text, hashed (FNV-1a 64, hex): the scenario as prepared (its
    /// processes, requests, seed, backend and held distributions in it). Shards of one
    /// exploration share it; `explore-merge` refuses others.
    #[serde(default)]
    pub text_hash: String,
    /// Runs stopped at states already seen (`--no-prune`: false).
    #[serde(default)]
    pub prune: bool,
    /// Only these checks counted as violations (`--checks`; empty: every check).
    #[serde(default)]
    pub checks: Vec<String>,
    /// The checks no judged schedule judged (the schedules lacked what they need): with
    /// `--require-judged`, a failure.
    #[serde(default)]
    pub not_judged: Vec<String>,
    /// Where the shard came from when the command line did not name it
    /// (`SLURM_ARRAY_TASK_ID`, `JOB_COMPLETION_INDEX`).
    #[serde(default)]
    pub shard_from: Option<String>,
    /// Threads the search walked its tree on (exhaustive; 1: one, in order).
    #[serde(default = "one")]
    pub threads: usize,
    /// The width of a state's fingerprint, bits ([`crate::form::WIDTH`]; 0 without pruning).
    #[serde(default)]
    pub fingerprint_bits: u32,
    /// The chance that two of the distinct states seen share a fingerprint, so that one was
    /// taken for the other and its continuations never explored, by the birthday bound
    /// `n (n - 1) / 2 / 2^64` ([`crate::form::collision_odds`]; 0 without pruning).
    #[serde(default)]
    pub collision_odds: f64,
    /// Symmetry reduction: how many interchangeable processes states were merged across
    /// (`"3 interchangeable processes"`), or why not (`"off: ..."`; empty without pruning).
    #[serde(default)]
    pub symmetry: String,
}

fn one() -> usize {
    1
}

impl Report {
    /// Schedules judged per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.schedules as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// What it amounts to: a violation, a pass, incomplete, or nothing judged.
    pub fn outcome(&self) -> Outcome {
        if self.counterexample.is_some() {
            Outcome::Violation
        } else if self.schedules == 0 {
            Outcome::Nothing
        } else if let Some(s) = self.stopped {
            Outcome::Incomplete(s)
        } else if self.complete || self.method != Method::Exhaustive {
            Outcome::Pass
        } else {
            // (an exhaustive report that is neither complete nor says what stopped it: an
            // older or an edited one)
            Outcome::Incomplete(Stopped::Schedules)
        }
    }

    /// The one-line verdict.
    pub fn verdict(&self) -> String {
        let shard = self.shard.map_or(String::new(), |(i, n)| match &self.shard_from {
            Some(from) => format!(" (shard {i}/{n}, from {from})"),
            None => format!(" (shard {i}/{n})"),
        });
        let stopped = self
            .stopped
            .map_or(String::new(), |s| format!(" (stopped: {})", s.describe()));
        // (states that differ only in which process is which counted once)
        let sym = match self.symmetry.as_str() {
            s if s.is_empty() || s.starts_with("off") => String::new(),
            s => format!(" up to symmetry, {s}"),
        };
        match (&self.counterexample, self.outcome()) {
            (Some(c), _) => format!(
                "violation of {} after {} schedules{shard}: {}{stopped}",
                c.violation.check, c.found_at, c.violation.detail
            ),
            (None, Outcome::Nothing) => format!(
                "NOTHING JUDGED: no schedule was explored{shard}: {}; this is not a pass",
                match self.stopped {
                    Some(s) => s.describe(),
                    None => "this shard's part of the tree is empty".to_string(),
                }
            ),
            (None, Outcome::Incomplete(s)) => format!(
                "INCOMPLETE: no violation in the {} schedules judged ({} distinct states{sym}, {} pruned){shard}, but {} \
                 before the {} ended; this is not a pass",
                self.schedules,
                self.states,
                self.pruned,
                s.describe(),
                if self.method == Method::Exhaustive {
                    "tree"
                } else {
                    "search"
                }
            ),
            (None, _) if self.method == Method::Exhaustive && self.prune => format!(
                "no violation in all {} schedules ({} distinct states{sym}, {} pruned) within these bounds{shard} \
                 ({}-bit state fingerprints: chance of a collision about {:.1e})",
                self.schedules, self.states, self.pruned, self.fingerprint_bits, self.collision_odds
            ),
            (None, _) if self.method == Method::Exhaustive => format!(
                "no violation in all {} schedules ({} distinct states, {} pruned) within these bounds{shard}",
                self.schedules, self.states, self.pruned
            ),
            (None, _) => format!(
                "no violation in {} sampled schedules ({}){shard}",
                self.schedules,
                self.method.name()
            ),
        }
    }
}

/// The explorer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// An option is out of range.
    #[error("{0}")]
    Options(String),
    /// The scenario, prepared for exploring, is not valid.
    #[error("{0}")]
    Scenario(String),
    /// A run could not start (a backend option, the budget).
    #[error("{0}")]
    Run(String),
}

/// The scenario an explorer runs: `sc` with the processes and requests of `opts`, every
/// distribution not varied held at its median. `doc` is the scenario file's TOML (what the
/// runnable counterexample is written from); returns both.
pub fn prepare(file: &str, text: &str, sc: &Scenario, opts: &Options) -> Result<(Scenario, String), ExploreError> {
    let mut doc: toml::Table = text
        .parse()
        .map_err(|e| ExploreError::Scenario(format!("{file}: {e}")))?;
    let set = |doc: &mut toml::Table, path: &str, v: toml::Value| {
        let (table, key) = path.split_once('.').expect("a dotted path");
        let t = doc
            .entry(table)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(t) = t {
            t.insert(key.to_string(), v);
        }
    };
    set(&mut doc, "pacer.backend", toml::Value::String(sc.pacer.backend.clone()));
    doc.insert("seed".into(), toml::Value::Integer(sc.seed as i64));
    if let Some(p) = opts.processes {
        if p == 0 {
            return Err(ExploreError::Options("--processes: at least 1 process".into()));
        }
        set(&mut doc, "processes.count", toml::Value::Integer(i64::from(p)));
    }
    if let Some(r) = opts.requests {
        let r = i64::try_from(r).ok().filter(|&r| r > 0).ok_or_else(|| {
            ExploreError::Options(format!(
                "--requests: {r} is not a number of requests from 1 to {}",
                i64::MAX
            ))
        })?;
        set(&mut doc, "processes.requests", toml::Value::Integer(r));
    }
    for site in Site::ALL {
        let d = site.dist(sc);
        if !opts.vary.contains(site) && !matches!(d, crate::dist::Dist::Constant { .. }) {
            let mut t = toml::Table::new();
            t.insert("dist".into(), "constant".into());
            t.insert("value".into(), format!("{}ns", d.median().0).into());
            set(&mut doc, site.name(), toml::Value::Table(t));
        }
    }
    let text = toml::to_string(&doc).map_err(|e| ExploreError::Scenario(format!("{file}: {e}")))?;
    let prepared = crate::registry::parse(file, &text).map_err(|e| ExploreError::Scenario(e.to_string()))?;
    Ok((prepared, text))
}

/// The sink a schedule's trace goes to: every checker (and the coverage strategy's features).
struct Judge<'a> {
    suite: crate::check::Suite,
    coverage: Option<&'a mut strategy::Coverage>,
    source: &'a Source,
    // the scenario itself kills processes (`[[faults]]` of kind `kill`)
    scenario_kills: bool,
    // how many fetches can ever start in the run, when that is bounded: closed loops of a
    // bounded number of requests, nothing that restarts a process (a restarted process starts
    // again the fetch a kill cut short) and no soft limit (a job finalised before its fetch
    // ended starts another); and how many have started
    fetch_starts: Option<u64>,
    started: u64,
    // the header, kept when the explorer has none for this scenario yet
    keep: Option<Option<Header>>,
}

impl<'a> Judge<'a> {
    fn new(
        sc: &Scenario,
        source: &'a Source,
        coverage: Option<&'a mut strategy::Coverage>,
        more: &[crate::check::CheckerSpec],
    ) -> Judge<'a> {
        let scenario_kills = sc
            .faults
            .iter()
            .any(|f| matches!(f, crate::fault::FaultSpec::Kill { .. }));
        let p = &sc.processes;
        let restarts = scenario_kills || p.hard_limit.is_some() || (source.kills_left() > 0 && source.restarts());
        let fetch_starts = p
            .requests
            .filter(|_| !restarts && p.soft_limit.is_none() && p.arrival_rate.is_none() && sc.jobs.is_none())
            .map(|r| r.saturating_mul(u64::from(p.count) * u64::from(p.threads.max(1))));
        let suite = if more.is_empty() {
            crate::check::Suite::new()
        } else {
            crate::check::Suite::with(&[crate::check::registered(), more].concat())
        };
        Judge {
            suite,
            coverage,
            source,
            scenario_kills,
            fetch_starts,
            started: 0,
            keep: None,
        }
    }
}

impl Sink for Judge<'_> {
    fn header(&mut self, h: &Header) {
        self.suite.header(h);
        if let Some(k) = &mut self.keep {
            *k = Some(h.clone());
        }
    }

    fn event(&mut self, ev: &Event) {
        self.started += u64::from(matches!(ev, Event::FetchStart { .. }));
        self.suite.event(ev);
        if let Some(c) = &mut self.coverage {
            c.event(ev);
        }
    }

    /// Every checker's copy and the fetches started (a coverage strategy's features are not
    /// saved: its runs replay).
    fn save(&self) -> Option<Box<dyn std::any::Any + Send>> {
        if self.coverage.is_some() {
            return None;
        }
        Some(Box::new((self.suite.duplicate()?, self.started)))
    }

    fn resume(&mut self, saved: &(dyn std::any::Any + Send)) {
        let (suite, started) = saved
            .downcast_ref::<(crate::check::Suite, u64)>()
            .expect("a judge's own save");
        self.suite = suite.duplicate().expect("saved, so it can be copied");
        self.started = *started;
    }

    /// What every checker keeps that its verdict can still depend on (the verdicts depend on
    /// that and the events to come, not on the trace that led there): two schedules that
    /// differ only in what no checker keeps, say the instant a denied request was denied, meet
    /// in one state. (Coverage only steers.)
    fn form(&self, f: &mut crate::form::Form) -> bool {
        // (every field named: one added later is placed here, or the build fails)
        let Judge {
            suite,
            coverage: _, // steers the walk only
            source,
            scenario_kills,
            fetch_starts,
            started,
            keep: _, // the header, read once the run ends
        } = self;
        let ahead = crate::check::Ahead {
            kills: *scenario_kills || source.kills_left() > 0,
            fetch_starts: fetch_starts.map(|n| n.saturating_sub(*started)),
        };
        suite.form(ahead, f)
    }
}

/// One schedule's outcome.
#[derive(Debug)]
pub struct Schedule {
    /// The choices it made.
    pub made: Vec<Choice>,
    /// Stopped at a state already seen.
    pub pruned: bool,
    /// What broke first (a complete run only), in the checkers' order.
    pub violation: Option<Violation>,
    /// What else broke.
    pub also: Vec<Violation>,
    /// The explorer's limits stopped it part way (unjudged).
    pub halted: bool,
    /// The checks that judged it (a complete run only).
    pub judged: Vec<&'static str>,
    /// The checks that applied to it but could not judge it (a complete run only).
    pub unjudged: Vec<&'static str>,
}

impl Schedule {
    /// The violation of `check`, if it broke.
    pub fn broke(&self, check: &str) -> Option<&Violation> {
        self.violation.iter().chain(&self.also).find(|v| v.check == check)
    }
}

/// The explorer of one scenario and backend.
pub struct Explorer {
    spec: &'static BackendSpec,
    bounds: Bounds,
    kill_mask: u32,
    seen: Option<Seen>,
    checks: Vec<String>,
    // checkers judged beside the suite's ([`Options::more_checkers`])
    more: Vec<crate::check::CheckerSpec>,
    // a violation breaks every check of `checks` (not any)
    every: bool,
    /// Runs made (schedules, pruned runs, shrinking's runs).
    pub runs: u64,
    // the trace header of the scenario its runs last ran: every run of one scenario writes the
    // same one, so it is built once, not for each run
    header: Option<(Scenario, Header)>,
    // the seen states whose continuations are being explored (depth first: those reached by
    // the last run's first decisions), each with where its continuations ended so far; states
    // are compared only past `visit_from` decisions (a shard's prefix)
    open: Vec<Open>,
    reach: crate::choice::Reach,
    visit_from: usize,
    // (tests) audit the pruning: record each run's visited states instead of pruning
    #[cfg(test)]
    audit: Option<Vec<(crate::form::Key, usize)>>,
    // the exploration's limits, held inside its runs too (`None`: none)
    limits: Option<std::sync::Arc<Limits>>,
    // pruning runs go on from the worlds earlier runs saved (`Options::replay` off), kept here
    // between runs (`crate::sim::run_saving`; dropped when the scenario or the kills change)
    branch: bool,
    saves: Option<Box<dyn std::any::Any + Send>>,
    // the seen states are formed with interchangeable processes relabeled ([`symmetry`])
    symmetry: bool,
}

/// An exploration's limits, checked between its runs and inside them
/// ([`crate::choice::Tape::halting`]).
#[derive(Debug)]
struct Limits {
    start: WallInstant,
    time: Option<Duration>,
    // the most bytes the seen states may take: `--max-memory` less the run's own estimate
    seen_bytes: u64,
    interrupt: Option<&'static AtomicI32>,
    // set when one thread's walk stops every other (a violation found, a limit reached):
    // their runs stop part way, unjudged
    abort: std::sync::atomic::AtomicBool,
}

impl Limits {
    /// What stops the exploration now, the seen states taking `seen` bytes.
    fn cut(&self, seen: u64) -> Option<Stopped> {
        if let Some(n) = self.interrupt.map(|f| f.load(Ordering::Relaxed)).filter(|&n| n != 0) {
            return Some(Stopped::Signal(n));
        }
        if self.time.is_some_and(|t| self.start.elapsed() >= t) {
            return Some(Stopped::Time);
        }
        (seen > self.seen_bytes).then_some(Stopped::Memory)
    }
}

/// A seen state being explored: where it was reached, and the latest end of its continuations
/// so far and whether the duration cut one (`None`: some end is not known).
#[derive(Clone, Debug)]
struct Open {
    state: crate::choice::Opened,
    end: Option<(u64, bool)>,
}

impl std::fmt::Debug for Explorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explorer")
            .field("backend", &self.spec.name)
            .field("runs", &self.runs)
            .finish()
    }
}

/// The kill points a backend reaches among `points` (empty: all it reaches), in
/// [`KillPoint::ALL`]'s order, and their kill mask ([`KillPoint::mask`]) for the choice source;
/// a point it never reaches is an error ([`Capabilities::reaches`](crate::registry::Capabilities::reaches)).
pub fn kill_mask(
    spec: &BackendSpec,
    sc: &Scenario,
    points: &[KillPoint],
) -> Result<(u32, Vec<KillPoint>), ExploreError> {
    let caps = spec
        .ops
        .capabilities(spec.name, sc)
        .map_err(|e| ExploreError::Run(e.to_string()))?;
    for &p in points {
        caps.reaches(spec.name, p)
            .map_err(|e| ExploreError::Options(format!("--kill-points: {e}")))?;
    }
    let kept: Vec<KillPoint> = KillPoint::ALL
        .iter()
        .copied()
        .filter(|p| (points.is_empty() || points.contains(p)) && caps.kill_points.contains(p))
        .collect();
    Ok((KillPoint::mask(&kept), kept))
}

impl Explorer {
    /// An explorer of backend `spec` within `bounds` (its `kill_points` resolved: see
    /// [`kill_mask`]); `prune`: stop runs at states seen.
    pub fn new(
        spec: &'static BackendSpec,
        bounds: Bounds,
        kill_mask: u32,
        prune: bool,
        checks: Vec<String>,
    ) -> Explorer {
        Explorer {
            spec,
            bounds,
            kill_mask,
            seen: prune.then(Seen::default),
            checks,
            more: Vec::new(),
            every: false,
            runs: 0,
            header: None,
            open: Vec::new(),
            reach: crate::choice::Reach::default(),
            visit_from: 0,
            #[cfg(test)]
            audit: None,
            limits: None,
            branch: true,
            saves: None,
            symmetry: false,
        }
    }

    /// Form the states it prunes by with interchangeable processes relabeled (symmetry
    /// reduction; the caller has checked [`symmetry`]).
    pub fn symmetric(&mut self, on: bool) {
        self.symmetry = on;
        self.saves = None;
    }

    /// Go on from saved worlds (`true`, the default) or replay every run from its start.
    pub fn branching(&mut self, on: bool) {
        self.branch = on;
        self.saves = None;
    }

    /// What stops the exploration now (its time, its memory, a signal), if anything.
    pub fn stopping(&self) -> Option<Stopped> {
        self.limits.as_ref().and_then(|l| l.cut(self.seen_bytes()))
    }

    /// The bytes the seen states take ([`Seen::bytes`]).
    pub fn seen_bytes(&self) -> u64 {
        self.seen.as_ref().map_or(0, Seen::bytes)
    }

    /// After a depth-first run: the states it added are being explored, its end (or where a
    /// run stopped at a seen state would have ended) is one of theirs and of every state still
    /// being explored, and those reached past the first `keep` decisions have had every
    /// continuation explored (the next run changes decision `keep`; `None`: the tree is done).
    fn settle(&mut self, keep: Option<usize>) {
        let reach = std::mem::take(&mut self.reach);
        self.open.extend(reach.opened.into_iter().map(|state| Open {
            state,
            end: Some((state.now, false)),
        }));
        for o in &mut self.open {
            o.end = match (o.end, reach.end) {
                (Some((a, c)), Some((b, d)))
                    if crate::form::plant::planted(crate::form::plant::Plant::CutForgotten) =>
                {
                    Some((a.max(b), c && d))
                }
                (Some((a, c)), Some((b, d))) => Some((a.max(b), c || d)),
                _ => None,
            };
        }
        let Some(seen) = self.seen.as_ref() else {
            self.open.clear();
            return;
        };
        while let Some(o) = self.open.last() {
            if keep.is_some_and(|k| o.state.depth <= k) {
                break;
            }
            let done = match o.end {
                Some((end, cut)) => Done::Ends {
                    within: end.saturating_sub(o.state.now),
                    cut,
                },
                None => Done::Unknown,
            };
            seen.close(o.state.at, done);
            self.open.pop();
        }
    }

    /// The kill budget of its runs.
    pub fn kills(&self) -> u32 {
        self.bounds.kills
    }

    /// Set the kill budget of its runs (shrinking tries a case without kills).
    pub fn set_kills(&mut self, k: u32) {
        self.bounds.kills = k;
        self.saves = None;
    }

    /// Distinct states seen so far.
    pub fn states(&self) -> u64 {
        self.seen.as_ref().map_or(0, Seen::len)
    }

    /// Run `sc` once: `prefix` first, then `strategy`; `prune`: may stop at a state seen.
    pub fn run(
        &mut self,
        sc: &Scenario,
        prefix: Vec<u32>,
        strategy: Box<dyn crate::choice::Strategy>,
        prune: bool,
        coverage: Option<&mut strategy::Coverage>,
    ) -> Result<Schedule, ExploreError> {
        self.runs += 1;
        let mut tape = Tape::steer(self.bounds.clone(), self.kill_mask, prefix, strategy);
        if let Some(l) = &self.limits {
            // (the seen states are in the tape while it prunes, and grow there)
            let (l, floor) = (l.clone(), self.seen_bytes());
            tape = tape.halting(Box::new(move |bytes| {
                l.abort.load(Ordering::Relaxed) || l.cut(bytes.max(floor)).is_some()
            }));
        }
        let pruning = prune && self.seen.is_some();
        if pruning && let Some(seen) = &self.seen {
            tape = tape.pruning(seen.clone(), self.visit_from);
        }
        #[cfg(test)]
        if self.audit.is_some() {
            tape = tape.auditing();
        }
        tape = tape.relabeling(self.symmetry);
        let src = Source::new(tape);
        // (an auditing run records every state past its prefix as a replayed run would: it
        // replays; a coverage strategy's judge cannot be saved, `Judge::save`, and its explorer
        // stops saving at its first run)
        #[cfg(test)]
        let audited = self.audit.is_some();
        #[cfg(not(test))]
        let audited = false;
        let saving = pruning && self.branch && !audited;
        let mut judge = Judge::new(sc, &src, coverage, &self.more);
        let res = self.simulate(sc, &src, &mut judge, saving);
        if pruning {
            self.reach = src.take_reach();
        }
        #[cfg(test)]
        if self.audit.is_some() {
            self.audit = Some(src.take_audit());
            self.reach = src.take_reach();
        }
        let made = src.made();
        if src.halted() {
            return Ok(Schedule {
                made,
                pruned: true,
                violation: None,
                also: Vec::new(),
                halted: true,
                judged: Vec::new(),
                unjudged: Vec::new(),
            });
        }
        match res {
            Ok(o) if o.pruned => Ok(Schedule {
                made,
                pruned: true,
                violation: None,
                also: Vec::new(),
                halted: false,
                judged: Vec::new(),
                unjudged: Vec::new(),
            }),
            Ok(_) => {
                // the statuses alone; the few schedules that break a check are run again for
                // their witness text (the same choices make the same run)
                let mut verdicts = judge.suite.statuses();
                let (judged, unjudged) = verdicts.iter().fold((Vec::new(), Vec::new()), |(mut j, mut u), v| {
                    if v.judged() {
                        j.push(v.name)
                    } else {
                        u.push(v.name)
                    }
                    (j, u)
                });
                let violates = |verdicts: &[crate::check::Verdict]| {
                    if self.every && !self.checks.is_empty() {
                        self.checks
                            .iter()
                            .all(|c| verdicts.iter().any(|v| v.name == c && v.failed()))
                    } else {
                        verdicts.iter().any(|v| self.counts(v))
                    }
                };
                if !violates(&verdicts) {
                    verdicts.clear();
                } else {
                    verdicts = self.witnessed(sc, &made)?;
                }
                let broken: Vec<Violation> = verdicts
                    .into_iter()
                    .filter(|v| self.counts(v))
                    .map(|v| Violation {
                        check: v.name.to_string(),
                        detail: v.detail,
                    })
                    .collect();
                Ok(Schedule {
                    made,
                    pruned: false,
                    violation: broken.first().cloned(),
                    also: broken.into_iter().skip(1).collect(),
                    halted: false,
                    judged,
                    unjudged,
                })
            }
            Err(crate::builder::SimError::NoProgress(e)) => Ok(Schedule {
                made,
                pruned: false,
                also: Vec::new(),
                halted: false,
                judged: vec!["liveness"],
                unjudged: Vec::new(),
                violation: (self.checks.is_empty()
                    || if self.every {
                        self.checks.iter().all(|c| c == "liveness")
                    } else {
                        self.checks.iter().any(|c| c == "liveness")
                    })
                .then(|| Violation {
                    check: "liveness".into(),
                    detail: format!("the run stopped making progress: {e}"),
                }),
            }),
            Err(e) => Err(ExploreError::Run(e.to_string())),
        }
    }

    /// Whether `v` is a violation this exploration looks for (`--checks`, or any).
    fn counts(&self, v: &crate::check::Verdict) -> bool {
        v.failed() && (self.checks.is_empty() || self.checks.iter().any(|c| c == v.name))
    }

    /// Simulate `sc` steered by `src` into `judge`, with the header this explorer keeps for the
    /// scenario (built by its first run of it, and kept from then on).
    fn simulate(
        &mut self,
        sc: &Scenario,
        src: &Source,
        judge: &mut Judge,
        saving: bool,
    ) -> Result<crate::sim::Outcome, crate::builder::SimError> {
        if let Some((_, h)) = self.header.as_ref().filter(|(s, _)| s == sc) {
            if saving {
                return self
                    .spec
                    .ops
                    .simulate_saving(self.spec.name, sc, src, h, judge, &mut self.saves);
            }
            return self.spec.ops.simulate_headed(self.spec.name, sc, Some(src), h, judge);
        }
        // (another scenario: the worlds saved were another's)
        self.saves = None;
        judge.keep = Some(None);
        let res = self.spec.ops.simulate_from(self.spec.name, sc, Some(src), judge);
        if let Some(Some(h)) = judge.keep.take() {
            self.header = Some((sc.clone(), h));
        }
        res
    }

    /// The verdicts, with their witness text, of the complete schedule that made `made`:
    /// replayed without pruning (it reached its end, so pruning never stopped it) and without
    /// steering coverage.
    fn witnessed(&mut self, sc: &Scenario, made: &[Choice]) -> Result<Vec<crate::check::Verdict>, ExploreError> {
        let prefix = made.iter().map(|c| c.index).collect();
        let src = Source::new(Tape::steer(
            self.bounds.clone(),
            self.kill_mask,
            prefix,
            Box::new(crate::choice::First),
        ));
        let mut judge = Judge::new(sc, &src, None, &self.more);
        self.simulate(sc, &src, &mut judge, false)
            .map_err(|e| ExploreError::Run(e.to_string()))?;
        if src.made() != made {
            return Err(ExploreError::Run(
                "a schedule replayed for its witness made other choices (the simulator is not deterministic)".into(),
            ));
        }
        Ok(judge.suite.verdicts())
    }
}

/// The next prefix depth first after a run that made `made`: the deepest choice (below
/// `floor` not considered: another shard's) that has a way not yet taken, taken; `None` when
/// every way of every choice was.
pub fn next_prefix(made: &[Choice], floor: usize) -> Option<Vec<u32>> {
    next_in_order(made, floor, |_, index, _| index)
}

/// [`next_prefix`] in the exhaustive walk's order ([`crate::choice::walk_rank`]: a value's
/// slowest draw first), after a run past its prefix with [`crate::choice::Walk`].
pub fn next_walk(made: &[Choice], floor: usize) -> Option<Vec<u32>> {
    next_in_order(made, floor, crate::choice::walk_rank)
}

/// [`next_prefix`] with each choice's ways taken in `order` (a way's rank from its kind, index
/// and count of ways; its own inverse: the rank of a rank is the way).
fn next_in_order(made: &[Choice], floor: usize, order: impl Fn(Kind, u32, u32) -> u32) -> Option<Vec<u32>> {
    let rank = |c: &Choice| order(c.kind, c.index, c.of);
    let skip = u32::from(crate::form::plant::planted(crate::form::plant::Plant::WalkSkipsLast));
    let j = (floor..made.len())
        .rev()
        .find(|&j| rank(&made[j]) + 1 + skip < made[j].of)?;
    let mut p: Vec<u32> = made[..j].iter().map(|c| c.index).collect();
    p.push(order(made[j].kind, rank(&made[j]) + 1, made[j].of));
    Some(p)
}

/// The choice depth a shard of `count` splits the tree at.
fn shard_depth(count: u64) -> usize {
    // (at least 8 subtrees per shard when every choice is binary)
    (64 - (count.max(1) * 8 - 1).leading_zeros()) as usize
}

/// Progress, as the explorer reports it.
#[derive(Copy, Clone, Debug)]
pub struct Progress {
    /// Complete schedules so far.
    pub schedules: u64,
    /// Distinct states so far.
    pub states: u64,
    /// Pruned runs so far.
    pub pruned: u64,
    /// Deepest run so far.
    pub depth: usize,
    /// Seconds so far.
    pub seconds: f64,
}

/// Explore `sc` (already prepared: [`prepare`]; `text` its TOML) with backend `spec`.
/// `progress` is called now and then.
pub fn explore(
    spec: &'static BackendSpec,
    sc: &Scenario,
    text: &str,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, ExploreError> {
    let start = WallInstant::now();
    if opts.bounds.quantiles.is_empty() || opts.bounds.quantiles.iter().any(|q| !(*q > 0.0 && *q < 1.0)) {
        return Err(ExploreError::Options(
            "--values: each quantile must lie strictly between 0 and 1".into(),
        ));
    }
    if let Method::Pct { depth } = opts.method
        && !(1..=MAX_PCT_DEPTH).contains(&depth)
    {
        return Err(ExploreError::Options(format!(
            "--depth: a bug depth is 1 to {MAX_PCT_DEPTH} (the bound pct states is of no use past that), not {depth}"
        )));
    }
    if let Some((i, n)) = opts.shard
        && i >= n
    {
        return Err(ExploreError::Options(format!(
            "--shard {i}/{n}: the index must be below the count"
        )));
    }
    crate::budget::check(sc, 1).map_err(|e| ExploreError::Run(e.to_string()))?;
    let (mask, points) = kill_mask(spec, sc, &opts.bounds.kill_points)?;
    let bounds = Bounds {
        kill_points: points,
        ..opts.bounds.clone()
    };
    let prune = opts.prune && opts.method == Method::Exhaustive;
    let mut ex = Explorer::new(spec, bounds.clone(), mask, prune, opts.checks.clone());
    ex.branching(!opts.replay);
    let symmetric = symmetry(spec, sc, opts);
    ex.symmetric(prune && symmetric.is_ok());
    ex.more = opts.more_checkers.clone();
    ex.every = opts.every_check;
    // the memory limit holds the run's own estimate and the seen states together
    let limits = std::sync::Arc::new(Limits {
        start,
        time: opts.time,
        seen_bytes: crate::budget::limit().saturating_sub(crate::budget::estimate(sc, opts.threads.max(1) as u64).0),
        interrupt: opts.interrupt,
        abort: std::sync::atomic::AtomicBool::new(false),
    });
    ex.limits = Some(limits.clone());
    let (shard_i, shard_n) = opts.shard.unwrap_or((0, 1));
    if opts.method == Method::Exhaustive && opts.threads > 1 {
        return threaded(spec, sc, text, opts, &bounds, mask, &limits, progress);
    }
    let split = if shard_n > 1 { shard_depth(shard_n) } else { 0 };
    ex.visit_from = split;
    let mut last_progress = start;
    let (mut schedules, mut pruned, mut depth) = (0u64, 0u64, 0usize);
    let mut complete = false;
    let mut stopped: Option<Stopped> = None;
    let mut found: Option<(u64, Schedule)> = None;
    // the checks some judged schedule judged, and those that applied to one but could not
    let mut judged = std::collections::BTreeSet::new();
    let mut unjudged = std::collections::BTreeSet::new();
    let n = sc.processes.count;
    let mut k_estimate = 64usize;
    let mut coverage = strategy::Coverage::default();
    let mut rng = crate::rng::stream(opts.seed, crate::rng::Entity::Faults);
    // exhaustive: the next prefix; the subtree (at the shard depth) the last run was in
    let mut prefix: Vec<u32> = Vec::new();
    let mut subtree: (Option<Vec<u32>>, u64) = (None, 0);
    loop {
        if opts.schedules.is_some_and(|n| schedules >= n) {
            stopped = Some(Stopped::Schedules);
            break;
        }
        if let Some(s) = ex.stopping() {
            stopped = Some(s);
            break;
        }
        let s = match opts.method {
            Method::Exhaustive => {
                // (a run into another shard's subtree neither prunes nor adds states: their
                // continuations are that shard's to explore; a shard compares states only past
                // the decisions that deal the subtrees out, so that each state it adds has all
                // its continuations in one subtree)
                let head: Vec<u32> = (0..split).map(|i| prefix.get(i).copied().unwrap_or(0)).collect();
                let next = subtree.1 + u64::from(subtree.0.is_some() && subtree.0.as_ref() != Some(&head));
                let mine = shard_n == 1 || next % shard_n == shard_i;
                ex.run(sc, prefix.clone(), Box::new(crate::choice::Walk), prune && mine, None)?
            }
            Method::Random => ex.run(sc, Vec::new(), Box::new(strategy::Uniform::new(&mut rng)), false, None)?,
            Method::Pct { depth: d } => {
                let st = strategy::Pct::new(&mut rng, n, d, k_estimate);
                ex.run(sc, Vec::new(), Box::new(st), false, None)?
            }
            Method::Coverage => {
                let (p, st) = coverage.next(&mut rng);
                let mut c = std::mem::take(&mut coverage);
                let s = ex.run(sc, p, Box::new(st), false, Some(&mut c))?;
                coverage = c;
                if !s.halted {
                    coverage.finish(&s.made);
                }
                s
            }
        };
        if s.halted {
            // the limits stopped this run part way: it is not judged, and the exploration ends
            stopped = ex.stopping().or(Some(Stopped::Time));
            break;
        }
        depth = depth.max(s.made.len());
        k_estimate = k_estimate.max(s.made.len());
        // exhaustive with shards: a subtree that is another shard's is skipped whole
        let mut mine = true;
        if opts.method == Method::Exhaustive && shard_n > 1 {
            let head: Vec<u32> = s.made.iter().take(split).map(|c| c.index).collect();
            if subtree.0.as_ref() != Some(&head) {
                subtree = (Some(head), subtree.1 + u64::from(subtree.0.is_some()));
            }
            mine = subtree.1 % shard_n == shard_i;
        }
        if mine {
            if s.pruned {
                pruned += 1;
            } else {
                schedules += 1;
                judged.extend(s.judged.iter().copied());
                unjudged.extend(s.unjudged.iter().copied());
                if s.violation.is_some() {
                    found = Some((schedules, s));
                    break;
                }
            }
        }
        if last_progress.elapsed() >= Duration::from_millis(500) {
            last_progress = WallInstant::now();
            progress(&Progress {
                schedules,
                states: ex.states(),
                pruned,
                depth,
                seconds: start.elapsed().as_secs_f64(),
            });
        }
        if opts.method == Method::Exhaustive {
            // (another shard's subtree: backtrack above the split, skipping it whole)
            let made = if mine {
                &s.made[..]
            } else {
                &s.made[..s.made.len().min(split)]
            };
            let next = next_walk(made, 0);
            ex.settle(next.as_ref().map(|p| p.len() - 1));
            match next {
                Some(p) => prefix = p,
                None => {
                    complete = true;
                    break;
                }
            }
        }
    }
    // a sampled search ends when its schedules or its time are spent: that is its plan, not
    // a cut (the memory limit and a signal are)
    if opts.method != Method::Exhaustive && matches!(stopped, Some(Stopped::Schedules | Stopped::Time)) {
        stopped = None;
    }
    let states = ex.states();
    let counterexample = match found {
        Some((at, s)) => Some(shrink::shrink(&mut ex, sc, text, at, s, opts)?),
        None => None,
    };
    // (a signal that came while shrinking is the report's too)
    if let Some(sig @ Stopped::Signal(_)) = ex.stopping() {
        stopped = Some(sig);
    }
    let escape_bound = match opts.method {
        Method::Pct { depth: d } if counterexample.is_none() && schedules > 0 => {
            let p = 1.0 / (f64::from(n.max(1)) * (k_estimate as f64).powi(d as i32 - 1));
            Some((1.0 - p).powf(schedules as f64))
        }
        _ => None,
    };
    let counted = |c: &&&str| opts.checks.is_empty() || opts.checks.iter().any(|x| x == **c);
    Ok(Report {
        scenario: sc.name.clone(),
        backend: spec.name.to_string(),
        method: opts.method,
        processes: sc.processes.count,
        requests: sc.processes.requests,
        vary: opts.vary.clone(),
        bounds,
        schedules,
        pruned,
        states,
        depth,
        seconds: start.elapsed().as_secs_f64(),
        complete,
        shard: opts.shard,
        counterexample,
        escape_bound,
        stopped,
        text_hash: text_hash(text),
        prune,
        checks: opts.checks.clone(),
        not_judged: unjudged
            .difference(&judged)
            .filter(counted)
            .map(|c| c.to_string())
            .collect(),
        shard_from: opts.shard_from.clone(),
        threads: 1,
        fingerprint_bits: if prune { crate::form::WIDTH } else { 0 },
        collision_odds: if prune {
            crate::form::collision_odds(states)
        } else {
            0.0
        },
        symmetry: symmetry_text(&symmetric, prune),
    })
}

/// What one thread's walk of the tree did ([`threaded`]).
#[derive(Default)]
struct Walked {
    pruned: u64,
    depth: usize,
    judged: std::collections::BTreeSet<&'static str>,
    unjudged: std::collections::BTreeSet<&'static str>,
    // the violation it found: the subtree it was in, the schedules judged by then (all
    // threads'), the schedule
    found: Option<(u64, u64, Schedule)>,
    stopped: Option<Stopped>,
    complete: bool,
}

/// What the threads of one exhaustive search share: the subtrees dealt so far, the schedules
/// judged, whether to stop.
struct Deal {
    next: std::sync::atomic::AtomicU64,
    schedules: std::sync::atomic::AtomicU64,
    pruned: std::sync::atomic::AtomicU64,
    depth: std::sync::atomic::AtomicUsize,
}

/// The tree walked on `opts.threads` threads: every thread walks the choices above the split
/// depth in the same order, numbering the subtrees below it as it meets them, and explores
/// the subtrees it takes (the next not taken, one at a time, of this shard's: every `n`th
/// from `i` of `--shard i/n`), running once into each other one only to find where it ends.
/// The threads share one seen-state table ([`Seen`]): a state is added past the split, so all
/// its continuations lie in the subtree of the thread that added it, which explores them (or
/// is stopped, and then the search is incomplete); that thread alone closes it.
///
/// The verdict is the single-threaded search's (pruning only ever stops a run at a state
/// whose continuations are explored). The counts are not: which thread reaches a state first
/// varies from run to run. A violation stops every thread; the search is then run again on
/// one thread to its first violation, so that the counterexample (and the schedule it was
/// found at) is the one `--threads 1` reports. Should a limit stop that run first, the
/// violation the threads found is reported (the one in the earliest subtree).
#[allow(clippy::too_many_arguments)]
fn threaded(
    spec: &'static BackendSpec,
    sc: &Scenario,
    text: &str,
    opts: &Options,
    bounds: &Bounds,
    mask: u32,
    limits: &std::sync::Arc<Limits>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, ExploreError> {
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    let start = limits.start;
    let threads = opts.threads;
    let (shard_i, shard_n) = opts.shard.unwrap_or((0, 1));
    // (some subtrees for each thread, to even the load; the choices above are not pruned)
    let split = shard_depth(shard_n.saturating_mul(threads as u64).saturating_mul(4));
    let prune = opts.prune;
    let seen = prune.then(Seen::default);
    let symmetric = symmetry(spec, sc, opts);
    let deal = Deal {
        next: AtomicU64::new(0),
        schedules: AtomicU64::new(0),
        pruned: AtomicU64::new(0),
        depth: AtomicUsize::new(0),
    };
    let walk = |seen: Option<Seen>| -> Result<Walked, ExploreError> {
        let mut ex = Explorer::new(spec, bounds.clone(), mask, false, opts.checks.clone());
        ex.branching(!opts.replay);
        ex.symmetric(prune && symmetric.is_ok());
        ex.more = opts.more_checkers.clone();
        ex.every = opts.every_check;
        ex.seen = seen;
        ex.limits = Some(limits.clone());
        ex.visit_from = split;
        let mut w = Walked::default();
        // the subtree this thread explores: the `k`th of this shard's
        let take = || deal.next.fetch_add(1, Ordering::Relaxed) * shard_n + shard_i;
        let mut mine_at = take();
        let mut prefix: Vec<u32> = Vec::new();
        let mut subtree: (Option<Vec<u32>>, u64) = (None, 0);
        let stop = |w: &mut Walked, why: Option<Stopped>| {
            w.stopped = why;
            limits.abort.store(true, Ordering::Relaxed);
        };
        loop {
            if limits.abort.load(Ordering::Relaxed) {
                break;
            }
            if opts
                .schedules
                .is_some_and(|n| deal.schedules.load(Ordering::Relaxed) >= n)
            {
                stop(&mut w, Some(Stopped::Schedules));
                break;
            }
            if let Some(st) = ex.stopping() {
                stop(&mut w, Some(st));
                break;
            }
            let head: Vec<u32> = (0..split).map(|i| prefix.get(i).copied().unwrap_or(0)).collect();
            let next = subtree.1 + u64::from(subtree.0.is_some() && subtree.0.as_ref() != Some(&head));
            while mine_at < next {
                mine_at = take();
            }
            let s = ex.run(
                sc,
                prefix.clone(),
                Box::new(crate::choice::Walk),
                prune && next == mine_at,
                None,
            )?;
            if s.halted {
                if !limits.abort.load(Ordering::Relaxed) || ex.stopping().is_some() {
                    stop(&mut w, ex.stopping().or(Some(Stopped::Time)));
                }
                break;
            }
            w.depth = w.depth.max(s.made.len());
            deal.depth.fetch_max(s.made.len(), Ordering::Relaxed);
            let head: Vec<u32> = s.made.iter().take(split).map(|c| c.index).collect();
            if subtree.0.as_ref() != Some(&head) {
                subtree = (Some(head), subtree.1 + u64::from(subtree.0.is_some()));
            }
            let mine = subtree.1 == mine_at;
            if mine {
                if s.pruned {
                    w.pruned += 1;
                    deal.pruned.fetch_add(1, Ordering::Relaxed);
                } else {
                    let at = deal.schedules.fetch_add(1, Ordering::Relaxed) + 1;
                    w.judged.extend(s.judged.iter().copied());
                    w.unjudged.extend(s.unjudged.iter().copied());
                    if s.violation.is_some() {
                        w.found = Some((subtree.1, at, s));
                        stop(&mut w, None);
                        break;
                    }
                }
            }
            let made = if mine {
                &s.made[..]
            } else {
                &s.made[..s.made.len().min(split)]
            };
            let next = next_walk(made, 0);
            ex.settle(next.as_ref().map(|p| p.len() - 1));
            match next {
                Some(p) => prefix = p,
                None => {
                    w.complete = true;
                    break;
                }
            }
        }
        Ok(w)
    };
    let results: Vec<Result<Walked, ExploreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(|| walk(seen.clone()))).collect();
        let mut last = std::time::Instant::now();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            if last.elapsed() >= Duration::from_millis(500) {
                last = std::time::Instant::now();
                progress(&Progress {
                    schedules: deal.schedules.load(Ordering::Relaxed),
                    states: seen.as_ref().map_or(0, Seen::len),
                    pruned: deal.pruned.load(Ordering::Relaxed),
                    depth: deal.depth.load(Ordering::Relaxed),
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ExploreError::Run("a thread of the search panicked".into())))
            })
            .collect()
    });
    let mut walks = Vec::with_capacity(threads);
    for r in results {
        walks.push(r?);
    }
    let states = seen.as_ref().map_or(0, Seen::len);
    let schedules = deal.schedules.load(Ordering::Relaxed);
    // the violation in the earliest subtree, if any thread found one
    let found = walks.iter_mut().filter_map(|w| w.found.take()).min_by_key(|f| f.0);
    let mut stopped = walks.iter().find_map(|w| w.stopped);
    let complete = found.is_none() && stopped.is_none() && walks.iter().all(|w| w.complete);
    let mut judged = std::collections::BTreeSet::new();
    let mut unjudged = std::collections::BTreeSet::new();
    for w in &walks {
        judged.extend(w.judged.iter().copied());
        unjudged.extend(w.unjudged.iter().copied());
    }
    let mut counterexample = None;
    if let Some((_, at, s)) = found {
        // one thread, to its first violation: the counterexample `--threads 1` reports
        limits.abort.store(false, Ordering::Relaxed);
        let again = Options {
            threads: 1,
            time: opts.time.map(|t| t.saturating_sub(start.elapsed())),
            ..opts.clone()
        };
        let mut r = explore(spec, sc, text, &again, progress)?;
        if r.counterexample.is_some() {
            r.seconds = start.elapsed().as_secs_f64();
            r.threads = threads;
            return Ok(r);
        }
        stopped = r.stopped.or(stopped);
        let mut ex = Explorer::new(spec, bounds.clone(), mask, false, opts.checks.clone());
        ex.branching(!opts.replay);
        ex.more = opts.more_checkers.clone();
        ex.every = opts.every_check;
        ex.limits = Some(limits.clone());
        counterexample = Some(shrink::shrink(&mut ex, sc, text, at, s, opts)?);
    }
    if let Some(sig @ Stopped::Signal(_)) = limits.cut(0) {
        stopped = Some(sig);
    }
    let counted = |c: &&&str| opts.checks.is_empty() || opts.checks.iter().any(|x| x == **c);
    Ok(Report {
        scenario: sc.name.clone(),
        backend: spec.name.to_string(),
        method: opts.method,
        processes: sc.processes.count,
        requests: sc.processes.requests,
        vary: opts.vary.clone(),
        bounds: bounds.clone(),
        schedules,
        pruned: deal.pruned.load(Ordering::Relaxed),
        states,
        depth: walks.iter().map(|w| w.depth).max().unwrap_or(0),
        seconds: start.elapsed().as_secs_f64(),
        complete,
        shard: opts.shard,
        counterexample,
        escape_bound: None,
        stopped: if complete { None } else { stopped },
        text_hash: text_hash(text),
        prune,
        checks: opts.checks.clone(),
        not_judged: unjudged
            .difference(&judged)
            .filter(counted)
            .map(|c| c.to_string())
            .collect(),
        shard_from: opts.shard_from.clone(),
        threads,
        fingerprint_bits: if prune { crate::form::WIDTH } else { 0 },
        collision_odds: if prune {
            crate::form::collision_odds(states)
        } else {
            0.0
        },
        symmetry: symmetry_text(&symmetric, prune),
    })
}

/// A scenario text's hash as a report records it: FNV-1a 64, 16 hex digits.
pub fn text_hash(text: &str) -> String {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{h:016x}")
}

/// Kills a choice sequence fires.
pub fn kills(made: &[Choice]) -> u32 {
    made.iter().filter(|c| c.kind == Kind::Kill && c.index == 1).count() as u32
}

/// Merge the reports of a sharded exploration into one: counts summed; a violation if any
/// shard found one (the first shard's that did); complete when every shard was.
///
/// Refused, with what differs: reports of different explorations (scenario text, backend,
/// strategy, processes, requests, distributions varied, bounds, pruning, checks, shard count),
/// a shard index not below the count, a shard given twice or missing, a report that
/// contradicts itself (complete yet stopped, complete and sampled), counts that overflow.
pub fn merge(reports: &[Report]) -> Result<Report, String> {
    let first = reports.first().ok_or("no reports to merge")?;
    let count = first.shard.map_or(1, |s| s.1);
    if count == 0 {
        return Err("report 1: a shard count of 0".into());
    }
    let mut shards = std::collections::BTreeSet::new();
    for (k, r) in reports.iter().enumerate() {
        let k = k + 1;
        if r.text_hash.is_empty() {
            return Err(format!(
                "report {k}: no scenario hash (`text_hash`): made by an older pacesim; explore the shards again"
            ));
        }
        let differs = [
            ("scenario", r.scenario != first.scenario),
            ("backend", r.backend != first.backend),
            ("strategy (method)", r.method != first.method),
            ("processes", r.processes != first.processes),
            ("requests", r.requests != first.requests),
            ("distributions varied (vary)", r.vary != first.vary),
            ("bounds", r.bounds != first.bounds),
            ("pruning (prune)", r.prune != first.prune),
            ("checks", r.checks != first.checks),
            // (the scenario as explored: its other fields, its seed)
            ("scenario text (text_hash)", r.text_hash != first.text_hash),
        ];
        if let Some((what, _)) = differs.iter().find(|d| d.1) {
            return Err(format!(
                "report {k} is of another exploration than report 1: its {what} differs \
                 ({}/{} and {}/{}); merge only the shards of one exploration",
                first.scenario, first.backend, r.scenario, r.backend
            ));
        }
        let (i, n) = r.shard.unwrap_or((0, 1));
        if n != count {
            return Err(format!(
                "report {k}: a shard count of {n}, report 1's is {count}: reports of different shard counts"
            ));
        }
        if i >= n {
            return Err(format!("report {k}: shard {i}/{n}: the index is not below the count"));
        }
        if !shards.insert(i) {
            return Err(format!("report {k}: shard {i}/{n} is given twice"));
        }
        if r.complete && (r.stopped.is_some() || r.method != Method::Exhaustive) {
            return Err(format!(
                "report {k}: says it is complete, yet {}",
                if r.method != Method::Exhaustive {
                    "a sampled search is never complete".to_string()
                } else {
                    format!(
                        "it was stopped ({})",
                        r.stopped.map_or(String::new(), Stopped::describe)
                    )
                }
            ));
        }
        if let Some(c) = &r.counterexample {
            check_case(r, c).map_err(|e| format!("report {k}: {e}"))?;
        }
    }
    if shards.len() as u64 != count {
        let missing: Vec<u64> = (0..count).filter(|i| !shards.contains(i)).take(10).collect();
        return Err(format!(
            "{} of {count} shards given (each exactly once); missing: {}{}",
            shards.len(),
            missing
                .iter()
                .map(|i| format!("{i}/{count}"))
                .collect::<Vec<_>>()
                .join(", "),
            if (count - shards.len() as u64) > missing.len() as u64 {
                ", ..."
            } else {
                ""
            }
        ));
    }
    let sum = |what: &str, f: &dyn Fn(&Report) -> u64| -> Result<u64, String> {
        reports
            .iter()
            .try_fold(0u64, |a, r| a.checked_add(f(r)))
            .ok_or_else(|| format!("the shards' {what} overflow when summed: not the counts of one exploration"))
    };
    let mut m = first.clone();
    m.schedules = sum("schedules", &|r| r.schedules)?;
    m.pruned = sum("pruned runs", &|r| r.pruned)?;
    m.states = sum("states", &|r| r.states)?;
    // (shards' states are counted apart: the bound over their sum, as if one table held them)
    m.collision_odds = crate::form::collision_odds(m.states);
    m.depth = reports.iter().map(|r| r.depth).max().unwrap_or(0);
    m.seconds = reports
        .iter()
        .map(|r| r.seconds)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .sum();
    m.complete = reports.iter().all(|r| r.complete);
    m.stopped = reports.iter().find_map(|r| r.stopped);
    m.counterexample = reports.iter().find_map(|r| r.counterexample.clone());
    // a check not judged is one no shard judged: not judged in every shard that judged anything
    m.not_judged = first
        .not_judged
        .iter()
        .filter(|c| {
            reports
                .iter()
                .filter(|r| r.schedules > 0)
                .all(|r| r.not_judged.contains(c))
        })
        .cloned()
        .collect();
    // (pct: each shard's own seeds; the bug escapes all of them)
    m.escape_bound = match m.counterexample {
        None => reports.iter().map(|r| r.escape_bound).product::<Option<f64>>(),
        Some(_) => None,
    };
    m.shard = None;
    m.shard_from = None;
    Ok(m)
}

/// A report's counterexample is of its exploration, no larger: its scenario parses, names the
/// report's scenario and backend, has no more processes, requests or time than were explored,
/// and is within `--max-memory`. (`--out` runs it again to write its trace.)
fn check_case(r: &Report, c: &Counterexample) -> Result<(), String> {
    let sc = crate::registry::parse("the counterexample's scenario", &c.scenario).map_err(|e| e.to_string())?;
    if sc.name != r.scenario || sc.pacer.backend != r.backend {
        return Err(format!(
            "its counterexample is of {}/{}, not of the exploration {}/{}",
            sc.name, sc.pacer.backend, r.scenario, r.backend
        ));
    }
    let seconds = sc.duration.as_secs_f64();
    if sc.processes.count > r.processes
        || sc.processes.requests.unwrap_or(u64::MAX) > r.requests.unwrap_or(u64::MAX)
        || seconds > c.found.seconds + 1e-9
    {
        return Err(format!(
            "its counterexample ({} processes x {} requests, {seconds} s) is larger than what was explored \
             ({} processes x {} requests, {} s)",
            sc.processes.count,
            sc.processes.requests.map_or("open".into(), |q| q.to_string()),
            r.processes,
            r.requests.map_or("open".into(), |q| q.to_string()),
            c.found.seconds
        ));
    }
    crate::budget::check(&sc, 1).map_err(|e| format!("its counterexample: {e}"))
}

/// `pacesim explore FILE`: load the scenario (with `backend`, `seed` if given), prepare it,
/// explore it, and with `out` write the report and any counterexample there ([`write()`]).
pub fn from_file(
    file: &std::path::Path,
    backend: Option<&str>,
    seed: Option<u64>,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Report, Scenario), ExploreError> {
    let sc = crate::run::load(file, seed, backend).map_err(|e| ExploreError::Scenario(e.to_string()))?;
    let text = std::fs::read_to_string(file).map_err(|e| ExploreError::Scenario(format!("{}: {e}", file.display())))?;
    let spec = crate::registry::spec(&sc.pacer.backend)
        .ok_or_else(|| ExploreError::Scenario(format!("unknown backend `{}`", sc.pacer.backend)))?;
    let (prepared, text) = prepare(&file.display().to_string(), &text, &sc, opts)?;
    let report = explore(spec, &prepared, &text, opts, progress)?;
    Ok((report, prepared))
}

/// The file stem a report's outputs share: `<scenario>-<backend>`.
pub fn stem(r: &Report) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("{}-{}", clean(&r.scenario), clean(&r.backend))
}

/// Write `r` into `dir`: `<stem>.json` (the report), `<stem>.md` (its figures), and for a
/// counterexample `<stem>.case.toml` (the shrunk scenario), `<stem>.choices.json` (its
/// choices: `pacesim run <stem>.case.toml --choices <stem>.choices.json` replays it),
/// `<stem>.trace.jsonl` and `<stem>-rate.svg`/`.png` (the failing run's rate, the violation
/// marked). Returns the files written.
pub fn write(dir: &std::path::Path, r: &Report) -> Result<Vec<std::path::PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stem = stem(r);
    let mut files = Vec::new();
    let put = |name: String, text: String, files: &mut Vec<std::path::PathBuf>| -> Result<(), String> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        files.push(p);
        Ok(())
    };
    let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())? + "\n";
    put(format!("{stem}.json"), json, &mut files)?;
    let mut md = markdown(r);
    if let Some(c) = &r.counterexample {
        put(format!("{stem}.case.toml"), c.scenario.clone(), &mut files)?;
        let sc = crate::registry::parse(&format!("{stem}.case.toml"), &c.scenario).map_err(|e| e.to_string())?;
        // (it runs again below, for its trace: within the memory limit as every run)
        crate::budget::check(&sc, 1).map_err(|e| e.to_string())?;
        let cf = crate::run::choices::ChoiceFile {
            version: crate::run::choices::VERSION,
            scenario: sc.name.clone(),
            backend: sc.pacer.backend.clone(),
            seed: sc.seed,
            scenario_hash: Some(crate::run::choices::text_hash(&c.scenario)),
            body: crate::run::choices::Body::Steered {
                bounds: Bounds {
                    kills: c.kills,
                    ..r.bounds.clone()
                },
                choices: c.choices.clone(),
            },
        };
        let choices = dir.join(format!("{stem}.choices.json"));
        cf.write(&choices)?;
        files.push(choices);
        // the failing run again: its trace and its rate plot, the violation marked
        let trace_path = dir.join(format!("{stem}.trace.jsonl"));
        let trace = std::fs::File::create(&trace_path).map_err(|e| format!("{}: {e}", trace_path.display()))?;
        let mut tl = crate::timeline::Timeline::new();
        let summary = crate::registry::simulate_from(
            &sc,
            Some(&cf.source()),
            Some(Box::new(std::io::BufWriter::new(trace))),
            Some(&mut tl),
        )
        .map_err(|e| e.to_string())?;
        files.push(trace_path);
        let mut fig = crate::plot::rate::RateFigure::new(
            &sc.name,
            sc.seed,
            sc.pacer.rate,
            &[(&r.backend, &tl, summary.achieved_rate)],
        );
        let (a, b) = violation_window(&c.violation, &sc, tl.end());
        fig.violation = Some((a, b, c.violation.check.clone()));
        let plot = format!("{stem}-rate");
        crate::plot::write(&fig, dir, &plot).map_err(|e| e.to_string())?;
        files.push(dir.join(format!("{plot}.png")));
        md.push_str(&format!(
            "\n![the failing run's arrival rate, the violation marked]({plot}.png)\n\n\
             Replay: `{} run {stem}.case.toml --choices {stem}.choices.json`\n",
            crate::summary::program()
        ));
    }
    put(format!("{stem}.md"), md, &mut files)?;
    Ok(files)
}

/// Where a violation shows on the time axis, in seconds: the span its witness names (`from
/// 0.005s to 0.300s`), or the instant (`at 1.234567s`) as the window of `burst + 1` intervals
/// that ends there; the whole run when the witness names neither.
fn violation_window(v: &Violation, sc: &Scenario, end_ns: u64) -> (f64, f64) {
    // `<word>1.25s`: the seconds right after the word
    let after = |word: &str| {
        v.detail.split(word).skip(1).find_map(|rest| {
            let num: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            rest[num.len()..]
                .starts_with('s')
                .then(|| num.parse::<f64>().ok())
                .flatten()
        })
    };
    // a witness that names a span (self_heal's stall: "from 0.005s to 0.300s") marks it
    if let (Some(a), Some(b)) = (after("from "), after(" to "))
        && a <= b
    {
        return (a, b);
    }
    match after(" at ") {
        Some(t) => {
            let w = (sc.checks.burst.max(1) + 1) as f64 / sc.pacer.rate;
            ((t - w).max(0.0), t)
        }
        None => (0.0, end_ns as f64 / 1e9),
    }
}

/// The report's figures, as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# explore: {} with `{}`\n\n{}\n\n| | |\n|---|---|\n",
        r.scenario,
        r.backend,
        r.verdict()
    );
    let mut row = |k: &str, v: String| s.push_str(&format!("| {k} | {v} |\n"));
    row("strategy", r.method.name().to_string());
    row(
        "bounds",
        format!(
            "{} processes x {} requests; values at quantiles {:?} of {}; at most {} kills at {}; order width {}",
            r.processes,
            r.requests.map_or("open".to_string(), |q| q.to_string()),
            r.bounds.quantiles,
            r.vary.iter().map(|v| v.name()).collect::<Vec<_>>().join(", "),
            r.bounds.kills,
            if r.bounds.kill_points.is_empty() {
                "no point".to_string()
            } else {
                r.bounds
                    .kill_points
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            r.bounds.order_width
        ),
    );
    if r.threads > 1 {
        row("threads", r.threads.to_string());
    }
    row("schedules judged", r.schedules.to_string());
    if let Some(st) = r.stopped {
        row("stopped before its end", st.describe());
    }
    if !r.not_judged.is_empty() {
        row("checks no schedule judged", r.not_judged.join(", "));
    }
    row("runs pruned at a state seen", r.pruned.to_string());
    row("distinct states", r.states.to_string());
    if !r.symmetry.is_empty() {
        row("symmetry reduction", r.symmetry.clone());
    }
    if r.prune {
        row(
            "state fingerprints",
            format!(
                "{} bits; chance two distinct states collided about {:.1e} (birthday bound)",
                r.fingerprint_bits, r.collision_odds
            ),
        );
    }
    row("deepest run (choices)", r.depth.to_string());
    row("time", format!("{:.2} s", r.seconds));
    row("schedules per second", format!("{:.0}", r.rate()));
    if let Some(b) = r.escape_bound {
        row(
            "pct: a depth bug escapes every run with probability at most",
            format!("{b:.3e}"),
        );
    }
    if let Some(c) = &r.counterexample {
        row("violation", format!("{}: {}", c.violation.check, c.violation.detail));
        row(
            "found",
            format!(
                "schedule {}: {} processes, {} kills, {} choices",
                c.found_at, c.found.processes, c.found.kills, c.found.choices
            ),
        );
        row(
            "shrunk",
            format!(
                "{} processes x {} requests, {} kills, {} choices ({} runs)",
                c.shrunk.processes,
                c.shrunk.requests.map_or("open".to_string(), |q| q.to_string()),
                c.shrunk.kills,
                c.shrunk.choices,
                c.shrink_runs
            ),
        );
    }
    s
}

/// The report's words for [`symmetry`]'s answer (empty when the search does not prune).
fn symmetry_text(s: &Result<u32, String>, prune: bool) -> String {
    match s {
        _ if !prune => String::new(),
        Ok(n) => format!("{n} interchangeable processes"),
        Err(why) => format!("off: {why}"),
    }
}

/// Whether an exhaustive search of `sc` with backend `spec` may reduce by symmetry, merging
/// states that differ only in which process is which: `Ok(n)`, the processes interchangeable;
/// `Err(why not)`. Every process of a scenario runs alike (one `[processes]` table), so they
/// are interchangeable unless something names one by its id or tells them apart: the
/// scenario's faults and broker jobs (which name processes), open-loop arrivals (each process
/// draws its own), platforms, a backend whose sides do not declare that they keep no process
/// id they do not rename ([`crate::backend::StoreSide::SYMMETRIC`]), or an order bound
/// narrower than the candidates (which would order the first few by id). The checkers say
/// so state by state ([`crate::check::Checker::relabels`]; a state whose parts cannot rename
/// is formed with ids: [`crate::form::Form::raw_pids`]).
pub fn symmetry(spec: &BackendSpec, sc: &Scenario, opts: &Options) -> Result<u32, String> {
    let n = sc.processes.count;
    let why = if !opts.symmetry {
        "--no-symmetry"
    } else if opts.method != Method::Exhaustive || !opts.prune {
        "the search does not prune"
    } else if n < 2 {
        "one process"
    } else if let Some(why) = sc.tells_processes_apart() {
        why
    } else if u64::from(opts.bounds.order_width) < u64::from(n) * u64::from(sc.processes.threads.max(1)) {
        "--order-width is below the threads that can reach the store at once"
    } else {
        let caps = spec.ops.capabilities(spec.name, sc).map_err(|e| e.to_string())?;
        if caps.symmetric {
            return Ok(n);
        }
        "the backend's sides do not declare SYMMETRIC"
    };
    Err(why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice::{Opened, Reach};
    use crate::form::{Form, Key};

    fn key(now: u64, w: u64) -> Key {
        let mut f = Form::new(now);
        f.word(w);
        f.key()
    }

    #[test]
    fn a_seen_state_is_closed_with_its_continuations_latest_end_when_the_walk_leaves_it() {
        let spec = crate::registry::spec("row").expect("row");
        let mut ex = Explorer::new(spec, Bounds::default(), 0, true, Vec::new());
        let seen = ex.seen.as_mut().expect("prunes");
        let (a, b) = (seen.insert(key(10, 1)), seen.insert(key(20, 2)));
        // a run added A (after 1 decision, at 10) and B (after 3, at 20) and ended at 50; the
        // next run changes decision 2: B's continuations are all explored, A's are not
        ex.reach = Reach {
            opened: vec![
                Opened {
                    at: a,
                    depth: 1,
                    now: 10,
                },
                Opened {
                    at: b,
                    depth: 3,
                    now: 20,
                },
            ],
            end: Some((50, false)),
        };
        ex.settle(Some(2));
        let seen = ex.seen.as_ref().expect("prunes");
        assert_eq!(
            seen.find(&key(30, 2), 1000),
            Some(Some((60, false))),
            "B: 30 after it, shifted"
        );
        assert_eq!(seen.find(&key(15, 1), 1000), None, "A is still open");
        // the next run stopped at a state whose continuations end by 90; the tree is done
        ex.reach = Reach {
            opened: Vec::new(),
            end: Some((90, false)),
        };
        ex.settle(None);
        let seen = ex.seen.as_ref().expect("prunes");
        assert_eq!(seen.find(&key(12, 1), 1000), Some(Some((92, false))), "A: 80 after it");
        assert_eq!(seen.find(&key(950, 1), 1000), None, "shifted past the duration");
        // a run whose end is not known leaves the states it belongs to unusable elsewhen
        let c = ex.seen.as_mut().expect("prunes").insert(key(5, 3));
        ex.reach = Reach {
            opened: vec![Opened {
                at: c,
                depth: 0,
                now: 5,
            }],
            end: None,
        };
        ex.settle(None);
        let seen = ex.seen.as_ref().expect("prunes");
        assert_eq!(seen.find(&key(7, 3), 1000), None);
        assert_eq!(
            seen.find(&key(5, 3), 1000),
            Some(None),
            "at its own instant it still covers"
        );
    }

    fn sc() -> Scenario {
        crate::registry::parse(
            "w.toml",
            "name = \"w\"\nduration = \"5s\"\n[pacer]\nbackend = \"row\"\nrate = 10.0\n[processes]\ncount = 2\n",
        )
        .unwrap()
    }

    fn v(detail: &str) -> Violation {
        Violation {
            check: "x".into(),
            detail: detail.into(),
        }
    }

    /// A span named by the witness is marked as it is; an instant as the burst's window that
    /// ends there; nothing named, the whole run.
    #[test]
    fn the_violation_window_follows_the_witness() {
        let sc = sc();
        assert_eq!(
            violation_window(
                &v("after pid 2 killed at 0.005s, no fetch from 0.005s to 0.300s"),
                &sc,
                0
            ),
            (0.005, 0.3)
        );
        // burst 2 at 10/s: three intervals, 0.3 s, before the instant
        let (a, b) = violation_window(&v("first violation: arrival #3 at 1.500000s (pid 1)"), &sc, 0);
        assert!((a - 1.2).abs() < 1e-9 && (b - 1.5).abs() < 1e-9, "{a} {b}");
        assert_eq!(violation_window(&v("no numbers"), &sc, 2_000_000_000), (0.0, 2.0));
    }

    /// Depth first: the deepest choice with a way left moves on, the rest is dropped.
    #[test]
    fn the_next_prefix_moves_the_deepest_open_choice() {
        let c = |index, of| Choice {
            kind: Kind::Value,
            index,
            of,
            pid: None,
        };
        assert_eq!(next_prefix(&[c(0, 3), c(2, 3), c(1, 2)], 0), Some(vec![1]));
        assert_eq!(next_prefix(&[c(0, 3), c(1, 3), c(1, 2)], 0), Some(vec![0, 2]));
        assert_eq!(next_prefix(&[c(2, 3), c(1, 2)], 0), None);
    }

    /// The exhaustive walk takes a value's slowest draw first, every other way in index order,
    /// and visits each way of each choice once.
    #[test]
    fn the_walk_takes_values_slowest_first() {
        use crate::choice::{Decision, Strategy, Walk};
        let c = |kind, index, of| Choice {
            kind,
            index,
            of,
            pid: None,
        };
        let d = |kind, of| Decision {
            kind,
            of,
            pid: None,
            depth: 0,
            pids: [0; 8],
        };
        assert_eq!(Walk.choose(&d(Kind::Value, 3)), 2);
        assert_eq!(Walk.choose(&d(Kind::Order, 3)), 0);
        assert_eq!(Walk.choose(&d(Kind::Kill, 2)), 0);
        let (v, o) = (Kind::Value, Kind::Order);
        assert_eq!(next_walk(&[c(v, 2, 3), c(o, 0, 2)], 0), Some(vec![2, 1]));
        assert_eq!(next_walk(&[c(v, 2, 3), c(o, 1, 2)], 0), Some(vec![1]));
        assert_eq!(next_walk(&[c(v, 0, 3), c(o, 1, 2)], 0), None);
        // a tree of two values of three ways: nine leaves, each once
        let mut leaves = Vec::new();
        let mut p = Some(Vec::new());
        while let Some(prefix) = p {
            let made: Vec<Choice> = (0..2).map(|i| c(v, prefix.get(i).copied().unwrap_or(2), 3)).collect();
            leaves.push((made[0].index, made[1].index));
            p = next_walk(&made, 0);
        }
        assert_eq!(leaves.len(), 9);
        assert_eq!(leaves[0], (2, 2));
        assert_eq!(leaves[8], (0, 0));
        leaves.sort();
        leaves.dedup();
        assert_eq!(leaves.len(), 9);
    }
}
