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
//! The modules: `schema` (what a trace holds), `event` (each event, described once), `sink`
//! (what consumes a trace: [`Sink`]), `encode` (its canonical bytes, and the writer that streams the hash and the `--trace` file), `read` (reading it back), `hash` (the trace hash), and `pipe` (a producer
//! and its consumers on two threads). Everything a producer or consumer outside pacesim needs is re-exported
//! here.

mod encode;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod event;
// reached by the loom models, not the team API
#[doc(hidden)]
pub mod handoff;
mod hash;
pub(crate) mod pipe;
mod read;
mod schema;
mod sink;

pub(crate) use encode::{Writer, encode_line};
pub(crate) use event::Val;
pub use event::{Event, Kind, Walk};
pub use hash::TraceHash;
pub use read::{ReadError, read};
pub use schema::*;
pub use sink::Sink;

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
