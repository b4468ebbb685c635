//! The states an explorer has seen ([`Seen`]): for each state's exact part, the states with
//! it, each with how its continuations ended once the explorer closed it. What a state is and
//! when one covers another is [`crate::form`]'s to say.
//!
//! One table serves every thread of an exploration (`--threads`): it is split into stripes
//! by the exact part's top bits, each behind its own lock, so threads that reach different
//! states rarely wait for one another. A state covers others once it is in the table, open or
//! closed, at its own instant: its continuations are explored by the thread that added it
//! (each state is added past the decisions that deal the subtrees out, so all its
//! continuations lie in that thread's subtree); only that thread closes it ([`Seen::close`]),
//! and only a closed state, whose continuations' ends are known, covers at another instant.
//!
//! Compact: a state is 24 bytes in its stripe's array (its instant; how its continuations
//! ended, whether it shifts and its slack's length in one word; where its slack starts; the
//! next state of its exact part), its slack coordinates 8 bytes each in another, and one
//! 16-byte slot per exact part in the stripe's hash table. Nothing iterates a hash map:
//! each exact part's states are a list in the order they were added.

use crate::form::Key;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How a seen state's continuations ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// Still being explored (or left so by a budget or a shard).
    Open,
    /// All explored: the latest ended `within` ns after the state; `cut`: some run reached
    /// the scenario's duration.
    Ends {
        /// How long after the state the latest continuation ended.
        within: u64,
        /// Some continuation was cut by the duration.
        cut: bool,
    },
    /// All explored, but some stopped at a state whose continuations' ends are not known.
    Unknown,
}

/// Where a run that stopped at a seen state would have ended: `Some((end, cut))`, or `None`
/// when not known.
pub type Stop = Option<(u64, bool)>;

// A state's word: bits 0..48 `within` (ns), 48..60 the slack's length (4095: longer, its
// length first among its coordinates), 60 cut, 61 shifts, 62..64 open (0), ends (1),
// unknown (2). An end 2^48 ns (78 hours) or more after the state is kept as unknown: it
// then covers only at its own instant, which is never wrong.
const WITHIN: u64 = (1 << 48) - 1;
const LEN_SHIFT: u32 = 48;
const LONG: u64 = 4095;
const CUT: u64 = 1 << 60;
const SHIFTS: u64 = 1 << 61;
const STATE_SHIFT: u32 = 62;
const NONE: u32 = u32::MAX;

fn encode(done: Done) -> u64 {
    match done {
        Done::Open => 0,
        Done::Ends { within, cut } if within < WITHIN => (1 << STATE_SHIFT) | within | if cut { CUT } else { 0 },
        Done::Ends { .. } | Done::Unknown => 2 << STATE_SHIFT,
    }
}

fn decode(word: u64) -> Done {
    match word >> STATE_SHIFT {
        0 => Done::Open,
        1 => Done::Ends {
            within: word & WITHIN,
            cut: word & CUT != 0,
        },
        _ => Done::Unknown,
    }
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    now: u64,
    word: u64,
    // where its slack starts in the stripe's slack
    slack: u32,
    // the next state of its exact part (`NONE`: the last)
    next: u32,
}

/// Passes a fingerprint through as its own hash (it is one already; a fixed function:
/// nothing depends on a random seed).
#[derive(Default)]
struct Through(u64);

impl Hasher for Through {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, w: u64) {
        // (the low bits pick a bucket, the top seven a control byte: both from the whole word)
        self.0 = (w ^ (w >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ w;
    }
}

/// One stripe: its exact parts' first states, its states and their slack, each one array
/// (a stripe holds a 64th of the states: while one array grows, the copy is a 64th of the
/// table).
#[derive(Debug, Default)]
struct Stripe {
    // exact part -> its first state
    heads: HashMap<u64, u32, BuildHasherDefault<Through>>,
    entries: Vec<Entry>,
    slack: Vec<i64>,
}

impl Stripe {
    fn slack_of(&self, e: &Entry) -> &[i64] {
        let n = (e.word >> LEN_SHIFT) & LONG;
        let at = e.slack as usize;
        match n {
            0 => &[],
            LONG => {
                let n = self.slack[at] as usize;
                &self.slack[at + 1..at + 1 + n]
            }
            n => &self.slack[at..at + n as usize],
        }
    }

