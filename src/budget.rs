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
pub(crate) fn set_limit(bytes: u64) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// The memory limit in force.
pub fn limit() -> u64 {
    LIMIT.load(Ordering::Relaxed)
}

/// Bytes per worker process (and per thread past a process's first): its process side,
/// worker loop, random streams and the checkers' per-process state. Measured peak resident
/// memory (`tests/suite/bounds.rs` holds it to the estimate): about 1,560 B a process for `row` at
/// 400,000 processes, 1,410 for `redis_gcra`, 1,370 for `advisory`, 1,300 for `local`; about
/// 670 B a thread past the first. (1,024 B, the figure before, let 2.5 million processes pass
/// a 4 GiB guard and reach 3.5 GB.)
const PER_PROCESS: f64 = 2048.0;
/// Bytes per lock of a lock table.
const PER_LOCK: f64 = 64.0;
/// Bytes per kill of a kill stream (the restarted process and its pending events).
const PER_KILL: f64 = 1024.0;
/// Bytes per open-loop job that may queue.
const PER_JOB: f64 = 64.0;
/// Bytes per run whose summary is kept (simulate and sweep keep every run's row).
const PER_RUN: f64 = 4096.0;
/// Bytes per fetch the run may make: what still grows with the number of fetches (about
/// 8 B a fetch measured at 1e8/s, where nothing else grows), doubled.
const PER_FETCH: f64 = 16.0;
/// Events the simulator schedules per fetch, on the high side (reservation, reply, fetch
/// start, arrival, fetch end, the report).
const EVENTS_PER_FETCH: f64 = 6.0;
/// The fixed part of one run.
const BASE: f64 = 16.0 * 1024.0 * 1024.0;

/// Bytes per firing of a time limit (`processes.soft_limit`, `hard_limit`): a hard limit
/// kills and restarts the process, a soft one ends the job and starts the next; what the run
/// keeps of each (the killed incarnation's pending events, the checkers' records). Measured
/// about 190 B a restart at `hard_limit = "1us"` and 170 B a soft limit, doubled and more.
const PER_LIMIT: f64 = 512.0;
/// Bytes per timer parked in the event queue: each job arms its time limits when it starts,
/// and a timer stays queued until its limit passes, however soon the job ends (about 86 B a
/// timer measured with `hard_limit = "1h"` at 1e5 jobs a second).
const PER_TIMER: f64 = 128.0;
/// Events per firing of a time limit: a kill, a restart and the new job's first round trips
/// (about 44 events' time measured at `hard_limit = "1us"`).
const EVENTS_PER_LIMIT: f64 = 48.0;

/// A backend's stated detail for a scenario (its options in force and its facts, as a trace
/// header's `backend_detail`), by the backend's name: the registry, a layer above this one,
/// gives it ([`set_detail`]); until it does (a scenario built and run in code without the
/// registry), the estimates count the ceiling alone.
pub(crate) type DetailOf = fn(&str, &Scenario) -> Option<serde_json::Value>;

static DETAIL: std::sync::OnceLock<DetailOf> = std::sync::OnceLock::new();

/// Where the estimates read a backend's facts (the registry sets it).
pub fn set_detail(f: DetailOf) {
    let _ = DETAIL.set(f);
}

