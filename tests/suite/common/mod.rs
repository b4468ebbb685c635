//! Shared by the integration tests that drive the `pacesim` binary.

use std::process::Command;

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
