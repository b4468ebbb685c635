//! Issue 34, live safety on shared servers, against the real PostgreSQL and Redis: a stored
//! lease row is data and never SQL; Redis cleanup deletes only keys pacesim can prove it owns;
//! a renewal never brings a lease back after cleanup; SIGHUP cleans up as SIGINT does; no
//! secret reaches pacesim's output; a worker's `setsid()` grandchild dies with the run.
//!
//! Like tests/suite/live.rs, these print a loud `LIVE TESTS NOT RUN: ...` and pass when a server
//! (or, for the worker tests, Python) is missing; `.ci/run` starts the servers.

use crate::common;

use pacesim::live::pg;
use pacesim::live::redis as lredis;
use pacesim::live::settings::{PgSettings, RedisSettings};
use pacesim::live::{LiveOptions, run_blocking};
use pacesim::scenario::{FOUR_LIMITERS, Scenario};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Both servers, or why not (printed loudly).
fn servers(test: &str) -> Option<(PgSettings, tokio::runtime::Runtime)> {
    let rt = rt();
    let pg = rt.block_on(PgSettings::from_env().connect_resolving_user(Duration::from_secs(2)));
    let redis = RedisSettings::from_env().check(Duration::from_secs(2));
    let why = match (pg, redis) {
        (Ok((s, _)), Ok(())) => return Some((s, rt)),
        (Err(e), _) => e.to_string(),
        (_, Err(e)) => e.to_string(),
    };
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "LIVE TESTS NOT RUN ({test}): {why}");
    None
}

fn python_ok(test: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "LIVE TESTS NOT RUN ({test}): python3 with redis-py missing"
        );
    }
    ok
}

fn redis() -> redis::Connection {
    RedisSettings::from_env().connect(None, Duration::from_secs(2)).unwrap()
}

fn opts() -> LiveOptions {
    LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"))
}

/// A scenario file in a fresh directory of this test.
fn scenario_file(test: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pacesim-safety-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(&f, body).unwrap();
    f
}

/// Item 1: start-up cleanup reads schema names from `pacesim_lease.runs`, which anyone with
/// write access can fill. A stale row naming `pacesim_live_x; DROP SCHEMA victim CASCADE; --`
/// drops nothing, and neither does a stale row naming a schema pacesim would not create
/// (`pacesim_live_victim...`, which `LIKE 'pacesim\_live\_%'` matches).
#[test]
fn a_stored_lease_row_is_data_never_sql() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((pgs, rt)) = servers("a_stored_lease_row_is_data_never_sql") else {
        return;
    };
    let c = rt.block_on(pgs.connect(Duration::from_secs(2))).unwrap();
    let me = std::process::id();
    let victim = format!("pacesim_victim_{me}");
    let lookalike = format!("pacesim_live_victim{me}");
    let hostile = format!("pacesim_live_x; DROP SCHEMA {victim} CASCADE; --");
    let rows = [hostile.clone(), lookalike.clone()];
    rt.block_on(async {
        for s in [&victim, &lookalike] {
            c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s}; CREATE TABLE {s}.t (x int)"
            ))
            .await
            .unwrap();
        }
        for r in &rows {
            let _ = c
                .execute(&format!("DELETE FROM {} WHERE schema_name = $1", pg::LEASES), &[r])
                .await;
            // take_lease creates the lease table when it is missing; the name is a parameter
            pg::take_lease(&c, r, "gone-host:1").await.unwrap();
            c.execute(
                &format!(
                    "UPDATE {} SET heartbeat = clock_timestamp() - interval '1 hour' WHERE schema_name = $1",
                    pg::LEASES
                ),
                &[r],
            )
            .await
            .unwrap();
        }
    });
    // the name is refused before any SQL runs, by every route that drops
    let refused = rt.block_on(pg::drop_schema(&c, &hostile)).unwrap_err().to_string();
    assert!(refused.contains("refused schema name"), "{refused}");

    let r = run_blocking(&Scenario::parse("four.toml", FOUR_LIMITERS).unwrap(), &opts());
    let exists = |s: &str| rt.block_on(pg::schema_exists(&c, s)).unwrap();
    let survived = (exists(&victim), exists(&lookalike));
    let rows_left: i64 = rt
        .block_on(c.query_one(
            &format!("SELECT count(*) FROM {} WHERE schema_name = ANY($1)", pg::LEASES),
            &[&rows.to_vec()],
        ))
        .unwrap()
        .get(0);
    rt.block_on(async {
        for s in [&victim, &lookalike] {
            c.batch_execute(&format!("DROP SCHEMA IF EXISTS {s} CASCADE"))
                .await
                .unwrap();
        }
        for row in &rows {
            let _ = c
                .execute(&format!("DELETE FROM {} WHERE schema_name = $1", pg::LEASES), &[row])
                .await;
        }
    });
    r.unwrap();
    assert_eq!(
        survived,
        (true, true),
        "a stored lease row dropped a schema that is not pacesim's"
    );
    assert_eq!(rows_left, 2, "rows pacesim does not own are left as they are");
}

