//! The protocol shared by the lock-slot backends ([`super::advisory`], [`super::claim_row`]):
//! a process takes one of K locks without blocking, trying each in turn, and polls again
//! after `poll` when all are taken. The store side is [`LockTable`], the process side
//! [`LockProcess`]. What a lock *is* in the store, and what a crash or a failed release does to
//! it, is each backend's own file.
//!
//! Trace convention (the mutual-exclusion checker reads it): `lock_acquired` when the store
//! grants a lock; `lock_released` when its holder's critical section ends: the holder
//! released it (`release`), died (`holder_died`, written by the worker loop for every lock its
//! events show it holding), or the store dropped it under a live holder (`store_restart`: the
//! holder does not know, so its section goes on while another holder may enter: the overlap
//! the checker must see is not hidden, because the store's release is reported with the
//! *store's* reason and the holder's own end is reported again).

use crate::backend::fallback::{FallbackCfg, Pace, ProcFallback};
use crate::backend::{ProcCx, ProcessSide, Session, Step, StoreCx, StoreOp, StoreReply};
use crate::time::{Instant, Nanos};
use crate::trace::{Event, OpKind, ReleaseReason};
use serde::{Deserialize, Serialize};

/// What an advisory lock is used for.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockUse {
    /// At most K fetches at once: the lock is held for the fetch.
    Concurrency,
    /// The rejected "fake rate": each lock is held for a fixed time `hold`.
    FakeRate,
}

impl From<LockUse> for crate::trace::LockUse {
    fn from(u: LockUse) -> Self {
        match u {
            LockUse::Concurrency => crate::trace::LockUse::Concurrency,
            LockUse::FakeRate => crate::trace::LockUse::FakeRate,
        }
    }
}

/// An operation of the lock backends.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockOp {
    /// Try to take lock number `lock`, without blocking.
    TryLock {
        /// Lock number.
        lock: u32,
    },
    /// Release lock number `lock` (only if still ours).
    Unlock {
        /// Lock number.
        lock: u32,
    },
    /// `redis_lock`'s platform cooldown: put platform `lock` on cooldown (a 429's aftermath,
    /// `SET fc:platform_cooldown:<platform> 1 PX cooldown`). Sent by no other backend.
    CoolDown {
        /// The platform's lock number.
        lock: u32,
    },
    /// `redis_lock`'s platform cooldown: is platform `lock` cooling down, and until when
    /// (`PTTL`)? Sent by no other backend.
    Cooling {
        /// The platform's lock number.
        lock: u32,
    },
}

impl StoreOp for LockOp {
    fn kind(&self) -> OpKind {
        match self {
            LockOp::TryLock { .. } => OpKind::TryLock,
            LockOp::Unlock { .. } => OpKind::Unlock,
            // reports a 429 to the fleet's shared state
            LockOp::CoolDown { .. } => OpKind::Report,
            // asks whether the platform may be walked: a request for permission
            LockOp::Cooling { .. } => OpKind::Acquire,
        }
    }
}

/// The store's answer to a [`LockOp`].
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockReply {
    /// The lock is ours.
    Locked {
        /// Lock number.
        lock: u32,
    },
    /// The lock is held by someone else (or no session was free).
    Busy,
    /// The lock was released (or was no longer ours).
    Unlocked,
    /// `redis_lock`'s platform cooldown: the platform cools down until this time (the answer
    /// to [`LockOp::CoolDown`], and to [`LockOp::Cooling`] while it does).
    CoolingUntil {
        /// When the cooldown key expires.
        until: Instant,
    },
    /// `redis_lock`'s platform cooldown: the platform is not cooling down.
    NotCooling,
}

impl StoreReply for LockReply {
    fn took_lock(&self) -> bool {
        matches!(self, LockReply::Locked { .. })
    }
}

/// The locks in the store.
#[derive(Clone, Hash, Debug)]
pub struct LockTable {
    // invariant: holders[k] is the session holding lock k, if any.
    holders: Vec<Option<Session>>,
}

