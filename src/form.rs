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
//! Under symmetry reduction a form also **names** the processes rather than numbering them:
//! each process is written by its place in a canonical order ([`Form::pid`]) and per-process
//! data as a set of (name, data) pairs ([`Form::per_pid`]), so that two states that differ only
//! in which process is which have one form. A part that keeps process ids it cannot rename says
//! so ([`Form::raw_pids`]), and the state is then formed with ids (docs/explore.md, "Speed").
//!
//! A seen state met at another instant covers only once its every continuation was explored
//! (the explorer closes it), and only when none of them reached the run's end by the
//! scenario's duration, so that the shifted continuations end as they did, before it. The
//! seen states are kept in [`seen::Seen`].
//!
//! # Every field declared
//!
//! A part of a state declares each of its fields: exact through its `Hash` (`#[derive(Hash)]`,
//! or [`exact_hash!`](crate::exact_hash) naming every field), and in its `form` by
//! destructuring itself with no `..`, so that a field added later fails to build until it is
//! declared. (`tests/suite/forms.rs`, `every_form_and_hash_declares_every_field`, holds every
//! form and `Hash` of pacesim, its examples and tests to this rule, naming each offender.) A
//! team's store side, its `epoch` added after its form was written:
//!
//! ```compile_fail,E0027
//! use pacesim::backend::{Served, Session, StoreCx, StoreOp, StoreReply, StoreSide};
//! use pacesim::{clock::Reading, form::Form, trace::OpKind};
//!
//! #[derive(Clone, Debug, Hash)]
//! struct Take;
//! impl StoreOp for Take {
//!     fn kind(&self) -> OpKind {
//!         OpKind::Acquire
//!     }
//! }
//! #[derive(Clone, Debug, Hash)]
//! struct Granted(bool);
//! impl StoreReply for Granted {}
//!
//! /// A token bucket: `tokens` left at its last refill `last` (a store clock reading).
//! #[derive(Clone, Debug)]
//! struct Bucket {
//!     tokens: u64,
//!     last: Reading,
//!     epoch: u64,
//! }
//! pacesim::exact_hash!(Bucket { tokens, last, epoch });
//!
//! impl StoreSide for Bucket {
//!     type Op = Take;
//!     type Reply = Granted;
//!     fn serve(&mut self, _: &mut StoreCx, _: Session, _: &Take, now: Reading) -> Served<Granted> {
//!         self.last = now;
//!         self.tokens = self.tokens.saturating_sub(1);
//!         Served::now(Granted(self.tokens > 0))
//!     }
//!     fn form(&self, f: &mut Form, now: Reading) {
//!         let Bucket { tokens, last } = self; // error[E0027]: pattern does not mention field `epoch`
//!         f.exact(tokens);
//!         f.word(now.wrapping_sub(*last) as u64); // its refill, relative to now
//!     }
//! }
//! ```
//!
//! It builds once its form names `epoch` (here exact; or `epoch: _` with the reason it
//! cannot change what the store does next), and then two buckets in different epochs differ:
//!
//! ```
//! # use pacesim::backend::{Served, Session, StoreCx, StoreOp, StoreReply, StoreSide};
//! # use pacesim::{clock::Reading, form::Form, trace::OpKind};
//! # #[derive(Clone, Debug, Hash)]
//! # struct Take;
//! # impl StoreOp for Take {
//! #     fn kind(&self) -> OpKind {
//! #         OpKind::Acquire
//! #     }
//! # }
//! # #[derive(Clone, Debug, Hash)]
//! # struct Granted(bool);
//! # impl StoreReply for Granted {}
//! # #[derive(Clone, Debug)]
//! # struct Bucket {
//! #     tokens: u64,
//! #     last: Reading,
//! #     epoch: u64,
//! # }
//! # pacesim::exact_hash!(Bucket { tokens, last, epoch });
//! impl StoreSide for Bucket {
//!     // (`Op`, `Reply` and `serve` as above)
//! #   type Op = Take;
//! #   type Reply = Granted;
//! #   fn serve(&mut self, _: &mut StoreCx, _: Session, _: &Take, now: Reading) -> Served<Granted> {
//! #       self.last = now;
//! #       self.tokens = self.tokens.saturating_sub(1);
//! #       Served::now(Granted(self.tokens > 0))
//! #   }
//!     fn form(&self, f: &mut Form, now: Reading) {
//!         let Bucket { tokens, last, epoch } = self;
//!         f.exact(&(tokens, epoch));
//!         f.word(now.wrapping_sub(*last) as u64); // its refill, relative to now
//!     }
//! }
//! let key = |b: &Bucket| {
//!     let mut f = Form::new(5);
//!     b.form(&mut f, 5);
//!     f.key()
//! };
//! let (tokens, last) = (3, 2);
//! assert_ne!(key(&Bucket { tokens, last, epoch: 1 }), key(&Bucket { tokens, last, epoch: 2 }));
//! assert_eq!(key(&Bucket { tokens, last, epoch: 1 }), key(&Bucket { tokens, last, epoch: 1 }));
//! ```

