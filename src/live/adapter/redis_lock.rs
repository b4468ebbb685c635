//! `redis_lock` live: `SET key token NX PX ttl` and a compare-and-delete script on Redis
//! ([`crate::live::redis`]); the token is the worker's session (`pid:incarnation`).

use super::{AdapterError, Executed, LiveStore, Open, RedisLink, StoreFailure, StoreUse, redis_failure};
use crate::backend::lockset::{LockOp, LockReply};
use crate::backend::redis_lock::RedisLock;
use crate::live::proto::WorkerSpec;
use crate::live::redis as lredis;
use crate::rng::Rng;
use std::time::Duration;

/// The walk lock's key.
#[derive(Debug)]
pub struct LockScript {
    link: RedisLink,
    token: String,
    ttl_ms: u64,
}

impl LiveStore for LockScript {
    type Op = LockOp;
    type Reply = LockReply;

    async fn execute(&mut self, op: &LockOp, _rng: &mut Rng) -> Result<Executed<LockReply>, StoreFailure> {
        let key = self.link.key("lock");
        let (token, ttl_ms) = (self.token.clone(), self.ttl_ms);
        let con = self.link.con()?;
        match *op {
            LockOp::TryLock { lock } => {
                let (taken, at) = lredis::lock_try(con, &key, &token, ttl_ms).map_err(redis_failure)?;
                Ok(Executed::tried(taken, lock, at))
            }
            LockOp::Unlock { lock } => {
                let (_, at) = lredis::lock_release(con, &key, &token).map_err(redis_failure)?;
                // The walk (the critical section) is over, whether or not the key was ours.
                Ok(Executed::unlocked(true, lock, at))
            }
            // The platform cooldown needs [[platforms]], which live mode refuses up front (one
            // destination, one lock key per run): a live run never sends these. Not cooling.
            LockOp::CoolDown { .. } | LockOp::Cooling { .. } => Ok(Executed::reply(LockReply::NotCooling)),
        }
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for LockScript {
    type Backend = RedisLock;
    const STORE: StoreUse = StoreUse::Redis;

    async fn open(spec: &WorkerSpec, b: &RedisLock, timeout: Duration) -> Result<LockScript, AdapterError> {
        let link = RedisLink::new(spec, timeout)?;
        Ok(LockScript {
            link,
            token: format!("{}:{}", spec.pid, spec.incarnation),
            ttl_ms: b.ttl().0.div_ceil(1_000_000),
        })
    }

    async fn connect(&mut self) -> Result<(), AdapterError> {
        self.link.connect()
    }
}
