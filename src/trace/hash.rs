//! The trace hash: a 64-bit fingerprint of a trace's *content*.
//!
//! Every field of every event goes in as one or more 64-bit words (a tag per variant first;
//! floats by their bits; an operation as a fixed number; any other named value as its name's
//! bytes, length-prefixed, as when those fields were strings; options presence-prefixed), and
//! the header as its canonical JSON line. Two traces hash alike when their headers and event sequences are
//! equal, whatever produced them: the simulator, a live run, or a trace file read back (its
//! JSON round-trips exactly, floats included). Hashing content rather than the JSON bytes
//! keeps the hash off the encoder's cost: a run that writes no file encodes nothing.
//!
//! The mixing step is a folded 64x64->128 multiply (as in wyhash), which is fast and spreads
//! every input bit; it is a fingerprint for "did anything change", not a cryptographic hash.

#[cfg(test)]
use super::{
    BackfillState, CrashPoint, FallbackMode, FaultKind, JobState, MultiplierCause, ReleaseReason, StoreErrorKind,
    UncappedReason,
};
use super::{Event, Header, OpKind, Val, Walk, encode_line};

const SEED: u64 = 0x243f_6a88_85a3_08d3; // pi's fraction
const K: u64 = 0x9e37_79b9_7f4a_7c15; // golden ratio
const ADD: u64 = 0xbf58_476d_1ce4_e5b9;

/// A thread's loop as one word: the pid, and the thread above it (thread 0's word is the pid's,
/// as before threads were traced).
fn loop_word(pid: u32, thread: u16) -> u64 {
    u64::from(pid) | (u64::from(thread) << 32)
}

/// An event's fields into the hash: each as one word, a string as its length and bytes, a
/// process and its loop's thread as one word ([`loop_word`]: a `pid` is held until the next
/// field says whether a `thread` follows).
struct Fold<'a> {
    h: &'a mut TraceHash,
    pid: Option<u32>,
}

impl Fold<'_> {
    #[inline(always)]
    fn flush(&mut self) {
        if let Some(p) = self.pid.take() {
            self.h.word(p.into());
        }
    }
}

impl Walk for Fold<'_> {
    #[inline(always)]
    fn kind(&mut self, _name: &'static str, tag: u64) {
        self.h.word(tag);
    }
    #[inline(always)]
    fn field(&mut self, _name: &'static str, v: Val) {
        if let Val::Thread(n) = v {
            let pid = self.pid.take().unwrap_or(0);
            self.h.word(loop_word(pid, n));
            return;
        }
        self.flush();
        match v {
            Val::Pid(p) => self.pid = Some(p),
            Val::U(w) => self.h.word(w),
            Val::I(w) => self.h.word(w as u64),
            Val::F(x) => self.h.word(x.to_bits()),
            Val::B(b) => self.h.word(b.into()),
            Val::Op(op) => self.h.op(op),
            Val::Name(s) => self.h.str(s),
            Val::MaybePid(p) => self.h.word(p.map_or(0, |p| (1 << 32) | u64::from(p))),
            Val::Thread(_) => unreachable!("taken above"),
        }
    }
    #[inline(always)]
    fn done(&mut self) {
        self.flush();
    }
}

/// A running trace hash.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(SEED)
    }
}

fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

impl TraceHash {
    /// The hash of nothing.
    pub fn new() -> TraceHash {
        TraceHash::default()
    }

    fn word(&mut self, w: u64) {
        // invariant: the state never sticks at a fixed point (the addition moves it off 0)
        self.0 = fold_mul(self.0 ^ w, K).wrapping_add(ADD);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// An operation as its own word (fixed here: declaration order may change).
    fn op(&mut self, op: OpKind) {
        self.word(match op {
            OpKind::Reserve => 0,
            OpKind::Report => 1,
            OpKind::Gcra => 2,
            OpKind::TryLock => 3,
            OpKind::Unlock => 4,
            OpKind::Acquire => 5,
            OpKind::Complete => 6,
        });
    }

    /// Adds the header (its canonical JSON line).
    pub fn header(&mut self, h: &Header) {
        let mut buf = Vec::with_capacity(512);
        encode_line(h, &mut buf);
        self.word(0xfeed);
        self.bytes(&buf);
    }

    /// Adds one event: its tag, then each field ([`Event::visit`]).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event) {
        ev.visit(&mut Fold { h: self, pid: None });
    }

    /// The hash so far (finalised, so a prefix's value says nothing about the whole's).
    pub fn value(&self) -> u64 {
        fold_mul(self.0 ^ (self.0 >> 29), K ^ ADD)
    }

