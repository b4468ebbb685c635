//! Live adapters: each backend's store side, for real. A live worker runs the backend's own
//! process side through the one worker loop (`crate::worker`); only
//! [`crate::backend::StoreSide::serve`] is replaced, by a [`LiveStore`] that runs the real
//! operation (an SQL statement, a Lua script) against PostgreSQL or Redis.
//!
//! One file per backend. Each states which store it needs ([`Open::STORE`]), how a worker
//! opens its connection ([`Open::open`]), and how an operation runs ([`LiveStore::execute`]),
//! returning the reply and the store-side events it caused ([`Executed`]), each stamped with
//! the store's clock so the worker can place it on the run clock. [`LiveOf`] ties an options
//! type and an adapter into the registry's [`LiveSpec`].

// reached by the suite, not the team API
#[doc(hidden)]
pub mod advisory;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod claim_row;

/// The Redis client [`RedisLink::con`] hands out (the `redis` crate pacesim is built with),
/// re-exported so an adapter in another crate runs its scripts on that very type without
/// pinning the same version itself: `pacesim::live::adapter::redis::Script`.
pub use ::redis;
/// The PostgreSQL client behind [`PgLink`] (the `tokio-postgres` crate pacesim is built
/// with), re-exported for the same reason.
pub use ::tokio_postgres;
pub(crate) mod local;
pub(crate) mod redis_gcra;
pub(crate) mod redis_lock;
pub(crate) mod row;

mod contract;

pub use contract::{
    AdapterError, Backends, Executed, LiveSpec, LiveStore, Open, Served, StoreFailure, StoreUse, timeout,
};

use crate::backend::{Backend, Configure};
use crate::live::proto::WorkerSpec;
use crate::scenario::Scenario;
use crate::trace::StoreErrorKind;
use std::time::Duration;

/// The [`LiveSpec`] of options type `O` with adapter `S`.
#[derive(Debug)]
pub struct LiveOf<O, S>(std::marker::PhantomData<fn() -> (O, S)>);

impl<O, S> LiveOf<O, S> {
    /// The entry.
    pub const NEW: LiveOf<O, S> = LiveOf(std::marker::PhantomData);
}

impl<O, S> LiveSpec for LiveOf<O, S>
where
    O: Configure,
    S: Open<Backend = O::Backend> + LiveStore<Op = <O::Backend as Backend>::Op, Reply = <O::Backend as Backend>::Reply>,
{
    fn store(&self) -> StoreUse {
        S::STORE
    }
    fn slots(&self, sc: &Scenario) -> u32 {
        S::slots(sc)
    }
    fn tables(&self, sc: &Scenario) -> Vec<String> {
        S::tables(sc)
    }
    fn worker_main(&self, spec: WorkerSpec) -> i32 {
        let sc = &spec.scenario;
        let backend = match build::<O>(sc) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("pacesim worker: {e}");
                return 2;
            }
        };
        crate::live::worker::main_with::<O::Backend, S>(spec, backend)
    }
}

/// The backend of options type `O` with `sc`'s `[pacer]` options.
fn build<O: Configure>(sc: &Scenario) -> Result<O::Backend, crate::backend::options::OptionError> {
    crate::backend::options::parse::<O>(&sc.pacer.backend, &sc.pacer.options, false).and_then(|o| o.build(sc))
}

/// `row`'s live adapter.
pub static ROW: LiveOf<crate::backend::row::RowOptions, row::RowSql> = LiveOf::NEW;
/// `shared_cache`'s live adapter.
pub(crate) static SHARED_CACHE: LiveOf<crate::backend::shared_cache::SharedCacheOptions, row::CacheSql> = LiveOf::NEW;
/// `redis_gcra`'s live adapter.
pub(crate) static REDIS_GCRA: LiveOf<crate::backend::redis_gcra::RedisGcraOptions, redis_gcra::GcraScript> =
    LiveOf::NEW;
