//! [`SimBuilder`]: run a scenario with any backend value, pacesim's or your own.
//!
//! The scenario file gives the load, the store, the destination and the faults; the backend
//! is a value of any type implementing [`crate::backend::Backend`], from this crate or another.
//!
//! ```
//! use pacesim::backend::registry::Configure;
//! use pacesim::backend::row::RowOptions;
//! use pacesim::builder::SimBuilder;
//! use pacesim::scenario::Scenario;
//!
//! let sc = Scenario::parse("four.toml", pacesim::scenario::FOUR_LIMITERS).unwrap();
//! let row = RowOptions::default().build(&sc).unwrap();
//! let report = SimBuilder::new(sc).seed(7).run(row);
//! assert!(report.summary.checks["ceiling"].pass);
//! ```

use crate::backend::Backend;
use crate::scenario::Scenario;
use crate::sim::{Outcome, Sim, header_with};
use crate::summary::Summary;
use crate::trace::{Collect, Event, Header, Sink};

/// Configures a run: the scenario, with overrides.
#[derive(Clone, Debug)]
pub struct SimBuilder {
    scenario: Scenario,
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
    /// its `rate` is the ceiling the checkers judge).
    pub fn new(scenario: Scenario) -> SimBuilder {
        SimBuilder { scenario }
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

    /// Run with `backend`, streaming the trace (header first) into `out`.
    pub fn run_into<B: Backend>(&self, backend: B, out: &mut dyn Sink) -> Outcome {
        let sc = &self.scenario;
        let mut detail = backend.detail();
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
        Sim::new(sc, backend, out).run()
    }

    /// Run with `backend`: the trace and the checkers' verdicts.
    pub fn run<B: Backend>(&self, backend: B) -> Report {
        let mut c = Collect::default();
        let summary = crate::summary::simulate_with(
            |out: &mut dyn Sink| {
                self.run_into(backend, out);
            },
            None,
            Some(&mut c),
        )
        .expect("no trace file is written");
        Report {
            header: c.header.expect("the header comes first"),
            events: c.events,
            summary,
        }
    }
}
