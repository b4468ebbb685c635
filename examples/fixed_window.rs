//! A team's own backend, defined only through pacesim's public API: a Redis-style fixed-window
//! counter (`INCR rate:<window>` then `EXPIRE`, allow while the count is within the limit).
//!
//! Its known defect: the limit holds per calendar window, not per any window of that length, so
//! a fleet that spends one window's budget at its end and the next window's at its start sends
//! up to twice the limit within one second. pacesim's ceiling checker catches it; a GCRA
//! (`redis_gcra`) on the same load passes.
//!
//! `cargo run --release --example fixed_window` prints both; `cargo test --release --example
//! fixed_window` asserts it.
//!
//! With arguments it is the whole `pacesim` command line with `fixed_window` registered beside
//! pacesim's backends ([`pacesim::cli::main_with_backends`]): scenario files name it in
//! `[pacer] backend` and `compare`, with its own option `window`:
//! `cargo run --release --example fixed_window -- simulate examples/fixed-window.toml`, or
//! `-- matrix examples/fixed-window.toml --expected examples/fixed-window-matrix.toml`.

use pacesim::backend::redis_gcra::RedisGcraOptions;
use pacesim::prelude::*;

/// The fixed-window counter: `limit` requests per `window`.
#[derive(Clone, Debug, Hash)]
pub struct FixedWindow {
    /// Requests allowed per window.
    pub limit: u64,
    /// The window's length.
    pub window: Nanos,
}

/// `INCR rate:<window>` (and `EXPIRE` on the first): the one operation.
#[derive(Copy, Clone, Debug, PartialEq, Hash)]
pub struct Incr;

impl StoreOp for Incr {
    fn kind(&self) -> OpKind {
        OpKind::Acquire // a request for permission of the backend's own
    }
}

/// The script's answer.
#[derive(Copy, Clone, Debug, PartialEq, Hash)]
pub enum Answer {
    /// Within the limit: go now.
    Allowed,
    /// Over it: the next window starts after this long.
    Denied(Nanos),
}

impl StoreReply for Answer {}

/// The counter in Redis: the current window's number and count (older keys have expired).
#[derive(Clone, Debug)]
pub struct Counter {
    cfg: FixedWindow,
    key: Option<(i64, u64)>,
}

// What an explorer compares of it: every field declared (a field added later fails to build
// until it is declared here: exact, `bits` for floats, or `ignored("why")`).
exact_hash!(Counter { cfg, key });

impl StoreSide for Counter {
    type Op = Incr;
    type Reply = Answer;

    fn serve(&mut self, cx: &mut StoreCx, from: Session, _op: &Incr, now: Reading) -> Served<Answer> {
        let w = self.cfg.window.0 as i64;
        let window = now.div_euclid(w);
        let count = match self.key {
            Some((k, c)) if k == window => c + 1,
            _ => 1, // a new window's key (the old one expired)
        };
        self.key = Some((window, count));
        if count <= self.cfg.limit {
            cx.out.event(&Event::Grant {
                t: cx.t.0,
                pid: from.pid,
                thread: from.thread,
                slot: now,
                now,
                interval: self.cfg.window.0 / self.cfg.limit,
                multiplier: 1.0,
            });
            Served::now(Answer::Allowed)
        } else {
            cx.out.event(&Event::Deny {
                t: cx.t.0,
                pid: from.pid,
            });
            Served::now(Answer::Denied(Nanos(((window + 1) * w - now) as u64)))
        }
    }
}

/// A process: ask, fetch if allowed, else retry when the next window opens. If Redis fails,
/// fail open (the prior behaviour).
#[derive(Clone, Debug, Hash)]
pub struct Client;

impl ProcessSide for Client {
    type Op = Incr;
    type Reply = Answer;

    fn acquire(&mut self, _cx: &mut ProcCx) -> Step<Incr> {
        Step::Send(Incr)
    }
    fn on_reply(&mut self, cx: &mut ProcCx, _op: &Incr, reply: Answer) -> Step<Incr> {
        match reply {
            Answer::Allowed => Step::FetchAt(cx.t),
            Answer::Denied(d) => Step::RetryAt(cx.after_mono(d)),
        }
    }
    fn on_store_error(&mut self, cx: &mut ProcCx, _op: &Incr) -> Step<Incr> {
        Step::FetchAt(cx.t)
    }
    fn after_fetch(&mut self, _cx: &mut ProcCx, _status: u16) -> Step<Incr> {
        Step::Done
    }
}

