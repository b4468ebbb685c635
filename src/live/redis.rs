//! Redis for live runs: the run's key prefix (every key deleted afterwards), and the real
//! operations of the Redis-backed mechanisms.
//!
//! - `redis_lock`: `SET <prefix>lock <token> NX PX <ttl>`, non-blocking; released by a script
//!   that deletes the key only if it still holds this holder's token.
//! - `redis_gcra`: GCRA in one atomic script on the server's clock (`TIME`), the rule of
//!   [`crate::pacer::Gcra`]: `allow iff now >= tat - tau; tat = max(tat, now) + T` (the live
//!   tests replay the script's decisions through `Gcra::decide`).
//!
//! The client is the blocking `redis` client with read and write timeouts: a worker does one
//! thing at a time, so it has nothing to do while it waits.

use redis::{Connection, RedisResult, Script};

/// The key prefix for a run.
pub fn key_prefix(run_id: &str) -> String {
    format!("pacesim:live:{run_id}:")
}

/// `redis_lock`: `SET key token NX PX ttl`, then the server clock (µs), in one script.
const LOCK_LUA: &str = r#"
local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local t = redis.call('TIME')
if ok then return {1, t[1], t[2]} else return {0, t[1], t[2]} end
"#;

/// `redis_lock`: the server clock (µs), then delete the key if `token` still holds it.
const UNLOCK_LUA: &str = r#"
local t = redis.call('TIME')
local n = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then n = redis.call('DEL', KEYS[1]) end
return {n, t[1], t[2]}
"#;

fn lock_reply(v: &[i64]) -> (bool, i64) {
    let at = v.get(1).copied().unwrap_or(0) * 1_000_000 + v.get(2).copied().unwrap_or(0);
    (v.first() == Some(&1), at)
}

/// `redis_lock`: take the lock if free (`SET NX PX`). True if taken, and the server clock
/// (µs) just after.
pub fn lock_try(con: &mut Connection, key: &str, token: &str, ttl_ms: u64) -> RedisResult<(bool, i64)> {
    let v: Vec<i64> = Script::new(LOCK_LUA)
        .key(key)
        .arg(token)
        .arg(ttl_ms.max(1))
        .invoke(con)?;
    Ok(lock_reply(&v))
}

/// `redis_lock`: release the lock if `token` still holds it. True if released, and the server
/// clock (µs) just before.
pub fn lock_release(con: &mut Connection, key: &str, token: &str) -> RedisResult<(bool, i64)> {
    let v: Vec<i64> = Script::new(UNLOCK_LUA).key(key).arg(token).invoke(con)?;
    Ok(lock_reply(&v))
}

/// The GCRA script. `KEYS[1]` holds `tat`, `KEYS[2]` the shared backoff hash (`m`, `k`);
/// `ARGV` = base interval T (µs), burst, and a per-process multiplier (`0`: the hash's).
/// `T = interval * m`, `tau = T * (burst - 1)`. Returns strings (Redis truncates Lua numbers):
/// `{allowed, tat after, now, retry_at, T, m}`, times in µs of the server clock.
pub(crate) const GCRA_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local m = tonumber(ARGV[3])
if m == nil or m <= 0 then
  m = tonumber(redis.call('HGET', KEYS[2], 'm') or '1')
end
local T = tonumber(ARGV[1]) * m
local tau = T * (tonumber(ARGV[2]) - 1)
local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then tat = tonumber(stored) end
local f = function(x) return string.format('%.17g', x) end
if now < tat - tau then
  return {'0', f(tat), f(now), f(tat - tau), f(T), f(m)}
end
local new = math.max(tat, now) + T
redis.call('SET', KEYS[1], f(new), 'PX', math.floor((new - now) / 1000) + 60000)
return {'1', f(new), f(now), '0', f(T), f(m)}
"#;

/// One GCRA decision from the server (µs of its clock).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct GcraReply {
    /// Allowed?
    pub allowed: bool,
    /// `tat` after the decision.
    pub tat_us: f64,
    /// The server clock.
    pub now_us: f64,
    /// On deny, the earliest conforming instant.
    pub retry_at_us: f64,
    /// The interval applied, `T * m`.
    pub(crate) interval_us: f64,
    /// The multiplier applied.
    pub multiplier: f64,
}