/// How fast the fleet of `sc` may fetch, at most, for its backend(s), against the shared
/// ceiling: a design whose processes pace alone (`local`: [`crate::backend::Facts`]'s
/// `process_spacing_ns`) fetches at each process's own pace, N times it; a `fail_open`
/// fallback paces every process at the full rate while the store is out (its fault windows),
/// and a `divided` one at `rate / (cap + 1)`. Returns the fleet's fetches a second over the
/// run, on average, and the reason when it is not the ceiling.
fn fleet_rate(sc: &Scenario) -> (f64, Option<String>) {
    let n = f64::from(sc.processes.count);
    let secs = sc.duration.as_secs_f64().max(1e-9);
    // the time the store may be out: its outage, partition, restart and latency windows
    let out: f64 = sc
        .faults
        .iter()
        .filter(|f| {
            matches!(
                f,
                crate::fault::FaultSpec::StoreOutage { .. }
                    | crate::fault::FaultSpec::StoreRestart { .. }
                    | crate::fault::FaultSpec::Partition { .. }
                    | crate::fault::FaultSpec::StoreLatency { .. }
            )
        })
        .filter_map(crate::fault::FaultSpec::window)
        .map(|(a, b)| b.0.saturating_sub(a.0) as f64 / 1e9)
        .sum::<f64>()
        .min(secs);
    let mut best = (sc.pacer.rate, None);
    for b in sc.compared_backends() {
        let Some(detail) = DETAIL.get().and_then(|d| d(&b, sc)) else {
            continue;
        };
        let per_thread = detail.get("per").and_then(serde_json::Value::as_str) == Some("thread");
        let pacers = n * if per_thread {
            f64::from(sc.processes.threads.max(1))
        } else {
            1.0
        };
        let (rate, why) = if let Some(s) = detail.get("process_spacing_ns").and_then(serde_json::Value::as_f64) {
            (
                pacers * 1e9 / s.max(1.0),
                format!("`{b}`: each of the {pacers} pacers paces alone, at up to the rate"),
            )
        } else {
            match detail.get("fallback").and_then(serde_json::Value::as_str) {
                Some("fail_open") if out > 0.0 => (
                    sc.pacer.rate * (1.0 + (n - 1.0) * out / secs),
                    format!("`{b}` fails open: each of the {n} processes paces at the rate while the store is out"),
                ),
                Some("divided") if out > 0.0 => {
                    let cap = detail.get("cap").and_then(serde_json::Value::as_f64).unwrap_or(n - 1.0);
                    (
                        sc.pacer.rate * (1.0 + (n / (cap + 1.0) - 1.0).max(0.0) * out / secs),
                        format!("`{b}` divides the rate by {} while the store is out", cap + 1.0),
                    )
                }
                _ => continue,
            }
        };
        if rate > best.0 {
            best = (rate, Some(why));
        }
    }
    best
}

/// The most fetches one run of `sc` makes, on the high side: twice the fleet's rate over the
/// duration ([`fleet_rate`]: the ceiling, or N times it for processes that pace alone), or
/// every process's `requests` when fewer.
fn fetches(sc: &Scenario) -> f64 {
    let by_rate = 2.0 * fleet_rate(sc).0 * sc.duration.as_secs_f64();
    match sc.processes.requests {
        Some(r) => by_rate.min(r as f64 * f64::from(sc.processes.count)),
        None => by_rate,
    }
}

/// The time limits of `sc` (`processes.soft_limit`, `hard_limit`): each field with how many
/// times it may fire over the run (once per limit per thread at most: a thread runs one job
/// at a time) and, at most, how many of its timers are queued at once (each job arms one when
/// it starts, queued until the limit passes).
fn limits(sc: &Scenario) -> Vec<(&'static str, f64, f64)> {
    let secs = sc.duration.as_secs_f64();
    let loops = f64::from(sc.processes.count) * f64::from(sc.processes.threads.max(1));
    let set: Vec<(&str, f64)> = [
        ("processes.soft_limit", sc.processes.soft_limit),
        ("processes.hard_limit", sc.processes.hard_limit),
    ]
    .into_iter()
    .filter_map(|(f, l)| l.map(|l| (f, l.as_secs_f64().max(1e-9))))
    .collect();
    let firings: Vec<f64> = set.iter().map(|(_, l)| loops * secs / l).collect();
    // every job arms its limits: the fetches, and a new job after each firing
    let jobs = fetches(sc) + loops + firings.iter().sum::<f64>();
    set.iter()
        .zip(firings)
        .map(|((f, l), fired)| (*f, fired, jobs.min(jobs / secs.max(1e-9) * l + loops)))
        .collect()
}

/// The most events one run may schedule: about ten minutes of the simulator's time at its
/// slowest (some 20 million events a second), where a period of a nanosecond (`[jobs] tick`,
/// `sweep_every`, `hard_limit`, a lock's `poll`) would ask for weeks.
pub const MAX_EVENTS: f64 = 1e10;

