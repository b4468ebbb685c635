//! The fault driver: one task per fault of the schedule, acting for real. Kills go to the
//! workers' supervisors; store outages, added latency and partitions go to the TCP proxies;
//! a long transaction holds the row lock from a helper connection; a lost state deletes the
//! run's rows and keys from helper connections. Each fault's start and end are logged as
//! `fault` events.

use crate::fault::FaultSpec;
use crate::live::clock::RunClock;
use crate::live::proxy::Proxy;
use crate::live::supervisor::Cmd;
use crate::live::{EventLog, pg};
use crate::rng::{self, Entity, Rng};
use crate::time::Nanos;
use crate::trace::Event;
use rand::RngExt;
use rand_distr::{Distribution, Exp};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Where a `state_lost` fault deletes: helper connections to the run's stores, made before
/// the run starts (so the fault is not late by a connect), and the run's schema and key
/// prefix. Nothing outside them is touched.
#[derive(Default)]
pub(super) struct StateStores {
    /// A PostgreSQL connection and the run's schema.
    pub pg: Option<(tokio_postgres::Client, String)>,
    /// A Redis connection and the run's key prefix.
    pub redis: Option<(redis::Connection, String)>,
}

impl std::fmt::Debug for StateStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStores")
            .field("schema", &self.pg.as_ref().map(|p| &p.1))
            .field("prefix", &self.redis.as_ref().map(|r| &r.1))
            .finish()
    }
}

/// The keys the Redis adapters keep under a run's prefix (`redis_lock`'s walk lock,
/// `redis_gcra`'s `tat` and backoff hash): deleted even if one appears after the scan.
const REDIS_STATE_KEYS: [&str; 3] = ["lock", "gcra", "backoff"];

/// Carry out a `state_lost` fault at `t`: delete the run's state in each store it uses, and log
/// what the simulator's `on_state_lost` logs for the same loss: each lock whose row or key
/// vanished under its holder (`lock_released`, reason `state_lost`) and a shared multiplier
/// above 1 dropping back to 1 (`multiplier`, cause `state_lost`).
async fn lose_state(stores: &mut StateStores, t: u64, log: &EventLog) -> Vec<String> {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    let rested = |from: f64, events: &mut Vec<Event>| {
        if from != 1.0 {
            events.push(Event::Multiplier {
                t,
                pid: None,
                from,
                to: 1.0,
                cause: crate::trace::MultiplierCause::StateLost,
            });
        }
    };
    if let Some((c, schema)) = &mut stores.pg {
        match pg::lose_state(c, schema).await {
            Ok(lost) => {
                for m in [lost.pace_multiplier, lost.cache_multiplier].into_iter().flatten() {
                    rested(m, &mut events);
                }
                for (slot, holder) in lost.claims {
                    events.push(Event::LockReleased {
                        t,
                        pid: (holder >> 16) as u32,
                        lock: slot as u32,
                        reason: crate::trace::ReleaseReason::StateLost,
                    });
                }
            }
            Err(e) => problems.push(format!("state_lost fault on PostgreSQL: {e}")),
        }
    }
    if let Some((con, prefix)) = stores.redis.take() {
        let r = tokio::task::spawn_blocking(move || {
            let mut con = con;
            let lost = crate::live::redis::lose_state(&mut con, &prefix, &REDIS_STATE_KEYS);
            (con, prefix, lost)
        })
        .await;
        match r {
            Ok((con, prefix, Ok(lost))) => {
                for (key, value) in lost {
                    match key.strip_prefix(prefix.as_str()) {
                        Some("backoff") => rested(value.parse().unwrap_or(1.0), &mut events),
                        Some("lock") => {
                            // the token is the holder's session, `pid:incarnation`
                            if let Some(pid) = value.split(':').next().and_then(|p| p.parse().ok()) {
                                events.push(Event::LockReleased {
                                    t,
                                    pid,
                                    lock: 0,
                                    reason: crate::trace::ReleaseReason::StateLost,
                                });
                            }
                        }
                        _ => {}
                    }
                }
                stores.redis = Some((con, prefix));
            }
            Ok((con, prefix, Err(e))) => {
                problems.push(format!("state_lost fault on Redis: {e}"));
                stores.redis = Some((con, prefix));
            }
            Err(e) => problems.push(format!("state_lost fault on Redis: {e}")),
        }
    }
    log.lock().expect("event log").extend(events);
    problems
}

