//! The discrete-event engine: pending events ordered by `(time, sequence)`.
//!
//! The sequence number is assigned at scheduling time, so two events due at the same instant
//! fire in the order they were scheduled: ties are deterministic, never decided by the heap's
//! internal layout. The engine knows nothing about workers or stores; [`crate::sim`] owns the
//! world and tells the engine what happens next.
//!
//! Pending events wait in one of two kinds of queue, and [`Engine::pop_until`] takes the
//! earliest head of them all, so the firing order is exactly `(time, sequence)` whichever
//! queue an event waits in:
//! - a 4-ary min-heap ([`heap::QuadHeap`]) of small keys `(time, sequence, slot)`, the event
//!   itself parked in a slab `slot`: sifting moves 24-byte keys, not whole events, which keeps
//!   a heap of 100,000 events inside the cache;
//! - [`Lane`]s: FIFOs for events the caller schedules in time order anyway, because they come
//!   a fixed delay after something that happens in time order (a client timeout, a constant
//!   service time, a zero-latency hop). In and out in O(1), and they keep the heap small. An
//!   event due before its lane's last one goes to the heap instead, so a lane is only ever a
//!   speed-up, never a change of order.

pub mod heap;

use crate::time::{Instant, Nanos};
use heap::QuadHeap;
use std::collections::VecDeque;

/// Bits of a heap key that name the slab slot: at most 2^28 (268 million) events wait in the
/// heap at once, and a run schedules at most 2^36 (68.7 billion) events in all.
const SLOT_BITS: u32 = 28;
/// The largest sequence number a key can hold.
const MAX_SEQ: u64 = (1 << (64 - SLOT_BITS)) - 1;

/// Where a heap event waits, as one 16-byte number: due `at` (the high 64 bits), scheduled as
/// the `seq`-th event of the run (the next 36), parked in slab slot `slot` (the low 28).
/// Comparing two keys compares `(at, seq)`: `seq` is unique, so the slot never decides.
/// Sifting moves 16 bytes, and a node's four children share one cache line.
type Key = u128;

#[inline]
fn key(at: Instant, seq: u64, slot: u32) -> Key {
    order(at, seq) | u128::from(slot)
}

#[inline]
fn slot_of(k: Key) -> u32 {
    (k as u32) & ((1 << SLOT_BITS) - 1)
}

/// A FIFO lane, numbered by the caller (`Lane(0)`, `Lane(1)`, ...): see the module docs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Lane(pub u8);

/// A single-threaded event queue over virtual time.
#[derive(Debug)]
pub struct Engine<E> {
    // invariant: `now` never decreases; every pending event has `at >= now`.
    now: Instant,
    // invariant: strictly increasing; one number per scheduled event.
    seq: u64,
    // invariant: one key per occupied slab slot, and `slab[k.slot]` is `Some` for every key.
    heap: QuadHeap<Key>,
    slab: Vec<Option<E>>,
    // invariant: exactly the unoccupied slab slots.
    free: Vec<u32>,
    // invariant: each lane is ordered by `(at, seq)`, front first.
    lanes: Vec<VecDeque<(Instant, u64, E)>>,
    // invariant: the earliest lane head as `(order, lane)` (see `order`), `NO_LANE` when
    // every lane is empty: a pop compares the heap's head with this one number.
    lane_head: (u128, usize),
    popped: u64,
}

/// `lane_head` when every lane is empty: later than any event.
const NO_LANE: (u128, usize) = (u128::MAX, usize::MAX);

