//! pacesim: simulate and verify pacing (rate-limiting) algorithms shared by many worker
//! processes.
//!
//! A fleet of worker processes fetches from one destination that allows, say, 7 requests per
//! second *in total*. pacesim runs N simulated processes sharing a pacer through a backend (a
//! PostgreSQL pace row, advisory locks, a Redis lock or GCRA script, a cache key, or your own)
//! under virtual time, injects faults, and judges the resulting trace: the aggregate ceiling,
//! backoff coherence, self-healing after crashes, degradation, liveness.
//!
//! # From a scenario to a verdict and a plot
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use pacesim::prelude::*;
//! use pacesim::{registry, report, run};
//!
//! // 1. A scenario: four processes, ten requests each, sharing one 50/s budget (the design
//! //    record's key test), judged by the registry's rules. Scenario files in sims/ look just
//! //    like this.
//! let sc = Scenario::parse(
//!     "four.toml",
//!     r#"
//!     name = "four"
//!     duration = "5s"
//!     [pacer]
//!     backend = "row"                # the global pace row
//!     compare = ["row", "local"]     # and the classic defect, for the plots
//!     rate = 50.0
//!     [processes]
//!     count = 4
//!     requests = 10
//!     "#,
//!     &Rules,
//! )?;
//!
//! // 2. Simulate it with the backend it names: every checker's verdict comes back.
//! let row = registry::simulate(&sc, None, None)?;
//! assert!(row.checks["ceiling"].passed());
//!
//! // 3. A pacer in each process: the ceiling checker catches it and says where.
//! let local = registry::simulate(&sc.with_backend("local", &Rules)?, None, None)?;
//! assert!(local.checks["ceiling"].failed());
//! println!("{}", local.checks["ceiling"].detail); // "arrivals need burst 4 ..."
//!
//! // 4. Plots and a report, both backends side by side (what `just simulate` writes).
//! let opts = run::compare::Options { seeds: 1, series: true, progress: false };
//! let runs = run::compare::run_all(&[sc], opts)?;
//! let dir = std::env::temp_dir().join(format!("pacesim-doc-{}", std::process::id()));
//! report::write(&dir, &runs, "doc example")?;
//! assert!(dir.join("four").join("rate.svg").exists());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Next
//!
//! - The front door: [`prelude`], what a team's backend, checker and `main` need in one `use`.
//! - Your own backend: implement [`prelude::Backend`] (a [`prelude::ProcessSide`] and a
//!   [`prelude::StoreSide`]) and run it with [`prelude::SimBuilder`]; `examples/fixed_window.rs`
//!   is a complete one, `examples/own-backend/` a team's crate with its command line.
//! - The trace every consumer reads: [`trace`]; the checkers: [`check`].
//! - The same scenarios for real, against PostgreSQL and Redis: [`live`].
//!
//! These pages are the team API: the prelude and the modules listed below. pacesim's other
//! modules are public only for its own test suite, benches and model checks, are left out of
//! these docs, and change without notice; what a team needs of them is in the prelude.
#![deny(missing_debug_implementations)]
#![warn(missing_docs)]

// ---- the front door, what `cargo doc` shows: the prelude, and the modules a team's backend,
// ---- checker and `main` name by path (the registry, running, the matrix, live mode, reports)
// ---- or that the prelude's items point to (the trace, the checkers, the scenario, a run's
// ---- summary); `tests/suite/front_door.rs` holds this list ----
pub mod backend;
pub mod check;
pub mod cli;
pub mod form;
pub mod live;
pub mod matrix;
pub mod prelude;
pub mod registry;
pub mod report;
pub mod run;
pub mod scenario;
pub mod summary;
pub mod trace;

// ---- public, out of the docs (`#[doc(hidden)]`): pacesim's own pieces that the test suite,
// ---- the benches and the loom models reach by path; a team needs none of them (what it
// ---- needs of them is in the prelude) ----
// reached by the suite (bounds, fuzz), not the team API
#[doc(hidden)]
pub mod budget;
// reached by the suite (`SimBuilder` and `Report` are in the prelude), not the team API
#[doc(hidden)]
pub mod builder;
// reached by the suite (explore, fuzz, foundation), not the team API
#[doc(hidden)]
pub mod choice;
// reached by the suite (`Reading` is in the prelude), not the team API
#[doc(hidden)]
pub mod clock;
// reached by the suite and the benches, not the team API
#[doc(hidden)]
pub mod dist;
// reached by the suite and the benches, not the team API
#[doc(hidden)]
pub mod explore;
// reached by the suite (`KillPoint` is in the prelude), not the team API
#[doc(hidden)]
pub mod fault;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod junit;
// reached by the suite and the loom models, not the team API
#[doc(hidden)]
pub mod pacer;
// reached by the suite and the benches (`Rng` is in the prelude), not the team API
#[doc(hidden)]
pub mod rng;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod stats;
// reached by the suite and the benches (`Nanos` and `Instant` are in the prelude), not the team API
#[doc(hidden)]
pub mod time;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod timeline;

// ---- internal: pacesim's own machinery, reached through the API above (`SimBuilder`, the
// ---- registry, `report`, the command line); `tests/suite/layers.rs` holds this list ----
pub(crate) mod destination;
pub(crate) mod engine;
pub(crate) mod platform;
pub(crate) mod plot;
pub(crate) mod sim;
pub(crate) mod store;
pub(crate) mod sweep;
pub(crate) mod task;
pub(crate) mod worker;
