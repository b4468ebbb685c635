//! A calendar queue for the near future: the engine's queue of keys due soon.
//!
//! Most events a run schedules are due within a fraction of a second (a network hop, a store's
//! service, a fetch, a sleep to a slot). Time from the bucket of `now` on is cut into
//! [`BUCKETS`] buckets of 2^[`SHIFT`] ns (16.4 us; 268 ms in all); a key due in that window
//! goes into its bucket's list, kept sorted, and the least key is the head of the first
//! non-empty bucket from `now`'s, found through a bitmap of the buckets and a summary of the
//! bitmap (a bit per word), so a run whose events are sparse does not scan the bitmap's 256
//! words at each pop. A push and a pop are a few
//! instructions and a line or two of memory, where a heap sifts through its levels
//! (Brown's calendar queue, with a fixed year).
//!
//! A key the calendar does not take (due beyond the window, or behind [`MAX_WALK`] keys in its
//! bucket: a flood at one instant) goes to the engine's heap instead, and the engine pops the
//! least of both: the calendar is only ever a speed-up, never a change of order.
//!
//! Keys are the engine's (see [`super::Engine`]): due time in the high 64 bits, then the
//! sequence number and the slab slot. The calendar keeps each key, and the link to the next one
//! of its bucket, beside the event in the engine's slab ([`Parked`]), in one cache line with
//! it: a step of a push's walk, or a pop and then the event it pops, touch one line.

use crate::time::Instant;

/// Bucket width: 2^14 ns.
///
/// Narrow, so a push seldom walks its bucket: each step of a walk reads another event's line
/// and ends on a branch the processor cannot predict. With R1-large's 60,000 events a second
/// (about 1 a bucket, where buckets of 65.5 us held 4), the simulator alone ran in 0.92 of
/// the time (median of 31 alternated pairs) on 0.4% fewer instructions: the gain is in
/// fewer mispredictions. Buckets of 4.1 us were no faster on R1-large and cost a run whose
/// events are sparse (r1-small) 4% more instructions; with these it runs 3% fewer.
pub const SHIFT: u32 = 14;
/// Buckets in the window (a power of two, at least 4096).
pub const BUCKETS: usize = 16384;
const WORDS: usize = BUCKETS / 64;
/// Words of the bitmap's summary (a bit per word of the bitmap).
const SUMMARY: usize = WORDS / 64;
/// Keys a push may walk past in its bucket before it leaves the key to the heap.
pub const MAX_WALK: u32 = 8;
/// Bits of a key that name the slab slot: fewer than 2^28 (268 million) events wait at once,
/// and a run schedules at most 2^36 (68.7 billion) events in all. (Here, below the engine that
/// makes the keys, so the calendar needs nothing of its parent.)
pub(super) const SLOT_BITS: u32 = 28;
/// The low bits of a key, which name its slab slot ([`SLOT_BITS`]).
const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;
/// No slot: the end of a bucket's list. (So the slab holds at most `NIL` slots.)
pub const NIL: u32 = SLOT_MASK as u32;

/// An event parked in the engine's slab, with (while the calendar holds it) its key and the
/// slot after it in its bucket. 64 bytes, one cache line, for the engine's 48-byte events.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Parked<E> {
    /// Its key's order bits (time, sequence), and in the key's slot bits, which would only
    /// name this slot, the next slot of its bucket (`NIL` at the end). Compared with another
    /// key, it compares as its key: sequence numbers are unique, so the slot bits never
    /// decide. (A heap key lives in the heap; the heap's slots leave this alone.)
    pub link: u128,
    /// The event, `None` in a free slot: a pop moves it out, since an event that may own data
    /// is `Clone`, not `Copy`, and cloning it is a call per event. (`None` takes no room: an
    /// event is an enum with a tag to spare.)
    pub event: Option<E>,
}

impl<E> Parked<E> {
    /// A slot holding `event`.
    pub fn new(event: E) -> Self {
        Parked {
            link: 0,
            event: Some(event),
        }
    }

    /// The event of a slot a key names.
    pub fn event(&self) -> &E {
        self.event.as_ref().expect("a key's slot holds its event")
    }
}

