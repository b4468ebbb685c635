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
//! - **Platform cooldown** (`cooldown`, issue 35 item 4; the record says only that "the
//!   platform-cooldown handled the aftermath of a 429", so what it does is pacesim's reading):
//!   a walk whose fetch is answered 429 stops (its download fails: the remaining fetches are
//!   not made, the lock is released) and puts its platform on cooldown for `cooldown`
//!   (`SET fc:platform_cooldown:<platform> 1 PX cooldown`, [`LockOp::CoolDown`]); every task,
//!   before it walks a platform (before the walk lock, serialised or not), reads its cooldown
//!   ([`LockOp::Cooling`], `PTTL`) and, while it lives, re-enqueues itself with a countdown to
//!   its end. Walks already running are not stopped by another walk's 429 (each is its own
//!   subprocess), only by their own. A broker error on the read degrades as the lock does: the
//!   task goes on. Without `cooldown`, a walk ignores its 429s (gallery-dl's own retries).

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
    /// The safety valve re-checks a lock before it runs uncapped: a task past `max_wait` tries
    /// the platform's valve key (`fc:download_lock:<platform>:valve`, `SET NX PX ttl`), walks
    /// uncapped only if it takes it (releasing it after), and otherwise re-enqueues with the
    /// countdown (its next execution tries the walk lock first). At most one valve walk per
    /// platform at a time. Default false: the record's valve runs uncapped at once. pacesim's
    /// choice (issue 35 item 1), one reading of "a valve that re-checks the lock".
    pub valve_lock: Option<bool>,
    /// Spread the safety valve: each task's valve fires at `max_wait + u x valve_jitter`, `u`
    /// uniform in [0, 1) drawn from the task (its download event through a broker, else its
    /// process and first attempt), so a redelivered task keeps its draw. Default 0: the
    /// record's one `max_wait` for every task. pacesim's choice (issue 35 item 1).
    pub valve_jitter: Option<Nanos>,
    /// The platform cooldown after a 429: how long the platform's cooldown key lives. Needs
    /// `[[platforms]]`. Default absent: no cooldown, a walk ignores its 429s. pacesim's choice
    /// (issue 35 item 4): the record names the platform-cooldown but not its length or rules
    /// (see the module's header for what pacesim makes it do).
    pub cooldown: Option<Nanos>,
}

/// The Redis walk-lock backend.
#[derive(Hash, Clone, Debug)]
pub struct RedisLock {
    ttl: Nanos,
    max_wait: Nanos,
    poll: Nanos,
    walk: u32,
    interval: Nanos,
    platforms: Vec<WalkPlatform>,
    seed: u64,
    valve_lock: bool,
    valve_jitter: Nanos,
    cooldown: Option<Nanos>,
}

