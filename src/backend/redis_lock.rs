//! `redis_lock`: the per-platform walk lock (design record "platform lock and backfill").
//!
//! - **In the store:** one key `fc:download_lock:<platform>` with a holder token and a TTL.
//! - **Atomic operation:** `SET key token NX PX ttl` (non-blocking acquire) and a
//!   compare-and-delete release (a script: delete only if the value is still our token).
//! - **Protocol:** a job is a *walk*: `walk` fetches paced locally at the rate inside, run
//!   while holding the lock. On contention the task re-enqueues itself with a short countdown
//!   (`poll`): that execution ends, the worker is free, and the next execution (with fresh
//!   soft and hard limits) tries again ([`Step::Requeue`]). The task remembers when it first
//!   asked; once its total wait passes `max_wait` (~15 min) it runs **uncapped** as a safety
//!   valve. A broker error also degrades to uncapped (the prior behaviour) rather than
//!   stalling downloads. (A SIGKILL of the process drops the task it was re-enqueueing; a real
//!   broker would deliver it again with its first attempt's time: pacesim's restart starts the
//!   count afresh.)
//! - **Clock:** the Redis server's, for the TTL only.
//! - **Store failure:** uncapped (an `uncapped` trace event, reason `broker_error`).
//! - **SIGKILL leaves:** the key, until its TTL expires; the next walk starts at expiry, not
//!   before. The TTL must sit just past the worker's hard time limit: with a TTL *shorter*
//!   than a walk can legitimately run, the key expires under a live walker and a second walk
//!   overlaps it (mutual exclusion fails).

use crate::backend::lockset::{LockOp, LockReply};
use crate::backend::options::{self, OptionError};
use crate::backend::{Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreSide};
use crate::clock::Reading;
use crate::fault::KillPoint;
use crate::pacer::LocalPacer;
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, ReleaseReason, UncappedReason};
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `redis_lock`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisLockOptions {
    /// The lock's TTL (`PX`). Default 1560s: the record puts the TTL "just past the hard
    /// kill" (1500 s); the 60 s margin is pacesim's choice.
    pub ttl: Option<Nanos>,
    /// Total re-enqueue wait after which a job runs uncapped. Default 15m (the record's
    /// "bounded to ~15 min").
    pub max_wait: Option<Nanos>,
    /// The re-enqueue countdown on contention. Default 5s (pacesim's reading of the record's
    /// "short countdown").
    pub poll: Option<Nanos>,
    /// Fetches one walk makes while holding the lock. Default 10 (pacesim's choice).
    pub walk: Option<u32>,
}

/// The Redis walk-lock backend.
#[derive(Clone, Debug)]
pub struct RedisLock {
    ttl: Nanos,
    max_wait: Nanos,
    poll: Nanos,
    walk: u32,
    interval: Nanos,
}

impl RedisLock {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: RedisLockOptions) -> Result<RedisLock, OptionError> {
        options::positive("ttl", o.ttl)?;
        options::positive("poll", o.poll)?;
        options::at_least_one("walk", o.walk)?;
        Ok(RedisLock {
            ttl: o.ttl.unwrap_or(Nanos(1_560_000_000_000)),
            max_wait: o.max_wait.unwrap_or(Nanos(900_000_000_000)),
            poll: o.poll.unwrap_or(Nanos(5_000_000_000)),
            walk: o.walk.unwrap_or(10),
            interval: sc.interval(),
        })
    }

    /// The TTL in force.
    pub fn ttl(&self) -> Nanos {
        self.ttl
    }
}

impl Backend for RedisLock {
    type Op = LockOp;
    type Reply = LockReply;
    type Process = Walker;
    type Store = LockKey;

