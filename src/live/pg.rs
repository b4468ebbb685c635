//! PostgreSQL for live runs: the run's schema (created, and dropped even on failure or
//! Ctrl-C), and the real statements each store-backed backend runs.
//!
//! Every run gets its own schema, `pacesim_live_<parent pid>_<random>`, holding:
//!
//! | table   | used by        | shape |
//! |---------|----------------|-------|
//! | `pace`  | `row`          | one row per destination: `next_allowed_at`, `backoff_multiplier`, `clean_streak` |
//! | `cache` | `shared_cache` | a key-value cache table (`cache_key`, `value`, `expires`), the pace under one key |
//! | `slots` | `claim_row`    | one row per concurrency slot: `holder`, `claimed_at` |
//!
//! Each schema has a lease (`pacesim_lease.runs`: owner and a heartbeat the run renews every
//! 2 s); start-up cleanup drops only schemas whose lease is stale, so runs on other hosts or
//! in other containers sharing the server never lose theirs. Redis keys have the same lease
//! (`pacesim:lease:<run>`, a TTL renewed by the heartbeat).
//!
//! Advisory locks live in the server's memory, keyed by a number derived from the schema name,
//! so concurrent runs never contend.
//!
//! Times cross the wire as integer microseconds since the Unix epoch (PostgreSQL's own
//! resolution), and become nanoseconds of the store clock's frame in the trace.

use crate::backend::Signal;
use crate::pacer::Status;
use crate::scenario::BackoffCfg;
use std::time::Duration;
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

/// The store clock in µs since the Unix epoch, as a SQL expression.
pub(crate) const NOW_US: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";

/// The destination's key in `pace` (one destination per run).
pub(crate) const DESTINATION: &str = "dest";

/// A fresh schema name for a run.
pub fn schema_name(run_id: &str) -> String {
    format!("pacesim_live_{run_id}")
}

/// True when `name` is exactly a schema name pacesim creates: `pacesim_live_<pid>_<8 hex>`,
/// optionally followed by `_calibrate` (`conform`'s calibration). Start-up cleanup drops
/// nothing else, whatever a lease row says: the name is read from a table anyone with write
/// access can fill, so it is data, never SQL.
pub fn is_own_schema(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("pacesim_live_") else {
        return false;
    };
    let rest = rest.strip_suffix("_calibrate").unwrap_or(rest);
    let Some((pid, hex)) = rest.split_once('_') else {
        return false;
    };
    !pid.is_empty()
        && pid.len() <= 10
        && pid.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 8
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Server options (`PGOPTIONS`, or a connection's `options`) with the run's `schema` first on
/// the `search_path`, after any `options` already given: what every connection to the run's
/// database gets (a worker's, pacesim's own [`crate::live::adapter::PgLink`], a setup's), so an
/// unqualified table name finds the run's schema.
pub(crate) fn search_path_options(options: Option<&str>, schema: &str) -> String {
    match options {
        Some(o) if !o.trim().is_empty() => format!("{o} -c search_path={schema}"),
        _ => format!("-c search_path={schema}"),
    }
}

/// `name` as a quoted SQL identifier (`"` doubled), for the one place a schema name goes into
/// a statement's text (DDL takes no parameters).
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Create the run's schema and tables (`slots` gets `locks` rows). `schema` must be one of
/// pacesim's own names ([`is_own_schema`]): anything else is refused before any SQL runs.
pub async fn create_schema(c: &Client, schema: &str, locks: u32) -> Result<(), SchemaError> {
    assert_own(schema)?;
    c.batch_execute(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.pace (
             destination text PRIMARY KEY,
             next_allowed_at timestamptz NOT NULL,
             backoff_multiplier float8 NOT NULL DEFAULT 1,
             clean_streak int4 NOT NULL DEFAULT 0);
         INSERT INTO {schema}.pace (destination, next_allowed_at) VALUES ('{DESTINATION}', to_timestamp(0));
         CREATE TABLE {schema}.cache (cache_key text PRIMARY KEY, value text NOT NULL, expires timestamptz NOT NULL);
         CREATE TABLE {schema}.slots (slot int4 PRIMARY KEY, holder int4, claimed_at timestamptz);
         INSERT INTO {schema}.slots (slot) SELECT generate_series(0, {} - 1);",
        locks.max(1)
    ))
    .await?;
    Ok(())
}

/// Run a backend's own statements ([`crate::live::adapter::Open::tables`]) in the run's
/// schema: one transaction, the schema first on the `search_path`. On an error nothing of them
/// stays (the transaction is rolled back).
pub async fn create_own_tables(c: &Client, schema: &str, statements: &[String]) -> Result<(), SchemaError> {
    assert_own(schema)?;
    if statements.is_empty() {
        return Ok(());
    }
    c.batch_execute(&format!("BEGIN; SET LOCAL search_path TO {}", quote_ident(schema)))
        .await?;
    let mut r = Ok(());
    for s in statements {
        r = c.batch_execute(s).await;
        if r.is_err() {
            break;
        }
    }
    match r {
        Ok(()) => Ok(c.batch_execute("COMMIT").await?),
        Err(e) => {
            let _ = c.batch_execute("ROLLBACK").await;
            Err(e.into())
        }
    }
}

/// Drop the run's schema and everything in it. Only one of pacesim's own names
/// ([`is_own_schema`]), quoted: a stored name like `x; DROP SCHEMA victim CASCADE; --` is
/// refused, never run.
pub async fn drop_schema(c: &Client, schema: &str) -> Result<(), SchemaError> {
    assert_own(schema)?;
    Ok(
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema)))
            .await?,
    )
}