/// The most fault windows (`store_outage`, `partition`, `store_latency`, ...) a scenario may
/// have open at once.
pub const MAX_OVERLAP: usize = 256;

/// The most fault windows of `sc` open at once: how many, when, and the index of the fault
/// whose start reaches that. `O(W log W)` in the windows.
pub fn overlap(sc: &Scenario) -> (usize, crate::time::Nanos, usize) {
    // (time, +1 start / -1 end, fault): an end sorts before a start at the same instant
    // (`[start, end)`), so back-to-back windows never count as overlapping
    let mut edges: Vec<(u64, i8, usize)> = Vec::new();
    for (i, f) in sc.faults.iter().enumerate() {
        if let Some((a, b)) = f.window()
            && b > a
        {
            edges.push((a.0, 1, i));
            edges.push((b.0, -1, i));
        }
    }
    edges.sort_unstable();
    let (mut open, mut most) = (0usize, (0, crate::time::Nanos::ZERO, 0));
    for (t, d, i) in edges {
        if d > 0 {
            open += 1;
            if open > most.0 {
                most = (open, crate::time::Nanos(t), i);
            }
        } else {
            open -= 1;
        }
    }
    most
}

/// The run would need more memory, or more work, than the limit.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum BudgetError {
    /// More memory than `--max-memory`.
    #[error(
        "{scenario}: {field}: the run would need about {} of memory, above the limit of {}{why} \
         (--max-memory to change it)",
        human(*estimate),
        human(*limit)
    )]
    Memory {
        /// Where: the scenario file and the line of the field (its name when it has no file).
        scenario: String,
        /// The field that weighs most in the estimate, e.g. `processes.count`.
        field: String,
        /// The estimate, bytes.
        estimate: u64,
        /// The limit, bytes.
        limit: u64,
        /// Why the estimate is what it is, when the field alone does not say (`: `local`:
        /// each of the 1000 pacers paces alone, ...`); else empty.
        why: String,
    },
    /// More fault windows open at once than [`MAX_OVERLAP`].
    #[error(
        "{scenario}: {field}: {windows} fault windows are open at once (at {at}), above the limit of {} \
         (the checkers follow every open window at every event: their work grows with the product)",
        MAX_OVERLAP
    )]
    Overlap {
        /// Where: the scenario file and the line of the field (its name when it has no file).
        scenario: String,
        /// The fault whose start reaches the most, e.g. `faults[40].at`.
        field: String,
        /// How many windows are open then.
        windows: usize,
        /// When.
        at: crate::time::Nanos,
    },
    /// More events than [`MAX_EVENTS`].
    #[error(
        "{scenario}: {field}: the run would schedule about {events:.1e} events, above the limit of {MAX_EVENTS:e} \
         ({hint}; no option raises this limit)"
    )]
    Work {
        /// Where: the scenario file and the line of the field (its name when it has no file).
        scenario: String,
        /// The field that weighs most in the estimate, e.g. `jobs.tick`.
        field: String,
        /// The estimate, events.
        events: f64,
        /// What brings it down (and why the estimate is what it is).
        hint: String,
    },
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
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
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
    let mut parts: Vec<(String, f64)> = vec![
        ("processes.count".into(), n * PER_PROCESS),
        ("pacer.rate".into(), fetches(sc) * PER_FETCH),
    ];
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
    // a time limit: what each firing leaves, and the timers parked in the queue
    for (field, fired, parked) in limits(sc) {
        parts.push((field.into(), fired * PER_LIMIT + parked * PER_TIMER));
    }
    // the trace pipeline's batches when the checkers fall behind (a loaded machine)
    let pipe = if crate::trace::pipe::worth_it() {
        crate::trace::pipe::most_in_flight() as f64
    } else {
        0.0
    };
    let per_run: f64 = parts.iter().map(|p| p.1).sum::<f64>() + BASE + pipe;
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

