//! The protocol shared by the lock-slot backends ([`super::advisory`], [`super::claim_row`]):
//! a process takes one of K locks without blocking, trying each in turn, and polls again
//! after `poll` when all are taken. The store side is [`LockTable`], the process side
//! [`Holders`]. What a lock *is* in the store, and what a crash or a failed release does to
//! it, is each backend's own file.
//!
//! Trace convention (the mutual-exclusion checker reads it): `lock_acquired` when the store
//! grants a lock; `lock_released` when its holder's critical section ends: the holder
//! released it (`release`), died (`holder_died`), or the store dropped it under a live holder
//! (`store_restart`: the holder does not know, so its section goes on while another holder
//! may enter: the overlap the checker must see is not hidden, because the store's release is
//! reported with the *store's* reason and the holder's own end is reported again).

use crate::backend::fallback::Fallbacks;
use crate::backend::{Cx, Op, ProcView, Reply, Step};
use crate::scenario::{Fallback, LockUse, Scenario};
use crate::time::{Instant, Nanos};
use crate::trace::{Event, ReleaseReason};

/// Who holds a lock: a process id and its session (a restarted process has a new session).
pub type Session = (u32, u32);

/// The locks in the store.
#[derive(Debug)]
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
    /// Number of locks.
    pub fn len(&self) -> u32 {
        self.holders.len() as u32
    }
    /// True when there are no locks.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }
    /// Locks held now.
    pub fn held(&self) -> u32 {
        self.holders.iter().filter(|h| h.is_some()).count() as u32
    }
    /// Try to take lock `k` for `s`: the atomic operation.
    pub fn try_take(&mut self, cx: &mut Cx, k: u32, s: Session) -> Reply {
        match self.holders[k as usize] {
            None => {
                self.holders[k as usize] = Some(s);
                cx.out.event(&Event::LockAcquired {
                    t: cx.t.0,
                    pid: s.0,
                    lock: k,
                });
                Reply::Locked { lock: k }
            }
            Some(h) if h == s => Reply::Locked { lock: k },
            Some(_) => Reply::Busy,
        }
    }
    /// Release lock `k` if `s` holds it (compare-and-delete).
    pub fn release(&mut self, cx: &mut Cx, k: u32, s: Session, reason: ReleaseReason) -> bool {
        if self.holders[k as usize] == Some(s) {
            self.holders[k as usize] = None;
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid: s.0,
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
    pub fn end_section(&mut self, cx: &mut Cx, k: u32, s: Session) {
        if !self.release(cx, k, s, ReleaseReason::Release) {
            cx.out.event(&Event::LockReleased {
                t: cx.t.0,
                pid: s.0,
                lock: k,
                reason: ReleaseReason::Release,
            });
        }
    }
    /// `s` was killed: report its critical section's end if it holds a lock, and return that
    /// lock. The lock itself stays taken; whether and when the store frees it is the
    /// backend's semantics.
    pub fn holder_died(&self, cx: &mut Cx, s: Session) -> Option<u32> {
        let lock = self.held_by(s)?;
        cx.out.event(&Event::LockReleased {
            t: cx.t.0,
            pid: s.0,
            lock,
            reason: ReleaseReason::HolderDied,
        });
        Some(lock)
    }
    /// The lock `s` holds, if any.
    pub fn held_by(&self, s: Session) -> Option<u32> {
        self.holders.iter().position(|h| *h == Some(s)).map(|k| k as u32)
    }
    /// Drop every lock (a store restart loses session state), reporting each.
    pub fn clear(&mut self, cx: &mut Cx, reason: ReleaseReason) {
        for (k, h) in self.holders.iter_mut().enumerate() {
            if let Some(s) = h.take() {
                cx.out.event(&Event::LockReleased {
                    t: cx.t.0,
                    pid: s.0,
                    lock: k as u32,
                    reason,
                });
            }
        }
    }
}

/// A process's side of the protocol.
#[derive(Clone, Debug, Default)]
pub struct Holder {
    /// The session id of the current incarnation.
    pub session: u32,
    /// Locks tried in the current round.
    pub tried: u32,
    /// The lock this process believes it holds.
    pub held: Option<u32>,
    /// When it got it.
    pub since: Instant,
    /// True once the fetch is done and the process is releasing.
    pub releasing: bool,
}

/// Options of the lock-slot protocol.
#[derive(Copy, Clone, Debug)]
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
    /// From `[pacer]` options.
    pub fn new(sc: &Scenario) -> Protocol {
        Protocol {
            k: sc.pacer.locks.unwrap_or(1).max(1),
            lock_use: sc.pacer.lock_use.unwrap_or(LockUse::Concurrency),
            hold: sc.pacer.hold.unwrap_or(sc.interval()),
            poll: sc.pacer.poll.unwrap_or(Nanos::from_millis(100)),
        }
    }

    /// The first lock a process tries (spread processes over the locks).
    pub fn first(&self, pid: u32) -> u32 {
        pid % self.k
    }

    /// The store answered a try for lock `k`.
    pub fn on_try_reply(&self, h: &mut Holder, t: Instant, k: u32, reply: Reply) -> Result<Step, u32> {
        match reply {
            Reply::Locked { lock } => {
                h.held = Some(lock);
                h.since = t;
                h.releasing = false;
                Ok(Step::FetchAt(t))
            }
            _ => {
                h.tried += 1;
                if h.tried < self.k {
                    Err((k + 1) % self.k)
                } else {
                    h.tried = 0;
                    Ok(Step::RetryAt(t + self.poll))
                }
            }
        }
    }

    /// After the fetch: when to release. `Ok(None)` = release now; `Ok(Some(at))` = sleep
    /// (holding the lock) until `at`, then release (the fake rate).
    pub fn release_at(&self, h: &mut Holder, t: Instant) -> Option<Instant> {
        h.releasing = true;
        match self.lock_use {
            LockUse::Concurrency => None,
            LockUse::FakeRate => {
                let at = h.since + self.hold;
                (at > t).then_some(at)
            }
        }
    }
}

