//! `pacesim conform`: a scenario in simulation and live, side by side.
//!
//! Both runs produce the same trace format and are summarised by the same code, so the
//! comparison is figure by figure: fetches, first-to-last span, achieved rate, the largest 1 s
//! window, the burst the arrivals needed, 429s, reservation latency (mean, p50, p95, p99) and
//! the stall after a kill (the longest gap between consecutive arrivals from the last arrival
//! before a crash to 2 s after it). Each row shows the live/sim relative difference.
//!
//! `--calibrate` first measures the live store: 300 sequential reservations on one connection
//! (the round trip of the real `row` statement), fitted as the simulator's one-way
//! `store.latency`: `RTT / 2`, log-normal, median and sigma by maximum likelihood on the log
//! values (the mean and population standard deviation of `ln x`, computed with `statrs`).
//! It then measures the design record's cost table: 4 worker processes sharing one row,
//! mean / p50 / p95 / p99 over 300 steady-state reservations.

use crate::dist::Dist;
use crate::live::settings::PgSettings;
use crate::live::{CommandError, LiveError, LiveOptions, pg, run_blocking};
use crate::scenario::Scenario;
use crate::summary::{self, Summary};
use crate::time::Nanos;
use crate::trace::{Event, OpKind, Sink};
use serde::Serialize;
use statrs::statistics::Statistics;
use std::fmt::Write as _;
use std::time::Duration;

/// Looks for the stall after each crash: the longest gap between consecutive arrivals from
/// the last arrival before the crash to `window` after it.
#[derive(Debug, Default)]
pub struct StallMeter {
    arrivals: Vec<u64>,
    crashes: Vec<u64>,
}

impl Sink for StallMeter {
    fn event(&mut self, ev: &Event) {
        match *ev {
            Event::Arrival { t, .. } => self.arrivals.push(t),
            Event::Crash { t, .. } => self.crashes.push(t),
            _ => {}
        }
    }
}

impl StallMeter {
    /// The longest such gap over every crash (ns), or `None` without crashes.
    pub fn stall(&self, window: u64) -> Option<u64> {
        self.crashes
            .iter()
            .map(|&c| {
                let i = self.arrivals.partition_point(|&a| a < c);
                let from = i.saturating_sub(1);
                let to = self.arrivals.partition_point(|&a| a <= c + window);
                self.arrivals[from..to]
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .max()
                    .unwrap_or(0)
            })
            .max()
    }

    /// Feed a whole event list.
    pub fn of(events: &[Event]) -> StallMeter {
        let mut m = StallMeter::default();
        for e in events {
            m.event(e);
        }
        m
    }
}

/// The window after a crash the stall is measured in.
pub const STALL_WINDOW: u64 = 2_000_000_000;

/// A fitted one-way store latency.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// Round trips measured.
    pub samples: usize,
    /// Round-trip mean, ms.
    pub rtt_mean_ms: f64,
    /// Round-trip median, ms.
    pub rtt_p50_ms: f64,
    /// Fitted one-way median, ms.
    pub one_way_median_ms: f64,
    /// Fitted sigma.
    pub sigma: f64,
    /// The distribution put into the scenario's `store.latency`.
    pub latency: Dist,
}

/// Fit a log-normal to positive samples by maximum likelihood: `(median, sigma)`.
pub fn fit_lognormal(samples: &[f64]) -> (f64, f64) {
    let logs: Vec<f64> = samples.iter().filter(|&&x| x > 0.0).map(|x| x.ln()).collect();
    let mu = logs.iter().mean();
    let sigma = logs.iter().population_std_dev();
    (mu.exp(), if sigma.is_finite() { sigma } else { 0.0 })
}

/// Quantile by nearest rank on sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Mean, p50, p95, p99 (ms) of durations in ns.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CostTable {
    /// Reservations measured.
    pub count: usize,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

