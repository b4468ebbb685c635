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
//! - a [calendar](calendar::Calendar) of buckets for the events due within the next 268 ms,
//!   and a 4-ary min-heap ([`heap::QuadHeap`]) for the rest, both of small keys `(time,
//!   sequence, slot)`, the event itself parked in a slab `slot`: the calendar pushes and pops
//!   in a few instructions, and sifting the heap moves 16-byte keys, not whole events, which
//!   keeps a heap of 100,000 events inside the cache;
//! - [`Lane`]s: FIFOs for events the caller schedules in time order anyway, because they come
//!   a fixed delay after something that happens in time order (a client timeout, a constant
//!   service time, a zero-latency hop). In and out in O(1), and they keep the heap small. An
//!   event due before its lane's last one goes to the heap instead, so a lane is only ever a
//!   speed-up, never a change of order.
//! - cancellable [timers](Engine::timer_after), for an event that usually stops mattering
//!   before it is due (a client's timeout, once the reply is in), in `(time, sequence)` order
//!   in one of two queues. Made in time order, the rule (one delay after things that happen
//!   in time order), a timer joins a FIFO, the timer lane (`TimerLane`), where
//!   [`Engine::cancel`] only marks it: a cancelled timer leaves once it reaches the front,
//!   which the live timers keep near the back when they are cancelled in the order they were
//!   made; behind a live front that waits long, the cancelled ones are dropped in one pass
//!   once they outnumber the live ones by a slack, so the lane's memory follows the live
//!   timers, not the rate timers are made at times their delay. A timer due before the lane's last goes to a doubly linked list instead, which a
//!   cancel unlinks from.
//!   Cancelled, a timer is never popped, and [`Engine::pending`] no longer counts it.

pub mod calendar;
pub mod heap;

use crate::time::{Instant, Nanos};
use calendar::{Calendar, Parked, SLOT_BITS};
use heap::QuadHeap;
use std::collections::VecDeque;

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

/// A pending timer ([`Engine::timer_after`]), to [cancel](Engine::cancel) it.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct TimerId(TimerIn);

/// A handle prints as itself, not its number: the number is the engine's bookkeeping (a
/// sequence number, which grows with every event scheduled), and an explorer fingerprints a
/// world by what it declares (`Hash`), where the timer a handle names shows among the pending
/// events. Two runs that scheduled a different count of events before arming the same timeout
/// meet: it hashes as a handle, not its number.
impl std::fmt::Debug for TimerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TimerId")
    }
}

impl std::hash::Hash for TimerId {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // (its number ignored: the engine's bookkeeping, see above)
        let TimerId(_) = self;
        h.write_u8(0x71);
    }
}

/// Where a timer waits.
#[derive(Copy, Clone, PartialEq, Eq)]
enum TimerIn {
    /// The `n`-th timer the [`TimerLane`] took, with its sequence number, in one number: `seq
    /// << SLOT_BITS | n mod 2^SLOT_BITS` (see [`Engine::cancel_in_lane`]).
    Lane(u64),
    /// In the list: its sequence number and its node in one number (the node alone could name
    /// a later timer that reused it).
    List(u64),
}

/// A [`TimerLane`] entry's order with this bit set: cancelled. (An order's slot bits are
/// zero, so the bit is free, and a cancelled entry compares as the same instant.)
const CANCELLED: u128 = 1;

/// The cancellable timers made in time order: a FIFO of `(order, event)` (see the module
/// docs). Cancelling marks the entry where it is, in O(1) by its number; cancelled entries
/// leave from the front, so a cancel costs a write, and a pop a look at the entries after it.
/// Behind a live front that waits long (a request that really times out), cancelled entries
/// would pile up at the rate timers are made times their delay; once they outnumber the
/// live ones by [`COMPACT_SLACK`], they are dropped in one pass, so the lane holds at most
/// about twice its live timers plus the slack.
#[derive(Debug, Clone)]
struct TimerLane<E> {
    // invariant: ordered by `order` (cancel marks aside), front first, so by sequence number
    // too; `q[i]` is the timer numbered `base + i` or, once compacted, a later one (`i` is at
    // most its number minus `base`); the front, if any, is not cancelled.
    q: VecDeque<(u128, E)>,
    base: u64,
    // invariant: the entries not cancelled.
    live: usize,
}

