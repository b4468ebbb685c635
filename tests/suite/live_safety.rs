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
use pacesim::scenario::FOUR_LIMITERS;
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
    crate::common::live_not_run(test, &why);
    None
}

fn python_ok(test: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::common::live_not_run(test, "python3 with redis-py missing");
    }
    ok
}

fn redis() -> redis::Connection {
    RedisSettings::from_env().connect(None, Duration::from_secs(2)).unwrap()
}

fn opts() -> LiveOptions {
    LiveOptions::with_exe(env!("CARGO_BIN_EXE_pacesim"), &pacesim::registry::Registered)
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

    let r = run_blocking(&pacesim::registry::parse("four.toml", FOUR_LIMITERS).unwrap(), &opts());
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

    let mut sc = pacesim::registry::parse("four.toml", FOUR_LIMITERS).unwrap();
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
            let sc = pacesim::registry::load(&file).unwrap();
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

/// Issue 52 item 1: a worker or `[live] setup` that prints its environment as JSON
/// (`json.dumps(os.environ)`, with and without `ensure_ascii`) or as a Python repr, and a
/// worker whose event line has the password as a field name: no form of the password (as is,
/// JSON- or repr-escaped, percent-encoded) reaches the forwarded `worker N:` lines, the quoted
/// stderr or the final error of `live`, `conform` and setup. Passwords with `\`, `"` and
/// non-ASCII (the server trusts loopback: the password is handed on and ignored).
#[test]
fn no_escaped_secret_reaches_pacesims_output() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if servers("no_escaped_secret_reaches_pacesims_output").is_none() {
        return;
    }
    let body = "name = \"s\"\nduration = \"2s\"\n[pacer]\nbackend = \"row\"\nrate = 10.0\n[processes]\ncount = 1\n";
    let file = scenario_file("escaped", body);
    let dir = file.parent().unwrap().to_path_buf();
    let dump = "import json, os, sys\n\
                env = {'PGPASSWORD': os.environ['PGPASSWORD'], **os.environ}\n\
                for line in (json.dumps(env), json.dumps(env, ensure_ascii=False), repr(env), ascii(env)):\n\
                \x20   print(line, file=sys.stderr)\n";
    std::fs::write(dir.join("dump.py"), format!("{dump}sys.stdout.flush()\nsys.exit(3)\n")).unwrap();
    // stdout: an event line whose field name is the password
    std::fs::write(
        dir.join("field.py"),
        "import json, os, sys, time\n\
         print(json.dumps({'ev': 'grant', os.environ['PGPASSWORD']: 1}), flush=True)\n\
         print(json.dumps({'ev': 'grant', os.environ['PGPASSWORD']: 1}, ensure_ascii=False), flush=True)\n\
         time.sleep(30)\n",
    )
    .unwrap();
    let setup_file = scenario_file(
        "escaped-setup",
        &format!("{body}[live]\ncommand = [\"python3\", \"dump.py\"]\nsetup = [\"python3\", \"dump.py\"]\n"),
    );
    std::fs::write(
        setup_file.with_file_name("dump.py"),
        format!("{dump}print('setup env printed', flush=True)\nsys.exit(3)\n"),
    )
    .unwrap();
    let f = file.display().to_string();
    let dump_cmd = format!("python3 {}", dir.join("dump.py").display());
    let field_cmd = format!("python3 {}", dir.join("field.py").display());
    let sf = setup_file.display().to_string();
    for pw in ["Sek\\r3t\"PW9", "Sekrét99x", "Zq\\u00e9\"'/%+ ✓😀7"] {
        let forms = crate::fuzz_secrets::escaped_forms(pw);
        let tail: String = pw.chars().skip(pw.chars().count() - 3).collect();
        for (what, args) in [
            (
                "live, env dumps",
                vec!["live", f.as_str(), "--worker-cmd", dump_cmd.as_str()],
            ),
            (
                "conform, env dumps",
                vec!["conform", f.as_str(), "--worker-cmd", dump_cmd.as_str()],
            ),
            (
                "live, field name",
                vec!["live", f.as_str(), "--worker-cmd", field_cmd.as_str()],
            ),
            ("setup, env dumps", vec!["live", sf.as_str()]),
        ] {
            let (code, out, err) = common::pacesim_env(&args, &[("PGPASSWORD", pw)]);
            assert_eq!(code, 2, "{what} ({pw}): {out}{err}");
            for form in &forms {
                assert!(
                    !err.contains(form.as_str()) && !out.contains(form.as_str()),
                    "{what}: the password {pw:?} leaked as {form:?}:\n{err}"
                );
            }
            assert!(!err.contains(tail.as_str()), "{what}: part of {pw:?} leaked:\n{err}");
            // the dumps put the password first, so it is inside every bounded excerpt
            assert!(err.contains("***"), "{what}: {err}");
            match what {
                "live, field name" => assert!(err.contains("printed on stdout, line 1"), "{what}: {err}"),
                "setup, env dumps" => assert!(err.contains("[live] setup `python3 dump.py` failed"), "{what}: {err}"),
                _ => {
                    assert!(err.contains("exited (exit status: 3)"), "{what}: {err}");
                    assert!(err.contains("worker 0: {\""), "{what}: the lines are forwarded: {err}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(setup_file.parent().unwrap());
}

/// Issue 52 item 2: the lease table is pacesim's own or it is refused, before any row is read
/// or written: a lease schema or table another role (no superuser) owns, a trigger, a rule, row-level
/// security, or a view in its place. Each is made in a database of this test's own (so the
/// server's real lease table, which concurrent runs use, is never touched), and a trigger or
/// rule that would have run records that it did in a table the test reads.
#[test]
fn a_lease_table_pacesim_does_not_own_or_that_has_triggers_is_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some((pgs, rt)) = servers("a_lease_table_pacesim_does_not_own_or_that_has_triggers_is_refused") else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let tag = format!("{}_{nanos:x}", std::process::id());
    let db = format!("pacesim_t52_lease_{tag}");
    let role = format!("pacesim_t52_hostile_{tag}");
    let admin = rt.block_on(pgs.connect(Duration::from_secs(3))).unwrap();
    let made = rt.block_on(async {
        admin.batch_execute(&format!("CREATE DATABASE {db}")).await?;
        admin.batch_execute(&format!("CREATE ROLE {role} NOLOGIN")).await
    });
    if let Err(e) = made {
        let _ = rt.block_on(admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")));
        crate::common::live_not_run("lease table", &format!("cannot create a database and a role: {e}"));
        return;
    }
    let mut in_db = pgs.clone();
    in_db.dbname = db.clone();
    let c = rt.block_on(in_db.connect(Duration::from_secs(3))).unwrap();
    let table = "CREATE TABLE pacesim_lease.runs (schema_name text PRIMARY KEY, owner text NOT NULL, \
                 heartbeat timestamptz NOT NULL)";
    let cases = [
        (
            format!("CREATE SCHEMA pacesim_lease AUTHORIZATION {role}; {table}; ALTER TABLE pacesim_lease.runs OWNER TO {role}"),
            format!("its schema pacesim_lease is owned by role `{role}`, neither pacesim's nor a superuser"),
        ),
        (
            format!("CREATE SCHEMA pacesim_lease; {table}; ALTER TABLE pacesim_lease.runs OWNER TO {role}"),
            format!("it is owned by role `{role}`, neither pacesim's nor a superuser"),
        ),
        (
            format!(
                "CREATE SCHEMA pacesim_lease; {table};
                 CREATE FUNCTION public.evil() RETURNS trigger LANGUAGE plpgsql AS
                   $$BEGIN INSERT INTO public.fired VALUES ('trigger ' || current_user); RETURN NEW; END$$;
                 CREATE TRIGGER evil BEFORE INSERT OR UPDATE OR DELETE ON pacesim_lease.runs
                   FOR EACH ROW EXECUTE FUNCTION public.evil()"
            ),
            "it has trigger(s) `evil` that pacesim did not make".to_string(),
        ),
        (
            format!(
                "CREATE SCHEMA pacesim_lease; {table};
                 CREATE RULE evil_rule AS ON INSERT TO pacesim_lease.runs DO ALSO INSERT INTO public.fired VALUES ('rule')"
            ),
            "it has rule(s) `evil_rule` that pacesim did not make".to_string(),
        ),
        (
            format!(
                "CREATE SCHEMA pacesim_lease; {table}; ALTER TABLE pacesim_lease.runs ENABLE ROW LEVEL SECURITY;
                 CREATE POLICY spy ON pacesim_lease.runs USING (true)"
            ),
            "it has row-level security policies `spy`".to_string(),
        ),
        (
            "CREATE SCHEMA pacesim_lease; CREATE VIEW pacesim_lease.runs AS
               SELECT ''::text AS schema_name, ''::text AS owner, now() AS heartbeat"
                .to_string(),
            "it is not an ordinary table".to_string(),
        ),
    ];
    let file = scenario_file(
        "lease-table",
        "name = \"s\"\nduration = \"1s\"\n[pacer]\nbackend = \"row\"\nrate = 10.0\n[processes]\ncount = 1\n",
    );
    let reset = "DROP SCHEMA IF EXISTS pacesim_lease CASCADE; DROP FUNCTION IF EXISTS public.evil();
                 DROP TABLE IF EXISTS public.fired; CREATE TABLE public.fired (what text)";
    let mut outcomes = Vec::new();
    for (sql, says) in &cases {
        rt.block_on(c.batch_execute(&format!("{reset}; {sql}"))).unwrap();
        let (code, out, err) = common::pacesim_env(&["live", &file.display().to_string()], &[("PGDATABASE", &db)]);
        let fired: i64 = rt
            .block_on(c.query_one("SELECT count(*) FROM public.fired", &[]))
            .unwrap()
            .get(0);
        let schemas: i64 = rt
            .block_on(c.query_one(
                "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pacesim\\_live\\_%'",
                &[],
            ))
            .unwrap()
            .get(0);
        outcomes.push((says.clone(), code, fired, schemas, format!("{out}{err}")));
    }
    // pacesim's own lease table, made by it in a clean database, is accepted
    rt.block_on(c.batch_execute(reset)).unwrap();
    let (clean_code, _, clean_err) =
        common::pacesim_env(&["live", &file.display().to_string()], &[("PGDATABASE", &db)]);
    drop(c);
    rt.block_on(async {
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            .await;
        let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS {role}")).await;
    });
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    for (says, code, fired, schemas, text) in outcomes {
        assert_eq!(code, 2, "{says}: not refused:\n{text}");
        assert!(
            text.contains("refusing the lease table pacesim_lease.runs") && text.contains(&says),
            "{says}:\n{text}"
        );
        assert!(text.contains("DROP"), "the error says what to do: {text}");
        assert_eq!(fired, 0, "{says}: a trigger or rule ran as pacesim's role:\n{text}");
        assert_eq!(schemas, 0, "{says}: a run schema was made:\n{text}");
    }
    assert!(
        clean_code == 0 || clean_code == 1,
        "pacesim's own lease table: {clean_err}"
    );
}

/// Issue 52 item 3: Redis keys are bytes. A key under `pacesim:lease:` that is not UTF-8
/// (`SET pacesim:lease:<0xff> x`) does not stop a run, and is left alone; a run's own keys
/// that are not UTF-8 (a worker's) are deleted by its cleanup, with its lease. In a Redis
/// database of this test's own (`/13`), so no other run meets the key meanwhile.
#[test]
fn a_key_that_is_not_utf8_never_blocks_a_run_or_its_cleanup() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if servers("a_key_that_is_not_utf8_never_blocks_a_run_or_its_cleanup").is_none()
        || !python_ok("a_key_that_is_not_utf8_never_blocks_a_run_or_its_cleanup")
    {
        return;
    }
    let base = RedisSettings::from_env().url;
    let Some(url) = base
        .strip_suffix('/')
        .or(Some(base.as_str()))
        .filter(|u| u.matches('/').count() == 2)
        .map(|u| format!("{u}/13"))
    else {
        crate::common::live_not_run("byte keys", &format!("REDIS_URL {base} names a database"));
        return;
    };
    let db = RedisSettings { url: url.clone() };
    let mut con = db.connect(None, Duration::from_secs(2)).unwrap();
    let stray: Vec<u8> = [
        &b"pacesim:lease:"[..],
        &[0xff, 0xfe],
        format!("t52-{}", std::process::id()).as_bytes(),
    ]
    .concat();
    let _: () = redis::cmd("SET").arg(&stray[..]).arg("x").query(&mut con).unwrap();
    let file = scenario_file(
        "byte-keys",
        "name = \"s\"\nduration = \"1s\"\n[pacer]\nbackend = \"redis_gcra\"\nrate = 10.0\n[processes]\ncount = 1\n",
    );
    std::fs::write(
        file.with_file_name("w.py"),
        "import os, time, urllib.request, redis\n\
         r = redis.Redis.from_url(os.environ['PACESIM_REDIS_URL'])\n\
         p = os.environ['PACESIM_REDIS_PREFIX'].encode()\n\
         r.set(p + b'\\xff\\xfe-mine', b'\\x80')\n\
         r.hset(p + b'\\xc3(', b'\\xff', b'\\xfe')\n\
         while True:\n\
         \x20   urllib.request.urlopen(os.environ['PACESIM_DESTINATION_URL']).read()\n\
         \x20   time.sleep(0.1)\n",
    )
    .unwrap();
    let cmd = format!("python3 {}", file.with_file_name("w.py").display());
    let (code, out, err) = common::pacesim_env(
        &["live", &file.display().to_string(), "--worker-cmd", &cmd],
        &[("REDIS_URL", &url)],
    );
    let run_id = err
        .lines()
        .find_map(|l| l.strip_prefix("live: run "))
        .and_then(|l| l.split(':').next())
        .map(str::to_string);
    let left = run_id
        .as_deref()
        .map(|id| lredis::keys_with_prefix(&mut con, &lredis::key_prefix(id)).unwrap());
    let lease: bool = run_id
        .as_deref()
        .is_some_and(|id| redis::cmd("EXISTS").arg(lredis::lease_key(id)).query(&mut con).unwrap());
    let stray_kept: bool = redis::cmd("EXISTS").arg(&stray[..]).query(&mut con).unwrap();
    // everything this test made goes, whatever the outcome
    let _: i64 = redis::cmd("DEL").arg(&stray[..]).query(&mut con).unwrap();
    if let Some(id) = &run_id {
        let _ = lredis::delete_prefix(&mut con, &lredis::key_prefix(id));
        let _ = lredis::drop_lease(&mut con, id);
    }
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    assert!(code == 0 || code == 1, "the run failed:\n{out}{err}");
    assert!(!err.contains("warning: live cleanup"), "{err}");
    let left = left.expect("the run names its id");
    assert!(left.is_empty(), "the run's own keys were left: {left:?}\n{err}");
    assert!(!lease, "the run's lease was left:\n{err}");
    assert!(stray_kept, "a key that is not the run's was deleted");
}
