//! loom models of the trace's hand-off between threads ([`pacesim::trace::handoff`]): every
//! interleaving (up to the preemption bound) of a producer sending batches and a consumer
//! receiving them, each side sleeping when it has nothing to do and waking the other only
//! when it must.
//!
//! Run with the pacer's models (`just loom`):
//!
//! ```text
//! cargo test --profile fast-test --features loom --test loom_handoff
//! ```
//!
//! The correct models have a deliberately broken twin under `#[should_panic]`: a side that
//! sleeps without looking at the other's count once more loses a wake, and loom finds the
//! interleaving where the consumer sleeps for good.
#![cfg(feature = "loom")]

use loom::model::Builder;
use loom::sync::Arc;
use loom::thread;
use pacesim::trace::handoff::Handoff;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    // LOOM_MAX_PREEMPTIONS, read by Builder::new, overrides the default bound.
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}

/// Sends `n` items through `ring` on a new thread while this one receives: what arrives.
fn run(ring: Arc<Handoff<u32>>, n: u32) -> Vec<u32> {
    let producer = {
        let ring = ring.clone();
        thread::spawn(move || {
            let mut tx = ring.sender(thread::current());
            for i in 0..n {
                tx.send(i).expect("the consumer is there");
            }
        })
    };
    let mut rx = ring.receiver();
    let got: Vec<u32> = std::iter::from_fn(|| rx.recv()).collect();
    producer.join().expect("the producer ends");
    got
}

/// Every item arrives once, in order, and the producer's hang-up ends the stream: a ring that
/// fills (one slot, two), a consumer woken at once or only when the ring is full.
#[test]
fn every_item_arrives_in_order_and_no_side_sleeps_for_good() {
    for (slots, wake_at) in [(1, 1), (2, 1), (2, 2)] {
        model(move || {
            let ring = Arc::new(Handoff::sized(thread::current(), slots, wake_at));
            assert_eq!(run(ring, 3), vec![0, 1, 2]);
        });
    }
}

/// The consumer hangs up after one item: the producer, waiting for room in a full ring, is
/// woken and told, and ends.
#[test]
fn a_consumer_that_hangs_up_frees_the_producer() {
    model(|| {
        let ring = Arc::new(Handoff::<u32>::sized(thread::current(), 1, 1));
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut tx = ring.sender(thread::current());
                (0..3).filter(|&i| tx.send(i).is_ok()).count()
            })
        };
        let mut rx = ring.receiver();
        assert_eq!(rx.recv(), Some(0));
        drop(rx);
        let sent = producer.join().expect("the producer ends");
        assert!((1..=2).contains(&sent), "sent {sent}");
    });
}

/// Red twin: without the second look, a send and hang-up that land between the consumer's
/// look and its sleep are never seen, and the consumer sleeps for good (loom reports the
/// deadlock). The ring and the consumer's end are never dropped: once loom has stopped the
/// model, their destructors could not run its atomics.
#[test]
#[should_panic(expected = "deadlock")]
fn sleeping_without_a_second_look_loses_the_wake() {
    model(|| {
        let ring: &'static Handoff<u32> = Box::leak(Box::new(Handoff::without_recheck(thread::current(), 2, 1)));
        let producer = thread::spawn(move || {
            let mut tx = ring.sender(thread::current());
            tx.send(0).expect("the consumer is there");
        });
        let mut rx = std::mem::ManuallyDrop::new(ring.receiver());
        assert_eq!(rx.recv(), Some(0));
        assert_eq!(rx.recv(), None);
        producer.join().expect("the producer ends");
    });
}