impl<E: Clone> TimerLane<E> {
    /// Drop the cancelled entries at the front, so that the front is live.
    fn trim(&mut self) {
        while self.q.front().is_some_and(|f| f.0 & CANCELLED != 0) {
            self.q.pop_front();
            self.base += 1;
        }
    }

    /// The front's order, `u128::MAX` when empty.
    fn head_order(&self) -> u128 {
        self.q.front().map_or(u128::MAX, |f| f.0)
    }
}

/// Cancelled entries the timer lane tolerates beyond its live ones before it drops them all
/// (amortised O(1) a cancel: a pass over `len` entries follows at least `len / 2` cancels).
const COMPACT_SLACK: usize = 4096;

/// The low bits of a lane timer's number, as its [`TimerId`] holds them.
const LANE_N_MASK: u64 = (1 << SLOT_BITS) - 1;

/// No node: the end of the timer list.
const NIL: u32 = u32::MAX;

/// One timer in the list: due at `order` (as [`order`] packs it), its neighbours, and the event
/// (`None` while the node is free).
#[derive(Debug, Clone)]
struct TimerNode<E> {
    order: u128,
    prev: u32,
    next: u32,
    event: Option<E>,
}

/// The cancellable timers: a doubly linked list in `(time, sequence)` order over a slab of
/// nodes, so a cancel unlinks in O(1) and an insert, almost always at the tail (timers made in
/// time order with one delay), walks back only past later ones.
#[derive(Debug, Clone)]
struct Timers<E> {
    // invariant: `head`..`tail` through `next` visits every pending timer in increasing
    // `order`, and `prev` mirrors `next`; a pending node's `event` is `Some`.
    nodes: Vec<TimerNode<E>>,
    // invariant: exactly the nodes not in the list (their `event` is `None`).
    free: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
}

