//! `just bench-scale`: 100,000 worker processes at 10,000/s for an hour of virtual time
//! (36 million fetches, `benches/scale-100k.toml`) through the whole harness (simulator, trace
//! hash, figures and every checker, no trace file), then wall time and peak memory.
//!
//! Memory must grow with the number of processes and the checkers' windows, never with the
//! number of events: a sampler thread reads the resident set every second, and the table
//! shows it at each tenth of the run, so a leak shows as a climb. `-- --duration 60s` runs a
//! shorter hour for a quick look.

#[path = "../common/mod.rs"]
mod common;

use common::{cpu_seconds, mib, peak_rss_bytes, scenario, status_bytes, thousands};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Peak memory the issue allows the scale run.
const LIMIT_BYTES: u64 = 500 * 1000 * 1000;

fn main() {
    let mut sc = scenario("benches/scale-100k.toml");
    let args: Vec<String> = std::env::args().collect();
    if let Some(d) = args
        .iter()
        .position(|a| a == "--duration")
        .and_then(|i| args.get(i + 1))
    {
        sc.duration = pacesim::time::parse_duration(d).unwrap_or_else(|e| panic!("--duration: {e}"));
    }
    if common::under_cargo_test() {
        println!("(run by cargo test: a 2 s smoke run; `just bench-scale` measures the hour)");
        sc.duration = pacesim::time::parse_duration("2s").expect("valid duration");
    }
    println!(
        "scale: {} processes, {}/s, {} of virtual time (about {} fetches)",
        thousands(sc.processes.count as f64),
        thousands(sc.pacer.rate),
        sc.duration,
        thousands(sc.pacer.rate * sc.duration.as_secs_f64())
    );

    // resident set, sampled every second while the run goes
    let samples: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let sampler = {
        let (samples, done) = (samples.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let s = (start.elapsed().as_secs_f64(), status_bytes("VmRSS"));
                samples.lock().expect("sampler lock").push(s);
                std::thread::sleep(Duration::from_millis(1000));
            }
        })
    };
    let cpu_start = cpu_seconds();
    let s = pacesim::registry::simulate(&sc, None, None).expect("no trace file, so no I/O");
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler thread");
    let peak = peak_rss_bytes();

    println!("\nresident memory during the run:");
    let samples = samples.lock().expect("sampler lock");
    for tenth in 1..=10 {
        let t = wall * tenth as f64 / 10.0;
        if let Some((at, rss)) = samples.iter().rev().find(|(at, _)| *at <= t) {
            println!("  {:>5.0}% of the run ({at:>7.1} s)  {}", tenth * 10, mib(*rss as f64));
        }
    }
    let failing: Vec<&str> = s.checks.iter().filter(|c| c.1.failed()).map(|c| c.0.as_str()).collect();
    println!("\nfetches          {}", thousands(s.fetches as f64));
    println!("achieved rate    {:.2}/s", s.achieved_rate);
    println!(
        "checks           {}",
        if failing.is_empty() {
            "all pass".to_string()
        } else {
            format!("FAIL: {}", failing.join(", "))
        }
    );
    println!("trace hash       {}", s.trace_hash);
    println!(
        "wall time        {wall:.1} s ({} fetches/s)",
        thousands(s.fetches as f64 / wall)
    );
    println!("cpu time         {cpu:.1} s (which the machine's other load disturbs less)");
    println!(
        "peak memory      {} ({:.0} MB; limit 500 MB: {})",
        mib(peak as f64),
        peak as f64 / 1e6,
        if peak < LIMIT_BYTES { "ok" } else { "EXCEEDED" }
    );
    if peak >= LIMIT_BYTES {
        std::process::exit(1);
    }
}
