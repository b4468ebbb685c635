//! What a run will need, before it starts: an estimate of its memory, refused above a limit
//! (`--max-memory`, default [`DEFAULT_MAX_MEMORY`]) with the estimate, the limit and the field
//! that weighs most in the message, instead of running for seconds and aborting on allocation.
//!
//! The estimate is deliberately coarse and on the high side: it counts what grows with the
//! scenario's numbers (processes, locks, kills and arrivals over the duration, runs kept in
//! memory), at a per-item cost measured on the simulator with some margin, plus a fixed base.

use crate::scenario::Scenario;
use std::sync::atomic::{AtomicU64, Ordering};

/// The default memory limit: 4 GiB, for a 2-core / 24 GiB machine shared with others and for
/// CI runners (7 GiB).
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

static LIMIT: AtomicU64 = AtomicU64::new(DEFAULT_MAX_MEMORY);

/// Set the memory limit of every run this process plans (`--max-memory`).
pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// The memory limit in force.
pub fn limit() -> u64 {
    LIMIT.load(Ordering::Relaxed)
}

/// Bytes per worker process: its process side, worker loop, random streams and the checkers'
/// per-process state (about 330 B measured at 10 million processes, with margin).
const PER_PROCESS: f64 = 1024.0;
/// Bytes per lock of a lock table.
const PER_LOCK: f64 = 64.0;
/// Bytes per kill of a kill stream (the restarted process and its pending events).
const PER_KILL: f64 = 1024.0;
/// Bytes per open-loop job that may queue.
const PER_JOB: f64 = 64.0;
/// Bytes per run whose summary is kept (simulate and sweep keep every run's row).
const PER_RUN: f64 = 4096.0;
/// The fixed part of one run.
const BASE: f64 = 16.0 * 1024.0 * 1024.0;

/// The run would need more memory than the limit.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error(
    "{scenario}: {field}: the run would need about {} of memory, above the limit of {} \
     (--max-memory to change it)",
    human(*estimate),
    human(*limit)
)]
pub struct BudgetError {
    /// Where: the scenario file and the line of the field (its name when it has no file).
    pub scenario: String,
    /// The field that weighs most in the estimate, e.g. `processes.count`.
    pub field: String,
    /// The estimate, bytes.
    pub estimate: u64,
    /// The limit, bytes.
    pub limit: u64,
}

/// A byte count for people: `3.2 GiB`.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 40) as f64 {
        format!("{:.1} TiB", b / (1u64 << 40) as f64)
    } else if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.0} MiB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// Parse a size for `--max-memory`: `4GiB`, `512MiB`, `2G`, `100M`, or bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 4GiB, 512MiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (B, KiB, MiB, GiB, TiB)")),
    };
    let b = v * scale;
    if !(b.is_finite() && b >= 1.0 && b < u64::MAX as f64) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(b as u64)
}

/// The estimated peak memory of `runs` runs of `sc` (one per backend and seed), with the
/// field that weighs most. Runs execute a few at a time (one per core), so only their kept
/// summaries scale with `runs`.
pub fn estimate(sc: &Scenario, runs: u64) -> (u64, String) {
    let secs = sc.duration.as_secs_f64();
    let n = f64::from(sc.processes.count);
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let mut parts: Vec<(String, f64)> = vec![("processes.count".into(), n * PER_PROCESS)];
    // every thread past the first is one more loop, about the size of a one-thread process's
    if sc.processes.threads > 1 {
        let extra = f64::from(sc.processes.threads - 1);
        parts.push(("processes.threads".into(), n * extra * PER_PROCESS));
    }
    // a lock table's size, whichever backend reads it (`locks` is a count of locks wherever
    // it appears)
    if let Some(k) = sc.pacer.options.get("locks").and_then(toml::Value::as_integer) {
        parts.push(("pacer.locks".into(), k.max(0) as f64 * PER_LOCK));
    }
    for (i, f) in sc.faults.iter().enumerate() {
        if let crate::fault::FaultSpec::Kill { rate: Some(r), .. } = f {
            parts.push((format!("faults[{i}].rate"), r * secs * PER_KILL));
        }
    }
    if let Some(a) = sc.processes.arrival_rate {
        parts.push(("processes.arrival_rate".into(), a * n * secs * PER_JOB));
    }
    let per_run: f64 = parts.iter().map(|p| p.1).sum::<f64>() + BASE;
    let concurrent = (runs as f64).min(cores);
    if runs > 1 {
        parts.push(("--seeds".into(), runs as f64 * PER_RUN));
    }
    let total = per_run * concurrent + runs as f64 * PER_RUN;
    // the field that weighs most; when none outweighs the fixed base every run needs, the
    // limit itself is what is too small
    let field = parts
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|p| p.1 > BASE)
        .map_or_else(|| "--max-memory".to_string(), |p| p.0.clone());
    let bytes = if total.is_finite() && total < u64::MAX as f64 {
        total as u64
    } else {
        u64::MAX
    };
    (bytes, field)
}

/// Refuse `runs` runs of `sc` when they would need more than the limit.
pub fn check(sc: &Scenario, runs: u64) -> Result<(), BudgetError> {
    let (estimate, field) = estimate(sc, runs);
    let limit = limit();
    if estimate > limit {
        return Err(BudgetError {
            scenario: sc.place(&field),
            field,
            estimate,
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("4 parsecs").is_err());
    }

    #[test]
    fn every_shipped_scenario_fits_the_default() {
        for p in crate::run::default_scenarios() {
            let sc = Scenario::load(&p).unwrap();
            let (b, _) = estimate(&sc, 100);
            assert!(b < DEFAULT_MAX_MEMORY / 4, "{}: {}", p.display(), human(b));
        }
    }
}
