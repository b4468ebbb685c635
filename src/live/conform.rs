//! `pacesim conform`: a scenario in simulation and live, side by side.
//!
//! Both runs produce the same trace format and are summarised by the same code, so the
//! comparison is figure by figure: fetches, first-to-last span, achieved rate, the largest 1 s
//! window, the burst the arrivals needed, 429s, reservation latency (mean, p50, p95, p99) and
//! the stall after a kill (the longest gap between consecutive arrivals from the last arrival
//! before a crash to 2 s after it). Each row shows the live/sim relative difference.
//!
//! `--calibrate` first measures the live store, one stage at a time, on one connection, 300
//! sequential round trips of each (after 20 warm-up ones):
//!
//! 1. a trivial statement (`SELECT 1`): the network and the protocol. Fitted as the
//!    simulator's one-way `store.latency`: `RTT / 2`, log-normal, median and sigma by maximum
//!    likelihood on the log values (the mean and population standard deviation of `ln x`,
//!    computed with `statrs`);
//! 2. the real `row` reservation with `synchronous_commit = off`: the statement without the
//!    WAL flush. What it adds to (1) is fitted as `store.service` (held under the row lock);
//! 3. the same reservation as the run's sessions make it (`synchronous_commit` as the server and
//!    `PGOPTIONS` set it: `on` by default): what it adds to (2) is the commit, fitted as
//!    `store.commit` (also under the row lock).
//!
//! A stage's added time is fitted by quantile matching ([`fit_addend`]): the log-normal
//! whose sum with the stages before it (resampled from their measured round trips) comes
//! closest to the measured p50, p95 and p99 of the stage's own round trips.
//!
//! It then measures the design record's cost table, live: 4 worker processes sharing one row,
//! mean / p50 / p95 / p99 over 300 steady-state reservations; and runs the same scenario in
//! the calibrated simulator, so the two tables stand side by side (the goal: within 20% at
//! each percentile).

use crate::check::Status;
use crate::dist::Dist;
use crate::live::settings::PgSettings;
use crate::live::{LiveError, LiveOptions, pg, run_blocking};
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
pub(crate) struct StallMeter {
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
pub(crate) const STALL_WINDOW: u64 = 2_000_000_000;

/// The live store measured stage by stage, and the simulator's store fitted to it.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// Round trips measured of each stage.
    pub samples: usize,
    /// `SELECT 1` round trips: the network and the protocol.
    pub network: CostTable,
    /// The reservation with `synchronous_commit = off`: the statement without the commit.
    pub statement: CostTable,
    /// The reservation as the run's sessions make it (with the commit).
    pub reservation: CostTable,
    /// Fitted one-way median, ms.
    pub(crate) one_way_median_ms: f64,
    /// Fitted one-way sigma.
    pub sigma: f64,
    /// The distribution put into the scenario's `store.latency`.
    pub latency: Dist,
    /// The distribution put into `store.service`.
    pub service: Dist,
    /// The distribution put into `store.commit`.
    pub commit: Dist,
    /// The stage fits' largest relative error at p50, p95 or p99 ([`fit_addend`]).
    pub(crate) fit_error: f64,
}

impl Calibration {
    /// Put the fitted stages into a scenario's `[store]`.
    pub fn apply(&self, sc: &mut Scenario) {
        sc.store.latency = self.latency.clone();
        sc.store.service = self.service.clone();
        sc.store.commit = self.commit.clone();
    }
}

/// Quantiles matched by [`fit_addend`].
const MATCHED: [f64; 3] = [0.50, 0.95, 0.99];