impl<E> Timers<E> {
    fn new() -> Self {
        Timers {
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    /// The earliest timer's order, `u128::MAX` when none is pending.
    fn head_order(&self) -> u128 {
        if self.head == NIL {
            u128::MAX
        } else {
            self.nodes[self.head as usize].order
        }
    }

    /// Add a timer due at `order`; its node. (Inlined, like [`Engine::at`], for the event to
    /// be written in place.)
    #[inline(always)]
    fn insert(&mut self, order: u128, event: E) -> u32 {
        // the node it goes after: the last one due before it
        let mut after = self.tail;
        while after != NIL && self.nodes[after as usize].order > order {
            after = self.nodes[after as usize].prev;
        }
        let next = if after == NIL {
            self.head
        } else {
            self.nodes[after as usize].next
        };
        let node = TimerNode {
            order,
            prev: after,
            next,
            event: Some(event),
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = node;
                n
            }
            None => {
                assert!(
                    self.nodes.len() < NIL as usize,
                    "at most 2^32 - 1 timers pending at once"
                );
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        match after {
            NIL => self.head = n,
            a => self.nodes[a as usize].next = n,
        }
        match next {
            NIL => self.tail = n,
            x => self.nodes[x as usize].prev = n,
        }
        self.len += 1;
        n
    }

    /// Take node `n` out of the list; its event.
    fn unlink(&mut self, n: u32) -> E {
        let node = &mut self.nodes[n as usize];
        let (prev, next) = (node.prev, node.next);
        let event = node.event.take().expect("a listed node holds its event");
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            x => self.nodes[x as usize].prev = prev,
        }
        self.free.push(n);
        self.len -= 1;
        event
    }
}

/// A FIFO lane, numbered by the caller (`Lane(0)`, `Lane(1)`, ...): see the module docs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Lane(pub u8);

/// A single-threaded event queue over virtual time. (`Clone`: a copy with the same events
/// pending, firing in the same order, the same timers cancellable: an explorer's saved world.)
#[derive(Debug, Clone)]
pub struct Engine<E> {
    // invariant: `now` never decreases; every pending event has `at >= now`.
    now: Instant,
    // invariant: the order (see `order`) of the event popped last (or handled in its reserved
    // place, `next_is`); 0 before the first.
    current: u128,
    // invariant: strictly increasing; one number per scheduled event.
    seq: u64,
    // invariant: one key per occupied slab slot, in the calendar or the heap (never both),
    // and `slab[k.slot].event` is that key's event.
    calendar: Calendar,
    heap: QuadHeap<Key>,
    slab: Vec<Parked<E>>,
    // invariant: `free` starts a list through the slab's `link` fields (the next free slot in
    // the link's slot bits, `calendar::NIL` at its end) of exactly the unoccupied slots. (A
    // free slot's link is otherwise unused, as a heap key's is: a list in place costs no push
    // that might grow a vector.)
    free: u32,
    // invariant: each lane is ordered by `(at, seq)`, front first.
    lanes: Vec<VecDeque<(Instant, u64, E)>>,
    // invariant: the earliest lane head as `(order, lane)` (see `order`), `NO_LANE` when
    // every lane is empty: a pop compares the heap's head with this one number.
    lane_head: (u128, usize),
    timer_lane: TimerLane<E>,
    timers: Timers<E>,
    popped: u64,
}

/// `lane_head`'s index when the earliest head is the timer list's.
const TIMER_LIST: usize = usize::MAX - 1;
/// `lane_head`'s index when the earliest head is the timer lane's.
const TIMER_LANE: usize = usize::MAX - 2;

/// `lane_head` when every lane is empty: later than any event.
const NO_LANE: (u128, usize) = (u128::MAX, usize::MAX);

/// Where [`Engine::next`] found the next event.
#[derive(Copy, Clone)]
enum Source {
    /// Slab slot (the calendar's or the heap's).
    Slot(u32),
    /// Head of this lane.
    Lane(usize),
    /// Head of the timer list.
    Timers,
    /// Front of the timer lane.
    TimerLane,
}

/// `(at, seq)` as one number: what the firing order compares (a heap key with slot 0).
#[inline]
fn order(at: Instant, seq: u64) -> u128 {
    (u128::from(at.0) << 64) | u128::from(seq << SLOT_BITS)
}

impl<E: Clone> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Clone> Engine<E> {
    /// An empty engine at time zero.
    pub fn new() -> Self {
        Engine {
            now: Instant::ZERO,
            current: 0,
            seq: 0,
            calendar: Calendar::default(),
            heap: QuadHeap::default(),
            slab: Vec::new(),
            free: calendar::NIL,
            lanes: Vec::new(),
            lane_head: NO_LANE,
            timer_lane: TimerLane {
                q: VecDeque::new(),
                base: 0,
                live: 0,
            },
            timers: Timers::new(),
            popped: 0,
        }
    }

    /// Current virtual time: the time of the last event popped.
    pub fn now(&self) -> Instant {
        self.now
    }

    #[inline(always)]
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
    ///
    /// Inlined, so the caller writes the event's fields straight into its slab slot: built on
    /// the caller's stack and read back whole here, the event waited for its own stores (a
    /// load spanning several narrower stores is not forwarded from them), and that wait was
    /// a fifth of this function's time. The queueing proper is [`Engine::enqueue`].
    #[inline(always)]
    pub fn at(&mut self, at: Instant, event: E) {
        let at = at.max(self.now);
        let seq = self.next_seq();
        let slot = self.park(event);
        self.enqueue(key(at, seq, slot), slot);
    }

    /// Queue key `k` of the event parked in `slot`: in the calendar, or else in the heap.
    #[inline(never)]
    fn enqueue(&mut self, k: Key, slot: u32) {
        if !self.calendar.push(&mut self.slab, k, slot, self.now) {
            self.heap.push(k);
        }
    }

    /// A place in the firing order at the current instant, for an event that may never need
    /// queueing: once the caller's other work at this instant is done, it either handles the
    /// event at once, if [`Engine::next_is`] says nothing pending comes first (as popping it
    /// would have done), or queues it in that place with [`Engine::at_reserved`]. Either way it
    /// fires exactly where [`Engine::at`] called now would have put it.
    #[inline(always)]
    pub fn reserve(&mut self) -> u64 {
        self.next_seq()
    }

    /// Would an event due now in place `seq` ([`Engine::reserve`]) be popped before every
    /// pending one? If so, it counts as popped (in [`Engine::processed`]) and the caller handles
    /// it now.
    #[inline(always)]
    pub fn next_is(&mut self, seq: u64) -> bool {
        let mine = order(self.now, seq);
        // (the same heads `next` compares, looked at here apart: one helper for both made the
        // simulator run 2.7% more instructions, by callgrind on R1-large)
        // (pending keys are unique and carry a slot: none equals `mine`)
        let first = self.heap.peek().map_or(u128::MAX, |&k| k).min(self.lane_head.0);
        if mine > first {
            return false;
        }
        if let Some((k, _)) = self.calendar.peek(&self.slab, self.now)
            && k < mine
        {
            return false;
        }
        self.popped += 1;
        self.current = mine;
        true
    }

    /// Does place `(at, seq)` come before the event being handled (the last popped), so that
    /// an event given it ([`Engine::reserve`]) and not queued would have fired by now?
    #[inline(always)]
    pub fn before_current(&self, at: Instant, seq: u64) -> bool {
        order(at, seq) < self.current
    }

    /// Queue `event` at `at` in place `seq` (from [`Engine::reserve`], not yet used).
    /// ([`Engine::at`] with the place given. `at` keeps its own copy, inlined into every
    /// caller: with `at` calling this and the helper noted in `next_is`, the simulator ran
    /// 2.7% more instructions; the two were not measured apart.)
    pub fn at_reserved(&mut self, at: Instant, seq: u64, event: E) {
        let at = at.max(self.now);
        let slot = self.park(event);
        self.enqueue(key(at, seq, slot), slot);
    }

    /// Park `event` in a free slab slot; the slot.
    #[inline(always)]
    fn park(&mut self, event: E) -> u32 {
        match self.free {
            calendar::NIL => {
                assert!(
                    self.slab.len() < calendar::NIL as usize,
                    "at most 2^28 - 1 events wait at once (the engine's key layout)"
                );
                self.slab.push(Parked::new(event));
                (self.slab.len() - 1) as u32
            }
            slot => {
                let parked = &mut self.slab[slot as usize];
                self.free = (parked.link & ((1 << SLOT_BITS) - 1)) as u32;
                parked.event = Some(event);
                slot
            }
        }
    }

    /// Schedule `event` after `delay`.
    #[inline(always)]
    pub fn after(&mut self, delay: Nanos, event: E) {
        self.at(self.now + delay, event);
    }

    /// Schedule `event` after `delay`, like [`Engine::after`], in `lane`: for events that
    /// come in time order (see the module docs). One due before the lane's last event goes
    /// to the heap instead, so the firing order is always exactly `(time, sequence)`.
    #[inline(always)]
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

    /// Schedule `event` after `delay` as a cancellable timer: it fires like one scheduled with
    /// [`Engine::after`] (the same `(time, sequence)` order), unless [`Engine::cancel`] takes
    /// it out first.
    #[inline(always)]
    pub fn timer_after(&mut self, delay: Nanos, event: E) -> TimerId {
        let at = self.now + delay;
        let seq = self.next_seq();
        let o = order(at, seq);
        let lane = &mut self.timer_lane;
        // (a cancelled last entry still orders the lane: its mark bit is below any order's)
        if lane.q.back().is_some_and(|b| b.0 > o) {
            let n = self.timers.insert(o, event);
            if o < self.lane_head.0 {
                self.lane_head = (o, TIMER_LIST);
            }
            return TimerId(TimerIn::List(seq << SLOT_BITS | u64::from(n)));
        }
        let was_empty = lane.q.is_empty();
        lane.q.push_back((o, event));
        lane.live += 1;
        let n = lane.base + lane.q.len() as u64 - 1;
        let id = TimerId(TimerIn::Lane(seq << SLOT_BITS | (n & LANE_N_MASK)));
        if was_empty && o < self.lane_head.0 {
            self.lane_head = (o, TIMER_LANE);
        }
        id
    }

    /// Take timer `id` out if it is still pending (not yet fired, not cancelled): whether it
    /// was. (The simulator never looks at a cancelled timer's event: this is
    /// [`Engine::cancel_as`] without cloning it out of the lane, which for an event that may
    /// own data is a call per cancel.)
    pub fn cancel(&mut self, id: TimerId) -> bool {
        self.cancel_as(id, |_| ()).is_some()
    }

    /// [`Engine::cancel`], and `what` of the timer's event if it was pending.
    pub fn cancel_as<R>(&mut self, id: TimerId, what: impl FnOnce(&E) -> R) -> Option<R> {
        let id = match id.0 {
            TimerIn::Lane(n) => return self.cancel_in_lane(n, what),
            TimerIn::List(id) => id,
        };
        let n = (id & ((1 << SLOT_BITS) - 1)) as u32;
        let seq = id >> SLOT_BITS;
        let node = self.timers.nodes.get(n as usize)?;
        // the node may since have fired and been reused by a later timer: its sequence tells
        if node.event.is_none() || (node.order as u64) >> SLOT_BITS != seq {
            return None;
        }
        let was_head = self.timers.head == n;
        let event = self.timers.unlink(n);
        if was_head && self.lane_head.1 == TIMER_LIST {
            self.find_lane_head();
        }
        Some(what(&event))
    }

    /// [`Engine::cancel`] for a timer of the timer lane, `id` its sequence number and the low
    /// bits of its number: marked where it is (gone from the front at once). Its number minus
    /// `base` is its index unless the lane was compacted since (then it is found by sequence
    /// number); no entry with its sequence number: fired, or cancelled and gone.
    fn cancel_in_lane<R>(&mut self, id: u64, what: impl FnOnce(&E) -> R) -> Option<R> {
        let lane = &mut self.timer_lane;
        let seq = id >> SLOT_BITS;
        let seq_of = |e: &(u128, E)| (e.0 as u64) >> SLOT_BITS;
        // (the lane holds fewer than 2^SLOT_BITS entries, so the low bits place it)
        let guess = ((id & LANE_N_MASK).wrapping_sub(lane.base) & LANE_N_MASK) as usize;
        let i = match lane.q.get(guess) {
            Some(e) if seq_of(e) == seq => guess,
            _ => lane.q.binary_search_by_key(&seq, seq_of).ok()?,
        };
        let entry = &mut lane.q[i];
        if entry.0 & CANCELLED != 0 {
            return None;
        }
        entry.0 |= CANCELLED;
        let event = what(&entry.1);
        lane.live -= 1;
        if i == 0 {
            lane.trim();
            if self.lane_head.1 == TIMER_LANE {
                self.find_lane_head();
            }
        } else if lane.q.len() > 2 * lane.live + COMPACT_SLACK {
            // (the front is live, so it stays: the lane's head and order are unchanged)
            lane.q.retain(|e| e.0 & CANCELLED == 0);
        }
        Some(event)
    }

    /// Recompute `lane_head` after a lane's head (or a timer queue's) left.
    fn find_lane_head(&mut self) {
        let t = self.timers.head_order();
        let mut best = if t == u128::MAX { NO_LANE } else { (t, TIMER_LIST) };
        let t = self.timer_lane.head_order();
        if t < best.0 {
            best = (t, TIMER_LANE);
        }
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
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "the simulator pops into a slot; the engine bench pops with this"
        )
    )]
    pub fn pop_until(&mut self, limit: Instant) -> Option<(Instant, E)> {
        let (at, from) = self.next(limit)?;
        Some((at, self.take(from)))
    }

