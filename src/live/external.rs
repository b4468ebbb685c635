//! External worker programs: live mode driving any program (`pacesim live FILE --worker-cmd
//! 'python3 my_worker.py'`, or `[live] command = [...]` in the scenario).
//!
//! The harness starts N copies of the command, each in its own process group, and tells each
//! who it is and where to go in environment variables (`worker_env`; `docs/live.md`, "Your own
//! worker program", lists them). A worker fetches by sending `GET` to its destination
//! URL; the destination stamps each arrival, and records the fetch's start and end itself.
//! That is all the harness needs. A worker may also print event lines on stdout (one JSON
//! object per line, the trace's own events without `t` and `pid`), which unlock the checks
//! that need them, plus three lines of its own:
//!
//! ```text
//! {"ev":"grant","slot":1700000000123456000,"now":1700000000120000000,"interval":50000000,"multiplier":1.0}
//! {"ev":"point","name":"mid_reservation"}      a kill point reached: the harness may SIGKILL it here
//! {"ev":"job_start"} / {"ev":"job_end"}        a job's bounds, for the hard and soft time limits
//! {"ev":"ready"}                               started up (imports done, connected): optional
//! ```
//!
//! The scenario's clock (its faults and its duration) starts when every worker is ready: its
//! first line on stdout (an event or `ready`) or its first arrival at the destination, whichever
//! comes first (`runner.rs`); a worker not ready within `[live] ready_timeout` fails the run,
//! named.
//!
//! stdout is for those lines only: anything else there fails the run with the line quoted
//! (log to stderr, which the harness forwards prefixed with the worker's index).
//!
//! Every process gets a deadline: at the end of the run (or when the run fails) each worker's
//! process group gets `SIGTERM`, then `SIGKILL` after `[live] stop_grace`, so a worker that
//! ignores `SIGTERM`, forks children or never fetches is gone with its children.

use crate::fault::{FaultSpec, KillPoint};
use crate::live::EventLog;
use crate::live::clock::RunClock;
use crate::live::proto::{PgStore, RedisStore};
use crate::live::supervisor::{Cmd, Ended};
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::{CrashPoint, Event};
use crate::worker::Sections;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::mpsc;

/// An external worker command, checked: its program exists and is executable.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerCommand {
    /// The program and its arguments (the first word as given).
    pub argv: Vec<String>,
    /// The program file found (on `PATH`, or relative to `cwd`).
    pub program: PathBuf,
    /// The directory the workers run in (`None`: the current directory).
    pub cwd: Option<PathBuf>,
}

impl WorkerCommand {
    /// The command as one line, for messages (arguments with spaces quoted).
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| {
                let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c);
                if a.is_empty() || !a.chars().all(plain) {
                    format!("'{}'", a.replace('\'', "'\\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Check a command given as words: its program must exist and be executable. A program
    /// with a `/` is a path (relative to `cwd`, else the current directory); a bare name is
    /// looked up on `PATH`.
    pub fn resolve(argv: Vec<String>, cwd: Option<PathBuf>) -> Result<WorkerCommand, CommandError> {
        let Some(first) = argv.first().filter(|p| !p.trim().is_empty()) else {
            return Err(CommandError::Empty);
        };
        let program = if first.contains('/') {
            let p = PathBuf::from(first);
            let p = match (&cwd, p.is_relative()) {
                (Some(d), true) => d.join(p),
                _ => p,
            };
            check_executable(&p).map_err(|why| CommandError::Program(first.clone(), why.to_string()))?;
            p
        } else {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut found = None;
            let mut not_exec = None;
            for dir in std::env::split_paths(&path) {
                let p = dir.join(first);
                match check_executable(&p) {
                    Ok(()) => {
                        found = Some(p);
                        break;
                    }
                    Err(why) if p.exists() => not_exec = not_exec.or(Some((p, why))),
                    Err(_) => {}
                }
            }
            match (found, not_exec) {
                (Some(p), _) => p,
                (None, Some((p, why))) => {
                    return Err(CommandError::Program(first.clone(), format!("{} {why}", p.display())));
                }
                (None, None) => return Err(CommandError::NotOnPath(first.clone())),
            }
        };
        Ok(WorkerCommand { argv, program, cwd })
    }
}

/// A worker command that cannot run (its messages are the command line's and the scenario's).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// No program.
    #[error("the worker command is empty: give a program, e.g. --worker-cmd 'python3 worker.py'")]
    Empty,
    /// The program (as given) is not one pacesim can run: why.
    #[error("worker program `{0}`: {1}")]
    Program(String, String),
    /// A bare name found nowhere on `PATH`.
    #[error("worker program `{0}`: not found on PATH")]
    NotOnPath(String),
}

/// Why a file is not a program pacesim can run.
#[derive(Debug, thiserror::Error)]
enum NotExecutable {
    #[error("no such file")]
    Missing,
    #[error("{0}")]
    Unreadable(std::io::Error),
    #[error("is a directory")]
    Directory,
    #[error("is not executable (chmod +x, or run it with its interpreter)")]
    NoExecBit,
}

fn check_executable(p: &Path) -> Result<(), NotExecutable> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(NotExecutable::Missing),
        Err(e) => Err(NotExecutable::Unreadable(e)),
        Ok(m) if m.is_dir() => Err(NotExecutable::Directory),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Err(NotExecutable::NoExecBit),
        Ok(_) => Ok(()),
    }
}