/// The log-normal `X` (or zero) such that `B + X`, `B` resampled from `base`, comes closest to
/// `total`'s p50, p95 and p99: the largest relative error over the three is minimised, over a
/// grid of medians (1/40 to 3 times the difference of the medians, log-spaced) and sigmas (0
/// to 1.5). Deterministic: the resampling uses one fixed stream, the same for every candidate.
/// Also returns that largest relative error, the fit's own measure of how well one log-normal
/// stage explains the difference.
pub fn fit_addend(base: &[f64], total: &[f64]) -> (Dist, f64) {
    use rand::RngExt;
    use rand_distr::Distribution;
    let mut sorted = total.to_vec();
    sorted.sort_by(f64::total_cmp);
    let target: Vec<f64> = MATCHED.iter().map(|&q| quantile(&sorted, q)).collect();
    if base.is_empty() || total.is_empty() {
        return (Dist::default(), f64::NAN);
    }
    const DRAWS: usize = 4000;
    let mut rng = crate::rng::stream(0xCA11B, crate::rng::Entity::Store);
    let picks: Vec<f64> = (0..DRAWS).map(|_| base[rng.random_range(0..base.len())]).collect();
    let zs: Vec<f64> = (0..DRAWS)
        .map(|_| rand_distr::StandardNormal.sample(&mut rng))
        .collect();
    let error = |median: f64, sigma: f64| {
        let mut v: Vec<f64> = picks
            .iter()
            .zip(&zs)
            .map(|(b, z)| b + median * (sigma * z).exp())
            .collect();
        v.sort_by(f64::total_cmp);
        MATCHED
            .iter()
            .zip(&target)
            .map(|(&q, &t)| ((quantile(&v, q) - t) / t).abs())
            .fold(0.0, f64::max)
    };
    let mut base_sorted = base.to_vec();
    base_sorted.sort_by(f64::total_cmp);
    let gap = (target[0] - quantile(&base_sorted, 0.5)).max(target[0] * 0.01);
    let mut best = (error(0.0, 0.0), 0.0, 0.0);
    for i in 0..40 {
        let median = gap / 40.0 * 120f64.powf(i as f64 / 39.0);
        for j in 0..=30 {
            let sigma = j as f64 * 0.05;
            let e = error(median, sigma);
            if e < best.0 {
                best = (e, median, sigma);
            }
        }
    }
    let d = if best.1 == 0.0 {
        Dist::default()
    } else {
        Dist::Lognormal {
            median: Nanos(best.1.round().max(1.0) as u64),
            sigma: best.2,
        }
    };
    (d, best.0)
}

