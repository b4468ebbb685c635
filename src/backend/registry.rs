//! The registry: every backend pacesim ships, one entry each. Nothing outside this file
//! matches on a backend's name.
//!
//! An entry is a [`BackendSpec`]: the name used in scenario files, a one-line summary, whether
//! the design records call it defective, its options struct (which builds the backend, see
//! [`Configure`]) and, where it has one, its live adapter ([`crate::live::adapter`]). To add a
//! backend: write its file (options struct, [`Backend`], process side, store side), implement
//! [`Configure`] for its options, and add one entry to [`REGISTRY`].

use crate::backend::options::{self, OptionError};
use crate::backend::{Backend, advisory, claim_row, local, local_divided, redis_gcra, redis_lock, row, shared_cache};
use crate::scenario::Scenario;
use crate::sim::Outcome;
use crate::trace::Sink;
use serde::de::DeserializeOwned;

/// A backend's options struct: read from `[pacer]`, it builds the backend.
pub trait Configure: DeserializeOwned + 'static {
    /// The backend it builds.
    type Backend: Backend;
    /// Validate (each option's range) and build, for scenario `sc`.
    fn build(self, sc: &Scenario) -> Result<Self::Backend, OptionError>;
}

impl Configure for row::RowOptions {
    type Backend = row::Row;
    fn build(self, sc: &Scenario) -> Result<row::Row, OptionError> {
        row::Row::new(sc, self)
    }
}
impl Configure for shared_cache::SharedCacheOptions {
    type Backend = row::Row;
    fn build(self, sc: &Scenario) -> Result<row::Row, OptionError> {
        shared_cache::new(sc, self)
    }
}
impl Configure for redis_gcra::RedisGcraOptions {
    type Backend = redis_gcra::RedisGcra;
    fn build(self, sc: &Scenario) -> Result<redis_gcra::RedisGcra, OptionError> {
        redis_gcra::RedisGcra::new(sc, self)
    }
}
impl Configure for local_divided::LocalDividedOptions {
    type Backend = local::Local;
    fn build(self, sc: &Scenario) -> Result<local::Local, OptionError> {
        local_divided::new(sc, self)
    }
}
impl Configure for advisory::AdvisoryOptions {
    type Backend = advisory::Advisory;
    fn build(self, sc: &Scenario) -> Result<advisory::Advisory, OptionError> {
        advisory::Advisory::new(sc, self)
    }
}
impl Configure for claim_row::ClaimRowOptions {
    type Backend = claim_row::ClaimRow;
    fn build(self, sc: &Scenario) -> Result<claim_row::ClaimRow, OptionError> {
        claim_row::ClaimRow::new(sc, self)
    }
}
impl Configure for redis_lock::RedisLockOptions {
    type Backend = redis_lock::RedisLock;
    fn build(self, sc: &Scenario) -> Result<redis_lock::RedisLock, OptionError> {
        redis_lock::RedisLock::new(sc, self)
    }
}
impl Configure for local::LocalOptions {
    type Backend = local::Local;
    fn build(self, sc: &Scenario) -> Result<local::Local, OptionError> {
        local::Local::new(sc, self)
    }
}

/// What the registry can do with a backend whose options type it knows (object-safe, so
/// entries of different types sit in one list).
pub trait Ops: Sync {
    /// The `[pacer]` options it reads.
    fn option_names(&self) -> &'static [&'static str];
    /// Read and check its options. `strict`: every backend option of the scenario must be
    /// one of its own.
    fn validate(&self, name: &str, sc: &Scenario, strict: bool) -> Result<(), OptionError>;
    /// The options in force, for the trace header.
    fn detail(&self, name: &str, sc: &Scenario) -> Result<serde_json::Value, OptionError>;
    /// Simulate `sc` with it, streaming the trace (header first) into `out`: fails on options
    /// it cannot run, or when the run stops making progress.
    fn simulate(&self, name: &str, sc: &Scenario, out: &mut dyn Sink) -> Result<Outcome, crate::builder::SimError>;
    /// The kill points its processes can be found at, with `sc`'s options.
    fn kill_points(&self, name: &str, sc: &Scenario) -> Result<Vec<crate::fault::KillPoint>, OptionError>;
    /// How the threads of a process use its process side, with `sc`'s options.
    fn threads(&self, name: &str, sc: &Scenario) -> Result<crate::backend::Threads, OptionError>;
}

