//! The live commands' file handling: `pacesim live FILE` and `pacesim conform FILE` load the
//! scenario (with the registry's rules and the command line's overrides) and hand it to live
//! mode ([`crate::live`]), which runs scenarios and never reads files by itself.

use super::LoadError;
use crate::live::conform::Conformance;
use crate::live::{LiveError, LiveOptions, LiveRun};
use std::path::{Path, PathBuf};

/// Why `pacesim live` or `pacesim conform` gave no result.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The scenario did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The live run failed, or was interrupted.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// The external worker command cannot run (`--worker-cmd`, or `[live] command`), or the
    /// setup cannot (`[live] setup`).
    #[error("{0}")]
    WorkerCommand(String),
    /// The trace file could not be written.
    #[error("{path}: {source}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl CommandError {
    /// True when SIGINT, SIGTERM or SIGHUP stopped the run (which was cleaned up).
    pub fn interrupted(&self) -> bool {
        matches!(self, CommandError::Live(LiveError::Interrupted))
    }
}

/// `pacesim live`: load `file` with the overrides, run it live (with the external worker of
/// `worker_cmd` or `[live] command`, if any), and write its trace to `trace` (JSON Lines) if
/// given.
pub fn run_file(
    file: &Path,
    seed: Option<u64>,
    backend: Option<&str>,
    trace: Option<&Path>,
    worker_cmd: Option<&str>,
    opts: &LiveOptions,
) -> Result<LiveRun, CommandError> {
    let sc = super::load(file, seed, backend)?;
    let mut opts = opts.clone();
    if let Some(w) =
        crate::live::worker_command(&sc, file, worker_cmd).map_err(|e| CommandError::WorkerCommand(e.to_string()))?
    {
        opts.worker = Some(w);
    }
    opts.setup = crate::live::setup::resolve(&sc, file).map_err(|e| CommandError::WorkerCommand(e.to_string()))?;
    let r = crate::live::run_blocking(&sc, &opts)?;
    if let Some(p) = trace {
        std::fs::write(p, &r.trace).map_err(|source| CommandError::Trace {
            path: p.to_path_buf(),
            source,
        })?;
    }
    Ok(r)
}

/// `pacesim conform`: load `file` (with `--backend`) and run it both ways ([`crate::live::conform::conform`]).
pub(crate) fn conform_file(
    file: &std::path::Path,
    backend: Option<&str>,
    calibrate: bool,
    worker_cmd: Option<&str>,
    opts: &LiveOptions,
) -> Result<Conformance, CommandError> {
    let sc = super::load(file, None, backend)?;
    let mut opts = opts.clone();
    if let Some(w) =
        crate::live::worker_command(&sc, file, worker_cmd).map_err(|e| CommandError::WorkerCommand(e.to_string()))?
    {
        opts.worker = Some(w);
    }
    opts.setup = crate::live::setup::resolve(&sc, file).map_err(|e| CommandError::WorkerCommand(e.to_string()))?;
    Ok(crate::live::conform::conform(&sc, calibrate, &opts)?)
}
