//! `redis_lock`: the per-platform walk lock (design record "platform lock and backfill").
//!
//! - **In the store:** one key `fc:download_lock:<platform>` with a holder token and a TTL.
//! - **Atomic operation:** `SET key token NX PX ttl` (non-blocking acquire) and a
//!   compare-and-delete release (a script: delete only if the value is still our token).
//! - **Protocol:** a job is a *walk*: `walk` fetches paced locally at the rate inside, run
//!   while holding the lock. On contention the job re-enqueues itself with a short countdown
//!   (`poll`) and tries again; once its total wait passes `max_wait` (~15 min) it runs
//!   **uncapped** as a safety valve. A broker error also degrades to uncapped (the prior
//!   behaviour) rather than stalling downloads.
//! - **Clock:** the Redis server's, for the TTL only.
//! - **Store failure:** uncapped (an `uncapped` trace event, reason `broker_error`).
//! - **SIGKILL leaves:** the key, until its TTL expires; the next walk starts at expiry, not
//!   before. The TTL must sit just past the worker's hard time limit: with a TTL *shorter*
//!   than a walk can legitimately run, the key expires under a live walker and a second walk
//!   overlaps it (mutual exclusion fails).

use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::pacer::LocalPacer;
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, ReleaseReason, UncappedReason};

/// A process's walk.
#[derive(Clone, Debug, Default)]
struct Walk {
    session: u32,
    // Fetches left in the current walk (0 = no walk in progress).
    left: u32,
    // Holds the lock (false for an uncapped walk).
    holding: bool,
    // When the current job first asked for the lock.
    first_try: Option<Instant>,
}

/// The Redis walk-lock backend.
#[derive(Debug)]
pub struct RedisLock {
    // ---- in Redis: the key ----
    // invariant: Some((holder, session, expires_at)) while the key exists.
    key: Option<(u32, u32, Instant)>,
    // ---- options ----
    ttl: Nanos,
    max_wait: Nanos,
    poll: Nanos,
    walk: u32,
    interval: Nanos,
    // ---- each process ----
    walks: Vec<Walk>,
    pacers: Vec<LocalPacer>,
}

impl RedisLock {
    /// Build from a scenario.
    pub fn new(sc: &Scenario) -> RedisLock {
        let n = sc.processes.count as usize;
        RedisLock {
            key: None,
            ttl: sc.pacer.ttl.unwrap_or(Nanos(1_560_000_000_000)),
            max_wait: sc.pacer.max_wait.unwrap_or(Nanos(900_000_000_000)),
            poll: sc.pacer.poll.unwrap_or(Nanos(5_000_000_000)),
            walk: sc.pacer.walk.unwrap_or(10).max(1),
            interval: sc.interval(),
            walks: vec![Walk::default(); n],
            pacers: (0..n).map(|_| LocalPacer::new(sc.interval().0)).collect(),
        }
    }

    fn expire(&mut self, cx: &mut Cx) {
        if let Some((pid, _, exp)) = self.key
            && exp <= cx.t
        {
            self.key = None;
            let _ = pid;
        }
    }

    /// The next paced fetch of a walk in progress.
    fn next_fetch(&mut self, cx: &mut Cx, p: &ProcView) -> Step {
        let now = p.mono_ns(cx.t);
        let slot = self.pacers[p.pid as usize].reserve(now);
        Step::FetchAt(cx.t + p.mono.ref_duration(Nanos(slot - now)))
    }

    fn start_walk(&mut self, cx: &mut Cx, p: &ProcView, holding: bool) -> Step {
        let w = &mut self.walks[p.pid as usize];
        w.left = self.walk;
        w.holding = holding;
        w.first_try = None;
        self.next_fetch(cx, p)
    }
}