    /// [`Engine::pop_until`] into `event` (what was there is overwritten); the time.
    ///
    /// For a hot loop: an `Option` of an enum event keeps its discriminant in the event's
    /// tag byte, so moving one copies the tag and the other 47 bytes apart, in overlapping
    /// 16-byte pieces, and each further move of the same value then waits for those stores
    /// (a load spanning two stores is not forwarded from them). Copied straight into place
    /// here, the event moves whole, once.
    #[inline(always)]
    pub fn pop_into(&mut self, limit: Instant, event: &mut E) -> Option<Instant> {
        let (at, from) = self.next(limit)?;
        *event = self.take(from);
        Some(at)
    }

    /// Where the next event waits, unless it is due after `limit`; time advances to it (the
    /// caller then [takes](Engine::take) it at once).
    #[inline(always)]
    fn next(&mut self, limit: Instant) -> Option<(Instant, Source)> {
        // the earliest head: the calendar's, the heap's, or the earliest lane's (orders are
        // unique: `seq` is)
        let heap = self.heap.peek().copied().unwrap_or(u128::MAX);
        let (queued, bucket) = match self.calendar.peek(&self.slab, self.now) {
            Some((k, b)) if k < heap => (k, Some(b)),
            _ => (heap, None),
        };
        let (at, from) = if self.lane_head.0 < queued {
            let (_, i) = self.lane_head;
            let at = Instant((self.lane_head.0 >> 64) as u64);
            if at > limit {
                return None;
            }
            let source = match i {
                TIMER_LIST => Source::Timers,
                TIMER_LANE => Source::TimerLane,
                _ => Source::Lane(i),
            };
            (at, source)
        } else {
            if queued == u128::MAX || Instant((queued >> 64) as u64) > limit {
                // (an event due at the very end of time with the last sequence number cannot
                // be told from none: 2^64 events are never scheduled)
                return None;
            }
            let (k, slot) = match bucket {
                Some(b) => (queued, self.calendar.pop_from(&self.slab, b)),
                None => {
                    let k = self.heap.pop()?;
                    (k, slot_of(k))
                }
            };
            self.slab[slot as usize].link = u128::from(self.free);
            self.free = slot;
            (Instant((k >> 64) as u64), Source::Slot(slot))
        };
        debug_assert!(at >= self.now);
        self.now = at;
        self.current = match from {
            Source::Slot(_) => queued & !((1 << SLOT_BITS) - 1),
            _ => self.lane_head.0,
        };
        self.popped += 1;
        Some((at, from))
    }

