//! The shared store model: its clock, the network to and from it, its row lock, its outages.
//!
//! What a backend keeps in the store, and what its operations do, is the backend's business
//! ([`crate::backend`]); this file is the machinery around it. Operations reach the store after
//! a one-way latency, queue FIFO behind the store's lock, are served one at a time (each taking
//! a service time, plus any time the caller's open transaction keeps the lock), and their
//! replies travel back after another one-way latency. An outage makes the store refuse or
//! ignore operations; a partition cuts some processes off; a long transaction occupies the
//! lock.

use crate::clock::Clock;
use crate::dist::Dist;
use crate::fault::OutageMode;
use crate::rng::Rng;
use crate::time::{Instant, Nanos};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Something waiting for the store's lock: a process's operation (of the backend's own type
/// `Op`), or a foreign transaction.
#[derive(Hash, Copy, Clone, Debug)]
pub enum Waiter<Op> {
    /// A process's operation.
    Op {
        /// Sender.
        pid: u32,
        /// Sender's incarnation.
        incarnation: u32,
        /// Sender's operation sequence number.
        seq: u64,
        /// The operation.
        op: Op,
    },
    /// An unrelated transaction that holds the lock for `hold`.
    Foreign {
        /// How long it holds the lock.
        hold: Nanos,
    },
}

/// The store; `Op` is the backend's operation type.
#[derive(Clone, Debug)]
pub struct Store<Op> {
    /// The store's clock (`clock_timestamp()`).
    pub clock: Clock,
    latency: Dist,
    service: Dist,
    commit: Dist,
    /// The store's random stream: network draws, service times, transaction holds.
    pub rng: Rng,
    /// Client-side timeout of one operation.
    pub timeout: Nanos,
    // invariant: `busy` is true exactly while one waiter is being served or the lock is held
    // by an open transaction; `queue` holds the rest in arrival order.
    busy: bool,
    queue: VecDeque<Waiter<Op>>,
    // Fault state, each a count so overlapping windows compose: the open windows oldest
    // first (a window ends oldest first, in O(1)), and how many partitions cut each pid off
    // (indexed by pid, grown on demand: a reachability test is O(1) however long the lists).
    outages: VecDeque<OutageMode>,
    added_latency: VecDeque<Dist>,
    partitioned: Vec<u32>,
    /// Operations served so far.
    pub served: u64,
}

impl<Op> Store<Op> {
    /// A store from its configuration.
    pub fn new(cfg: &StoreCfg, rng: Rng) -> Store<Op> {
        let offset = cfg.clock_offset.map(|d| d.0 as i64).unwrap_or(0);
        Store {
            clock: Clock::new(offset, 0.0),
            latency: cfg.latency.clone(),
            service: cfg.service.clone(),
            commit: cfg.commit.clone(),
            rng,
            timeout: cfg.timeout(),
            busy: false,
            queue: VecDeque::new(),
            outages: VecDeque::new(),
            added_latency: VecDeque::new(),
            partitioned: Vec::new(),
            served: 0,
        }
    }

    /// An explorer's form of the store at reference time `now` ([`crate::form`]): its clock
    /// relative to now, its stream's place, its queue and fault windows (operations as their
    /// `Hash` declares them: a backend whose operations hold a clock reading says so, and the world's
    /// form is then absolute), not the count of operations served (a statistic).
    pub fn form(&self, f: &mut crate::form::Form, now: Instant)
    where
        Op: std::hash::Hash,
    {
        // (every field named: one added later is placed here, or the build fails)
        let Store {
            clock,
            latency,
            service,
            commit,
            rng,
            timeout,
            busy,
            queue,
            outages,
            added_latency,
            partitioned,
            served: _, // read for the run's statistics only
        } = self;
        clock.form(f, now);
        f.word(crate::choice::fingerprint(&(
            (latency, service, commit),
            rng,
            timeout,
            busy,
            (outages, added_latency),
        )));
        // the waiters in their order, each sender by its name ([`crate::form::Form::pid`])
        for w in queue {
            let w = match *w {
                Waiter::Op {
                    pid,
                    incarnation,
                    seq,
                    ref op,
                } => crate::choice::fingerprint(&(f.pid(pid), incarnation, seq, op)),
                Waiter::Foreign { hold } => crate::choice::fingerprint(&hold),
            };
            f.word(w);
        }
        f.word(queue.len() as u64);
        f.per_pid(
            (partitioned.iter().enumerate())
                .filter(|&(_, &cuts)| cuts > 0)
                .map(|(pid, cuts)| (pid as u32, cuts)),
        );
    }

    /// Draw one one-way network latency (plus any injected extra) from the stream of the
    /// process at the other end of the link, so one process's draws never shift another's.
    pub fn one_way(&self, rng: &mut Rng) -> Nanos {
        let mut d = self.latency.sample(rng);
        for a in &self.added_latency {
            d = d + a.sample(rng);
        }
        d
    }

    /// [`Store::one_way`] for a hop that is no choice of an explorer's run
    /// ([`crate::choice::Hops`]): in a `steered` run, `varied` false gives the median.
    /// `steered` is whether the run has a choice source (the simulator enters one exactly then):
    /// without one no draw can be steered, and a hop (one per store operation each way) skips
    /// asking the thread's source per draw.
    #[inline]
    pub fn one_way_if(&self, steered: bool, rng: &mut Rng, varied: impl FnOnce(crate::choice::Hops) -> bool) -> Nanos {
        if !steered {
            debug_assert!(!crate::choice::active(), "a run without a source has one entered");
            return self.one_way_untied(rng);
        }
        if let Some(h) = crate::choice::with(|s| s.hops())
            && !varied(h)
        {
            let mut d = self.latency.median();
            for a in &self.added_latency {
                d = d + a.median();
            }
            return d;
        }
        self.one_way(rng)
    }

    /// [`Store::one_way`] with no choice source entered ([`Dist::sample_untied`]).
    fn one_way_untied(&self, rng: &mut Rng) -> Nanos {
        let d = self.latency.sample_untied(rng);
        if self.added_latency.is_empty() {
            d
        } else {
            self.plus_added(d, rng)
        }
    }

    /// `d` plus a draw of each injected extra latency (only while a fault adds some, so kept
    /// out of the hop's common path).
    #[cold]
    fn plus_added(&self, d: Nanos, rng: &mut Rng) -> Nanos {
        self.added_latency.iter().fold(d, |d, a| d + a.sample_untied(rng))
    }

    /// Draw one service time.
    pub fn service_time(&mut self) -> Nanos {
        self.service.sample(&mut self.rng)
    }

    /// Draw one commit time (no draw at all while `[store] commit` is zero).
    pub fn commit_time(&mut self) -> Nanos {
        self.commit.sample(&mut self.rng)
    }

    /// Can `pid` reach the store now? `Err` says how it fails.
    pub fn reachable(&self, pid: u32) -> Result<(), OutageMode> {
        if self.partitioned.get(pid as usize).is_some_and(|&c| c > 0) {
            return Err(OutageMode::Timeout);
        }
        match self.outages.back() {
            Some(&m) => Err(m),
            None => Ok(()),
        }
    }

    /// A waiter reaches the lock. Returns it back if the lock is free (serve it now).
    pub fn admit(&mut self, w: Waiter<Op>) -> Option<Waiter<Op>> {
        if self.busy {
            self.queue.push_back(w);
            None
        } else {
            self.busy = true;
            Some(w)
        }
    }

    /// Is the lock held?
    pub fn busy(&self) -> bool {
        self.busy
    }

    /// How many wait for the lock (beside the one holding it).
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// The lock frees; returns the next waiter to serve, if any (the lock stays held for it).
    pub fn release(&mut self) -> Option<Waiter<Op>> {
        debug_assert!(self.busy);
        let next = self.queue.pop_front();
        self.busy = next.is_some();
        next
    }

    /// Begin an outage window.
    pub fn outage_start(&mut self, m: OutageMode) {
        self.outages.push_back(m);
    }
    /// End the oldest outage window.
    pub fn outage_end(&mut self) {
        self.outages.pop_front();
    }
    /// Begin a latency window.
    pub fn latency_start(&mut self, d: Dist) {
        self.added_latency.push_back(d);
    }
    /// End the oldest latency window.
    pub fn latency_end(&mut self) {
        self.added_latency.pop_front();
    }
    /// Cut `pids` off.
    pub fn partition_start(&mut self, pids: &[u32]) {
        for &p in pids {
            let p = p as usize;
            if p >= self.partitioned.len() {
                self.partitioned.resize(p + 1, 0);
            }
            self.partitioned[p] += 1;
        }
    }
    /// Reconnect `pids` (one occurrence each).
    pub fn partition_end(&mut self, pids: &[u32]) {
        for &p in pids {
            if let Some(c) = self.partitioned.get_mut(p as usize) {
                *c = c.saturating_sub(1);
            }
        }
    }

    /// The store clock's reading at `t`.
    pub fn now(&self, t: Instant) -> i64 {
        self.clock.read(t)
    }
}

/// `[store]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreCfg {
    /// One-way network latency, drawn independently for each request and each reply.
    #[serde(default)]
    pub latency: Dist,
    /// Time one operation holds the row lock (operations are served one at a time, FIFO).
    #[serde(default)]
    pub service: Dist,
    /// The commit of an operation that writes durable state (a PostgreSQL write: the WAL flush
    /// `synchronous_commit = on` waits for), a stage of its own after the statement's service
    /// time: the row lock stays held through it, and an autocommit reply leaves only when it
    /// ends (an open transaction commits at its end). Which operations commit is the backend's
    /// to say ([`crate::backend::StoreSide::durable`]: `row`, `shared_cache` and `claim_row`
    /// writes; not advisory locks or Redis). Default: zero (pacesim's; `conform --calibrate`
    /// measures it).
    #[serde(default, skip_serializing_if = "Dist::is_zero")]
    pub commit: Dist,
    /// Client-side timeout of one store operation. Default 5s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Nanos>,
    /// Store clock offset against the reference timeline (`clock_timestamp()` skew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset: Option<Nanos>,
}

