//! The supervisor of one worker process: it starts the process, forwards its events to the
//! run's log, kills it when a fault says so (or has it kill itself at a protocol point), and
//! starts a fresh one after a kill.

use crate::fault::KillPoint;
use crate::live::EventLog;
use crate::live::clock::{RunClock, mono_ns};
use crate::live::proto::{PgStore, RedisStore, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::{CrashPoint, Event};
use crate::worker::Sections;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

/// A command from the runner to a worker's supervisor.
#[derive(Clone, Debug)]
pub(super) enum Cmd {
    /// SIGKILL it now.
    Kill { restart_after: Option<Nanos> },
    /// Have it SIGKILL itself at `point`.
    Arm {
        point: KillPoint,
        restart_after: Option<Nanos>,
    },
    /// The run is over: kill it, do not restart.
    Stop,
}

/// How a supervisor ended.
#[derive(Debug)]
pub(super) enum Ended {
    Finished,
    Dead,
    Stopped,
    Failed(String),
}

/// What supervisors share.
pub(super) struct Ctx {
    pub(super) sc: Scenario,
    pub(super) exe: PathBuf,
    pub(super) run_id: String,
    pub(super) log: EventLog,
    pub(super) clock: Arc<OnceLock<RunClock>>,
    pub(super) dest: String,
    pub(super) pg: Vec<Option<PgStore>>,
    pub(super) redis: Vec<Option<RedisStore>>,
    pub(super) os_pids: Arc<Mutex<Vec<u32>>>,
}

impl Ctx {
    pub(super) fn now(&self) -> u64 {
        self.clock.get().map_or(0, RunClock::now)
    }
    pub(super) fn push(&self, ev: Event) {
        self.log.lock().expect("event log").push(ev);
    }
}

/// Start one worker process.
fn spawn_worker(
    ctx: &Ctx,
    pid: u32,
    incarnation: u32,
    done: u64,
    origin: Option<(u64, i64)>,
) -> std::io::Result<tokio::process::Child> {
    let spec = WorkerSpec {
        run_id: ctx.run_id.clone(),
        pid,
        incarnation,
        done,
        scenario: ctx.sc.clone(),
        origin,
        dest: ctx.dest.clone(),
        pg: ctx.pg[pid as usize].clone(),
        redis: ctx.redis[pid as usize].clone(),
    };
    let mut cmd = tokio::process::Command::new(&ctx.exe);
    cmd.arg("worker")
        .arg("--run")
        .arg(&ctx.run_id)
        .arg("--pid")
        .arg(pid.to_string())
        .env(SPEC_ENV, serde_json::to_string(&spec).expect("specs serialise"))
        // the run's tag: the end-of-run sweep (`reap`) finds the worker by it
        .env("PACESIM_RUN_ID", &ctx.run_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    spawn_tied(&mut cmd, &ctx.os_pids)
}

/// Spawn `cmd` tied to this process: it dies with the thread that forked it (PDEATHSIG: a
/// runtime worker thread, which lives as long as the run), never outlives a parent that died
/// before the exec, and its pid goes to `os_pids` (the runner's last-resort cleanup).
pub(crate) fn spawn_tied(
    cmd: &mut tokio::process::Command,
    os_pids: &std::sync::Mutex<Vec<u32>>,
) -> std::io::Result<tokio::process::Child> {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    if let Some(id) = child.id() {
        os_pids.lock().expect("pids").push(id);
    }
    Ok(child)
}

/// The run clock's origin as `go` carries it: (monotonic ns, wall ns); `None` until fixed.
type Origin = Option<(u64, i64)>;

/// The worker's stdout, line by line.
type Lines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// One incarnation of a worker: its process, and what the supervisor knows of it.
struct Incarnation<'a> {
    ctx: &'a Ctx,
    pid: u32,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    /// Fetches it finished (`fetch_end`).
    fetched: u64,
    // invariant: Some(restart) once this incarnation was killed by a fault.
    restart: Option<Option<Nanos>>,
    armed: Option<Option<Nanos>>,
    hard_deadline: Option<u64>,
    stopping: bool,
    fatal: Option<String>,
    /// The sections this incarnation is in (from its own events): a SIGKILL ends them, as in
    /// the simulator (worker::Sections).
    held: Sections,
}

impl<'a> Incarnation<'a> {
    fn new(ctx: &'a Ctx, pid: u32, mut child: tokio::process::Child) -> (Incarnation<'a>, Lines) {
        let stdin = child.stdin.take().expect("stdin is piped");
        let lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let inc = Incarnation {
            ctx,
            pid,
            child,
            stdin,
            fetched: 0,
            restart: None,
            armed: None,
            hard_deadline: None,
            stopping: false,
            fatal: None,
            held: Sections::new(ctx.sc.processes.count),
        };
        (inc, lines)
    }

    /// Until its stdout closes: its lines, the runner's commands, its job's hard limit.
    async fn run(
        &mut self,
        lines: &mut Lines,
        cmds: &mut mpsc::UnboundedReceiver<Cmd>,
        cmds_open: &mut bool,
        ready: &mpsc::UnboundedSender<u32>,
        go: &mut watch::Receiver<Origin>,
    ) {
        loop {
            let (clock, deadline) = (self.ctx.clock.get().copied(), self.hard_deadline);
            let hard = async move {
                match (deadline, clock) {
                    (Some(d), Some(c)) => c.sleep_until(d).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                line = lines.next_line() => {
                    let Ok(Some(line)) = line else { break };
                    self.on_line(&line, ready, go).await;
                }
                cmd = cmds.recv(), if *cmds_open => match cmd {
                    Some(Cmd::Kill { restart_after }) => self.kill(CrashPoint::Immediate, restart_after),
                    Some(Cmd::Arm { point, restart_after }) => {
                        if self.restart.is_none() && !self.stopping {
                            self.armed = Some(restart_after);
                            let _ = self.stdin.write_all(ToWorker::Arm(point).line().as_bytes()).await;
                        }
                    }
                    Some(Cmd::Stop) | None => {
                        *cmds_open = cmd.is_some();
                        self.stop();
                    }
                },
                _ = hard => {
                    self.hard_deadline = None;
                    // Past the hard limit the job is killed; the pool starts a fresh worker.
                    self.kill(CrashPoint::HardLimit, Some(Nanos::ZERO));
                }
            }
        }
    }

    /// Its sections end at `t`: the process died.
    fn died(&mut self, t: u64) {
        let mut c = crate::trace::Collect::default();
        self.held.died(self.pid, t, &mut c);
        for ev in c.events {
            self.ctx.push(ev);
        }
    }

    /// SIGKILL it now (a fault's kill, or the hard limit), to be restarted after
    /// `restart_after` (`None`: never). Nothing if it is already killed or stopping.
    fn kill(&mut self, point: CrashPoint, restart_after: Option<Nanos>) {
        if self.restart.is_none() && !self.stopping {
            let t = self.ctx.now();
            let _ = self.child.start_kill();
            self.restart = Some(restart_after);
            self.ctx.push(Event::Crash {
                t,
                pid: self.pid,
                point,
            });
            self.died(t);
        }
    }

    /// The run is over for it: kill it, no restart.
    fn stop(&mut self) {
        self.stopping = true;
        let _ = self.child.start_kill();
    }

    /// A line from the worker.
    async fn on_line(&mut self, line: &str, ready: &mpsc::UnboundedSender<u32>, go: &mut watch::Receiver<Origin>) {
        match serde_json::from_str::<ToParent>(line) {
            Ok(ToParent::Ready) => {
                let _ = ready.send(self.pid);
                // it waits for `go`: the origin, once every worker is ready
                let origin = loop {
                    if let Some(o) = *go.borrow() {
                        break Some(o);
                    }
                    if go.changed().await.is_err() {
                        break None;
                    }
                };
                match origin {
                    Some((o, w)) => {
                        let _ = self.stdin.write_all(ToWorker::Go(o, w).line().as_bytes()).await;
                    }
                    None => self.stop(),
                }
            }
            Ok(ToParent::Event { ev }) => self.on_event(ev),
            Ok(ToParent::JobStart { t }) => self.hard_deadline = self.ctx.sc.processes.hard_limit.map(|h| t + h.0),
            Ok(ToParent::JobEnd { .. }) => self.hard_deadline = None,
            Ok(ToParent::Fatal { message }) => self.fatal = Some(message),
            Err(e) => self.fatal = Some(format!("unreadable message {line:?}: {e}")),
        }
    }

    /// An event from the worker, to the run's log; its crash (at an armed point) ends its
    /// sections, and it is restarted as armed.
    fn on_event(&mut self, ev: Event) {
        let crashed = match ev {
            Event::FetchEnd { .. } => {
                self.fetched += 1;
                None
            }
            Event::Crash { t, .. } => {
                self.restart = Some(self.armed.take().flatten());
                Some(t)
            }
            _ => None,
        };
        self.held.observe(&ev);
        self.ctx.push(ev);
        if let Some(t) = crashed {
            self.died(t);
        }
    }

    /// Once it exited: `Ok(after)`, a fresh process takes its place after `after`; `Err`, the
    /// worker's life is over.
    async fn end(mut self) -> Result<Nanos, Ended> {
        let pid = self.pid;
        let status = self.child.wait().await;
        if self.stopping {
            return Err(Ended::Stopped);
        }
        if let Some(m) = self.fatal {
            return Err(Ended::Failed(format!("worker {pid}: {m}")));
        }
        match self.restart {
            None => Err(match status {
                Ok(s) if s.success() => Ended::Finished,
                Ok(s) => Ended::Failed(format!("worker {pid} exited unexpectedly ({s})")),
                Err(e) => Ended::Failed(format!("worker {pid}: {e}")),
            }),
            Some(None) => Err(Ended::Dead),
            Some(Some(d)) => Ok(d),
        }
    }
}

/// Wait `after` before a fresh process takes a killed one's place; false: stopped meanwhile.
async fn before_restart(ctx: &Ctx, after: Nanos, cmds: &mut mpsc::UnboundedReceiver<Cmd>, cmds_open: bool) -> bool {
    let until = ctx.now() + after.0;
    let clock = ctx.clock.get().copied().unwrap_or(RunClock::new(mono_ns()));
    loop {
        tokio::select! {
            _ = clock.sleep_until(until) => return true,
            cmd = cmds.recv(), if cmds_open => {
                if matches!(cmd, Some(Cmd::Stop) | None) {
                    return false;
                }
            }
        }
    }
}

/// One worker's life: its process and any restarts.
pub(super) async fn supervise(
    ctx: Arc<Ctx>,
    pid: u32,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    ready: mpsc::UnboundedSender<u32>,
    mut go: watch::Receiver<Origin>,
) -> (u32, Ended) {
    let mut incarnation = 0u32;
    let mut done = 0u64;
    let mut cmds_open = true;
    loop {
        let origin = if incarnation == 0 { None } else { *go.borrow() };
        let child = match spawn_worker(&ctx, pid, incarnation, done, origin) {
            Ok(c) => c,
            Err(e) => return (pid, Ended::Failed(format!("cannot start worker {pid}: {e}"))),
        };
        let (mut inc, mut lines) = Incarnation::new(&ctx, pid, child);
        inc.run(&mut lines, &mut cmds, &mut cmds_open, &ready, &mut go).await;
        done += inc.fetched;
        let after = match inc.end().await {
            Ok(after) => after,
            Err(ended) => return (pid, ended),
        };
        drop(lines);
        if !before_restart(&ctx, after, &mut cmds, cmds_open).await {
            return (pid, Ended::Stopped);
        }
        incarnation += 1;
        ctx.push(Event::Restart { t: ctx.now(), pid });
    }
}