/// Fit a log-normal to positive samples by maximum likelihood: `(median, sigma)`.
pub(crate) fn fit_lognormal(samples: &[f64]) -> (f64, f64) {
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
    pub(crate) p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

impl CostTable {
    /// One line of a table: `name` padded to `width`, then mean, p50, p95 and p99 in ms.
    fn line(&self, name: &str, width: usize, prec: usize) -> String {
        format!(
            "{name:<width$} {:>5.prec$} ms {:>5.prec$} ms {:>5.prec$} ms {:>5.prec$} ms\n",
            self.mean_ms, self.p50_ms, self.p95_ms, self.p99_ms
        )
    }

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
pub(crate) fn reservation_rtts(events: &[Event], processes: u32, warmup: usize) -> Vec<u64> {
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

/// Measure the live store stage by stage, `count` sequential round trips of each on one
/// connection (after 20 warm-up ones), and fit the simulator's store to it (the module's
/// header says how).
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
        // a second session for (2): the same statement without waiting for the WAL flush
        let off = settings
            .connect(Duration::from_secs(3))
            .await
            .map_err(|e| CalError(e.to_string()))?;
        off.batch_execute("SET synchronous_commit = off").await?;
        let off = pg::RowClient::prepare(off, &schema).await?;
        let trivial = rc.client.prepare("SELECT 1").await?;
        let sync = rc
            .client
            .query_one("SHOW synchronous_commit", &[])
            .await?
            .get::<_, String>(0);
        let (mut net, mut stmt, mut full) = (Vec::new(), Vec::new(), Vec::new());
        // the stages interleaved, so a machine whose load changes meanwhile shifts all three
        for i in 0..count + 20 {
            let keep = i >= 20;
            let t0 = std::time::Instant::now();
            rc.client.query_one(&trivial, &[]).await?;
            let t1 = std::time::Instant::now();
            // a 1 us interval: the pace never runs ahead, so every call is an idle reservation
            off.reserve(1.0, None).await?;
            let t2 = std::time::Instant::now();
            rc.reserve(1.0, None).await?;
            let t3 = std::time::Instant::now();
            if keep {
                net.push((t1 - t0).as_nanos() as f64);
                stmt.push((t2 - t1).as_nanos() as f64);
                full.push((t3 - t2).as_nanos() as f64);
            }
        }
        Ok::<_, CalError>((net, stmt, full, sync))
    }
    .await;
    let _ = pg::drop_schema(&admin, &schema).await;
    let (net, stmt, full, sync) = measured.map_err(|e| LiveError::Setup(format!("calibration: {}", e.0)))?;
    let one_way: Vec<f64> = net.iter().map(|r| r / 2.0).collect();
    let (median, sigma) = fit_lognormal(&one_way);
    let (service, service_error) = fit_addend(&net, &stmt);
    // with `synchronous_commit = off` in force already, (3) is (2): no commit stage
    let (commit, commit_error) = if sync == "off" {
        (Dist::default(), 0.0)
    } else {
        fit_addend(&stmt, &full)
    };
    let table = |v: &[f64]| CostTable::of(&v.iter().map(|&x| x as u64).collect::<Vec<_>>());
    Ok(Calibration {
        samples: count,
        network: table(&net),
        statement: table(&stmt),
        reservation: table(&full),
        one_way_median_ms: median / 1e6,
        sigma,
        latency: Dist::Lognormal {
            median: Nanos(median.round().max(1.0) as u64),
            sigma,
        },
        service,
        commit,
        fit_error: service_error.max(commit_error),
    })
}

#[derive(Debug)]
struct CalError(String);

impl From<tokio_postgres::Error> for CalError {
    fn from(e: tokio_postgres::Error) -> Self {
        CalError(crate::live::settings::error_chain(&e))
    }
}

impl From<pg::SchemaError> for CalError {
    fn from(e: pg::SchemaError) -> Self {
        CalError(crate::live::settings::error_chain(&e))
    }
}

/// The design record's cost table as a scenario: 4 processes sharing one row at 50/s, 80
/// reservations each.
const COST_SCENARIO: &str = r#"
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

/// The cost table of a cost-scenario trace: the first 5 reservations of each process are
/// warm-up; the next 300 in time order are measured.
fn cost_of(events: &[Event]) -> CostTable {
    let mut rtts = reservation_rtts(events, 4, 5);
    rtts.truncate(300);
    CostTable::of(&rtts)
}

fn cost_scenario() -> Result<Scenario, LiveError> {
    Scenario::parse("cost-table", COST_SCENARIO, &crate::scenario::Structure)
        .map_err(|e| LiveError::Setup(e.to_string()))
}

/// The design record's cost table, live: 4 worker processes sharing one row at 50/s, 80
/// reservations each; the first 5 of each process are warm-up; the next 300 in time order are
/// measured.
pub(crate) fn cost_table(opts: &LiveOptions) -> Result<CostTable, LiveError> {
    // pacesim's own workers on the `row` backend, whatever the run being conformed uses
    let own = LiveOptions {
        worker: None,
        setup: None,
        ..opts.clone()
    };
    let r = run_blocking(&cost_scenario()?, &own)?;
    Ok(cost_of(&r.events()))
}

/// The same cost table from the simulator, with the calibrated store.
pub(crate) fn simulated_cost_table(cal: &Calibration, opts: &LiveOptions) -> Result<CostTable, LiveError> {
    let mut sc = cost_scenario()?;
    cal.apply(&mut sc);
    let mut c = crate::trace::Collect::default();
    opts.backends
        .simulate(&sc, &mut c)
        .map_err(|e| LiveError::Setup(e.to_string()))?;
    Ok(cost_of(&c.events))
}

/// Both sides of a conformance run.
#[derive(Debug, Serialize)]
pub struct Conformance {
    /// The simulator's summary.
    pub sim: Summary,
    /// The live summary.
    pub live: Summary,
    /// Stall after a kill (ms), simulated.
    pub(crate) sim_stall_ms: Option<f64>,
    /// Stall after a kill (ms), live.
    pub(crate) live_stall_ms: Option<f64>,
    /// The latency fit, when calibrated.
    pub calibration: Option<Calibration>,
    /// The cost table, when calibrated.
    pub cost: Option<CostTable>,
    /// The cost table from the calibrated simulator, when calibrated.
    pub(crate) sim_cost: Option<CostTable>,
    /// `live / sim - 1` of the achieved rate.
    pub(crate) rate_difference: f64,
    /// The external worker command the live side ran (`None`: pacesim's own workers).
    pub worker: Option<String>,
}

/// Run `sc` in simulation and live (calibrating first if asked).
pub fn conform(sc: &Scenario, calibrate_first: bool, opts: &LiveOptions) -> Result<Conformance, LiveError> {
    let mut sim_sc = sc.clone();
    let (calibration, cost, sim_cost) = if calibrate_first {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LiveError::Setup(e.to_string()))?;
        let c = rt.block_on(calibrate(300))?;
        c.apply(&mut sim_sc);
        let cost = cost_table(opts)?;
        let sim_cost = simulated_cost_table(&c, opts)?;
        (Some(c), Some(cost), Some(sim_cost))
    } else {
        (None, None, None)
    };
    let mut sim_stall = StallMeter::default();
    let sim = summary::simulate_with(
        |out: &mut dyn crate::trace::Sink| opts.backends.simulate(&sim_sc, out),
        None,
        Some(&mut sim_stall),
    )
    .map_err(|e| LiveError::Setup(e.to_string()))?;
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
        sim_cost,
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

/// The stages measured and the store fitted to them.
pub(crate) fn calibration_table(cal: &Calibration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "calibration: {} sequential round trips of each stage on one connection",
        cal.samples
    );
    let _ = writeln!(
        out,
        "{:<36} {:>8} {:>8} {:>8} {:>8}",
        "stage (round trip)", "mean", "p50", "p95", "p99"
    );
    for (name, t) in [
        ("SELECT 1 (network)", &cal.network),
        ("reservation, synchronous_commit=off", &cal.statement),
        ("reservation, as the run's sessions", &cal.reservation),
    ] {
        out += &t.line(name, 36, 3);
    }
    let _ = writeln!(
        out,
        "fitted: store.latency = {} one-way; store.service = {}; store.commit = {} (largest fit error {:.0}% at p50/p95/p99)",
        cal.latency,
        cal.service,
        cal.commit,
        cal.fit_error * 100.0
    );
    out
}