/// A command line that does not split into words: the line, quoted in the message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SplitError {
    /// A `'` never closed.
    #[error("unterminated single quote in `{0}`")]
    SingleQuote(String),
    /// A `"` never closed.
    #[error("unterminated double quote in `{0}`")]
    DoubleQuote(String),
    /// A last backslash, escaping nothing.
    #[error("`{0}` ends with a backslash")]
    Backslash(String),
}

/// Split a command line into words as a POSIX shell would, without running one: blanks
/// separate words; single quotes keep everything; double quotes keep all but `\"` and `\\`;
/// a backslash outside quotes keeps the next character. No variables, globs or operators.
pub(crate) fn split_command(s: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(SplitError::SingleQuote(s.to_string())),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(SplitError::DoubleQuote(s.to_string())),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(SplitError::DoubleQuote(s.to_string())),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err(SplitError::Backslash(s.to_string())),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The kill points' names, for a message.
fn known_points() -> String {
    KillPoint::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}

/// What an external worker cannot do (yet): the scenario field and what to do instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Unsupported {
    /// `faults[i]`: a kill at a protocol point the worker does not report.
    #[error(
        "faults[{0}]: a kill at point `{1}` is unavailable with an external worker ({2}): only the worker knows when it is there. \
         Have it print {{\"ev\":\"point\",\"name\":\"{1}\"}} at that point and declare it in the scenario \
         ([live] kill_points = [\"{1}\"]), or drop `point` to kill at the fault's time"
    )]
    KillPoint(usize, &'static str, String),
    /// A time limit (the field) without a worker that reports its jobs.
    #[error(
        "{0}: a time limit needs an external worker that reports its jobs: have it print \
         {{\"ev\":\"job_start\"}} and {{\"ev\":\"job_end\"}} around each job and set [live] jobs = true"
    )]
    TimeLimit(&'static str),
    /// A `clock` fault.
    #[error(
        "a `clock` fault shapes pacesim's own workers' view of their clocks; an external worker reads the host's \
         clocks, which pacesim does not change: remove the fault for external runs"
    )]
    ClockFault,
}

/// Why a line on an external worker's stdout is not one pacesim reads: the end of a sentence
/// that begins with the line (`... printed on stdout, line 3: "...", which <this>`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    /// Not one JSON object.
    #[error("is not an event line (one JSON object with an \"ev\" field)")]
    NotJson,
    /// No `ev`.
    #[error("has no \"ev\" field naming the event")]
    NoEv,
    /// A `point` line whose `name` is no kill point (the name as given).
    #[error("names no kill point ({0}; known: {known})", known = known_points())]
    NoSuchPoint(serde_json::Value),
    /// An event only the harness records (its kind).
    #[error(
        "is {article} `{0}` event: only the harness records those (it sees every fetch at the destination and every kill)",
        article = if .0.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
    )]
    HarnessEvent(String),
    /// Another worker's pid (the pid given, this worker's).
    #[error("gives pid {0}, but it is worker {1} (leave pid out)")]
    OtherPid(serde_json::Value, u32),
    /// An event of kind `0` that does not read.
    #[error("is not a valid `{0}` event: {1}")]
    Invalid(String, serde_json::Error),
}

/// What the scenario asks of an external worker that it cannot give: a kill point the worker
/// does not report, a time limit without job lines. `Err` names the field and what to do.
pub fn unsupported(sc: &Scenario) -> Result<(), Unsupported> {
    let live = sc.live.clone().unwrap_or_default();
    for (i, f) in sc.faults.iter().enumerate() {
        if let FaultSpec::Kill { point: Some(p), .. } = f
            && let Err(e) = p.reached_by("external", &live.kill_points)
        {
            return Err(Unsupported::KillPoint(i, p.name(), e.to_string()));
        }
    }
    for (field, set) in [
        ("processes.hard_limit", sc.processes.hard_limit.is_some()),
        ("processes.soft_limit", sc.processes.soft_limit.is_some()),
    ] {
        if set && !live.jobs {
            return Err(Unsupported::TimeLimit(field));
        }
    }
    if sc.faults.iter().any(|f| matches!(f, FaultSpec::Clock { .. })) {
        return Err(Unsupported::ClockFault);
    }
    Ok(())
}

/// Whether the external run's demand is implied by the contract: a closed loop without think
/// time (each worker asks for its next fetch as soon as the last one ends), so the checkers
/// that need to know when processes wait for permission can judge from arrivals alone.
pub fn closed_loop(sc: &Scenario) -> bool {
    sc.processes.arrival_rate.is_none() && sc.processes.think.mean() == 0.0
}

