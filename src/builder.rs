//! [`SimBuilder`]: run a scenario with any backend value, pacesim's or your own.
//!
//! The scenario file gives the load, the store, the destination and the faults; the backend
//! is a value of any type implementing [`crate::backend::Backend`], from this crate or another.
//!
//! ```
//! use pacesim::registry::Configure;
//! use pacesim::backend::row::RowOptions;
//! use pacesim::builder::SimBuilder;
//! use pacesim::scenario::FOUR_LIMITERS;
//!
//! let sc = pacesim::registry::parse("four.toml", FOUR_LIMITERS).unwrap();
//! let row = RowOptions::default().build(&sc).unwrap();
//! let report = SimBuilder::new(sc).seed(7).run(row).unwrap();
//! assert!(report.summary.checks["ceiling"].passed());
//! ```
//!
//! A run fails ([`SimError`]) when the backend cannot run the scenario, or when it stops
//! making progress: a backend that keeps answering "retry now" at one virtual instant is
//! stopped with [`SimError::NoProgress`] instead of looping for ever.

use crate::backend::Backend;
use crate::backend::options::OptionError;
use crate::scenario::Scenario;
use crate::sim::Sim;
use crate::sim::header::header_with;
/// What a run returns besides its trace, why a run stopped making progress, and the bound that
/// decides it: defined by the simulator (an internal module), public here, where
/// [`SimBuilder`] returns them.
pub use crate::sim::{NoProgress, Outcome, progress_bound};
use crate::summary::Summary;
use crate::trace::{Collect, Event, Header, Sink};

