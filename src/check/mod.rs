//! Checkers: properties over a trace. Each reads only the event stream (streaming), and
//! returns pass or fail plus a witness (the first violating window or event, with times in
//! seconds and process ids), never a panic.
//!
//! | verdict | property | applies when |
//! |---------|----------|--------------|
//! | `ceiling`, `slot_ceiling` | [`ceiling`]: arrivals / granted slots conform to the rate | always |
//! | `backoff_coherence` | [`backoff`]: one multiplier schedule for the fleet, slots spaced by it | grants or multiplier changes |
//! | `self_heal` | [`self_heal`]: the pace resumes within one interval after a kill | a crash |
//! | `degradation` | [`degradation`]: within the rate and not zero while the store is out | an outage or partition window |
//! | `liveness` | [`liveness`]: throughput reaches the effective rate under demand | pace backends, rate/concurrency locks |
//! | `mutual_exclusion` | [`mutual_exclusion`]: at most K critical sections | lock events |
//! | `fairness` | [`fairness`]: Jain's index (reported, always passes) | always |
//!
//! Checkers are configured from the header: the rate, the burst, the multiplier cap, and the
//! typed part of `backend_detail` ([`crate::trace::Detail`]: the backend's facts and the
//! scenario settings; each field says what its absence means). Each checker's docs say which
//! fields it reads; none reads the backend's opaque options.

pub mod backoff;
pub mod ceiling;
pub mod common;
pub mod degradation;
pub mod fairness;
pub mod liveness;
pub mod mutual_exclusion;
pub mod self_heal;

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
    /// The verdicts, after the last event; empty when the property does not apply to the trace.
    fn verdicts(&mut self) -> Vec<Verdict>;
}

/// Every checker, run together in one pass; only those that apply to the trace report.
#[derive(Debug, Default)]
pub struct Suite {
    ceiling: Option<ceiling::Ceiling>,
    others: Option<Others>,
}

#[derive(Debug)]
struct Others {
    backoff: backoff::BackoffCoherence,
    self_heal: self_heal::SelfHeal,
    degradation: degradation::Degradation,
    liveness: liveness::Liveness,
    mutual_exclusion: mutual_exclusion::MutualExclusion,
    fairness: fairness::Fairness,
}

impl Others {
    fn all(&mut self) -> [&mut dyn Checker; 6] {
        [
            &mut self.backoff,
            &mut self.self_heal,
            &mut self.degradation,
            &mut self.liveness,
            &mut self.mutual_exclusion,
            &mut self.fairness,
        ]
    }
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

    /// All verdicts, in a fixed order: `ceiling`, `slot_ceiling`, `backoff_coherence`,
    /// `self_heal`, `degradation`, `liveness`, `mutual_exclusion`, `fairness`.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let mut v = Vec::new();
        if let Some(c) = &mut self.ceiling {
            v.extend(c.verdicts());
        }
        if let Some(o) = &mut self.others {
            for c in o.all() {
                v.extend(c.verdicts());
            }
        }
        v
    }
}

impl Sink for Suite {
    fn header(&mut self, h: &Header) {
        self.ceiling = Some(ceiling::Ceiling::new(h));
        self.others = Some(Others {
            backoff: backoff::BackoffCoherence::new(h),
            self_heal: self_heal::SelfHeal::new(h),
            degradation: degradation::Degradation::new(h),
            liveness: liveness::Liveness::new(h),
            mutual_exclusion: mutual_exclusion::MutualExclusion::new(h),
            fairness: fairness::Fairness::new(h),
        });
    }
    fn event(&mut self, ev: &Event) {
        if let Some(c) = &mut self.ceiling {
            c.event(ev);
        }
        if let Some(o) = &mut self.others {
            for c in o.all() {
                c.event(ev);
            }
        }
    }
}
