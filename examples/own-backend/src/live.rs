//! The sliding log for real: its Lua on Redis, through pacesim's live store traits.
//!
//! pacesim owns the rest: the connection (`RedisLink`: the run's Redis, through the fault
//! proxy when the scenario has store faults, reconnected after an error), the run's key
//! prefix (`RedisLink::key`: every key under it is deleted after the run, and by a
//! `state_lost` fault), the run's lease, the workers, the destination and the trace. This file
//! only says which store the design needs and what each operation runs there.

use crate::sliding_log::{LogOp, LogReply, SlidingLog};
use pacesim::live::adapter::redis::{Connection, RedisResult, Script};
// the live store's answer, not the simulated store's `Served` of the prelude
use pacesim::live::adapter::Served;
use pacesim::prelude::*;
use std::time::Duration;

/// `sliding_log`: trim, count and, below the limit, append, in one script (Redis runs scripts
/// one at a time). `KEYS[1]` the log; `ARGV` = window (µs), limit, member. Returns `{granted,
/// now, retry_at}` (µs of the server's clock; `retry_at` when the oldest entry leaves).
pub const TAKE_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 60000)
  return {1, now, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, now, tonumber(oldest[2]) + window}
"#;

/// `sliding_log_racy`, step 1: trim and count (no append). Returns `{count, now, retry_at}`.
pub const CHECK_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
local retry_at = 0
if n >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  retry_at = tonumber(oldest[2]) + window
end
return {n, now, retry_at}
"#;

/// `sliding_log_racy`, step 2: append at the server's clock, whatever the log holds. Returns
/// `{now}`.
pub const APPEND_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[1]) / 1000) + 60000)
return {now}
"#;

/// One worker's log on Redis.
#[derive(Debug)]
pub struct LogScript {
    link: RedisLink,
    cfg: SlidingLog,
    /// This worker's members: `<pid>.<incarnation>.<n>` (unique in the run).
    who: String,
    n: u64,
}

fn run(script: &str, con: &mut Connection, key: &str, args: &[String]) -> RedisResult<Vec<i64>> {
    let s = Script::new(script);
    let mut inv = s.key(key);
    for a in args {
        inv.arg(a);
    }
    inv.invoke(con)
}

impl LogScript {
    fn window_us(&self) -> String {
        (self.cfg.window.0 / 1000).to_string()
    }

    fn member(&mut self) -> String {
        self.n += 1;
        format!("{}.{}", self.who, self.n)
    }

    fn granted(&self, now_us: i64) -> Executed<LogReply> {
        let now = now_us * 1000;
        Executed::reply(LogReply::Granted).with(Served::Grant {
            slot: now,
            now,
            interval: self.cfg.interval.0,
            multiplier: 1.0,
        })
    }

    fn full(now_us: i64, retry_at_us: i64) -> Executed<LogReply> {
        let retry_after = Nanos((retry_at_us - now_us).max(0) as u64 * 1000);
        Executed::reply(LogReply::Full { retry_after }).with(Served::Deny)
    }
}

impl LiveStore for LogScript {
    type Op = LogOp;
    type Reply = LogReply;

    async fn execute(&mut self, op: &LogOp, _rng: &mut Rng) -> Result<Executed<LogReply>, StoreFailure> {
        let key = self.link.key("log");
        let (window, limit, member) = (self.window_us(), self.cfg.limit.to_string(), self.member());
        let con = self.link.con()?;
        let v = match op {
            LogOp::Take => run(TAKE_LUA, con, &key, &[window, limit, member]),
            LogOp::Check => run(CHECK_LUA, con, &key, &[window, limit]),
            LogOp::Append => run(APPEND_LUA, con, &key, &[window, member]),
        }
        .map_err(redis_failure)?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(match op {
            LogOp::Take if at(0) == 1 => self.granted(at(1)),
            LogOp::Take => LogScript::full(at(1), at(2)),
            LogOp::Check if at(2) == 0 => Executed::reply(LogReply::Room { count: at(0) as u64 }),
            LogOp::Check => LogScript::full(at(1), at(2)),
            LogOp::Append => self.granted(at(0)),
        })
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for LogScript {
    type Backend = SlidingLog;
    const STORE: StoreUse = StoreUse::Redis;

    async fn open(spec: &WorkerSpec, b: &SlidingLog, timeout: Duration) -> Result<LogScript, AdapterError> {
        Ok(LogScript {
            link: RedisLink::new(spec, timeout)?,
            cfg: b.clone(),
            who: format!("{}.{}", spec.pid, spec.incarnation),
            n: 0,
        })
    }

    async fn connect(&mut self) -> Result<(), AdapterError> {
        self.link.connect()
    }
}