/// Why a [`SimBuilder`] run gave no result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The backend cannot run the scenario ([`SimBuilder::check`]); nothing ran.
    #[error(transparent)]
    Refused(#[from] OptionError),
    /// The run stopped making progress (a livelock: virtual time stood still while events
    /// kept coming; see [`progress_bound`]).
    #[error(transparent)]
    NoProgress(#[from] NoProgress),
    /// The run would need more memory or work than allowed ([`crate::budget`]: the same
    /// estimates and limits as the command line's); nothing ran.
    #[error(transparent)]
    Budget(#[from] crate::budget::BudgetError),
}

/// Configures a run: the scenario, with overrides.
#[derive(Clone, Debug)]
pub struct SimBuilder {
    scenario: Scenario,
    // the run's choice source ([`crate::choice`]), if it has one
    source: Option<crate::choice::Source>,
}

/// What a run produced: the trace and the checkers' verdicts over it.
#[derive(Debug)]
pub struct Report {
    /// The trace header.
    pub header: Header,
    /// Every event, in order.
    pub events: Vec<Event>,
    /// The summary: headline figures and every checker's verdict (`summary.checks`).
    pub summary: Summary,
}

impl SimBuilder {
    /// Run `scenario` (its `[pacer] backend` is not used: the backend is the value you pass;
    /// its `rate` is the ceiling the checkers judge). A scenario for a backend the registry
    /// does not know is read with [`crate::scenario::Structure`] rules
    /// (`Scenario::parse(file, text, &Structure)`), which check no backend; what the
    /// backend value can run (threads, kill points, platforms, jobs) is checked here, when the
    /// run starts ([`SimBuilder::check`]).
    pub fn new(scenario: Scenario) -> SimBuilder {
        SimBuilder { scenario, source: None }
    }

    /// Tie every random stream of the run to `source` ([`crate::choice`]): its decisions are
    /// recorded, replayed, or an explorer's.
    pub fn source(mut self, source: crate::choice::Source) -> SimBuilder {
        self.source = Some(source);
        self
    }

    /// Use this seed instead of the scenario's.
    pub fn seed(mut self, seed: u64) -> SimBuilder {
        self.scenario.seed = seed;
        self
    }

    /// Run this many worker processes instead of the scenario's count.
    pub fn processes(mut self, n: u32) -> SimBuilder {
        self.scenario.processes.count = n;
        self
    }

    /// The scenario as it will run.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Check that `backend` can run the scenario: it states its facts
    /// ([`crate::backend::stated`]: not none, and none among its other options), with
    /// `[processes] threads` above 1 it must run more than one thread per process, and every
    /// kill fault's point must be one its processes reach (else the kill never fires and the
    /// run passes quietly).
    ///
    /// # Errors
    ///
    /// The scenario field the backend cannot honour, and why; or what is wrong with its facts.
    pub fn check<B: Backend>(&self, backend: &B) -> Result<(), OptionError> {
        crate::backend::stated(backend)?;
        check_scenario(&self.scenario, backend)
    }

    /// Run with `backend`, streaming the trace (header first) into `out`.
    ///
    /// # Errors
    ///
    /// The backend cannot run the scenario ([`SimBuilder::check`]; nothing is written), or
    /// the run stopped making progress ([`SimError::NoProgress`]; the trace stops there).
    pub fn run_into<B: Backend>(&self, backend: B, out: &mut dyn Sink) -> Result<Outcome, SimError> {
        crate::budget::check(&self.scenario, 1)?;
        self.run_into_unbudgeted(backend, out)
    }

    /// [`SimBuilder::run_into`] without the budget check: for the command line's runs, which
    /// check the budget for all their runs at once before any starts.
    pub(crate) fn run_into_unbudgeted<B: Backend>(&self, backend: B, out: &mut dyn Sink) -> Result<Outcome, SimError> {
        self.check(&backend)?;
        let sc = &self.scenario;
        let mut detail = crate::backend::stated(&backend)?;
        if sc.processes.threads > 1
            && let Some(map) = detail.as_object_mut()
        {
            let side = match backend.threads() {
                crate::backend::Threads::PerThread => "per_thread",
                _ => "shared",
            };
            map.insert("process_side".into(), side.into());
        }
        out.header(&header_with(sc, backend.name(), detail, "sim"));
        Ok(Sim::with_source(sc, backend, out, self.source.clone()).run()?)
    }

    /// Run with `backend`: the trace and the checkers' verdicts.
    ///
    /// # Errors
    ///
    /// The backend cannot run the scenario ([`SimBuilder::check`]), or the run stopped
    /// making progress ([`SimError::NoProgress`]: its message says when and what loops).
    pub fn run<B: Backend>(&self, backend: B) -> Result<Report, SimError> {
        self.check(&backend)?;
        crate::budget::check(&self.scenario, 1)?;
        // the report keeps every event: their memory, on top of what a streamed run needs
        let (events, field) = crate::budget::work(&self.scenario);
        let kept = events * std::mem::size_of::<Event>() as f64;
        if kept > crate::budget::limit() as f64 {
            return Err(SimError::Budget(crate::budget::BudgetError::Memory {
                scenario: self.scenario.place(&field),
                field,
                estimate: kept as u64,
                limit: crate::budget::limit(),
                why: String::new(),
            }));
        }
        let mut c = Collect::default();
        let summary = crate::summary::simulate_with(
            |out: &mut dyn Sink| match self.run_into_unbudgeted(backend, out) {
                Ok(_) => Ok(()),
                Err(SimError::NoProgress(e)) => Err(e),
                Err(SimError::Refused(e)) => unreachable!("checked above: {e}"),
                Err(SimError::Budget(e)) => unreachable!("checked above: {e}"),
            },
            None,
            Some(&mut c),
        )
        .map_err(|e| match e {
            crate::summary::SimulateError::NoProgress(e) => SimError::NoProgress(e),
            crate::summary::SimulateError::Io(e) => unreachable!("no trace file is written: {e}"),
        })?;
        Ok(Report {
            header: c.header.expect("the header comes first"),
            events: c.events,
            summary,
        })
    }
}

/// [`SimBuilder::check`] of `sc`.
fn check_scenario<B: Backend>(sc: &Scenario, backend: &B) -> Result<(), OptionError> {
    if sc.processes.threads > 1
        && let crate::backend::Threads::Single(why) = backend.threads()
    {
        return Err(OptionError::new(
            "processes.threads",
            format!("backend `{}` runs one thread per process: {why}", backend.name()),
        ));
    }
    if !sc.platforms.is_empty() && !backend.platforms() {
        return Err(OptionError::new(
            "platforms",
            format!(
                "backend `{}` keeps no walk lock per platform (Backend::platforms): [[platforms]] is not modelled for it",
                backend.name()
            ),
        ));
    }
    if sc.jobs.is_some() && !backend.jobs() {
        return Err(OptionError::new(
            "jobs",
            format!(
                "backend `{}` runs no broker tasks (Backend::jobs): [jobs] is not modelled for it",
                backend.name()
            ),
        ));
    }
    // (asked of the backend only when a kill names its point: an explorer checks every run)
    let mut points = None;
    for (i, f) in sc.faults.iter().enumerate() {
        if let crate::fault::FaultSpec::Kill { point: Some(p), .. } = f
            && let Err(e) = p.reached_by(backend.name(), points.get_or_insert_with(|| backend.kill_points()))
        {
            return Err(OptionError::new(
                format!("faults[{i}].point"),
                format!("the kill can never happen: {e}"),
            ));
        }
    }
    Ok(())
}

/// [`SimBuilder::run_into_unbudgeted`] of `sc` with the header already built, the one that run
/// writes for this scenario and backend (an explorer's runs of one scenario share it; nor is
/// the scenario copied for each).
pub(crate) fn run_headed<B: Backend>(
    sc: &Scenario,
    source: Option<&crate::choice::Source>,
    backend: B,
    header: &Header,
    out: &mut dyn Sink,
) -> Result<Outcome, SimError> {
    check_scenario(sc, &backend)?;
    out.header(header);
    Ok(Sim::with_source(sc, backend, out, source.cloned()).run()?)
}

/// [`run_headed`] for an explorer's run that goes on from the deepest world `saves` holds that
/// it agrees with, saving its own ([`crate::sim::run_saving`]).
pub(crate) fn run_saving<B: Backend>(
    sc: &Scenario,
    source: &crate::choice::Source,
    backend: B,
    header: &Header,
    out: &mut dyn Sink,
    saves: &mut Option<Box<dyn std::any::Any + Send>>,
) -> Result<Outcome, SimError> {
    check_scenario(sc, &backend)?;
    Ok(crate::sim::run_saving(sc, source, backend, header, out, saves)?)
}