/// `Ok` for one of pacesim's own schema names; otherwise an error, and no statement runs.
fn assert_own(schema: &str) -> Result<(), SchemaError> {
    if is_own_schema(schema) {
        Ok(())
    } else {
        Err(SchemaError::NotOurs(schema.chars().take(80).collect()))
    }
}

/// Why creating or dropping a schema failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The name is not one pacesim creates ([`is_own_schema`]); nothing was run.
    #[error("refused schema name {0:?}: not one pacesim creates (pacesim_live_<pid>_<8 hex digits>)")]
    NotOurs(String),
    /// The server's error.
    #[error(transparent)]
    Pg(#[from] tokio_postgres::Error),
}

/// The lease table: one row per live run's schema, with its owner (host and process) and a
/// heartbeat the run refreshes every [`HEARTBEAT`]. Runs on other hosts or in other containers
/// share the server, so a schema is provably abandoned only when its lease has not been
/// refreshed for [`LEASE_STALE`]; a schema without a lease is never touched.
pub const LEASES: &str = "pacesim_lease.runs";
/// How often a run refreshes its lease (PostgreSQL row and Redis key).
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A lease older than this is abandoned (its run was SIGKILLed or its host is gone).
pub const LEASE_STALE: Duration = Duration::from_secs(60);

/// The lease table's schema and name, as [`LEASES`] spells them together.
const LEASE_SCHEMA: &str = "pacesim_lease";
const LEASE_TABLE: &str = "runs";

/// Why the lease table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The lease schema or table is not pacesim's alone: another role owns it, or it has a
    /// trigger, a rule or a row-level security policy pacesim did not make (any of which
    /// would run as pacesim's role, often a superuser, on every write). Nothing was written.
    #[error("{0}")]
    Untrusted(String),
    /// The server's error.
    #[error(transparent)]
    Pg(#[from] tokio_postgres::Error),
}

/// Create the lease table if it is missing, and make sure that what is there is pacesim's
/// own: the schema [`LEASES`] is in and the table itself owned by the connection's role (or by
/// a superuser, who could do anything as that role anyway; never by a group it merely belongs
/// to, whose other members could add a trigger), an
/// ordinary table with pacesim's three columns, and no trigger, rule or row-level security
/// policy on it (pacesim makes none). Anything else is refused before pacesim reads or writes
/// a row ([`LeaseError::Untrusted`], naming the object and what to do): `CREATE ... IF NOT
/// EXISTS` alone would reuse whatever someone else made under that name.
pub async fn ensure_lease_table(c: &Client) -> Result<(), LeaseError> {
    check_lease_table(c).await?;
    let create = format!(
        "CREATE SCHEMA IF NOT EXISTS {LEASE_SCHEMA};
         CREATE TABLE IF NOT EXISTS {LEASES} (
             schema_name text PRIMARY KEY, owner text NOT NULL, heartbeat timestamptz NOT NULL)"
    );
    // two runs creating the table at once: one of them sees a unique violation; once more
    if c.batch_execute(&create).await.is_err() {
        c.batch_execute(&create).await?;
    }
    check_lease_table(c).await
}

