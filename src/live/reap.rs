//! Everything a run's workers started goes with the run, including processes that left the
//! worker's process group (`setsid()`, Python's `Popen(start_new_session=True)`), which the
//! group kill cannot reach.
//!
//! How: every worker process carries `PACESIM_RUN_ID` (and `PACESIM_PROCESS`,
//! `PACESIM_INCARNATION`) in its environment, which its children inherit. A sweep reads
//! `/proc`, SIGKILLs every process whose environment holds the run's tags, and every
//! descendant of one (or of a worker's leader), and repeats until a scan finds none (a process
//! forking while it is killed is caught on the next round). Under the CLI, pacesim is also a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`): an orphan whose parent died is re-parented to
//! pacesim rather than to init, so even a process that also cleared its environment is found
//! (as pacesim's child) and killed at the run's end, and reaped.
//!
//! What is not guaranteed (`docs/live.md` says so too): a process that leaves its session, clears
//! its environment, and is re-parented away from pacesim (library use, where the caller is not
//! a subreaper), or one that changes its user id, is beyond reach; so is anything started on
//! another host.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Make this process a child subreaper: orphaned descendants are re-parented to it.
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with an integer argument; affects only this process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

/// One process as `/proc` shows it.
struct Proc {
    ppid: u32,
    zombie: bool,
    tagged: bool,
}

/// Read `/proc`: each process's parent, whether it is a zombie, and whether its environment
/// holds every one of `tags` (`KEY=value`).
fn scan(tags: &[String]) -> BTreeMap<u32, Proc> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = after.split_whitespace();
        let zombie = matches!(f.next(), Some("Z" | "X"));
        let Some(ppid) = f.next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let tagged = !tags.is_empty()
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| tags.iter().all(|t| env.split(|&b| b == 0).any(|kv| kv == t.as_bytes())));
        out.insert(pid, Proc { ppid, zombie, tagged });
    }
    out
}

/// SIGKILL every live process whose environment holds all of `tags`, every descendant of one
/// or of `roots`, and (`adopted`) every child of this process but `keep`; reap the zombies
/// among this process's children that it adopted. Repeats until a scan finds nothing more
/// (at most 50 rounds). Returns how many processes were killed.
pub fn sweep(tags: &[String], roots: &[u32], adopted: bool, keep: &[u32]) -> usize {
    let me = std::process::id();
    let mut killed = BTreeSet::new();
    for _ in 0..50 {
        let procs = scan(tags);
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (&pid, p) in &procs {
            children.entry(p.ppid).or_default().push(pid);
        }
        let mut todo: Vec<u32> = procs.iter().filter(|(_, p)| p.tagged).map(|(&pid, _)| pid).collect();
        todo.extend(roots.iter().copied().filter(|r| procs.contains_key(r)));
        if adopted {
            todo.extend(
                children
                    .get(&me)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|c| !keep.contains(c)),
            );
        }
        let mut targets = BTreeSet::new();
        while let Some(p) = todo.pop() {
            if p == me || !targets.insert(p) {
                continue;
            }
            todo.extend(children.get(&p).into_iter().flatten().copied());
        }
        let mut any = false;
        for &p in &targets {
            let Some(info) = procs.get(&p) else { continue };
            if info.zombie {
                if info.ppid == me && !keep.contains(&p) && !roots.contains(&p) {
                    // SAFETY: reaping our own exited child (adopted as subreaper).
                    unsafe {
                        libc::waitpid(p as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG);
                    }
                }
                continue;
            }
            // SAFETY: kill(2) on a process found above; ESRCH (gone meanwhile) is fine.
            unsafe {
                libc::kill(p as libc::pid_t, libc::SIGKILL);
            }
            killed.insert(p);
            any = true;
        }
        if !any {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.len()
}

/// The environment tags of run `run_id` (and, given, of one worker's incarnation).
pub fn tags(run_id: &str, worker: Option<(u32, u32)>) -> Vec<String> {
    let mut t = vec![format!("PACESIM_RUN_ID={run_id}")];
    if let Some((pid, incarnation)) = worker {
        t.push(format!("PACESIM_PROCESS={pid}"));
        t.push(format!("PACESIM_INCARNATION={incarnation}"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that starts its own session (as `setsid` does) is found by its environment
    /// and killed; a process without the tag is left alone.
    #[test]
    fn a_tagged_process_in_its_own_session_is_killed_and_others_are_not() {
        let run = format!("reaptest_{}", std::process::id());
        let mut tagged = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .env("PACESIM_RUN_ID", &run)
            .spawn()
            .expect("setsid sleep");
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .env("PACESIM_RUN_ID", "someone-else")
            .spawn()
            .expect("sleep");
        // wait for setsid to exec sleep with the tag
        std::thread::sleep(Duration::from_millis(100));
        let n = sweep(&tags(&run, None), &[], false, &[]);
        assert!(n >= 1, "nothing killed");
        let status = tagged.wait().expect("wait");
        assert!(!status.success(), "{status:?}");
        assert!(
            other.try_wait().expect("try_wait").is_none(),
            "an untagged process was killed"
        );
        let _ = other.kill();
        let _ = other.wait();
    }
}
