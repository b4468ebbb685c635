//! The simulator: builds the world from a scenario and a backend and runs it under virtual
//! time, emitting the trace. Its jobs, one file each:
//!
//! - the world ([`world`]): [`Sim`] owns the workers, the store, the destination, the
//!   backend's store side, fault state and one [`crate::engine::Engine`]; each engine event is
//!   handled by one method, which states the protocol step it models and hands the worker
//!   loop's own steps to [`crate::worker`];
//! - the run loop ([`run`]): [`Sim::run`] pops the events in order until the run is over, and
//!   stops a run that makes no progress ([`progress_bound`], [`NoProgress`]);
//! - the trace header ([`header`]): [`header::header_with`], the same for a simulated run
//!   and a live one;
//! - the explorer's form of the world ([`form`]): what a steered run's explorer keeps of a
//!   state to tell one it reached before;
//! - the explorer's saved worlds (`save`): a steered run goes on from the world an earlier
//!   run saved where their decisions part, rather than replaying them.
//!
//! No wall clock is read anywhere here, no hash map is iterated, and every random draw comes
//! from the stream of the entity that makes it ([`crate::rng`]).
//!
//! Most callers go through [`crate::builder::SimBuilder`] (any backend value) or
//! [`crate::registry::run`] (the backend the scenario names).

mod form;
pub mod header;
pub mod run;
mod save;
mod world;

pub(crate) use run::run_saving;
pub use run::{NoProgress, Outcome, progress_bound};
pub use world::Sim;
