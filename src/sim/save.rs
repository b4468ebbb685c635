//! Branching from a saved world: an explorer's run starts where an earlier run, which made the
//! same first decisions, saved its world, rather than replaying those decisions from the start
//! (of the events a search handled by replaying, 97% and more were a prefix's again:
//! docs/performance.md).
//!
//! A steered run saves its world between two events each time it made a decision
//! ([`Saves`]): the world's every moving part ([`Sim`]'s owned fields), what its run loop keeps,
//! what its sink keeps ([`Sink::save`]: every checker) and where its decisions stand
//! ([`crate::choice::Mark`]). The next run, whose prefix begins with the decisions a saved world
//! had made, takes the deepest such world and goes on from it; the saved worlds deeper than
//! where its prefix turns off are dropped (a depth-first walk never comes back to them). A
//! resumed run is the replayed run from that event on: the same events in the same order, the
//! same decisions, the same forms (`tests/suite/explore.rs` compares whole searches both ways).

use super::world::{Ev, Sim};
use crate::backend::Backend;
use crate::choice::{Mark, Source};
use crate::destination::Destination;
use crate::engine::Engine;
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::store::Store;
use crate::task::Tasks;
use crate::time::Instant;
use crate::trace::Sink;
use crate::worker::{Process, Sections};

/// What the run loop keeps between two events (saved with an explorer's world).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Looped {
    pub(super) last: Instant,
    pub(super) same: u64,
    pub(super) peak: u64,
    pub(super) work: u64,
}

/// A steered run's world, saved between two events.
pub(crate) struct Saved<B: Backend> {
    engine: Engine<Ev<B::Op, B::Reply>>,
    procs: Vec<Process<B::Process>>,
    store: Store<B::Op>,
    store_side: B::Store,
    dest: Destination,
    fault_rng: Rng,
    sections: Sections,
    active: u32,
    arrivals: Vec<Rng>,
    lock_free: Option<(Instant, u64)>,
    tasks: Option<Tasks>,
    to_store: u32,
    pub(super) looped: Looped,
    sink: Box<dyn std::any::Any + Send>,
    mark: Mark,
}

/// The worlds saved along the run a depth-first explorer walked last, shallowest first.
pub(crate) struct Saves<B: Backend> {
    stack: Vec<Saved<B>>,
    // a sink that cannot be saved: nothing is
    off: bool,
}

impl<B: Backend> Default for Saves<B> {
    fn default() -> Self {
        Saves {
            stack: Vec::new(),
            off: false,
        }
    }
}

impl<B: Backend> Saves<B> {
    /// Decisions made by the deepest world saved (0 with none).
    pub(super) fn depth(&self) -> usize {
        self.stack.last().map_or(0, |s| s.mark.len())
    }

    /// Keep `saved`, or stop saving when the sink cannot be saved (`None`).
    pub(super) fn keep(&mut self, saved: Option<Saved<B>>) {
        match saved {
            Some(s) => self.stack.push(s),
            None => self.off = true,
        }
    }

    /// Still saving?
    pub(super) fn on(&self) -> bool {
        !self.off
    }

    /// The deepest world saved that the run `src` steers will pass through (its prefix begins
    /// with that world's decisions), the deeper ones dropped.
    pub(super) fn deepest_for(&mut self, src: &Source) -> Option<&Saved<B>> {
        while let Some(s) = self.stack.last() {
            if src.agrees(&s.mark) {
                break;
            }
            self.stack.pop();
        }
        self.stack.last()
    }
}

impl<'a, B: Backend> Sim<'a, B> {
    /// The world as it stands between two events, with what the run loop keeps (`looped`), the
    /// sink's copy and the source's mark; `None` when the sink cannot be saved.
    pub(super) fn save(&self, looped: Looped, src: &Source) -> Option<Saved<B>> {
        let sink = self.out.save()?;
        // (every field named: one added later is saved here, or said why not, or the build fails)
        let Sim {
            sc: _,      // the same for every run of an exploration
            out: _,     // saved above
            backend: _, // built again for each run from the same options
            sharing: _, // likewise
            engine,
            procs,
            store,
            store_side,
            dest,
            fault_rng,
            sections,
            active,
            arrivals,
            timers: _, // empty between turns
            hop: _,    // `None` between turns
            lock_free,
            tasks,
            source: _, // each run's own; where its decisions stand is `mark`
            to_store,
        } = self;
        Some(Saved {
            engine: engine.clone(),
            procs: procs.clone(),
            store: store.clone(),
            store_side: store_side.clone(),
            dest: dest.clone(),
            fault_rng: fault_rng.clone(),
            sections: sections.clone(),
            active: *active,
            arrivals: arrivals.clone(),
            lock_free: *lock_free,
            tasks: tasks.clone(),
            to_store: *to_store,
            looped,
            sink,
            mark: src.mark(),
        })
    }

    /// The world `saved` holds, again, for a run of `sc` steered by `source` (which agrees with
    /// its decisions), its trace going on into `out` (resumed to the saved sink).
    pub(super) fn restored(
        sc: &'a Scenario,
        backend: B,
        out: &'a mut dyn Sink,
        source: Source,
        saved: &Saved<B>,
    ) -> Sim<'a, B> {
        out.resume(&*saved.sink);
        source.resume(&saved.mark);
        Sim {
            sc,
            out,
            sharing: Sim::sharing(sc, &backend),
            backend,
            engine: saved.engine.clone(),
            procs: saved.procs.clone(),
            store: saved.store.clone(),
            store_side: saved.store_side.clone(),
            dest: saved.dest.clone(),
            fault_rng: saved.fault_rng.clone(),
            sections: saved.sections.clone(),
            active: saved.active,
            arrivals: saved.arrivals.clone(),
            timers: Vec::new(),
            hop: None,
            lock_free: saved.lock_free,
            tasks: saved.tasks.clone(),
            source: Some(source),
            to_store: saved.to_store,
        }
    }
}