impl CostTable {
    /// From durations in ns.
    pub fn of(ns: &[u64]) -> CostTable {
        let mut v: Vec<f64> = ns.iter().map(|&x| x as f64 / 1e6).collect();
        v.sort_by(f64::total_cmp);
        CostTable {
            count: v.len(),
            mean_ms: if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            },
            p50_ms: quantile(&v, 0.50),
            p95_ms: quantile(&v, 0.95),
            p99_ms: quantile(&v, 0.99),
        }
    }
}

/// Reservation round trips (OpSent to Reply, `reserve`) in a trace, in send order, skipping
/// each process's first `warmup`.
pub fn reservation_rtts(events: &[Event], processes: u32, warmup: usize) -> Vec<u64> {
    let mut sent: Vec<Option<u64>> = vec![None; processes as usize];
    let mut seen = vec![0usize; processes as usize];
    let mut out = Vec::new();
    for e in events {
        match *e {
            Event::OpSent {
                t,
                pid,
                op: OpKind::Reserve,
                ..
            } => sent[pid as usize] = Some(t),
            Event::Reply {
                t,
                pid,
                op: OpKind::Reserve,
                ..
            } => {
                if let Some(s) = sent[pid as usize].take() {
                    seen[pid as usize] += 1;
                    if seen[pid as usize] > warmup {
                        out.push(t - s);
                    }
                }
            }
            Event::StoreError { pid, .. } | Event::Crash { pid, .. } => sent[pid as usize] = None,
            _ => {}
        }
    }
    out
}

/// Measure `count` sequential `row` reservations on one connection (after 20 warm-up ones)
/// and fit the one-way latency.
pub async fn calibrate(count: usize) -> Result<Calibration, LiveError> {
    let (settings, admin) = PgSettings::try_from_env()?
        .connect_resolving_user(Duration::from_secs(3))
        .await?;
    let schema = pg::schema_name(&format!("{}_calibrate", crate::live::runner::new_run_id()));
    let measured = async {
        pg::create_schema(&admin, &schema, 1).await.map_err(CalError::from)?;
        let client = settings
            .connect(Duration::from_secs(3))
            .await
            .map_err(|e| CalError(e.to_string()))?;
        let rc = pg::RowClient::prepare(client, &schema).await?;
        let mut rtts = Vec::with_capacity(count);
        for i in 0..count + 20 {
            let t0 = std::time::Instant::now();
            // a 1 us interval: the pace never runs ahead, so every call is an idle reservation
            rc.reserve(1.0, None).await?;
            if i >= 20 {
                rtts.push(t0.elapsed().as_nanos() as f64);
            }
        }
        Ok::<_, CalError>(rtts)
    }
    .await;
    let _ = pg::drop_schema(&admin, &schema).await;
    let rtts = measured.map_err(|e| LiveError::Setup(format!("calibration: {}", e.0)))?;
    let one_way: Vec<f64> = rtts.iter().map(|r| r / 2.0).collect();
    let (median, sigma) = fit_lognormal(&one_way);
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(Calibration {
        samples: rtts.len(),
        rtt_mean_ms: rtts.iter().sum::<f64>() / rtts.len().max(1) as f64 / 1e6,
        rtt_p50_ms: quantile(&sorted, 0.5) / 1e6,
        one_way_median_ms: median / 1e6,
        sigma,
        latency: Dist::Lognormal {
            median: Nanos(median.round().max(1.0) as u64),
            sigma,
        },
    })
}

#[derive(Debug)]
struct CalError(String);

impl From<tokio_postgres::Error> for CalError {
    fn from(e: tokio_postgres::Error) -> Self {
        CalError(crate::live::settings::error_chain(&e))
    }
}

/// The design record's cost table, live: 4 worker processes sharing one row at 50/s, 80
/// reservations each; the first 5 of each process are warm-up; the next 300 in time order are
/// measured.
pub fn cost_table(opts: &LiveOptions) -> Result<CostTable, LiveError> {
    let src = r#"
name = "cost-table"
description = "4 processes sharing one row: reservation cost"
duration = "30s"
[pacer]
backend = "row"
rate = 50.0
[processes]
count = 4
requests = 80
"#;
    let sc = Scenario::parse("cost-table", src).map_err(|e| LiveError::Setup(e.to_string()))?;
    // pacesim's own workers on the `row` backend, whatever the run being conformed uses
    let own = LiveOptions {
        worker: None,
        ..opts.clone()
    };
    let r = run_blocking(&sc, &own)?;
    let mut rtts = reservation_rtts(&r.events(), 4, 5);
    rtts.truncate(300);
    Ok(CostTable::of(&rtts))
}

