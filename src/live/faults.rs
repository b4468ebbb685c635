//! The fault driver: one task per fault of the schedule, acting for real. Kills go to the
//! workers' supervisors; store outages, added latency and partitions go to the TCP proxies;
//! a long transaction holds the row lock from a helper connection; a lost state deletes the
//! run's rows and keys from helper connections. Each fault's start and end are logged as
//! `fault` events.

use crate::fault::{FaultSpec, KillPoint};
use crate::live::clock::RunClock;
use crate::live::proxy::{Proxy, ProxyState};
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

/// What every fault's task shares: the run's clock and log, the fault proxies, the workers'
/// supervisors, and the run's schema.
pub(super) struct Faults {
    pub seed: u64,
    /// Worker processes.
    pub n: u32,
    pub clock: RunClock,
    /// The scenario's time 0 on the run clock (when every worker was ready).
    pub start: u64,
    pub log: EventLog,
    pub proxies: Arc<Vec<Proxy>>,
    pub cmds: Arc<Vec<mpsc::UnboundedSender<Cmd>>>,
    pub schema: Option<String>,
}

/// One fault's helper connections, made before the run starts.
#[derive(Debug, Default)]
pub(super) struct Helpers {
    /// `long_transaction`'s PostgreSQL connection.
    pub long_tx: Option<tokio_postgres::Client>,
    /// `state_lost`'s connections.
    pub state: StateStores,
}

/// A change of the fault proxies' state.
type Change<'a> = &'a (dyn Fn(&mut ProxyState) + Sync);

/// One fault's task: its id and spec, on the schedule's clock.
struct One<'a> {
    id: u32,
    f: &'a FaultSpec,
    all: &'a Faults,
    /// The run clock shifted to the scenario's time 0: the schedule's times count from there.
    clock: RunClock,
}

impl One<'_> {
    /// Log the fault's start (`on`) or end at the schedule's time `t`.
    fn edge(&self, on: bool, t: u64) {
        self.all.log.lock().expect("event log").push(Event::Fault {
            t: t + self.all.start,
            id: self.id,
            kind: self.f.fault_kind(),
            start: on,
        });
    }

    /// Change every proxy's state.
    fn update(&self, g: Change<'_>) {
        for p in self.all.proxies.iter() {
            p.update(g);
        }
    }

    /// A window from `at` to `until`: its edges logged, the proxies changed by `open` at its
    /// start and by `close` at its end.
    async fn window(&self, at: u64, until: u64, open: Change<'_>, close: Change<'_>) {
        self.clock.sleep_until(at).await;
        self.edge(true, self.clock.now());
        self.update(open);
        self.clock.sleep_until(until).await;
        self.edge(false, self.clock.now());
        self.update(close);
    }

    /// Kill a worker at `at`, or at exponential gaps at `rate`: at once, or armed to kill
    /// itself at `point`.
    async fn kills(
        &self,
        (at, rate, process): (Option<Nanos>, Option<f64>, Option<u32>),
        point: Option<KillPoint>,
        restart_after: Option<Nanos>,
    ) {
        let mut rng: Rng = rng::stream(
            self.all.seed ^ (self.id as u64).wrapping_mul(0x9e37_79b9),
            Entity::Faults,
        );
        let mut next = match (at, rate) {
            (Some(a), _) => a.0,
            (None, Some(r)) => exp_gap(&mut rng, r),
            _ => return,
        };
        loop {
            self.clock.sleep_until(next).await;
            let pid = process.unwrap_or_else(|| rng.random_range(0..self.all.n));
            let cmd = match point {
                None => Cmd::Kill { restart_after },
                Some(point) => Cmd::Arm { point, restart_after },
            };
            let _ = self.all.cmds[pid as usize].send(cmd);
            match rate {
                Some(r) => next = self.clock.now() + exp_gap(&mut rng, r),
                None => return,
            }
        }
    }

    /// The simulator's window is the instant `at`: both edges at one time, the losses between
    /// them (as `Sim::fault_edge` logs them).
    async fn state_lost(&self, at: u64, state: &mut StateStores) {
        self.clock.sleep_until_precise(at).await;
        let t = self.clock.now().max(at);
        self.edge(true, t);
        for p in lose_state(state, t + self.all.start, &self.all.log).await {
            eprintln!("warning: {p}");
        }
        self.edge(false, t);
    }

    /// Hold the row lock from the helper connection from `at` for `duration`.
    async fn long_transaction(&self, at: u64, duration: u64, helper: Option<tokio_postgres::Client>) {
        self.clock.sleep_until(at).await;
        self.edge(true, self.clock.now());
        if let (Some(c), Some(schema)) = (&helper, &self.all.schema)
            && let Err(e) = pg::hold_row_lock(c, schema, Duration::from_nanos(duration)).await
        {
            eprintln!("warning: long_transaction fault: {e}");
        } else if helper.is_none() {
            self.clock.sleep_until(at + duration).await;
        }
        self.edge(false, self.clock.now());
    }
}