/// `redis_gcra`: one atomic check-and-update. `multiplier` `None`: the shared one in
/// `backoff_key`.
pub fn gcra(
    con: &mut Connection,
    key: &str,
    backoff_key: &str,
    interval_us: f64,
    burst: u32,
    multiplier: Option<f64>,
) -> RedisResult<GcraReply> {
    let v: Vec<String> = Script::new(GCRA_LUA)
        .key(key)
        .key(backoff_key)
        .arg(format!("{interval_us:?}"))
        .arg(burst.max(1))
        .arg(format!("{:?}", multiplier.unwrap_or(0.0)))
        .invoke(con)?;
    let n = |i: usize| v.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    Ok(GcraReply {
        allowed: v.first().map(String::as_str) == Some("1"),
        tat_us: n(1),
        now_us: n(2),
        retry_at_us: n(3),
        interval_us: n(4),
        multiplier: n(5),
    })
}

/// The shared backoff schedule on a hash (`m`, `k`): the [`crate::pacer::Backoff`] rules in
/// Lua (IEEE doubles, so bit-identical). `ARGV` = step (as [`crate::live::pg::backoff_step`]),
/// cap, factor, decay_after. Returns `{m before, m after, k before, k after, TIME}` as strings.
pub(crate) const BACKOFF_LUA: &str = r#"
local m = tonumber(redis.call('HGET', KEYS[1], 'm') or '1')
local k = tonumber(redis.call('HGET', KEYS[1], 'k') or '0')
local step = ARGV[1]
local cap = tonumber(ARGV[2])
local factor = tonumber(ARGV[3])
local K = tonumber(ARGV[4])
local nm, nk = m, 0
if step == 'pressure' then nm = math.min(cap, m * factor)
elseif step == 'ok' then
  if k + 1 >= K then nm = math.max(1, m / factor) else nk = k + 1 end
elseif step == 'decay' then nm = math.max(1, m / factor)
elseif step == 'streak_ok' then
  nm = 1
  if k + 1 < K then nk = k + 1 end
elseif step == 'streak_reset' then nm = 1
end
local f = function(x) return string.format('%.17g', x) end
redis.call('HSET', KEYS[1], 'm', f(nm), 'k', nk)
local t = redis.call('TIME')
return {f(m), f(nm), tostring(k), tostring(nk), t[1], t[2]}
"#;

/// One shared backoff update: multiplier and streak before and after, and the server clock
/// (µs) when it was applied.
pub(crate) type BackoffUpdate = (f64, f64, i64, i64, i64);

/// Apply one backoff step to the shared hash.
pub fn backoff(
    con: &mut Connection,
    key: &str,
    step: &str,
    cap: f64,
    factor: f64,
    decay_after: u32,
) -> RedisResult<BackoffUpdate> {
    let v: Vec<String> = Script::new(BACKOFF_LUA)
        .key(key)
        .arg(step)
        .arg(format!("{cap:?}"))
        .arg(format!("{factor:?}"))
        .arg(decay_after.max(1))
        .invoke(con)?;
    let f = |i: usize| v.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(1.0);
    let k = |i: usize| v.get(i).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    Ok((f(0), f(1), k(2), k(3), k(4) * 1_000_000 + k(5)))
}

/// The `state_lost` fault on Redis: read, then delete, each of `KEYS` in one script (a flush
/// or an eviction of the run's keys). Returns `{key, value}` pairs of the keys that existed:
/// a string's value, a hash's multiplier field `m`.
const LOSE_LUA: &str = r#"
local out = {}
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'string' then
    table.insert(out, k); table.insert(out, redis.call('GET', k))
  elseif t == 'hash' then
    table.insert(out, k); table.insert(out, redis.call('HGET', k, 'm') or '1')
  elseif t ~= 'none' then
    table.insert(out, k); table.insert(out, '')
  end
  redis.call('DEL', k)
end
return out
"#;

