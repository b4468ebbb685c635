//! `[live] setup`: a team's own tables, made once per run before its workers start.
//!
//! A team's worker needs tables of its own (a Django migration, an SQL file). Rather than each
//! worker creating them under a lock, the scenario names a setup step:
//!
//! ```toml
//! [live]
//! command = ["python", "worker.py"]
//! setup = ["python", "manage.py", "migrate"]   # a program, run as is in the scenario's directory
//! # setup = "tables.sql"                        # or an SQL file, run in the run's schema
//! ```
//!
//! It runs after the run's schema and key prefix exist and before any worker starts, with the
//! stores' part of a worker's environment (`PACESIM_PG_URL`, `PACESIM_PG_SCHEMA`, `PGHOST` ..
//! `PGOPTIONS` with the schema first on the `search_path`, `PACESIM_REDIS_URL`,
//! `PACESIM_REDIS_PREFIX`) plus `PACESIM_RUN_ID`, `PACESIM_PROCESSES`, `PACESIM_RATE`,
//! `PACESIM_PACER`, `PACESIM_DURATION_S` and `PACESIM_SETUP=1`. Whatever it creates in the
//! run's schema (or under its key prefix) goes when the run drops them. A setup that fails
//! (non-zero exit, a signal, an SQL error, more than [`LIMIT`]) fails the run before any worker
//! starts: exit 2, with its exit status and the last lines of its output, secrets redacted. It
//! runs in its own process group, which is killed when it ends: nothing it starts outlives it.

use crate::live::external::{Targets, WorkerCommand, store_env};
pub use crate::live::options::Setup;
use crate::live::proto::{PgStore, RedisStore};
use crate::live::settings::{known_secrets, redact_all, url_secrets};
use crate::live::stores::Stores;
use crate::live::{LiveError, LiveOptions};
use crate::scenario::{LiveSetup, Scenario};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

/// How long a setup may run before it is killed and the run fails.
pub const LIMIT: Duration = Duration::from_secs(600);

/// The lines of a failed setup's output quoted in the error.
const TAIL_LINES: usize = 40;

/// A scenario's `[live] setup` that cannot run: the scenario file, and why.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Its program.
    #[error("{}: live.setup: {err}", .file.display())]
    Command {
        /// The scenario file.
        file: PathBuf,
        /// Why the program cannot run.
        err: crate::live::external::CommandError,
    },
    /// Its SQL file, unreadable.
    #[error("{}: live.setup: SQL file {}: {err}", .file.display(), .path.display())]
    Sql {
        /// The scenario file.
        file: PathBuf,
        /// The SQL file.
        path: PathBuf,
        /// Why it cannot be read.
        err: std::io::Error,
    },
}

/// The setup of `sc`, read from the scenario file `file`'s directory: its program must exist
/// and be executable (as `[live] command`'s), its SQL file must be readable. `None` without
/// `[live] setup`.
pub fn resolve(sc: &Scenario, file: &Path) -> Result<Option<Setup>, SetupError> {
    let Some(setup) = sc.live.as_ref().and_then(|l| l.setup.clone()) else {
        return Ok(None);
    };
    let dir = crate::live::scenario_dir(file);
    match setup {
        LiveSetup::Command(argv) => WorkerCommand::resolve(argv, Some(dir))
            .map(|c| Some(Setup::Command(c)))
            .map_err(|err| SetupError::Command {
                file: file.to_path_buf(),
                err,
            }),
        LiveSetup::Sql(name) => {
            let path = dir.join(&name);
            std::fs::read_to_string(&path)
                .map(|text| {
                    Some(Setup::Sql {
                        file: path.clone(),
                        text,
                    })
                })
                .map_err(|err| SetupError::Sql {
                    file: file.to_path_buf(),
                    path: path.clone(),
                    err,
                })
        }
    }
}

/// Run the run's setup, if `opts` has one, against its `stores`: `Err` (a [`LiveError::Setup`]
/// naming the step, its status and its output's last lines) when it fails,
/// [`LiveError::Interrupted`] when `cancel` turns true first.
pub(super) async fn run(
    sc: &Scenario,
    opts: &LiveOptions,
    run_id: &str,
    stores: &Stores,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), LiveError> {
    let Some(setup) = &opts.setup else {
        return Ok(());
    };
    let targets = Targets {
        pg: stores.pg.as_ref().map(|(settings, schema)| PgStore {
            settings: settings.clone(),
            schema: schema.clone(),
        }),
        redis: stores.redis.as_ref().map(|(settings, prefix)| RedisStore {
            settings: settings.clone(),
            via: None,
            prefix: prefix.clone(),
        }),
    };
    let mut env = store_env(&targets);
    let pacer = serde_json::json!({
        "backend": sc.pacer.backend,
        "rate": sc.pacer.rate,
        "options": opts.backends.detail(sc).unwrap_or(serde_json::Value::Null),
    });
    env.extend([
        ("PACESIM_SETUP".to_string(), "1".to_string()),
        ("PACESIM_RUN_ID".into(), run_id.to_string()),
        ("PACESIM_PROCESSES".into(), sc.processes.count.to_string()),
        ("PACESIM_RATE".into(), sc.pacer.rate.to_string()),
        ("PACESIM_PACER".into(), pacer.to_string()),
        ("PACESIM_DURATION_S".into(), format!("{}", sc.duration.0 as f64 / 1e9)),
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ]);
    // what the setup's output must never show: the secrets pacesim knows, and those it hands on
    let mut secrets = known_secrets();
    for (k, v) in &env {
        match k.as_str() {
            "PGPASSWORD" => secrets.push(v.clone()),
            "PACESIM_PG_URL" | "PACESIM_REDIS_URL" => secrets.extend(url_secrets(v)),
            _ => {}
        }
    }
    let redact = |s: &str| redact_all(s, &secrets);
    if opts.verbose {
        eprintln!("live: setup: {}", redact(&setup.display()));
    }
    let started = Instant::now();
    let outcome = tokio::select! {
        r = tokio::time::timeout(LIMIT, step(setup, &targets, &env, opts.verbose)) => match r {
            Ok(r) => r,
            Err(_) => Err(Failure { why: format!("still running after {} s: stopped", LIMIT.as_secs()), output: String::new() }),
        },
        _ = cancelled(&mut cancel) => return Err(LiveError::Interrupted),
    };
    match outcome {
        Ok(()) => {
            if opts.verbose {
                eprintln!("live: setup done in {:.1} s", started.elapsed().as_secs_f64());
            }
            Ok(())
        }
        Err(f) => {
            let output = if matches!(setup, Setup::Sql { .. }) {
                String::new()
            } else if f.output.trim().is_empty() {
                " It printed nothing.".to_string()
            } else {
                format!(" Its output (last lines):\n{}", f.output.trim_end())
            };
            Err(LiveError::Setup(redact(&format!(
                "[live] setup `{}` failed after {:.1} s, before any worker started: {}.{output}",
                setup.display(),
                started.elapsed().as_secs_f64(),
                f.why
            ))))
        }
    }
}

