//! Checkers: properties over a trace. Each reads only the event stream (streaming), and
//! returns pass or fail plus a witness (the first violating window or event), never a panic.

pub mod ceiling;

use crate::trace::{Event, Header, Sink};
use serde::Serialize;

/// A checker's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Checker name.
    #[serde(skip)]
    pub name: &'static str,
    /// Did the property hold?
    pub pass: bool,
    /// One line: the figure measured, or the witness of the violation.
    pub detail: String,
}

/// A streaming checker.
pub trait Checker: Sink {
    /// The verdicts, after the last event.
    fn verdicts(&mut self) -> Vec<Verdict>;
}

/// Every checker that applies to a trace, run together in one pass.
#[derive(Debug, Default)]
pub struct Suite {
    ceiling: Option<ceiling::Ceiling>,
}

impl Suite {
    /// An empty suite; checkers are configured from the header.
    pub fn new() -> Suite {
        Suite::default()
    }

    /// The ceiling checker's figures (after the run).
    pub fn ceiling(&self) -> Option<&ceiling::Ceiling> {
        self.ceiling.as_ref()
    }

    /// All verdicts, in a fixed order.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let mut v = Vec::new();
        if let Some(c) = &mut self.ceiling {
            v.extend(c.verdicts());
        }
        v
    }
}

impl Sink for Suite {
    fn header(&mut self, h: &Header) {
        self.ceiling = Some(ceiling::Ceiling::new(h));
    }
    fn event(&mut self, ev: &Event) {
        if let Some(c) = &mut self.ceiling {
            c.event(ev);
        }
    }
}
