//! A bounded hand-off of batches from one producer thread to one consumer thread that wakes a
//! sleeping side only when it has enough to do.
//!
//! `crate::trace::pipe` moves a run's trace from the simulator to the checkers in batches.
//! A channel that wakes its receiver at every send costs a system call per batch whenever the
//! consumer is the faster side (it sleeps between batches): thousands a run, measured at about a
//! tenth of the simulator's time in R1-large. Here a sleeping consumer is woken only once
//! [`WAKE_AT`] batches wait (or the producer is done, or must itself wait for room), and a
//! sleeping producer only once half the slots are free again, so each wake buys a run of work.
//!
//! The protocol (`// invariant:` comments below): each side's count shares one atomic word
//! with the other side's "asleep" bit and its own "hung up" bit. A side publishes with a
//! read-modify-write of its word, which returns whether the other side sleeps; a side about to
//! sleep sets its bit with a read-modify-write of the other's word, which returns the count it
//! waits on. Read-modify-writes of one word are totally ordered, so of a publish and a sleep one
//! always sees the other and no wake is lost (and loom, which models `SeqCst` between two words
//! only as acquire/release, checks exactly this). The synchronisation types come from
//! `crate::pacer::sync`, and `tests/loom_handoff.rs` model-checks the hand-off, with a twin
//! that loses a wake.

use crate::pacer::sync::{AtomicU64, Mutex, Ordering, Thread, park};

/// Slots in the ring: 128 batches (6 MiB of events at `crate::trace::pipe`'s batch size).
pub const SLOTS: usize = 128;
/// Batches waiting before a sleeping consumer is woken: half the ring.
///
/// A wake costs far more than its system call: the waker's futex call sends an interrupt to
/// the other core, which in a virtual machine exits to the host, and the woken thread then
/// reads lines still in the waker's cache. On this project's two-vCPU machine, each wake cost
/// the producer about 47 us: R1-large through the pipe with a trivial consumer took 0.325 s
/// with a ring of 8 woken at 4 (about 900 wakes), and 0.287 s with 128 woken at 64 (about 55),
/// against 0.260 s for the simulator alone (medians of 9 alternated runs). The batches waiting
/// (3 MiB) have left the producer's cache for the shared one by the time they are read.
pub const WAKE_AT: u64 = 64;

/// In `head`: the consumer sleeps (or is about to). In `tail`: the producer does.
const ASLEEP: u64 = 1;
/// In `head`: the producer has hung up. In `tail`: the consumer has.
const GONE: u64 = 2;
/// A count's unit in its word (the two bits above are below it).
const ONE: u64 = 4;

/// The shared ring (see the module docs). Make one with [`Handoff::new`], then use it through
/// one [`Sender`] on the producer's thread and one [`Receiver`] on the consumer's.
#[derive(Debug)]
pub struct Handoff<T> {
    // invariant: slot `i % slots.len()` holds item `i` exactly for `taken <= i < sent`.
    slots: Vec<Mutex<Option<T>>>,
    // invariant: `head` is `sent * ONE`, plus `GONE` once the producer has hung up, plus
    // `ASLEEP` while the consumer sleeps or is about to (it looks at `sent` in the same
    // read-modify-write that sets the bit); only the producer adds to `sent`.
    head: AtomicU64,
    // invariant: `tail` is `taken * ONE`, plus `GONE` once the consumer has hung up, plus
    // `ASLEEP` while the producer sleeps or is about to; only the consumer adds to `taken`;
    // `taken <= sent <= taken + slots.len()`.
    tail: AtomicU64,
    // the threads to wake (the consumer's from the start, the producer's from `sender`)
    producer: Mutex<Option<Thread>>,
    consumer: Mutex<Option<Thread>>,
    // `WAKE_AT` (the models try others)
    wake_at: u64,
    // false only in the deliberately broken twin of the models: a side sleeps without
    // looking at the count its bit came with
    recheck: bool,
}

impl<T> Handoff<T> {
    /// An empty ring of [`SLOTS`] whose consumer is thread `consumer`.
    pub fn new(consumer: Thread) -> Self {
        Self::sized(consumer, SLOTS, WAKE_AT)
    }

