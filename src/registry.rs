//! The registry: every backend pacesim ships, one entry each, and the backends a team's
//! program registers ([`register`]). Nothing outside this file matches on a backend's name.
//!
//! It sits above the layers it builds: the simulator ([`crate::builder`]), live mode
//! ([`crate::live`]) and the scenario model ([`crate::scenario`], whose validation takes the
//! rules it judges backends by as an argument: [`parse`], [`load`] and [`with_backend`] read
//! with the registry's [`Rules`]; live mode's options take [`Registered`]). Nothing below it
//! looks a backend up by name; the commands above it (`run`, `matrix`, `sweep`, the CLI) do,
//! through it.
//!
//! An entry is a [`BackendSpec`]: the name used in scenario files, a one-line summary, whether
//! the design records call it defective, its options struct (which builds the backend, see
//! [`Configure`]) and, where it has one, its live adapter ([`crate::live::adapter`]). To add a
//! backend: write its file (options struct, [`crate::backend::Backend`], process side, store
//! side, and [`Configure`] for its options), and add one entry to [`REGISTRY`].

use crate::backend::Backend;
pub use crate::backend::Configure;
use crate::backend::options::{self, OptionError};
use crate::backend::{advisory, claim_row, local, local_divided, redis_gcra, redis_lock, row, shared_cache};
use crate::scenario::{BackendRules, Scenario, ScenarioError};
use crate::sim::Outcome;
use crate::trace::Sink;

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
    fn simulate(&self, name: &str, sc: &Scenario, out: &mut dyn Sink) -> Result<Outcome, crate::builder::SimError> {
        self.simulate_from(name, sc, None, out)
    }
    /// [`Ops::simulate`], every random stream tied to `source` ([`crate::choice`]) if given.
    fn simulate_from(
        &self,
        name: &str,
        sc: &Scenario,
        source: Option<&crate::choice::Source>,
        out: &mut dyn Sink,
    ) -> Result<Outcome, crate::builder::SimError>;
    /// [`Ops::simulate_from`] with the trace header already built: the one an earlier run of
    /// `sc` with this backend wrote (an explorer's runs of one scenario share it, rather than
    /// build it again for each).
    fn simulate_headed(
        &self,
        name: &str,
        sc: &Scenario,
        source: Option<&crate::choice::Source>,
        header: &crate::trace::Header,
        out: &mut dyn Sink,
    ) -> Result<Outcome, crate::builder::SimError> {
        let _ = header;
        self.simulate_from(name, sc, source, out)
    }
    /// [`Ops::simulate_headed`] for an explorer's run that may go on from a world an earlier
    /// run saved, rather than replay the decisions they share (`saves`: the explorer's, kept
    /// between its runs). The default replays.
    fn simulate_saving(
        &self,
        name: &str,
        sc: &Scenario,
        source: &crate::choice::Source,
        header: &crate::trace::Header,
        out: &mut dyn Sink,
        saves: &mut Option<Box<dyn std::any::Any + Send>>,
    ) -> Result<Outcome, crate::builder::SimError> {
        let _ = saves;
        self.simulate_headed(name, sc, Some(source), header, out)
    }
    /// What it can run with `sc`'s options: kill points, threads, platforms, jobs.
    fn capabilities(&self, name: &str, sc: &Scenario) -> Result<Capabilities, OptionError>;
}

/// What a backend can run, with a scenario's options: scenarios asking for more are refused
/// when they are read ([`Rules`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Capabilities {
    /// The kill points its processes can be found at ([`Backend::kill_points`]).
    pub kill_points: Vec<crate::fault::KillPoint>,
    /// How the threads of a process use its process side ([`Backend::threads`]).
    pub threads: crate::backend::Threads,
    /// One walk lock per platform: `[[platforms]]` allowed ([`Backend::platforms`]).
    pub platforms: bool,
    /// Broker tasks: `[jobs]` allowed ([`Backend::jobs`]).
    pub jobs: bool,
    /// Both its sides declare that an explorer may reduce by symmetry
    /// ([`crate::backend::StoreSide::SYMMETRIC`], [`crate::backend::ProcessSide::SYMMETRIC`]).
    pub symmetric: bool,
}