    // the bytes it takes: the table's buckets (as much again while it grows: the copy), its
    // states' and slack's arrays
    fn bytes(&self) -> u64 {
        let slot = (std::mem::size_of::<(u64, u32)>() + 1) as u64;
        let buckets = (self.heads.capacity() as u64 * 8 / 7).next_power_of_two();
        buckets * slot * 3 / 2
            + (self.entries.capacity() * std::mem::size_of::<Entry>()) as u64
            + self.slack.capacity() as u64 * 8
    }

    fn find(&self, k: &Key, limit: u64) -> Option<Stop> {
        let mut i = *self.heads.get(&k.exact)?;
        while let Some(e) = self.entries.get(i as usize) {
            i = e.next;
            let slack = self.slack_of(e);
            let covers = slack.len() == k.slack.len()
                && if super::plant::planted(super::plant::Plant::SlackReversed) {
                    slack.iter().zip(&k.slack).all(|(a, b)| a <= b)
                } else {
                    slack.iter().zip(&k.slack).all(|(a, b)| a >= b)
                };
            if !covers {
                continue;
            }
            let done = decode(e.word);
            if e.now == k.now {
                return Some(match done {
                    Done::Ends { within, cut } => Some((k.now + within, cut)),
                    _ => None,
                });
            }
            if let Done::Ends { within, cut: false } = done
                && e.word & SHIFTS != 0
                && k.shifts
                && k.now.saturating_add(within) < limit
            {
                return Some(Some((k.now + within, false)));
            }
        }
        None
    }

    /// Add `k`: its index, or `NONE` when the stripe has no room left for it (4 billion states
    /// or slack coordinates: not added, which only prunes less).
    fn insert(&mut self, k: Key) -> u32 {
        let n = k.slack.len();
        let long = n as u64 >= LONG;
        let (Ok(i), Ok(at)) = (u32::try_from(self.entries.len()), u32::try_from(self.slack.len())) else {
            return NONE;
        };
        if i == NONE {
            return NONE;
        }
        let mut word = if k.shifts { SHIFTS } else { 0 };
        if n > 0 {
            if long {
                self.slack.push(n as i64);
            }
            self.slack.extend_from_slice(&k.slack);
            word |= (n.min(LONG as usize) as u64) << LEN_SHIFT;
        }
        self.entries.push(Entry {
            now: k.now,
            word,
            slack: at,
            next: NONE,
        });
        // (appended: an exact part's states in the order they were added)
        match self.heads.get(&k.exact) {
            None => {
                self.heads.insert(k.exact, i);
            }
            Some(&h) => {
                let mut j = h as usize;
                while self.entries[j].next != NONE {
                    j = self.entries[j].next as usize;
                }
                self.entries[j].next = i;
            }
        }
        i
    }
}

// stripes of the table: enough that threads rarely meet at a lock
const STRIPES: usize = 64;

#[derive(Debug)]
struct Table {
    stripes: Box<[Mutex<Stripe>]>,
    len: AtomicU64,
    bytes: AtomicU64,
}

/// The states an explorer has seen, shared by its threads (a clone is the same table): for
/// each exact part, the states with it in the order added (see the module's docs).
#[derive(Clone, Debug)]
pub struct Seen(Arc<Table>);

impl Default for Seen {
    fn default() -> Self {
        Seen(Arc::new(Table {
            stripes: (0..STRIPES).map(|_| Mutex::new(Stripe::default())).collect(),
            len: AtomicU64::new(0),
            bytes: AtomicU64::new((STRIPES * std::mem::size_of::<Mutex<Stripe>>()) as u64),
        }))
    }
}

impl Seen {
    fn stripe(&self, exact: u64) -> MutexGuard<'_, Stripe> {
        // (a panic while a stripe was held leaves it whole: each change is one push or link)
        self.0.stripes[(exact >> 58) as usize % STRIPES]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// States seen.
    pub fn len(&self) -> u64 {
        self.0.len.load(Ordering::Relaxed)
    }