    fn name(&self) -> &str {
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

    fn process(&self, _pid: u32) -> Walker {
        Walker {
            cfg: self.clone(),
            left: 0,
            holding: false,
            first_try: None,
            pacer: LocalPacer::new(self.interval.0),
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![KillPoint::HoldingLock, KillPoint::SleepingToSlot, KillPoint::MidFetch]
    }

    fn store(&self) -> LockKey {
        LockKey {
            key: None,
            ttl: self.ttl,
        }
    }
}

/// The key in Redis.
#[derive(Debug)]
pub struct LockKey {
    // invariant: Some((holder, expires_at)) while the key exists.
    key: Option<(Session, Instant)>,
    ttl: Nanos,
}

impl StoreSide for LockKey {
    type Op = LockOp;
    type Reply = LockReply;

    /// The key is gone (a flush, an eviction) under its live walker, which goes on walking: the
    /// next try takes it, and two walks overlap.
    fn on_state_lost(&mut self, cx: &mut StoreCx) {
        if let Some((holder, _)) = self.key.take() {
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid: holder.pid,
                lock: 0,
                reason: ReleaseReason::StateLost,
            });
        }
    }

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &LockOp, _now: Reading) -> Served<LockReply> {
        if let Some((_, exp)) = self.key
            && exp <= cx.t
        {
            self.key = None;
        }
        match *op {
            LockOp::TryLock { .. } => match self.key {
                None => {
                    let exp = cx.t + self.ttl;
                    self.key = Some((s, exp));
                    cx.out.event(&Event::LockAcquired {
                        t: cx.t.0,
                        pid: s.pid,
                        lock: 0,
                    });
                    cx.timers.push((exp, ((s.incarnation as u64) << 32) | s.pid as u64));
                    Served::now(LockReply::Locked { lock: 0 })
                }
                Some(_) => Served::now(LockReply::Busy),
            },
            LockOp::Unlock { .. } => {
                if matches!(self.key, Some((h, _)) if h == s) {
                    self.key = None;
                }
                // The walk (the critical section) is over, whether or not the key was ours.
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: s.pid,
                    lock: 0,
                    reason: ReleaseReason::Release,
                });
                Served::now(LockReply::Unlocked)
            }
        }
    }

    fn on_timer(&mut self, cx: &mut StoreCx, token: u64) {
        let s = Session {
            incarnation: (token >> 32) as u32,
            pid: (token & 0xFFFF_FFFF) as u32,
            thread: 0, // one thread per process (`Backend::threads`)
        };
        if let Some((h, exp)) = self.key
            && h == s
            && exp <= cx.t
        {
            self.key = None;
        }
    }
}

/// One process's walk.
#[derive(Debug)]
pub struct Walker {
    cfg: RedisLock,
    // Fetches left in the current walk (0 = no walk in progress).
    left: u32,
    // Holds the lock (false for an uncapped walk).
    holding: bool,
    // When the current job first asked for the lock.
    first_try: Option<Instant>,
    pacer: LocalPacer,
}

impl Walker {
    /// The next paced fetch of a walk in progress.
    fn next_fetch(&mut self, cx: &mut ProcCx) -> Step<LockOp> {
        let now = cx.mono_ns();
        let slot = self.pacer.reserve(now);
        Step::FetchAt(cx.after_mono(Nanos(slot - now)))
    }

    fn start_walk(&mut self, cx: &mut ProcCx, holding: bool) -> Step<LockOp> {
        self.left = self.cfg.walk;
        self.holding = holding;
        self.first_try = None;
        self.next_fetch(cx)
    }

    fn uncapped(cx: &mut ProcCx, reason: UncappedReason) {
        cx.out.event(&Event::Uncapped {
            t: cx.t.0,
            pid: cx.pid,
            reason,
        });
    }
}

impl ProcessSide for Walker {
    type Op = LockOp;
    type Reply = LockReply;

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<LockOp> {
        self.first_try.get_or_insert(cx.t);
        Step::Send(LockOp::TryLock { lock: 0 })
    }