impl LockTable {
    /// K free locks.
    pub fn new(k: u32) -> LockTable {
        LockTable {
            holders: vec![None; k as usize],
        }
    }
    /// Locks held now.
    pub fn held(&self) -> u32 {
        self.holders.iter().filter(|h| h.is_some()).count() as u32
    }
    /// Try to take lock `k` for `s`: the atomic operation.
    pub fn try_take(&mut self, cx: &mut StoreCx, k: u32, s: Session) -> LockReply {
        match self.holders[k as usize] {
            None => {
                self.holders[k as usize] = Some(s);
                cx.out.event(&Event::LockAcquired {
                    t: cx.t.0,
                    pid: s.pid,
                    lock: k,
                });
                LockReply::Locked { lock: k }
            }
            Some(h) if h == s => LockReply::Locked { lock: k },
            Some(_) => LockReply::Busy,
        }
    }
    /// Release lock `k` if `s` holds it (compare-and-delete).
    pub fn release(&mut self, cx: &mut StoreCx, k: u32, s: Session, reason: ReleaseReason) -> bool {
        if self.holders[k as usize] == Some(s) {
            self.holders[k as usize] = None;
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid: s.pid,
                lock: k,
                reason,
            });
            true
        } else {
            false
        }
    }
    /// The holder's critical section on lock `k` ends (an unlock served, or its session
    /// broken): release the lock if `s` still holds it; if the store had already dropped it
    /// (a restart), report the holder's own end all the same.
    pub fn end_section(&mut self, cx: &mut StoreCx, k: u32, s: Session) {
        if !self.release(cx, k, s, ReleaseReason::Release) {
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid: s.pid,
                lock: k,
                reason: ReleaseReason::Release,
            });
        }
    }
    /// The lock `s` holds, if any.
    pub fn held_by(&self, s: Session) -> Option<u32> {
        self.holders.iter().position(|h| *h == Some(s)).map(|k| k as u32)
    }
    /// Drop every lock (a store restart loses session state), reporting each.
    pub fn clear(&mut self, cx: &mut StoreCx, reason: ReleaseReason) {
        for (k, h) in self.holders.iter_mut().enumerate() {
            if let Some(s) = h.take() {
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: s.pid,
                    lock: k as u32,
                    reason,
                });
            }
        }
    }
}

/// Options of the lock-slot protocol.
#[derive(Hash, Copy, Clone, Debug)]
pub struct Protocol {
    /// Number of locks K.
    pub k: u32,
    /// What a lock is held for.
    pub lock_use: LockUse,
    /// `fake_rate`: how long each acquired lock is held.
    pub hold: Nanos,
    /// Wait before trying again when every lock is taken.
    pub poll: Nanos,
}

impl Protocol {
    /// The first lock a process tries (spread processes over the locks).
    pub fn first(&self, pid: u32) -> u32 {
        pid % self.k
    }
}

/// How a process releases its lock after the fetch.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// Mark the lock as being released and unlock (or, a fake rate, sleep holding it until
    /// its hold is over); a job that begins before the unlock is answered sends it again.
    Marked,
    /// Unlock once, without marking: a job beginning before the unlock is answered tries for
    /// a lock again instead of resending it (`claim_row`: a failed release is never retried).
    Once,
}

/// One process's side of the protocol: the lock it believes it holds, and its fallback. The
/// process side of `advisory` and `claim_row` (they differ in how they release).
#[derive(Clone, Hash, Debug)]
pub struct LockProcess {
    pid: u32,
    proto: Protocol,
    release: Release,
    fallback: ProcFallback,
    /// Locks tried in the current round.
    tried: u32,
    /// The lock this process believes it holds.
    held: Option<u32>,
    /// When it got it.
    since: Instant,
    /// True once the fetch is done and the process is releasing.
    releasing: bool,
}