/// [`ensure_lease_table`]'s check of what exists now (nothing yet is fine).
async fn check_lease_table(c: &Client) -> Result<(), LeaseError> {
    let me: String = c.query_one("SELECT current_user::text", &[]).await?.get(0);
    let refuse = |what: String, todo: &str| {
        LeaseError::Untrusted(format!(
            "refusing the lease table {LEASES}: {what}; pacesim writes its leases only to a schema and table \
             its own role (`{me}`) or a superuser owns, with no trigger, rule or policy on it, since any of \
             those would run as pacesim's role on every write. {todo}"
        ))
    };
    let drop_schema = format!(
        "drop the schema (`DROP SCHEMA {LEASE_SCHEMA} CASCADE`, when no live run is going: pacesim makes it again)"
    );
    let drop_it = format!("Look at it, then {drop_schema}, or run pacesim as the role that owns it");
    let Some(schema) = c
        .query_opt(
            "SELECT n.oid, pg_get_userbyid(n.nspowner)::text,
                    n.nspowner = r.oid OR (SELECT rolsuper FROM pg_roles WHERE oid = n.nspowner)
               FROM pg_namespace n, pg_roles r
              WHERE n.nspname = $1 AND r.rolname = current_user",
            &[&LEASE_SCHEMA],
        )
        .await?
    else {
        return Ok(());
    };
    let (nsp, owner, ours): (u32, String, bool) = (schema.get(0), schema.get(1), schema.get(2));
    if !ours {
        return Err(refuse(
            format!("its schema {LEASE_SCHEMA} is owned by role `{owner}`, neither pacesim's nor a superuser"),
            &drop_it,
        ));
    }
    match LeaseTable::read(c, nsp).await? {
        None => Ok(()),
        Some(t) => match t.refusal(&drop_it, &drop_schema) {
            None => Ok(()),
            Some((what, todo)) => Err(refuse(what, &todo)),
        },
    }
}

/// What the catalog says of an existing lease table.
struct LeaseTable {
    /// `relkind` (`r`: an ordinary table).
    kind: String,
    owner: String,
    /// Owned by pacesim's role or a superuser.
    ours: bool,
    /// Row-level security enabled (or forced).
    rls: bool,
    triggers: Vec<String>,
    rules: Vec<String>,
    policies: Vec<String>,
    columns: Vec<String>,
}

impl LeaseTable {
    /// The lease table in schema `nsp` (an oid), if there is one.
    async fn read(c: &Client, nsp: u32) -> Result<Option<LeaseTable>, tokio_postgres::Error> {
        let t = c
            .query_opt(
                "SELECT c.relkind::text, pg_get_userbyid(c.relowner)::text,
                        c.relowner = r.oid OR (SELECT rolsuper FROM pg_roles WHERE oid = c.relowner),
                        c.relrowsecurity OR c.relforcerowsecurity,
                        coalesce((SELECT array_agg(tgname::text ORDER BY tgname) FROM pg_trigger WHERE tgrelid = c.oid), '{}'),
                        coalesce((SELECT array_agg(rulename::text ORDER BY rulename) FROM pg_rewrite WHERE ev_class = c.oid), '{}'),
                        coalesce((SELECT array_agg(polname::text ORDER BY polname) FROM pg_policy WHERE polrelid = c.oid), '{}'),
                        coalesce((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
                                   WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped), '{}')
                   FROM pg_class c, pg_roles r
                  WHERE c.relnamespace = $1 AND c.relname = $2 AND r.rolname = current_user",
                &[&nsp, &LEASE_TABLE],
            )
            .await?;
        Ok(t.map(|t| LeaseTable {
            kind: t.get(0),
            owner: t.get(1),
            ours: t.get(2),
            rls: t.get(3),
            triggers: t.get(4),
            rules: t.get(5),
            policies: t.get(6),
            columns: t.get(7),
        }))
    }