/// Item 2: Redis start-up cleanup deletes the keys of a run only when a lease pacesim wrote
/// proves it abandoned (its heartbeat stale on the server's clock); a key under
/// `pacesim:live:` with no lease, or with a lease pacesim did not write, is never deleted.
#[test]
fn redis_cleanup_deletes_only_keys_it_can_prove_abandoned() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_pgs, _rt)) = servers("redis_cleanup_deletes_only_keys_it_can_prove_abandoned") else {
        return;
    };
    let mut con = redis();
    let (foreign, stale, odd, fresh) = (
        "4000000011_0badf00d",
        "4000000012_0badf00d",
        "4000000013_0badf00d",
        "4000000014_0badf00d",
    );
    let key = |id: &str| format!("{}lock", lredis::key_prefix(id));
    for id in [foreign, stale, odd, fresh] {
        let _: () = redis::cmd("SET").arg(key(id)).arg("x").query(&mut con).unwrap();
    }
    // a lease pacesim wrote an hour ago (its run was SIGKILLed), one in another format, a fresh one
    let _: () = redis::cmd("SET")
        .arg(lredis::lease_key(stale))
        .arg("1000 gone-host:1")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(lredis::lease_key(odd))
        .arg("someone-else")
        .query(&mut con)
        .unwrap();
    lredis::take_lease(&mut con, fresh, "other-host:1").unwrap();

    let mut sc = Scenario::parse("four.toml", FOUR_LIMITERS).unwrap();
    sc.pacer.backend = "redis_gcra".into();
    let r = run_blocking(&sc, &opts());

    let exists = |con: &mut redis::Connection, k: String| -> bool { redis::cmd("EXISTS").arg(k).query(con).unwrap() };
    let kept = (
        exists(&mut con, key(foreign)),
        exists(&mut con, key(odd)),
        exists(&mut con, lredis::lease_key(odd)),
        exists(&mut con, key(fresh)),
    );
    let dropped = (
        !exists(&mut con, key(stale)),
        !exists(&mut con, lredis::lease_key(stale)),
    );
    for id in [foreign, stale, odd, fresh] {
        let _ = lredis::delete_prefix(&mut con, &lredis::key_prefix(id));
        let _ = lredis::drop_lease(&mut con, id);
    }
    let r = r.unwrap();
    assert_eq!(
        kept,
        (true, true, true, true),
        "keys without a lease pacesim wrote, or with a fresh one, are never deleted"
    );
    assert_eq!(dropped, (true, true), "a stale lease's keys and the lease itself go");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

/// Item 3: a heartbeat renewal that lands after cleanup's `DEL` does not bring the lease back
/// (the lease key has no TTL, so one that came back would never go).
#[test]
fn a_renewal_after_cleanup_never_brings_the_lease_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_) = servers("a_renewal_after_cleanup_never_brings_the_lease_back") else {
        return;
    };
    let mut con = redis();
    let id = "4000000021_0badf00d";
    lredis::take_lease(&mut con, id, "me:1").unwrap();
    let v: String = redis::cmd("GET").arg(lredis::lease_key(id)).query(&mut con).unwrap();
    assert!(lredis::lease_heartbeat(&v).is_some(), "{v}");
    assert!(lredis::renew_lease(&mut con, id, "me:1").unwrap());
    lredis::drop_lease(&mut con, id).unwrap();
    assert!(!lredis::renew_lease(&mut con, id, "me:1").unwrap());
    let back: bool = redis::cmd("EXISTS").arg(lredis::lease_key(id)).query(&mut con).unwrap();
    assert!(!back, "a late renewal re-created the lease");
}