/// Both sides of a conformance run.
#[derive(Debug, Serialize)]
pub struct Conformance {
    /// The simulator's summary.
    pub sim: Summary,
    /// The live summary.
    pub live: Summary,
    /// Stall after a kill (ms), simulated.
    pub sim_stall_ms: Option<f64>,
    /// Stall after a kill (ms), live.
    pub live_stall_ms: Option<f64>,
    /// The latency fit, when calibrated.
    pub calibration: Option<Calibration>,
    /// The cost table, when calibrated.
    pub cost: Option<CostTable>,
    /// `live / sim - 1` of the achieved rate.
    pub rate_difference: f64,
    /// The external worker command the live side ran (`None`: pacesim's own workers).
    pub worker: Option<String>,
}

/// Run `sc` in simulation and live (calibrating first if asked).
pub fn conform(sc: &Scenario, calibrate_first: bool, opts: &LiveOptions) -> Result<Conformance, LiveError> {
    let mut sim_sc = sc.clone();
    let (calibration, cost) = if calibrate_first {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LiveError::Setup(e.to_string()))?;
        let c = rt.block_on(calibrate(300))?;
        sim_sc.store.latency = c.latency.clone();
        let cost = cost_table(opts)?;
        (Some(c), Some(cost))
    } else {
        (None, None)
    };
    let mut sim_stall = StallMeter::default();
    let sim = summary::simulate(&sim_sc, None, Some(&mut sim_stall)).map_err(|e| LiveError::Setup(e.to_string()))?;
    let live_run = run_blocking(sc, opts)?;
    let live_stall = StallMeter::of(&live_run.events());
    let ms = |v: Option<u64>| v.map(|x| x as f64 / 1e6);
    let live = live_run.summary;
    let rate_difference = if sim.achieved_rate > 0.0 {
        live.achieved_rate / sim.achieved_rate - 1.0
    } else {
        f64::NAN
    };
    Ok(Conformance {
        worker: opts.worker.as_ref().map(|w| w.display()),
        sim_stall_ms: ms(sim_stall.stall(STALL_WINDOW)),
        live_stall_ms: ms(live_stall.stall(STALL_WINDOW)),
        sim,
        live,
        calibration,
        cost,
        rate_difference,
    })
}

fn rel(sim: f64, live: f64) -> String {
    // The simulator records a zero-latency round trip as 1 ns.
    if sim.abs() < 1e-5 {
        if live.abs() < 1e-5 { "0".into() } else { "-".into() }
    } else {
        format!("{:+.1}%", (live / sim - 1.0) * 100.0)
    }
}