mod hash;
pub(crate) mod plant;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod seen;
pub use hash::{Bits, Floats, Fold, WIDTH, collision_odds, fingerprint, fingerprint_bits};

/// A word's bits spread over all 64 (SplitMix64's finalizer): a sum of mixed words is an
/// order-free set's fingerprint ([`Form::per_pid`]).
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

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
    // each process's label, indexed by pid (empty: every process is named by its own pid)
    labels: Vec<u32>,
    // a part wrote a process id of its own, not through `pid` (`raw_pids`)
    raw: bool,
}

impl Form {
    /// An empty form of a state at `now` (virtual ns).
    pub fn new(now: u64) -> Form {
        Form::relabeled(now, Vec::new())
    }

    /// An empty form of a state at `now` whose processes are named by `labels` (indexed by
    /// pid; empty: each by its own pid). An explorer that reduces by symmetry names
    /// interchangeable processes by their place in a canonical order, so that two states
    /// that differ only in which process is which have one form ([`Form::pid`]).
    pub fn relabeled(now: u64, labels: Vec<u32>) -> Form {
        Form {
            now,
            exact: 0x5EED,
            absolute: false,
            slack: Vec::new(),
            labels,
            raw: false,
        }
    }

    /// The name of process `pid` in this form: what a part writes wherever it keeps a
    /// process id (an owner, a holder, a key), never the id itself. It is the id unless the
    /// explorer reduces by symmetry ([`Form::relabeled`]); then a part that keeps data per
    /// process adds it with [`Form::per_pid`] (order-free), or says it cannot with
    /// [`Form::raw_pids`].
    #[inline]
    pub fn pid(&self, pid: u32) -> u32 {
        self.labels.get(pid as usize).copied().unwrap_or(pid)
    }

    /// Whether processes are named by labels other than their ids ([`Form::relabeled`]).
    pub fn relabels(&self) -> bool {
        !self.labels.is_empty()
    }

    /// Data kept per process, each item with the process it belongs to: added as a set of
    /// `(name, item)` ([`Form::pid`]), in no order, so that the same data held by other
    /// processes of the same names forms alike.
    pub fn per_pid<T: std::hash::Hash>(&mut self, items: impl IntoIterator<Item = (u32, T)>) {
        let (mut sum, mut n) = (0u64, 0u64);
        for (pid, item) in items {
            sum = sum.wrapping_add(mix(fingerprint(&(self.pid(pid), item))));
            n += 1;
        }
        self.word(sum);
        self.word(n);
    }

    /// A part keeps process ids it does not write through [`Form::pid`] (a team's part that
    /// predates symmetry, or state too tangled to rename): the state is then formed with each
    /// process named by its own id, which is always sound ([`Form::wrote_raw_pids`]).
    pub fn raw_pids(&mut self) {
        self.raw = true;
    }

    /// Whether a part called [`Form::raw_pids`] while processes were relabeled: the form is
    /// then to be built again with every process under its own id.
    pub fn wrote_raw_pids(&self) -> bool {
        self.raw && self.relabels()
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

    /// The exact part as built so far (a process's signature, when an explorer orders
    /// interchangeable processes).
    pub(crate) fn exact_so_far(&self) -> u64 {
        self.exact
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