/// The [`Ops`] of options type `O`.
#[derive(Debug)]
pub struct OpsOf<O>(std::marker::PhantomData<fn() -> O>);

impl<O> OpsOf<O> {
    /// The entry's operations.
    pub const NEW: OpsOf<O> = OpsOf(std::marker::PhantomData);
}

impl<O: Configure> OpsOf<O> {
    fn build(&self, name: &str, sc: &Scenario, strict: bool) -> Result<O::Backend, OptionError> {
        options::parse::<O>(name, &sc.pacer.options, strict)?.build(sc)
    }
}

impl<O: Configure> Ops for OpsOf<O> {
    fn option_names(&self) -> &'static [&'static str] {
        options::fields::<O>()
    }
    fn validate(&self, name: &str, sc: &Scenario, strict: bool) -> Result<(), OptionError> {
        self.build(name, sc, strict).map(drop)
    }
    fn detail(&self, name: &str, sc: &Scenario) -> Result<serde_json::Value, OptionError> {
        Ok(self.build(name, sc, false)?.detail())
    }
    fn kill_points(&self, name: &str, sc: &Scenario) -> Result<Vec<crate::fault::KillPoint>, OptionError> {
        Ok(self.build(name, sc, false)?.kill_points())
    }
    fn threads(&self, name: &str, sc: &Scenario) -> Result<crate::backend::Threads, OptionError> {
        Ok(self.build(name, sc, false)?.threads())
    }
    fn simulate(&self, name: &str, sc: &Scenario, out: &mut dyn Sink) -> Result<Outcome, crate::builder::SimError> {
        let b = self.build(name, sc, false)?;
        // the callers ([`BackendSpec::simulate`], the command line) check the budget first
        crate::builder::SimBuilder::new(sc.clone()).run_into_unbudgeted(b, out)
    }
}

/// One backend of the registry.
pub struct BackendSpec {
    /// Name in scenario files.
    pub name: &'static str,
    /// One line.
    pub summary: &'static str,
    /// True for the variants the design records call defective.
    pub defective: bool,
    /// Its options and what they build.
    pub ops: &'static dyn Ops,
    /// Its live adapter: the real store operation, run by live workers. `None`: simulator only.
    pub live: Option<&'static dyn crate::live::adapter::LiveSpec>,
    /// The colour every plot draws it in (RGB; from a colour-blind-aware categorical palette).
    /// `None`: a colour derived from the name.
    pub colour: Option<(u8, u8, u8)>,
}

impl std::fmt::Debug for BackendSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendSpec")
            .field("name", &self.name)
            .field("defective", &self.defective)
            .field("live", &self.live.is_some())
            .finish()
    }
}

impl BackendSpec {
    /// Read and check this backend's options in `sc`.
    pub fn validate(&self, sc: &Scenario, strict: bool) -> Result<(), OptionError> {
        self.ops.validate(self.name, sc, strict)
    }
    /// The options in force, for the trace header.
    pub fn detail(&self, sc: &Scenario) -> Result<serde_json::Value, OptionError> {
        self.ops.detail(self.name, sc)
    }
    /// Simulate `sc` with this backend (see [`crate::builder::SimBuilder::run_into`]): refused
    /// ([`crate::builder::SimError::Budget`]) above the memory or work limits, as on the
    /// command line.
    pub fn simulate(&self, sc: &Scenario, out: &mut dyn Sink) -> Result<Outcome, crate::builder::SimError> {
        crate::budget::check(sc, 1)?;
        self.ops.simulate(self.name, sc, out)
    }
    /// The `[pacer]` options it reads.
    pub fn option_names(&self) -> &'static [&'static str] {
        self.ops.option_names()
    }
}

use crate::live::adapter as live;