/// `local_divided`'s live adapter (no store).
pub(crate) static LOCAL_DIVIDED: LiveOf<crate::backend::local_divided::LocalDividedOptions, local::NoConn> =
    LiveOf::NEW;
/// `advisory`'s live adapter.
pub(crate) static ADVISORY: LiveOf<crate::backend::advisory::AdvisoryOptions, advisory::AdvisorySql> = LiveOf::NEW;
/// `claim_row`'s live adapter.
pub(crate) static CLAIM_ROW: LiveOf<crate::backend::claim_row::ClaimRowOptions, claim_row::ClaimSql> = LiveOf::NEW;
/// `redis_lock`'s live adapter.
pub(crate) static REDIS_LOCK: LiveOf<crate::backend::redis_lock::RedisLockOptions, redis_lock::LockScript> =
    LiveOf::NEW;
/// `local`'s live adapter (no store).
pub(crate) static LOCAL: LiveOf<crate::backend::local::LocalOptions, local::NoConn> = LiveOf::NEW;

// ---- connections shared by the adapters ----------------------------------------------------

/// A worker's PostgreSQL connection with the run's statements prepared, reconnected on
/// demand; it awaits an open transaction's COMMIT before the connection is used again.
#[derive(Debug)]
pub struct PgLink {
    target: crate::live::proto::PgStore,
    timeout: Duration,
    client: Option<std::sync::Arc<crate::live::pg::RowClient>>,
    // invariant: the COMMIT of an `in_transaction` reservation still to come; awaited before
    // the connection is used again.
    commit: Option<tokio::task::JoinHandle<bool>>,
}

impl PgLink {
    /// A link to the worker's PostgreSQL target; connects on first use.
    ///
    /// # Errors
    ///
    /// The worker was given no PostgreSQL target.
    pub fn new(spec: &WorkerSpec, timeout: Duration) -> Result<PgLink, AdapterError> {
        let target = spec.pg.clone().ok_or(AdapterError::NoTarget("PostgreSQL"))?;
        Ok(PgLink {
            target,
            timeout,
            client: None,
            commit: None,
        })
    }

    /// The run's schema.
    pub fn schema(&self) -> &str {
        &self.target.schema
    }

    /// The connection, (re)connected if needed.
    pub async fn client(&mut self) -> Result<std::sync::Arc<crate::live::pg::RowClient>, StoreFailure> {
        if let Some(c) = self.commit.take() {
            let ok = matches!(tokio::time::timeout(self.timeout, c).await, Ok(Ok(true)));
            if !ok {
                self.client = None;
            }
        }
        if let Some(r) = &self.client
            && !r.client.is_closed()
        {
            return Ok(std::sync::Arc::clone(r));
        }
        self.client = None;
        // the run's schema first on the search_path, as for an external worker (`PGOPTIONS`):
        // a backend's own table (`Open::tables`) is found by its unqualified name
        let mut settings = self.target.settings.clone();
        settings.options = Some(crate::live::pg::search_path_options(
            settings.options.as_deref(),
            &self.target.schema,
        ));
        let client = settings.connect(self.timeout).await.map_err(|m| {
            if m.detail.contains("timed out") {
                StoreFailure(StoreErrorKind::Timeout)
            } else {
                StoreFailure(StoreErrorKind::Refused)
            }
        })?;
        let rc = std::sync::Arc::new(
            crate::live::pg::RowClient::prepare(client, &self.target.schema)
                .await
                .map_err(pg_failure)?,
        );
        self.client = Some(std::sync::Arc::clone(&rc));
        Ok(rc)
    }