/// The slot after `link`'s in its bucket.
#[inline]
fn next_of(link: u128) -> u32 {
    (link & SLOT_MASK) as u32
}

/// `link` pointing to `next` instead.
#[inline]
fn relink(link: u128, next: u32) -> u128 {
    (link & !SLOT_MASK) | u128::from(next)
}

/// The calendar: see the module docs.
#[derive(Debug)]
pub struct Calendar {
    // invariant: `head[b]` starts the list of the keys in bucket `b`, in increasing order of
    // the slab's `key` through its `next`; `bits` has bit `b` set exactly when that list is
    // not empty.
    head: Vec<u32>,
    bits: [u64; WORDS],
    // invariant: bit `w` is set exactly when `bits[w]` is not zero.
    summary: [u64; SUMMARY],
    // invariant: every key waiting is due in the window `[bucket(now), bucket(now) + BUCKETS)`
    // of the engine's `now` (pushes are due at or after `now` and before the window's end,
    // and `now` only advances to keys that were due), so a bucket holds one lap only.
    len: usize,
}

thread_local! {
    /// Bucket heads of calendars gone, every entry `NIL` again: a run builds an engine, and an
    /// explorer builds one per schedule, thousands a second; a fresh head array is 64 KiB to
    /// fill (a tenth of a small schedule's time, by perf).
    static HEADS: std::cell::RefCell<Vec<Vec<u32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How many head arrays a thread keeps for reuse.
const POOLED: usize = 256;

impl Drop for Calendar {
    fn drop(&mut self) {
        let mut head = std::mem::take(&mut self.head);
        if head.len() != BUCKETS {
            return;
        }
        // only the buckets the bitmap marks hold a list: back to `NIL`, the rest already are
        for (w, &bits) in self.bits.iter().enumerate() {
            let mut m = bits;
            while m != 0 {
                head[w * 64 + m.trailing_zeros() as usize] = NIL;
                m &= m - 1;
            }
        }
        // (a thread being torn down has no pool: the array is simply freed)
        let _ = HEADS.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOLED {
                p.push(head);
            }
        });
    }
}

/// A calendar with the same keys in the same buckets: its head array taken from the pool (or
/// made), and only the buckets the bitmap marks copied (an explorer saves and restores worlds
/// with a few events pending, thousands of times a second).
impl Clone for Calendar {
    fn clone(&self) -> Self {
        let mut c = Calendar::default();
        for (w, &bits) in self.bits.iter().enumerate() {
            let mut m = bits;
            while m != 0 {
                let b = w * 64 + m.trailing_zeros() as usize;
                c.head[b] = self.head[b];
                m &= m - 1;
            }
        }
        c.bits = self.bits;
        c.summary = self.summary;
        c.len = self.len;
        c
    }
}

impl Default for Calendar {
    fn default() -> Self {
        let head = HEADS
            .try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| vec![NIL; BUCKETS]);
        Calendar {
            head,
            bits: [0; WORDS],
            summary: [0; SUMMARY],
            len: 0,
        }
    }
}

/// The bucket number (not yet wrapped) of a time.
#[inline]
fn bucket_of(at: u64) -> u64 {
    at >> SHIFT
}

impl Calendar {
    /// Keys waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no key waits.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Take key `k` (its event parked in `slab[slot]`, due at or after `now`), unless it is due
    /// beyond the window or its bucket is crowded: then `false`, and the caller keeps it
    /// elsewhere.
    #[inline]
    pub fn push<E>(&mut self, slab: &mut [Parked<E>], k: u128, slot: u32, now: Instant) -> bool {
        let b = bucket_of((k >> 64) as u64);
        debug_assert!(b >= bucket_of(now.0), "a key due before now");
        if b >= bucket_of(now.0) + BUCKETS as u64 {
            return false;
        }
        let i = (b as usize) & (BUCKETS - 1);
        // its place: after every key less than it
        let (mut prev, mut cur, mut walked) = (NIL, self.head[i], 0);
        while cur != NIL && slab[cur as usize].link < k {
            walked += 1;
            if walked > MAX_WALK {
                return false;
            }
            prev = cur;
            cur = next_of(slab[cur as usize].link);
        }
        slab[slot as usize].link = relink(k, cur);
        match prev {
            NIL => self.head[i] = slot,
            q => slab[q as usize].link = relink(slab[q as usize].link, slot),
        }
        self.bits[i >> 6] |= 1 << (i & 63);
        self.summary[i >> 12] |= 1 << ((i >> 6) & 63);
        self.len += 1;
        true
    }

