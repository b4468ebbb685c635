//! The fault driver: one task per fault of the schedule, acting for real. Kills go to the
//! workers' supervisors; store outages, added latency and partitions go to the TCP proxies;
//! a long transaction holds the row lock from a helper connection. Each fault's start and end
//! are logged as `fault` events.

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

/// Drive one fault of the schedule.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fault(
    id: u32,
    f: FaultSpec,
    seed: u64,
    n: u32,
    clock: RunClock,
    log: EventLog,
    proxies: Arc<Vec<Proxy>>,
    cmds: Arc<Vec<mpsc::UnboundedSender<Cmd>>>,
    helper: Option<tokio_postgres::Client>,
    schema: Option<String>,
) {
    let mut rng: Rng = rng::stream(seed ^ (id as u64).wrapping_mul(0x9e37_79b9), Entity::Faults);
    let edge = |start: bool, t: u64| {
        log.lock().expect("event log").push(Event::Fault {
            t,
            id,
            kind: f.fault_kind(),
            start,
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
        // refused before the run starts (runner::run): live mode cannot delete state mid-run yet
        FaultSpec::StateLost { .. } => {}
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