impl StoreCfg {
    /// The client-side timeout in force: `timeout`, default 5s (pacesim's choice).
    pub fn timeout(&self) -> Nanos {
        self.timeout.unwrap_or(Nanos(5_000_000_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Entity, stream};

    fn store() -> Store<u32> {
        let sc = crate::registry::parse(
            "t",
            "name = 't'\nduration = '1s'\n[pacer]\nbackend = 'row'\nrate = 7.0\n[processes]\ncount = 4\n",
        )
        .expect("a valid scenario");
        Store::new(&sc.store, stream(1, Entity::Store))
    }

    fn op(pid: u32) -> Waiter<u32> {
        Waiter::Op {
            pid,
            incarnation: 0,
            seq: u64::from(pid),
            op: pid,
        }
    }

    fn pid(w: Option<Waiter<u32>>) -> Option<u32> {
        match w {
            Some(Waiter::Op { pid, .. }) => Some(pid),
            Some(Waiter::Foreign { .. }) => Some(u32::MAX),
            None => None,
        }
    }

    /// Waiters behind the store's lock are served in arrival order (FIFO), a foreign
    /// transaction included, and the lock is free once the queue is empty.
    #[test]
    fn waiters_are_served_in_arrival_order() {
        let mut s = store();
        assert_eq!(pid(s.admit(op(7))), Some(7), "a free store serves at once");
        for p in [3, 1, 4] {
            assert_eq!(pid(s.admit(op(p))), None, "a busy store queues");
        }
        assert_eq!(pid(s.admit(Waiter::Foreign { hold: Nanos(1) })), None);
        assert_eq!(pid(s.admit(op(5))), None);
        let mut order = Vec::new();
        while let Some(p) = pid(s.release()) {
            order.push(p);
        }
        assert_eq!(order, vec![3, 1, 4, u32::MAX, 5], "served first come, first served");
        // the lock is free again: the next arrival is served at once
        assert_eq!(pid(s.admit(op(9))), Some(9));
        assert_eq!(pid(s.admit(op(2))), None);
        assert_eq!(pid(s.release()), Some(2));
        assert_eq!(pid(s.release()), None);
    }
}