    /// None seen.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory the seen states take, bytes, on the high side: each stripe's table (its
    /// buckets, and as much again for the copy a growing table makes) and its arrays of
    /// states and slack as allocated. (About 24 to 48 bytes a state, 8 to 16 a slack
    /// coordinate and 25 to 60 an exact part, as the arrays and the table fill.)
    pub fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }

    /// A seen state that covers `k` (see [`crate::form`]), if any, and where a run stopped
    /// at `k` would have ended. `limit`: the scenario's duration (virtual ns).
    pub fn find(&self, k: &Key, limit: u64) -> Option<Stop> {
        self.stripe(k.exact).find(k, limit)
    }

    /// Add `k` (not covered: [`Seen::find`]); its handle for [`Seen::close`].
    pub fn insert(&self, k: Key) -> (u64, u32) {
        let exact = k.exact;
        (exact, self.add(self.stripe(exact), k))
    }

    /// Add `k` to its stripe `s` (held), and count it and the bytes it took; its index there.
    fn add(&self, mut s: MutexGuard<'_, Stripe>, k: Key) -> u32 {
        let before = s.bytes();
        let i = s.insert(k);
        let after = s.bytes();
        drop(s);
        self.0.len.fetch_add(u64::from(i != NONE), Ordering::Relaxed);
        self.0.bytes.fetch_add(after - before, Ordering::Relaxed);
        i
    }

    /// [`Seen::find`], and when nothing covers `k`, [`Seen::insert`], under one lock: `Err`
    /// with where a run stopped at `k` would have ended, or `Ok` with the new state's handle.
    pub fn find_or_insert(&self, k: Key, limit: u64) -> Result<(u64, u32), Stop> {
        let exact = k.exact;
        let s = self.stripe(exact);
        if let Some(stop) = s.find(&k, limit) {
            return Err(stop);
        }
        Ok((exact, self.add(s, k)))
    }