    /// Why pacesim does not write to it, and what to do about that (`drop_it`, `drop_schema`:
    /// the usual advice); `None`: it is pacesim's own, as pacesim makes it.
    fn refusal(&self, drop_it: &str, drop_schema: &str) -> Option<(String, String)> {
        let names = |v: &[String]| v.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let drop_them = |what: &str| format!("Drop them (`{what}`), or {drop_schema}");
        if self.kind != "r" {
            let what = format!("it is not an ordinary table (relkind `{}`)", self.kind);
            return Some((what, drop_it.to_string()));
        }
        if !self.ours {
            let what = format!(
                "it is owned by role `{}`, neither pacesim's nor a superuser",
                self.owner
            );
            return Some((what, drop_it.to_string()));
        }
        if !self.triggers.is_empty() {
            let what = format!("it has trigger(s) {} that pacesim did not make", names(&self.triggers));
            return Some((what, drop_them(&format!("DROP TRIGGER <name> ON {LEASES}"))));
        }
        if !self.rules.is_empty() {
            let what = format!("it has rule(s) {} that pacesim did not make", names(&self.rules));
            return Some((what, drop_them(&format!("DROP RULE <name> ON {LEASES}"))));
        }
        if self.rls || !self.policies.is_empty() {
            let what = format!(
                "it has row-level security{} that pacesim did not make",
                if self.policies.is_empty() {
                    " enabled".to_string()
                } else {
                    format!(" policies {}", names(&self.policies))
                }
            );
            let todo = format!(
                "Drop them (`DROP POLICY <name> ON {LEASES}; ALTER TABLE {LEASES} DISABLE ROW LEVEL SECURITY`) \
                 or {drop_schema}"
            );
            return Some((what, todo));
        }
        if self.columns != ["schema_name", "owner", "heartbeat"] {
            let what = format!(
                "its columns are {}, not pacesim's (`schema_name`, `owner`, `heartbeat`)",
                names(&self.columns)
            );
            return Some((what, drop_it.to_string()));
        }
        None
    }
}

/// Take the lease of `schema` for `owner` (before the schema exists), in a lease table
/// [`ensure_lease_table`] made or found to be pacesim's own.
pub async fn take_lease(c: &Client, schema: &str, owner: &str) -> Result<(), LeaseError> {
    ensure_lease_table(c).await?;
    c.execute(
        &format!("INSERT INTO {LEASES} VALUES ($1, $2, clock_timestamp())"),
        &[&schema, &owner],
    )
    .await?;
    Ok(())
}

/// Refresh the lease of `schema`.
pub async fn renew_lease(c: &Client, schema: &str) -> Result<(), tokio_postgres::Error> {
    c.execute(
        &format!("UPDATE {LEASES} SET heartbeat = clock_timestamp() WHERE schema_name = $1"),
        &[&schema],
    )
    .await
    .map(drop)
}

/// Drop the lease of `schema` (after its schema).
pub async fn drop_lease(c: &Client, schema: &str) -> Result<(), tokio_postgres::Error> {
    c.execute(&format!("DELETE FROM {LEASES} WHERE schema_name = $1"), &[&schema])
        .await
        .map(drop)
}

/// Schemas of earlier runs that are provably abandoned: a lease not refreshed for
/// [`LEASE_STALE`] on the server's clock, whichever host owned it. Schemas without a lease
/// (another version's, or a run still creating its lease) are never listed.
pub(crate) async fn orphan_schemas(c: &Client) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = c
        .query(
            &format!(
                "SELECT schema_name FROM {LEASES}
                  WHERE heartbeat < clock_timestamp() - $1::float8 * interval '1 second'
                    AND schema_name LIKE 'pacesim\\_live\\_%'"
            ),
            &[&LEASE_STALE.as_secs_f64()],
        )
        .await?;
    // a name pacesim would not create is never listed, whatever the row says
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|n| is_own_schema(n))
        .collect())
}

