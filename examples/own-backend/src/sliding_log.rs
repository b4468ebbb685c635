//! `sliding_log`: a Redis sliding log, and `sliding_log_racy`, its defective twin.
//!
//! - **In the store:** one sorted set, `<prefix>log`, one member per granted request, scored by
//!   the Redis server's clock (`TIME`, µs) when it was granted.
//! - **Atomic operation** (`sliding_log`): one Lua script (Redis runs scripts one at a time):
//!   `ZREMRANGEBYSCORE log -inf now-window` (forget grants older than the window), `ZCARD log`;
//!   if fewer than `limit`, `ZADD log now member` and go; else deny, with the time the oldest
//!   entry leaves the window (the process sleeps until then and asks again). At most `limit`
//!   grants in any window `(now - window, now]` of the server's clock.
//! - **The racy twin** (`sliding_log_racy`): the same check and the same append, but as two
//!   store operations: `check` (`ZREMRANGEBYSCORE` + `ZCARD`, one script) and, when the count
//!   was below the limit, `append` (`ZADD`). Between the two, other processes check too: every
//!   process that saw `limit - 1` appends, and the window holds more than `limit`. Waiting
//!   processes all retry when the same oldest entry expires, so they collide every window.
//! - **Clock:** the Redis server's, one clock for everyone.
//! - **Store failure:** fail closed: wait `retry` and ask again.
//! - **SIGKILL leaves:** nothing but its past grants, which expire with the window.
//!
//! The log admits `limit` requests at once: its `burst` is `limit` (stated in [`Backend::facts`]
//! for the checkers), and a scenario judging it sets `[checks] burst` to the destination's
//! tolerated burst accordingly.

use pacesim::backend::options;
use pacesim::prelude::*;
use std::collections::VecDeque;

/// `[pacer]` options of `sliding_log` and `sliding_log_racy`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingLogOptions {
    /// The window's length. Default 1 s (the team's choice).
    pub window: Option<Nanos>,
    /// Grants allowed in any window. Default `rate x window` (rounded down); at least 1, at
    /// most that (a larger log would exceed the scenario's rate by design).
    pub limit: Option<u64>,
    /// How long a process waits after a store error before asking again (fail closed).
    /// Default 100 ms (the team's choice).
    pub retry: Option<Nanos>,
}

/// The racy twin's options: the same ones, read the same way.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(transparent)]
pub struct RacySlidingLogOptions(pub SlidingLogOptions);

/// A sliding log in force.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct SlidingLog {
    /// The window.
    pub window: Nanos,
    /// Grants allowed in any window.
    pub limit: u64,
    /// The pause after a store error.
    pub retry: Nanos,
    /// The scenario's interval (`1 / rate`): what each grant states it spaces by.
    pub interval: Nanos,
    /// The defective twin: check and append as two store operations.
    pub racy: bool,
}

impl SlidingLogOptions {
    /// Validate against `sc` and build (`racy`: the defective twin).
    pub fn build_for(self, sc: &Scenario, racy: bool) -> Result<SlidingLog, OptionError> {
        options::positive("window", self.window)?;
        options::positive("retry", self.retry)?;
        let window = self.window.unwrap_or(Nanos::from_millis(1000));
        let most = (sc.pacer.rate * window.as_secs_f64() + 1e-9).floor() as u64;
        if most == 0 {
            return Err(OptionError::new(
                "window",
                format!(
                    "{} ms holds no request at the rate {}/s: make it at least {} ms",
                    window.as_millis_f64(),
                    sc.pacer.rate,
                    (1000.0 / sc.pacer.rate).ceil()
                ),
            ));
        }
        let limit = match self.limit {
            None => most,
            Some(0) => return Err(OptionError::new("limit", "must be at least 1")),
            Some(l) if l > most => {
                return Err(OptionError::new(
                    "limit",
                    format!(
                        "{l} grants per {} ms window exceed the rate {}/s (at most {most})",
                        window.as_millis_f64(),
                        sc.pacer.rate
                    ),
                ));
            }
            Some(l) => l,
        };
        Ok(SlidingLog {
            window,
            limit,
            retry: self.retry.unwrap_or(Nanos::from_millis(100)),
            interval: sc.interval(),
            racy,
        })
    }
}

