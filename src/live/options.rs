//! How a live run is asked for ([`LiveOptions`], with the scenario's setup step as checked,
//! [`Setup`]): below the runner and the setup step (`setup.rs`), which both read it. Its
//! constructors for the command line and for tests, [`LiveOptions::cli`] and
//! [`LiveOptions::with_exe`], take the backends' adapters as an argument (the registry's).

use crate::live::adapter::Backends;
use crate::live::external::WorkerCommand;
use std::path::PathBuf;

/// How to run.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The pacesim executable workers run (`pacesim worker ...`).
    pub exe: PathBuf,
    /// Stop cleanly on SIGINT/SIGTERM (the CLI does; a test harness need not).
    pub handle_signals: bool,
    /// One progress line on stderr (run id, schema, key prefix); an external worker's stderr
    /// is forwarded, prefixed with its index.
    pub verbose: bool,
    /// Run this external program as the workers instead of pacesim's own (`--worker-cmd`, or
    /// the scenario's `[live] command`; see [`crate::live::external`]).
    pub worker: Option<WorkerCommand>,
    /// Run this once before the workers start (the scenario's `[live] setup`, resolved against
    /// its file: `crate::live::setup`).
    pub setup: Option<Setup>,
    /// The live adapters of the backends a scenario may name (the registry's,
    /// `registry::Registered`, given to [`LiveOptions::cli`] or [`LiveOptions::with_exe`]).
    pub backends: &'static dyn Backends,
}

impl LiveOptions {
    /// The CLI's options: this executable, signals handled, verbose; the adapters of
    /// `backends` (the registry's, `registry::Registered`).
    pub fn cli(backends: &'static dyn Backends) -> LiveOptions {
        LiveOptions {
            exe: std::env::current_exe().unwrap_or_else(|_| "pacesim".into()),
            handle_signals: true,
            verbose: true,
            worker: None,
            setup: None,
            backends,
        }
    }

    /// Options for a library caller (tests): the given executable, no signal handling, quiet;
    /// the adapters of `backends`.
    pub fn with_exe(exe: impl Into<PathBuf>, backends: &'static dyn Backends) -> LiveOptions {
        LiveOptions {
            exe: exe.into(),
            handle_signals: false,
            verbose: false,
            worker: None,
            setup: None,
            backends,
        }
    }

    /// The same options with an external worker command.
    pub fn with_worker(mut self, worker: WorkerCommand) -> LiveOptions {
        self.worker = Some(worker);
        self
    }
}

/// A scenario's `[live] setup`, checked: the program found, or the SQL file read.
#[derive(Clone, Debug, PartialEq)]
pub enum Setup {
    /// A program, run in the scenario file's directory.
    Command(WorkerCommand),
    /// An SQL file's text, run in the run's schema.
    Sql {
        /// The file, as found (for messages).
        file: PathBuf,
        /// Its text.
        text: String,
    },
}

impl Setup {
    /// The setup as the scenario gives it, for messages.
    pub fn display(&self) -> String {
        match self {
            Setup::Command(c) => c.display(),
            Setup::Sql { file, .. } => file.display().to_string(),
        }
    }
}