    /// Every continuation of the state `at` ([`Seen::insert`]) was explored, ending so.
    pub fn close(&self, at: (u64, u32), done: Done) {
        let mut s = self.stripe(at.0);
        if let Some(e) = s.entries.get_mut(at.1 as usize) {
            e.word = (e.word & !(WITHIN | CUT | (3 << STATE_SHIFT))) | encode(done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::form::Form;

    fn key(now: u64, w: u64, absolute: bool, slack: &[i64]) -> Key {
        let mut f = Form::new(now);
        f.instant(now + w);
        if absolute {
            f.absolute();
        }
        for &s in slack {
            f.more_is_worse(s);
        }
        f.key()
    }

    #[test]
    fn a_state_covers_one_with_no_more_slack_at_its_instant() {
        let s = Seen::default();
        let at = s.insert(key(10, 5, false, &[3, 1]));
        assert_eq!(
            s.find(&key(10, 5, false, &[3, 1]), 100),
            Some(None),
            "the same state, still open"
        );
        assert_eq!(
            s.find(&key(10, 5, false, &[2, 0]), 100),
            Some(None),
            "less slack is covered"
        );
        assert_eq!(
            s.find(&key(10, 5, false, &[4, 0]), 100),
            None,
            "more slack in one coordinate is not"
        );
        assert_eq!(
            s.find(&key(10, 6, false, &[3, 1]), 100),
            None,
            "another exact part is not"
        );
        s.close(at, Done::Ends { within: 20, cut: false });
        assert_eq!(s.find(&key(10, 5, false, &[3, 1]), 100), Some(Some((30, false))));
    }

    #[test]
    fn a_state_meets_one_at_another_instant_only_when_closed_uncut_and_ending_before_the_limit() {
        let s = Seen::default();
        let at = s.insert(key(10, 5, false, &[]));
        assert_eq!(
            s.find(&key(40, 5, false, &[]), 100),
            None,
            "open: its continuations' ends are unknown"
        );
        s.close(at, Done::Ends { within: 20, cut: false });
        assert_eq!(s.find(&key(40, 5, false, &[]), 100), Some(Some((60, false))));
        assert_eq!(
            s.find(&key(80, 5, false, &[]), 100),
            None,
            "shifted, it would reach the limit"
        );
        s.close(at, Done::Ends { within: 20, cut: true });
        assert_eq!(
            s.find(&key(40, 5, false, &[]), 100),
            None,
            "a continuation was cut by the limit"
        );
        s.close(at, Done::Unknown);
        assert_eq!(s.find(&key(40, 5, false, &[]), 100), None);
        let s = Seen::default();
        let at = s.insert(key(10, 5, true, &[]));
        s.close(at, Done::Ends { within: 20, cut: false });
        assert_eq!(
            s.find(&key(40, 5, true, &[]), 100),
            None,
            "absolute: its own instant only"
        );
        assert_eq!(s.find(&key(10, 5, true, &[]), 100), Some(Some((30, false))));
    }

    #[test]
    fn how_a_state_ended_is_kept_as_it_was_closed() {
        for done in [
            Done::Open,
            Done::Unknown,
            Done::Ends { within: 0, cut: false },
            Done::Ends {
                within: 12_345,
                cut: true,
            },
            Done::Ends {
                within: WITHIN - 1,
                cut: false,
            },
        ] {
            assert_eq!(decode(encode(done)), done);
        }
        // an end too far to keep is kept as not known: it then covers at its own instant only
        assert_eq!(
            decode(encode(Done::Ends {
                within: WITHIN,
                cut: false
            })),
            Done::Unknown
        );
    }

    #[test]
    fn a_long_slack_and_many_states_of_one_exact_part_are_kept_in_order() {
        let s = Seen::default();
        let long: Vec<i64> = (0..5000).collect();
        let mut f = Form::new(0);
        for &v in &long {
            f.more_is_worse(v);
        }
        let k = f.key();
        let at = s.insert(k.clone());
        assert_eq!(s.find(&k, 10), Some(None));
        let mut less = k.clone();
        less.slack[4999] -= 1;
        assert_eq!(s.find(&less, 10), Some(None), "less slack is covered");
        let mut more = k.clone();
        more.slack[4999] += 1;
        assert_eq!(s.find(&more, 10), None, "more slack is not");
        s.close(at, Done::Ends { within: 3, cut: false });
        // a second state of the same exact part, more slack: found after the first
        s.insert(more.clone());
        assert_eq!(s.find(&more, 10), Some(None));
        assert_eq!(s.find(&k, 10), Some(Some((3, false))), "the first one covers first");
        assert_eq!(s.len(), 2);
        assert!(s.bytes() >= 5000 * 8 * 2, "{}", s.bytes());
    }

    #[test]
    fn threads_adding_states_at_once_each_find_every_one() {
        let s = Seen::default();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let s = s.clone();
                scope.spawn(move || {
                    for i in 0..2_000u64 {
                        let k = key(10, t * 10_000 + i, false, &[1]);
                        assert!(s.find_or_insert(k.clone(), 100).is_ok(), "new");
                        assert_eq!(s.find_or_insert(k, 100), Err(None), "now seen, open");
                    }
                });
            }
        });
        assert_eq!(s.len(), 8_000);
        for t in 0..4u64 {
            for i in (0..2_000u64).step_by(97) {
                assert_eq!(s.find(&key(10, t * 10_000 + i, false, &[0]), 100), Some(None));
            }
        }
    }
}