/// Live and calibrated-simulation cost tables side by side, each percentile's relative
/// difference, and the goal (within 20% at p50, p95 and p99).
pub(crate) fn cost_tables(live: &CostTable, sim: Option<&CostTable>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nreservation cost, 4 processes sharing one row ({} steady-state reservations)",
        live.count
    );
    let _ = writeln!(
        out,
        "{:<22} {:>8} {:>8} {:>8} {:>8}",
        "metric", "mean", "p50", "p95", "p99"
    );
    out += &live.line("live", 22, 2);
    if let Some(s) = sim {
        out += &s.line("calibrated simulation", 22, 2);
        let _ = writeln!(
            out,
            "{:<22} {:>8} {:>8} {:>8} {:>8}",
            "sim/live",
            rel(live.mean_ms, s.mean_ms),
            rel(live.p50_ms, s.p50_ms),
            rel(live.p95_ms, s.p95_ms),
            rel(live.p99_ms, s.p99_ms)
        );
        let off: Vec<String> = cost_misses(live, s, 0.20);
        let _ = writeln!(
            out,
            "{}",
            if off.is_empty() {
                "calibrated simulation within 20% of live at p50, p95 and p99".to_string()
            } else {
                format!("calibrated simulation NOT within 20% of live at {}", off.join(", "))
            }
        );
    }
    let record = CostTable {
        count: 0,
        mean_ms: 1.49,
        p50_ms: 1.30,
        p95_ms: 2.33,
        p99_ms: 8.09,
    };
    out += &record.line("design record", 22, 2);
    out
}

