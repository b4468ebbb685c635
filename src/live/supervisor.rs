//! The supervisor of one worker process: it starts the process, forwards its events to the
//! run's log, kills it when a fault says so (or has it kill itself at a protocol point), and
//! starts a fresh one after a kill.

use crate::fault::KillPoint;
use crate::live::EventLog;
use crate::live::clock::{RunClock, mono_ns};
use crate::live::proto::{PgStore, RedisStore, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::Event;
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

/// One worker's life: its process and any restarts.
pub(super) async fn supervise(
    ctx: Arc<Ctx>,
    pid: u32,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    ready: mpsc::UnboundedSender<u32>,
    mut go: watch::Receiver<Option<(u64, i64)>>,
) -> (u32, Ended) {
    let mut incarnation = 0u32;
    let mut done = 0u64;
    let mut cmds_open = true;
    loop {
        let origin = if incarnation == 0 { None } else { *go.borrow() };
        let mut child = match spawn_worker(&ctx, pid, incarnation, done, origin) {
            Ok(c) => c,
            Err(e) => return (pid, Ended::Failed(format!("cannot start worker {pid}: {e}"))),
        };
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        // invariant: Some(restart) once this incarnation was killed by a fault.
        let mut restart: Option<Option<Nanos>> = None;
        let mut armed: Option<Option<Nanos>> = None;
        let mut hard_deadline: Option<u64> = None;
        let mut stopping = false;
        let mut fatal: Option<String> = None;
        // The sections this incarnation is in (from its own events): a SIGKILL ends them, as in
        // the simulator (worker::Sections).
        let mut held = Sections::new(ctx.sc.processes.count);
        let died = |held: &mut Sections, t: u64| {
            let mut c = crate::trace::Collect::default();
            held.died(pid, t, &mut c);
            for ev in c.events {
                ctx.push(ev);
            }
        };
        loop {
            let clock = ctx.clock.get().copied();
            let hard = async {
                match (hard_deadline, clock) {
                    (Some(d), Some(c)) => c.sleep_until(d).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                line = lines.next_line() => {
                    let Ok(Some(line)) = line else { break };
                    match serde_json::from_str::<ToParent>(&line) {
                        Ok(ToParent::Ready) => {
                            let _ = ready.send(pid);
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
                                    let _ = stdin.write_all(ToWorker::Go(o, w).line().as_bytes()).await;
                                }
                                None => {
                                    stopping = true;
                                    let _ = child.start_kill();
                                }
                            }
                        }
                        Ok(ToParent::Event { ev }) => {
                            let crashed = match ev {
                                Event::FetchEnd { .. } => {
                                    done += 1;
                                    None
                                }
                                Event::Crash { t, .. } => {
                                    restart = Some(armed.take().flatten());
                                    Some(t)
                                }
                                _ => None,
                            };
                            held.observe(&ev);
                            ctx.push(ev);
                            if let Some(t) = crashed {
                                died(&mut held, t);
                            }
                        }
                        Ok(ToParent::JobStart { t }) => hard_deadline = ctx.sc.processes.hard_limit.map(|h| t + h.0),
                        Ok(ToParent::JobEnd { .. }) => hard_deadline = None,
                        Ok(ToParent::Fatal { message }) => fatal = Some(message),
                        Err(e) => fatal = Some(format!("unreadable message {line:?}: {e}")),
                    }
                }
                cmd = cmds.recv(), if cmds_open => match cmd {
                    Some(Cmd::Kill { restart_after }) => {
                        if restart.is_none() && !stopping {
                            let t = ctx.now();
                            let _ = child.start_kill();
                            restart = Some(restart_after);
                            ctx.push(Event::Crash { t, pid, point: crate::trace::CrashPoint::Immediate });
                            died(&mut held, t);
                        }
                    }
                    Some(Cmd::Arm { point, restart_after }) => {
                        if restart.is_none() && !stopping {
                            armed = Some(restart_after);
                            let _ = stdin.write_all(ToWorker::Arm(point).line().as_bytes()).await;
                        }
                    }
                    Some(Cmd::Stop) | None => {
                        cmds_open = cmd.is_some();
                        stopping = true;
                        let _ = child.start_kill();
                    }
                },
                _ = hard => {
                    hard_deadline = None;
                    if restart.is_none() && !stopping {
                        let t = ctx.now();
                        let _ = child.start_kill();
                        // Past the hard limit the job is killed; the pool starts a fresh worker.
                        restart = Some(Some(Nanos::ZERO));
                        ctx.push(Event::Crash { t, pid, point: crate::trace::CrashPoint::HardLimit });
                        died(&mut held, t);
                    }
                }
            }
        }
        let status = child.wait().await;
        if stopping {
            return (pid, Ended::Stopped);
        }
        if let Some(m) = fatal {
            return (pid, Ended::Failed(format!("worker {pid}: {m}")));
        }
        let after = match restart {
            None => {
                return match status {
                    Ok(s) if s.success() => (pid, Ended::Finished),
                    Ok(s) => (pid, Ended::Failed(format!("worker {pid} exited unexpectedly ({s})"))),
                    Err(e) => (pid, Ended::Failed(format!("worker {pid}: {e}"))),
                };
            }
            Some(None) => return (pid, Ended::Dead),
            Some(Some(d)) => d,
        };
        // A fresh process takes its place after `after`.
        let until = ctx.now() + after.0;
        let clock = ctx.clock.get().copied().unwrap_or(RunClock::new(mono_ns()));
        loop {
            tokio::select! {
                _ = clock.sleep_until(until) => break,
                cmd = cmds.recv(), if cmds_open => {
                    if matches!(cmd, Some(Cmd::Stop) | None) {
                        return (pid, Ended::Stopped);
                    }
                }
            }
        }
        incarnation += 1;
        ctx.push(Event::Restart { t: ctx.now(), pid });
    }
}
