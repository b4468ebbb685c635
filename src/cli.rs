//! The command line: `pacesim run | explore | explore-defects | explore-merge | check |
//! simulate | backends | matrix | live | conform | sweep | merge`.
//!
//! Each command is a function that returns a typed result and prints nothing ([`run`],
//! [`matrix::evaluate`], `sweep`, [`live`], [`conform`]); this module runs it, prints the
//! result (tables or JSON on stdout, errors on stderr) and chooses the exit status. No other
//! module prints a command's result or knows an exit status (the hidden `worker` command's
//! process aside: [`live::worker::main`] is that process's whole life).
//!
//! A team's own program is one call: hand your backends to [`main_with_backends`] and every
//! command runs them beside pacesim's (`examples/own-backend/`):
//!
//! ```no_run
//! // in your `main`: your BackendSpec entries (pacesim::registry), then every command
//! let mine: Vec<pacesim::registry::BackendSpec> = Vec::new();
//! std::process::exit(pacesim::cli::main_with_backends(mine));
//! ```

use crate::live::{self, LiveOptions, conform};
use crate::run::{self, compare};
use crate::summary::Summary;
use crate::{junit, matrix, report, sweep};
use clap::{Parser, Subcommand};
use std::fmt::Display;
use std::path::{Path, PathBuf};

/// Exit status when every check passed.
pub const EXIT_PASS: i32 = 0;
/// Exit status when a check failed, or a run did not finish (it stopped making progress: a
/// livelock in the backend under test, [`crate::builder::NoProgress`]).
pub const EXIT_FAIL: i32 = 1;
/// Exit status for bad input (a scenario or trace that cannot be used).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit status when SIGINT stopped a live run (which cleaned up): 128 + SIGINT (SIGTERM gives
/// 143 and SIGHUP 129: [`crate::live::runner::interrupted_status`]).
pub const EXIT_INTERRUPTED: i32 = 130;