/// Names of the run's schema if it still exists (tests use this to prove cleanup).
pub async fn schema_exists(c: &Client, schema: &str) -> Result<bool, tokio_postgres::Error> {
    let r = c
        .query_one(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
            &[&schema],
        )
        .await?;
    Ok(r.get::<_, i64>(0) > 0)
}

/// The `row` reservation statement, on the store's clock: the design record's
/// `GREATEST(clock_timestamp(), next_allowed_at) + interval * backoff_multiplier`, returning
/// the slot, `clock_timestamp()`, the multiplier and the interval applied (µs, as the store
/// rounded it). `$1` is the interval in microseconds, `$2` a per-process multiplier (NULL: the
/// row's).
pub(crate) fn reserve_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.pace
            SET next_allowed_at = GREATEST(clock_timestamp(), next_allowed_at)
                                + ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond'
          WHERE destination = '{DESTINATION}'
      RETURNING (extract(epoch FROM next_allowed_at
                   - ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond') * 1000000)::int8,
                (extract(epoch FROM clock_timestamp()) * 1000000)::int8,
                COALESCE($2::float8, backoff_multiplier),
                (extract(epoch FROM ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond') * 1000000)::int8"
    )
}

/// The `clock = "process_monotonic"` defect: the same statement on the caller's own reading
/// `$3` (seconds of its per-process epoch), with the "stale row" reset a per-process clock
/// design needs (a pace further ahead than `$4` microseconds is overwritten).
pub(crate) fn reserve_process_clock_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.pace
            SET next_allowed_at = CASE WHEN next_allowed_at - to_timestamp($3::float8) > $4::float8 * interval '1 microsecond'
                                       THEN to_timestamp($3::float8)
                                       ELSE GREATEST(to_timestamp($3::float8), next_allowed_at) END
                                + ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond'
          WHERE destination = '{DESTINATION}'
      RETURNING (extract(epoch FROM next_allowed_at
                   - ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond') * 1000000)::int8,
                (extract(epoch FROM to_timestamp($3::float8)) * 1000000)::int8,
                COALESCE($2::float8, backoff_multiplier),
                (extract(epoch FROM ($1::float8 * COALESCE($2::float8, backoff_multiplier)) * interval '1 microsecond') * 1000000)::int8"
    )
}

/// The pace row as the migration creates it (nothing if it exists): what the reservation
/// runs when its `UPDATE` finds no row. `to_timestamp(0)` is in the past, so the statement run
/// again hands out `now` (the simulator's `next_allowed_at = None`), with the backoff columns
/// rested.
pub fn recreate_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.pace (destination, next_allowed_at) VALUES ('{DESTINATION}', to_timestamp(0))
         ON CONFLICT (destination) DO NOTHING"
    )
}

/// What a `state_lost` fault deleted from a run's schema: the state each PostgreSQL-backed
/// mechanism keeps there, as the simulator's `on_state_lost` of each backend loses it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LostRows {
    /// `row`: the pace row's multiplier, if the row existed.
    pub(crate) pace_multiplier: Option<f64>,
    /// `shared_cache`: the cache entry's multiplier, if the entry existed.
    pub(crate) cache_multiplier: Option<f64>,
    /// `claim_row`: each claimed slot and its holder (`pid << 16 | incarnation`).
    pub claims: Vec<(i32, i32)>,
}