/// The percentiles (of p50, p95, p99) at which `sim` is further than `tolerance` (relative)
/// from `live`.
pub(crate) fn cost_misses(live: &CostTable, sim: &CostTable, tolerance: f64) -> Vec<String> {
    [
        ("p50", live.p50_ms, sim.p50_ms),
        ("p95", live.p95_ms, sim.p95_ms),
        ("p99", live.p99_ms, sim.p99_ms),
    ]
    .into_iter()
    .filter(|&(_, l, s)| !(l > 0.0 && ((s / l) - 1.0).abs() <= tolerance))
    .map(|(q, l, s)| format!("{q} ({s:.3} ms against {l:.3} ms)"))
    .collect()
}

/// The side-by-side table, after the calibration and the cost table when they were measured.
pub fn table(c: &Conformance) -> String {
    let mut out = String::new();
    if let Some(cal) = &c.calibration {
        out += &calibration_table(cal);
    }
    if let Some(t) = &c.cost {
        out += &cost_tables(t, c.sim_cost.as_ref());
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
        let lc = l.checks.get(name).map_or("-", |c| word(c.verdict));
        let _ = writeln!(
            out,
            "{:<24} {:>12} {:>12}",
            format!("check {name}"),
            word(sc.verdict),
            lc
        );
    }
    out
}

/// A verdict in the side-by-side table.
fn word(v: Status) -> &'static str {
    match v {
        Status::NotJudged => "not judged",
        Status::Pass => "pass",
        Status::Fail => "FAIL",
    }
}

impl Conformance {
    /// A conformance of two runs that agree in everything but their summaries (tests).
    #[cfg(test)]
    pub(crate) fn of(sim: Summary, live: Summary) -> Conformance {
        Conformance {
            sim,
            live,
            sim_stall_ms: None,
            live_stall_ms: None,
            calibration: None,
            cost: None,
            sim_cost: None,
            rate_difference: 0.0,
            worker: None,
        }
    }

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
        let verdict = |c: &crate::summary::CheckOut| if c.passed() { "pass" } else { "FAIL" };
        for (k, v) in &self.sim.checks {
            match self.live.checks.get(k) {
                // an external worker that does not report what a check needs: nothing to compare
                // (or a simulated run that cannot judge it)
                Some(l) if !l.judged() || !v.judged() => {}
                Some(l) if l.verdict == v.verdict => {}
                Some(l) => out.push(format!(
                    "check {k}: simulated {}, live {} ({})",
                    verdict(v),
                    verdict(l),
                    if l.passed() { &v.detail } else { &l.detail }
                )),
                None if self.worker.is_some() => {}
                None => out.push(format!("check {k}: ran in simulation only")),
            }
        }
        out
    }
}

/// `conform --tolerance`: a relative difference, a finite number >= 0.
pub fn parse_tolerance(s: &str) -> Result<f64, ToleranceError> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(t) => Err(ToleranceError::OutOfRange(t)),
        Err(e) => Err(ToleranceError::NotANumber(s.to_string(), e)),
    }
}

