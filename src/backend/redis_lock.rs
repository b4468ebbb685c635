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
//!   stalling downloads. Without a `[jobs]` table a process loops over jobs of its own: a
//!   SIGKILL drops the task it was re-enqueueing, and the restart starts the count afresh. With
//!   `[jobs]` ([`crate::task`]) tasks go through a broker: the first attempt's time belongs to
//!   the task ([`TaskMemo`], given to each execution by [`ProcessSide::begin_task`]), the
//!   worker runs other tasks while one waits out its countdown, and a killed process's tasks
//!   are delivered again (`redeliver`, as acks_late does) with that time, so the valve still
//!   fires at `max_wait` from the first attempt across a kill.
//! - **Clock:** the Redis server's, for the TTL only.
//! - **Store failure:** uncapped (an `uncapped` trace event, reason `broker_error`).
//! - **SIGKILL leaves:** the key, until its TTL expires; the next walk starts at expiry, not
//!   before. The TTL must sit just past the worker's hard time limit: with a TTL *shorter*
//!   than a walk can legitimately run, the key expires under a live walker and a second walk
//!   overlaps it (mutual exclusion fails).
//! - **Platforms** (a scenario's `[[platforms]]`, [`crate::platform`]): each job goes to one
//!   platform; a walk on a platform of `serialized_platforms` takes that platform's key
//!   (`fc:download_lock:<platform>`: lock index = the platform's index), a walk on any other
//!   runs uncapped, paced only by itself at its platform's rate, with no lock. Without
//!   platforms there is one key, lock 0, and every walk takes it.

use crate::backend::lockset::{LockOp, LockReply};
use crate::backend::options::{self, OptionError};
use crate::backend::{Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreSide, TaskMemo};
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
    /// The platforms whose walks take their platform's lock (`SERIALIZED_PLATFORMS`); walks
    /// on the other declared platforms run uncapped (self-pacing). Needs `[[platforms]]`.
    /// Default `["patreon"]` (the record's `SERIALIZED_PLATFORMS={patreon}`).
    pub serialized_platforms: Option<Vec<String>>,
}

/// The Redis walk-lock backend.
#[derive(Clone, Debug)]
pub struct RedisLock {
    ttl: Nanos,
    max_wait: Nanos,
    poll: Nanos,
    walk: u32,
    interval: Nanos,
    platforms: Vec<WalkPlatform>,
    seed: u64,
}

/// One declared platform as the walker sees it.
#[derive(Clone, Debug)]
struct WalkPlatform {
    cfg: crate::platform::PlatformCfg,
    interval: Nanos,
    serialized: bool,
}

