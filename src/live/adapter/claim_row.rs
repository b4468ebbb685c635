//! `claim_row` live: claim and release a slot row (`UPDATE ... WHERE holder IS NULL`); the
//! holder id is the worker's session.

use super::{AdapterError, Executed, LiveStore, Open, PgLink, StoreFailure, StoreUse, pg_failure};
use crate::backend::claim_row::ClaimRow;
use crate::backend::lockset::{LockOp, LockReply};
use crate::live::pg::NOW_US;
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use crate::scenario::Scenario;
use std::time::Duration;
use tokio_postgres::Client;

/// The slot rows.
#[derive(Debug)]
pub(crate) struct ClaimSql {
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
                match claim(&rc.client, &schema, lock as i32, self.holder)
                    .await
                    .map_err(pg_failure)?
                {
                    Some((true, at)) => Executed::tried(true, lock, at),
                    Some((false, _)) => Executed::reply(LockReply::Locked { lock }),
                    None => Executed::tried(false, lock, 0),
                },
            ),
            LockOp::Unlock { lock } => {
                let (mine, at) = release(&rc.client, &schema, lock as i32, self.holder)
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

    async fn open(spec: &WorkerSpec, _b: &ClaimRow, timeout: Duration) -> Result<ClaimSql, AdapterError> {
        Ok(ClaimSql {
            link: PgLink::new(spec, timeout)?,
            holder: ((spec.pid as i32) << 16) | (spec.incarnation as i32 & 0xFFFF),
        })
    }

    async fn connect(&mut self) -> Result<(), AdapterError> {
        self.link.connect().await
    }
}

// ---- the backend's SQL ----------------------------------------------------------------------

/// `claim_row`: claim slot row `slot` for `holder` if it is free (or already `holder`'s).
/// `Some((true, t))`: newly claimed at store time `t` (µs); `Some((false, _))`: already
/// ours; `None`: busy. A holder killed with SIGKILL leaves its row claimed forever.
pub async fn claim(
    c: &Client,
    schema: &str,
    slot: i32,
    holder: i32,
) -> Result<Option<(bool, i64)>, tokio_postgres::Error> {
    let r = c
        .query_one(
            &format!(
                "WITH u AS (UPDATE {schema}.slots SET holder = $2, claimed_at = clock_timestamp()
                             WHERE slot = $1 AND holder IS NULL RETURNING {NOW_US} AS t)
                 SELECT (SELECT count(*) FROM u), (SELECT holder FROM {schema}.slots WHERE slot = $1),
                        COALESCE((SELECT t FROM u), {NOW_US})"
            ),
            &[&slot, &holder],
        )
        .await?;
    let taken: i64 = r.get(0);
    let before: Option<i32> = r.get(1);
    let t: i64 = r.get(2);
    Ok(if taken == 1 {
        Some((true, t))
    } else if before == Some(holder) {
        Some((false, t))
    } else {
        None
    })
}

/// `claim_row`: release `slot` if `holder` holds it: whether it did, and the store clock (µs)
/// while the row was still locked (before the release committed).
pub async fn release(c: &Client, schema: &str, slot: i32, holder: i32) -> Result<(bool, i64), tokio_postgres::Error> {
    let r = c
        .query_opt(
            &format!(
                "UPDATE {schema}.slots SET holder = NULL, claimed_at = NULL WHERE slot = $1 AND holder = $2
                 RETURNING {NOW_US}"
            ),
            &[&slot, &holder],
        )
        .await?;
    Ok(match r {
        Some(r) => (true, r.get(0)),
        None => (false, 0),
    })
}

/// `claim_row`: the holders of every slot (tests).
pub async fn claims(c: &Client, schema: &str) -> Result<Vec<Option<i32>>, tokio_postgres::Error> {
    let rows = c
        .query(&format!("SELECT holder FROM {schema}.slots ORDER BY slot"), &[])
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
