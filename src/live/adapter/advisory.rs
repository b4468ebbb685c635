//! `advisory` live: `pg_try_advisory_lock` / `pg_advisory_unlock` on the worker's own session,
//! keyed per run ([`crate::live::pg::advisory_key`]).

use super::{Executed, LiveStore, Open, PgLink, StoreFailure, StoreUse, pg_failure};
use crate::backend::advisory::Advisory;
use crate::backend::lockset::{LockOp, LockReply};
use crate::live::pg;
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use std::time::Duration;

/// The server's advisory locks.
#[derive(Debug)]
pub struct AdvisorySql {
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
                let (taken, at) = pg::advisory_try(&rc.client, &schema, lock).await.map_err(pg_failure)?;
                Ok(Executed::tried(taken, lock, at))
            }
            LockOp::Unlock { lock } => {
                let (mine, at) = pg::advisory_unlock(&rc.client, &schema, lock)
                    .await
                    .map_err(pg_failure)?;
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

    async fn open(spec: &WorkerSpec, _b: &Advisory, timeout: Duration) -> Result<AdvisorySql, String> {
        Ok(AdvisorySql {
            link: PgLink::new(spec, timeout)?,
        })
    }

    async fn connect(&mut self) -> Result<(), String> {
        self.link.connect().await
    }
}