    /// The event [`Engine::next`] found, out of its queue.
    #[inline(always)]
    fn take(&mut self, from: Source) -> E {
        match from {
            // (the slot is free already: nothing is scheduled in between)
            Source::Slot(slot) => self.slab[slot as usize]
                .event
                .take()
                .expect("a key's slot holds its event"),
            Source::Lane(i) => {
                let (_, _, event) = self.lanes[i].pop_front().expect("the lane head is in its lane");
                self.find_lane_head();
                event
            }
            Source::Timers => {
                let head = self.timers.head;
                let event = self.timers.unlink(head);
                self.find_lane_head();
                event
            }
            Source::TimerLane => {
                let lane = &mut self.timer_lane;
                let (_, event) = lane.q.pop_front().expect("the lane head is in its lane");
                lane.base += 1;
                lane.live -= 1;
                lane.trim();
                self.find_lane_head();
                event
            }
        }
    }

    /// The next event, if it is due now and waits in the calendar or the heap (not in a lane,
    /// nor a timer): an explorer looks at it before choosing the order of events due at one
    /// instant.
    pub fn peek_now(&self) -> Option<&E> {
        let heap = self.heap.peek().copied().unwrap_or(u128::MAX);
        let k = match self.calendar.peek(&self.slab, self.now) {
            Some((k, _)) if k < heap => k,
            _ => heap,
        };
        if k == u128::MAX || self.lane_head.0 < k || (k >> 64) as u64 != self.now.0 {
            return None;
        }
        Some(self.slab[slot_of(k) as usize].event())
    }

