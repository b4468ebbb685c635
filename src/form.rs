//! What an explorer compares of a state, and the states it has seen.
//!
//! A depth-first explorer ([`crate::choice`], `crate::explore`) stops a run at a state an
//! earlier run reached, trusting that the two go on alike. A state's [`Form`] says what of it
//! matters to that trust, in three parts:
//!
//! - the **exact part**, a fingerprint: two states go on alike only if theirs are equal;
//! - **instants**, relative to now: a world and checkers that read no absolute time go on alike
//!   shifted in time, so a state is met again at another instant. Any part that is absolute
//!   (a clock that drifts, a fault at a fixed instant ahead, a checker that cannot say) makes
//!   the state [`Form::absolute`]: then only a state at the same instant meets it;
//! - **slack**, numbers each verdict is monotone in ([`Form::more_is_worse`]): whatever breaks
//!   from a state with less slack breaks from one with more, given the same events to come
//!   (more arrivals late in a window, more time waited, fewer fetches started). A seen state
//!   *covers* a new one when their exact parts are equal and it has at least as much in every
//!   coordinate; the new one's violations would have been found from the seen one, since the
//!   search stops at the first.
//!
//! A seen state met at another instant covers only once its every continuation was explored
//! (the explorer closes it: [`Seen::close`]), and only when none of them reached the run's
//! end by the scenario's duration, so that the shifted continuations end as they did, before
//! it ([`Seen::find`]). Nothing here iterates a hash map in an order that matters: each
//! fingerprint's states are kept in the order they were seen.

mod hash;
pub mod plant;
pub use hash::{Bits, Floats, Fold, WIDTH, collision_odds, fingerprint, fingerprint_bits};

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A state as an explorer compares it ([`Form`], finished): its exact part (with now folded
/// in when absolute), its instant, and its slack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The exact part's fingerprint (the slack's length in it).
    pub exact: u64,
    /// The instant (virtual ns) it was reached.
    pub now: u64,
    /// Whether it meets states at other instants (nothing absolute in it).
    pub shifts: bool,
    /// The slack, each coordinate: more is worse.
    pub slack: Box<[i64]>,
}

/// A state's form as it is built: the world and every checker add their parts.
#[derive(Clone, Debug)]
pub struct Form {
    now: u64,
    exact: u64,
    absolute: bool,
    slack: Vec<i64>,
}

impl Form {
    /// An empty form of a state at `now` (virtual ns).
    pub fn new(now: u64) -> Form {
        Form {
            now,
            exact: 0x5EED,
            absolute: false,
            slack: Vec::new(),
        }
    }

