//! `claim_row` live: claim and release a slot row (`UPDATE ... WHERE holder IS NULL`); the
//! holder id is the worker's session.

use super::{Executed, LiveStore, Open, PgLink, StoreFailure, StoreUse, pg_failure};
use crate::backend::claim_row::ClaimRow;
use crate::backend::lockset::{LockOp, LockReply};
use crate::live::pg;
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use crate::scenario::Scenario;
use std::time::Duration;

/// The slot rows.
#[derive(Debug)]
pub struct ClaimSql {
    link: PgLink,
    holder: i32,
}

impl LiveStore for ClaimSql {
    type Op = LockOp;
    type Reply = LockReply;

    async fn execute(&mut self, op: &LockOp, _rng: &mut Rng) -> Result<Executed<LockReply>, StoreFailure> {
        let rc = self.link.client().await?;
        let schema = self.link.schema().to_string();
        match *op {
            LockOp::TryLock { lock } => Ok(
                match pg::claim(&rc.client, &schema, lock as i32, self.holder)
                    .await
                    .map_err(pg_failure)?
                {
                    Some((true, at)) => Executed::tried(true, lock, at),
                    Some((false, _)) => Executed::reply(LockReply::Locked { lock }),
                    None => Executed::tried(false, lock, 0),
                },
            ),
            LockOp::Unlock { lock } => {
                let (mine, at) = pg::release(&rc.client, &schema, lock as i32, self.holder)
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

impl Open for ClaimSql {
    type Backend = ClaimRow;
    const STORE: StoreUse = StoreUse::Postgres;

    fn slots(sc: &Scenario) -> u32 {
        sc.pacer
            .options
            .get("locks")
            .and_then(|v| v.as_integer())
            .map_or(1, |k| k.max(1) as u32)
    }

    async fn open(spec: &WorkerSpec, _b: &ClaimRow, timeout: Duration) -> Result<ClaimSql, String> {
        Ok(ClaimSql {
            link: PgLink::new(spec, timeout)?,
            holder: ((spec.pid as i32) << 16) | (spec.incarnation as i32 & 0xFFFF),
        })
    }

    async fn connect(&mut self) -> Result<(), String> {
        self.link.connect().await
    }
}