impl Backend for FixedWindow {
    type Op = Incr;
    type Reply = Answer;
    type Process = Client;
    type Store = Counter;

    fn name(&self) -> &str {
        "fixed_window"
    }
    fn facts(&self) -> Facts {
        // a window admits its whole limit at once: the burst the checkers allow
        Facts {
            burst: Some(self.limit),
            ..Facts::default()
        }
    }
    fn detail(&self) -> serde_json::Value {
        serde_json::json!({ "limit": self.limit, "window_ns": self.window.0 })
    }
    fn process(&self, _pid: u32) -> Client {
        Client
    }
    fn store(&self) -> Counter {
        Counter {
            cfg: self.clone(),
            key: None,
        }
    }
}

/// Its `[pacer]` options: `window` (default 1 s); the limit is the scenario's `rate` x window.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedWindowOptions {
    /// The window's length.
    pub window: Option<Nanos>,
}

impl Configure for FixedWindowOptions {
    type Backend = FixedWindow;
    fn build(self, sc: &Scenario) -> Result<FixedWindow, OptionError> {
        let window = self.window.unwrap_or(Nanos::from_millis(1000));
        let limit = (sc.pacer.rate * window.as_secs_f64()).floor() as u64;
        if window.0 == 0 || limit == 0 {
            return Err(OptionError::new(
                "window",
                format!("must hold at least one request at the rate {}/s", sc.pacer.rate),
            ));
        }
        Ok(FixedWindow { limit, window })
    }
}

/// Its registry entry: what `main_with_backends` adds to every command.
pub fn spec() -> BackendSpec {
    BackendSpec {
        name: "fixed_window",
        summary: "INCR rate:<window> then EXPIRE; allow while the count is within rate x window (a team's own)",
        defective: true,
        ops: &OpsOf::<FixedWindowOptions>::NEW,
        live: None,
        colour: None,
    }
}

/// `sims/four-limiters.toml`'s fleet (four processes at a global 50/s), asking for more than
/// the rate, its first requests 0.9 s in: late in the first window.
pub fn load() -> Scenario {
    let src = r#"
name = "fixed-window"
seed = 1
duration = "3s"
[pacer]
backend = "fixed_window"
rate = 50.0
[processes]
count = 4
start = { dist = "constant", value = "900ms" }
[store]
latency = { dist = "constant", value = "0.3ms" }
[fetch]
duration = { dist = "constant", value = "1ms" }
"#;
    // read without the registry's rules: `fixed_window` need not be registered for
    // SimBuilder, which checks what the backend value can run when the run starts
    Scenario::parse("fixed-window.toml", src, &Structure).expect("a valid scenario")
}

/// Run the fixed window and GCRA on the same load.
pub fn compare() -> (Report, Report) {
    let sc = load();
    let fixed = FixedWindow {
        limit: sc.pacer.rate as u64,
        window: Nanos::from_millis(1000),
    };
    let gcra = RedisGcraOptions::default().build(&sc).expect("default options");
    let b = SimBuilder::new(sc);
    (
        b.run(fixed).expect("fixed_window runs this scenario"),
        b.run(gcra).expect("row runs this scenario"),
    )
}