/// Drive one fault of the schedule.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fault(
    id: u32,
    f: FaultSpec,
    seed: u64,
    n: u32,
    clock: RunClock,
    start: u64,
    log: EventLog,
    proxies: Arc<Vec<Proxy>>,
    cmds: Arc<Vec<mpsc::UnboundedSender<Cmd>>>,
    helper: Option<tokio_postgres::Client>,
    schema: Option<String>,
    mut state: StateStores,
) {
    let mut rng: Rng = rng::stream(seed ^ (id as u64).wrapping_mul(0x9e37_79b9), Entity::Faults);
    // The schedule's times count from the scenario's time 0, `start` on the run clock (when
    // every worker was ready); what is logged is on the run clock.
    let clock = RunClock::from_parts(clock.origin() + start, clock.wall_at_origin() + start as i64);
    let edge = |on: bool, t: u64| {
        log.lock().expect("event log").push(Event::Fault {
            t: t + start,
            id,
            kind: f.fault_kind(),
            start: on,
        });
    };
    let update = |g: &dyn Fn(&mut crate::live::proxy::ProxyState)| {
        for p in proxies.iter() {
            p.update(g);
        }
    };
    match &f {
        FaultSpec::Kill {
            at,
            rate,
            process,
            point,
            restart_after,
        } => {
            let mut next = match (at, rate) {
                (Some(a), _) => a.0,
                (None, Some(r)) => exp_gap(&mut rng, *r),
                _ => return,
            };
            loop {
                clock.sleep_until(next).await;
                let pid = process.unwrap_or_else(|| rng.random_range(0..n));
                let cmd = match point {
                    None => Cmd::Kill {
                        restart_after: *restart_after,
                    },
                    Some(p) => Cmd::Arm {
                        point: *p,
                        restart_after: *restart_after,
                    },
                };
                let _ = cmds[pid as usize].send(cmd);
                match rate {
                    Some(r) => next = clock.now() + exp_gap(&mut rng, *r),
                    None => return,
                }
            }
        }
        FaultSpec::Clock { .. } => edge(true, 0),
        FaultSpec::StateLost { at } => {
            // The simulator's window is the instant `at`: both edges at one time, the losses
            // between them (as `Sim::fault_edge` logs them).
            clock.sleep_until_precise(at.0).await;
            let t = clock.now().max(at.0);
            edge(true, t);
            for p in lose_state(&mut state, t + start, &log).await {
                eprintln!("warning: {p}");
            }
            edge(false, t);
        }
        FaultSpec::StoreOutage { at, duration, mode } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            let m = *mode;
            update(&|s| s.outages.push(m));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.outages.is_empty() {
                    s.outages.remove(0);
                }
            });
        }
        FaultSpec::StoreLatency { at, duration, added } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.added.push(added.clone()));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.added.is_empty() {
                    s.added.remove(0);
                }
            });
        }
        FaultSpec::StoreRestart { at, duration } => {
            // Every session ends (and with it the advisory locks it held); the store refuses
            // connections while it restarts.
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.outages.push(crate::fault::OutageMode::Refuse));
            clock.sleep_until(at.0 + duration.0.max(1_000_000)).await;
            edge(false, clock.now());
            update(&|s| {
                if !s.outages.is_empty() {
                    s.outages.remove(0);
                }
            });
        }
        FaultSpec::Partition {
            at,
            duration,
            processes,
        } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            update(&|s| s.partitioned.extend_from_slice(processes));
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
            update(&|s| {
                for p in processes {
                    if let Some(i) = s.partitioned.iter().position(|q| q == p) {
                        s.partitioned.remove(i);
                    }
                }
            });
        }
        FaultSpec::DestinationThrottle { at, duration, .. } => {
            // The destination applies the window itself, by arrival time; only the edges here.
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            clock.sleep_until(at.0 + duration.0).await;
            edge(false, clock.now());
        }
        FaultSpec::LongTransaction { at, duration } => {
            clock.sleep_until(at.0).await;
            edge(true, clock.now());
            if let (Some(c), Some(schema)) = (&helper, &schema)
                && let Err(e) = pg::hold_row_lock(c, schema, Duration::from_nanos(duration.0)).await
            {
                eprintln!("warning: long_transaction fault: {e}");
            } else if helper.is_none() {
                clock.sleep_until(at.0 + duration.0).await;
            }
            edge(false, clock.now());
        }
    }
}

fn exp_gap(r: &mut Rng, rate: f64) -> u64 {
    Nanos::from_secs_f64(Exp::new(rate).expect("validated rate").sample(r)).0
}