/// SplitMix64's output function: a well-mixed 64-bit value from any input (the valve's jitter
/// draw, a function of the task alone so every execution of it draws the same).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One declared platform as the walker sees it.
#[derive(Hash, Clone, Debug)]
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
        options::positive("cooldown", o.cooldown)?;
        if sc.platforms.is_empty() && o.cooldown.is_some() {
            return Err(OptionError::new(
                "cooldown",
                "is a platform's cooldown, but the scenario declares no platforms ([[platforms]])",
            ));
        }
        if sc.platforms.is_empty() && o.serialized_platforms.is_some() {
            return Err(OptionError::new(
                "serialized_platforms",
                "names platforms, but the scenario declares none ([[platforms]])",
            ));
        }
        if o.valve_lock == Some(true) && sc.platforms.len() > crate::platform::MAX_PLATFORMS / 2 {
            return Err(OptionError::new(
                "valve_lock",
                format!(
                    "needs a valve key per platform: at most {} platforms",
                    crate::platform::MAX_PLATFORMS / 2
                ),
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
            valve_lock: o.valve_lock.unwrap_or(false),
            valve_jitter: o.valve_jitter.unwrap_or(Nanos(0)),
            cooldown: o.cooldown,
        })
    }

    /// The TTL in force.
    pub fn ttl(&self) -> Nanos {
        self.ttl
    }

    /// The walk locks (one per platform, one without platforms): lock numbers at or past this
    /// are the valve keys (`valve_lock`), the valve key of lock `k` being `locks() + k`.
    fn locks(&self) -> u32 {
        self.platforms.len().max(1) as u32
    }

    /// When the safety valve fires for a task that first asked at `first` (`key`: the task's
    /// identity, for its jitter draw).
    fn valve_at(&self, first: Instant, key: u64) -> Instant {
        if self.valve_jitter.0 == 0 {
            return first + self.max_wait;
        }
        let u = splitmix64(self.seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 11;
        let frac = u as f64 / (1u64 << 53) as f64;
        first + self.max_wait + Nanos((self.valve_jitter.0 as f64 * frac) as u64)
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
            "max_wait_ns": self.max_wait.0,
            "poll_ns": self.poll.0,
            "interval_ns": self.interval.0,
        });
        if self.valve_lock {
            d["valve_lock"] = serde_json::json!(true);
        }
        if self.valve_jitter.0 > 0 {
            d["valve_jitter_ns"] = serde_json::json!(self.valve_jitter.0);
        }
        if let Some(c) = self.cooldown {
            d["cooldown_ns"] = serde_json::json!(c.0);
        }
        d
    }

    fn facts(&self) -> crate::backend::Facts {
        let rate = 1e9 / self.interval.0 as f64;
        crate::backend::Facts {
            ttl_ns: Some(self.ttl.0),
            walk: Some(u64::from(self.walk)),
            locks: Some(self.platforms.iter().filter(|p| p.serialized).count().max(1) as u64),
            fallback: Some(crate::trace::StoreFallback::Uncapped),
            platforms: (!self.platforms.is_empty()).then(|| self.platform_detail(rate)),
            ..Default::default()
        }
    }

    fn platforms(&self) -> bool {
        true
    }
    fn jobs(&self) -> bool {
        true
    }
    fn process(&self, pid: u32) -> Walker {
        Walker {
            cfg: self.clone(),
            left: 0,
            holding: false,
            valve: false,
            first_try: None,
            task_walk: None,
            task: None,
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
            valve_from: self.locks(),
            cooldown: self.cooldown.unwrap_or(Nanos::ZERO),
            cooling: Vec::new(),
        }
    }
}

/// The keys in Redis: one per platform (lock index = platform index), one without platforms.
#[derive(Clone, Hash, Debug)]
pub struct LockKey {
    // invariant: Some((holder, expires_at)) while lock 0's key exists.
    key: Option<(Session, Instant)>,
    // the keys of locks 1.. (platforms after the first), as `key`
    others: Vec<Option<(Session, Instant)>>,
    ttl: Nanos,
    // lock numbers at or past this are valve keys (`valve_lock`): not a walk's critical
    // section, so their taking and release write no lock events (the walk they admit is
    // `uncapped`, as the record's valve is)
    valve_from: u32,
    // the platform cooldown keys' TTL (`cooldown`)
    cooldown: Nanos,
    // invariant: cooling[k] is Some(expiry) while platform k's cooldown key exists (or expired
    // and not yet read: every read compares with the time).
    cooling: Vec<Option<Instant>>,
}