/// The `state_lost` fault: delete this run's keys (those under `prefix`, found by SCAN, and
/// `named` ones under it however new) and return what each held (one script: read, then `DEL`). Only keys
/// under the run's own prefix: never another run's, never the run's lease.
/// Keys and values are bytes: a key or value that is not UTF-8 is deleted like any other, and
/// comes back with its bytes read lossily (it names none of pacesim's own keys).
pub(crate) fn lose_state(con: &mut Connection, prefix: &str, named: &[&str]) -> RedisResult<Vec<(String, String)>> {
    let mut keys = keys_with_prefix(con, prefix)?;
    keys.extend(named.iter().map(|n| format!("{prefix}{n}").into_bytes()));
    keys.sort();
    keys.dedup();
    let script = Script::new(LOSE_LUA);
    let mut call = script.prepare_invoke();
    for k in &keys {
        call.key(k.as_slice());
    }
    let v: Vec<Vec<u8>> = call.invoke(con)?;
    Ok(v.chunks(2)
        .filter_map(|p| match p {
            [k, v] => Some((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )),
            _ => None,
        })
        .collect())
}

/// Keys under `prefix` (SCAN, not KEYS, so a big server is not blocked), as bytes: a key is
/// any bytes, and one that is not UTF-8 is listed (and deleted) like any other, never an
/// error that stops a cleanup.
pub fn keys_with_prefix(con: &mut Connection, prefix: &str) -> RedisResult<Vec<Vec<u8>>> {
    let pattern = format!("{}*", glob_escape(prefix));
    let mut cursor: u64 = 0;
    let mut out = Vec::new();
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(con)?;
        // SCAN's MATCH is the server's glob; the prefix is compared again here, as bytes
        out.extend(keys.into_iter().filter(|k| is_under_prefix(k, prefix)));
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// The lease key of run `run_id`: `<heartbeat> <owner>`, the heartbeat in milliseconds on the
/// server's clock (`TIME`), rewritten every [`crate::live::pg::HEARTBEAT`]. It has no TTL: a
/// run's keys (`pacesim:live:<run>:...`) are provably abandoned only while a lease says so (its
/// heartbeat older than [`crate::live::pg::LEASE_STALE`]), never because a lease is missing.
pub fn lease_key(run_id: &str) -> String {
    format!("{LEASE_PREFIX}{run_id}")
}

/// Where the leases are.
const LEASE_PREFIX: &str = "pacesim:lease:";

/// The run id a lease key names, if `key` (any bytes) is `pacesim:lease:<run id>` with a run
/// id of pacesim's own form ([`is_own_run_id`]); `None` for anything else, never an error.
pub fn run_of_lease_key(key: &[u8]) -> Option<&str> {
    let run = std::str::from_utf8(key.strip_prefix(LEASE_PREFIX.as_bytes())?).ok()?;
    is_own_run_id(run).then_some(run)
}

/// True when `key` (any bytes) is under `prefix`: compared as bytes, so a key that is not
/// UTF-8 is still found under its run's prefix.
pub fn is_under_prefix(key: &[u8], prefix: &str) -> bool {
    key.starts_with(prefix.as_bytes())
}

/// True when `run_id` is exactly one pacesim makes (`<pid>_<8 hex digits>`,
/// [`crate::live::runner::new_run_id`]): cleanup touches no other run's keys.
pub fn is_own_run_id(run_id: &str) -> bool {
    crate::live::pg::is_own_schema(&crate::live::pg::schema_name(run_id)) && !run_id.ends_with("_calibrate")
}

/// Write the lease: `ARGV[1]` the owner, `ARGV[2]` `take` (always) or `renew` (only while the
/// key exists, so a renewal that lands after cleanup's `DEL` never brings the lease back).
const LEASE_LUA: &str = r#"
if ARGV[2] == 'renew' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. ' ' .. ARGV[1])
return 1
"#;

/// Take the lease of run `run_id` for `owner`.
pub fn take_lease(con: &mut Connection, run_id: &str, owner: &str) -> RedisResult<()> {
    let _: i64 = Script::new(LEASE_LUA)
        .key(lease_key(run_id))
        .arg(owner)
        .arg("take")
        .invoke(con)?;
    Ok(())
}

