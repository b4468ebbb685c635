//! pacesim: simulate and verify pacing algorithms shared by many worker processes.
#![deny(missing_debug_implementations)]
#![warn(missing_docs)]

// ---- the public API: scenarios, backends (yours or pacesim's), running them, the trace,
// ---- the checkers' verdicts, and the in-process pacer core ----
pub mod backend;
pub mod builder;
pub mod check;
pub mod clock;
pub mod dist;
pub mod fault;
pub mod live;
pub mod pacer;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod summary;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod worker;

// ---- pacesim's own machinery: public only for its binary, its tests and its benches (no
// ---- stability promise; not part of the documented API) ----
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod engine;
#[doc(hidden)]
pub mod junit;
#[doc(hidden)]
pub mod matrix;
#[doc(hidden)]
pub mod plot;
#[doc(hidden)]
pub mod report;
#[doc(hidden)]
pub mod sim;
#[doc(hidden)]
pub mod stats;
#[doc(hidden)]
pub mod sweep;

// ---- internal ----
pub(crate) mod destination;
pub(crate) mod store;