/// Simulate and verify pacing (rate-limiting) algorithms shared by many worker processes.
#[derive(Debug, Parser)]
#[command(name = "pacesim", version, about, long_about = None)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Refuse a run whose estimated memory is above this (e.g. 8GiB, 512MiB); default 4GiB.
    #[arg(long, global = true, value_parser = run::budget::parse_size)]
    pub(crate) max_memory: Option<u64>,
    /// Stop (exit 2) a command still running after this wall-clock time (e.g. 10m, 90s); not
    /// for live runs, which end at their scenario's duration and clean up. `explore` stops
    /// itself then, as at its `--time`, and writes its partial report (INCOMPLETE, exit 1).
    #[arg(long, global = true, value_parser = crate::time::parse_duration)]
    pub(crate) max_wall: Option<crate::time::Nanos>,
    /// A check that is not judged (the run lacks the events or facts it needs) fails the
    /// command, exit 1, instead of being reported as `-`: for CI, so missing evidence never
    /// reads as green (`run`, `check`, `live`, `conform`, `simulate`, `matrix`, `sweep`,
    /// `merge`, `explore`, `explore-merge`).
    #[arg(long, global = true)]
    pub require_judged: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// Also write JUnit XML here: one test case per scenario x backend x property, a
        /// failure's message the checker's witness (with the command that reproduces it).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Replay the decisions in this choice file (an `explore` counterexample's
        /// `.choices.json`, or a `--record-choices` file) instead of drawing them.
        #[arg(long, value_name = "CHOICES", conflicts_with = "record_choices")]
        choices: Option<PathBuf>,
        /// Write the run's decisions (every random word, in order) to this choice file.
        #[arg(long, value_name = "CHOICES")]
        record_choices: Option<PathBuf>,
    },
    /// Search a scenario's schedules instead of sampling them (exit 1 on a violation).
    ///
    /// Every latency draw, the order of operations reaching the store at one instant, and
    /// kills at the backend's kill points become choices, walked exhaustively (depth first, states already seen pruned) or by
    /// PCT, random or coverage-guided runs. Every checker judges every schedule; the first
    /// violation is shrunk and, with --out, written as a runnable case. Exit 0: no violation
    /// (the whole tree within the bounds, or every sampled schedule asked for); 1: a violation,
    /// or an exploration stopped before its end by --schedules, --time or --max-memory, or one
    /// that judged no schedule (INCOMPLETE, NOTHING JUDGED: not a pass unless
    /// --allow-incomplete); 2: bad input; 130/143/129: stopped by SIGINT/SIGTERM/SIGHUP (the
    /// partial report, --out files and JUnit written first).
    Explore {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// Override the scenario's backend.
        #[arg(long)]
        backend: Option<String>,
        /// Override the scenario's seed (the draws that are not choices).
        #[arg(long)]
        seed: Option<u64>,
        /// The search: strategy, bounds, budget.
        #[command(flatten)]
        args: Box<ExploreArgs>,
        /// Write the report (JSON, Markdown) and any counterexample (scenario, choices, trace,
        /// rate plot) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Also write JUnit XML here: one test case, failing with the violation.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// Explore every defective cell of the expected matrix (exit 1 if one is not caught).
    ///
    /// Each scenario x backend whose properties must fail: random schedules within small bounds (at most 3 processes x 5
    /// requests), then the scenario's own; only the expected properties count. Prints what
    /// was found after how many schedules and the shrunk case. Exit 1 if a cell is not caught.
    ExploreDefects {
        /// Scenario files; default: every sims/*.toml.
        files: Vec<PathBuf>,
        /// The expected matrix; default tests/expected-matrix.toml.
        #[arg(long)]
        expected: Option<PathBuf>,
        /// Schedules per cell and bound.
        #[arg(long, default_value_t = 200)]
        schedules: u64,
        /// The explorer's seed.
        #[arg(long, default_value_t = 0)]
        search_seed: u64,
        /// Print the cells as one JSON array.
        #[arg(long)]
        json: bool,
        /// Write each cell's report and counterexample here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Combine the reports (`<stem>.json`) of `explore --shard` runs into one verdict with
    /// summed counts.
    ExploreMerge {
        /// The shards' report files.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Print the merged report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Write the merged report here (a directory, as `explore --out`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Exit 0 for a merged exploration that is incomplete or judged nothing (still
        /// reported as such).
        #[arg(long)]
        allow_incomplete: bool,
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
        /// Also write JUnit XML here: one test case per scenario x backend x property, a
        /// failure's message the checker's witness (with the command that reproduces it).
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// List every backend with a one-line summary.
    Backends,
    /// The defect matrix: every scenario x every backend it compares, against every property;
    /// compared with `tests/expected-matrix.toml` (exit 1 on any difference).
    Matrix {
        /// Scenario files; default: every sims/*.toml.
        files: Vec<PathBuf>,
        /// Seeds per run (the scenario's seed, seed + 1, ...); a cell fails if any seed fails.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        cases: u64,
        /// The expected matrix; default `tests/expected-matrix.toml` when it exists.
        #[arg(long)]
        expected: Option<PathBuf>,
        /// Print one JSON object (columns, rows, mismatches) instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write JUnit XML here: one test case per scenario x backend x property, a
        /// failure's message the checker's witness (with the command that reproduces it).
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// Run a scenario for real: worker processes against PostgreSQL / Redis and a local
    /// destination (connection settings: PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
    /// REDIS_URL). Prints the same summary as `run`. The workers are pacesim's own, or your
    /// program (`--worker-cmd`, or `[live] command` in the scenario).
    Live {
        /// Scenario file (sims/*.toml).
        file: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the scenario's backend (see `pacesim backends`); with an external worker,
        /// the design it implements, whose options the checkers read.
        #[arg(long)]
        backend: Option<String>,
        /// Write the trace as JSON Lines to this file.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Run this program as the N workers instead of pacesim's own, e.g. 'python3
        /// my_worker.py' (split into words like a shell, but run without one, in the current
        /// directory; overrides the scenario's `[live] command`). Each copy gets its identity
        /// and targets in PACESIM_* environment variables and fetches PACESIM_DESTINATION_URL
        /// (docs/live.md, "Your own worker program").
        #[arg(long, value_name = "COMMAND")]
        worker_cmd: Option<String>,
        /// Also write JUnit XML here: one test case per property, a failure's message the
        /// checker's witness (with the `pacesim live` command that reproduces it).
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// Run a scenario in simulation and live, and print both side by side (achieved rate,
    /// largest 1 s window, burst, stall after kills, checks), with a tolerance verdict.
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
        #[arg(long, default_value_t = 0.02, value_parser = conform::parse_tolerance, allow_hyphen_values = true)]
        tolerance: f64,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Run this program live instead of pacesim's own workers (as `live --worker-cmd`;
        /// the scenario's `[live] command` is used without it), against the simulator's model
        /// of the scenario's backend.
        #[arg(long, value_name = "COMMAND")]
        worker_cmd: Option<String>,
        /// Also write JUnit XML here: one test case per comparison (the achieved rate, each
        /// check's verdict), failing where live and simulated disagree.
        #[arg(long)]
        junit: Option<PathBuf>,
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
        /// outputs with `pacesim merge`. Without it the shard comes from the scheduler:
        /// JOB_COMPLETION_INDEX (Kubernetes Indexed Job, with `--shards`) or
        /// SLURM_ARRAY_TASK_ID (Slurm array); neither means the whole sweep.
        #[arg(long)]
        shard: Option<String>,
        /// The shard count when the index comes from the scheduler (a Kubernetes Indexed Job's
        /// completions); also `PACESIM_SHARDS`. Slurm arrays give it as SLURM_ARRAY_TASK_COUNT.
        #[arg(long)]
        shards: Option<u64>,
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

/// The whole `pacesim` program with a team's own backends beside pacesim's: a team's crate
/// writes `fn main() { std::process::exit(pacesim::cli::main_with_backends(vec![MY_SPEC])) }`
/// and gets every command for its design ([`crate::registry::register`]). Parses the command
/// line; returns the exit status.
pub fn main_with_backends(backends: Vec<crate::registry::BackendSpec>) -> i32 {
    main_with_checkers(backends, Vec::new())
}

/// [`main_with_backends`], and a team's own checkers judged beside pacesim's on every trace
/// ([`crate::check::register`]).
pub fn main_with_checkers(
    backends: Vec<crate::registry::BackendSpec>,
    checkers: Vec<crate::check::CheckerSpec>,
) -> i32 {
    if let Err(e) = crate::check::register(checkers) {
        return bad(e);
    }
    // a team's own program (backends of its own): its reproducers name it, not `pacesim`
    if !backends.is_empty()
        && let Some(name) = std::env::args_os().next().and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
    {
        crate::summary::set_program(&name);
    }
    if let Err(e) = crate::registry::register(backends) {
        return bad(e);
    }
    use clap::{CommandFactory, FromArgMatches};
    let parsed = Cli::command()
        .version(version())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { EXIT_PASS };
            let _ = e.print();
            return code;
        }
    };
    // `pacesim run FILE | head`: stop quietly when the reader goes, as a Unix filter does (Rust
    // ignores SIGPIPE, so every print would fail and panic instead). Not for the live commands:
    // they write to their workers' pipes and must clean up whatever happens to a reader.
    if !matches!(
        cli.command,
        Command::Live { .. } | Command::Conform { .. } | Command::Worker { .. }
    ) {
        // SAFETY: at start-up, before any other thread exists; restores the default action.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    main_with(cli)
}

/// The commit the binary was built from, when its build said ([`set_build_commit`]).
static BUILD_COMMIT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Name the commit this binary was built from, for `pacesim --version`: `src/main.rs` passes
/// `PACESIM_GIT_COMMIT` as it was at build time (`just wheel` sets it), so a new commit
/// recompiles the binary's `main.rs` alone, not the library.
pub fn set_build_commit(commit: &str) {
    let commit = commit.trim();
    if !commit.is_empty() {
        let _ = BUILD_COMMIT.set(commit.to_string());
    }
}

/// `pacesim --version`'s text after the name: Cargo.toml's version, and the commit when the
/// build named it (`0.1.0 (commit 26ff831c0a1b)`).
pub fn version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| match BUILD_COMMIT.get() {
        Some(c) => format!("{} (commit {c})", env!("CARGO_PKG_VERSION")),
        None => env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// How long past `--max-wall` the watchdog lets an exploration write its partial report
/// (it stops itself at `--max-wall`), nanoseconds.
const EXPLORE_GRACE: u64 = 30_000_000_000;

/// Run the CLI; returns the process exit status.
pub(crate) fn main_with(cli: Cli) -> i32 {
    if let Some(m) = cli.max_memory {
        run::budget::set_limit(m);
    }
    if cli.max_wall.is_some() && matches!(cli.command, Command::Live { .. } | Command::Conform { .. }) {
        // a live run ends at its scenario's duration and must clean up (workers, schema, keys):
        // a watchdog's exit would skip that
        return bad("--max-wall does not apply to live runs: they end at the scenario's duration and clean up");
    }
    if cli.max_wall.is_some_and(|w| w.0 == 0) {
        return bad("--max-wall must be above 0 (it is how long the command may run)");
    }
    // an exploration stops itself at --max-wall as at --time, and writes its partial report
    // (INCOMPLETE); the watchdog gives it a grace period for that
    let exploring = matches!(cli.command, Command::Explore { .. });
    if let Some(w) = cli.max_wall {
        // a watchdog: the run itself cannot be interrupted part way, the process can
        let grace = if exploring { EXPLORE_GRACE } else { 0 };
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_nanos(w.0.saturating_add(grace)));
            eprintln!("error: --max-wall {w}: still running after {w} of wall-clock time; stopped");
            std::process::exit(EXIT_BAD_INPUT);
        });
    }
    let require_judged = cli.require_judged;
    // nothing runs that would write over one of its own inputs
    let (inputs, outputs) = paths_of(&cli.command);
    if let Err(e) = refuse_overwrite(&inputs, &outputs) {
        return bad(e);
    }
    match cli.command {
        Command::Run {
            file,
            seed,
            backend,
            trace,
            json,
            junit,
            choices,
            record_choices,
        } => match run::one_with(
            &file,
            seed,
            backend.as_deref(),
            trace.as_deref(),
            match (&choices, &record_choices) {
                (Some(c), _) => run::Choices::Replay(c),
                (None, Some(r)) => run::Choices::Record(r),
                (None, None) => run::Choices::Seeded,
            },
        ) {
            Ok(s) => {
                // (a run replayed from a choice file is reproduced by replaying it again)
                let again = |f: &Path, s: &Summary| run_reproduce(f, s.seed, &s.backend, choices.as_deref());
                if let Some(j) = &junit
                    && let Err(e) = junit::write(j, &junit::from_summaries_with([(file.as_path(), &s)], again))
                {
                    return bad(format!("{}: {e}", j.display()));
                }
                print_summary_reproducing(&s, (!s.all_pass()).then(|| again(&file, &s)), json);
                verdict_status(&s, require_judged)
            }
            Err(mut e) => {
                if let (Some(c), run::RunError::NoProgress { reproduce, .. }) = (&choices, &mut e) {
                    reproduce.push_str(&format!(" --choices {}", shell_word(c)));
                }
                run_error(e)
            }
        },
        Command::Explore {
            file,
            backend,
            seed,
            mut args,
            out,
            json,
            junit,
        } => explore(
            &file,
            backend.as_deref(),
            seed,
            {
                if let Some(w) = cli.max_wall {
                    args.time = Some(args.time.map_or(w, |t| crate::time::Nanos(t.0.min(w.0))));
                }
                *args
            },
            Outputs {
                out: out.as_deref(),
                json,
                junit: junit.as_deref(),
                require_judged,
            },
        ),
        Command::ExploreDefects {
            files,
            expected,
            schedules,
            search_seed,
            json,
            out,
        } => explore_defects(files, expected.as_deref(), schedules, search_seed, json, out.as_deref()),
        Command::ExploreMerge {
            reports,
            json,
            out,
            allow_incomplete,
        } => explore_merge(
            &reports,
            Outputs {
                out: out.as_deref(),
                json,
                junit: None,
                require_judged,
            },
            allow_incomplete,
        ),
        Command::Check { trace, rate, json } => summary_status(run::check(&trace, rate), json, require_judged),
        Command::Simulate {
            files,
            seeds,
            out,
            json,
            junit,
        } => simulate(files, seeds, out.as_deref(), json, junit.as_deref(), require_judged),
        Command::Matrix {
            files,
            cases,
            expected,
            json,
            junit,
        } => match matrix::evaluate(files, cases, expected.as_deref()) {
            Ok(o) => {
                if let Some(j) = &junit
                    && let Err(e) = junit::write(j, &matrix::junit_cases(&o.matrix))
                {
                    return bad(format!("{}: {e}", j.display()));
                }
                print_matrix(&o, json);
                let unjudged = o.matrix.not_judged();
                if require_judged && !unjudged.is_empty() {
                    eprintln!("not judged (--require-judged): {}", unjudged.join(", "));
                    return EXIT_FAIL;
                }
                status(o.matches())
            }
            Err(e) => bad(e),
        },
        Command::Backends => {
            for b in crate::registry::all() {
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
            worker_cmd,
            junit,
        } => match crate::run::live::run_file(
            &file,
            seed,
            backend.as_deref(),
            trace.as_deref(),
            worker_cmd.as_deref(),
            &live_options(json),
        ) {
            Ok(r) => {
                if let Some(j) = &junit {
                    let cases = junit::from_summaries_with([(file.as_path(), &r.summary)], |f, s| {
                        live_reproduce(f, s.seed, backend.as_deref(), worker_cmd.as_deref())
                    });
                    if let Err(e) = junit::write(j, &cases) {
                        return bad(format!("{}: {e}", j.display()));
                    }
                }
                // the command that runs it again, always: a live run is not replayed by its seed
                print_summary_reproducing(
                    &r.summary,
                    Some(live_reproduce(
                        &file,
                        r.summary.seed,
                        backend.as_deref(),
                        worker_cmd.as_deref(),
                    )),
                    json,
                );
                for n in &r.notes {
                    eprintln!("note: {n}");
                }
                verdict_status(&r.summary, require_judged)
            }
            Err(e) => live_failed(e),
        },
        Command::Conform {
            file,
            backend,
            calibrate,
            tolerance,
            json,
            worker_cmd,
            junit,
        } => match crate::run::live::conform_file(
            &file,
            backend.as_deref(),
            calibrate,
            worker_cmd.as_deref(),
            &live_options(json),
        ) {
            Ok(c) => {
                if json {
                    println!("{}", serde_json::to_string(&c).expect("conformance serialises"));
                } else {
                    print!("{}", conform::table(&c));
                }
                let differ = c.disagreements(tolerance);
                if let Some(j) = &junit
                    && let Err(e) = junit::write(
                        j,
                        &conform_cases(
                            &c,
                            &differ,
                            &conform_reproduce(&file, backend.as_deref(), tolerance, worker_cmd.as_deref()),
                        ),
                    )
                {
                    return bad(format!("{}: {e}", j.display()));
                }
                for d in &differ {
                    eprintln!("conform: {d}");
                }
                conform_status(&c, &differ, require_judged)
            }
            Err(e) => live_failed(e),
        },
        Command::Sweep {
            file,
            grid,
            seeds,
            out,
            shard,
            shards,
        } => match sweep::sweep_file(&file, &grid, seeds, out.as_deref(), shard.as_deref(), shards) {
            Ok(s) => {
                match s.manifest.shard {
                    Some(sh) => println!(
                        "shard {}/{} (from {}): {} of {} runs written to {} (combine the shards with `pacesim merge`)",
                        sh.index,
                        sh.count,
                        s.shard_from.unwrap_or("--shard"),
                        s.rows.len(),
                        s.manifest.runs,
                        s.dir.display()
                    ),
                    None => {
                        print!("{}", s.table());
                        println!("\nwritten to {}", s.dir.display());
                    }
                }
                sweep_status(&s, require_judged)
            }
            Err(e) => bad(e),
        },
        Command::Merge { ref inputs, .. } if let Some(missing) = inputs.iter().find(|p| !p.exists()) => bad(format!(
            "{}: no such shard directory (give `sweep --shard` output directories, or their runs.jsonl files)",
            missing.display()
        )),
        Command::Merge { inputs, out } => match sweep::merge_files(&inputs, out.as_deref()) {
            Ok(s) => {
                print!("{}", s.table());
                println!("\nmerged {} inputs into {}", inputs.len(), s.dir.display());
                sweep_status(&s, require_judged)
            }
            Err(e) => bad(e),
        },
        Command::Worker { run, pid } => live::worker::main(&run, pid, &crate::registry::Registered),
    }
}

/// A path a command writes: one file, or files in a directory.
#[derive(Clone, Copy, Debug)]
enum Output<'a> {
    /// A file (`--trace`, `--junit`, `--record-choices`), named by its flag.
    File(&'static str, &'a Path),
    /// A directory (`--out`), named by its flag, and which of its files the command writes.
    Dir(&'static str, &'a Path, Writes),
}

/// Which files of an output directory a command writes.
#[derive(Clone, Copy, Debug)]
enum Writes {
    /// `explore`'s: `<stem>.json`, `.md`, `.case.toml`, `.choices.json`, `.trace.jsonl`,
    /// `<stem>-rate.svg` / `.png`.
    Explore,
    /// `simulate`'s: `index.md`, and in each scenario's directory its plots and `summary.json`.
    Report,
    /// `sweep`'s and `merge`'s: `sweep.json`, `runs.csv`, `runs.jsonl`, `summary.csv`.
    Sweep,
}

impl Writes {
    /// Does the command write the file `name` of its output directory (`nested`: in one of its
    /// subdirectories)?
    fn writes(self, name: &str, nested: bool) -> bool {
        match self {
            Writes::Explore => {
                !nested
                    && [".json", ".md", ".case.toml", ".trace.jsonl", "-rate.svg", "-rate.png"]
                        .iter()
                        .any(|x| name.ends_with(x))
            }
            Writes::Report if nested => [".json", ".md", ".svg", ".png"].iter().any(|x| name.ends_with(x)),
            Writes::Report => name == "index.md",
            Writes::Sweep => !nested && sweep::WRITES.contains(&name),
        }
    }
}

/// The files a command reads and the paths it writes (as the command line gives them; an
/// output left to its default is under `reports/`).
fn paths_of(cmd: &Command) -> (Vec<PathBuf>, Vec<Output<'_>>) {
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut outputs = Vec::new();
    fn file<'a>(flag: &'static str, p: &'a Option<PathBuf>) -> Option<Output<'a>> {
        p.as_deref().map(|p| Output::File(flag, p))
    }
    fn dir(p: &Option<PathBuf>, w: Writes) -> Option<Output<'_>> {
        p.as_deref().map(|p| Output::Dir("--out", p, w))
    }
    // no files: every sims/*.toml
    let or_default = |files: &[PathBuf]| {
        if files.is_empty() {
            run::default_scenarios()
        } else {
            files.to_vec()
        }
    };
    // no --expected: the matrix's own
    let expected_or_default = |e: &Option<PathBuf>| e.clone().unwrap_or_else(|| crate::matrix::DEFAULT_EXPECTED.into());
    match cmd {
        Command::Run {
            file: f,
            trace,
            junit,
            choices,
            record_choices,
            ..
        } => {
            inputs.push(f.clone());
            inputs.extend(choices.clone());
            outputs.extend(file("--trace", trace));
            outputs.extend(file("--junit", junit));
            outputs.extend(file("--record-choices", record_choices));
        }
        Command::Explore {
            file: f, out, junit, ..
        } => {
            inputs.push(f.clone());
            outputs.extend(dir(out, Writes::Explore));
            outputs.extend(file("--junit", junit));
        }
        Command::ExploreDefects {
            files, expected, out, ..
        } => {
            inputs.extend(or_default(files));
            inputs.push(expected_or_default(expected));
            outputs.extend(dir(out, Writes::Explore));
        }
        Command::ExploreMerge { reports, out, .. } => {
            inputs.extend(reports.iter().cloned());
            outputs.extend(dir(out, Writes::Explore));
        }
        Command::Check { trace, .. } => inputs.push(trace.clone()),
        Command::Simulate { files, out, junit, .. } => {
            inputs.extend(or_default(files));
            outputs.extend(dir(out, Writes::Report));
            outputs.extend(file("--junit", junit));
        }
        Command::Matrix {
            files, expected, junit, ..
        } => {
            inputs.extend(or_default(files));
            inputs.push(expected_or_default(expected));
            outputs.extend(file("--junit", junit));
        }
        Command::Live {
            file: f,
            trace,
            worker_cmd,
            junit,
            ..
        } => {
            inputs.push(f.clone());
            inputs.extend(live_inputs(f, worker_cmd.as_deref()));
            outputs.extend(file("--trace", trace));
            outputs.extend(file("--junit", junit));
        }
        Command::Conform {
            file: f,
            worker_cmd,
            junit,
            ..
        } => {
            inputs.push(f.clone());
            inputs.extend(live_inputs(f, worker_cmd.as_deref()));
            outputs.extend(file("--junit", junit));
        }
        Command::Sweep { file: f, out, .. } => {
            inputs.push(f.clone());
            outputs.extend(dir(out, Writes::Sweep));
        }
        Command::Merge { inputs: shards, out } => {
            // a shard is its directory's `sweep.json` and `runs.jsonl`
            for s in shards {
                let d = if s.is_dir() {
                    s.as_path()
                } else {
                    s.parent().unwrap_or(Path::new("."))
                };
                inputs.extend([d.join("sweep.json"), d.join("runs.jsonl")]);
            }
            outputs.extend(dir(out, Writes::Sweep));
        }
        Command::Backends | Command::Worker { .. } => {}
    }
    (inputs, outputs)
}

/// The files a live run reads besides its scenario: the words of its worker command
/// (`--worker-cmd`, relative to the current directory, or `[live] command`) and of `[live]
/// setup` (relative to the scenario's directory) that name files.
fn live_inputs(scenario: &Path, worker_cmd: Option<&str>) -> Vec<PathBuf> {
    let mut words: Vec<PathBuf> = worker_cmd
        .map(|c| {
            c.split_whitespace()
                .map(|w| PathBuf::from(w.trim_matches(['\'', '"'])))
                .collect()
        })
        .unwrap_or_default();
    let base = scenario.parent().unwrap_or(Path::new("."));
    let table = crate::scenario::read_bounded(scenario)
        .ok()
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok());
    if let Some(live) = table
        .as_ref()
        .and_then(|t| t.get("live"))
        .and_then(toml::Value::as_table)
    {
        for key in ["command", "setup"] {
            let strings: Vec<&str> = match live.get(key) {
                Some(toml::Value::String(s)) => vec![s.as_str()],
                Some(toml::Value::Array(a)) => a.iter().filter_map(toml::Value::as_str).collect(),
                _ => Vec::new(),
            };
            words.extend(strings.into_iter().map(|w| base.join(w)));
        }
    }
    words.retain(|w| w.is_file());
    words
}