/// Refresh the lease of run `run_id`; false (and nothing written) if it is gone.
pub fn renew_lease(con: &mut Connection, run_id: &str, owner: &str) -> RedisResult<bool> {
    let n: i64 = Script::new(LEASE_LUA)
        .key(lease_key(run_id))
        .arg(owner)
        .arg("renew")
        .invoke(con)?;
    Ok(n == 1)
}

/// Drop the lease of run `run_id`.
pub fn drop_lease(con: &mut Connection, run_id: &str) -> RedisResult<()> {
    redis::cmd("DEL").arg(lease_key(run_id)).query(con)
}

/// A lease's heartbeat (ms on the server's clock), if `value` is one pacesim wrote.
pub fn lease_heartbeat(value: &str) -> Option<u64> {
    let (ms, owner) = value.split_once(' ')?;
    (!owner.is_empty() && !ms.is_empty() && ms.len() <= 16 && ms.bytes().all(|b| b.is_ascii_digit()))
        .then(|| ms.parse().ok())
        .flatten()
}

/// The server's clock in ms.
fn server_ms(con: &mut Connection) -> RedisResult<u64> {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con)?;
    Ok(s * 1000 + us / 1000)
}

/// Delete the keys of runs that pacesim can prove abandoned: a run id of pacesim's own form
/// whose lease, written by pacesim, was last renewed more than
/// [`crate::live::pg::LEASE_STALE`] ago on the server's clock (its parent was SIGKILLed, or its
/// host is gone), and then that lease. Keys without such a lease (another tool's, another
/// version's, a run still taking its lease) are never touched. Returns how many keys went.
pub(crate) fn delete_abandoned(con: &mut Connection) -> RedisResult<usize> {
    // only lease keys naming a run id of pacesim's own form: any other key under
    // `pacesim:lease:` (not UTF-8, not a string, another tool's) is never read nor touched
    let runs: std::collections::BTreeSet<String> = keys_with_prefix(con, LEASE_PREFIX)?
        .iter()
        .filter_map(|k| run_of_lease_key(k))
        .map(str::to_string)
        .collect();
    let stale_ms = crate::live::pg::LEASE_STALE.as_millis() as u64;
    let now = server_ms(con)?;
    let mut n = 0;
    for run in runs {
        // a lease of another type (a hash someone wrote) is not pacesim's: skipped, never an error
        let value: Option<Vec<u8>> = match redis::cmd("GET").arg(lease_key(&run)).query(con) {
            Ok(v) => v,
            Err(e) if e.code() == Some("WRONGTYPE") => continue,
            Err(e) => return Err(e),
        };
        let Some(beat) = value
            .as_deref()
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(lease_heartbeat)
        else {
            continue;
        };
        if now.saturating_sub(beat) <= stale_ms {
            continue;
        }
        n += delete_prefix(con, &key_prefix(&run))?;
        drop_lease(con, &run)?;
    }
    Ok(n)
}

/// Delete every key under `prefix`; the number deleted.
pub fn delete_prefix(con: &mut Connection, prefix: &str) -> RedisResult<usize> {
    let keys = keys_with_prefix(con, prefix)?;
    for chunk in keys.chunks(500) {
        let _: i64 = redis::cmd("DEL").arg(chunk).query(con)?;
    }
    Ok(keys.len())
}

fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_escaped_for_scan() {
        assert_eq!(glob_escape("a*b?[c]"), "a\\*b\\?\\[c\\]");
        assert_eq!(key_prefix("12_ab"), "pacesim:live:12_ab:");
    }

    #[test]
    fn only_pacesims_own_run_ids_and_leases_are_recognised() {
        assert!(is_own_run_id("123_0badf00d"));
        for id in [
            "123_0BADF00D",
            "123_0badf00",
            "x_0badf00d",
            "123_0badf00d:x",
            "*",
            "123_0badf00d_calibrate",
        ] {
            assert!(!is_own_run_id(id), "{id}");
        }
        assert_eq!(lease_heartbeat("1733150000123 host:42"), Some(1733150000123));
        for v in ["host:42", "", "12 ", " x", "1e9 x", "-1 x"] {
            assert_eq!(lease_heartbeat(v), None, "{v:?}");
        }
    }
}