impl RedisLock {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: RedisLockOptions) -> Result<RedisLock, OptionError> {
        options::positive("ttl", o.ttl)?;
        options::positive("poll", o.poll)?;
        options::at_least_one("walk", o.walk)?;
        if sc.platforms.is_empty() && o.serialized_platforms.is_some() {
            return Err(OptionError::new(
                "serialized_platforms",
                "names platforms, but the scenario declares none ([[platforms]])",
            ));
        }
        let serialized = o.serialized_platforms.unwrap_or_else(|| vec!["patreon".into()]);
        if !sc.platforms.is_empty()
            && let Some(unknown) = serialized.iter().find(|n| !sc.platforms.iter().any(|p| &p.name == *n))
        {
            let known: Vec<&str> = sc.platforms.iter().map(|p| p.name.as_str()).collect();
            return Err(OptionError::new(
                "serialized_platforms",
                format!("unknown platform `{unknown}` (declared: {})", known.join(", ")),
            ));
        }
        let platforms = sc
            .platforms
            .iter()
            .map(|p| WalkPlatform {
                cfg: p.clone(),
                interval: p.interval(sc.pacer.rate),
                serialized: serialized.contains(&p.name),
            })
            .collect();
        Ok(RedisLock {
            platforms,
            seed: sc.seed,
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

    /// The platforms' detail for the trace header (`backend_detail.platforms`).
    fn platform_detail(&self, rate: f64) -> Vec<crate::trace::PlatformDetail> {
        self.platforms
            .iter()
            .map(|p| crate::trace::PlatformDetail {
                name: p.cfg.name.clone(),
                limit: p.cfg.limit(rate),
                burst: p.cfg.burst,
                serialized: p.serialized,
            })
            .collect()
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
        let mut d = serde_json::json!({
            "ttl_ns": self.ttl.0,
            "max_wait_ns": self.max_wait.0,
            "poll_ns": self.poll.0,
            "walk": self.walk,
            "interval_ns": self.interval.0,
            "locks": self.platforms.iter().filter(|p| p.serialized).count().max(1),
            "fallback": "uncapped",
        });
        if !self.platforms.is_empty() {
            let rate = 1e9 / self.interval.0 as f64;
            d["platforms"] = serde_json::to_value(self.platform_detail(rate)).expect("platforms serialise");
        }
        d
    }

    fn process(&self, pid: u32) -> Walker {
        Walker {
            cfg: self.clone(),
            left: 0,
            holding: false,
            first_try: None,
            task_walk: None,
            pacer: LocalPacer::new(self.interval.0),
            platform: 0,
            // drawn from only when platforms are declared
            platform_rng: (!self.platforms.is_empty())
                .then(|| crate::rng::stream(self.seed, crate::rng::Entity::Platforms(pid))),
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![KillPoint::HoldingLock, KillPoint::SleepingToSlot, KillPoint::MidFetch]
    }

    fn store(&self) -> LockKey {
        LockKey {
            key: None,
            others: vec![None; self.platforms.len().saturating_sub(1)],
            ttl: self.ttl,
        }
    }
}

/// The keys in Redis: one per platform (lock index = platform index), one without platforms.
#[derive(Debug)]
pub struct LockKey {
    // invariant: Some((holder, expires_at)) while lock 0's key exists.
    key: Option<(Session, Instant)>,
    // the keys of locks 1.. (platforms after the first), as `key`
    others: Vec<Option<(Session, Instant)>>,
    ttl: Nanos,
}

impl LockKey {
    fn slot(&mut self, lock: u32) -> &mut Option<(Session, Instant)> {
        match lock {
            0 => &mut self.key,
            k => {
                let i = k as usize - 1;
                if i >= self.others.len() {
                    self.others.resize(i + 1, None);
                }
                &mut self.others[i]
            }
        }
    }
}

/// A TTL timer's token: the holder's session and the lock (pid in the low 32 bits, the lock in
/// the next 12, at most [`crate::platform::MAX_PLATFORMS`]; the incarnation in the top 20, where
/// only a session restarted a million times would alias: its key still expires, by `serve`).
fn timer_token(s: Session, lock: u32) -> u64 {
    ((s.incarnation as u64 & 0xF_FFFF) << 44) | ((lock as u64 & 0xFFF) << 32) | s.pid as u64
}

impl StoreSide for LockKey {
    type Op = LockOp;
    type Reply = LockReply;

    /// The key is gone (a flush, an eviction) under its live walker, which goes on walking: the
    /// next try takes it, and two walks overlap.
    fn on_state_lost(&mut self, cx: &mut StoreCx) {
        for lock in 0..=self.others.len() as u32 {
            if let Some((holder, _)) = self.slot(lock).take() {
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: holder.pid,
                    lock,
                    reason: ReleaseReason::StateLost,
                });
            }
        }
    }

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &LockOp, _now: Reading) -> Served<LockReply> {
        let (LockOp::TryLock { lock } | LockOp::Unlock { lock }) = *op;
        let (t, ttl) = (cx.t, self.ttl);
        let key = self.slot(lock);
        if let Some((_, exp)) = *key
            && exp <= t
        {
            *key = None;
        }
        match *op {
            LockOp::TryLock { .. } => match *key {
                None => {
                    let exp = t + ttl;
                    *key = Some((s, exp));
                    cx.out.event(&Event::LockAcquired {
                        t: t.0,
                        pid: s.pid,
                        lock,
                    });
                    cx.timers.push((exp, timer_token(s, lock)));
                    Served::now(LockReply::Locked { lock })
                }
                Some(_) => Served::now(LockReply::Busy),
            },
            LockOp::Unlock { .. } => {
                if matches!(*key, Some((h, _)) if h == s) {
                    *key = None;
                }
                // The walk (the critical section) is over, whether or not the key was ours.
                cx.out.event(&Event::LockReleased {
                    t: t.0,
                    pid: s.pid,
                    lock,
                    reason: ReleaseReason::Release,
                });
                Served::now(LockReply::Unlocked)
            }
        }
    }