/// Why a setup step failed, and the last lines it printed.
struct Failure {
    why: String,
    output: String,
}

async fn step(setup: &Setup, targets: &Targets, env: &[(String, String)], verbose: bool) -> Result<(), Failure> {
    match setup {
        Setup::Sql { text, .. } => sql(text, targets.pg.as_ref()).await,
        Setup::Command(cmd) => command(cmd, env, verbose).await,
    }
}

/// The SQL file, in one transaction, with the run's schema alone on the `search_path`.
async fn sql(text: &str, pg: Option<&PgStore>) -> Result<(), Failure> {
    let fail = |why: String| Failure {
        why,
        output: String::new(),
    };
    let Some(pg) = pg else {
        return Err(fail(
            "an SQL file needs the run's PostgreSQL schema, and the scenario's backend uses no PostgreSQL \
             (give a command instead, or a backend whose store is PostgreSQL)"
                .into(),
        ));
    };
    let c = pg
        .settings
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let quoted = format!("\"{}\"", pg.schema.replace('"', "\"\""));
    c.batch_execute(&format!("SET search_path TO {quoted}"))
        .await
        .map_err(|e| fail(crate::live::settings::error_chain(&e)))?;
    // one transaction: a file that fails half way leaves nothing half made
    c.batch_execute(&format!("BEGIN;\n{text}\n;COMMIT;"))
        .await
        .map_err(|e| fail(sql_error(&e)))
}

/// A server's error with what it says about where (`position`) and why (`detail`, `hint`).
fn sql_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = format!("{}: {}", d.severity(), d.message());
            if let Some(x) = d.detail() {
                s.push_str(&format!(" (detail: {x})"));
            }
            if let Some(x) = d.hint() {
                s.push_str(&format!(" (hint: {x})"));
            }
            s
        }
        None => crate::live::settings::error_chain(e),
    }
}

/// The program, in its own process group, stdout and stderr read line by line (forwarded to
/// stderr when `verbose`, the last [`TAIL_LINES`] kept); its group is killed when it ends.
async fn command(cmd: &WorkerCommand, env: &[(String, String)], verbose: bool) -> Result<(), Failure> {
    let mut c = tokio::process::Command::new(&cmd.program);
    c.arg0(&cmd.argv[0]).args(&cmd.argv[1..]);
    if let Some(d) = &cmd.cwd {
        c.current_dir(d);
    }
    c.envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let pids = Mutex::new(Vec::new());
    let mut child = crate::live::supervisor::spawn_tied(&mut c, &pids).map_err(|e| Failure {
        why: format!("could not start {}: {e}", cmd.program.display()),
        output: String::new(),
    })?;
    let group = Group(child.id().map_or(0, |p| p as libc::pid_t));
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let mut readers = Vec::new();
    let out = child
        .stdout
        .take()
        .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>);
    let err = child
        .stderr
        .take()
        .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>);
    for pipe in [out, err].into_iter().flatten() {
        let tail = Arc::clone(&tail);
        readers.push(tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // the setup's own text: redacted, and bounded, before it is shown or kept
                if verbose {
                    eprintln!("[setup] {}", crate::live::settings::excerpt(&line, &[], 2000));
                }
                let mut t = tail.lock().expect("setup output");
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(crate::live::settings::excerpt(&line, &[], 300));
            }
        }));
    }
    let status = child.wait().await;
    // nothing the setup started outlives it (a pipe held open by a child of its would also
    // keep the readers waiting)
    drop(group);
    for r in readers {
        let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
    }
    let output = tail
        .lock()
        .expect("setup output")
        .iter()
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    let why = match status {
        Ok(s) if s.success() => return Ok(()),
        Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => s.to_string(),
        },
        Err(e) => format!("waiting for it: {e}"),
    };
    Err(Failure { why, output })
}

/// A process group SIGKILLed when dropped.
struct Group(libc::pid_t);

impl Drop for Group {
    fn drop(&mut self) {
        if self.0 > 0 {
            // SAFETY: kill(2) on our own child's process group; ESRCH (already gone) is fine.
            unsafe {
                libc::kill(-self.0, libc::SIGKILL);
            }
        }
    }
}

/// Resolves once `cancel` turns true; never, if its sender is gone without cancelling.
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