    fn on_reply(&mut self, cx: &mut ProcCx, op: &LockOp, reply: LockReply) -> Step<LockOp> {
        match (*op, reply) {
            (LockOp::TryLock { .. }, LockReply::Locked { .. }) => self.start_walk(cx, true),
            (LockOp::TryLock { .. }, _) => {
                let first = self.first_try.unwrap_or(cx.t);
                if cx.t.since(first) >= self.cfg.max_wait {
                    Walker::uncapped(cx, UncappedReason::SafetyValve);
                    self.start_walk(cx, false)
                } else {
                    Step::Requeue(cx.t + self.cfg.poll) // re-enqueue with a countdown
                }
            }
            (LockOp::Unlock { .. }, _) => {
                self.holding = false;
                Step::Done
            }
        }
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, op: &LockOp) -> Step<LockOp> {
        match op {
            LockOp::Unlock { .. } => {
                // The key stays until its TTL; the walk itself is over.
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: cx.pid,
                    lock: 0,
                    reason: ReleaseReason::Release,
                });
                self.holding = false;
                Step::Done
            }
            LockOp::TryLock { .. } => {
                Walker::uncapped(cx, UncappedReason::BrokerError);
                self.start_walk(cx, false)
            }
        }
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, _status: u16) -> Step<LockOp> {
        self.left = self.left.saturating_sub(1);
        if self.left > 0 {
            self.next_fetch(cx)
        } else if self.holding {
            Step::Send(LockOp::Unlock { lock: 0 })
        } else {
            Step::Done
        }
    }

    fn on_soft_limit(&mut self, _cx: &mut ProcCx) -> Step<LockOp> {
        // The chunk finalises: release the lock like a finished walk. (Only a walk's own
        // execution can pass its soft limit: a try that finds the lock taken ends its execution
        // at once; the task's first attempt stays as it was.)
        self.left = 0;
        if self.holding {
            Step::Send(LockOp::Unlock { lock: 0 })
        } else {
            Step::Done
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
        let sc = Scenario::parse("t", &src).unwrap();
        RedisLock::new(&sc, options::parse("redis_lock", &sc.pacer.options, true).unwrap()).unwrap()
    }

    struct World {
        b: RedisLock,
        key: LockKey,
        walkers: Vec<Walker>,
        sink: Collect,
        rng: crate::rng::Rng,
        timers: Vec<(Instant, u64)>,
        clock: Clock,
    }

    impl World {
        fn serve(&mut self, t: u64, pid: u32, op: LockOp) -> LockReply {
            let mut cx = StoreCx {
                t: Instant(t),
                out: &mut self.sink,
                rng: &mut self.rng,
                timers: &mut self.timers,
            };
            self.key
                .serve(
                    &mut cx,
                    Session {
                        pid,
                        incarnation: 0,
                        thread: 0,
                    },
                    &op,
                    0,
                )
                .reply
        }
        fn proc<R>(&mut self, t: u64, pid: u32, f: impl FnOnce(&mut Walker, &mut ProcCx) -> R) -> R {
            let mut cx = ProcCx {
                t: Instant(t),
                pid,
                thread: 0,
                mono: &self.clock,
                wall: &self.clock,
                out: &mut self.sink,
            };
            f(&mut self.walkers[pid as usize], &mut cx)
        }
    }

    #[test]
    fn refuses_a_second_holder_until_release_or_ttl_then_valve() {
        let b = lock("ttl='60s'\npoll='5s'\nmax_wait='12s'");
        let mut w = World {
            key: b.store(),
            walkers: (0..3).map(|p| b.process(p)).collect(),
            b,
            sink: Collect::default(),
            rng: crate::rng::stream(1, crate::rng::Entity::Store),
            timers: Vec::new(),
            clock: Clock::reference(),
        };
        let _ = &w.b;
        let try_lock = LockOp::TryLock { lock: 0 };
        assert_eq!(w.serve(0, 0, try_lock), LockReply::Locked { lock: 0 });
        assert_eq!(w.serve(0, 1, try_lock), LockReply::Busy);
        // the contended job re-enqueues itself with the countdown
        assert_eq!(w.proc(0, 1, |p, cx| p.acquire(cx)), Step::Send(try_lock));
        assert_eq!(
            w.proc(0, 1, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
            Step::Requeue(Instant(5_000_000_000))
        );
        // released by its holder: the next try succeeds
        w.serve(0, 0, LockOp::Unlock { lock: 0 });
        assert_eq!(w.serve(0, 1, try_lock), LockReply::Locked { lock: 0 });
        // a holder that never releases: refused until the TTL expires, not before
        assert_eq!(w.serve(59_999_999_999, 2, try_lock), LockReply::Busy);
        assert_eq!(w.serve(60_000_000_000, 2, try_lock), LockReply::Locked { lock: 0 });
        // process 0 has been waiting since t = 61 s; past max_wait it runs uncapped
        w.proc(61_000_000_000, 0, |p, cx| p.acquire(cx));
        assert!(matches!(
            w.proc(72_000_000_000, 0, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
            Step::Requeue(_)
        ));
        assert!(matches!(
            w.proc(73_000_000_001, 0, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
            Step::FetchAt(_)
        ));
        assert!(w.sink.events.iter().any(|e| matches!(
            e,
            Event::Uncapped {
                reason: UncappedReason::SafetyValve,
                ..
            }
        )));
    }
}