    /// Call `f` with every pending event and when it is due, in no particular order (an
    /// explorer's fingerprint of the world reads them all; cancelled timers are not pending).
    pub fn for_each_pending(&self, mut f: impl FnMut(Instant, &E)) {
        let at = |k: u128| Instant((k >> 64) as u64);
        for &k in self.heap.keys() {
            f(at(k), self.slab[slot_of(k) as usize].event());
        }
        self.calendar
            .for_each(&self.slab, |k, slot| f(at(k), self.slab[slot as usize].event()));
        for lane in &self.lanes {
            for (t, _, e) in lane {
                f(*t, e);
            }
        }
        let mut n = self.timers.head;
        while n != NIL {
            let node = &self.timers.nodes[n as usize];
            if let Some(e) = &node.event {
                f(at(node.order), e);
            }
            n = node.next;
        }
        for (o, e) in &self.timer_lane.q {
            if o & CANCELLED == 0 {
                f(at(*o), e);
            }
        }
    }

    /// The sequence number of the event popped last (its place in the firing order).
    pub fn current_seq(&self) -> u64 {
        ((self.current >> SLOT_BITS) as u64) & MAX_SEQ
    }

    /// Handle the event in place `seq` at the current instant as the one popped last: an
    /// explorer that popped several events due now, took one and queued the others back in
    /// their places ([`Engine::at_reserved`]).
    pub fn set_current(&mut self, seq: u64) {
        self.current = order(self.now, seq);
    }