    /// The instant the state is at.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Add a word to the exact part (a value's fingerprint: [`fingerprint`]).
    #[inline]
    pub fn word(&mut self, w: u64) {
        // (a multiply-xorshift step: order matters, and every bit of `w` reaches every bit)
        let z = (self.exact ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.exact = (z ^ (z >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (z >> 32);
    }

    /// Add an instant (virtual ns, or a reading of a clock that runs at virtual time's pace) to
    /// the exact part, as how far it lies from now.
    #[inline]
    pub fn instant(&mut self, t: u64) {
        self.word(t.wrapping_sub(self.now));
    }

    /// Add a value declared exact to the exact part, by its fingerprint ([`fingerprint`]:
    /// hashed, never formatted).
    #[inline]
    pub fn exact<T: std::hash::Hash + ?Sized>(&mut self, v: &T) {
        self.word(fingerprint(v));
    }

    /// An instant that matters only while ahead of now (a theoretical arrival time, a lock's
    /// expiry, a slot): any past one reads alike.
    #[inline]
    pub fn ahead(&mut self, t: u64) {
        self.word(t.saturating_sub(self.now));
    }

    /// The state depends on absolute time: it meets states at its own instant only.
    pub fn absolute(&mut self) {
        self.absolute = true;
    }

    /// A slack coordinate: any verdict that breaks with a smaller `v` breaks with this one.
    #[inline]
    pub fn more_is_worse(&mut self, v: i64) {
        self.slack.push(v);
    }

    /// A slack coordinate: any verdict that breaks with a larger `v` breaks with this one.
    #[inline]
    pub fn less_is_worse(&mut self, v: i64) {
        self.slack.push(v.saturating_neg());
    }

    /// The finished key.
    pub fn key(mut self) -> Key {
        self.word(self.slack.len() as u64);
        if self.absolute {
            self.word(0xAB5 ^ self.now);
        }
        Key {
            exact: self.exact,
            now: self.now,
            shifts: !self.absolute,
            slack: self.slack.into_boxed_slice(),
        }
    }
}

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

#[derive(Clone, Debug)]
struct Entry {
    now: u64,
    shifts: bool,
    slack: Box<[i64]>,
    done: Done,
}

/// Where a run that stopped at a seen state would have ended: `Some((end, cut))`, or `None`
/// when not known.
pub type Stop = Option<(u64, bool)>;

/// The states an explorer has seen: for each exact part, the states with it in the order
/// seen (a fixed hasher: nothing depends on a random seed; never iterated).
#[derive(Clone, Debug, Default)]
pub struct Seen {
    map: HashMap<u64, Vec<Entry>, BuildHasherDefault<std::collections::hash_map::DefaultHasher>>,
    len: u64,
    // the bytes the entries' lists and slack take on the heap (the table's own: [`Seen::bytes`])
    heap: u64,
}

impl Seen {
    /// States seen.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// None seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory the seen states take, bytes, on the high side: the table (its buckets, and
    /// as much again for the copy a growing table makes) and each state's list and slack on
    /// the heap, allocator rounding included. (About 220 B a state measured at 43 million.)
    pub fn bytes(&self) -> u64 {
        let slot = (std::mem::size_of::<(u64, Vec<Entry>)>() + 1) as u64;
        // the buckets: the capacity at a load of 7/8, rounded up to a power of two
        let buckets = (self.map.capacity() as u64 * 8 / 7 + 1).next_power_of_two();
        buckets * slot * 3 / 2 + self.heap
    }

    /// A seen state that covers `k` (see the module's docs), if any, and where a run stopped
    /// at `k` would have ended. `limit`: the scenario's duration (virtual ns).
    pub fn find(&self, k: &Key, limit: u64) -> Option<Stop> {
        let list = self.map.get(&k.exact)?;
        for e in list {
            let covers = e.slack.len() == k.slack.len()
                && if plant::planted(plant::Plant::SlackReversed) {
                    e.slack.iter().zip(&k.slack).all(|(a, b)| a <= b)
                } else {
                    e.slack.iter().zip(&k.slack).all(|(a, b)| a >= b)
                };
            if !covers {
                continue;
            }
            if e.now == k.now {
                return Some(match e.done {
                    Done::Ends { within, cut } => Some((k.now + within, cut)),
                    _ => None,
                });
            }
            if let Done::Ends { within, cut: false } = e.done
                && e.shifts
                && k.shifts
                && k.now.saturating_add(within) < limit
            {
                return Some(Some((k.now + within, false)));
            }
        }
        None
    }

    /// Add `k` (not covered: [`Seen::find`]); its handle for [`Seen::close`].
    pub fn insert(&mut self, k: Key) -> (u64, u32) {
        // (one state per exact part is the rule: room for one, not the four a first push makes;
        // a list grows by doubling, each allocation counted as the allocator rounds it: to 16
        // bytes, with 16 of its own)
        let alloc = |n: usize| (n as u64).div_ceil(16) * 16 + 16;
        let size = std::mem::size_of::<Entry>();
        let list = self.map.entry(k.exact).or_default();
        if list.len() == list.capacity() {
            let before = list.capacity();
            list.reserve_exact(before.max(1));
            self.heap += alloc(list.capacity() * size) - if before == 0 { 0 } else { alloc(before * size) };
        }
        self.heap += alloc(k.slack.len() * 8);
        list.push(Entry {
            now: k.now,
            shifts: k.shifts,
            slack: k.slack,
            done: Done::Open,
        });
        self.len += 1;
        (k.exact, (list.len() - 1) as u32)
    }

    /// Every continuation of the state `at` ([`Seen::insert`]) was explored, ending so.
    pub fn close(&mut self, at: (u64, u32), done: Done) {
        if let Some(e) = self.map.get_mut(&at.0).and_then(|l| l.get_mut(at.1 as usize)) {
            e.done = done;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut s = Seen::default();
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
        let mut s = Seen::default();
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
        let mut s = Seen::default();
        let at = s.insert(key(10, 5, true, &[]));
        s.close(at, Done::Ends { within: 20, cut: false });
        assert_eq!(
            s.find(&key(40, 5, true, &[]), 100),
            None,
            "absolute: its own instant only"
        );
        assert_eq!(s.find(&key(10, 5, true, &[]), 100), Some(Some((30, false))));
    }
}