/// The trace header of an external run: backend `external`, and in `backend_detail` the
/// command (`worker`), the design it implements (`model`: the scenario's backend, whose options
/// the checkers read), and for a closed loop without think time `demand = "closed_loop"` (with
/// `requests` per process when bounded), which lets the checkers infer when processes wait for
/// permission from the fetches alone ([`crate::check::common::Demand`]).
pub(crate) fn mark_header(h: &mut crate::trace::Header, sc: &Scenario, cmd: &WorkerCommand) {
    h.backend = "external".into();
    let o = &mut h.backend_detail.other;
    o.insert("worker".into(), cmd.display().into());
    o.insert("model".into(), sc.pacer.backend.clone().into());
    if closed_loop(sc) {
        o.insert("demand".into(), "closed_loop".into());
        if let Some(r) = sc.processes.requests {
            o.insert("requests".into(), r.into());
        }
    }
}

/// Where one worker's stores are (possibly through a fault proxy).
#[derive(Clone, Debug, Default)]
pub(super) struct Targets {
    pub(super) pg: Option<PgStore>,
    pub(super) redis: Option<RedisStore>,
}

/// What external supervisors share.
pub(super) struct ExtCtx {
    pub(super) sc: Scenario,
    pub(super) cmd: WorkerCommand,
    pub(super) run_id: String,
    pub(super) log: EventLog,
    pub(super) clock: RunClock,
    pub(super) dest_port: u16,
    pub(super) targets: Vec<Targets>,
    pub(super) os_pids: Arc<Mutex<Vec<u32>>>,
    /// The `[pacer]` options in force, as JSON (`PACESIM_PACER`).
    pub(super) pacer: String,
    /// Each worker's last stderr lines (for messages).
    pub(super) tails: Vec<Mutex<VecDeque<String>>>,
    /// Notes for the run's output (a kill point armed that never fired, ...).
    pub(super) notes: Arc<Mutex<Vec<String>>>,
    /// Forward the workers' stderr to ours (prefixed).
    pub(super) forward_stderr: bool,
    /// Each worker printed a line on stdout (an event or `{"ev":"ready"}`): it is ready.
    pub(super) ready: Vec<std::sync::atomic::AtomicBool>,
    /// When every worker was ready, on the run clock: the scenario's time 0 (its faults and
    /// its duration count from here). 0 until then.
    pub(super) start: std::sync::atomic::AtomicU64,
}

impl ExtCtx {
    fn push(&self, ev: Event) {
        self.log.lock().expect("event log").push(ev);
    }

    fn note(&self, s: String) {
        self.notes.lock().expect("notes").push(s);
    }

    /// The last stderr lines of worker `pid`, for a message (empty: nothing).
    pub(super) fn tail(&self, pid: u32) -> String {
        let t = self.tails[pid as usize].lock().expect("tail");
        if t.is_empty() {
            String::new()
        } else {
            format!(
                "; its stderr ended with: {}",
                t.iter().map(String::as_str).collect::<Vec<_>>().join(" | ")
            )
        }
    }

    /// The scenario's time 0 on the run clock (when every worker was ready).
    pub(super) fn start(&self) -> u64 {
        self.start.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Worker `pid` is ready: it printed a line, or reached the destination.
    pub(super) fn is_ready(&self, pid: u32) -> bool {
        self.ready[pid as usize].load(std::sync::atomic::Ordering::Relaxed) || self.arrivals(pid) > 0
    }

    pub(super) fn arrivals(&self, pid: u32) -> u64 {
        self.log
            .lock()
            .expect("event log")
            .iter()
            .filter(|e| matches!(e, Event::Arrival { pid: p, .. } if *p == pid))
            .count() as u64
    }

    fn fetches_done(&self, pid: u32) -> u64 {
        self.log
            .lock()
            .expect("event log")
            .iter()
            .filter(|e| matches!(e, Event::FetchEnd { pid: p, .. } if *p == pid))
            .count() as u64
    }

    /// The destination URL worker `pid` fetches.
    pub(super) fn url(&self, pid: u32) -> String {
        format!("http://127.0.0.1:{}/fetch?pid={pid}", self.dest_port)
    }
}

/// Percent-encode a URL component (RFC 3986 unreserved characters stay).
fn enc(s: &str) -> String {
    crate::live::settings::percent_encode(s)
}

/// `redis://[auth@]host:port[/db]` with the address replaced.
fn redis_url_via(url: &str, host: &str, port: u16) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("redis", url));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let auth = authority
        .rsplit_once('@')
        .map(|(a, _)| format!("{a}@"))
        .unwrap_or_default();
    format!("{scheme}://{auth}{host}:{port}{path}")
}

/// The environment of worker `pid`'s incarnation `incarnation` (the contract, in `docs/live.md`).
pub(super) fn worker_env(ctx: &ExtCtx, pid: u32, incarnation: u32, remaining: Option<u64>) -> Vec<(String, String)> {
    let sc = &ctx.sc;
    let mut env: Vec<(String, String)> = vec![
        ("PACESIM_RUN_ID".into(), ctx.run_id.clone()),
        ("PACESIM_PROCESS".into(), pid.to_string()),
        ("PACESIM_PROCESSES".into(), sc.processes.count.to_string()),
        ("PACESIM_INCARNATION".into(), incarnation.to_string()),
        ("PACESIM_RATE".into(), sc.pacer.rate.to_string()),
        ("PACESIM_PACER".into(), ctx.pacer.clone()),
        ("PACESIM_DESTINATION_URL".into(), ctx.url(pid)),
        ("PACESIM_CLOCK_ORIGIN_NS".into(), ctx.clock.origin().to_string()),
        ("PACESIM_DURATION_S".into(), format!("{}", sc.duration.0 as f64 / 1e9)),
        // a Python worker's prints reach the harness at once, and leave no __pycache__ in
        // the team's tree
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
    ];
    if let Some(r) = remaining {
        env.push(("PACESIM_REQUESTS".into(), r.to_string()));
    }
    env.extend(store_env(&ctx.targets[pid as usize]));
    env
}