/// Every backend, in listing order.
pub static REGISTRY: &[BackendSpec] = &[
    BackendSpec {
        name: "row",
        summary: "one store row: slot = GREATEST(clock_timestamp(), next_allowed_at); next += interval * multiplier",
        defective: false,
        ops: &OpsOf::<row::RowOptions>::NEW,
        live: Some(&live::ROW),
        colour: Some((31, 119, 180)), // blue
    },
    BackendSpec {
        name: "shared_cache",
        summary: "the same pace under a reserved key of an existing cache table, by atomic upsert (no migration)",
        defective: false,
        ops: &OpsOf::<shared_cache::SharedCacheOptions>::NEW,
        live: Some(&live::SHARED_CACHE),
        colour: Some((44, 160, 44)), // green
    },
    BackendSpec {
        name: "redis_gcra",
        summary: "GCRA in one atomic Redis script on the server clock (TIME); burst tolerance interval * (burst - 1)",
        defective: false,
        ops: &OpsOf::<redis_gcra::RedisGcraOptions>::NEW,
        live: Some(&live::REDIS_GCRA),
        colour: Some((188, 170, 34)), // olive
    },
    BackendSpec {
        name: "local_divided",
        summary: "each process paces locally at rate / (cap + 1): holds while at most cap + 1 processes run",
        defective: false,
        ops: &OpsOf::<local_divided::LocalDividedOptions>::NEW,
        live: Some(&live::LOCAL_DIVIDED),
        colour: Some((23, 190, 207)), // cyan
    },
    BackendSpec {
        name: "advisory",
        summary: "K pg_try_advisory_lock session locks: a concurrency cap, or a fake rate K / hold (rejected)",
        defective: false,
        ops: &OpsOf::<advisory::AdvisoryOptions>::NEW,
        live: Some(&live::ADVISORY),
        colour: Some((148, 103, 189)), // purple
    },
    BackendSpec {
        name: "claim_row",
        summary: "a concurrency slot claimed by writing a row: a SIGKILLed holder keeps it claimed forever",
        defective: true,
        ops: &OpsOf::<claim_row::ClaimRowOptions>::NEW,
        live: Some(&live::CLAIM_ROW),
        colour: Some((140, 86, 75)), // brown
    },
    BackendSpec {
        name: "redis_lock",
        summary: "SET NX PX walk lock per platform; re-enqueue on contention; uncapped after ~15 min or on broker error",
        defective: false,
        ops: &OpsOf::<redis_lock::RedisLockOptions>::NEW,
        live: Some(&live::REDIS_LOCK),
        colour: Some((227, 119, 194)), // pink
    },
    BackendSpec {
        name: "local",
        summary: "a pacer in each process at the full rate: N x rate (the classic defect)",
        defective: true,
        ops: &OpsOf::<local::LocalOptions>::NEW,
        live: Some(&live::LOCAL),
        colour: Some((214, 39, 40)), // red
    },
];

/// Backends registered by the program that runs pacesim ([`register`]), after [`REGISTRY`]'s.
static REGISTERED: std::sync::OnceLock<Vec<&'static BackendSpec>> = std::sync::OnceLock::new();

/// Add a team's own backends to every command: the program's `main` hands them over once,
/// before anything runs ([`crate::cli::main_with_backends`] does it), and from then on
/// scenario files name them like pacesim's own (`[pacer] backend`, `compare`, their options in
/// `[pacer]`), and `run`, `simulate`, `matrix`, `sweep`, `check` and reports run them.
///
/// # Errors
///
/// A second call, a name that is empty, not of `a-z`, `0-9` and `_`, pacesim's own, or given
/// twice.
pub fn register(specs: Vec<BackendSpec>) -> Result<(), String> {
    let mut seen: Vec<&str> = REGISTRY.iter().map(|b| b.name).collect();
    for s in &specs {
        let n = s.name;
        if n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!("backend name `{n}`: use a-z, 0-9 and _"));
        }
        if seen.contains(&n) {
            return Err(format!("backend `{n}` is registered twice (or is one of pacesim's)"));
        }
        seen.push(n);
    }
    let leaked: Vec<&'static BackendSpec> = specs.into_iter().map(|s| &*Box::leak(Box::new(s))).collect();
    REGISTERED
        .set(leaked)
        .map_err(|_| "backends are registered once, before anything runs".to_string())
}

/// Every backend: pacesim's ([`REGISTRY`]), then the registered ones ([`register`]).
pub fn all() -> impl Iterator<Item = &'static BackendSpec> {
    REGISTRY.iter().chain(REGISTERED.get().into_iter().flatten().copied())
}