/// Drop the first of a list of open windows.
fn pop_first<T>(v: &mut Vec<T>) {
    if !v.is_empty() {
        v.remove(0);
    }
}

/// Drive one fault of the schedule.
pub(super) async fn fault(id: u32, f: FaultSpec, all: Arc<Faults>, helpers: Helpers) {
    let Helpers { long_tx, mut state } = helpers;
    // The schedule's times count from the scenario's time 0, `start` on the run clock (when
    // every worker was ready); what is logged is on the run clock.
    let (c, start) = (all.clock, all.start);
    let clock = RunClock::from_parts(c.origin() + start, c.wall_at_origin() + start as i64);
    let one = One {
        id,
        f: &f,
        all: &all,
        clock,
    };
    match &f {
        FaultSpec::Kill {
            at,
            rate,
            process,
            point,
            restart_after,
        } => one.kills((*at, *rate, *process), *point, *restart_after).await,
        FaultSpec::Clock { .. } => one.edge(true, 0),
        FaultSpec::StateLost { at } => one.state_lost(at.0, &mut state).await,
        FaultSpec::StoreOutage { at, duration, mode } => {
            let m = *mode;
            let open = move |s: &mut ProxyState| s.outages.push(m);
            one.window(at.0, at.0 + duration.0, &open, &|s| pop_first(&mut s.outages))
                .await;
        }
        FaultSpec::StoreLatency { at, duration, added } => {
            let open = |s: &mut ProxyState| s.added.push(added.clone());
            one.window(at.0, at.0 + duration.0, &open, &|s| pop_first(&mut s.added))
                .await;
        }
        FaultSpec::StoreRestart { at, duration } => {
            // Every session ends (and with it the advisory locks it held); the store refuses
            // connections while it restarts.
            let open = |s: &mut ProxyState| s.outages.push(crate::fault::OutageMode::Refuse);
            let until = at.0 + duration.0.max(1_000_000);
            one.window(at.0, until, &open, &|s| pop_first(&mut s.outages)).await;
        }
        FaultSpec::Partition {
            at,
            duration,
            processes,
        } => {
            let open = |s: &mut ProxyState| s.partitioned.extend_from_slice(processes);
            let close = |s: &mut ProxyState| {
                for p in processes {
                    if let Some(i) = s.partitioned.iter().position(|q| q == p) {
                        s.partitioned.remove(i);
                    }
                }
            };
            one.window(at.0, at.0 + duration.0, &open, &close).await;
        }
        FaultSpec::DestinationThrottle { at, duration, .. } => {
            // The destination applies the window itself, by arrival time; only the edges here.
            clock.sleep_until(at.0).await;
            one.edge(true, clock.now());
            clock.sleep_until(at.0 + duration.0).await;
            one.edge(false, clock.now());
        }
        FaultSpec::LongTransaction { at, duration } => one.long_transaction(at.0, duration.0, long_tx).await,
    }
}

fn exp_gap(r: &mut Rng, rate: f64) -> u64 {
    Nanos::from_secs_f64(Exp::new(rate).expect("validated rate").sample(r)).0
}