/// The stores' part of a worker's environment (and of `[live] setup`'s, `setup.rs`):
/// `PACESIM_PG_URL`, `PACESIM_PG_SCHEMA` and libpq's `PG*` with the run's schema on the
/// `search_path`; `PACESIM_REDIS_URL` and `PACESIM_REDIS_PREFIX`.
pub(super) fn store_env(t: &Targets) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(pg) = &t.pg {
        let s = &pg.settings;
        let options = crate::live::pg::search_path_options(s.options.as_deref(), &pg.schema);
        let auth = match &s.password {
            Some(p) => format!("{}:{}", enc(&s.user), enc(p)),
            None => enc(&s.user),
        };
        let url = if s.host.starts_with('/') {
            format!(
                "postgresql://{auth}@/{}?host={}&port={}&options={}",
                enc(&s.dbname),
                enc(&s.host),
                s.port,
                enc(&options)
            )
        } else {
            format!(
                "postgresql://{auth}@{}:{}/{}?options={}",
                s.host,
                s.port,
                enc(&s.dbname),
                enc(&options)
            )
        };
        env.push(("PACESIM_PG_URL".into(), url));
        env.push(("PACESIM_PG_SCHEMA".into(), pg.schema.clone()));
        env.push(("PGHOST".into(), s.host.clone()));
        env.push(("PGPORT".into(), s.port.to_string()));
        env.push(("PGUSER".into(), s.user.clone()));
        env.push(("PGDATABASE".into(), s.dbname.clone()));
        env.push(("PGOPTIONS".into(), options));
        if let Some(p) = &s.password {
            env.push(("PGPASSWORD".into(), p.clone()));
        }
    }
    if let Some(r) = &t.redis {
        let url = match &r.via {
            Some((h, p)) => redis_url_via(&r.settings.url, h, *p),
            None => r.settings.url.clone(),
        };
        env.push(("PACESIM_REDIS_URL".into(), url));
        env.push(("PACESIM_REDIS_PREFIX".into(), r.prefix.clone()));
    }
    env
}

/// A process group that is SIGKILLed when dropped (the supervisor's task ended, aborted or
/// not): nothing a worker started outlives its supervisor.
struct Group(libc::pid_t);

impl Group {
    fn signal(&self, sig: i32) {
        if self.0 > 0 {
            // SAFETY: kill(2) on our own child's process group; ESRCH (already gone) is fine.
            unsafe {
                libc::kill(-self.0, sig);
            }
        }
    }
    fn signal_leader(&self, sig: i32) {
        if self.0 > 0 {
            // SAFETY: as above, the group leader only.
            unsafe {
                libc::kill(self.0, sig);
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

fn spawn(ctx: &ExtCtx, pid: u32, incarnation: u32, remaining: Option<u64>) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(&ctx.cmd.program);
    cmd.arg0(&ctx.cmd.argv[0]);
    cmd.args(&ctx.cmd.argv[1..]);
    if let Some(d) = &ctx.cmd.cwd {
        cmd.current_dir(d);
    }
    cmd.envs(worker_env(ctx, pid, incarnation, remaining))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::live::supervisor::spawn_tied(&mut cmd, &ctx.os_pids)
}

/// A line a worker printed on stdout, read.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A trace event (its `pid` and, when it gave none, `t` filled in).
    Event(Event),
    /// A kill point reached.
    Point(KillPoint),
    /// A job began.
    JobStart,
    /// A job ended.
    JobEnd,
    /// The worker started up (`{"ev":"ready"}`): the run's clock may start.
    Ready,
}

/// The events only the harness records: a worker printing one is refused.
const HARNESS_EVENTS: &[&str] = &[
    "fetch_start",
    "arrival",
    "fetch_end",
    "crash",
    "restart",
    "fault",
    "end",
    "header",
];

/// At most this many characters of a worker's line are quoted in a message (redacted first).
const QUOTED: usize = 200;
/// At most this many characters of a worker's stderr line are forwarded (redacted first).
const FORWARDED: usize = 2000;

/// Read one stdout line of worker `pid`, stamped `now` unless it gives its own `t` (ns since
/// `PACESIM_CLOCK_ORIGIN_NS`). `Err` says what is wrong with it.
pub(crate) fn parse_line(line: &str, pid: u32, now: u64) -> Result<Line, LineError> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).map_err(|_| LineError::NotJson)?;
    let serde_json::Value::Object(mut m) = v else {
        return Err(LineError::NotJson);
    };
    let Some(ev) = m.get("ev").and_then(|e| e.as_str()).map(str::to_string) else {
        return Err(LineError::NoEv);
    };
    match ev.as_str() {
        "point" => {
            let name = m.get("name").cloned().unwrap_or_default();
            return serde_json::from_value::<KillPoint>(name.clone())
                .map(Line::Point)
                .map_err(|_| LineError::NoSuchPoint(name));
        }
        "job_start" => return Ok(Line::JobStart),
        "job_end" => return Ok(Line::JobEnd),
        "ready" => return Ok(Line::Ready),
        e if HARNESS_EVENTS.contains(&e) => {
            return Err(LineError::HarnessEvent(e.to_string()));
        }
        _ => {}
    }
    if let Some(p) = m.get("pid")
        && p.as_u64() != Some(pid as u64)
    {
        return Err(LineError::OtherPid(p.clone(), pid));
    }
    m.insert("pid".into(), pid.into());
    if !m.contains_key("t") {
        m.insert("t".into(), now.into());
    }
    serde_json::from_value::<Event>(serde_json::Value::Object(m))
        .map(Line::Event)
        .map_err(|e| LineError::Invalid(ev, e))
}