    /// An empty ring of `slots` (at least 1) that wakes a sleeping consumer once `wake_at`
    /// items wait (clamped to `1..=slots`): for the models.
    pub fn sized(consumer: Thread, slots: usize, wake_at: u64) -> Self {
        let slots = slots.max(1);
        Handoff {
            slots: (0..slots).map(|_| Mutex::new(None)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            producer: Mutex::new(None),
            consumer: Mutex::new(Some(consumer)),
            wake_at: wake_at.clamp(1, slots as u64),
            recheck: true,
        }
    }

    /// Deliberately broken, for the models' red twin: a side about to sleep sets its bit but
    /// does not look at the count that came with it, so a send (or a hang-up) just before the
    /// bit is never seen and the consumer sleeps for good.
    pub fn without_recheck(consumer: Thread, slots: usize, wake_at: u64) -> Self {
        Handoff {
            recheck: false,
            ..Self::sized(consumer, slots, wake_at)
        }
    }

    fn len(&self) -> u64 {
        self.slots.len() as u64
    }

    fn unpark(who: &Mutex<Option<Thread>>) {
        if let Some(t) = &*who.lock().expect("a thread handle") {
            t.unpark();
        }
    }

    /// Sleep on `word` (the other side's) unless, as the bit is set, its count has moved from
    /// `count` or the other side has hung up. (A wake that finds the thread awake makes its
    /// next sleep return at once; every caller loops and looks again.)
    fn sleep_unless_moved(&self, word: &AtomicU64, count: u64) {
        let now = word.fetch_or(ASLEEP, Ordering::SeqCst);
        if !self.recheck || (now / ONE == count && now & GONE == 0) {
            park();
        }
        word.fetch_and(!ASLEEP, Ordering::SeqCst);
    }
}

/// The producer's end: sends batches, hangs up when dropped.
#[derive(Debug)]
pub struct Sender<'a, T> {
    ring: &'a Handoff<T>,
    // the producer's own copy of `sent`
    sent: u64,
}

/// The consumer's end: receives batches in order, hangs up when dropped.
#[derive(Debug)]
pub struct Receiver<'a, T> {
    ring: &'a Handoff<T>,
    // the consumer's own copy of `taken`
    taken: u64,
}

impl<T> Handoff<T> {
    /// The producer's end, for thread `me` (the calling thread).
    pub fn sender(&self, me: Thread) -> Sender<'_, T> {
        *self.producer.lock().expect("a thread handle") = Some(me);
        Sender { ring: self, sent: 0 }
    }

    /// The consumer's end (used on the thread given to [`Handoff::new`]).
    pub fn receiver(&self) -> Receiver<'_, T> {
        Receiver { ring: self, taken: 0 }
    }
}

impl<T> Sender<'_, T> {
    /// Send `item`, waiting while the ring is full; `Err(item)` once the consumer has hung up.
    pub fn send(&mut self, item: T) -> Result<(), T> {
        let r = self.ring;
        let s = self.sent;
        let taken = loop {
            let tail = r.tail.load(Ordering::SeqCst);
            if tail & GONE != 0 {
                return Err(item);
            }
            let taken = tail / ONE;
            if s - taken < r.len() {
                break taken;
            }
            // full: sleep until the consumer takes one (it is awake: the sends that filled the
            // ring woke it)
            r.sleep_unless_moved(&r.tail, taken);
        };
        *r.slots[(s % r.len()) as usize].lock().expect("a slot") = Some(item);
        self.sent = s + 1;
        let head = r.head.fetch_add(ONE, Ordering::SeqCst);
        if head & ASLEEP != 0 && s + 1 - taken >= r.wake_at {
            Handoff::<T>::unpark(&r.consumer);
        }
        Ok(())
    }
}

impl<T> Drop for Sender<'_, T> {
    fn drop(&mut self) {
        if self.ring.head.fetch_or(GONE, Ordering::SeqCst) & ASLEEP != 0 {
            Handoff::<T>::unpark(&self.ring.consumer);
        }
    }
}

impl<T> Receiver<'_, T> {
    /// The next item, waiting for it; `None` once the producer has hung up and every item sent
    /// has been received.
    pub fn recv(&mut self) -> Option<T> {
        let r = self.ring;
        let t = self.taken;
        loop {
            let head = r.head.load(Ordering::SeqCst);
            let sent = head / ONE;
            if sent > t {
                let item = r.slots[(t % r.len()) as usize]
                    .lock()
                    .expect("a slot")
                    .take()
                    .expect("a sent item waits in its slot");
                self.taken = t + 1;
                let tail = r.tail.fetch_add(ONE, Ordering::SeqCst);
                // wake a producer waiting for room once half the ring is free
                if tail & ASLEEP != 0 && sent - (t + 1) <= r.len() / 2 {
                    Handoff::<T>::unpark(&r.producer);
                }
                return Some(item);
            }
            if head & GONE != 0 {
                // (the hang-up came after its last send, in the same word)
                return None;
            }
            r.sleep_unless_moved(&r.head, t);
        }
    }
}

impl<T> Drop for Receiver<'_, T> {
    fn drop(&mut self) {
        if self.ring.tail.fetch_or(GONE, Ordering::SeqCst) & ASLEEP != 0 {
            Handoff::<T>::unpark(&self.ring.producer);
        }
    }
}