fn main() {
    if std::env::args().len() > 1 {
        std::process::exit(main_with_backends(vec![spec()]));
    }
    let (fixed, gcra) = compare();
    for r in [&fixed, &gcra] {
        let s = &r.summary;
        println!(
            "{:<13} ceiling {}  max {} in 1 s (bound {})  {}",
            s.backend,
            if s.checks["ceiling"].passed() { "pass" } else { "FAIL" },
            s.max_window.count,
            s.max_window.bound,
            s.checks["ceiling"].detail
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn registered() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| pacesim::registry::register(vec![spec()]).unwrap());
    }

    fn file(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
    }

    /// Registered, the team's backend is named in a scenario file like pacesim's own: the
    /// commands' pipeline runs it, its defect fails the matrix's expected cell, and its own
    /// options are checked with file, line and field.
    #[test]
    fn registered_it_runs_through_the_commands_pipeline() {
        registered();
        assert!(pacesim::registry::names().contains(&"fixed_window"));
        let s = pacesim::run::one(&file("fixed-window.toml"), None, None, None).unwrap();
        assert_eq!(s.backend, "fixed_window");
        assert!(s.checks["ceiling"].failed(), "{}", s.checks["ceiling"].detail);
        let g = pacesim::run::one(&file("fixed-window.toml"), None, Some("redis_gcra"), None).unwrap();
        assert!(g.checks["ceiling"].passed(), "{}", g.checks["ceiling"].detail);
        let m = pacesim::matrix::evaluate(
            vec![file("fixed-window.toml")],
            1,
            Some(&file("fixed-window-matrix.toml")),
        )
        .unwrap();
        assert!(m.matches(), "{:?}", m.mismatches);
        // its option, checked as pacesim's are
        let bad = pacesim::registry::parse(
            "t.toml",
            &std::fs::read_to_string(file("fixed-window.toml"))
                .unwrap()
                .replace("window = \"1s\"", "window = \"1ns\""),
        )
        .unwrap_err()
        .to_string();
        assert!(
            bad.contains("t.toml:") && bad.contains("pacer.window: must hold at least one request"),
            "{bad}"
        );
        // a second registration is refused, not a panic
        assert!(pacesim::registry::register(vec![spec()]).is_err());
    }

    /// Unregistered, the backend value runs through `SimBuilder`; what it cannot run is
    /// refused when the run starts, never run quietly: more threads than it serves, platforms,
    /// broker jobs.
    #[test]
    fn the_builder_checks_what_the_value_can_run() {
        let fixed = || FixedWindow {
            limit: 50,
            window: Nanos::from_millis(1000),
        };
        let mut sc = load();
        sc.processes.threads = 2;
        let e = SimBuilder::new(sc).run(fixed()).unwrap_err().to_string();
        assert!(
            e.contains("processes.threads: backend `fixed_window` runs one thread per process"),
            "{e}"
        );
        let mut sc = load();
        sc.platforms = vec![serde_json::from_value(serde_json::json!({"name": "a", "limit": 5.0})).unwrap()];
        let e = SimBuilder::new(sc).run(fixed()).unwrap_err().to_string();
        assert!(
            e.contains("platforms: backend `fixed_window` keeps no walk lock per platform"),
            "{e}"
        );
        assert!(SimBuilder::new(load()).run(fixed()).is_ok());
    }

    /// Without a live store side (`live: None`), live mode refuses it before touching a
    /// server, saying why (the command line's exit 2).
    #[test]
    fn live_says_it_has_no_live_store_side() {
        registered();
        let opts = pacesim::live::LiveOptions::with_exe("/nonexistent/never-run", &Registered);
        let e = pacesim::run::live::run_file(&file("fixed-window.toml"), None, None, None, None, &opts).unwrap_err();
        assert!(
            matches!(
                &e,
                pacesim::run::live::CommandError::Live(pacesim::live::LiveError::Unsupported(m))
                    if m.contains("backend `fixed_window` has no live store side")
            ),
            "{e}"
        );
    }

    #[test]
    fn the_ceiling_catches_twice_the_limit_across_a_window_boundary_and_gcra_passes() {
        let (fixed, gcra) = compare();
        let limit = load().pacer.rate as u64;
        let f = &fixed.summary;
        assert!(f.checks["ceiling"].failed(), "{}", f.checks["ceiling"].detail);
        // one window's budget at its end, the next one's at its start: twice the limit in 1 s
        assert!(
            f.max_window.count >= 2 * limit - 2,
            "max {} in 1 s against a limit of {limit}",
            f.max_window.count
        );
        let g = &gcra.summary;
        assert!(g.checks["ceiling"].passed(), "{}", g.checks["ceiling"].detail);
        assert!(g.max_window.count <= g.max_window.bound);
    }
}
