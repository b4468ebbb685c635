//! pacesim: simulate and verify pacing algorithms shared by many worker processes.
#![deny(missing_debug_implementations)]
#![warn(missing_docs)]

pub mod backend;
pub mod check;
pub mod cli;
pub mod clock;
pub mod destination;
pub mod dist;
pub mod engine;
pub mod fault;
pub mod live;
pub mod matrix;
pub mod pacer;
pub mod plot;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod stats;
pub mod store;
pub mod summary;
pub mod sweep;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod worker;
