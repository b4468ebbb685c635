//! The command line: `pacesim run | check | simulate | backends`.

use crate::scenario::{Scenario, ScenarioError};
use crate::summary::{self, Summary};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit status when every check passed.
pub const EXIT_PASS: i32 = 0;
/// Exit status when a check failed.
pub const EXIT_FAIL: i32 = 1;
/// Exit status for bad input (a scenario or trace that cannot be used).
pub const EXIT_BAD_INPUT: i32 = 2;

/// Simulate and verify pacing (rate-limiting) algorithms shared by many worker processes.
#[derive(Debug, Parser)]
#[command(name = "pacesim", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Simulate one scenario and check its trace.
    Run {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the scenario's backend (see `pacesim backends`).
        #[arg(long)]
        backend: Option<String>,
        /// Write the trace as JSON Lines to this file.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run the checkers on a trace file (from `run --trace` or a live run).
    Check {
        /// Trace file (JSON Lines).
        trace: PathBuf,
        /// Check against this ceiling instead of the rate in the trace's header.
        #[arg(long)]
        rate: Option<f64>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run scenarios once per backend they compare (and per seed), print a comparison table
    /// per scenario, and with `--out` write plots, summaries and index.md.
    Simulate {
        /// Scenario files; default: every sims/*.toml.
        files: Vec<PathBuf>,
        /// Run each scenario with this many seeds (its own seed, then seed + 1, ...) and
        /// report mean and 95% confidence intervals across them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Write the report here: `<scenario>/` plots (SVG and PNG), `summary.json`, and
        /// `index.md`.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print JSON lines (one per run: the `run --json` summary plus derived figures)
        /// instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// List every backend with a one-line summary.
    Backends,
    /// The defect matrix: every scenario x every backend it compares, against every property;
    /// compared with `sims/expected-matrix.toml` (exit 1 on any difference).
    Matrix {
        /// Scenario files; default: every sims/*.toml.
        files: Vec<PathBuf>,
        /// Seeds per run (the scenario's seed, seed + 1, ...); a cell fails if any seed fails.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        cases: u64,
        /// The expected matrix; default `sims/expected-matrix.toml` when it exists.
        #[arg(long)]
        expected: Option<PathBuf>,
        /// Print one JSON object (columns, rows, mismatches) instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario for real: worker processes against PostgreSQL / Redis and a local
    /// destination (connection settings: PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
    /// REDIS_URL). Prints the same summary as `run`.
    Live {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the scenario's backend (see `pacesim backends`).
        #[arg(long)]
        backend: Option<String>,
        /// Write the trace as JSON Lines to this file.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario in simulation and live, and print both side by side.
    Conform {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// Override the scenario's backend.
        #[arg(long)]
        backend: Option<String>,
        /// First fit the simulator's store latency to the live store (300 reservations), and
        /// measure the reservation cost table (4 processes sharing one row).
        #[arg(long)]
        calibrate: bool,
        /// Largest relative difference of the achieved rates that passes.
        #[arg(long, default_value_t = 0.02)]
        tolerance: f64,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Run one scenario over a grid of parameter values x seeds, in parallel: one CSV/JSON row
    /// per run and a summary with 95% confidence intervals per grid point (see `sweep.rs`).
    Sweep {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// An axis `KEY=V1,V2,...`; KEY is processes, rate, backend, requests, duration, burst
        /// or a dotted scenario path (store.service.value). Repeat for a cross product.
        #[arg(long)]
        grid: Vec<String>,
        /// Seeds per grid point: the scenario's seed, seed + 1, ...
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Output directory; default `reports/sweep/<scenario>[/shard-i-of-n]`.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only the runs numbered i modulo n (`--shard 0/4` .. `3/4`); combine the shards'
        /// outputs with `pacesim merge`.
        #[arg(long)]
        shard: Option<String>,
    },
    /// Combine the outputs of `sweep --shard` runs into the whole sweep's outputs.
    Merge {
        /// Shard output directories (or their runs.jsonl files).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output directory; default `reports/sweep/<scenario>`.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// One live worker process (started by `live`; not for direct use).
    #[command(hide = true)]
    Worker {
        /// The run's id.
        #[arg(long)]
        run: String,
        /// The worker's process id in the scenario.
        #[arg(long)]
        pid: u32,
    },
}

/// Run the CLI; returns the process exit status.
pub fn main_with(cli: Cli) -> i32 {
    match cli.command {
        Command::Run {
            file,
            seed,
            backend,
            trace,
            json,
        } => run(&file, seed, backend.as_deref(), trace.as_deref(), json),
        Command::Check { trace, rate, json } => check(&trace, rate, json),
        Command::Simulate {
            files,
            seeds,
            out,
            json,
        } => simulate(files, seeds, out.as_deref(), json),
        Command::Matrix {
            files,
            cases,
            expected,
            json,
        } => crate::matrix::main(files, cases, expected.as_deref(), json),
        Command::Backends => {
            for b in crate::backend::BACKENDS {
                let tag = if b.defective { " (defective)" } else { "" };
                println!("{:<16} {}{tag}", b.name, b.summary);
            }
            EXIT_PASS
        }
        Command::Live {
            file,
            seed,
            backend,
            trace,
            json,
        } => crate::live::cli_live(&file, seed, backend.as_deref(), trace.as_deref(), json),
        Command::Conform {
            file,
            backend,
            calibrate,
            tolerance,
            json,
        } => crate::live::conform::cli_conform(&file, backend.as_deref(), calibrate, json, tolerance),
        Command::Sweep {
            file,
            grid,
            seeds,
            out,
            shard,
        } => crate::sweep::cli_sweep(&file, &grid, seeds, out.as_deref(), shard.as_deref()),
        Command::Merge { inputs, out } => crate::sweep::cli_merge(&inputs, out.as_deref()),
        Command::Worker { run, pid } => crate::live::worker::main(&run, pid),
    }
}

fn bad(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    EXIT_BAD_INPUT
}

/// Load a scenario and apply `--seed` / `--backend` overrides.
pub fn load(file: &Path, seed: Option<u64>, backend: Option<&str>) -> Result<Scenario, String> {
    let mut sc = Scenario::load(file).map_err(|e: ScenarioError| e.to_string())?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    if let Some(b) = backend {
        sc = sc
            .with_backend(b)
            .map_err(|e| format!("{}: --backend: {e}", file.display()))?;
    }
    Ok(sc)
}

fn run(file: &Path, seed: Option<u64>, backend: Option<&str>, trace: Option<&Path>, json: bool) -> i32 {
    let sc = match load(file, seed, backend) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let out: Option<Box<dyn Write + Send>> = match trace {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some(Box::new(std::io::BufWriter::new(f))),
            Err(e) => return bad(format!("{}: {e}", p.display())),
        },
        None => None,
    };
    let s = match summary::simulate(&sc, out, None) {
        Ok(s) => s,
        Err(e) => return bad(format!("writing trace: {e}")),
    };
    print_summary(&s, json);
    if s.all_pass() { EXIT_PASS } else { EXIT_FAIL }
}

fn check(trace: &Path, rate: Option<f64>, json: bool) -> i32 {
    let f = match std::fs::File::open(trace) {
        Ok(f) => f,
        Err(e) => return bad(format!("{}: {e}", trace.display())),
    };
    let name = trace.display().to_string();
    let reader = std::io::BufReader::new(f);
    let result = match rate {
        None => summary::from_trace(&name, reader),
        Some(r) if r.is_finite() && r > 0.0 => summary::from_trace(&name, RateOverride::new(reader, r)),
        Some(r) => return bad(format!("--rate must be above 0, got {r}")),
    };
    match result {
        Ok(s) => {
            print_summary(&s, json);
            if s.all_pass() { EXIT_PASS } else { EXIT_FAIL }
        }
        Err(e) => bad(e),
    }
}

/// Rewrites the header's rate as the trace streams by (for `check --rate`).
struct RateOverride<R> {
    inner: R,
    rate: f64,
    first: bool,
    buf: Vec<u8>,
    pos: usize,
}

impl<R: std::io::BufRead> RateOverride<R> {
    fn new(inner: R, rate: f64) -> Self {
        RateOverride {
            inner,
            rate,
            first: true,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

impl<R: std::io::BufRead> std::io::Read for RateOverride<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let avail = std::io::BufRead::fill_buf(self)?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for RateOverride<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.inner.read_until(b'\n', &mut self.buf)?;
            if self.first && !self.buf.is_empty() {
                self.first = false;
                if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&self.buf) {
                    v["rate"] = serde_json::json!(self.rate);
                    self.buf = serde_json::to_vec(&v).unwrap_or_default();
                    self.buf.push(b'\n');
                }
            }
        }
        Ok(&self.buf[self.pos..])
    }
    fn consume(&mut self, amt: usize) {
        self.pos += amt;
    }
}

/// Print one run's summary as a short table, or as one JSON object.
pub fn print_summary(s: &Summary, json: bool) {
    if json {
        println!("{}", serde_json::to_string(s).expect("summary serialises"));
        return;
    }
    println!(
        "scenario {}  backend {}  seed {}  processes {}",
        s.scenario, s.backend, s.seed, s.processes
    );
    println!(
        "  fetches {}  starts {:.3}s..{:.3}s  achieved {:.2}/s (ceiling {}/s)",
        s.fetches, s.first_start_s, s.last_start_s, s.achieved_rate, s.rate
    );
    println!(
        "  burst needed: arrivals {}  slots {}  max in 1 s: {} (bound {})  429s {}  503s {}",
        s.burst_needed, s.slot_burst_needed, s.max_window.count, s.max_window.bound, s.status_429, s.status_503
    );
    println!(
        "  reservation ms: mean {:.3} p50 {:.3} p95 {:.3} p99 {:.3}  trace {}",
        s.reservation.mean_ms, s.reservation.p50_ms, s.reservation.p95_ms, s.reservation.p99_ms, s.trace_hash
    );
    for (name, c) in &s.checks {
        println!("  {:<16} {}  {}", name, if c.pass { "pass" } else { "FAIL" }, c.detail);
    }
}

/// The scenario files `simulate` runs by default: `sims/*.toml`, sorted.
pub fn default_scenarios() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("sims")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    v.retain(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("expected"))
    });
    v.sort();
    v
}

fn simulate(files: Vec<PathBuf>, seeds: u64, out: Option<&Path>, json: bool) -> i32 {
    // the command that regenerates the report, for its index
    let mut command = String::from("pacesim simulate");
    for f in &files {
        command.push_str(&format!(" {}", f.display()));
    }
    if seeds > 1 {
        command.push_str(&format!(" --seeds {seeds}"));
    }
    if let Some(dir) = out {
        command.push_str(&format!(" --out {}", dir.display()));
    }
    let files = if files.is_empty() { default_scenarios() } else { files };
    if files.is_empty() {
        return bad("no scenario files (looked in sims/*.toml)");
    }
    let mut scenarios = Vec::new();
    for f in &files {
        match Scenario::load(f) {
            Ok(s) => scenarios.push(s),
            Err(e) => return bad(e),
        }
    }
    let opts = crate::run::compare::Options {
        seeds,
        series: out.is_some(),
        progress: true,
    };
    let all = match crate::run::compare::run_all(&scenarios, opts) {
        Ok(a) => a,
        Err(e) => return bad(e),
    };
    for sr in &all {
        if json {
            for r in &sr.runs {
                println!("{}", serde_json::to_string(&r.row).expect("summary serialises"));
            }
        } else {
            print_table(sr);
        }
    }
    if let Some(dir) = out {
        match crate::report::write(dir, &all, &command) {
            Ok(_) => eprintln!("report: {}", dir.join("index.md").display()),
            Err(e) => return bad(e),
        }
    }
    EXIT_PASS
}

/// Print one scenario's comparison table (and, with several seeds, the table across seeds).
pub fn print_table(sr: &crate::run::compare::ScenarioRuns) {
    let sc = &sr.scenario;
    println!(
        "\n== {} ({} processes, ceiling {}/s, seed {})",
        sc.name, sc.processes.count, sc.pacer.rate, sr.seeds[0]
    );
    print!("{}", crate::report::table::comparison(sr).text());
    if sr.seeds.len() > 1 {
        println!(
            "-- across {} seeds: mean ± 95% CI half-width (Student t)",
            sr.seeds.len()
        );
        print!("{}", crate::report::table::across_seeds(&sr.seed_stats()).text());
    }
}
