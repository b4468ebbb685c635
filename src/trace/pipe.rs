//! A producer and its consumers on two threads: the trace, in order, between them.
//!
//! Producers make traces and consumers read them, so the trace is a natural place to split a
//! run across two cores: the simulator fills batches of events on one thread while the
//! checkers, figures and hash drain them on the caller's. Events arrive in exactly the order
//! they were produced, so the consumers see the same trace as a single-threaded run and every
//! figure, verdict and hash is identical. Batches are recycled, so memory stays at most a ring of
//! batches (6 MiB) whatever the run's length. They cross through a [`super::handoff::Handoff`],
//! which wakes the consumer only once half its ring waits, not at every batch: a wake is dear
//! (see [`super::handoff::WAKE_AT`]).

use super::handoff::{Handoff, Sender};
use super::{Event, Header, OpKind, Sink};
use std::sync::Mutex;

/// Events per batch: large enough to amortise a slot's lock and the hand-off's atomics, small
/// enough that the batch being filled (48 KiB) stays in the producer's first caches. (How
/// often the consumer is woken is the ring's [`super::handoff::WAKE_AT`]: with a ring of 8,
/// batches of 16,384 had measured as fast as this size with the ring of 128.)
const BATCH: usize = 1024;
/// Empty batches kept for reuse.
const SPARE: usize = super::handoff::SLOTS + 1;

/// A batch's events: the first `len` of a fixed array. (Not a `Vec`: a push onto one may
/// grow it, and the call that would keep every argument of the push's caller alive across it
/// cost each event seven saved registers; an index into an array that is never full at a push
/// can only fail its bounds check, which returns nowhere.)
type Batch = Box<[Event; BATCH]>;

/// A batch of `BATCH` placeholder events, to be overwritten.
fn empty_batch() -> Batch {
    // (built in place: `Box::new` of an array builds it on the stack and copies it)
    vec![Event::End { t: 0 }; BATCH]
        .into_boxed_slice()
        .try_into()
        .expect("BATCH events")
}

enum Msg {
    Header(Box<Header>),
    /// A batch and how many of its events are real.
    Events(Batch, usize),
}

/// The producer's side: a sink that batches events and sends them on.
struct Batcher<'a> {
    tx: Sender<'a, Msg>,
    spare: &'a Mutex<Vec<Batch>>,
    batch: Batch,
    // invariant: below `BATCH` between calls (a batch is sent the moment it fills).
    len: usize,
    // invariant: true once the consumer has gone; later events are dropped.
    closed: bool,
}

impl Batcher<'_> {
    fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        if self.closed {
            self.len = 0;
            return;
        }
        let next = self
            .spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_else(empty_batch);
        let full = std::mem::replace(&mut self.batch, next);
        let len = std::mem::take(&mut self.len);
        self.closed = self.tx.send(Msg::Events(full, len)).is_err();
    }
}

impl Sink for Batcher<'_> {
    fn header(&mut self, h: &Header) {
        self.flush();
        if !self.closed {
            self.closed = self.tx.send(Msg::Header(Box::new(h.clone()))).is_err();
        }
    }
    fn event(&mut self, ev: &Event) {
        self.push(*ev);
    }
    // (the kinds of every fetch, built in place: see the trait's docs)
    super::event::with_events!(crate::trace::event::own_methods [[by_value push]]);
}

impl Batcher<'_> {
    #[inline(always)]
    fn push(&mut self, ev: Event) {
        self.batch[self.len] = ev;
        self.len += 1;
        if self.len == BATCH {
            self.flush();
        }
    }
}

/// The most memory the pipeline's batches hold at once, bytes: the ring full and every spare
/// batch out (a consumer that falls behind on a loaded machine), each batch at its capacity.
pub fn most_in_flight() -> usize {
    (super::handoff::SLOTS + SPARE) * BATCH * std::mem::size_of::<super::Event>()
}