    /// [`value`](Self::value) as 16 hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(evs: &[Event]) -> u64 {
        let mut x = TraceHash::new();
        for e in evs {
            x.event(e);
        }
        x.value()
    }

    /// Every field of every variant reaches the hash: changing any one changes it.
    #[test]
    fn every_field_counts() {
        let base = vec![
            Event::OpSent {
                t: 1,
                pid: 2,
                thread: 0,
                op: OpKind::Reserve,
            },
            Event::Grant {
                t: 1,
                pid: 2,
                thread: 0,
                slot: 3,
                now: 4,
                interval: 5,
                multiplier: 1.0,
            },
            Event::Multiplier {
                t: 1,
                pid: None,
                from: 1.0,
                to: 2.0,
                cause: MultiplierCause::TooManyRequests,
            },
            Event::Fallback {
                t: 1,
                pid: 2,
                enter: true,
                mode: FallbackMode::Divided,
                multiplier: 1.0,
            },
        ];
        let h0 = h(&base);
        let variants: Vec<Vec<Event>> = vec![
            {
                let mut v = base.clone();
                v[0] = Event::OpSent {
                    t: 1,
                    pid: 2,
                    thread: 0,
                    op: OpKind::Report,
                };
                v
            },
            {
                let mut v = base.clone();
                v[1] = Event::Grant {
                    t: 1,
                    pid: 2,
                    thread: 0,
                    slot: 3,
                    now: 4,
                    interval: 5,
                    multiplier: 1.5,
                };
                v
            },
            {
                let mut v = base.clone();
                v[1] = Event::Grant {
                    t: 1,
                    pid: 2,
                    thread: 0,
                    slot: 4,
                    now: 3,
                    interval: 5,
                    multiplier: 1.0,
                };
                v
            },
            {
                let mut v = base.clone();
                v[2] = Event::Multiplier {
                    t: 1,
                    pid: Some(0),
                    from: 1.0,
                    to: 2.0,
                    cause: MultiplierCause::TooManyRequests,
                };
                v
            },
            {
                let mut v = base.clone();
                v[2] = Event::Multiplier {
                    t: 1,
                    pid: None,
                    from: 1.0,
                    to: 2.0,
                    cause: MultiplierCause::Unavailable,
                };
                v
            },
            {
                let mut v = base.clone();
                v[3] = Event::Fallback {
                    t: 1,
                    pid: 2,
                    enter: false,
                    mode: FallbackMode::Divided,
                    multiplier: 1.0,
                };
                v
            },
            {
                let mut v = base.clone();
                v[0] = Event::OpSent {
                    t: 1,
                    pid: 2,
                    thread: 1,
                    op: OpKind::Reserve,
                };
                v
            },
            {
                let mut v = base.clone();
                if let Event::Grant { thread, .. } = &mut v[1] {
                    *thread = 7;
                }
                v
            },
            {
                // which thread's request arrived (the same arrival from thread 0 and thread 1)
                let mut v = base.clone();
                v.push(Event::Arrival {
                    t: 1,
                    pid: 2,
                    thread: 1,
                    status: 200,
                });
                let mut w = base.clone();
                w.push(Event::Arrival {
                    t: 1,
                    pid: 2,
                    thread: 0,
                    status: 200,
                });
                assert_ne!(h(&v), h(&w));
                v
            },
            base[..3].to_vec(),
            base.iter().rev().cloned().collect(),
            {
                let mut v = base.clone();
                v.push(Event::End { t: 0 });
                v
            },
        ];
        for v in variants {
            assert_ne!(h(&v), h0, "{v:?}");
        }
        assert_eq!(h(&base), h0, "deterministic");
    }

    /// A named value hashes as its name did when the field was a string (length-prefixed
    /// bytes), so traces hash as they did before the fields were typed.
    #[test]
    fn named_values_hash_as_their_names() {
        let by_name = |tag: u64, words: &[u64], name: &str, after: &[u64]| {
            let mut x = TraceHash::new();
            x.word(tag);
            for w in words {
                x.word(*w);
            }
            x.str(name);
            for w in after {
                x.word(*w);
            }
            x.value()
        };
        for &error in StoreErrorKind::ALL {
            let ev = Event::StoreError {
                t: 1,
                pid: 2,
                thread: 0,
                error,
            };
            assert_eq!(h(&[ev]), by_name(5, &[1, 2], error.name(), &[]));
        }
        for &cause in MultiplierCause::ALL {
            let ev = Event::Multiplier {
                t: 1,
                pid: Some(2),
                from: 1.0,
                to: 2.0,
                cause,
            };
            let words = [1, (1 << 32) | 2, 1f64.to_bits(), 2f64.to_bits()];
            assert_eq!(h(&[ev]), by_name(9, &words, cause.name(), &[]));
        }
        for &reason in ReleaseReason::ALL {
            let ev = Event::LockReleased {
                t: 1,
                pid: 2,
                lock: 3,
                reason,
            };
            assert_eq!(h(&[ev]), by_name(11, &[1, 2, 3], reason.name(), &[]));
        }
        for &reason in UncappedReason::ALL {
            let ev = Event::Uncapped { t: 1, pid: 2, reason };
            assert_eq!(h(&[ev]), by_name(12, &[1, 2], reason.name(), &[]));
        }
        for &mode in FallbackMode::ALL {
            let ev = Event::Fallback {
                t: 1,
                pid: 2,
                enter: true,
                mode,
                multiplier: 1.0,
            };
            assert_eq!(h(&[ev]), by_name(13, &[1, 2, 1], mode.name(), &[1.0f64.to_bits()]));
        }
        for &state in JobState::ALL {
            let ev = Event::JobEvent {
                t: 1,
                source: 2,
                event: 3,
                pid: Some(4),
                state,
            };
            assert_eq!(h(&[ev]), by_name(18, &[1, 2, 3, (1 << 32) | 4], state.name(), &[]));
        }
        for &state in BackfillState::ALL {
            let ev = Event::Backfill {
                t: 1,
                source: 2,
                state,
                chunks: 3,
            };
            assert_eq!(h(&[ev]), by_name(19, &[1, 2], state.name(), &[3]));
        }
        for &point in CrashPoint::ALL {
            let ev = Event::Crash { t: 1, pid: 2, point };
            assert_eq!(h(&[ev]), by_name(14, &[1, 2], point.name(), &[]));
        }
        for &kind in FaultKind::ALL {
            let ev = Event::Fault {
                t: 1,
                id: 2,
                kind,
                start: false,
            };
            assert_eq!(h(&[ev]), by_name(16, &[1, 2], kind.name(), &[0]));
        }
    }

    /// Every field of the download events reaches the hash: changing any one changes it.
    #[test]
    fn every_job_field_counts() {
        let job = |t, source, event, pid, state| Event::JobEvent {
            t,
            source,
            event,
            pid,
            state,
        };
        let base = job(1, 2, 3, Some(4), JobState::Running);
        let changed = [
            job(9, 2, 3, Some(4), JobState::Running),
            job(1, 9, 3, Some(4), JobState::Running),
            job(1, 2, 9, Some(4), JobState::Running),
            job(1, 2, 3, Some(9), JobState::Running),
            job(1, 2, 3, None, JobState::Running),
            job(1, 2, 3, Some(4), JobState::Stranded),
        ];
        for c in changed {
            assert_ne!(h(std::slice::from_ref(&base)), h(std::slice::from_ref(&c)), "{c:?}");
        }
        let fill = |t, source, state, chunks| Event::Backfill {
            t,
            source,
            state,
            chunks,
        };
        let base = fill(1, 2, BackfillState::Running, 3);
        for c in [
            fill(9, 2, BackfillState::Running, 3),
            fill(1, 9, BackfillState::Running, 3),
            fill(1, 2, BackfillState::Stalled, 3),
            fill(1, 2, BackfillState::Running, 9),
        ] {
            assert_ne!(h(std::slice::from_ref(&base)), h(std::slice::from_ref(&c)), "{c:?}");
        }
    }

    /// Each operation is one fixed word (its declaration-order number when the hash began).
    #[test]
    fn operations_hash_as_fixed_words() {
        for (op, w) in [
            (OpKind::Reserve, 0),
            (OpKind::Report, 1),
            (OpKind::Gcra, 2),
            (OpKind::TryLock, 3),
            (OpKind::Unlock, 4),
            (OpKind::Acquire, 5),
        ] {
            let mut x = TraceHash::new();
            for w in [1, 7, 2, w] {
                x.word(w);
            }
            assert_eq!(
                h(&[Event::OpSent {
                    t: 7,
                    pid: 2,
                    thread: 0,
                    op
                }]),
                x.value(),
                "{op}"
            );
        }
    }

    /// Strings are length-prefixed: moving bytes between two strings changes the hash.
    #[test]
    fn string_boundaries_count() {
        let a = |x: &str, y: &str| {
            let mut h = TraceHash::new();
            h.str(x);
            h.str(y);
            h.value()
        };
        assert_ne!(a("ab", "c"), a("a", "bc"));
        assert_ne!(a("", "abcdefgh"), a("abcdefgh", ""));
    }
}
