//! The trace header: the scenario, the backend and the options in force, with the scenario
//! settings the checkers read; the same for a simulated run and a live one.

use crate::scenario::Scenario;
use crate::trace::{Detail, Header, ScenarioSettings, TRACE_VERSION};

/// The trace header for scenario `sc` run with a backend whose options in force are `detail`
/// (`source`: `sim` or `live`).
pub fn header_with(sc: &Scenario, backend: &str, detail: serde_json::Value, source: &str) -> Header {
    let backend_detail = with_settings(sc, detail);
    Header {
        ev: "header".into(),
        version: TRACE_VERSION,
        source: source.into(),
        scenario: sc.name.clone(),
        backend: backend.into(),
        seed: sc.seed,
        processes: sc.processes.count,
        rate: sc.pacer.rate,
        burst: sc.checks.burst,
        multiplier_cap: sc.backoff.cap,
        backend_detail,
    }
}

/// The backend's options in force (a JSON object; anything else is kept under `detail`),
/// plus the scenario settings checkers need.
fn with_settings(sc: &Scenario, d: serde_json::Value) -> Detail {
    let settings = ScenarioSettings {
        backoff_factor: sc.backoff.factor,
        decay_after: sc.backoff.decay_after,
        epsilon: sc.checks.epsilon,
        think_mean_ns: sc.processes.think.mean(),
        fetch_mean_ns: sc.fetch.duration.mean() + sc.destination.latency.mean(),
        arrival_rate: sc.processes.arrival_rate,
        wait_bound_ns: sc.checks.wait_bound.map(|b| b.0),
    };
    let mut d = if d.is_object() {
        d
    } else {
        serde_json::json!({ "detail": d })
    };
    if let (Some(j), Some(map)) = (&sc.jobs, d.as_object_mut()) {
        // each task's walk has its own length: the backend's `walk` does not bound it
        map.remove("walk");
        let jobs = crate::task::Jobs::new(j).detail();
        for (k, v) in jobs.as_object().into_iter().flatten() {
            map.insert(k.clone(), v.clone());
        }
    }
    // (stated only with threads, so a one-thread header is as it always was)
    if sc.processes.threads > 1 {
        d["threads"] = sc.processes.threads.into();
    }
    if let Some(k) = sc.processes.max_concurrency {
        d["max_concurrency"] = k.into();
    }
    Detail::new(d, settings)
}
