//! `advisory` live: `pg_try_advisory_lock` / `pg_advisory_unlock` on the worker's own session,
//! keyed per run ([`advisory_key`]).

use super::{AdapterError, Executed, LiveStore, Open, PgLink, StoreFailure, StoreUse, pg_failure};
use crate::backend::advisory::Advisory;
use crate::backend::lockset::{LockOp, LockReply};
use crate::live::pg::NOW_US;
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use std::time::Duration;
use tokio_postgres::Client;

/// The server's advisory locks.
#[derive(Debug)]
pub(crate) struct AdvisorySql {
    link: PgLink,
}

impl LiveStore for AdvisorySql {
    type Op = LockOp;
    type Reply = LockReply;

    async fn execute(&mut self, op: &LockOp, _rng: &mut Rng) -> Result<Executed<LockReply>, StoreFailure> {
        let rc = self.link.client().await?;
        let schema = self.link.schema().to_string();
        match *op {
            LockOp::TryLock { lock } => {
                let (taken, at) = advisory_try(&rc.client, &schema, lock).await.map_err(pg_failure)?;
                Ok(Executed::tried(taken, lock, at))
            }
            LockOp::Unlock { lock } => {
                let (mine, at) = advisory_unlock(&rc.client, &schema, lock).await.map_err(pg_failure)?;
                Ok(Executed::unlocked(mine, lock, at))
            }
            // `redis_lock`'s platform cooldown: this design keeps none
            LockOp::CoolDown { .. } | LockOp::Cooling { .. } => Ok(Executed::reply(LockReply::NotCooling)),
        }
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for AdvisorySql {
    type Backend = Advisory;
    const STORE: StoreUse = StoreUse::Postgres;

    async fn open(spec: &WorkerSpec, _b: &Advisory, timeout: Duration) -> Result<AdvisorySql, AdapterError> {
        Ok(AdvisorySql {
            link: PgLink::new(spec, timeout)?,
        })
    }

    async fn connect(&mut self) -> Result<(), AdapterError> {
        self.link.connect().await
    }
}

// ---- the backend's SQL ----------------------------------------------------------------------

/// `advisory`: the lock number for lock `i` of a run (distinct per run).
pub fn advisory_key(schema: &str, i: u32) -> i64 {
    let h = schema.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    });
    ((h & 0x7fff_ffff_0000_0000) | i as u64) as i64
}

/// `advisory`: try lock `i` without blocking (`pg_try_advisory_lock`). True if taken (or
/// already held by this session: the lock is re-entrant), and the store clock (µs) read
/// just after.
pub async fn advisory_try(c: &Client, schema: &str, i: u32) -> Result<(bool, i64), tokio_postgres::Error> {
    let r = c
        .query_one(
            &format!("SELECT pg_try_advisory_lock($1), {NOW_US}"),
            &[&advisory_key(schema, i)],
        )
        .await?;
    Ok((r.get(0), r.get(1)))
}

/// `advisory`: release lock `i`; true if this session held it, and the store clock (µs) read
/// just before.
pub(crate) async fn advisory_unlock(c: &Client, schema: &str, i: u32) -> Result<(bool, i64), tokio_postgres::Error> {
    let r = c
        .query_one(
            &format!("SELECT {NOW_US}, pg_advisory_unlock($1)"),
            &[&advisory_key(schema, i)],
        )
        .await?;
    Ok((r.get(1), r.get(0)))
}
