//! `redis_gcra` live: the GCRA script and the shared backoff hash on Redis
//! ([`crate::live::redis`]), on the server's clock (`TIME`).

use super::{
    AdapterError, Executed, LiveStore, Open, RedisLink, Served, StoreFailure, StoreUse, multiplier_change,
    redis_failure, streak_decay,
};
use crate::backend::backoff::BackoffReply;
use crate::backend::redis_gcra::{GcraOp, GcraReply, RedisGcra};
use crate::live::proto::WorkerSpec;
use crate::live::redis as lredis;
use crate::rng::Rng;
use crate::scenario::BackoffCfg;
use crate::time::Nanos;
use std::time::Duration;

/// The GCRA script.
#[derive(Debug)]
pub struct GcraScript {
    link: RedisLink,
    interval_us: f64,
    burst: u32,
    backoff: BackoffCfg,
}

impl LiveStore for GcraScript {
    type Op = GcraOp;
    type Reply = GcraReply;

    async fn execute(&mut self, op: &GcraOp, _rng: &mut Rng) -> Result<Executed<GcraReply>, StoreFailure> {
        let (key, bkey) = (self.link.key("gcra"), self.link.key("backoff"));
        let (interval_us, burst) = (self.interval_us, self.burst);
        let cfg = self.backoff.clone();
        let con = self.link.con()?;
        match *op {
            GcraOp::Gcra { multiplier } => {
                let g = lredis::gcra(con, &key, &bkey, interval_us, burst, multiplier).map_err(redis_failure)?;
                let now = g.now_us as i64 * 1000;
                if g.allowed {
                    Ok(Executed::reply(GcraReply::Allowed {
                        multiplier: g.multiplier,
                    })
                    .with(Served::Grant {
                        slot: now,
                        now,
                        interval: (g.interval_us * 1000.0).round() as u64,
                        multiplier: g.multiplier,
                    }))
                } else {
                    let retry_after = Nanos(((g.retry_at_us - g.now_us).max(0.0) * 1000.0).ceil() as u64);
                    Ok(Executed::reply(GcraReply::Denied {
                        retry_after,
                        multiplier: g.multiplier,
                    })
                    .with(Served::Deny))
                }
            }
            GcraOp::Report(signal) => {
                let (step, _) = crate::live::pg::backoff_step(signal);
                let (from, to, k0, k1, at) =
                    lredis::backoff(con, &bkey, step, cfg.cap, cfg.factor, cfg.decay_after).map_err(redis_failure)?;
                let decay = streak_decay(signal, k0, k1, cfg.decay_after);
                let mut e = Executed::reply(GcraReply::Backoff(BackoffReply { multiplier: to, decay }));
                e.served.extend(multiplier_change(signal, from, to, at * 1000));
                Ok(e)
            }
        }
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for GcraScript {
    type Backend = RedisGcra;
    const STORE: StoreUse = StoreUse::Redis;

    async fn open(spec: &WorkerSpec, b: &RedisGcra, timeout: Duration) -> Result<GcraScript, AdapterError> {
        let link = RedisLink::new(spec, timeout)?;
        Ok(GcraScript {
            link,
            interval_us: b.gcra().interval() as f64 / 1000.0,
            burst: b.gcra().burst(),
            backoff: spec.scenario.backoff.clone(),
        })
    }

    async fn connect(&mut self) -> Result<(), AdapterError> {
        self.link.connect()
    }
}
