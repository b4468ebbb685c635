//! Shared by the integration tests that drive the `pacesim` binary.

use std::process::Command;

/// Run `pacesim ARGS` from the crate root: exit code, stdout, stderr.
pub fn pacesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}