impl Backend for RedisLock {
    fn name(&self) -> &'static str {
        "redis_lock"
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "ttl_ns": self.ttl.0,
            "max_wait_ns": self.max_wait.0,
            "poll_ns": self.poll.0,
            "walk": self.walk,
            "interval_ns": self.interval.0,
            "locks": 1,
            "fallback": "uncapped",
        })
    }

    fn acquire(&mut self, cx: &mut Cx, p: &ProcView) -> Step {
        let w = &mut self.walks[p.pid as usize];
        w.first_try.get_or_insert(cx.t);
        Step::Send(Op::TryLock { lock: 0 })
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, _now: Reading) -> Served {
        self.expire(cx);
        let session = self.walks[pid as usize].session;
        match *op {
            Op::TryLock { .. } => match self.key {
                None => {
                    let exp = cx.t + self.ttl;
                    self.key = Some((pid, session, exp));
                    cx.out.event(&Event::LockAcquired {
                        t: cx.t.0,
                        pid,
                        lock: 0,
                    });
                    cx.timers.push((exp, ((session as u64) << 32) | pid as u64));
                    Served::now(Reply::Locked { lock: 0 })
                }
                Some(_) => Served::now(Reply::Busy),
            },
            Op::Unlock { .. } => {
                if matches!(self.key, Some((h, s, _)) if h == pid && s == session) {
                    self.key = None;
                }
                // The walk (the critical section) is over, whether or not the key was ours.
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid,
                    lock: 0,
                    reason: ReleaseReason::Release,
                });
                Served::now(Reply::Unlocked)
            }
            other => unreachable!("redis_lock never sends {other:?}"),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, op: &Op, reply: Reply) -> Step {
        match (*op, reply) {
            (Op::TryLock { .. }, Reply::Locked { .. }) => self.start_walk(cx, p, true),
            (Op::TryLock { .. }, _) => {
                let first = self.walks[p.pid as usize].first_try.unwrap_or(cx.t);
                if cx.t.since(first) >= self.max_wait {
                    cx.out.event(&Event::Uncapped {
                        t: cx.t.0,
                        pid: p.pid,
                        reason: UncappedReason::SafetyValve,
                    });
                    self.start_walk(cx, p, false)
                } else {
                    Step::RetryAt(cx.t + self.poll) // re-enqueue with a countdown
                }
            }
            (Op::Unlock { .. }, _) => {
                self.walks[p.pid as usize].holding = false;
                Step::Done
            }
            (other, _) => unreachable!("redis_lock never sends {other:?}"),
        }
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match op {
            Op::Unlock { .. } => {
                // The key stays until its TTL; the walk itself is over.
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: p.pid,
                    lock: 0,
                    reason: ReleaseReason::Release,
                });
                self.walks[p.pid as usize].holding = false;
                Step::Done
            }
            _ => {
                cx.out.event(&Event::Uncapped {
                    t: cx.t.0,
                    pid: p.pid,
                    reason: UncappedReason::BrokerError,
                });
                self.start_walk(cx, p, false)
            }
        }
    }

    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, _status: u16) -> Step {
        let w = &mut self.walks[p.pid as usize];
        w.left = w.left.saturating_sub(1);
        if w.left > 0 {
            self.next_fetch(cx, p)
        } else if w.holding {
            Step::Send(Op::Unlock { lock: 0 })
        } else {
            Step::Done
        }
    }

    fn on_soft_limit(&mut self, _cx: &mut Cx, p: &ProcView) -> Step {
        // The chunk finalises: release the lock like a finished walk.
        let w = &mut self.walks[p.pid as usize];
        w.left = 0;
        w.first_try = None;
        if w.holding {
            Step::Send(Op::Unlock { lock: 0 })
        } else {
            Step::Done
        }
    }

    fn on_restart(&mut self, pid: u32) {
        let w = &mut self.walks[pid as usize];
        *w = Walk {
            session: w.session + 1,
            ..Walk::default()
        };
        self.pacers[pid as usize] = LocalPacer::new(self.interval.0);
    }

    fn on_crash(&mut self, cx: &mut Cx, pid: u32) {
        if self.walks[pid as usize].holding {
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid,
                lock: 0,
                reason: ReleaseReason::HolderDied,
            });
        }
    }

    fn on_timer(&mut self, cx: &mut Cx, token: u64) {
        let (session, pid) = ((token >> 32) as u32, (token & 0xFFFF_FFFF) as u32);
        if let Some((h, s, exp)) = self.key
            && h == pid
            && s == session
            && exp <= cx.t
        {
            self.key = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::trace::Collect;

    fn lock(extra: &str) -> RedisLock {
        let src = format!(
            "name='t'\nduration='1h'\n[pacer]\nbackend='redis_lock'\nrate=2.0\n{extra}\n[processes]\ncount=3\n"
        );
        RedisLock::new(&Scenario::parse("t", &src).unwrap())
    }

    #[test]
    fn refuses_a_second_holder_until_release_or_ttl_then_valve() {
        let mut l = lock("ttl='60s'\npoll='5s'\nmax_wait='12s'");
        let mut sink = Collect::default();
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Store);
        let mut timers = Vec::new();
        let clock = Clock::reference();
        let view = |pid| ProcView {
            pid,
            mono: &clock,
            wall: &clock,
        };
        let mut cx = Cx {
            t: Instant(0),
            out: &mut sink,
            store_rng: &mut rng,
            timers: &mut timers,
        };
        let try_lock = Op::TryLock { lock: 0 };
        assert_eq!(l.serve(&mut cx, 0, &try_lock, 0).reply, Reply::Locked { lock: 0 });
        assert_eq!(l.serve(&mut cx, 1, &try_lock, 0).reply, Reply::Busy);
        // the contended job re-enqueues itself with the countdown
        assert_eq!(l.acquire(&mut cx, &view(1)), Step::Send(try_lock));
        assert_eq!(
            l.on_reply(&mut cx, &view(1), &try_lock, Reply::Busy),
            Step::RetryAt(Instant(5_000_000_000))
        );
        // released by its holder: the next try succeeds
        l.serve(&mut cx, 0, &Op::Unlock { lock: 0 }, 0);
        assert_eq!(l.serve(&mut cx, 1, &try_lock, 0).reply, Reply::Locked { lock: 0 });
        // a holder that never releases: refused until the TTL expires, not before
        cx.t = Instant(59_999_999_999);
        assert_eq!(l.serve(&mut cx, 2, &try_lock, 0).reply, Reply::Busy);
        cx.t = Instant(60_000_000_000);
        assert_eq!(l.serve(&mut cx, 2, &try_lock, 0).reply, Reply::Locked { lock: 0 });
        // process 0 has been waiting since t = 61 s; past max_wait it runs uncapped
        cx.t = Instant(61_000_000_000);
        l.acquire(&mut cx, &view(0));
        cx.t = Instant(72_000_000_000);
        assert!(matches!(
            l.on_reply(&mut cx, &view(0), &try_lock, Reply::Busy),
            Step::RetryAt(_)
        ));
        cx.t = Instant(73_000_000_001);
        assert!(matches!(
            l.on_reply(&mut cx, &view(0), &try_lock, Reply::Busy),
            Step::FetchAt(_)
        ));
        assert!(
            sink.events
                .iter()
                .any(|e| matches!(e, Event::Uncapped { reason, .. } if *reason == UncappedReason::SafetyValve))
        );
    }
}