impl LockKey {
    /// A platform cooldown operation on platform `lock` at `t`: `CoolDown` sets (or renews)
    /// the key for `cooldown`; `Cooling` reads it.
    fn cool(&mut self, t: Instant, op: &LockOp, lock: u32) -> LockReply {
        let i = lock as usize;
        if i >= self.cooling.len() {
            self.cooling.resize(i + 1, None);
        }
        let key = &mut self.cooling[i];
        if matches!(op, LockOp::CoolDown { .. }) {
            *key = Some(t + self.cooldown);
        }
        match *key {
            Some(until) if until > t => LockReply::CoolingUntil { until },
            _ => {
                *key = None;
                LockReply::NotCooling
            }
        }
    }

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
            if let Some((holder, _)) = self.slot(lock).take()
                && lock < self.valve_from
            {
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
        let lock = match *op {
            LockOp::TryLock { lock } | LockOp::Unlock { lock } => lock,
            LockOp::CoolDown { lock } | LockOp::Cooling { lock } => return Served::now(self.cool(cx.t, op, lock)),
        };
        let (t, ttl, walk_lock) = (cx.t, self.ttl, lock < self.valve_from);
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
                    if walk_lock {
                        cx.out.event(&Event::LockAcquired {
                            t: t.0,
                            pid: s.pid,
                            lock,
                        });
                    }
                    cx.timers.push((exp, timer_token(s, lock)));
                    Served::now(LockReply::Locked { lock })
                }
                Some(_) => Served::now(LockReply::Busy),
            },
            LockOp::CoolDown { .. } | LockOp::Cooling { .. } => unreachable!("answered above"),
            LockOp::Unlock { .. } => {
                if matches!(*key, Some((h, _)) if h == s) {
                    *key = None;
                }
                // The walk (the critical section) is over, whether or not the key was ours.
                if walk_lock {
                    cx.out.event(&Event::LockReleased {
                        t: t.0,
                        pid: s.pid,
                        lock,
                        reason: ReleaseReason::Release,
                    });
                }
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
#[derive(Clone, Hash, Debug)]
pub struct Walker {
    cfg: RedisLock,
    // Fetches left in the current walk (0 = no walk in progress).
    left: u32,
    // Holds the lock (false for an uncapped walk).
    holding: bool,
    // Holds the platform's valve key (`valve_lock`): the uncapped walk releases it.
    valve: bool,
    // When the current job first asked for the lock.
    first_try: Option<Instant>,
    // The current broker task's walk length (None: `cfg.walk`).
    task_walk: Option<u32>,
    // The current broker task's identity (its event), for the valve's jitter.
    task: Option<u32>,
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
        self.valve = false;
        self.first_try = None;
        self.next_fetch(cx)
    }

    /// The platform is not cooling down (or its cooldown could not be read): take its walk
    /// lock, or walk at once if it is not serialised.
    fn past_cooldown(&mut self, cx: &mut ProcCx) -> Step<LockOp> {
        let serialized = self
            .cfg
            .platforms
            .get(self.platform as usize)
            .is_none_or(|p| p.serialized);
        if serialized {
            Step::Send(LockOp::TryLock { lock: self.platform })
        } else {
            self.start_walk(cx, false)
        }
    }

    /// The walk is over: release what it holds.
    fn end_walk(&mut self) -> Step<LockOp> {
        self.left = 0;
        if self.holding {
            Step::Send(LockOp::Unlock { lock: self.platform })
        } else if self.valve {
            Step::Send(LockOp::Unlock {
                lock: self.cfg.locks() + self.platform,
            })
        } else {
            Step::Done
        }
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
            if !p.serialized && self.cfg.cooldown.is_none() {
                // left uncapped: a self-pacing walk, no lock
                return self.start_walk(cx, false);
            }
        }
        self.first_try.get_or_insert(cx.t);
        if self.cfg.cooldown.is_some() {
            // is the platform cooling down after a 429? (every execution asks first)
            return Step::Send(LockOp::Cooling { lock: self.platform });
        }
        Step::Send(LockOp::TryLock { lock: self.platform })
    }

    fn on_reply(&mut self, cx: &mut ProcCx, op: &LockOp, reply: LockReply) -> Step<LockOp> {
        let valve_key = self.cfg.locks() + self.platform;
        match (*op, reply) {
            // the platform cooldown: wait it out with a countdown to its end, or go on
            (LockOp::Cooling { .. }, LockReply::CoolingUntil { until }) => Step::Requeue(until.max(cx.t)),
            (LockOp::Cooling { .. }, _) => self.past_cooldown(cx),
            // the cooldown is set after a 429: the walk is over
            (LockOp::CoolDown { .. }, _) => self.end_walk(),
            // the valve key (`valve_lock`): the one valve walk of the platform
            (LockOp::TryLock { lock }, LockReply::Locked { .. }) if lock == valve_key => {
                Walker::uncapped(cx, UncappedReason::SafetyValve);
                let step = self.start_walk(cx, false);
                self.valve = true;
                step
            }
            (LockOp::TryLock { lock }, _) if lock == valve_key => Step::Requeue(cx.t + self.cfg.poll),
            (LockOp::TryLock { .. }, LockReply::Locked { .. }) => self.start_walk(cx, true),
            (LockOp::TryLock { .. }, _) => {
                let first = self.first_try.unwrap_or(cx.t);
                let key = match self.task {
                    Some(e) => (1 << 63) | e as u64,
                    None => ((cx.pid as u64) << 40) ^ first.0,
                };
                if cx.t >= self.cfg.valve_at(first, key) {
                    if self.cfg.valve_lock {
                        // re-check: the valve key admits one valve walk at a time
                        return Step::Send(LockOp::TryLock { lock: valve_key });
                    }
                    Walker::uncapped(cx, UncappedReason::SafetyValve);
                    self.start_walk(cx, false)
                } else {
                    Step::Requeue(cx.t + self.cfg.poll) // re-enqueue with a countdown
                }
            }
            (LockOp::Unlock { .. }, _) => {
                self.holding = false;
                self.valve = false;
                Step::Done
            }
        }
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, op: &LockOp) -> Step<LockOp> {
        match op {
            LockOp::Unlock { .. } if self.valve => {
                // the valve key stays until its TTL; the walk is over
                self.valve = false;
                Step::Done
            }
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
            // the cooldown cannot be read: degrade as the lock does, go on
            LockOp::Cooling { .. } => self.past_cooldown(cx),
            // the cooldown could not be set: the walk is over all the same
            LockOp::CoolDown { .. } => self.end_walk(),
        }
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, status: u16) -> Step<LockOp> {
        self.left = self.left.saturating_sub(1);
        if status == crate::destination::status::TOO_MANY && self.cfg.cooldown.is_some() {
            // the aftermath of a 429: the platform cools down, this walk stops
            self.left = 0;
            return Step::Send(LockOp::CoolDown { lock: self.platform });
        }
        if self.left > 0 {
            self.next_fetch(cx)
        } else {
            self.end_walk()
        }
    }

    fn on_soft_limit(&mut self, _cx: &mut ProcCx) -> Step<LockOp> {
        // The chunk finalises: release the lock like a finished walk. (Only a walk's own
        // execution can pass its soft limit: a try that finds the lock taken ends its execution
        // at once; the task's first attempt stays as it was.)
        self.end_walk()
    }

    fn begin_task(&mut self, memo: TaskMemo) {
        self.first_try = memo.first_try;
        self.task_walk = memo.walk;
        self.task = memo.task;
    }
}

