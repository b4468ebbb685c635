//! Live mode: the same scenarios as real OS processes against a real PostgreSQL and Redis, and
//! simulation-versus-live conformance.
//!
//! `pacesim live sims/four-limiters.toml` runs the scenario for real:
//!
//! 1. **Stores.** The parent connects to PostgreSQL (`PGHOST`, `PGPORT`, `PGUSER`,
//!    `PGPASSWORD`, `PGDATABASE`) and/or Redis (`REDIS_URL`), loopback by default
//!    ([`settings`]), and creates the run's own schema and key prefix ([`pg`], [`redis`]).
//!    A missing server is a one-line error naming it and how to start it (exit 2).
//! 2. **Destination.** A small HTTP server on 127.0.0.1 in the parent (`destination`)
//!    stamps every arrival on the run clock ([`clock`]: `CLOCK_MONOTONIC` since one origin,
//!    system-wide on Linux) and answers 200, 429 above its true limit or 503 at `p503`.
//! 3. **Workers.** N worker processes: this same executable in the hidden `worker` mode
//!    ([`worker`]), each with its own store connection, running the backend's real operation
//!    (the `row` statement, a local pacer, ...). They report their own events over a pipe,
//!    stamped on the same clock ([`proto`]). Each dies with the parent (`PR_SET_PDEATHSIG`,
//!    and stdin closing), so no worker outlives the run.
//! 4. **Faults for real** ([`runner`]): SIGKILL a worker (immediately, or at a protocol point
//!    it reaches) and restart it; store outages, added latency and partitions through a TCP
//!    proxy on loopback (`proxy`); a long transaction holding the row lock from a helper
//!    connection; the hard time limit enforced by killing the worker.
//! 5. **Output.** The events, merged and sorted by time, form the same trace as the
//!    simulator's (header `source = "live"`), so [`crate::summary::from_trace`], the checkers
//!    and the plots read it unchanged. The schema and keys are dropped afterwards, also after
//!    a failure or Ctrl-C.
//!
//! With `--worker-cmd 'python3 my_worker.py'` (or `[live] command` in the scenario) the
//! workers are any program instead ([`external`]): N copies, each in its own process group,
//! told who they are and where the stores and the destination are in `PACESIM_*` environment
//! variables; the destination records their fetches, the harness their kills, and they may
//! print event lines for the checks that need more.
//!
//! `pacesim conform FILE [--calibrate]` ([`conform`]) runs a scenario both ways and prints the
//! two side by side; `--calibrate` first fits the simulator's store to the live store, stage
//! by stage (network, statement, commit), and puts the calibrated simulation's reservation
//! cost beside live's.
//!
//! # Live and simulated, side by side
//!
//! A worker runs the backend's own process side ([`crate::backend::ProcessSide`]: what to ask,
//! what a reply means, fallback, backoff placement) through the simulator's own worker loop
//! (`crate::worker`) and replaces only the store side ([`crate::backend::StoreSide`]) with
//! the real operation ([`adapter`]), so the two modes share one definition of each backend.
//! Where they still differ, reality wins:
//!
//! - `store.latency`, `store.service` and `store.commit` are the simulator's model; live runs
//!   have the real ones (`conform --calibrate` fits the model to them). With PostgreSQL's
//!   default `synchronous_commit = on`, a reservation's commit waits for the WAL flush while
//!   the row is still locked: on a slow disk that flush *is* the reservation's cost
//!   (`PGOPTIONS="-c synchronous_commit=off"` shows the statement alone); the simulator's
//!   commit stage models it, under the row lock.
//! - `advisory`'s `detect_dead`: the real server notices a killed holder's closed connection
//!   (on loopback, at once); `connections` is the server's own `max_connections`.
//! - `redis_lock`'s TTL and `redis_gcra`'s `TIME` are Redis's own.
//! - `store_restart` is a refusing outage at the proxy that ends every session (the server
//!   itself is not restarted).
//! - Clock faults shape each worker's *view* of its clocks, as in the simulator; the host's
//!   clocks are not touched.
//!
//! Only Linux is supported (the shared monotonic clock and `PR_SET_PDEATHSIG`).

pub mod adapter;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod clock;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod conform;
pub(crate) mod destination;
pub(crate) mod driver;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod external;
mod faults;
mod options;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod pg;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod proto;
pub(crate) mod proxy;
pub(crate) mod reap;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod redis;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod runner;
pub mod settings;
pub(crate) mod setup;
mod stores;
mod supervisor;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod worker;

pub use adapter::StoreUse;
pub use options::LiveOptions;
pub use runner::{LiveRun, run, run_blocking};
pub use settings::Missing;

use crate::trace::Event;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Events collected in the parent (destination arrivals, fault edges, the workers' events).
pub(crate) type EventLog = Arc<Mutex<Vec<Event>>>;

/// Why a live run did not produce a trace.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A store server is not reachable.
    #[error(transparent)]
    Missing(#[from] Missing),
    /// The scenario uses something live mode cannot run.
    #[error("{0}")]
    Unsupported(String),
    /// Setting the run up failed (schema, destination, proxy, spawning workers).
    #[error("live run setup: {0}")]
    Setup(String),
    /// A worker failed.
    #[error("live run failed: {0}")]
    Worker(String),
    /// SIGINT, SIGTERM or SIGHUP: the run was stopped and cleaned up.
    #[error("interrupted; workers stopped, schema and keys dropped")]
    Interrupted,
}

/// The directory a scenario file's relative paths start from (`[live] command`, `setup`): its
/// own, or `.` for a bare file name.
pub(crate) fn scenario_dir(file: &Path) -> std::path::PathBuf {
    file.parent()
        .map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d })
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// A worker command that cannot run: where it was given, and why.
#[derive(Debug, thiserror::Error)]
pub enum WorkerCommandError {
    /// `--worker-cmd` does not split into words.
    #[error("--worker-cmd: {0}")]
    Split(external::SplitError),
    /// `--worker-cmd`'s program cannot run.
    #[error("--worker-cmd: {0}")]
    Cli(external::CommandError),
    /// The scenario's `[live] command` cannot run.
    #[error("{}: live.command: {err}", .file.display())]
    Scenario {
        /// The scenario file.
        file: std::path::PathBuf,
        /// Why the program cannot run.
        err: external::CommandError,
    },
}

/// The external worker a live command runs, if any: `--worker-cmd` (split like a shell's
/// words, run in the current directory) wins over the scenario's `[live] command` (run in the
/// scenario file's directory). The program must exist and be executable.
pub fn worker_command(
    sc: &crate::scenario::Scenario,
    file: &Path,
    cli: Option<&str>,
) -> Result<Option<external::WorkerCommand>, WorkerCommandError> {
    if let Some(c) = cli {
        let argv = external::split_command(c).map_err(WorkerCommandError::Split)?;
        return external::WorkerCommand::resolve(argv, None)
            .map(Some)
            .map_err(WorkerCommandError::Cli);
    }
    let Some(argv) = sc.live.as_ref().and_then(|l| l.command.clone()) else {
        return Ok(None);
    };
    external::WorkerCommand::resolve(argv, Some(scenario_dir(file)))
        .map(Some)
        .map_err(|err| WorkerCommandError::Scenario {
            file: file.to_path_buf(),
            err,
        })
}