/// Whether this machine has a second core to give a pipeline (asked once). Runs inside a rayon
/// pool (`sweep`, `matrix`, `simulate`) pipeline too: measured, the second thread costs no CPU
/// to speak of and fills the cores while a batch's last runs finish (`pacesim matrix`: 0.34 s
/// against 0.57 s with one thread per run).
pub fn worth_it() -> bool {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) > 1
}

/// Runs `produce` on a new thread with a sink whose events reach `consume` on this thread, in
/// order; returns what `produce` returns. A panic in `produce` propagates.
pub fn pipelined<R: Send>(produce: impl FnOnce(&mut dyn Sink) -> R + Send, consume: &mut dyn Sink) -> R {
    let ring = Handoff::<Msg>::new(crate::pacer::sync::current());
    let spare = Mutex::new(Vec::with_capacity(SPARE));
    std::thread::scope(|s| {
        let producer = std::thread::Builder::new().name("pacesim-producer".into());
        let (ring, spare) = (&ring, &spare);
        let producer = producer.spawn_scoped(s, move || {
            let mut b = Batcher {
                tx: ring.sender(crate::pacer::sync::current()),
                spare,
                batch: empty_batch(),
                len: 0,
                closed: false,
            };
            let r = produce(&mut b);
            b.flush();
            r
        });
        let producer = producer.expect("a thread for the producer");
        // (dropped, also on a consumer's panic, it hangs up: the producer then runs on
        // without waiting for room, and the scope can join it)
        let mut rx = ring.receiver();
        while let Some(msg) = rx.recv() {
            match msg {
                Msg::Header(h) => consume.header(&h),
                Msg::Events(evs, len) => {
                    for e in &evs[..len] {
                        consume.event(e);
                    }
                    if let Ok(mut pool) = spare.lock()
                        && pool.len() < SPARE
                    {
                        pool.push(evs); // recycled unless the pool is full
                    }
                }
            }
        }
        drop(rx);
        match producer.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Collect;

    fn events(n: u64) -> Vec<Event> {
        (0..n)
            .map(|t| match t % 3 {
                0 => Event::FetchStart {
                    t,
                    pid: t as u32,
                    thread: 0,
                },
                1 => Event::Crash {
                    t,
                    pid: 1,
                    point: crate::trace::CrashPoint::ALL[t as usize % crate::trace::CrashPoint::ALL.len()],
                },
                _ => Event::End { t },
            })
            .collect()
    }

    /// The consumer sees the producer's header and events in order, across many batches.
    #[test]
    fn delivers_everything_in_order() {
        let evs = events(3 * BATCH as u64 + 17);
        let mut c = Collect::default();
        let n = pipelined(
            |out| {
                for e in &evs {
                    out.event(e);
                }
                evs.len()
            },
            &mut c,
        );
        assert_eq!(n, evs.len());
        assert_eq!(c.events, evs);
    }

    /// A consumer that panics mid-stream hangs up: the producer, with far more to send than
    /// the ring holds, runs to its end instead of waiting for room, and the panic reaches the
    /// caller (a lost hang-up would hang this test).
    #[test]
    fn a_consumer_panic_does_not_strand_the_producer() {
        struct Fails(usize);
        impl Sink for Fails {
            fn event(&mut self, _: &Event) {
                self.0 += 1;
                assert!(self.0 < 5 * BATCH, "consumer failed");
            }
        }
        let evs = events(40 * BATCH as u64);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pipelined(
                |out| {
                    for e in &evs {
                        out.event(e);
                    }
                },
                &mut Fails(0),
            )
        }));
        let msg = r.expect_err("the consumer's panic propagates");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"consumer failed"));
    }

    /// A panic in the producer reaches the caller.
    #[test]
    #[should_panic(expected = "producer failed")]
    fn producer_panics_propagate() {
        let mut c = Collect::default();
        pipelined(
            |out| {
                out.event(&Event::End { t: 0 });
                panic!("producer failed")
            },
            &mut c,
        );
    }
}