/// A grant whose `now` is a wall-clock reading (ns since the Unix epoch, as a database's
/// `clock_timestamp()` gives it), placed as pacesim's own workers place theirs: at the store's
/// time mapped to the run clock, kept between the operation's `op_sent` (when reported) and the
/// line's own time, with `now` moved along so the slot keeps its reference time
/// (`t + slot - now`). A grant on another clock (a process's own) is left as printed.
pub(crate) fn place_grant(ev: Event, sent: Option<u64>, wall_at_origin: i64) -> Event {
    match ev {
        Event::Grant {
            t,
            pid,
            thread,
            slot,
            now,
            interval,
            multiplier,
        } => {
            let mapped = now as i128 - wall_at_origin as i128;
            // not a wall-clock reading of this run (within an hour of it)
            if !(-3_600_000_000_000..=t as i128 + 3_600_000_000_000).contains(&mapped) {
                return ev;
            }
            let lo = sent.unwrap_or(0).min(t) as i128;
            let at = mapped.clamp(lo, t as i128);
            Event::Grant {
                t: at as u64,
                pid,
                thread,
                slot,
                now: (now as i128 + (at - mapped)) as i64,
                interval,
                multiplier,
            }
        }
        ev => ev,
    }
}

/// A pipe of the worker's, line by line.
type Lines<P> = tokio::io::Lines<BufReader<P>>;

/// One incarnation of an external worker: its process group, deadlines and what its lines
/// said.
struct Incarnation<'a> {
    ctx: &'a ExtCtx,
    pid: u32,
    group: Group,
    /// SIGTERM to SIGKILL when stopping (`[live] stop_grace`).
    grace: u64,
    /// The soft limit's signal (`[live] soft_signal`).
    soft_signal: i32,
    // invariant: Some(after) once this incarnation was killed by a fault.
    restart: Option<Option<Nanos>>,
    armed: Option<(KillPoint, Option<Nanos>, u64)>,
    hard_deadline: Option<u64>,
    soft_deadline: Option<u64>,
    stop_deadline: Option<u64>,
    stopping: bool,
    fatal: Option<String>,
    /// Lines read on its stdout.
    lines: u64,
    // when this incarnation last sent a store operation (its `op_sent` line)
    sent: Option<u64>,
    held: Sections,
}