    /// Every key waiting, with its slot, in no particular order (an explorer's fingerprint of
    /// the pending events reads them all).
    pub fn for_each<E>(&self, slab: &[Parked<E>], mut f: impl FnMut(u128, u32)) {
        for (w, &bits) in self.bits.iter().enumerate() {
            let mut m = bits;
            while m != 0 {
                let i = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let mut cur = self.head[i];
                while cur != NIL {
                    let link = slab[cur as usize].link;
                    f(link & !SLOT_MASK, cur);
                    cur = next_of(link);
                }
            }
        }
    }

    /// The least key and its bucket (for [`Calendar::pop_from`]), `now` being the engine's.
    #[inline(always)]
    pub fn peek<E>(&self, slab: &[Parked<E>], now: Instant) -> Option<(u128, usize)> {
        if self.len == 0 {
            return None;
        }
        let i = self.first(now);
        let h = self.head[i];
        Some((relink(slab[h as usize].link, h), i))
    }

    /// The first non-empty bucket from `now`'s, round the window (one lap: see `len`).
    /// (Inlined: the common case, a key in `now`'s word of the bitmap, is a few instructions;
    /// the search through the summary is a call. Inlined whole, the pops of R1-large ran 7%
    /// more instructions.)
    #[inline(always)]
    fn first(&self, now: Instant) -> usize {
        let start = (bucket_of(now.0) as usize) & (BUCKETS - 1);
        let (w0, b0) = (start >> 6, start & 63);
        let m = self.bits[w0] & (!0u64 << b0);
        if m != 0 {
            return (w0 << 6) | m.trailing_zeros() as usize;
        }
        // the first non-empty word after `w0`, through the summary, round the window; the last
        // one visited is `w0` itself again: its buckets before `start`
        let w = self.first_word(w0);
        let m = if w == w0 {
            self.bits[w] & !(!0u64 << b0)
        } else {
            self.bits[w]
        };
        debug_assert!(m != 0, "a key waits, so a bucket is not empty");
        (w << 6) | m.trailing_zeros() as usize
    }

    /// The first non-empty word of the bitmap after word `w0`, round the window (`w0` itself
    /// last).
    #[inline(never)]
    fn first_word(&self, w0: usize) -> usize {
        let (s0, b0) = (w0 >> 6, w0 & 63);
        // (a shift by 64 would overflow: the words after `w0` in its summary word)
        let m = if b0 == 63 {
            0
        } else {
            self.summary[s0] & (!0u64 << (b0 + 1))
        };
        if m != 0 {
            return (s0 << 6) | m.trailing_zeros() as usize;
        }
        for d in 1..=SUMMARY {
            let s = (s0 + d) & (SUMMARY - 1);
            // the last summary word visited is the first one again: its words up to `w0`
            let m = if d == SUMMARY {
                self.summary[s] & !(!0u64 << b0) | (self.summary[s] & (1 << b0))
            } else {
                self.summary[s]
            };
            if m != 0 {
                return (s << 6) | m.trailing_zeros() as usize;
            }
        }
        unreachable!("a key waits, so a bucket is not empty")
    }