/// The `state_lost` fault on PostgreSQL, in one transaction of a helper connection, on this
/// run's schema only: delete the pace row (`row`), the cache entries (`shared_cache`) and
/// the slot rows (`claim_row`). The slot rows come back free at once (the claim statement
/// only updates rows, so the run stands for the code that recreates them, as the simulator's
/// `claim_row` does: every claim vanishes under its holder). The pace row and the cache entry
/// are recreated by the next reservation ([`recreate_sql`], [`cache_reserve_sql`]). Advisory
/// locks live in the server's memory, not in a table: nothing of theirs is deleted.
pub(crate) async fn lose_state(c: &mut Client, schema: &str) -> Result<LostRows, tokio_postgres::Error> {
    let tx = c.transaction().await?;
    let pace = tx
        .query(&format!("DELETE FROM {schema}.pace RETURNING backoff_multiplier"), &[])
        .await?;
    let cache = tx
        .query(
            &format!("DELETE FROM {schema}.cache RETURNING split_part(value, ':', 2)::float8"),
            &[],
        )
        .await?;
    let slots = tx
        .query(&format!("DELETE FROM {schema}.slots RETURNING slot, holder"), &[])
        .await?;
    let mut lost = LostRows {
        pace_multiplier: pace.first().map(|r| r.get(0)),
        cache_multiplier: cache.first().map(|r| r.get(0)),
        claims: Vec::new(),
    };
    let mut free = Vec::new();
    for r in &slots {
        let slot: i32 = r.get(0);
        free.push(slot);
        if let Some(h) = r.get::<_, Option<i32>>(1) {
            lost.claims.push((slot, h));
        }
    }
    lost.claims.sort_unstable();
    tx.execute(
        &format!("INSERT INTO {schema}.slots (slot) SELECT unnest($1::int4[])"),
        &[&free],
    )
    .await?;
    tx.commit().await?;
    Ok(lost)
}

/// The new multiplier of the backoff schedule, in SQL over the old multiplier `o.m` and
/// streak `o.k`: the [`crate::pacer::Backoff`] rules (IEEE float8, so bit-identical to it; the
/// live tests check this). `$1` is the step (`pressure`, `ok`, `error`, `decay`, `streak_ok`,
/// `streak_reset`), `$2` the cap, `$3` the factor, `$4` `decay_after`.
const NEW_M: &str = "(CASE $1::text
        WHEN 'pressure' THEN LEAST($2::float8, o.m * $3::float8)
        WHEN 'ok' THEN CASE WHEN o.k + 1 >= $4::int4 THEN GREATEST(1.0::float8, o.m / $3::float8) ELSE o.m END
        WHEN 'decay' THEN GREATEST(1.0::float8, o.m / $3::float8)
        WHEN 'streak_ok' THEN 1.0::float8
        WHEN 'streak_reset' THEN 1.0::float8
        ELSE o.m END)";

/// The new clean streak (see [`NEW_M`]).
const NEW_K: &str = "(CASE WHEN $1::text IN ('ok', 'streak_ok') AND o.k + 1 < $4::int4 THEN o.k + 1 ELSE 0 END)";

/// The shared backoff update, one atomic statement on the `pace` row: the
/// [`crate::pacer::Backoff`] schedule in SQL (IEEE float8, so bit-identical to it). Returns
/// the old and new multiplier and streak.
pub(crate) fn backoff_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.pace p
            SET backoff_multiplier = {NEW_M}, clean_streak = {NEW_K}
           FROM (SELECT destination, backoff_multiplier AS m, clean_streak AS k
                   FROM {schema}.pace WHERE destination = '{DESTINATION}' FOR UPDATE) o
          WHERE p.destination = o.destination
      RETURNING o.m, p.backoff_multiplier, o.k, p.clean_streak, {NOW_US}"
    )
}

/// The SQL step for a backoff signal, and the status that names its cause.
pub fn backoff_step(signal: Signal) -> (&'static str, Status) {
    let class = |s: Status| match s {
        Status::TooManyRequests | Status::Unavailable => "pressure",
        Status::Ok => "ok",
        Status::Error => "error",
    };
    match signal {
        Signal::Response(s) | Signal::Bump(s) => (class(s), s),
        Signal::Decay => ("decay", Status::Ok),
        Signal::Streak(s) if s.is_clean() => ("streak_ok", s),
        Signal::Streak(s) => ("streak_reset", s),
    }
}

/// The result of a backoff update.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct BackoffRow {
    /// Multiplier before.
    pub from: f64,
    /// Multiplier after.
    pub to: f64,
    /// Streak before.
    pub(crate) streak_from: i32,
    /// Streak after.
    pub streak_to: i32,
    /// The store clock (µs) when it applied the update (the row still locked).
    pub at_us: i64,
}