/// `(at, seq)` as one number: what the firing order compares (a heap key with slot 0).
#[inline]
fn order(at: Instant, seq: u64) -> u128 {
    (u128::from(at.0) << 64) | u128::from(seq << SLOT_BITS)
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Engine<E> {
    /// An empty engine at time zero.
    pub fn new() -> Self {
        Engine {
            now: Instant::ZERO,
            seq: 0,
            heap: QuadHeap::default(),
            slab: Vec::new(),
            free: Vec::new(),
            lanes: Vec::new(),
            lane_head: NO_LANE,
            popped: 0,
        }
    }

    /// Current virtual time: the time of the last event popped.
    pub fn now(&self) -> Instant {
        self.now
    }

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        assert!(
            s <= MAX_SEQ,
            "a run schedules at most 2^36 events (the engine's key layout)"
        );
        self.seq += 1;
        s
    }

    /// Schedule `event` at absolute time `at` (clamped to now: the past is not reachable).
    pub fn at(&mut self, at: Instant, event: E) {
        let at = at.max(self.now);
        let seq = self.next_seq();
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = Some(event);
                slot
            }
            None => {
                assert!(
                    self.slab.len() < 1 << SLOT_BITS,
                    "at most 2^28 events wait at once (the engine's key layout)"
                );
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.heap.push(key(at, seq, slot));
    }

    /// Schedule `event` after `delay`.
    pub fn after(&mut self, delay: Nanos, event: E) {
        self.at(self.now + delay, event);
    }

    /// Schedule `event` after `delay`, like [`Engine::after`], in `lane`: for events that
    /// come in time order (see the module docs). One due before the lane's last event goes
    /// to the heap instead, so the firing order is always exactly `(time, sequence)`.
    pub fn after_in(&mut self, lane: Lane, delay: Nanos, event: E) {
        let at = self.now + delay;
        let i = lane.0 as usize;
        if self.lanes.len() <= i {
            self.lanes.resize_with(i + 1, VecDeque::new);
        }
        if self.lanes[i].back().is_some_and(|b| b.0 > at) {
            return self.at(at, event);
        }
        let seq = self.next_seq();
        let lane = &mut self.lanes[i];
        let was_empty = lane.is_empty();
        lane.push_back((at, seq, event));
        // a new head (the lane was empty) may be the earliest of all heads
        let o = order(at, seq);
        if was_empty && o < self.lane_head.0 {
            self.lane_head = (o, i);
        }
    }

    /// Recompute `lane_head` after a lane's head left.
    fn find_lane_head(&mut self) {
        let mut best = NO_LANE;
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some(&(at, seq, _)) = lane.front() {
                let o = order(at, seq);
                if o < best.0 {
                    best = (o, i);
                }
            }
        }
        self.lane_head = best;
    }

    /// Pop the next event, advancing time to it, unless it is due after `limit`.
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        // the earliest head: the heap's, or the earliest lane's (orders are unique: `seq` is)
        let heap = self.heap.peek().copied().unwrap_or(u128::MAX);
        let (at, event) = if self.lane_head.0 < heap {
            let (_, i) = self.lane_head;
            let at = Instant((self.lane_head.0 >> 64) as u64);
            if at > limit {
                return None;
            }
            let (_, _, event) = self.lanes[i].pop_front()?;
            self.find_lane_head();
            (at, event)
        } else {
            if heap == u128::MAX || Instant((heap >> 64) as u64) > limit {
                // (an event due at the very end of time with the last sequence number cannot
                // be told from none: 2^64 events are never scheduled)
                return None;
            }
            let k = self.heap.pop()?;
            let slot = slot_of(k);
            self.free.push(slot);
            let event = self.slab[slot as usize].take().expect("a key's slot holds its event");
            (Instant((k >> 64) as u64), event)
        };
        debug_assert!(at >= self.now);
        self.now = at;
        self.popped += 1;
        Some((at, event))
    }

    /// Number of events still pending.
    pub fn pending(&self) -> usize {
        self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>()
    }

    /// Number of events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_fire_in_scheduling_order() {
        let mut e = Engine::<char>::new();
        e.at(Instant(5), 'b');
        e.at(Instant(1), 'a');
        e.at(Instant(5), 'c');
        e.at(Instant(5), 'd');
        let order: Vec<char> = std::iter::from_fn(|| e.pop_until(Instant(10)).map(|x| x.1)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
    }

    #[test]
    fn lanes_and_heap_interleave_in_time_then_scheduling_order() {
        let mut e = Engine::<&str>::new();
        let (l0, l3) = (Lane(0), Lane(3));
        e.after_in(l0, Nanos(5), "lane a (5)");
        e.after(Nanos(5), "heap b (5)");
        e.after_in(l3, Nanos(5), "lane c (5)");
        e.after(Nanos(1), "heap d (1)");
        e.after_in(l0, Nanos(9), "lane e (9)");
        e.after_in(l0, Nanos(2), "lane f (2): earlier than the lane's last, so heap");
        let order: Vec<&str> = std::iter::from_fn(|| e.pop_until(Instant(100)).map(|x| x.1)).collect();
        assert_eq!(
            order,
            vec![
                "heap d (1)",
                "lane f (2): earlier than the lane's last, so heap",
                "lane a (5)",
                "heap b (5)",
                "lane c (5)",
                "lane e (9)"
            ]
        );
        assert_eq!(e.pending(), 0);
        assert_eq!(e.processed(), 6);
    }

    /// The order is exactly `(time, seq)` for any mix of heap and lane events, and slab slots
    /// are reused.
    #[test]
    fn matches_a_sorted_reference_under_random_scheduling() {
        // short delays (many ties) and long ones
        for (max_delay, seed) in [(50, 3), (1 << 40, 4), (1_000_000, 5)] {
            random_scheduling(max_delay, seed);
        }
    }

    fn random_scheduling(max_delay: u64, seed: u64) {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let mut e = Engine::<u64>::new();
        let mut reference: Vec<(u64, u64)> = Vec::new(); // (at, seq) of pending events
        let (mut seq, mut most) = (0u64, 0);
        for _ in 0..20_000 {
            most = most.max(e.pending());
            if r.random_bool(0.55) || e.pending() == 0 {
                let delay = Nanos(r.random_range(0..max_delay));
                let at = (e.now() + delay).0;
                if r.random_bool(0.4) {
                    e.after_in(Lane(r.random_range(0..3)), delay, seq);
                } else {
                    e.after(delay, seq);
                }
                reference.push((at, seq));
                seq += 1;
            } else if r.random_bool(0.2) {
                // a look that must not pop: the earliest is due after the limit
                let want = *reference.iter().min().expect("pending");
                if want.0 > e.now().0 {
                    assert!(e.pop_until(Instant(want.0 - 1)).is_none());
                }
            } else {
                let want = *reference.iter().min().expect("pending");
                reference.retain(|x| *x != want);
                let (t, got) = e.pop_until(Instant(u64::MAX)).expect("pending");
                assert_eq!((t.0, got), want);
            }
        }
        assert!(
            e.slab.len() <= most + 1,
            "slab slots are reused: {} for {most}",
            e.slab.len()
        );
    }

    #[test]
    fn respects_limit() {
        let mut e = Engine::<()>::new();
        e.at(Instant(20), ());
        e.after_in(Lane(1), Nanos(30), ());
        assert!(e.pop_until(Instant(10)).is_none());
        assert_eq!(e.pending(), 2);
        assert!(e.pop_until(Instant(20)).is_some());
        assert!(e.pop_until(Instant(29)).is_none());
        assert_eq!(e.pending(), 1);
    }
}
