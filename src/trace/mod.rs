//! The trace: a typed, versioned event stream, the only thing consumers read.
//!
//! The simulator (`src/sim.rs`) and the live runner produce it; checkers, statistics, plots
//! and reports consume it, streaming where they can. On disk it is JSON Lines: a
//! [`Header`] line, then one [`Event`] per line in non-decreasing `t` (nanoseconds on the
//! reference timeline: virtual time, or in live mode the destination's clock).
//!
//! The trace hash ([`TraceHash`]) fingerprints the header and every field of every
//! event; two runs with the same hash produced the same trace, and since the encoding is a
//! pure function of the events, the same `--trace` bytes.
//!
//! The modules: `schema` (what a trace holds), `encode` (its canonical bytes, and the
//! [`Writer`]), `read` (reading it back), `hash` (the trace hash), and [`pipe`] (a producer
//! and its consumers on two threads). Everything a producer or consumer needs is re-exported
//! here.

mod encode;
pub mod event;
pub mod handoff;
mod hash;
pub mod pipe;
mod read;
mod schema;

pub use encode::{Writer, encode_event, encode_line};
pub use event::{Event, Field, FieldValue, Kind, PidValue, Val, Walk};
pub use hash::TraceHash;
pub use read::{ReadError, read};
pub use schema::*;

/// A consumer of a trace.
///
/// Every event can come through [`Sink::event`]. The kinds a fetch always makes (`op_sent`,
/// `grant`, `reply`, `fetch_start`, `arrival`, `fetch_end`, six of a run's every six or seven
/// events) also have a method of their own, with its fields as arguments, which producers call:
/// by default each builds the event and hands it to `event`. A sink that stores events
/// overrides them to build each one in place. (Built on the caller's stack and copied whole
/// out of it, an event is read back by wide loads the moment after narrower stores wrote it;
/// a load spanning several stores waits for them to reach the cache, and that wait was
/// four-fifths of the pipe's per-event time.) A sink that looks at events overrides them
/// only to save a `match`: each must do exactly what `event` does with that event.
pub trait Sink {
    /// The header, once, before any event.
    fn header(&mut self, _h: &Header) {}
    /// One event, in trace order.
    fn event(&mut self, ev: &Event);
    /// For an explorer's pruning ([`crate::choice`]): a fingerprint of everything this sink
    /// keeps that what it reports at the end can depend on, so that two runs whose worlds and
    /// sinks have the same fingerprints report alike from here on. `None` (the default): it
    /// cannot say, and a run into it is never pruned.
    fn state(&self) -> Option<u64> {
        None
    }
    /// For an explorer's pruning: this sink's part of a state's form ([`crate::form::Form`]),
    /// for a sink that can say more than [`Sink::state`] (instants relative to now, slack its
    /// report is monotone in). `false`: it cannot say (never pruned). The default adds
    /// [`Sink::state`] as an absolute part: it meets states at its own instant only.
    fn form(&self, f: &mut crate::form::Form) -> bool {
        match self.state() {
            Some(s) => {
                f.word(s);
                f.absolute();
                true
            }
            None => false,
        }
    }
    // `op_sent`, `grant`, `reply`, `fetch_start`, `arrival`, `fetch_end`: the kinds marked
    // `hot` in `src/trace/event.rs`, each a method with its fields as arguments.
    event::with_events!(crate::trace::event::own_methods[[event]]);
}

/// Fans one stream out to several sinks.
#[derive(Default)]
pub struct Tee<'a> {
    sinks: Vec<&'a mut dyn Sink>,
}

impl std::fmt::Debug for Tee<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tee").field("sinks", &self.sinks.len()).finish()
    }
}

impl<'a> Tee<'a> {
    /// An empty fan-out.
    pub fn new() -> Self {
        Tee { sinks: Vec::new() }
    }
    /// Add a sink.
    pub fn push(&mut self, s: &'a mut dyn Sink) {
        self.sinks.push(s);
    }
}

impl Sink for Tee<'_> {
    fn header(&mut self, h: &Header) {
        for s in &mut self.sinks {
            s.header(h);
        }
    }
    fn event(&mut self, ev: &Event) {
        for s in &mut self.sinks {
            s.event(ev);
        }
    }
}

/// Collects events in memory (tests and small runs).
#[derive(Default, Debug)]
pub struct Collect {
    /// The header, once seen.
    pub header: Option<Header>,
    /// Every event.
    pub events: Vec<Event>,
}

impl Sink for Collect {
    fn header(&mut self, h: &Header) {
        self.header = Some(h.clone());
    }
    fn event(&mut self, ev: &Event) {
        self.events.push(*ev);
    }
}