/// One reservation's answer, in microseconds of the granting clock.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Granted {
    /// The slot.
    pub(crate) slot_us: i64,
    /// The clock's reading when it granted.
    pub now_us: i64,
    /// The multiplier applied.
    pub multiplier: f64,
    /// The interval applied, `interval * multiplier` as the store rounded it (µs).
    pub(crate) interval_us: i64,
}

/// A client with the run's statements prepared.
#[derive(Debug)]
pub struct RowClient {
    /// The connection.
    pub client: Client,
    reserve: tokio_postgres::Statement,
    reserve_proc: tokio_postgres::Statement,
    backoff: tokio_postgres::Statement,
    cache_reserve: tokio_postgres::Statement,
    cache_backoff: tokio_postgres::Statement,
    recreate: tokio_postgres::Statement,
}

impl RowClient {
    /// Prepare the statements on `client`.
    pub async fn prepare(client: Client, schema: &str) -> Result<RowClient, tokio_postgres::Error> {
        let reserve = client.prepare(&reserve_sql(schema)).await?;
        let reserve_proc = client.prepare(&reserve_process_clock_sql(schema)).await?;
        let backoff = client.prepare(&backoff_sql(schema)).await?;
        let cache_reserve = client.prepare(&cache_reserve_sql(schema)).await?;
        let cache_backoff = client.prepare(&cache_backoff_sql(schema)).await?;
        let recreate = client.prepare(&recreate_sql(schema)).await?;
        Ok(RowClient {
            client,
            reserve,
            reserve_proc,
            backoff,
            cache_reserve,
            cache_backoff,
            recreate,
        })
    }

    /// Run a statement on the pace row; if the row is gone (a `state_lost` fault truncated the
    /// table), recreate it as the migration wrote it and run the statement once more: "a
    /// truncated table recreates its row rather than wedging" (global-pace-row, Verification).
    async fn on_row(
        &self,
        statement: &tokio_postgres::Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
        if let Some(r) = self.client.query_opt(statement, params).await? {
            return Ok(r);
        }
        self.client.execute(&self.recreate, &[]).await?;
        self.client.query_one(statement, params).await
    }

    /// Reserve on the store clock.
    pub async fn reserve(&self, interval_us: f64, multiplier: Option<f64>) -> Result<Granted, tokio_postgres::Error> {
        let r = self.on_row(&self.reserve, &[&interval_us, &multiplier]).await?;
        Ok(granted(&r))
    }

    /// Reserve on the caller's clock (`proc_now_s` seconds of its epoch).
    pub(crate) async fn reserve_process_clock(
        &self,
        interval_us: f64,
        multiplier: Option<f64>,
        proc_now_s: f64,
        stale_after_us: f64,
    ) -> Result<Granted, tokio_postgres::Error> {
        let params: [&(dyn ToSql + Sync); 4] = [&interval_us, &multiplier, &proc_now_s, &stale_after_us];
        let r = self.on_row(&self.reserve_proc, &params).await?;
        Ok(granted(&r))
    }

    /// Apply a backoff signal to the row.
    pub async fn backoff(&self, signal: Signal, cfg: &BackoffCfg) -> Result<BackoffRow, tokio_postgres::Error> {
        let (step, _) = backoff_step(signal);
        let k = cfg.decay_after.max(1) as i32;
        let r = self.on_row(&self.backoff, &[&step, &cfg.cap, &cfg.factor, &k]).await?;
        Ok(BackoffRow {
            from: r.get(0),
            to: r.get(1),
            streak_from: r.get(2),
            streak_to: r.get(3),
            at_us: r.get(4),
        })
    }

    /// `shared_cache`: reserve under the cache key (see [`cache_reserve_sql`]).
    pub async fn cache_reserve(
        &self,
        interval_us: f64,
        multiplier: Option<f64>,
    ) -> Result<Granted, tokio_postgres::Error> {
        let r = self
            .client
            .query_one(&self.cache_reserve, &[&CACHE_KEY, &interval_us, &multiplier])
            .await?;
        Ok(granted(&r))
    }