impl Capabilities {
    /// The capabilities `b` states.
    pub fn of<B: Backend>(b: &B) -> Capabilities {
        Capabilities {
            kill_points: b.kill_points(),
            threads: b.threads(),
            platforms: b.platforms(),
            jobs: b.jobs(),
            symmetric: <<B as Backend>::Store as crate::backend::StoreSide>::SYMMETRIC
                && <<B as Backend>::Process as crate::backend::ProcessSide>::SYMMETRIC,
        }
    }

    /// Whether backend `backend`, with these capabilities, ever reaches `point`: the one
    /// reachability check ([`KillPoint::reached_by`](crate::fault::KillPoint::reached_by)).
    pub fn reaches(&self, backend: &str, point: crate::fault::KillPoint) -> Result<(), crate::choice::Unreachable> {
        point.reached_by(backend, &self.kill_points)
    }
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
        // (its facts too: a backend that states none is refused where the scenario names it)
        crate::backend::stated(&self.build(name, sc, strict)?).map(drop)
    }
    fn detail(&self, name: &str, sc: &Scenario) -> Result<serde_json::Value, OptionError> {
        crate::backend::stated(&self.build(name, sc, false)?)
    }
    fn capabilities(&self, name: &str, sc: &Scenario) -> Result<Capabilities, OptionError> {
        Ok(Capabilities::of(&self.build(name, sc, false)?))
    }
    fn simulate_from(
        &self,
        name: &str,
        sc: &Scenario,
        source: Option<&crate::choice::Source>,
        out: &mut dyn Sink,
    ) -> Result<Outcome, crate::builder::SimError> {
        let b = self.build(name, sc, false)?;
        // the callers ([`BackendSpec::simulate`], the command line) check the budget first
        sim_builder(sc, source).run_into_unbudgeted(b, out)
    }
    fn simulate_headed(
        &self,
        name: &str,
        sc: &Scenario,
        source: Option<&crate::choice::Source>,
        header: &crate::trace::Header,
        out: &mut dyn Sink,
    ) -> Result<Outcome, crate::builder::SimError> {
        let b = self.build(name, sc, false)?;
        crate::builder::run_headed(sc, source, b, header, out)
    }
    fn simulate_saving(
        &self,
        name: &str,
        sc: &Scenario,
        source: &crate::choice::Source,
        header: &crate::trace::Header,
        out: &mut dyn Sink,
        saves: &mut Option<Box<dyn std::any::Any + Send>>,
    ) -> Result<Outcome, crate::builder::SimError> {
        let b = self.build(name, sc, false)?;
        crate::builder::run_saving(sc, source, b, header, out, saves)
    }
}

/// A simulator builder for `sc`, its random streams tied to `source` if given.
fn sim_builder(sc: &Scenario, source: Option<&crate::choice::Source>) -> crate::builder::SimBuilder {
    let builder = crate::builder::SimBuilder::new(sc.clone());
    match source {
        Some(s) => builder.source(s.clone()),
        None => builder,
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
    /// [`BackendSpec::simulate`], every random stream of the run tied to `source`
    /// ([`crate::choice`]): recorded, replayed, or an explorer's.
    pub fn simulate_from(
        &self,
        sc: &Scenario,
        source: &crate::choice::Source,
        out: &mut dyn Sink,
    ) -> Result<Outcome, crate::builder::SimError> {
        crate::budget::check(sc, 1)?;
        self.ops.simulate_from(self.name, sc, Some(source), out)
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
    let own = REGISTRY.iter().map(|b| b.name).collect();
    crate::check::registrable("backend", own, specs.iter().map(|s| s.name))?;
    let leaked: Vec<&'static BackendSpec> = specs.into_iter().map(|s| &*Box::leak(Box::new(s))).collect();
    REGISTERED
        .set(leaked)
        .map_err(|_| "backends are registered once, before anything runs".to_string())
}

/// Every backend: pacesim's ([`REGISTRY`]), then the registered ones ([`register`]).
pub fn all() -> impl Iterator<Item = &'static BackendSpec> {
    // the budget, a layer below, reads backends' facts through us
    crate::budget::set_detail(detail_of);
    REGISTRY.iter().chain(REGISTERED.get().into_iter().flatten().copied())
}

/// The stated detail of backend `name` for `sc` (its options in force and facts), if it is one
/// and builds: what the memory and work estimates read ([`crate::budget::set_detail`]).
fn detail_of(name: &str, sc: &Scenario) -> Option<serde_json::Value> {
    spec(name).and_then(|s| s.detail(sc).ok())
}

/// Names of every backend.
pub fn names() -> Vec<&'static str> {
    all().map(|b| b.name).collect()
}