/// A tolerance that is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToleranceError {
    /// Negative, or not finite.
    #[error("must be a finite number >= 0, got {0}")]
    OutOfRange(f64),
    /// Not a number at all (the text given).
    #[error("`{0}` is not a number: {1}")]
    NotANumber(String, std::num::ParseFloatError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disagreement_names_the_comparison_that_failed() {
        let sc = crate::registry::parse("t.toml", crate::scenario::FOUR_LIMITERS).unwrap();
        let sim = crate::registry::simulate(&sc, None, None).unwrap();
        let mut live = sim.clone();
        let mut c = Conformance::of(sim, live.clone());
        assert!(c.agrees(0.02) && c.disagreements(0.02).is_empty());
        c.rate_difference = 0.05;
        let d = c.disagreements(0.02);
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("achieved rate: live "), "{d:?}");
        c.rate_difference = f64::NAN;
        assert!(!c.agrees(0.02), "a rate that cannot be compared does not agree");
        c.rate_difference = 0.0;
        live.checks.get_mut("ceiling").unwrap().verdict = Status::Fail;
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

    fn lognormal_draws(median: f64, sigma: f64, n: usize, seed: u64) -> Vec<f64> {
        use rand_distr::Distribution;
        let d = rand_distr::LogNormal::new(median.ln(), sigma).unwrap();
        let mut r = crate::rng::stream(seed, crate::rng::Entity::Store);
        (0..n).map(|_| d.sample(&mut r)).collect()
    }

    #[test]
    fn an_added_stage_is_recovered_from_its_sum() {
        // a network round trip of ~40 us, a commit of ~2 ms (sigma 0.3) on top
        let base = lognormal_draws(40_000.0, 0.2, 3000, 1);
        let commit = lognormal_draws(2_000_000.0, 0.3, 3000, 2);
        let total: Vec<f64> = base.iter().zip(&commit).map(|(b, c)| b + c).collect();
        match fit_addend(&base, &total).0 {
            Dist::Lognormal { median, sigma } => {
                assert!((median.0 as f64 / 2_000_000.0 - 1.0).abs() < 0.1, "{median}");
                assert!((sigma - 0.3).abs() <= 0.1, "{sigma}");
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn no_added_stage_fits_as_zero() {
        let base = lognormal_draws(40_000.0, 0.2, 3000, 1);
        let again = lognormal_draws(40_000.0, 0.2, 3000, 3);
        let fitted = fit_addend(&base, &again).0;
        // nothing, or something negligible against the round trip
        assert!(fitted.is_zero() || fitted.mean() < 4_000.0, "{fitted:?}");
        assert!(fit_addend(&[], &again).0.is_zero());
    }

    #[test]
    fn the_cost_goal_names_each_percentile_it_misses() {
        let live = CostTable {
            count: 300,
            mean_ms: 1.0,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: 8.0,
        };
        let close = CostTable {
            p50_ms: 1.1,
            p95_ms: 1.7,
            p99_ms: 9.5,
            ..live.clone()
        };
        assert!(cost_misses(&live, &close, 0.2).is_empty());
        let far = CostTable {
            p99_ms: 3.0,
            ..close.clone()
        };
        let m = cost_misses(&live, &far, 0.2);
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("p99 (3.000 ms against 8.000 ms)"), "{m:?}");
        assert!(cost_tables(&live, Some(&far)).contains("NOT within 20% of live at p99"));
        assert!(cost_tables(&live, Some(&close)).contains("within 20% of live at p50, p95 and p99"));
    }

    #[test]
    fn the_simulated_cost_table_follows_the_fitted_commit() {
        let stage = |commit: Dist| Calibration {
            samples: 0,
            network: CostTable::default(),
            statement: CostTable::default(),
            reservation: CostTable::default(),
            one_way_median_ms: 0.02,
            sigma: 0.1,
            latency: Dist::Lognormal {
                median: Nanos(20_000),
                sigma: 0.1,
            },
            service: Dist::default(),
            commit,
            fit_error: 0.0,
        };
        let none = simulated_cost_table(
            &stage(Dist::default()),
            &LiveOptions::with_exe("pacesim", &crate::registry::Registered),
        )
        .unwrap();
        let with = simulated_cost_table(
            &stage(Dist::Constant {
                value: Nanos(2_000_000),
            }),
            &LiveOptions::with_exe("pacesim", &crate::registry::Registered),
        )
        .unwrap();
        assert_eq!(none.count, 300);
        assert!(none.p50_ms < 0.1, "{none:?}");
        // every reservation waits for its commit; some wait behind another's too
        assert!(with.p50_ms >= 2.0 && with.p99_ms >= with.p50_ms, "{with:?}");
    }

    #[test]
    fn stall_is_the_longest_gap_around_a_crash() {
        let mut m = StallMeter::default();
        for t in [0, 10, 20, 50, 60, 3_000_000_000] {
            m.event(&Event::Arrival {
                t,
                pid: 0,
                thread: 0,
                status: 200,
            });
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