impl Configure for SlidingLogOptions {
    type Backend = SlidingLog;
    fn build(self, sc: &Scenario) -> Result<SlidingLog, OptionError> {
        self.build_for(sc, false)
    }
}

impl Configure for RacySlidingLogOptions {
    type Backend = SlidingLog;
    fn build(self, sc: &Scenario) -> Result<SlidingLog, OptionError> {
        self.0.build_for(sc, true)
    }
}

/// An operation on the log.
#[derive(Copy, Clone, Debug, PartialEq, Hash)]
pub enum LogOp {
    /// `sliding_log`: trim, count and, below the limit, append, in one script.
    Take,
    /// `sliding_log_racy`, step 1: trim and count.
    Check,
    /// `sliding_log_racy`, step 2: append (the check said there was room).
    Append,
}

impl StoreOp for LogOp {
    fn kind(&self) -> OpKind {
        // all three ask for permission (the process waits from sending them until it fetches)
        OpKind::Acquire
    }
}

/// The store's answer.
#[derive(Copy, Clone, Debug, PartialEq, Hash)]
pub enum LogReply {
    /// Granted (a `take` or an `append`): go now.
    Granted,
    /// Full: the oldest entry leaves the window after this long.
    Full {
        /// Wait before asking again.
        retry_after: Nanos,
    },
    /// A `check`'s count, below the limit: room for one more (as far as it knows).
    Room {
        /// Entries in the window.
        count: u64,
    },
}

impl StoreReply for LogReply {}

impl Backend for SlidingLog {
    type Op = LogOp;
    type Reply = LogReply;
    type Process = LogProcess;
    type Store = LogStore;

    fn name(&self) -> &str {
        if self.racy { "sliding_log_racy" } else { "sliding_log" }
    }

    fn facts(&self) -> Facts {
        // the log admits `limit` at once (the burst the checkers allow: backoff_coherence's
        // spacing tolerance, self_heal's quiet after a burst); a store error stops the
        // process until the store answers
        Facts {
            burst: Some(self.limit),
            fallback: Some(StoreFallback::FailClosed),
            ..Default::default()
        }
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "window_ns": self.window.0,
            "limit": self.limit,
            "interval_ns": self.interval.0,
            "storage": "redis sorted set",
            "racy": self.racy,
        })
    }

    fn process(&self, _pid: u32) -> LogProcess {
        LogProcess { cfg: self.clone() }
    }

    fn store(&self) -> LogStore {
        LogStore {
            cfg: self.clone(),
            log: VecDeque::new(),
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![
            KillPoint::MidReservation,
            KillPoint::SleepingToSlot,
            KillPoint::MidFetch,
        ]
    }

    /// Shared: the process side keeps nothing per operation in flight.
    fn threads(&self) -> Threads {
        Threads::Shared
    }
}

/// The sorted set, as the simulator keeps it: grant times on the store's clock, oldest first.
#[derive(Clone, Debug)]
pub struct LogStore {
    cfg: SlidingLog,
    // invariant: sorted ascending
    log: VecDeque<Reading>,
}

// Every field exact (the explorer's default form of a side, absolute); `LogStore`'s own `form`
// below says what of it is relative to now.
exact_hash!(LogStore { cfg, log });

impl LogStore {
    /// `ZREMRANGEBYSCORE log -inf now-window`: the window is `(now - window, now]`.
    fn trim(&mut self, now: Reading) {
        let edge = now - self.cfg.window.0 as i64;
        while self.log.front().is_some_and(|&s| s <= edge) {
            self.log.pop_front();
        }
    }

    /// `ZADD log now member`, and the grant event.
    fn append(&mut self, cx: &mut StoreCx, s: Session, now: Reading) -> Served<LogReply> {
        let at = self.log.partition_point(|&x| x <= now);
        self.log.insert(at, now);
        cx.out
            .grant(cx.t.0, s.pid, s.thread, now, now, self.cfg.interval.0, 1.0);
        Served::now(LogReply::Granted)
    }