    /// Number of events still pending.
    pub fn pending(&self) -> usize {
        self.calendar.len()
            + self.heap.len()
            + self.lanes.iter().map(VecDeque::len).sum::<usize>()
            + self.timers.len
            + self.timer_lane.live
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

    /// The order is exactly `(time, seq)` for any mix of heap, lane, timer and reserved events
    /// (timers cancelled or not, before or after they fire; a reserved one handled at once
    /// exactly when it comes first), and slab slots are reused.
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
        let mut timers = Vec::new(); // every timer made: (id, its event)
        for _ in 0..20_000 {
            most = most.max(e.pending());
            if r.random_bool(0.55) || e.pending() == 0 {
                let delay = Nanos(r.random_range(0..max_delay));
                let at = (e.now() + delay).0;
                let how = r.random_range(0..10);
                if how < 4 {
                    e.after_in(Lane(r.random_range(0..3)), delay, seq);
                } else if how < 6 {
                    // one fixed delay (in time order: the timer lane) or any (the list)
                    let delay = if r.random_bool(0.5) {
                        Nanos(max_delay / 2)
                    } else {
                        delay
                    };
                    let at = (e.now() + delay).0;
                    timers.push((e.timer_after(delay, seq), seq));
                    reference.push((at, seq));
                    seq += 1;
                    continue;
                } else {
                    e.after(delay, seq);
                }
                reference.push((at, seq));
                seq += 1;
            } else if r.random_bool(0.15) && !timers.is_empty() {
                // cancel a timer, pending or not: only a pending one comes out, and only it
                let (id, s) = timers.swap_remove(r.random_range(0..timers.len()));
                let pending = reference.iter().position(|x| x.1 == s);
                assert_eq!(e.cancel_as(id, Clone::clone), pending.map(|_| s));
                if let Some(i) = pending {
                    reference.swap_remove(i);
                }
                assert_eq!(e.cancel_as(id, Clone::clone), None, "a timer cancels once");
            } else if r.random_bool(0.1) {
                // an event due now given its place first ([`Engine::reserve`]), then a few more
                // scheduled: handled at once exactly when nothing pending comes before it
                let (mine, now) = (seq, e.now().0);
                assert_eq!(e.reserve(), mine);
                seq += 1;
                for _ in 0..r.random_range(0..3) {
                    let delay = Nanos(r.random_range(0..max_delay.min(3)));
                    e.after(delay, seq);
                    reference.push(((e.now() + delay).0, seq));
                    seq += 1;
                }
                let first = reference.iter().min().copied();
                let popped = e.processed();
                if e.next_is(mine) {
                    assert!(first.is_none_or(|f| f > (now, mine)), "{first:?} comes first");
                    assert_eq!(e.processed(), popped + 1, "it counts as popped");
                } else {
                    assert!(first.is_some_and(|f| f < (now, mine)));
                    e.at_reserved(e.now(), mine, mine);
                    reference.push((now, mine));
                }
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
            assert_eq!(e.pending(), reference.len(), "cancelled timers are not pending");
        }
        assert!(
            e.slab.len() <= most + 1,
            "slab slots are reused: {} for {most}",
            e.slab.len()
        );
    }

    /// Issue 34 item 7: behind one live timer due late, timers made and cancelled at a high
    /// rate are reclaimed (they used to stay queued until due, so memory grew with the rate
    /// times the delay), and cancelling and firing by id still find the right ones after
    /// the lane is compacted.
    #[test]
    fn cancelled_timers_behind_a_live_front_are_reclaimed() {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        let mut e = Engine::<u64>::new();
        let first = e.timer_after(Nanos(1_000_000), 0); // a request that really times out
        let mut kept = Vec::new();
        let mut most = 0;
        for i in 1..200_000u64 {
            e.at(Instant(i), u64::MAX);
            let (t, ev) = e.pop_until(Instant(u64::MAX)).unwrap();
            assert_eq!((t, ev), (Instant(i), u64::MAX));
            let id = e.timer_after(Nanos(1_000_000), i);
            if r.random_bool(0.001) {
                kept.push((id, i)); // live: cancelled later, or fired
            } else {
                assert_eq!(e.cancel_as(id, Clone::clone), Some(i));
                assert_eq!(e.cancel_as(id, Clone::clone), None);
            }
            most = most.max(e.timer_lane.q.len());
        }
        let live = kept.len() + 1;
        // (about 200 live: at most twice them plus the slack of 4096, where all 200,000 stayed)
        assert!(most < 5000, "the lane held {most} entries for {live} live timers");
        // after compactions: half the kept ones cancel by id, the rest fire, in order
        let (cancel, fire): (Vec<_>, Vec<_>) = kept.iter().partition(|(_, i)| i % 2 == 0);
        for &(id, i) in &cancel {
            assert_eq!(e.cancel_as(id, Clone::clone), Some(i));
        }
        let mut fired = Vec::new();
        while let Some((_, ev)) = e.pop_until(Instant(u64::MAX)) {
            fired.push(ev);
        }
        let want: Vec<u64> = std::iter::once(0).chain(fire.iter().map(|&(_, i)| i)).collect();
        assert_eq!(fired, want);
        assert_eq!(e.cancel_as(first, Clone::clone), None, "fired");
        assert_eq!(e.pending(), 0);
    }

    /// `before_current` orders a reserved place against the event being handled by time, then
    /// by sequence number: an earlier instant, or the same instant reserved earlier, is before.
    #[test]
    fn before_current_compares_time_then_sequence() {
        let mut e = Engine::<u32>::new();
        let early = e.reserve(); // place 0, at time 5 below
        e.at(Instant(5), 1); // seq 1
        let late = e.reserve(); // place 2, at time 5 below
        assert_eq!(e.pop_until(Instant(10)), Some((Instant(5), 1)));
        assert!(e.before_current(Instant(4), late), "an earlier instant");
        assert!(e.before_current(Instant(5), early), "the same instant, reserved before");
        assert!(!e.before_current(Instant(5), late), "the same instant, reserved after");
        assert!(!e.before_current(Instant(6), early), "a later instant");
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