/// The backend named `name`.
pub fn spec(name: &str) -> Option<&'static BackendSpec> {
    all().find(|b| b.name == name)
}

/// How reports, the matrix and plot legends name backend `backend` run with `sc`'s options:
/// its name, then each `[pacer]` option it reads that is not its default (its absence changes
/// the options the backend states, or the backend does not state it with the value written),
/// as written (`row (clock=process_monotonic, stale_after=10s)`,
/// `shared_cache (fallback=fail_open)`); the bare name when none does. One function, so a
/// variant is named the same in every table, legend, matrix row and JSON `label`.
pub fn label(sc: &Scenario, backend: &str) -> String {
    let Some(spec) = spec(backend) else {
        return backend.to_string();
    };
    let mut v = sc.clone();
    v.pacer.backend = backend.to_string();
    v.pacer.compare.clear();
    let Ok(full) = spec.detail(&v) else {
        return backend.to_string();
    };
    let mut differs = Vec::new();
    for (k, val) in &sc.pacer.options {
        if !spec.option_names().contains(&k.as_str()) {
            continue;
        }
        let mut without = v.clone();
        without.pacer.options.remove(k);
        // an option whose absence changes what the backend states (or that the build
        // requires) differs; one whose absence changes nothing is the default when the detail
        // states it (as `fallback`, or in nanoseconds as `max_wait_ns`): an option the detail
        // does not state (`cap`, `stale_after`) cannot be shown to be the default
        let same_build = spec.detail(&without).ok().as_ref() == Some(&full);
        let stated = full.get(k).is_some() || full.get(format!("{k}_ns")).is_some();
        if !same_build || !stated {
            differs.push(format!("{k}={}", option_text(val)));
        }
    }
    if differs.is_empty() {
        backend.to_string()
    } else {
        format!("{backend} ({})", differs.join(", "))
    }
}