    /// Deny: full until the oldest entry leaves the window.
    fn full(&self, cx: &mut StoreCx, s: Session, now: Reading) -> Served<LogReply> {
        cx.out.event(&Event::Deny { t: cx.t.0, pid: s.pid });
        let oldest = self.log.front().copied().unwrap_or(now);
        let retry_after = Nanos((oldest + self.cfg.window.0 as i64 - now).max(0) as u64);
        Served::now(LogReply::Full { retry_after })
    }
}

impl StoreSide for LogStore {
    type Op = LogOp;
    type Reply = LogReply;

    /// Its form keeps no process id (the log holds instants only), and what it does depends on
    /// no process's id: `pacesim explore` may merge states that differ only in which process
    /// is which (symmetry reduction).
    const SYMMETRIC: bool = true;

    /// An explorer's form (`pacesim::form`): the configuration exact, each grant in the log by
    /// how far behind the store's clock it lies (the script reads only differences: `now -
    /// window` against each entry, the oldest's `+ window - now`), so the log is met again at
    /// another instant.
    fn form(&self, f: &mut Form, now: Reading) {
        // (every field named: one added later fails to build until it is declared here)
        let LogStore { cfg, log } = self;
        f.exact(cfg);
        f.word(log.len() as u64);
        for &s in log {
            f.word(now.wrapping_sub(s) as u64);
        }
    }

    // (its operations hold nothing; its replies a duration and a count)
    const TIMELESS_MESSAGES: bool = true;

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &LogOp, now: Reading) -> Served<LogReply> {
        match op {
            LogOp::Take => {
                self.trim(now);
                if (self.log.len() as u64) < self.cfg.limit {
                    self.append(cx, s, now)
                } else {
                    self.full(cx, s, now)
                }
            }
            LogOp::Check => {
                self.trim(now);
                let count = self.log.len() as u64;
                if count < self.cfg.limit {
                    Served::now(LogReply::Room { count })
                } else {
                    self.full(cx, s, now)
                }
            }
            // the defect: appended whatever the log holds now
            LogOp::Append => self.append(cx, s, now),
        }
    }

    /// The key is gone (a flush, an eviction): the next operation finds an empty log.
    fn on_state_lost(&mut self, _cx: &mut StoreCx) {
        self.log.clear();
    }
}

/// A process: ask; go when granted; when full, sleep until the oldest grant leaves the window.
#[derive(Clone, Debug)]
pub struct LogProcess {
    cfg: SlidingLog,
}

exact_hash!(LogProcess { cfg });

impl ProcessSide for LogProcess {
    type Op = LogOp;
    type Reply = LogReply;

    /// It keeps no process id (its configuration only).
    const SYMMETRIC: bool = true;

    /// An explorer's form (`pacesim::form`): its configuration, nothing of the clock.
    fn form(&self, f: &mut Form, _mono_now: u64) {
        let LogProcess { cfg } = self;
        f.exact(cfg);
    }

    fn acquire(&mut self, _cx: &mut ProcCx) -> Step<LogOp> {
        Step::Send(if self.cfg.racy { LogOp::Check } else { LogOp::Take })
    }

    fn on_reply(&mut self, cx: &mut ProcCx, _op: &LogOp, reply: LogReply) -> Step<LogOp> {
        match reply {
            LogReply::Granted => Step::FetchAt(cx.t),
            LogReply::Full { retry_after } => Step::RetryAt(cx.after_mono(retry_after)),
            LogReply::Room { .. } => Step::Send(LogOp::Append),
        }
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, _op: &LogOp) -> Step<LogOp> {
        Step::RetryAt(cx.after_mono(self.cfg.retry))
    }

    fn after_fetch(&mut self, _cx: &mut ProcCx, _status: u16) -> Step<LogOp> {
        Step::Done
    }
}