impl Incarnation<'_> {
    /// Until its leader exits: the runner's commands, the deadlines, its stdout and stderr.
    async fn run(
        &mut self,
        child: &mut tokio::process::Child,
        (out, err): (&mut Lines<ChildStdout>, &mut Lines<ChildStderr>),
        cmds: &mut mpsc::UnboundedReceiver<Cmd>,
        cmds_open: &mut bool,
    ) -> std::io::Result<std::process::ExitStatus> {
        let (mut out_open, mut err_open) = (true, true);
        let c = self.ctx.clock;
        loop {
            let at = |d: Option<u64>| async move {
                match d {
                    Some(d) => c.sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let (hard, soft, stop) = (at(self.hard_deadline), at(self.soft_deadline), at(self.stop_deadline));
            tokio::select! {
                // commands and deadlines first, then the worker's lines, its exit last: lines
                // it printed before it exited are read before its exit is seen
                biased;
                cmd = cmds.recv(), if *cmds_open => self.on_cmd(cmd, cmds_open),
                _ = hard => {
                    self.hard_deadline = None;
                    self.soft_deadline = None;
                    if self.restart.is_none() && !self.stopping {
                        // Past the hard limit the job is killed; the pool starts a fresh worker.
                        self.restart = Some(Some(Nanos::ZERO));
                        self.kill(CrashPoint::HardLimit);
                    }
                }
                _ = soft => {
                    self.soft_deadline = None;
                    if self.restart.is_none() && !self.stopping {
                        self.group.signal_leader(self.soft_signal);
                    }
                }
                _ = stop => {
                    self.stop_deadline = None;
                    self.group.signal(libc::SIGKILL);
                }
                line = out.next_line(), if out_open => match line {
                    Ok(Some(line)) => self.on_stdout(&line),
                    _ => out_open = false,
                },
                line = err.next_line(), if err_open => match line {
                    Ok(Some(line)) => self.on_stderr(&line),
                    _ => err_open = false,
                },
                status = child.wait() => return status,
            }
        }
    }

    /// SIGKILL its group now, at `point`; its sections end.
    fn kill(&mut self, point: CrashPoint) {
        let (ctx, pid) = (self.ctx, self.pid);
        let t = ctx.clock.now();
        self.group.signal(libc::SIGKILL);
        ctx.push(Event::Crash { t, pid, point });
        let mut c = crate::trace::Collect::default();
        self.held.died(pid, t, &mut c);
        for ev in c.events {
            ctx.push(ev);
        }
    }

    /// A command from the runner (`None`: the runner is gone, as `Stop`).
    fn on_cmd(&mut self, cmd: Option<Cmd>, cmds_open: &mut bool) {
        match cmd {
            Some(Cmd::Kill { restart_after }) => {
                if self.restart.is_none() && !self.stopping {
                    self.restart = Some(restart_after);
                    self.kill(CrashPoint::Immediate);
                }
            }
            Some(Cmd::Arm { point, restart_after }) => {
                if self.restart.is_none() && !self.stopping {
                    self.armed = Some((point, restart_after, self.ctx.clock.now()));
                }
            }
            Some(Cmd::Stop) | None => {
                *cmds_open = cmd.is_some();
                if !self.stopping {
                    self.stopping = true;
                    self.group.signal(libc::SIGTERM);
                    self.stop_deadline = Some(self.ctx.clock.now() + self.grace);
                }
            }
        }
    }

    /// A line on the worker's stdout: an event, `ready`, a protocol point, a job's start or
    /// end; anything else stops the run with a message quoting it.
    fn on_stdout(&mut self, line: &str) {
        let (ctx, pid) = (self.ctx, self.pid);
        self.lines += 1;
        if self.restart.is_some() || self.stopping || self.fatal.is_some() || line.trim().is_empty() {
            return;
        }
        let parsed = parse_line(line, pid, ctx.clock.now());
        if parsed.is_ok() {
            ctx.ready[pid as usize].store(true, std::sync::atomic::Ordering::Relaxed);
        }
        match parsed {
            Ok(Line::Ready) => {}
            Ok(Line::Event(ev)) => {
                if let Event::OpSent { t, .. } = ev {
                    self.sent = Some(t);
                }
                let ev = place_grant(ev, self.sent, ctx.clock.wall_at_origin());
                self.held.observe(&ev);
                ctx.push(ev);
            }
            Ok(Line::Point(p)) => {
                if let Some((ap, after, _)) = self.armed
                    && ap == p
                {
                    self.armed = None;
                    self.restart = Some(after);
                    self.kill(p.into());
                }
            }
            Ok(Line::JobStart) => {
                let t = ctx.clock.now();
                self.hard_deadline = ctx.sc.processes.hard_limit.map(|h| t + h.0);
                self.soft_deadline = ctx.sc.processes.soft_limit.map(|s| t + s.0);
            }
            Ok(Line::JobEnd) => {
                self.hard_deadline = None;
                self.soft_deadline = None;
            }
            Err(why) => {
                // the line and the reason (which can quote a field name of the line) are the
                // worker's text: redacted, the line bounded
                let shown = crate::live::settings::excerpt(line, &[], QUOTED);
                self.fatal = Some(crate::live::settings::redact_known(&format!(
                    "worker {pid} (`{}`) printed on stdout, line {}: {shown:?}, which {}. \
                     stdout is for event lines only (see docs/live.md, \"Your own worker program\"); \
                     write logs to stderr",
                    ctx.cmd.display(),
                    self.lines,
                    crate::live::settings::excerpt(&why.to_string(), &[], 2 * QUOTED)
                )));
                self.stopping = true;
                self.group.signal(libc::SIGKILL);
            }
        }
    }

    /// A line on the worker's stderr: forwarded when asked, and kept for messages.
    fn on_stderr(&self, line: &str) {
        // the worker's own text: any secret pacesim knows (PGPASSWORD, the URLs' passwords) is
        // redacted before it is shown or quoted
        let line = crate::live::settings::excerpt(line, &[], FORWARDED);
        if self.ctx.forward_stderr {
            eprintln!("worker {}: {line}", self.pid);
        }
        let mut t = self.ctx.tails[self.pid as usize].lock().expect("tail");
        if t.len() == 4 {
            t.pop_front();
        }
        t.push_back(crate::live::settings::excerpt(&line, &[], QUOTED));
    }

    /// After its leader exited: whatever it forked is killed, a kill armed that never fired
    /// noted. `Ok(after)`: a fresh process takes its place after `after`; `Err`: the worker's
    /// life is over.
    async fn end(
        self,
        status: std::io::Result<std::process::ExitStatus>,
        incarnation: u32,
        spawned_at: u64,
    ) -> Result<Nanos, Ended> {
        let (ctx, pid) = (self.ctx, self.pid);
        // The leader is gone; whatever it forked goes with its group, and what left the group
        // (a new session) goes by its environment tags.
        self.group.signal(libc::SIGKILL);
        let leader = self.group.0.max(0) as u32;
        drop(self.group);
        let tags = crate::live::reap::tags(&ctx.run_id, Some((pid, incarnation)));
        let _ = tokio::task::spawn_blocking(move || crate::live::reap::sweep(&tags, &[leader], false, &[])).await;
        if let Some((p, _, at)) = self.armed {
            ctx.note(format!(
                "worker {pid}: the kill at point `{}` armed at {:.3}s never fired (the worker did not report reaching that point before it {})",
                p.name(),
                at as f64 / 1e9,
                if self.stopping { "was stopped" } else { "exited" }
            ));
        }
        if let Some(m) = self.fatal {
            return Err(Ended::Failed(m));
        }
        if self.stopping {
            return Err(Ended::Stopped);
        }
        match self.restart {
            None => Err(exited(ctx, pid, status, spawned_at)),
            Some(None) => Err(Ended::Dead),
            Some(Some(d)) => Ok(d),
        }
    }
}

/// An external worker exited on its own: finished, or failed with a message saying why.
fn exited(ctx: &ExtCtx, pid: u32, status: std::io::Result<std::process::ExitStatus>, spawned_at: u64) -> Ended {
    let lived = (ctx.clock.now().saturating_sub(spawned_at)) as f64 / 1e9;
    let reached = ctx.arrivals(pid);
    // A clean exit is the end of the worker's share only when it made all its requests
    // (`PACESIM_REQUESTS`) or, with none set ("until stopped"), when the run was about to end
    // anyway; otherwise the run would be judged on a fleet that quietly shrank.
    let requests = ctx.sc.processes.requests;
    let done = ctx.fetches_done(pid);
    let duration = ctx.start() + ctx.sc.duration.0;
    let slack = (duration / 50).max(250_000_000);
    let finished = match requests {
        Some(r) => done >= r,
        None => ctx.clock.now().saturating_add(slack) >= duration,
    };
    match status {
        Ok(s) if s.success() && finished => Ended::Finished,
        Ok(s) => Ended::Failed(format!(
            "worker {pid} (`{}`) exited ({s}) after {lived:.2} s{}, before the run's end{}{}",
            ctx.cmd.display(),
            if reached == 0 {
                " without ever reaching the destination".to_string()
            } else {
                format!(" ({reached} arrivals)")
            },
            match requests {
                Some(r) if s.success() => format!(
                    ", having made {done} of its {r} requests (PACESIM_REQUESTS: a worker \
                     exits 0 only after all of them)"
                ),
                None if s.success() => " (no PACESIM_REQUESTS: a worker runs until pacesim \
                     stops it)"
                    .to_string(),
                _ => String::new(),
            },
            ctx.tail(pid)
        )),
        Err(e) => Ended::Failed(format!("worker {pid}: {e}")),
    }
}

/// One external worker's life: its processes (restarts after kills), their lines and deadlines.
pub(super) async fn supervise(ctx: Arc<ExtCtx>, pid: u32, mut cmds: mpsc::UnboundedReceiver<Cmd>) -> (u32, Ended) {
    let live = ctx.sc.live.clone().unwrap_or_default();
    let grace = live.stop_grace.unwrap_or(Nanos(2_000_000_000)).0;
    let soft_signal = live.soft_signal_number();
    let mut incarnation = 0u32;
    let mut cmds_open = true;
    loop {
        let remaining = ctx
            .sc
            .processes
            .requests
            .map(|r| r.saturating_sub(ctx.fetches_done(pid)));
        if remaining == Some(0) {
            return (pid, Ended::Finished);
        }
        let spawned_at = ctx.clock.now();
        let mut child = match spawn(&ctx, pid, incarnation, remaining) {
            Ok(c) => c,
            Err(e) => {
                return (
                    pid,
                    Ended::Failed(format!("cannot start worker {pid} (`{}`): {e}", ctx.cmd.display())),
                );
            }
        };
        let mut inc = Incarnation {
            ctx: &ctx,
            pid,
            group: Group(child.id().map_or(0, |p| p as libc::pid_t)),
            grace,
            soft_signal,
            restart: None,
            armed: None,
            hard_deadline: None,
            soft_deadline: None,
            stop_deadline: None,
            stopping: false,
            fatal: None,
            lines: 0,
            sent: None,
            held: Sections::new(ctx.sc.processes.count),
        };
        let mut out = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let mut err = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
        let status = inc
            .run(&mut child, (&mut out, &mut err), &mut cmds, &mut cmds_open)
            .await;
        let after = match inc.end(status, incarnation, spawned_at).await {
            Ok(after) => after,
            Err(ended) => return (pid, ended),
        };
        // A fresh process takes its place after `after`.
        let until = ctx.clock.now() + after.0;
        loop {
            tokio::select! {
                _ = ctx.clock.sleep_until(until) => break,
                cmd = cmds.recv(), if cmds_open => {
                    if matches!(cmd, Some(Cmd::Stop) | None) {
                        return (pid, Ended::Stopped);
                    }
                }
            }
        }
        incarnation += 1;
        ctx.push(Event::Restart {
            t: ctx.clock.now(),
            pid,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_a_command_a_shell_would_split_back() {
        let c = |argv: &[&str]| WorkerCommand {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            program: PathBuf::from("/bin/x"),
            cwd: None,
        };
        assert_eq!(c(&["python3", "w.py", "--n=2"]).display(), "python3 w.py --n=2");
        let odd = c(&["python3", "-c", "print(1); x = 'a'", ""]);
        assert_eq!(odd.display(), "python3 -c 'print(1); x = '\\''a'\\''' ''");
        assert_eq!(split_command(&odd.display()).unwrap(), odd.argv);
    }

    #[test]
    fn splits_like_a_shell() {
        let w = |s: &str| split_command(s).unwrap();
        assert_eq!(w("python3 my_worker.py"), ["python3", "my_worker.py"]);
        assert_eq!(w("  a  'b c'  \"d \\\" e\" f\\ g"), ["a", "b c", "d \" e", "f g"]);
        assert_eq!(w("a ''"), ["a", ""]);
        assert!(w("").is_empty());
        assert!(split_command("a 'b").is_err());
        assert!(split_command("a \"b").is_err());
        assert!(split_command("a \\").is_err());
    }

    #[test]
    fn resolves_programs_and_names_what_is_wrong() {
        let ok = WorkerCommand::resolve(vec!["sh".into(), "-c".into(), "true".into()], None).unwrap();
        assert!(ok.program.ends_with("sh"));
        let e = WorkerCommand::resolve(vec!["no-such-program-pacesim".into()], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not found on PATH"), "{e}");
        let e = WorkerCommand::resolve(vec!["./nope/missing.py".into()], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such file"), "{e}");
        let dir = std::env::temp_dir().join(format!("pacesim-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("plain.py");
        std::fs::write(&f, "print(1)").unwrap();
        let e = WorkerCommand::resolve(vec![f.display().to_string()], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not executable"), "{e}");
        let e = WorkerCommand::resolve(vec![dir.display().to_string() + "/"], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a directory"), "{e}");
        let rel = WorkerCommand::resolve(vec!["./plain.py".into()], Some(dir.clone()))
            .unwrap_err()
            .to_string();
        assert!(rel.contains("is not executable"), "relative to cwd: {rel}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(WorkerCommand::resolve(vec![], None).is_err());
    }

    #[test]
    fn reads_event_lines_and_refuses_the_rest() {
        assert_eq!(
            parse_line(r#"{"ev":"op_sent","op":"reserve"}"#, 2, 7).unwrap(),
            Line::Event(Event::OpSent {
                t: 7,
                pid: 2,
                thread: 0,
                op: crate::trace::OpKind::Reserve
            })
        );
        assert_eq!(
            parse_line(r#"{"ev":"lock_acquired","lock":0,"t":5}"#, 1, 9).unwrap(),
            Line::Event(Event::LockAcquired { t: 5, pid: 1, lock: 0 })
        );
        assert_eq!(
            parse_line(r#"{"ev":"point","name":"mid_reservation"}"#, 0, 0).unwrap(),
            Line::Point(KillPoint::MidReservation)
        );
        assert_eq!(parse_line(r#"{"ev":"job_start"}"#, 0, 0).unwrap(), Line::JobStart);
        for (bad, says) in [
            ("hello", "not an event line"),
            ("[1,2]", "not an event line"),
            (r#"{"x":1}"#, "no \"ev\""),
            (
                r#"{"ev":"arrival","status":200}"#,
                "an `arrival` event: only the harness records",
            ),
            (r#"{"ev":"grant","slot":1}"#, "not a valid `grant` event"),
            (r#"{"ev":"point","name":"nowhere"}"#, "names no kill point"),
            (r#"{"ev":"deny","pid":3}"#, "gives pid 3"),
        ] {
            let e = parse_line(bad, 0, 0).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn wall_clock_grants_are_placed_on_the_run_clock() {
        let wall0 = 1_700_000_000_000_000_000i64;
        let g = |t, now| Event::Grant {
            t,
            pid: 0,
            thread: 0,
            slot: now + 40,
            now,
            interval: 50,
            multiplier: 1.0,
        };
        // the store granted at run time 1_000 (within the round trip 900..1_200): placed there
        let placed = place_grant(g(1_200, wall0 + 1_000), Some(900), wall0);
        assert_eq!(placed, g(1_000, wall0 + 1_000));
        // a store clock ahead of the line: kept within the round trip, the slot's reference
        // time (t + slot - now) unchanged
        let Event::Grant { t, slot, now, .. } = place_grant(g(1_200, wall0 + 5_000), Some(900), wall0) else {
            panic!()
        };
        assert_eq!((t, t as i64 + slot - now), (1_200, 5_040));
        // a process clock (not a wall-clock reading): as printed
        assert_eq!(place_grant(g(1_200, 77), Some(900), wall0), g(1_200, 77));
    }

    #[test]
    fn redis_urls_point_at_the_proxy() {
        assert_eq!(
            redis_url_via("redis://127.0.0.1:6379/", "127.0.0.1", 4000),
            "redis://127.0.0.1:4000/"
        );
        assert_eq!(
            redis_url_via("redis://u:p@db:6379/2", "127.0.0.1", 4000),
            "redis://u:p@127.0.0.1:4000/2"
        );
        assert_eq!(redis_url_via("redis://db:6379", "h", 1), "redis://h:1");
    }
}