impl crate::backend::Configure for RedisLockOptions {
    type Backend = RedisLock;
    fn build(self, sc: &Scenario) -> Result<RedisLock, OptionError> {
        RedisLock::new(sc, self)
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
        let sc = crate::registry::parse("t", &src).unwrap();
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

    fn world(b: RedisLock) -> World {
        World {
            key: b.store(),
            walkers: (0..3).map(|p| b.process(p)).collect(),
            b,
            sink: Collect::default(),
            rng: crate::rng::stream(1, crate::rng::Entity::Store),
            timers: Vec::new(),
            clock: Clock::reference(),
        }
    }

    /// Issue 35 item 1: `valve_lock` (pacesim's option). Two tasks reach the valve together
    /// behind a holder that never releases: the first takes the valve key (no lock event: it
    /// walks uncapped, as the record's valve does), the second finds it taken and re-enqueues;
    /// once the first walk releases the valve key the second takes it. Without the option
    /// both run uncapped at once (the record's valve).
    #[test]
    fn valve_lock_admits_one_valve_walk_at_a_time() {
        let try_lock = LockOp::TryLock { lock: 0 };
        let valve_key = LockOp::TryLock { lock: 1 };
        let mut w = world(lock("ttl='60s'\npoll='5s'\nmax_wait='12s'\nwalk=3\nvalve_lock=true"));
        assert_eq!(w.serve(0, 0, try_lock), LockReply::Locked { lock: 0 });
        for pid in [1, 2] {
            assert_eq!(w.proc(0, pid, |p, cx| p.acquire(cx)), Step::Send(try_lock));
        }
        let t = 13_000_000_000;
        for pid in [1, 2] {
            assert_eq!(w.serve(t, pid, try_lock), LockReply::Busy);
            assert_eq!(
                w.proc(t, pid, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
                Step::Send(valve_key),
                "past max_wait, pid {pid} re-checks the valve key"
            );
        }
        let events = w.sink.events.len();
        assert_eq!(w.serve(t, 1, valve_key), LockReply::Locked { lock: 1 });
        assert!(matches!(
            w.proc(t, 1, |p, cx| p.on_reply(cx, &valve_key, LockReply::Locked { lock: 1 })),
            Step::FetchAt(_)
        ));
        assert_eq!(w.serve(t, 2, valve_key), LockReply::Busy);
        assert_eq!(
            w.proc(t, 2, |p, cx| p.on_reply(cx, &valve_key, LockReply::Busy)),
            Step::Requeue(Instant(t + 5_000_000_000))
        );
        let new = &w.sink.events[events..];
        assert_eq!(new.len(), 1, "only the uncapped walk is traced: {new:?}");
        assert!(matches!(
            new[0],
            Event::Uncapped {
                pid: 1,
                reason: UncappedReason::SafetyValve,
                ..
            }
        ));
        // the valve walk ends by releasing the valve key; then the other takes it
        let mut last = Step::Done;
        for _ in 0..3 {
            last = w.proc(t, 1, |p, cx| p.after_fetch(cx, 200));
        }
        assert_eq!(last, Step::Send(LockOp::Unlock { lock: 1 }));
        w.serve(t + 1, 1, LockOp::Unlock { lock: 1 });
        assert_eq!(w.serve(t + 2, 2, valve_key), LockReply::Locked { lock: 1 });
        // the record's valve, without the option: both walk uncapped at once
        let mut w = world(lock("ttl='60s'\npoll='5s'\nmax_wait='12s'"));
        w.serve(0, 0, try_lock);
        for pid in [1, 2] {
            w.proc(0, pid, |p, cx| p.acquire(cx));
            assert!(matches!(
                w.proc(t, pid, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
                Step::FetchAt(_)
            ));
        }
    }

    /// Issue 35 item 1: `valve_jitter` (pacesim's option). Each task's valve fires at
    /// `max_wait` plus its own draw in [0, jitter): the same task always draws the same (an
    /// execution on another worker, a redelivery), different tasks spread over the range.
    /// Without it every task's valve is exactly `max_wait`.
    #[test]
    fn valve_jitter_is_the_tasks_own_draw_within_the_range() {
        let b = lock("max_wait='12s'\nvalve_jitter='60s'");
        let at: Vec<u64> = (0..64u64).map(|e| b.valve_at(Instant(0), (1 << 63) | e).0).collect();
        assert!(
            at.iter().all(|&a| (12_000_000_000..72_000_000_000).contains(&a)),
            "{at:?}"
        );
        assert_eq!(at[5], b.valve_at(Instant(0), (1 << 63) | 5).0, "one task, one draw");
        let (lo, hi) = (*at.iter().min().unwrap(), *at.iter().max().unwrap());
        assert!(
            lo < 24_000_000_000 && hi > 60_000_000_000,
            "spread over the range: {lo}..{hi}"
        );
        // through the walker: task 5's valve fires at its draw, not before
        let mut w = world(b);
        let try_lock = LockOp::TryLock { lock: 0 };
        w.walkers[1].begin_task(TaskMemo {
            first_try: Some(Instant(0)),
            walk: Some(3),
            task: Some(5),
        });
        assert!(matches!(
            w.proc(at[5] - 1, 1, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
            Step::Requeue(_)
        ));
        assert!(matches!(
            w.proc(at[5], 1, |p, cx| p.on_reply(cx, &try_lock, LockReply::Busy)),
            Step::FetchAt(_)
        ));
        let plain = lock("max_wait='12s'");
        assert!((0..64u64).all(|e| plain.valve_at(Instant(0), e).0 == 12_000_000_000));
    }
}