/// Item 3: SIGHUP (a closed terminal, a dropped ssh session) stops the run and cleans up as
/// SIGINT and SIGTERM do: exit 129, no worker, no keys, no lease, no schema.
#[test]
fn sighup_stops_the_run_and_cleans_up() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((pgs, rt)) = servers("sighup_stops_the_run_and_cleans_up") else {
        return;
    };
    for (backend, sig, code) in [("redis_gcra", libc::SIGHUP, 129), ("row", libc::SIGTERM, 143)] {
        let file = scenario_file(
            "hup",
            &format!(
                "name = \"hup\"\nduration = \"60s\"\n[pacer]\nbackend = \"{backend}\"\nrate = 10.0\n[processes]\ncount = 2\n"
            ),
        );
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
            .arg("live")
            .arg(&file)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        let run_id = line
            .split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches(':')
            .to_string();
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, sig);
        }
        let status = child.wait().unwrap();
        let mut con = redis();
        let keys = lredis::keys_with_prefix(&mut con, &lredis::key_prefix(&run_id)).unwrap();
        let lease: bool = redis::cmd("EXISTS")
            .arg(lredis::lease_key(&run_id))
            .query(&mut con)
            .unwrap();
        let c = rt.block_on(pgs.connect(Duration::from_secs(2))).unwrap();
        let schema = rt.block_on(pg::schema_exists(&c, &pg::schema_name(&run_id))).unwrap();
        let _ = std::fs::remove_dir_all(file.parent().unwrap());
        assert_eq!(status.code(), Some(code), "{backend}: {line}");
        assert!(keys.is_empty(), "{backend}: keys left after signal {sig}: {keys:?}");
        assert!(!lease, "{backend}: the Redis lease outlived the run");
        assert!(!schema, "{backend}: the schema outlived the run");
    }
}

/// Item 4: secrets are redacted by parsing the URL and wherever pacesim quotes text it did not
/// write: a Redis password holding `@`; `redis+unix://...?pass=`; a worker printing
/// `PGPASSWORD` and `PACESIM_PG_URL` (which embeds it) on its stderr before it fails.
#[test]
fn no_secret_reaches_pacesims_output() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_) = servers("no_secret_reaches_pacesims_output") else {
        return;
    };
    let redis_file = scenario_file(
        "secret-redis",
        "name = \"s\"\nduration = \"1s\"\n[pacer]\nbackend = \"redis_gcra\"\nrate = 10.0\n[processes]\ncount = 1\n",
    );
    let rf = redis_file.display().to_string();
    for (url, secret) in [
        ("redis://u:Sek@r3tPW9@127.0.0.1:6379/", "r3tPW9"),
        ("redis+unix:///nonexistent-pacesim.sock?pass=Zsecret77", "Zsecret77"),
    ] {
        let (code, out, err) = common::pacesim_env(&["live", &rf], &[("REDIS_URL", url)]);
        assert_eq!(code, 2, "{url}: {out}{err}");
        assert!(!err.contains(secret) && !out.contains(secret), "{url}: leaked:\n{err}");
        assert!(!err.contains("Sek"), "{url}: part of the password leaked:\n{err}");
        assert!(err.contains("***"), "{url}: {err}");
    }
    // a worker that prints the store's secrets to stderr, then fails: its quoted stderr is
    // redacted (the server trusts loopback, so the password is accepted and ignored)
    let pg_file = scenario_file(
        "secret-pg",
        "name = \"s\"\nduration = \"2s\"\n[pacer]\nbackend = \"row\"\nrate = 10.0\n[processes]\ncount = 1\n",
    );
    let leaky = "python3 -c 'import os, sys; print(\"pw\", os.environ[\"PGPASSWORD\"], \"url\", \
                 os.environ[\"PACESIM_PG_URL\"], file=sys.stderr); sys.exit(3)'";
    let pw = "Pw0rd-s3cret!x";
    let (code, out, err) = common::pacesim_env(
        &["live", &pg_file.display().to_string(), "--worker-cmd", leaky],
        &[("PGPASSWORD", pw)],
    );
    let _ = std::fs::remove_dir_all(redis_file.parent().unwrap());
    let _ = std::fs::remove_dir_all(pg_file.parent().unwrap());
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("exited (exit status: 3)"), "{err}");
    assert!(err.contains("pw ***"), "the worker's stderr is quoted, redacted: {err}");
    // the URL carries the password percent-encoded: neither form appears
    assert!(!err.contains(pw) && !err.contains("Pw0rd-s3cret%21x"), "leaked:\n{err}");
}