/// The side-by-side table, after the calibration and the cost table when they were measured.
pub fn table(c: &Conformance) -> String {
    let mut out = String::new();
    if let Some(cal) = &c.calibration {
        let _ = writeln!(
            out,
            "calibration: {} sequential reservations, RTT mean {:.3} ms p50 {:.3} ms -> store.latency = lognormal(median {:.3} ms, sigma {:.3}) one-way",
            cal.samples, cal.rtt_mean_ms, cal.rtt_p50_ms, cal.one_way_median_ms, cal.sigma
        );
    }
    if let Some(t) = &c.cost {
        let _ = writeln!(
            out,
            "\nreservation cost, 4 processes sharing one row ({} steady-state reservations)",
            t.count
        );
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>8} {:>8} {:>8}",
            "metric", "mean", "p50", "p95", "p99"
        );
        let _ = writeln!(
            out,
            "{:<18} {:>5.2} ms {:>5.2} ms {:>5.2} ms {:>5.2} ms",
            "per reservation", t.mean_ms, t.p50_ms, t.p95_ms, t.p99_ms
        );
        let _ = writeln!(
            out,
            "{:<18} {:>5.2} ms {:>5.2} ms {:>5.2} ms {:>5.2} ms",
            "design record", 1.49, 1.30, 2.33, 8.09
        );
    }
    let (s, l) = (&c.sim, &c.live);
    match &c.worker {
        None => {
            let _ = writeln!(
                out,
                "\n== conform {} (backend {}, {} processes, ceiling {}/s)",
                s.scenario, s.backend, s.processes, s.rate
            );
        }
        Some(w) => {
            let _ = writeln!(
                out,
                "\n== conform {} (sim: the model of backend {}; live: external worker `{w}`; {} processes, ceiling {}/s)",
                s.scenario, s.backend, s.processes, s.rate
            );
        }
    }
    let _ = writeln!(out, "{:<24} {:>12} {:>12} {:>10}", "", "sim", "live", "live/sim");
    let row =
        |name: &str, a: f64, b: f64, prec: usize| format!("{name:<24} {a:>12.prec$} {b:>12.prec$} {:>10}\n", rel(a, b));
    let (rs, rl) = (&s.reservation, &l.reservation);
    for (name, a, b, prec) in [
        ("fetches", s.fetches as f64, l.fetches as f64, 0),
        (
            "first-to-last start s",
            s.last_start_s - s.first_start_s,
            l.last_start_s - l.first_start_s,
            3,
        ),
        ("achieved rate /s", s.achieved_rate, l.achieved_rate, 3),
        ("max in 1 s", s.max_window.count as f64, l.max_window.count as f64, 0),
        ("burst needed", s.burst_needed as f64, l.burst_needed as f64, 0),
        ("429s", s.status_429 as f64, l.status_429 as f64, 0),
        ("reservation mean ms", rs.mean_ms, rl.mean_ms, 3),
        ("reservation p50 ms", rs.p50_ms, rl.p50_ms, 3),
        ("reservation p95 ms", rs.p95_ms, rl.p95_ms, 3),
        ("reservation p99 ms", rs.p99_ms, rl.p99_ms, 3),
    ] {
        out += &row(name, a, b, prec);
    }
    out += &match (c.sim_stall_ms, c.live_stall_ms) {
        (None, None) => format!("{:<24} {:>12} {:>12}\n", "stall after kill ms", "-", "-"),
        (a, b) => row("stall after kill ms", a.unwrap_or(0.0), b.unwrap_or(0.0), 1),
    };
    out += &row("fallback s", s.fallback_s, l.fallback_s, 3);
    for (name, sc) in &s.checks {
        let lc = l.checks.get(name).map_or("-", |c| {
            if c.detail.starts_with(crate::check::NOT_JUDGED) {
                "not judged"
            } else if c.pass {
                "pass"
            } else {
                "FAIL"
            }
        });
        let _ = writeln!(
            out,
            "{:<24} {:>12} {:>12}",
            format!("check {name}"),
            if sc.pass { "pass" } else { "FAIL" },
            lc
        );
    }
    out
}

impl Conformance {
    /// True when the achieved rates agree within `tolerance` (relative) and every check has
    /// the same verdict both ways.
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.disagreements(tolerance).is_empty()
    }

    /// Each comparison that failed, one line each: the achieved rates further apart than
    /// `tolerance` (or not comparable), and each check whose verdict differs (or that ran one
    /// way only). Empty when the two runs agree.
    pub fn disagreements(&self, tolerance: f64) -> Vec<String> {
        let mut out = Vec::new();
        let within = self.rate_difference.abs() <= tolerance;
        if !within {
            out.push(format!(
                "achieved rate: live {:.3}/s vs simulated {:.3}/s, a relative difference of {:+.4} \
                 (tolerance {tolerance})",
                self.live.achieved_rate, self.sim.achieved_rate, self.rate_difference
            ));
        }
        let verdict = |p: bool| if p { "pass" } else { "FAIL" };
        for (k, v) in &self.sim.checks {
            match self.live.checks.get(k) {
                // an external worker that does not report what a check needs: nothing to compare
                Some(l) if l.detail.starts_with(crate::check::NOT_JUDGED) => {}
                Some(l) if l.pass == v.pass => {}
                Some(l) => out.push(format!(
                    "check {k}: simulated {}, live {} ({})",
                    verdict(v.pass),
                    verdict(l.pass),
                    if l.pass { &v.detail } else { &l.detail }
                )),
                None if self.worker.is_some() => {}
                None => out.push(format!("check {k}: ran in simulation only")),
            }
        }
        out
    }
}