/// An option's value as a label shows it: strings bare, tables and arrays inline.
fn option_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Table(t) => {
            let parts: Vec<String> = t.iter().map(|(k, v)| format!("{k}={}", option_text(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        toml::Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(option_text).collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// The backend a [`label`] names: the text before its options.
pub(crate) fn base_of(label: &str) -> &str {
    label.split(" (").next().unwrap_or(label)
}

/// Check the backend options of `sc` for every backend it runs: alone, each option must be
/// one of the backend's own; with a `compare` list, each backend checks the options it uses,
/// and an option none of them uses is an error.
pub(crate) fn validate_options(sc: &Scenario) -> Result<(), OptionError> {
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

// ---- running a scenario with the backend it names ---------------------------------------

/// The spec of the backend `sc` names in `[pacer] backend`.
///
/// # Panics
///
/// If it names none the registry knows: scenarios read with [`Rules`] ([`parse`], [`load`])
/// never do.
fn named(sc: &Scenario) -> &'static BackendSpec {
    spec(&sc.pacer.backend).unwrap_or_else(|| panic!("{}: a scenario read with the registry's rules", sc.name))
}

/// The trace header for a scenario run with the backend it names.
pub fn header(sc: &Scenario, source: &str) -> crate::trace::Header {
    let detail = named(sc)
        .detail(sc)
        .expect("options validated when the scenario was read");
    crate::sim::header::header_with(sc, &sc.pacer.backend, detail, source)
}

/// Run a scenario with the backend it names, streaming its trace (header first) into `out`.
/// The scenario must have been read with the registry's rules ([`parse`], [`load`]); the
/// caller checks the budget ([`crate::budget::check`]; the command line does, for all its runs
/// at once).
///
/// # Errors
///
/// The run stopped making progress ([`crate::builder::NoProgress`]): its trace ends where it
/// stopped.
pub fn run(sc: &Scenario, out: &mut dyn Sink) -> Result<Outcome, crate::sim::NoProgress> {
    run_from(sc, None, out)
}

/// [`run`], every random stream tied to `source` if given ([`crate::choice`]: recorded,
/// replayed, or an explorer's).
///
/// # Panics
///
/// As [`run`].
pub(crate) fn run_from(
    sc: &Scenario,
    source: Option<&crate::choice::Source>,
    out: &mut dyn Sink,
) -> Result<Outcome, crate::sim::NoProgress> {
    let spec = named(sc);
    match spec.ops.simulate_from(spec.name, sc, source, out) {
        Ok(o) => Ok(o),
        Err(crate::builder::SimError::NoProgress(e)) => Err(e),
        Err(e @ (crate::builder::SimError::Refused(_) | crate::builder::SimError::Budget(_))) => {
            panic!("validated options, no budget check on this path: {e}")
        }
    }
}

/// Simulate a scenario with the backend it names and summarise it in one pass; optionally
/// also write the trace, and feed the events to extra consumers (plots, reports).
///
/// # Errors
///
/// Writing the trace failed, or the run stopped making progress.
pub fn simulate(
    sc: &Scenario,
    trace: Option<Box<dyn std::io::Write + Send>>,
    extra: Option<&mut dyn Sink>,
) -> Result<crate::summary::Summary, crate::summary::SimulateError> {
    simulate_from(sc, None, trace, extra)
}

/// [`simulate`], every random stream tied to `source` if given ([`crate::choice`]).
///
/// # Errors
///
/// As [`simulate`].
pub(crate) fn simulate_from(
    sc: &Scenario,
    source: Option<&crate::choice::Source>,
    trace: Option<Box<dyn std::io::Write + Send>>,
    extra: Option<&mut dyn Sink>,
) -> Result<crate::summary::Summary, crate::summary::SimulateError> {
    crate::summary::simulate_with(|out: &mut dyn Sink| run_from(sc, source, out).map(drop), trace, extra)
}

/// [`simulate`] without the trace hash (`"-"`): for benchmarks and scale runs only
/// ([`crate::summary::simulate_unhashed_with`]).
///
/// # Panics
///
/// If the run stops making progress.
pub fn simulate_unhashed(sc: &Scenario) -> crate::summary::Summary {
    crate::summary::simulate_unhashed_with(&sc.name, |out: &mut dyn Sink| run(sc, out).map(drop))
}

// ---- live mode's view of the registry ------------------------------------------------------

/// What live mode needs of the registry's backends ([`crate::live::adapter::Backends`]):
/// every backend pacesim ships and every registered one.
#[derive(Copy, Clone, Debug, Default)]
pub struct Registered;

impl crate::live::adapter::Backends for Registered {
    fn adapter(&self, sc: &Scenario) -> Option<&'static dyn live::LiveSpec> {
        spec(&sc.pacer.backend).and_then(|s| s.live)
    }
    fn live_names(&self) -> Vec<&'static str> {
        all().filter(|s| s.live.is_some()).map(|s| s.name).collect()
    }
    fn detail(&self, sc: &Scenario) -> Option<serde_json::Value> {
        spec(&sc.pacer.backend).and_then(|s| s.detail(sc).ok())
    }
    fn simulate(&self, sc: &Scenario, out: &mut dyn Sink) -> Result<(), crate::sim::NoProgress> {
        run(sc, out).map(drop)
    }
}

/// The registry's rules for scenario files ([`BackendRules`]): every backend a file names is
/// pacesim's or registered; its options, threads, kill points, `[[platforms]]` and `[jobs]`
/// are ones it can run.
#[derive(Copy, Clone, Debug, Default)]
pub struct Rules;

impl BackendRules for Rules {
    fn check(&self, sc: &Scenario) -> Result<(), (String, String)> {
        let field = |i: usize| if i == 0 { "pacer.backend" } else { "pacer.compare" };
        let known = names();
        for (i, b) in std::iter::once(&sc.pacer.backend)
            .chain(sc.pacer.compare.iter())
            .enumerate()
        {
            if !known.contains(&b.as_str()) {
                return Err((
                    field(i).into(),
                    format!("unknown backend `{b}` (known: {})", known.join(", ")),
                ));
            }
        }
        validate_options(sc).map_err(|e| (format!("pacer.{}", e.field), e.message))?;
        // what each backend the scenario runs can run, built once: `[pacer] backend` (`run`,
        // sweeps), then the `compare` list (`simulate`, `matrix`)
        let mut caps: Vec<(&'static str, String, Capabilities)> = Vec::new();
        for (i, b) in std::iter::once(&sc.pacer.backend)
            .chain(sc.pacer.compare.iter())
            .enumerate()
        {
            let s = spec(b).expect("known: checked above");
            let c = s
                .ops
                .capabilities(s.name, sc)
                .map_err(|e| (format!("pacer.{}", e.field), e.message))?;
            caps.push((field(i), b.clone(), c));
        }
        let able = |what: fn(&Capabilities) -> bool| -> Vec<&'static str> {
            all()
                .filter(|s| s.ops.capabilities(s.name, sc).is_ok_and(|c| what(&c)))
                .map(|s| s.name)
                .collect()
        };
        let unable =
            |what: fn(&Capabilities) -> bool| caps.iter().find(|(_, _, c)| !what(c)).map(|(f, b, _)| (*f, b.clone()));
        if !sc.platforms.is_empty()
            && let Some((f, b)) = unable(|c| c.platforms)
        {
            return Err((
                f.into(),
                format!(
                    "`{b}` with [[platforms]]: platforms are modelled for backends with one walk lock per \
                     platform ({}); the pace backends keep one budget for one destination",
                    able(|c| c.platforms).join(", ")
                ),
            ));
        }
        if sc.processes.threads > 1
            && let Some((b, why)) = caps.iter().find_map(|(_, b, c)| match c.threads {
                crate::backend::Threads::Single(why) => Some((b, why)),
                _ => None,
            })
        {
            return Err((
                "processes.threads".into(),
                format!("backend `{b}` runs one thread per process: {why}"),
            ));
        }
        // a kill armed at a point a backend it runs never reaches would never fire, and the run
        // would pass quietly
        for (i, f) in sc.faults.iter().enumerate() {
            let crate::fault::FaultSpec::Kill { point: Some(p), .. } = f else {
                continue;
            };
            if let Some(e) = caps.iter().find_map(|(_, b, c)| c.reaches(b, *p).err()) {
                return Err((
                    format!("faults[{i}].point"),
                    format!(
                        "the kill can never happen: {e}; this scenario runs {}",
                        sc.runnable_backends().join(", ")
                    ),
                ));
            }
        }
        if sc.jobs.is_some()
            && let Some((f, b)) = unable(|c| c.jobs)
        {
            return Err((
                f.into(),
                format!(
                    "`{b}` cannot run [jobs]: download tasks walk under a walk lock ({})",
                    able(|c| c.jobs).join(", ")
                ),
            ));
        }
        Ok(())
    }
}

// ---- reading scenarios with the registry's rules ---------------------------------------------

/// Load a scenario file, validated against every backend the registry knows
/// ([`Scenario::load`] with [`Rules`]).
pub fn load(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    Scenario::load(path, &Rules)
}

/// Parse and validate scenario text (`file` names it in errors): its structure, and what it
/// asks of the backends it names, every one pacesim ships or a team's program registered
/// ([`Scenario::parse`] with [`Rules`]).
pub fn parse(file: &str, src: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(file, src, &Rules)
}

/// `sc` with another backend (for `--backend` and comparisons), judged by the registry's
/// [`Rules`] ([`Scenario::with_backend`]). A backend outside the `compare` list runs alone: the
/// list is dropped and its options, threads and kill points are judged for that backend only.
pub fn with_backend(sc: &Scenario, backend: &str) -> Result<Scenario, String> {
    sc.with_backend(backend, &Rules)
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