    /// Commit the caller's open transaction after `hold` (the row lock is held meanwhile).
    pub(crate) fn commit_after(&mut self, rc: std::sync::Arc<crate::live::pg::RowClient>, hold: Duration) {
        self.commit = Some(tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            rc.client.batch_execute("COMMIT").await.is_ok()
        }));
    }

    /// Connect now (a worker's first connection).
    ///
    /// # Errors
    ///
    /// The connection failed (refused or timed out).
    pub async fn connect(&mut self) -> Result<(), AdapterError> {
        self.client().await.map(drop).map_err(|failure| AdapterError::Connect {
            store: "PostgreSQL",
            failure,
        })
    }

    /// Forget the connection (its state is unknown).
    pub fn reset(&mut self) {
        self.client = None;
    }
}

/// A worker's Redis connection (blocking client with timeouts), reconnected on demand.
pub struct RedisLink {
    target: crate::live::proto::RedisStore,
    timeout: Duration,
    con: Option<redis::Connection>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink").field("target", &self.target).finish()
    }
}

impl RedisLink {
    /// A link to the worker's Redis target; connects on first use.
    ///
    /// # Errors
    ///
    /// The worker was given no Redis target.
    pub fn new(spec: &WorkerSpec, timeout: Duration) -> Result<RedisLink, AdapterError> {
        let target = spec.redis.clone().ok_or(AdapterError::NoTarget("Redis"))?;
        Ok(RedisLink {
            target,
            timeout,
            con: None,
        })
    }

    /// The run's key `name`.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.target.prefix)
    }

    /// The connection, (re)connected if needed.
    pub fn con(&mut self) -> Result<&mut redis::Connection, StoreFailure> {
        if self.con.is_none() {
            let via = self.target.via.as_ref().map(|(h, p)| (h.as_str(), *p));
            self.con = Some(self.target.settings.connect(via, self.timeout).map_err(redis_failure)?);
        }
        Ok(self.con.as_mut().expect("connected above"))
    }

    /// Connect now (a worker's first connection).
    ///
    /// # Errors
    ///
    /// The connection failed (refused or timed out).
    pub fn connect(&mut self) -> Result<(), AdapterError> {
        self.con().map(drop).map_err(|failure| AdapterError::Connect {
            store: "Redis",
            failure,
        })
    }

    /// Forget the connection.
    pub fn reset(&mut self) {
        self.con = None;
    }
}

/// A Redis error as a store failure (logged when it is not the network's).
pub fn redis_failure(e: redis::RedisError) -> StoreFailure {
    if e.is_timeout() {
        StoreFailure(StoreErrorKind::Timeout)
    } else {
        if !(e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()) {
            eprintln!("pacesim worker: Redis error: {e}");
        }
        StoreFailure(StoreErrorKind::Refused)
    }
}

/// A PostgreSQL error as a store failure (logged when it is not the connection's).
pub fn pg_failure(e: tokio_postgres::Error) -> StoreFailure {
    if let Some(db) = e.as_db_error() {
        let class = &db.code().code()[..2];
        // 08: connection exception, 57: operator intervention (shutdown, restart)
        if class != "08" && class != "57" {
            eprintln!(
                "pacesim worker: PostgreSQL error: {}",
                crate::live::settings::error_chain(&e)
            );
        }
    }
    if e.to_string().contains("timed out") {
        StoreFailure(StoreErrorKind::Timeout)
    } else {
        StoreFailure(StoreErrorKind::Refused)
    }
}

/// A multiplier change as a store-side event, if it changed.
pub(crate) fn multiplier_change(signal: crate::backend::Signal, from: f64, to: f64, at: i64) -> Option<Served> {
    let (_, status) = crate::live::pg::backoff_step(signal);
    let cause = crate::backend::backoff::cause_of(status);
    (from != to).then_some(Served::Multiplier { from, to, cause, at })
}

/// Did a streak signal reach the threshold (the reply's `decay`)?
pub(crate) fn streak_decay(signal: crate::backend::Signal, streak_from: i64, streak_to: i64, decay_after: u32) -> bool {
    matches!(signal, crate::backend::Signal::Streak(s) if s.is_clean())
        && streak_to == 0
        && streak_from + 1 >= decay_after.max(1) as i64
}