impl LockProcess {
    /// Process `pid`, holding nothing, outside fallback.
    pub fn new(pid: u32, proto: Protocol, release: Release, fallback: &FallbackCfg) -> LockProcess {
        LockProcess {
            pid,
            proto,
            release,
            fallback: fallback.fresh(),
            tried: 0,
            held: None,
            since: Instant::ZERO,
            releasing: false,
        }
    }

    /// The process wants a lock: a fresh round of tries from its first lock, unless it is still
    /// releasing the last one (woken after a fake-rate hold, or a job that began while an
    /// unlock was cut short), which it unlocks first.
    fn want(&mut self) -> Step<LockOp> {
        match self.held {
            Some(lock) if self.releasing => Step::Send(LockOp::Unlock { lock }),
            _ => {
                self.tried = 0;
                Step::Send(LockOp::TryLock {
                    lock: self.proto.first(self.pid),
                })
            }
        }
    }

    /// The store answered `op`: an unlock ends the job; a try either got a lock (fetch now),
    /// moves on to the next lock, or polls again after a full round.
    fn replied(&mut self, cx: &mut ProcCx, op: &LockOp, reply: LockReply) -> Step<LockOp> {
        self.fallback.on_success(cx);
        match *op {
            // (the cooldown operations are `redis_lock`'s: never sent by this protocol)
            LockOp::Unlock { .. } | LockOp::CoolDown { .. } | LockOp::Cooling { .. } => self.released(),
            LockOp::TryLock { lock: k } => match reply {
                LockReply::Locked { lock } => {
                    self.held = Some(lock);
                    self.since = cx.t;
                    self.releasing = false;
                    Step::FetchAt(cx.t)
                }
                _ => {
                    self.tried += 1;
                    if self.tried < self.proto.k {
                        Step::Send(LockOp::TryLock {
                            lock: (k + 1) % self.proto.k,
                        })
                    } else {
                        self.tried = 0;
                        Step::RetryAt(cx.t + self.proto.poll)
                    }
                }
            },
        }
    }

    /// The process is done with its lock (its unlock answered or failed): the job ends.
    pub fn released(&mut self) -> Step<LockOp> {
        self.held = None;
        self.releasing = false;
        Step::Done
    }

    /// The store failed `op`: a failed unlock ends the job (what the store does with the
    /// lock is its own side's business); a failed try falls back.
    fn failed(&mut self, cx: &mut ProcCx, op: &LockOp) -> Step<LockOp> {
        match op {
            LockOp::Unlock { .. } | LockOp::CoolDown { .. } | LockOp::Cooling { .. } => self.released(),
            LockOp::TryLock { .. } => self.fallback.on_error(cx, Pace::Own(1.0)),
        }
    }

    /// After the fetch: release as [`Release`] says. A fallback fetch held no lock: the job
    /// ends.
    fn release_after_fetch(&mut self, t: Instant) -> Step<LockOp> {
        let Some(lock) = self.held else {
            return Step::Done;
        };
        if self.release == Release::Once {
            return Step::Send(LockOp::Unlock { lock });
        }
        self.releasing = true;
        match self.proto.lock_use {
            LockUse::Concurrency => Step::Send(LockOp::Unlock { lock }),
            LockUse::FakeRate => {
                let at = self.since + self.proto.hold;
                if at > t {
                    Step::RetryAt(at)
                } else {
                    Step::Send(LockOp::Unlock { lock })
                }
            }
        }
    }
}

impl ProcessSide for LockProcess {
    type Op = LockOp;
    type Reply = LockReply;

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<LockOp> {
        if self.held.is_none()
            && let Some(step) = self.fallback.short_circuit(cx, Pace::Own(1.0))
        {
            return step;
        }
        self.want()
    }

    fn on_reply(&mut self, cx: &mut ProcCx, op: &LockOp, reply: LockReply) -> Step<LockOp> {
        self.replied(cx, op, reply)
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, op: &LockOp) -> Step<LockOp> {
        self.failed(cx, op)
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, _status: u16) -> Step<LockOp> {
        self.release_after_fetch(cx.t)
    }
}