/// A file's identity: its device and inode (a symbolic link followed), when it exists.
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuse a command one of whose `outputs` is one of its `inputs`: the same file by identity
/// (device and inode), so also through a symbolic or a hard link. A directory output is
/// compared by the files in it the command would write. Writing it would destroy the input
/// (`run x.toml --record-choices x.toml` would overwrite the scenario).
fn refuse_overwrite(inputs: &[PathBuf], outputs: &[Output<'_>]) -> Result<(), String> {
    let ids: Vec<((u64, u64), &Path)> = inputs
        .iter()
        .filter_map(|p| identity(p).map(|id| (id, p.as_path())))
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let clash = |flag: &str, written: &Path| -> Result<(), String> {
        let Some(id) = identity(written) else { return Ok(()) };
        match ids.iter().find(|(i, _)| *i == id) {
            Some((_, input)) => Err(format!(
                "{flag} {}: that is the input {} (the same file): writing it would overwrite the input; \
                 choose another path",
                written.display(),
                input.display()
            )),
            None => Ok(()),
        }
    };
    for o in outputs {
        match *o {
            Output::File(flag, p) => clash(flag, p)?,
            Output::Dir(flag, d, w) => {
                clash(flag, d)?;
                let Ok(entries) = std::fs::read_dir(d) else { continue };
                for e in entries.flatten() {
                    let p = e.path();
                    let name = e.file_name().to_string_lossy().into_owned();
                    if p.is_dir() {
                        for n in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                            if w.writes(&n.file_name().to_string_lossy(), true) {
                                clash(flag, &n.path())?;
                            }
                        }
                    } else if w.writes(&name, false) {
                        clash(flag, &p)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Print an error; the bad-input status.
fn bad(msg: impl Display) -> i32 {
    eprintln!("error: {}", terminal_safe(&msg.to_string(), true));
    EXIT_BAD_INPUT
}

/// Print why a run did not finish; the failed status, as for a failed check (the input was
/// fine: the backend under test stopped making progress).
fn failed(msg: impl Display) -> i32 {
    eprintln!("error: {}", terminal_safe(&msg.to_string(), true));
    EXIT_FAIL
}

/// The exit status `run` and `check` give for `e`: [`EXIT_FAIL`] when the run did not finish
/// ([`run::RunError::is_failed_run`]), else [`EXIT_BAD_INPUT`].
pub fn run_error_status(e: &run::RunError) -> i32 {
    if e.is_failed_run() { EXIT_FAIL } else { EXIT_BAD_INPUT }
}

/// `explore`'s search options.
#[derive(Debug, clap::Args)]
pub(crate) struct ExploreArgs {
    /// exhaustive, pct, random or coverage.
    #[arg(long, default_value = "exhaustive")]
    strategy: String,
    /// pct: the bug depth its bound is stated for.
    #[arg(long, default_value_t = 3)]
    depth: u32,
    /// Run this many processes instead of the scenario's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    processes: Option<u32>,
    /// Each process makes this many requests instead of the scenario's (at most 2^63 - 1, a
    /// scenario file's range).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    requests: Option<u64>,
    /// The quantiles a varied distribution's draw chooses among.
    #[arg(long, default_value = "0.01,0.5,0.99")]
    values: String,
    /// The distributions whose draws are choices (the others are held at their medians):
    /// store.latency, store.service, store.commit, processes.think, processes.start,
    /// fetch.duration, destination.latency; `none` for none.
    #[arg(long, default_value = "store.latency,store.service")]
    vary: String,
    /// At most this many kills, each at any of the backend's kill points.
    #[arg(long, default_value_t = 0)]
    kills: u32,
    /// The kill points a kill may fire at (default: every point the backend reaches).
    #[arg(long)]
    kill_points: Option<String>,
    /// A killed process restarts after this long (`never`: it stays dead).
    #[arg(long, default_value = "1s")]
    restart_after: String,
    /// Which network hops are choices: `permission` (the hops to the store of operations
    /// that ask for permission or complete such a request: where processes race), `racing`
    /// (those, only while another operation is on its way to the store or there), `sent`
    /// (every hop to the store) or `all` (both ways); the others take their medians.
    #[arg(long, default_value = "permission")]
    hops: String,
    /// The most operations reaching the store at one instant whose order is a choice.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=8))]
    order_width: u32,
    /// Stop after this many schedules (default: 1000000 exhaustive, 10000 otherwise).
    /// Exhaustive: a tree not explored to its end by then is INCOMPLETE (exit 1).
    #[arg(long)]
    schedules: Option<u64>,
    /// Stop after this long (e.g. 60s), inside a run too. Exhaustive: a tree not explored to
    /// its end by then is INCOMPLETE (exit 1).
    #[arg(long, value_parser = crate::time::parse_duration)]
    time: Option<crate::time::Nanos>,
    /// Exit 0 for an exploration stopped before its end by --schedules, --time or
    /// --max-memory, or one that judged no schedule (it is still reported as INCOMPLETE or
    /// NOTHING JUDGED, and JUnit skips it). A violation is exit 1 and a signal 128 + its
    /// number all the same.
    #[arg(long)]
    allow_incomplete: bool,
    /// The explorer's own seed (pct, random, coverage).
    #[arg(long, default_value_t = 0)]
    search_seed: u64,
    /// Explore only slice i of n of the tree (exhaustive), or with seeds of its own
    /// (others); merge the shards' reports with `explore-merge`. Without it, the shard
    /// comes from the scheduler as for `sweep` (JOB_COMPLETION_INDEX with --shards,
    /// SLURM_ARRAY_TASK_ID).
    #[arg(long)]
    shard: Option<String>,
    /// The shard count when the index comes from the scheduler.
    #[arg(long)]
    shards: Option<u64>,
    /// Threads an exhaustive search walks its tree on, sharing one table of seen states
    /// (default: every core; 1: one thread, the tree in order). The verdict and any
    /// counterexample are the one-thread search's; the counts of schedules and states vary
    /// with the threads' timing. Other strategies use one thread.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Judge every schedule in full, even at states already seen.
    #[arg(long)]
    no_prune: bool,
    /// Replay every run from its start rather than go on from the world an earlier run saved
    /// where their decisions part: the same schedules, states and verdict, slower (a check of
    /// the saving, docs/explore.md).
    #[arg(long)]
    replay: bool,
    /// Keep states that differ only in which process is which apart (symmetry reduction is
    /// on by default where the scenario and the backend allow it: the report says; the same
    /// verdict, more states; docs/explore.md).
    #[arg(long)]
    no_symmetry: bool,
    /// Report the violation as found, unshrunk.
    #[arg(long)]
    no_shrink: bool,
    /// Only these checks count as violations (comma-separated; default: all).
    #[arg(long)]
    checks: Option<String>,
}

impl ExploreArgs {
    /// The explorer's options, or what is wrong with them.
    fn options(self) -> Result<crate::explore::Options, String> {
        use crate::explore::{Method, Options, Site};
        let method = match self.strategy.as_str() {
            "exhaustive" => Method::Exhaustive,
            "pct" => Method::Pct { depth: self.depth },
            "random" => Method::Random,
            "coverage" => Method::Coverage,
            other => {
                return Err(format!(
                    "--strategy: `{other}` is not one of exhaustive, pct, random, coverage"
                ));
            }
        };
        let list = |s: &str| -> Vec<String> {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        };
        let quantiles = list(&self.values)
            .iter()
            .map(|v| match v.parse::<f64>() {
                Ok(q) if q > 0.0 && q < 1.0 => Ok(q),
                _ => Err(format!("--values: `{v}` is not a quantile strictly between 0 and 1")),
            })
            .collect::<Result<Vec<f64>, String>>()?;
        if quantiles.is_empty() {
            return Err("--values: give at least one quantile".into());
        }
        let vary = if self.vary.trim() == "none" {
            Vec::new()
        } else {
            list(&self.vary)
                .iter()
                .map(|v| {
                    Site::parse(v).ok_or_else(|| {
                        let all: Vec<&str> = Site::ALL.iter().map(|s| s.name()).collect();
                        format!("--vary: `{v}` is not one of {}", all.join(", "))
                    })
                })
                .collect::<Result<Vec<Site>, String>>()?
        };
        let restart_after = match self.restart_after.trim() {
            "never" => None,
            d => Some(
                crate::time::parse_duration(d)
                    .map_err(|e| format!("--restart-after: {e}"))?
                    .0,
            ),
        };
        let resolved = crate::sweep::Shard::resolve(self.shard.as_deref(), self.shards, &|k| std::env::var(k).ok())
            .map_err(|e| e.to_string())?;
        let shard = resolved.map(|(s, _)| (s.index, s.count));
        // (a shard the command line did not name: the report says where it came from)
        let shard_from = resolved
            .map(|(_, from)| from)
            .filter(|f| *f != "--shard")
            .map(String::from);
        let sampled = method != Method::Exhaustive;
        let checks = self.checks.as_deref().map(list).unwrap_or_default();
        let known = crate::check::names();
        if let Some(c) = checks.iter().find(|c| !known.contains(&c.as_str())) {
            return Err(format!("--checks: no check `{c}` (one of {})", known.join(", ")));
        }
        Ok(Options {
            method,
            processes: self.processes,
            requests: self.requests,
            vary,
            bounds: crate::choice::Bounds {
                quantiles,
                kills: self.kills,
                kill_points: self
                    .kill_points
                    .as_deref()
                    .map(list)
                    .unwrap_or_default()
                    .iter()
                    .map(|n| crate::fault::KillPoint::parse(n).map_err(|e| format!("--kill-points: {e}")))
                    .collect::<Result<_, _>>()?,
                restart_after,
                order_width: self.order_width,
                hops: match self.hops.as_str() {
                    "permission" => crate::choice::Hops::Permission,
                    "racing" => crate::choice::Hops::Racing,
                    "sent" => crate::choice::Hops::Sent,
                    "all" => crate::choice::Hops::All,
                    other => return Err(format!("--hops: `{other}` is not one of permission, racing, sent, all")),
                },
            },
            schedules: Some(self.schedules.unwrap_or(if sampled { 10_000 } else { 1_000_000 })),
            time: self.time.map(|t| std::time::Duration::from_nanos(t.0)),
            // (each shard of a sampled search its own seeds)
            seed: self.search_seed ^ shard.map_or(0, |s| crate::rng::mix64(s.0 + 1)),
            shard,
            prune: !self.no_prune,
            checks,
            shrink: !self.no_shrink,
            shrink_runs: crate::explore::shrink::MAX_RUNS,
            shard_from,
            interrupt: Some(&crate::explore::INTERRUPT),
            threads: self.threads.map_or_else(
                || std::thread::available_parallelism().map_or(1, usize::from),
                |t| t as usize,
            ),
            more_checkers: Vec::new(),
            every_check: false,
            replay: self.replay,
            symmetry: !self.no_symmetry,
        })
    }
}

/// Where an exploration's report goes, and how its status is judged.
#[derive(Copy, Clone, Debug)]
struct Outputs<'a> {
    out: Option<&'a Path>,
    json: bool,
    junit: Option<&'a Path>,
    require_judged: bool,
}

/// The `explore` command's handler of SIGINT, SIGTERM and SIGHUP: the explorer stops at its
/// next check and the command writes what it explored; a second signal ends the process at
/// once (the default action, restored here).
extern "C" fn stop_exploring(n: libc::c_int) {
    crate::explore::INTERRUPT.store(n, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: signal(2) is async-signal-safe; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(n, libc::SIG_DFL);
    }
}

/// Catch SIGINT, SIGTERM and SIGHUP for an exploration ([`stop_exploring`]).
fn catch_stop_signals() {
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic and calls signal(2), both
        // async-signal-safe.
        unsafe {
            libc::signal(s, stop_exploring as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}

/// `pacesim explore`.
fn explore(file: &Path, backend: Option<&str>, seed: Option<u64>, args: ExploreArgs, to: Outputs) -> i32 {
    let allow_incomplete = args.allow_incomplete;
    let opts = match args.options() {
        Ok(o) => o,
        Err(e) => return bad(e),
    };
    if let (Some((i, n)), Some(from)) = (opts.shard, &opts.shard_from) {
        eprintln!("explore: shard {i}/{n}, from {from} (the scheduler's environment; --shard i/n names one)");
    }
    catch_stop_signals();
    let show = std::io::IsTerminal::is_terminal(&std::io::stderr());
    eprintln!(
        "explore: {} ({}): started; SIGINT (Ctrl-C) or SIGTERM stops it and writes what was explored",
        file.display(),
        opts.method.name()
    );
    let mut progress = |p: &crate::explore::Progress| {
        if show {
            eprint!(
                "\rexplore: {} schedules, {} states, {} pruned, depth {}, {:.0}/s   ",
                p.schedules,
                p.states,
                p.pruned,
                p.depth,
                p.schedules as f64 / p.seconds.max(1e-9)
            );
        }
    };
    let (report, _) = match crate::explore::from_file(file, backend, seed, &opts, &mut progress) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    if show {
        eprint!("\r\x1b[K");
    }
    explore_outputs(&report, to, allow_incomplete)
}

/// Print an exploration's report (and write its files); its exit status: 1 for a violation,
/// 128 + the signal's number when one stopped it, 1 for an exploration incomplete or that
/// judged nothing (unless `allow_incomplete`) and, with `--require-judged`, for a check no
/// schedule judged; else 0.
fn explore_outputs(report: &crate::explore::Report, to: Outputs, allow_incomplete: bool) -> i32 {
    use crate::explore::{Outcome, Stopped};
    let outcome = report.outcome();
    let unjudged = to.require_judged && !report.not_judged.is_empty();
    if let Some(dir) = to.out {
        match crate::explore::write(dir, report) {
            Ok(files) => {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            }
            Err(e) => return bad(e),
        }
    }
    if let Some(j) = to.junit {
        let stem = crate::explore::stem(report);
        let case = junit::Case {
            scenario: format!("explore {}", report.scenario),
            backend: report.backend.clone(),
            property: format!("explore ({})", report.method.name()),
            outcome: match (&report.counterexample, outcome) {
                (Some(c), _) => junit::CaseOutcome::Fail {
                    witness: format!("{}: {}", c.violation.check, c.violation.detail),
                    reproduce: format!(
                        "{} run {stem}.case.toml --choices {stem}.choices.json (files written by explore --out)",
                        crate::summary::program()
                    ),
                },
                (None, Outcome::Incomplete(_) | Outcome::Nothing) => junit::CaseOutcome::NotJudged {
                    needs: report.verdict(),
                },
                (None, _) if unjudged => junit::CaseOutcome::NotJudged {
                    needs: format!("not judged (--require-judged): {}", report.not_judged.join(", ")),
                },
                (None, _) => junit::CaseOutcome::Pass,
            },
        };
        if let Err(e) = junit::write(j, &[case]) {
            return bad(format!("{}: {e}", j.display()));
        }
    }
    if to.json {
        match serde_json::to_string(report) {
            Ok(s) => println!("{s}"),
            Err(e) => return bad(e),
        }
    } else {
        print!("{}", crate::explore::markdown(report));
    }
    if let Some(Stopped::Signal(n)) = report.stopped {
        eprintln!(
            "explore: stopped by {}: the report above is partial",
            crate::explore::signal_name(n)
        );
        return 128 + n;
    }
    match outcome {
        Outcome::Violation => return EXIT_FAIL,
        Outcome::Incomplete(_) | Outcome::Nothing if !allow_incomplete => {
            eprintln!(
                "explore: {} (--allow-incomplete to exit 0 all the same)",
                if outcome == Outcome::Nothing {
                    "nothing judged: not a pass"
                } else {
                    "incomplete: not a pass"
                }
            );
            return EXIT_FAIL;
        }
        _ => {}
    }
    if unjudged {
        eprintln!("not judged (--require-judged): {}", report.not_judged.join(", "));
        return EXIT_FAIL;
    }
    EXIT_PASS
}

/// `pacesim explore-defects`.
fn explore_defects(
    files: Vec<PathBuf>,
    expected: Option<&Path>,
    schedules: u64,
    seed: u64,
    json: bool,
    out: Option<&Path>,
) -> i32 {
    let files = if files.is_empty() {
        crate::run::default_scenarios()
    } else {
        files
    };
    let path = expected.unwrap_or(Path::new(crate::matrix::DEFAULT_EXPECTED));
    let exp = match crate::matrix::load_expected(path) {
        Ok(e) => e,
        Err(e) => return bad(e),
    };
    let opts = crate::explore::Options {
        schedules: Some(schedules),
        seed,
        ..crate::explore::defects::default_options()
    };
    let show = !json;
    let cells = match crate::explore::defects::explore_all(&files, &exp, &opts, &[], &mut |c| {
        if show {
            eprintln!("{}", c.line());
        }
    }) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    if let Some(dir) = out {
        for c in &cells {
            if let Err(e) = crate::explore::write(dir, &c.report) {
                return bad(e);
            }
        }
    }
    if json {
        match serde_json::to_string(&cells) {
            Ok(s) => println!("{s}"),
            Err(e) => return bad(e),
        }
    } else {
        let caught = cells.iter().filter(|c| c.caught()).count();
        print!("{}", crate::explore::defects::table(&cells));
        println!("\n{caught} of {} defective cells caught", cells.len());
    }
    if cells.iter().all(|c| c.caught()) {
        EXIT_PASS
    } else {
        EXIT_FAIL
    }
}

/// `pacesim explore-merge`.
fn explore_merge(files: &[PathBuf], to: Outputs, allow_incomplete: bool) -> i32 {
    let mut reports = Vec::new();
    for f in files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => return bad(format!("{}: {e}", f.display())),
        };
        match serde_json::from_str::<crate::explore::Report>(&text) {
            Ok(r) => reports.push(r),
            Err(e) => {
                return bad(format!(
                    "{}:{}:{}: not an explore report: {e}",
                    f.display(),
                    e.line(),
                    e.column()
                ));
            }
        }
    }
    match crate::explore::merge(&reports) {
        Ok(m) => explore_outputs(&m, to, allow_incomplete),
        Err(e) => bad(e),
    }
}

/// Print a `run` or `check` error (and, for a run that did not finish, the command that
/// reproduces it); its status ([`run_error_status`]).
fn run_error(e: run::RunError) -> i32 {
    let code = run_error_status(&e);
    eprintln!("error: {}", terminal_safe(&e.to_string(), true));
    if let run::RunError::NoProgress { reproduce, .. } = &e {
        eprintln!("reproduce: {}", terminal_safe(reproduce, false));
    }
    code
}

/// `s` with its control characters (an escape sequence that would recolour, retitle or clear
/// the terminal, a carriage return that would overwrite the line) written as `\u{1b}`:
/// text from a trace or a scenario file reaches the terminal inert. Newlines and tabs stay
/// when `lines` (a multi-line message pacesim wrote).
pub(crate) fn terminal_safe(s: &str, lines: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && !(lines && (c == '\n' || c == '\t'));
    if !s.chars().any(unsafe_char) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// The status of a command that ran: pass or fail.
fn status(pass: bool) -> i32 {
    if pass { EXIT_PASS } else { EXIT_FAIL }
}

/// The status of a run's summary: 1 when a check failed, or (`require_judged`) when a check
/// was not judged, naming those on stderr; else 0.
fn verdict_status(s: &Summary, require_judged: bool) -> i32 {
    if require_judged && !s.all_judged() {
        eprintln!("not judged (--require-judged): {}", s.not_judged().join(", "));
        return EXIT_FAIL;
    }
    status(s.all_pass())
}

/// `sweep` and `merge`: exit 0 whatever the verdicts (a sweep measures; its rows say pass, the
/// failing checks and those not judged), except that with `require_judged` a run with a check
/// not judged is exit 1, naming the runs and checks.
fn sweep_status(s: &sweep::Swept, require_judged: bool) -> i32 {
    let unjudged = s.not_judged();
    if require_judged && !unjudged.is_empty() {
        eprintln!("not judged (--require-judged): {}", unjudged.join("; "));
        return EXIT_FAIL;
    }
    EXIT_PASS
}

/// The checks not judged in a conformance run, each as `simulated <check>` or `live <check>`.
fn conform_not_judged(c: &conform::Conformance) -> Vec<String> {
    let side = |what: &str, s: &Summary| {
        s.not_judged()
            .into_iter()
            .map(|k| format!("{what} {k}"))
            .collect::<Vec<_>>()
    };
    let mut out = side("simulated", &c.sim);
    out.extend(side("live", &c.live));
    out
}

/// `conform`: 1 when the two runs differ (`differ`, [`conform::Conformance::disagreements`]),
/// or (`require_judged`) when a check was not judged on either side, naming those on stderr;
/// else 0. (A check not judged on one side is not compared: without `--require-judged` it is
/// no disagreement.)
fn conform_status(c: &conform::Conformance, differ: &[String], require_judged: bool) -> i32 {
    let unjudged = conform_not_judged(c);
    if require_judged && !unjudged.is_empty() {
        eprintln!("not judged (--require-judged): {}", unjudged.join(", "));
        return EXIT_FAIL;
    }
    status(differ.is_empty())
}

/// `check`: print the summary; pass when no check failed (and, with `require_judged`, every
/// check judged).
fn summary_status(result: Result<Summary, run::RunError>, json: bool, require_judged: bool) -> i32 {
    match result {
        Ok(s) => {
            print_summary(&s, None, json);
            verdict_status(&s, require_judged)
        }
        Err(e) => run_error(e),
    }
}

/// The live commands' options: this executable, signals handled, progress unless `--json`.
fn live_options(json: bool) -> LiveOptions {
    LiveOptions {
        verbose: !json,
        ..LiveOptions::cli(&crate::registry::Registered)
    }
}

/// The command that runs a live run again: `pacesim live FILE --seed N --backend B`, with the
/// worker command it ran (a live run is not deterministic: the same scenario, not the same
/// trace).
fn live_reproduce(file: &Path, seed: u64, backend: Option<&str>, worker_cmd: Option<&str>) -> String {
    again("live", file, Some(seed), backend, worker_cmd)
}

/// `pacesim COMMAND FILE [--seed N] [--backend B] [--worker-cmd '...']`: the options as the
/// command line gave them (an external worker's summary names no backend to give back).
fn again(command: &str, file: &Path, seed: Option<u64>, backend: Option<&str>, worker_cmd: Option<&str>) -> String {
    // summary::reproduce quotes the file as a shell needs
    let run = crate::summary::reproduce(file, 0, "");
    let f = run
        .strip_prefix("pacesim run ")
        .and_then(|r| r.strip_suffix(" --seed 0 --backend "))
        .unwrap_or(&run);
    let mut cmd = format!("pacesim {command} {f}");
    if let Some(s) = seed {
        cmd.push_str(&format!(" --seed {s}"));
    }
    if let Some(b) = backend {
        cmd.push_str(&format!(" --backend {b}"));
    }
    if let Some(w) = worker_cmd {
        cmd.push_str(&format!(" --worker-cmd '{}'", w.replace('\'', "'\\''")));
    }
    cmd
}

/// `pacesim conform FILE [--backend B] --tolerance T [--worker-cmd '...']`.
fn conform_reproduce(file: &Path, backend: Option<&str>, tolerance: f64, worker_cmd: Option<&str>) -> String {
    let cmd = again("conform", file, None, backend, None);
    let mut cmd = format!("{cmd} --tolerance {tolerance}");
    if let Some(w) = worker_cmd {
        cmd.push_str(&format!(" --worker-cmd '{}'", w.replace('\'', "'\\''")));
    }
    cmd
}

/// `conform --junit`: one case per comparison `disagreements` makes (the achieved rate, then
/// each simulated check), failing with its disagreement; a check either side could not judge
/// is skipped. The suite is the scenario; the backend is `conform`'s.
fn conform_cases(c: &conform::Conformance, differ: &[String], reproduce: &str) -> Vec<junit::Case> {
    let case = |property: String, outcome| junit::Case {
        scenario: c.sim.scenario.clone(),
        backend: format!("{} (live vs simulated)", c.sim.backend),
        property,
        outcome,
    };
    let failed = |prefix: &str| differ.iter().find(|d| d.starts_with(prefix)).cloned();
    let outcome = |prefix: &str, judged: bool, needs: String| match failed(prefix) {
        Some(d) => junit::CaseOutcome::Fail {
            witness: d,
            reproduce: reproduce.to_string(),
        },
        None if judged => junit::CaseOutcome::Pass,
        None => junit::CaseOutcome::NotJudged { needs },
    };
    let mut cases = vec![case(
        "achieved rate".into(),
        outcome("achieved rate:", true, String::new()),
    )];
    for (k, v) in &c.sim.checks {
        let live = c.live.checks.get(k);
        let judged = v.judged() && live.is_some_and(|l| l.judged());
        let needs = match live {
            Some(l) if !l.judged() => format!("live: {}", l.detail),
            Some(_) => format!("simulated: {}", v.detail),
            None => "the live run has no such check".into(),
        };
        cases.push(case(k.clone(), outcome(&format!("check {k}:"), judged, needs)));
    }
    cases
}

/// Print a live command's error; its status (128 + the signal after SIGINT, SIGTERM or
/// SIGHUP: 130, 143, 129; else 2).
fn live_failed(e: crate::run::live::CommandError) -> i32 {
    if e.interrupted() {
        eprintln!("pacesim: {e}");
        live::runner::interrupted_status()
    } else {
        // a live error can quote a server's or a worker's text: no known secret leaves
        bad(live::settings::redact_known(&e.to_string()))
    }
}

/// Print one run's summary as a short table, or as one JSON object. With the scenario `file`
/// (`run`), a failing run also names the command that reproduces it (`reproduce`).
fn print_summary(s: &Summary, file: Option<&Path>, json: bool) {
    let reproduce = file
        .filter(|_| !s.all_pass())
        .map(|f| run::reproduce(f, s.seed, &s.backend));
    print_summary_reproducing(s, reproduce, json);
}

/// `run`'s reproducer: [`run::reproduce`], with `--choices FILE` when the run replayed a
/// choice file (without it the command runs the scenario's seeded draws: another run).
fn run_reproduce(file: &Path, seed: u64, backend: &str, choices: Option<&Path>) -> String {
    let mut cmd = run::reproduce(file, seed, backend);
    if let Some(c) = choices {
        cmd.push_str(&format!(" --choices {}", shell_word(c)));
    }
    cmd
}

/// A path as one word of a POSIX shell's command line (quoted when it needs it, as
/// [`run::reproduce`] quotes the scenario's).
fn shell_word(p: &Path) -> String {
    let cmd = crate::summary::reproduce(p, 0, "");
    let prefix = format!("{} run ", crate::summary::program());
    cmd.strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix(" --seed 0 --backend "))
        .unwrap_or(&cmd)
        .to_string()
}

/// [`print_summary`] with the reproducer given (`None`: none printed).
fn print_summary_reproducing(s: &Summary, reproduce: Option<String>, json: bool) {
    if json {
        let text = serde_json::to_string(s).expect("summary serialises");
        println!("{}", with_reproduce(text, reproduce.as_deref()));
        return;
    }
    println!(
        "scenario {}  backend {}  seed {}  processes {}",
        terminal_safe(&s.scenario, false),
        terminal_safe(&s.backend, false),
        s.seed,
        s.processes
    );
    println!(
        "  fetches {}  starts {:.3}s..{:.3}s  achieved {:.2}/s (ceiling {}/s)",
        s.fetches, s.first_start_s, s.last_start_s, s.achieved_rate, s.rate
    );
    // slots: `-` when the trace has no grants (slot_ceiling not judged), not a count of 1
    let slots = match s.checks.get("slot_ceiling") {
        Some(c) if !c.judged() => "-".to_string(),
        _ => s.slot_burst_needed.to_string(),
    };
    println!(
        "  burst needed: arrivals {}  slots {slots}  max in 1 s: {} (bound {})  429s {}  503s {}",
        s.burst_needed, s.max_window.count, s.max_window.bound, s.status_429, s.status_503
    );
    if s.reservation.count == 0 {
        // an in-process pacer, or an external worker that reports no store round trips
        println!("  permission round trip ms: none in the trace  trace {}", s.trace_hash);
    } else {
        println!(
            "  permission round trip ms: mean {:.3} p50 {:.3} p95 {:.3} p99 {:.3}  trace {}",
            s.reservation.mean_ms, s.reservation.p50_ms, s.reservation.p95_ms, s.reservation.p99_ms, s.trace_hash
        );
    }
    for (name, c) in &s.checks {
        println!(
            "  {:<16} {}  {}",
            name,
            verdict_word(c),
            terminal_safe(&c.detail, false)
        );
    }
    if let Some(cmd) = reproduce {
        println!("  reproduce: {cmd}");
    }
}

/// `pass`, `FAIL`, or `-` for a check that was not judged (its detail says what it needs).
fn verdict_word(c: &crate::summary::CheckOut) -> &'static str {
    match c.verdict {
        crate::check::Status::NotJudged => "-   ",
        crate::check::Status::Pass => "pass",
        crate::check::Status::Fail => "FAIL",
    }
}

/// A JSON object with a last field `reproduce` added when there is a command (the fields keep
/// their order).
fn with_reproduce(mut object: String, cmd: Option<&str>) -> String {
    if let Some(cmd) = cmd
        && object.ends_with('}')
    {
        object.pop();
        let sep = if object.ends_with('{') { "" } else { "," };
        object.push_str(&format!("{sep}\"reproduce\":{}}}", serde_json::json!(cmd)));
    }
    object
}

/// Print the matrix (table or JSON) and how it compares with its expectation.
fn print_matrix(o: &matrix::MatrixOutcome, json: bool) {
    if json {
        println!("{}", o.json());
        return;
    }
    print!("{}", matrix::table(&o.matrix));
    match &o.expected {
        Some(p) if o.matches() => println!("\nmatches {}", p.display()),
        Some(p) => {
            println!("\n{} difference(s) from {}:", o.mismatches.len(), p.display());
            for d in &o.mismatches {
                println!("  {}", terminal_safe(d, false));
            }
        }
        // without an expectation only a run that did not finish fails the matrix
        None if !o.matches() => println!("\n{} run(s) did not finish", o.mismatches.len()),
        None => {}
    }
}

/// `simulate`: exit 0 whatever the verdicts (it compares designs, defective ones included),
/// except that with `require_judged` a check not judged on any run is exit 1.
fn simulate(
    files: Vec<PathBuf>,
    seeds: u64,
    out: Option<&Path>,
    json: bool,
    junit: Option<&Path>,
    require_judged: bool,
) -> i32 {
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
    let files = if files.is_empty() {
        run::default_scenarios()
    } else {
        files
    };
    let scenarios = match run::scenarios(files.clone()) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    // a report that cannot be written fails before anything runs
    if out.is_some()
        && let Err(e) = crate::report::distinct_dirs(&scenarios)
    {
        return bad(e);
    }
    let opts = compare::Options {
        seeds,
        series: out.is_some(),
        progress: true,
    };
    let all = match compare::run_all(&scenarios, opts) {
        Ok(a) => a,
        Err(e @ compare::CompareError::NoProgress { .. }) => {
            let compare::CompareError::NoProgress {
                index,
                ref backend,
                seed,
                ..
            } = e
            else {
                unreachable!("matched above")
            };
            let cmd = run::reproduce(&files[index], seed, backend);
            let code = failed(&e);
            eprintln!("reproduce: {}", terminal_safe(&cmd, false));
            return code;
        }
        Err(e) => return bad(e),
    };
    // run_all keeps the scenarios' order: the i-th result is the i-th file's
    for (sr, file) in all.iter().zip(&files) {
        if json {
            for r in &sr.runs {
                let text = serde_json::to_string(&r.row).expect("summary serialises");
                let cmd = (!r.row.summary.all_pass()).then(|| run::reproduce(file, r.seed, &r.backend));
                println!("{}", with_reproduce(text, cmd.as_deref()));
            }
        } else {
            print_table(sr);
            for r in sr.runs.iter().filter(|r| !r.row.summary.all_pass()) {
                println!("reproduce: {}", run::reproduce(file, r.seed, &r.backend));
            }
        }
    }
    if let Some(j) = junit {
        let runs = all
            .iter()
            .zip(&files)
            .flat_map(|(sr, f)| sr.runs.iter().map(move |r| (f.as_path(), &r.row.summary)));
        if let Err(e) = junit::write(j, &junit::from_summaries(runs)) {
            return bad(format!("{}: {e}", j.display()));
        }
    }
    if let Some(dir) = out {
        match report::write(dir, &all, &command) {
            Ok(_) => eprintln!("report: {}", dir.join("index.md").display()),
            Err(e) => return bad(e),
        }
    }
    if require_judged {
        let unjudged: Vec<String> = all
            .iter()
            .flat_map(|sr| &sr.runs)
            .flat_map(|r| {
                r.row
                    .summary
                    .not_judged()
                    .into_iter()
                    .map(|c| format!("{}/{} {c} (seed {})", r.row.summary.scenario, r.backend, r.seed))
            })
            .collect();
        if !unjudged.is_empty() {
            eprintln!("not judged (--require-judged): {}", unjudged.join(", "));
            return EXIT_FAIL;
        }
    }
    EXIT_PASS
}

/// Print one scenario's comparison table (and, with several seeds, the table across seeds).
fn print_table(sr: &compare::ScenarioRuns) {
    let sc = &sr.scenario;
    println!(
        "\n== {} ({}, ceiling {}/s, seed {})",
        sc.name,
        sc.processes.describe(),
        sc.pacer.rate,
        sr.seeds[0]
    );
    print!("{}", report::table::comparison(sr).text());
    if sr.seeds.len() > 1 {
        println!(
            "-- across {} seeds: mean ± 95% CI half-width (Student t)",
            sr.seeds.len()
        );
        print!(
            "{}",
            report::table::across_seeds(&report::table::labelled_seed_stats(sr)).text()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 52 item 10: `conform --require-judged` fails a conformance run with a check not
    /// judged on either side (naming it), and only then; without the flag it is no failure.
    #[test]
    fn conform_require_judged_fails_a_check_not_judged_on_either_side() {
        let sc = crate::registry::parse("t.toml", crate::scenario::FOUR_LIMITERS).unwrap();
        let sim = crate::registry::simulate(&sc, None, None).unwrap();
        assert!(sim.all_judged(), "{:?}", sim.checks);
        let mut c = conform::Conformance::of(sim.clone(), sim);
        assert!(conform_not_judged(&c).is_empty());
        assert_eq!(conform_status(&c, &[], true), EXIT_PASS);
        c.live.checks.get_mut("liveness").unwrap().verdict = crate::check::Status::NotJudged;
        assert_eq!(conform_not_judged(&c), ["live liveness"]);
        assert!(c.disagreements(0.02).is_empty(), "not judged one way: not compared");
        assert_eq!(conform_status(&c, &[], false), EXIT_PASS);
        assert_eq!(conform_status(&c, &[], true), EXIT_FAIL);
        c.sim.checks.get_mut("fairness").unwrap().verdict = crate::check::Status::NotJudged;
        assert_eq!(conform_not_judged(&c), ["simulated fairness", "live liveness"]);
        // a disagreement fails it either way
        assert_eq!(conform_status(&c, &["x".into()], false), EXIT_FAIL);
    }
}