/// Item 5: a worker's child that starts its own session (`Popen(start_new_session=True)`)
/// escapes the process-group kill; it still dies with the run, before cleanup, so it cannot
/// re-create the run's keys afterwards.
#[test]
fn a_setsid_grandchild_dies_with_the_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if servers("a_setsid_grandchild_dies_with_the_run").is_none() || !python_ok("a_setsid_grandchild_dies_with_the_run")
    {
        return;
    }
    let file = scenario_file(
        "setsid",
        "name = \"setsid\"\nduration = \"2s\"\n[pacer]\nbackend = \"redis_gcra\"\nrate = 10.0\n[processes]\ncount = 1\n",
    );
    let pidfile = file.with_file_name("grandchild.pid");
    std::fs::write(
        file.with_file_name("w.py"),
        format!(
            r#"
import os, subprocess, sys, time, urllib.request
ghost = '''
import os, time, redis
r = redis.Redis.from_url(os.environ["PACESIM_REDIS_URL"])
open({pidfile:?}, "w").write(str(os.getpid()))
while True:
    r.set(os.environ["PACESIM_REDIS_PREFIX"] + "ghost", "1")
    time.sleep(0.05)
'''
subprocess.Popen([sys.executable, "-c", ghost], start_new_session=True)
while True:
    urllib.request.urlopen(os.environ["PACESIM_DESTINATION_URL"]).read()
    time.sleep(0.1)
"#,
            pidfile = pidfile.display().to_string()
        ),
    )
    .unwrap();
    let cmd = format!("python3 {}", file.with_file_name("w.py").display());
    // both routes: the CLI (a subreaper) and the library (the environment tags alone)
    for cli in [true, false] {
        let _ = std::fs::remove_file(&pidfile);
        let run_id = if cli {
            let (code, out, err) = common::pacesim(&["live", &file.display().to_string(), "--worker-cmd", &cmd]);
            assert!(code == 0 || code == 1, "{out}{err}");
            err.lines()
                .find_map(|l| l.strip_prefix("live: run "))
                .and_then(|l| l.split(':').next())
                .unwrap_or_else(|| panic!("no run line in {err}"))
                .to_string()
        } else {
            let sc = Scenario::load(&file).unwrap();
            let w = pacesim::live::worker_command(&sc, &file, Some(&cmd)).unwrap().unwrap();
            run_blocking(&sc, &opts().with_worker(w)).unwrap().run_id
        };
        let ghost: u32 = std::fs::read_to_string(&pidfile)
            .expect("the grandchild started")
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let state = std::fs::read_to_string(format!("/proc/{ghost}/stat")).ok();
        let alive = state.as_deref().is_some_and(|s| {
            !matches!(
                s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()),
                Some("Z" | "X")
            )
        });
        if alive {
            // SAFETY: killing the stray this test's worker started.
            unsafe {
                libc::kill(ghost as libc::pid_t, libc::SIGKILL);
            }
        }
        let mut con = redis();
        let keys = lredis::keys_with_prefix(&mut con, &lredis::key_prefix(&run_id)).unwrap();
        let _ = lredis::delete_prefix(&mut con, &lredis::key_prefix(&run_id));
        assert!(!alive, "cli={cli}: the setsid grandchild {ghost} outlived the run");
        assert!(keys.is_empty(), "cli={cli}: keys re-created after cleanup: {keys:?}");
    }
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