/// `conform --tolerance`: a relative difference, a finite number >= 0.
pub fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(t) => Err(format!("must be a finite number >= 0, got {t}")),
        Err(e) => Err(format!("`{s}` is not a number: {e}")),
    }
}

/// `pacesim conform`: load `file` (with `--backend`) and run it both ways ([`conform`]).
pub fn conform_file(
    file: &std::path::Path,
    backend: Option<&str>,
    calibrate: bool,
    worker_cmd: Option<&str>,
    opts: &LiveOptions,
) -> Result<Conformance, CommandError> {
    let sc = crate::run::load(file, None, backend)?;
    let mut opts = opts.clone();
    if let Some(w) = crate::live::worker_command(&sc, file, worker_cmd)? {
        opts.worker = Some(w);
    }
    Ok(conform(&sc, calibrate, &opts)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disagreement_names_the_comparison_that_failed() {
        let sc = Scenario::parse("t.toml", crate::scenario::FOUR_LIMITERS).unwrap();
        let sim = crate::summary::simulate(&sc, None, None).unwrap();
        let mut live = sim.clone();
        let mut c = Conformance {
            sim,
            live: live.clone(),
            sim_stall_ms: None,
            live_stall_ms: None,
            calibration: None,
            cost: None,
            rate_difference: 0.0,
            worker: None,
        };
        assert!(c.agrees(0.02) && c.disagreements(0.02).is_empty());
        c.rate_difference = 0.05;
        let d = c.disagreements(0.02);
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("achieved rate: live "), "{d:?}");
        c.rate_difference = f64::NAN;
        assert!(!c.agrees(0.02), "a rate that cannot be compared does not agree");
        c.rate_difference = 0.0;
        live.checks.get_mut("ceiling").unwrap().pass = false;
        c.live = live;
        let d = c.disagreements(0.02);
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("check ceiling: simulated pass, live FAIL"), "{d:?}");
    }

    #[test]
    fn tolerance_is_a_finite_number_at_least_zero() {
        assert_eq!(parse_tolerance("0.02"), Ok(0.02));
        assert_eq!(parse_tolerance("0"), Ok(0.0));
        for bad in ["nan", "-1", "inf", "x"] {
            assert!(parse_tolerance(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lognormal_fit_recovers_parameters() {
        use rand_distr::Distribution;
        let d = rand_distr::LogNormal::new((600_000f64).ln(), 0.4).unwrap();
        let mut r = crate::rng::stream(3, crate::rng::Entity::Store);
        let xs: Vec<f64> = (0..20_000).map(|_| d.sample(&mut r)).collect();
        let (m, s) = fit_lognormal(&xs);
        assert!((m / 600_000.0 - 1.0).abs() < 0.02, "{m}");
        assert!((s - 0.4).abs() < 0.01, "{s}");
    }

    #[test]
    fn stall_is_the_longest_gap_around_a_crash() {
        let mut m = StallMeter::default();
        for t in [0, 10, 20, 50, 60, 3_000_000_000] {
            m.event(&Event::Arrival { t, pid: 0, status: 200 });
        }
        assert_eq!(m.stall(STALL_WINDOW), None);
        m.event(&Event::Crash {
            t: 25,
            pid: 1,
            point: crate::trace::CrashPoint::Immediate,
        });
        assert_eq!(m.stall(STALL_WINDOW), Some(30));
    }

    #[test]
    fn cost_table_quantiles() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 1_000_000).collect();
        let t = CostTable::of(&ns);
        assert_eq!((t.p50_ms, t.p95_ms, t.p99_ms), (50.0, 95.0, 99.0));
        assert!((t.mean_ms - 50.5).abs() < 1e-9);
    }
}