    /// `shared_cache`: apply a backoff signal to the cache entry's multiplier and streak.
    pub async fn cache_backoff(
        &self,
        signal: Signal,
        cfg: &BackoffCfg,
    ) -> Result<Option<BackoffRow>, tokio_postgres::Error> {
        let (step, _) = backoff_step(signal);
        let k = cfg.decay_after.max(1) as i32;
        let r = self
            .client
            .query_opt(&self.cache_backoff, &[&step, &cfg.cap, &cfg.factor, &k, &CACHE_KEY])
            .await?;
        Ok(r.map(|r| BackoffRow {
            from: r.get(0),
            to: r.get(1),
            streak_from: r.get(2),
            streak_to: r.get(3),
            at_us: r.get(4),
        }))
    }
}

fn granted(r: &tokio_postgres::Row) -> Granted {
    Granted {
        slot_us: r.get(0),
        now_us: r.get(1),
        multiplier: r.get(2),
        interval_us: r.get(3),
    }
}

// ---- the other store-backed mechanisms of the design records ----------------------------

/// `shared_cache`'s key: a prefix the framework's cache `make_key` can never emit.
pub(crate) const CACHE_KEY: &str = ":pacesim:pace:dest";

/// `shared_cache`: the pace kept under one key of a key-value cache table, advanced by one
/// atomic upsert (`INSERT ... ON CONFLICT DO UPDATE`, which serialises on the key's row), the
/// row's arithmetic: `slot = max(now, next); next = slot + interval * m`. The value holds
/// `next_us:multiplier:streak`; a missing entry (a culled cache) is recreated by the same
/// statement. `$1` key, `$2` interval (µs), `$3` a per-process multiplier (NULL: the entry's).
/// Returns the slot, `now` (µs), the multiplier and the interval applied (µs).
pub fn cache_reserve_sql(schema: &str) -> String {
    // clock_timestamp() is read where it is used: after the key's row lock is taken (as in the
    // row statement), not at statement start.
    let now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";
    let m_old = "split_part(c.value, ':', 2)::float8";
    format!(
        "INSERT INTO {schema}.cache AS c (cache_key, value, expires)
         VALUES ($1::text, ({now_us} + round($2::float8 * COALESCE($3::float8, 1.0))::int8)::text || ':1:0', 'infinity')
         ON CONFLICT (cache_key) DO UPDATE
            SET value = (GREATEST({now_us}, split_part(c.value, ':', 1)::int8)
                         + round($2::float8 * COALESCE($3::float8, {m_old}))::int8)::text
                        || ':' || split_part(c.value, ':', 2) || ':' || split_part(c.value, ':', 3)
         RETURNING split_part(c.value, ':', 1)::int8 - round($2::float8 * COALESCE($3::float8, {m_old}))::int8,
                   {now_us},
                   COALESCE($3::float8, {m_old}),
                   round($2::float8 * COALESCE($3::float8, {m_old}))::int8"
    )
}

/// `shared_cache`: the backoff update on the cache entry (the same schedule; `$5` is the key).
pub(crate) fn cache_backoff_sql(schema: &str) -> String {
    format!(
        "UPDATE {schema}.cache c
            SET value = split_part(o.value, ':', 1) || ':' || {NEW_M}::text || ':' || {NEW_K}::text
           FROM (SELECT cache_key, value, split_part(value, ':', 2)::float8 AS m, split_part(value, ':', 3)::int4 AS k
                   FROM {schema}.cache WHERE cache_key = $5::text FOR UPDATE) o
          WHERE c.cache_key = o.cache_key
      RETURNING o.m, split_part(c.value, ':', 2)::float8, o.k, split_part(c.value, ':', 3)::int4, {NOW_US}"
    )
}

/// The `long_transaction` fault: from a helper connection, lock the pace row (and the cache
/// and slot rows) in an open transaction for `hold`, then commit.
pub(crate) async fn hold_row_lock(c: &Client, schema: &str, hold: Duration) -> Result<(), tokio_postgres::Error> {
    c.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM {schema}.pace FOR UPDATE; SELECT 1 FROM {schema}.cache FOR UPDATE;"
    ))
    .await?;
    tokio::time::sleep(hold).await;
    c.batch_execute("COMMIT").await
}
