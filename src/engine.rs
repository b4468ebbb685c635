//! The discrete-event engine: one binary heap of pending events keyed by `(time, sequence)`.
//!
//! The sequence number is assigned at scheduling time, so two events due at the same instant
//! fire in the order they were scheduled: ties are deterministic, never decided by the heap's
//! internal layout. The engine knows nothing about workers or stores; [`crate::sim`] owns the
//! world and tells the engine what happens next.

use crate::time::{Instant, Nanos};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// An event due at `at`, scheduled as the `seq`-th event of the run.
#[derive(Debug)]
struct Scheduled<E> {
    at: Instant,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Scheduled<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (time, seq) first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// A single-threaded event queue over virtual time.
#[derive(Debug)]
pub struct Engine<E> {
    // invariant: `now` never decreases; every event in `heap` has `at >= now`.
    now: Instant,
    // invariant: strictly increasing; one number per scheduled event.
    seq: u64,
    heap: BinaryHeap<Scheduled<E>>,
    popped: u64,
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
            heap: BinaryHeap::new(),
            popped: 0,
        }
    }

    /// Current virtual time: the time of the last event popped.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Schedule `event` at absolute time `at` (clamped to now: the past is not reachable).
    pub fn at(&mut self, at: Instant, event: E) {
        let at = at.max(self.now);
        self.heap.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// Schedule `event` after `delay`.
    pub fn after(&mut self, delay: Nanos, event: E) {
        self.at(self.now + delay, event);
    }

    /// Pop the next event, advancing time to it, unless it is due after `limit`.
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        if self.heap.peek()?.at > limit {
            return None;
        }
        let s = self.heap.pop()?;
        debug_assert!(s.at >= self.now);
        self.now = s.at;
        self.popped += 1;
        Some((s.at, s.event))
    }

    /// Number of events still pending.
    pub fn pending(&self) -> usize {
        self.heap.len()
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
        let mut e = Engine::new();
        e.at(Instant(5), 'b');
        e.at(Instant(1), 'a');
        e.at(Instant(5), 'c');
        e.at(Instant(5), 'd');
        let order: Vec<char> = std::iter::from_fn(|| e.pop_until(Instant(10)).map(|x| x.1)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
    }

    #[test]
    fn respects_limit() {
        let mut e = Engine::new();
        e.at(Instant(20), ());
        assert!(e.pop_until(Instant(10)).is_none());
        assert_eq!(e.pending(), 1);
    }
}