/// The process side of the protocol for every process: each one's [`Holder`], the options, and
/// the fallback a process takes when the store fails a try.
#[derive(Debug)]
pub struct Holders {
    name: &'static str,
    proto: Protocol,
    holders: Vec<Holder>,
    fallbacks: Fallbacks,
}

impl Holders {
    /// One rested holder per process, for backend `name`; `fallback` is the backend's default
    /// mode (`[pacer] fallback` overrides it).
    pub fn new(sc: &Scenario, name: &'static str, fallback: Fallback) -> Holders {
        Holders {
            name,
            proto: Protocol::new(sc),
            holders: vec![Holder::default(); sc.processes.count as usize],
            fallbacks: Fallbacks::with_default(sc, fallback),
        }
    }

    /// The options.
    pub fn proto(&self) -> &Protocol {
        &self.proto
    }

    /// The fallback mode's name.
    pub fn fallback_name(&self) -> &'static str {
        self.fallbacks.mode_name()
    }

    /// `pid`'s current session.
    pub fn session(&self, pid: u32) -> Session {
        (pid, self.holders[pid as usize].session)
    }

    /// The process wants a lock: a fresh round of tries from its first lock, unless it is still
    /// releasing the last one (woken after a fake-rate hold, or a job that began while an
    /// unlock was cut short), which it unlocks first.
    pub fn acquire(&mut self, pid: u32) -> Step {
        let h = &mut self.holders[pid as usize];
        match h.held {
            Some(lock) if h.releasing => Step::Send(Op::Unlock { lock }),
            _ => {
                h.tried = 0;
                Step::Send(Op::TryLock {
                    lock: self.proto.first(pid),
                })
            }
        }
    }

    /// The store answered `op`: an unlock ends the job; a try either got a lock (fetch now),
    /// moves on to the next lock, or polls again after a full round.
    pub fn on_reply(&mut self, cx: &mut Cx, pid: u32, op: &Op, reply: Reply) -> Step {
        self.fallbacks.on_success(cx, pid);
        match *op {
            Op::Unlock { .. } => self.released(pid),
            Op::TryLock { lock } => match self
                .proto
                .on_try_reply(&mut self.holders[pid as usize], cx.t, lock, reply)
            {
                Ok(step) => step,
                Err(next) => Step::Send(Op::TryLock { lock: next }),
            },
            other => unreachable!("{} never sends {other:?}", self.name),
        }
    }

    /// The process is done with its lock (its unlock answered or failed): the job ends.
    pub fn released(&mut self, pid: u32) -> Step {
        let h = &mut self.holders[pid as usize];
        h.held = None;
        h.releasing = false;
        Step::Done
    }

    /// The store failed a try: the fallback decides.
    pub fn fall_back(&mut self, cx: &mut Cx, p: &ProcView) -> Step {
        self.fallbacks.on_error(cx, p, 1.0)
    }

    /// After the fetch, with the lock marked as being released: unlock now, or (a fake rate)
    /// sleep holding it until its hold is over. A fallback fetch held no lock: the job ends.
    pub fn after_fetch(&mut self, t: Instant, pid: u32) -> Step {
        let h = &mut self.holders[pid as usize];
        match h.held {
            None => Step::Done,
            Some(lock) => match self.proto.release_at(h, t) {
                None => Step::Send(Op::Unlock { lock }),
                Some(at) => Step::RetryAt(at),
            },
        }
    }

    /// After the fetch: unlock at once, without marking the lock as being released, so that
    /// a job beginning before the unlock is answered tries for a lock again instead of
    /// resending it. A fallback fetch held no lock: the job ends.
    pub fn unlock_once(&self, pid: u32) -> Step {
        match self.holders[pid as usize].held {
            Some(lock) => Step::Send(Op::Unlock { lock }),
            None => Step::Done,
        }
    }

    /// A fresh process took `pid`'s place: a new session, holding nothing, out of fallback.
    pub fn restart(&mut self, pid: u32) {
        let h = &mut self.holders[pid as usize];
        *h = Holder {
            session: h.session + 1,
            ..Holder::default()
        };
        self.fallbacks.reset(pid);
    }
}
