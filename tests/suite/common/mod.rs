//! Shared by the integration tests that drive the `pacesim` binary.

use std::process::Command;

#[allow(dead_code)] // (the memory test's binary shares this module and uses none of it)
pub mod two_step;

/// pacesim's backends, the correct designs first.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub const BACKENDS: &[&str] = &[
    "row",
    "shared_cache",
    "redis_gcra",
    "local_divided",
    "advisory",
    "claim_row",
    "redis_lock",
    "local",
];

/// The scheduler variables `pacesim sweep` takes its shard from: the tests set them explicitly
/// (CI itself may run inside a Slurm array or a Kubernetes Job).
pub const SHARD_VARS: [&str; 6] = [
    "JOB_COMPLETION_INDEX",
    "PACESIM_SHARDS",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
];

/// Run `pacesim ARGS` from the crate root: exit code, stdout, stderr.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub fn pacesim(args: &[&str]) -> (i32, String, String) {
    pacesim_env(args, &[])
}

/// Run `pacesim ARGS` from the crate root with these environment variables (and none of the
/// scheduler's [`SHARD_VARS`] but those given): exit code, stdout, stderr.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub fn pacesim_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pacesim"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for v in SHARD_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Run `pacesim ARGS` under a wall-clock watchdog far above what a near-linear run takes
/// (`--max-wall`: exit 2, "still running"), and report its exit code and peak resident
/// memory, measured by the kernel for this child alone (`wait4`).
#[allow(dead_code)] // not every test binary that shares this module uses it
pub fn run_measured(args: &[&str]) -> (i32, String, u64) {
    use std::os::unix::process::ExitStatusExt;
    #[allow(clippy::zombie_processes)] // reaped by `wait4` below, which also reads its usage
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (std's handle was consumed above
    // without waiting); `status` and `usage` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let code = std::process::ExitStatus::from_raw(status).code().unwrap_or(-1);
    (code, err, usage.ru_maxrss as u64 * 1024)
}

/// A live test that cannot run here (no PostgreSQL or Redis, or python3 without a package the
/// example workers need): said loudly on stderr (past the harness's capture), and a pass, so
/// that a fresh machine without the stores runs the rest. Under `PACESIM_LIVE_REQUIRED` (CI
/// sets it: its machine has both stores and installs the packages) it is a failure instead: a
/// live test that judged nothing is not a pass there.
#[allow(dead_code)] // (a test binary without live tests includes this module too)
pub fn live_not_run(test: &str, why: &str) {
    use std::io::Write;
    let line = format!("LIVE TESTS NOT RUN ({test}): {why}");
    let _ = writeln!(std::io::stderr(), "{line}");
    if std::env::var_os("PACESIM_LIVE_REQUIRED").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{line} (PACESIM_LIVE_REQUIRED is set: the live tests must run here)");
    }
}