/// Names of every backend.
pub fn names() -> Vec<&'static str> {
    all().map(|b| b.name).collect()
}

/// The backend named `name`.
pub fn spec(name: &str) -> Option<&'static BackendSpec> {
    all().find(|b| b.name == name)
}

/// A kill fault of `sc` armed at a point a backend it runs never reaches: `(fault index,
/// message)`. Under that backend the kill would never fire and the run would pass quietly.
/// Every backend the scenario runs counts ([`Scenario::runnable_backends`]): `run` and sweeps
/// run `[pacer] backend`, `simulate` and `matrix` each one of `compare`.
pub fn unreachable_kill(sc: &Scenario) -> Option<(usize, String)> {
    let runs = sc.runnable_backends();
    for (i, f) in sc.faults.iter().enumerate() {
        let crate::fault::FaultSpec::Kill { point: Some(p), .. } = f else {
            continue;
        };
        let missed = runs.iter().find(|b| {
            spec(b)
                .and_then(|s| s.ops.kill_points(s.name, sc).ok())
                .is_some_and(|pts| !pts.contains(p))
        });
        if let Some(b) = missed {
            return Some((
                i,
                format!(
                    "the kill can never happen: backend `{b}` never reaches `{}` (this scenario runs {})",
                    p.name(),
                    runs.join(", ")
                ),
            ));
        }
    }
    None
}

/// A backend `sc` runs that runs one thread per process, and why ([`crate::backend::Threads`]).
/// Every backend the scenario runs counts ([`Scenario::runnable_backends`]).
pub fn single_threaded(sc: &Scenario) -> Option<(String, &'static str)> {
    sc.runnable_backends()
        .into_iter()
        .find_map(|b| runs_one_thread(&b, sc).map(|why| (b, why)))
}

/// Why backend `name` runs one thread per process, if it does.
pub fn runs_one_thread(name: &str, sc: &Scenario) -> Option<&'static str> {
    let s = spec(name)?;
    match s.ops.threads(s.name, sc).ok()? {
        crate::backend::Threads::Single(why) => Some(why),
        _ => None,
    }
}

/// Check the backend options of `sc` for every backend it runs: alone, each option must be
/// one of the backend's own; with a `compare` list, each backend checks the options it uses,
/// and an option none of them uses is an error.
pub fn validate_options(sc: &Scenario) -> Result<(), OptionError> {
    let runs = sc.compared_backends();
    let strict = sc.pacer.compare.is_empty();
    // `run` runs `[pacer] backend`; outside the `compare` list it would run with options
    // chosen for other backends (and `simulate` would never run it)
    if !strict && !sc.pacer.compare.contains(&sc.pacer.backend) {
        return Err(OptionError::new(
            "backend",
            format!(
                "`{}` is not in the `compare` list ({}): `run` runs `backend`, `simulate` the list; \
                 name it in the list (or pick another with `--backend`)",
                sc.pacer.backend,
                runs.join(", ")
            ),
        ));
    }
    let mut specs = Vec::new();
    for name in std::iter::once(&sc.pacer.backend).chain(&sc.pacer.compare) {
        let s = spec(name).ok_or_else(|| OptionError::new("backend", format!("unknown backend `{name}`")))?;
        specs.push(s);
    }
    if !strict {
        for k in sc.pacer.options.keys() {
            if !specs.iter().any(|s| s.option_names().contains(&k.as_str())) {
                return Err(OptionError::new(
                    k.clone(),
                    format!("no backend this scenario runs ({}) uses option `{k}`", runs.join(", ")),
                ));
            }
        }
    }
    for s in specs {
        s.validate(sc, strict)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_name_is_read_off_its_struct() {
        assert_eq!(
            spec("redis_lock").unwrap().option_names(),
            &[
                "ttl",
                "max_wait",
                "poll",
                "walk",
                "serialized_platforms",
                "valve_lock",
                "valve_jitter",
                "cooldown"
            ]
        );
        assert_eq!(spec("local").unwrap().option_names(), &["per"]);
        assert_eq!(names().len(), REGISTRY.len());
    }
}