    fn on_timer(&mut self, cx: &mut StoreCx, token: u64) {
        let (pid, lock, incarnation) = (token as u32, ((token >> 32) & 0xFFF) as u32, (token >> 44) as u32);
        let key = self.slot(lock);
        if let Some((h, exp)) = *key
            && h.pid == pid
            && h.incarnation & 0xF_FFFF == incarnation
            && exp <= cx.t
        {
            *key = None;
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
    // The current broker task's walk length (None: `cfg.walk`).
    task_walk: Option<u32>,
    pacer: LocalPacer,
    // The current job's platform (the lock it takes); 0 without platforms.
    platform: u32,
    // The stream the jobs' platforms are drawn from: Some only when platforms are declared.
    platform_rng: Option<crate::rng::Rng>,
}

impl Walker {
    /// The next paced fetch of a walk in progress.
    fn next_fetch(&mut self, cx: &mut ProcCx) -> Step<LockOp> {
        let now = cx.mono_ns();
        let slot = self.pacer.reserve(now);
        Step::FetchAt(cx.after_mono(Nanos(slot - now)))
    }

    fn start_walk(&mut self, cx: &mut ProcCx, holding: bool) -> Step<LockOp> {
        self.left = self.task_walk.unwrap_or(self.cfg.walk).max(1);
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
        if self.first_try.is_none()
            && let Some(rng) = &mut self.platform_rng
        {
            // a new job: which platform it walks (a re-enqueued one keeps its own)
            let cfgs: Vec<crate::platform::PlatformCfg> = self.cfg.platforms.iter().map(|p| p.cfg.clone()).collect();
            self.platform = crate::platform::choose(&cfgs, rng);
            let p = &self.cfg.platforms[self.platform as usize];
            self.pacer = LocalPacer::new(p.interval.0);
            cx.out.event(&Event::Platform {
                t: cx.t.0,
                pid: cx.pid,
                platform: self.platform,
            });
            if !p.serialized {
                // left uncapped: a self-pacing walk, no lock
                return self.start_walk(cx, false);
            }
        }
        self.first_try.get_or_insert(cx.t);
        Step::Send(LockOp::TryLock { lock: self.platform })
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
                    lock: self.platform,
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
            Step::Send(LockOp::Unlock { lock: self.platform })
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
            Step::Send(LockOp::Unlock { lock: self.platform })
        } else {
            Step::Done
        }
    }

    fn begin_task(&mut self, memo: TaskMemo) {
        self.first_try = memo.first_try;
        self.task_walk = memo.walk;
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

    /// Issue 37 item 3: the unlock is compare-and-delete. A's key expires, B takes the lock,
    /// then A's late unlock must leave B's key alone: a third try is still refused. (A mutant
    /// whose unlock deletes the key whoever holds it survived every test but a golden hash.)
    #[test]
    fn a_late_unlock_never_deletes_another_holders_key() {
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
        // A's key lives out its TTL; B takes the lock
        assert_eq!(w.serve(60_000_000_000, 1, try_lock), LockReply::Locked { lock: 0 });
        // A, still walking, unlocks: not its key any more
        assert_eq!(
            w.serve(61_000_000_000, 0, LockOp::Unlock { lock: 0 }),
            LockReply::Unlocked
        );
        assert_eq!(
            w.serve(61_000_000_001, 2, try_lock),
            LockReply::Busy,
            "A's unlock freed B's lock"
        );
        // B's own unlock frees it
        w.serve(62_000_000_000, 1, LockOp::Unlock { lock: 0 });
        assert_eq!(w.serve(62_000_000_001, 2, try_lock), LockReply::Locked { lock: 0 });
    }
}