    /// Remove the least key of bucket `i` (the bucket [`Calendar::peek`] named); its slot.
    #[inline]
    pub fn pop_from<E>(&mut self, slab: &[Parked<E>], i: usize) -> u32 {
        let s = self.head[i];
        self.head[i] = next_of(slab[s as usize].link);
        if self.head[i] == NIL {
            self.bits[i >> 6] &= !(1 << (i & 63));
            if self.bits[i >> 6] == 0 {
                self.summary[i >> 12] &= !(1 << ((i >> 6) & 63));
            }
        }
        self.len -= 1;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// One key at a time, due anywhere in the window from anywhere in it (before and after the
    /// window wraps, in its own word of the bitmap or another, in its own word of the summary
    /// or another): the pop finds it.
    #[test]
    fn finds_a_lone_key_anywhere_in_the_window() {
        let width = 1u64 << SHIFT;
        let window = BUCKETS as u64 * width;
        let mut cal = Calendar::default();
        let mut slab = vec![Parked::new(())];
        let mut now = 0u64;
        let mut seq = 0u64;
        for delay in [
            0,
            1,
            width,
            63 * width,
            64 * width,
            4095 * width,
            4096 * width,
            5000 * width,
            window - width,
        ] {
            for _ in 0..3 {
                let at = now + delay;
                let k = (u128::from(at) << 64) | (u128::from(seq) << 28);
                seq += 1;
                assert!(
                    cal.push(&mut slab, k, 0, Instant(now)),
                    "a key due {delay} ns ahead is in the window"
                );
                let (got, i) = cal.peek(&slab, Instant(now)).expect("a key waits");
                assert_eq!(got, k, "due {delay} ns after {now}");
                assert_eq!(cal.pop_from(&slab, i), 0);
                assert!(cal.is_empty());
                now = at + 3 * width + 7;
            }
        }
    }

    /// With what it refuses kept in a reference heap, the calendar pops keys in the order a
    /// binary heap of all of them does, as time advances to each key popped, over short delays
    /// (crowded buckets), delays around the window's length and long ones; and it refuses only
    /// what is beyond the window or crowded.
    #[test]
    fn pops_what_a_binary_heap_pops() {
        let window = BUCKETS as u64 * (1 << SHIFT);
        for (max_delay, seed) in [(1u64 << 10, 1), (window + window / 2, 2), (1 << 40, 3), (1 << 17, 4)] {
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut cal = Calendar::default();
            let mut slab: Vec<Parked<()>> = Vec::new();
            let mut elsewhere = BinaryHeap::new();
            let mut reference = BinaryHeap::new();
            let (mut now, mut seq, mut free): (u64, u64, Vec<u32>) = (0, 0, Vec::new());
            let mut slots = 0u32;
            let (mut taken, mut refused) = (0, 0);
            for _ in 0..60_000 {
                if r.random_bool(0.53) {
                    let at = now + r.random_range(0..max_delay);
                    let slot = free.pop().unwrap_or_else(|| {
                        slots += 1;
                        slots - 1
                    });
                    let k = (u128::from(at) << 64) | (u128::from(seq) << 28) | u128::from(slot);
                    seq += 1;
                    reference.push(Reverse(k));
                    if slab.len() <= slot as usize {
                        slab.resize_with(slot as usize + 1, || Parked::new(()));
                    }
                    if cal.push(&mut slab, k, slot, Instant(now)) {
                        taken += 1;
                    } else {
                        assert!(
                            at >> SHIFT >= (now >> SHIFT) + BUCKETS as u64 || max_delay <= 1 << 17,
                            "refused a key in the window with uncrowded buckets"
                        );
                        refused += 1;
                        elsewhere.push(Reverse(k));
                    }
                } else if let Some(Reverse(want)) = reference.pop() {
                    let from_cal = cal.peek(&slab, Instant(now));
                    let other = elsewhere.peek().map(|x| x.0);
                    let got = match (from_cal, other) {
                        (Some((k, i)), o) if o.is_none_or(|o| k < o) => {
                            assert_eq!(cal.pop_from(&slab, i), k as u32 & NIL, "the slot of the key peeked");
                            k
                        }
                        _ => elsewhere.pop().expect("a key waits").0,
                    };
                    assert_eq!(got, want);
                    now = (got >> 64) as u64;
                    free.push((got as u32) & ((1 << 28) - 1));
                }
                assert_eq!(cal.len() + elsewhere.len(), reference.len());
            }
            if max_delay < 1 << 40 {
                assert!(taken > 1000, "the calendar took only {taken} keys");
            }
            if max_delay > window {
                assert!(refused > 1000, "beyond the window: refused only {refused}");
            }
        }
    }
}