/// The events one run of `sc` schedules for its periodic parts, on the high side, with the
/// field that weighs most: each period a field sets (a tick, a sweep, a time limit, a lock's
/// poll) fires at most once per period per thing it runs for, over the duration, and each
/// firing schedules a few events.
pub fn work(sc: &Scenario) -> (f64, String) {
    const PER_FIRING: f64 = 8.0;
    let secs = sc.duration.as_secs_f64();
    let loops = f64::from(sc.processes.count) * f64::from(sc.processes.threads.max(1));
    let every = |n: f64, period: crate::time::Nanos| n * secs / period.as_secs_f64().max(1e-9) * PER_FIRING;
    let mut parts: Vec<(String, f64)> = vec![("pacer.rate".into(), fetches(sc) * EVENTS_PER_FETCH)];
    if let Some(j) = &sc.jobs {
        let jobs = crate::task::Jobs::new(j);
        let sources = f64::from(jobs.sources);
        parts.push(("jobs.tick".into(), every(1.0 + sources, jobs.tick)));
        parts.push(("jobs.sweep_every".into(), every(1.0 + sources, jobs.sweep_every)));
    }
    for (field, fired, _) in limits(sc) {
        parts.push((field.into(), fired * EVENTS_PER_LIMIT));
    }
    if let Some(p) = sc
        .pacer
        .options
        .get("poll")
        .and_then(toml::Value::as_str)
        .and_then(|p| crate::time::parse_duration(p).ok())
    {
        parts.push(("pacer.poll".into(), every(loops, p)));
    }
    for (i, f) in sc.faults.iter().enumerate() {
        if let crate::fault::FaultSpec::Kill { rate: Some(r), .. } = f {
            parts.push((format!("faults[{i}].rate"), r * secs * PER_FIRING * loops.min(64.0)));
        }
    }
    if let Some(a) = sc.processes.arrival_rate {
        parts.push((
            "processes.arrival_rate".into(),
            a * f64::from(sc.processes.count) * secs * PER_FIRING,
        ));
    }
    let total: f64 = parts.iter().map(|p| p.1).sum();
    let field = parts
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or_else(String::new, |p| p.0.clone());
    (if total.is_finite() { total } else { f64::MAX }, field)
}

/// Refuse `runs` runs of `sc` when they would need more memory than the limit, or more
/// work than [`MAX_EVENTS`] each.
pub fn check(sc: &Scenario, runs: u64) -> Result<(), BudgetError> {
    let (estimate, field) = estimate(sc, runs);
    let limit = limit();
    if estimate > limit {
        let why = match (field.as_str(), fleet_rate(sc).1) {
            ("pacer.rate", Some(why)) => format!(": {why}"),
            _ => String::new(),
        };
        return Err(BudgetError::Memory {
            scenario: sc.place(&field),
            field,
            estimate,
            limit,
            why,
        });
    }
    let (windows, at, i) = overlap(sc);
    if windows > MAX_OVERLAP {
        let field = format!("faults[{i}].at");
        return Err(BudgetError::Overlap {
            scenario: sc.place(&field),
            field,
            windows,
            at,
        });
    }
    let (events, field) = work(sc);
    if events > MAX_EVENTS {
        let hint = match (field.as_str(), fleet_rate(sc).1) {
            ("pacer.rate", Some(why)) => {
                format!("{why}: a lower rate, fewer processes or a shorter duration brings it down")
            }
            ("pacer.rate", None) => "a lower rate or a shorter duration brings it down".to_string(),
            _ => "a longer period or a shorter duration brings it down".to_string(),
        };
        return Err(BudgetError::Work {
            scenario: sc.place(&field),
            field,
            events,
            hint,
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
            let sc = crate::registry::load(&p).unwrap();
            let (b, _) = estimate(&sc, 100);
            assert!(b < DEFAULT_MAX_MEMORY / 4, "{}: {}", p.display(), human(b));
            let (w, f) = work(&sc);
            assert!(w < MAX_EVENTS / 100.0, "{}: {w:e} events ({f})", p.display());
        }
    }
}
