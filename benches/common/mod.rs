//! Shared by the benchmark binaries: running one case in a child process, and peak memory.
//!
//! Each case runs in a fresh child process (the bench binary re-executed with `--case NAME`),
//! so its peak resident set (`VmHWM` in `/proc/self/status`) is that case's alone and one
//! case's allocations cannot warm or fragment the heap of the next. The child prints one
//! line, `key=value` pairs, which the parent parses into a table row.

#![allow(dead_code)] // each bench binary uses a different subset

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

/// Peak resident set size of this process so far, in bytes (`VmHWM`; 0 if unavailable).
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM")
}

/// A size field of `/proc/self/status` (`VmHWM`, `VmRSS`, ...) in bytes (0 if unavailable).
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Whether `cargo test` (not `cargo bench`) started this binary: `cargo test --all-targets`
/// runs bench targets too, without the `--bench` flag `cargo bench` passes. Then a bench only
/// smoke-tests itself on a small case, so the test suite does not spend minutes measuring.
pub fn under_cargo_test() -> bool {
    let args: Vec<String> = std::env::args().collect();
    !args.iter().any(|a| a == "--bench" || a == "--case")
}

/// The value after `--case` on the command line, if this process is a child.
pub fn case_arg() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1).cloned())
}

/// CPU time this process has used so far, in seconds (user + system, all threads).
pub fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Timings of a case: the shortest wall time and the shortest CPU time over its repetitions.
#[derive(Copy, Clone, Debug)]
pub struct Timing {
    /// Seconds of wall time.
    pub wall: f64,
    /// Seconds of CPU time (what a busy machine disturbs least).
    pub cpu: f64,
}

/// Run `f` `reps` times; returns its last result and the best timings.
pub fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (T, Timing) {
    let mut best = Timing {
        wall: f64::INFINITY,
        cpu: f64::INFINITY,
    };
    let mut out = None;
    for _ in 0..reps.max(1) {
        let (start, cpu) = (Instant::now(), cpu_seconds());
        let v = f();
        best.wall = best.wall.min(start.elapsed().as_secs_f64());
        best.cpu = best.cpu.min(cpu_seconds() - cpu);
        out = Some(v);
    }
    (out.expect("at least one repetition"), best)
}

/// Print a child's result line: the given pairs plus `peak_bytes`.
pub fn report(pairs: &[(&str, String)]) {
    let mut line: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    line.push(format!("peak_bytes={}", peak_rss_bytes()));
    println!("{}", line.join(" "));
}

/// Re-run this binary as `--case name` and parse the `key=value` pairs it printed last.
pub fn run_child(name: &str, extra: &[&str]) -> BTreeMap<String, String> {
    let exe = std::env::current_exe().expect("own executable path");
    let out = Command::new(exe)
        .arg("--case")
        .arg(name)
        .args(extra)
        .output()
        .expect("bench child runs");
    if !out.status.success() {
        panic!(
            "bench case {name} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    last.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A field of a child's result as a number (0 when missing).
pub fn num(m: &BTreeMap<String, String>, key: &str) -> f64 {
    m.get(key).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// A whole number with thousands separators, e.g. `1,234,567`.
pub fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Load a scenario relative to the crate root.
pub fn scenario(rel: &str) -> pacesim::scenario::Scenario {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    pacesim::registry::load(&p).unwrap_or_else(|e| panic!("{e}"))
}
