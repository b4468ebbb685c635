//! What consumes a trace: [`Sink`], and the dispatch of an event to a sink's own method of its
//! kind ([`Event::to_own_method`]). Below the trace's module file (which re-exports it), beside
//! the events it takes: it names them, they do not name it.

use super::event::{Event, with_events};
use super::schema::*;

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
    /// For an explorer that branches from a saved world rather than replaying a run's first
    /// decisions: a copy of what this sink keeps now, to go back to ([`Sink::resume`]). `None`
    /// (the default): it cannot say, and every run is replayed from its start.
    fn save(&self) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }
    /// Go back to what [`Sink::save`] copied (a later run resumes from the saved world).
    fn resume(&mut self, _saved: &(dyn std::any::Any + Send)) {}
    // `op_sent`, `grant`, `reply`, `fetch_start`, `arrival`, `fetch_end`: the kinds marked
    // `hot` in `src/trace/event.rs`, each a method with its fields as arguments.
    with_events!(crate::trace::event::own_methods[[event]]);
}

/// The arm of [`Event::to_own_method`]: a hot kind's call, else `false`.
macro_rules! own_method_call {
    ($s:ident; ; $name:ident; $($f:ident),*) => {
        false
    };
    ($s:ident; hot; $name:ident; $($f:ident),*) => {{
        $s.$name($($f),*);
        true
    }};
}

/// [`Event::to_own_method`], from the events' table: `with_events!(own_dispatch [])`.
macro_rules! own_dispatch {
    ([] $(
        $(#[doc = $vdoc:literal])*
        $name:ident $V:ident = $tag:literal $($hot:ident)?, by $by:literal {
            $( $(#[doc = $fdoc:literal])* $(#[serde($($sa:tt)*)])? $f:ident : $ty:ty ),* $(,)?
        }
    ),* $(,)?) => {
        impl Event {
            /// Hands an event of a kind that has its own [`Sink`] method (`op_sent`, `grant`,
            /// `reply`, `fetch_start`, `arrival`, `fetch_end`) to that method, with its fields
            /// as arguments; `false` for any other kind.
            #[inline(always)]
            #[allow(unused_variables)]
            pub fn to_own_method<S: Sink + ?Sized>(&self, s: &mut S) -> bool {
                match *self {
                    $( Event::$V { $($f),* } => own_method_call!(s; $($hot)?; $name; $($f),*), )*
                }
            }
        }
    };
}

with_events!(own_dispatch []);
