//! `row` and `shared_cache` live: the pace statement on PostgreSQL ([`crate::live::pg`]), on
//! the store's clock (`clock_timestamp()`), or on the caller's (`process_monotonic`).

use super::{
    AdapterError, Executed, LiveStore, Open, PgLink, Served, StoreFailure, StoreUse, multiplier_change, pg_failure,
    streak_decay,
};
use crate::backend::Signal;
use crate::backend::backoff::BackoffReply;
use crate::backend::row::{ClockSource, PaceOp, PaceReply, Row};
use crate::dist::Dist;
use crate::live::pg::{Granted, RowClient};
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use crate::scenario::BackoffCfg;
use std::time::Duration;

/// `row`: the `UPDATE ... GREATEST(clock_timestamp(), next_allowed_at) ... RETURNING`.
#[derive(Debug)]
pub struct RowSql {
    link: PgLink,
    interval_us: f64,
    clock: ClockSource,
    stale_after_us: f64,
    in_transaction: Option<Dist>,
    backoff: BackoffCfg,
}

/// `shared_cache`: the same arithmetic as one upsert under a cache key.
#[derive(Debug)]
pub struct CacheSql {
    link: PgLink,
    interval_us: f64,
    backoff: BackoffCfg,
}

/// A granted slot as the reply and the grant event (µs of the store clock to ns).
fn slot_reply(g: Granted, on_process_clock: bool) -> Executed<PaceReply> {
    let (slot, now) = (g.slot_us * 1000, g.now_us * 1000);
    let interval = (g.interval_us * 1000) as u64;
    let multiplier = g.multiplier;
    let served = if on_process_clock {
        Served::GrantOnProcessClock {
            slot,
            now,
            interval,
            multiplier,
        }
    } else {
        Served::Grant {
            slot,
            now,
            interval,
            multiplier,
        }
    };
    Executed::reply(PaceReply::Slot { slot, now }).with(served)
}

/// A backoff update's reply and its multiplier change.
fn backoff_reply(signal: Signal, b: Option<crate::live::pg::BackoffRow>, cfg: &BackoffCfg) -> Executed<PaceReply> {
    let Some(b) = b else {
        // No cache entry yet (a report before any reservation): nothing to update.
        return Executed::reply(PaceReply::Backoff(BackoffReply {
            multiplier: 1.0,
            decay: false,
        }));
    };
    let decay = streak_decay(signal, b.streak_from as i64, b.streak_to as i64, cfg.decay_after);
    let mut e = Executed::reply(PaceReply::Backoff(BackoffReply {
        multiplier: b.to,
        decay,
    }));
    e.served.extend(multiplier_change(signal, b.from, b.to, b.at_us * 1000));
    e
}

/// Warm a connection as a long-lived one is warm (plans, catalog caches): run both
/// reservations once and roll them back, before the run starts.
async fn warm(link: &mut PgLink) -> Result<(), AdapterError> {
    let rc = link.client().await.map_err(|failure| AdapterError::Connect {
        store: "PostgreSQL",
        failure,
    })?;
    let go = async {
        rc.client.batch_execute("BEGIN").await?;
        let _ = rc.reserve(1.0, None).await;
        rc.client.batch_execute("ROLLBACK").await?;
        rc.client.batch_execute("BEGIN").await?;
        let _ = rc.cache_reserve(1.0, None).await;
        rc.client.batch_execute("ROLLBACK").await
    };
    go.await.map_err(AdapterError::Warm)
}

impl LiveStore for RowSql {
    type Op = PaceOp;
    type Reply = PaceReply;

    async fn execute(&mut self, op: &PaceOp, rng: &mut Rng) -> Result<Executed<PaceReply>, StoreFailure> {
        let rc: std::sync::Arc<RowClient> = self.link.client().await?;
        match *op {
            PaceOp::Reserve { proc_now, multiplier } => {
                let hold = self.in_transaction.as_ref().map(|d| d.sample(rng));
                if hold.is_some() {
                    rc.client.batch_execute("BEGIN").await.map_err(pg_failure)?;
                }
                let g = match self.clock {
                    ClockSource::Store => rc.reserve(self.interval_us, multiplier).await,
                    ClockSource::ProcessMonotonic => {
                        rc.reserve_process_clock(
                            self.interval_us,
                            multiplier,
                            proc_now as f64 / 1e9,
                            self.stale_after_us,
                        )
                        .await
                    }
                }
                .map_err(pg_failure)?;
                if let Some(h) = hold {
                    // The caller's transaction stays open (holding the row lock) for `hold`.
                    self.link.commit_after(rc, Duration::from_nanos(h.0));
                }
                let mut e = slot_reply(g, self.clock == ClockSource::ProcessMonotonic);
                e.in_transaction = hold.is_some();
                Ok(e)
            }
            PaceOp::Report(signal) => {
                let b = rc.backoff(signal, &self.backoff).await.map_err(pg_failure)?;
                Ok(backoff_reply(signal, Some(b), &self.backoff))
            }
        }
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for RowSql {
    type Backend = Row;
    const STORE: StoreUse = StoreUse::Postgres;

    async fn connect(&mut self) -> Result<(), AdapterError> {
        warm(&mut self.link).await
    }

    async fn open(spec: &WorkerSpec, row: &Row, timeout: Duration) -> Result<RowSql, AdapterError> {
        let link = PgLink::new(spec, timeout)?;
        Ok(RowSql {
            link,
            interval_us: row.interval().0 as f64 / 1000.0,
            clock: row.clock(),
            // no reset: a bound far past any run (about 31 years)
            stale_after_us: row.stale_after().map_or(1e15, |s| s.0 as f64 / 1000.0),
            in_transaction: row.in_transaction().cloned(),
            backoff: spec.scenario.backoff.clone(),
        })
    }
}

impl LiveStore for CacheSql {
    type Op = PaceOp;
    type Reply = PaceReply;

    async fn execute(&mut self, op: &PaceOp, _rng: &mut Rng) -> Result<Executed<PaceReply>, StoreFailure> {
        let rc = self.link.client().await?;
        match *op {
            PaceOp::Reserve { multiplier, .. } => {
                let g = rc
                    .cache_reserve(self.interval_us, multiplier)
                    .await
                    .map_err(pg_failure)?;
                Ok(slot_reply(g, false))
            }
            PaceOp::Report(signal) => {
                let b = rc.cache_backoff(signal, &self.backoff).await.map_err(pg_failure)?;
                Ok(backoff_reply(signal, b, &self.backoff))
            }
        }
    }

    fn reset(&mut self) {
        self.link.reset();
    }
}

impl Open for CacheSql {
    type Backend = Row;
    const STORE: StoreUse = StoreUse::Postgres;

    async fn connect(&mut self) -> Result<(), AdapterError> {
        warm(&mut self.link).await
    }

    async fn open(spec: &WorkerSpec, row: &Row, timeout: Duration) -> Result<CacheSql, AdapterError> {
        let link = PgLink::new(spec, timeout)?;
        Ok(CacheSql {
            link,
            interval_us: row.interval().0 as f64 / 1000.0,
            backoff: spec.scenario.backoff.clone(),
        })
    }
}
