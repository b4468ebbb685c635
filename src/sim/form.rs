//! The explorer's form of the world ([`crate::form`]): what a steered run hands its explorer
//! to tell a state it reached before, so that the run can stop there.

use super::world::Sim;
use crate::backend::{Backend, StoreSide};
use crate::rng;

impl<B: Backend> Sim<'_, B> {
    /// An explorer's form of the state now ([`crate::form`]): what the sink keeps
    /// ([`crate::trace::Sink::form`]: what every checker's verdict depends on), the kills the
    /// explorer may still fire (more is worse: a state with a kill left has every continuation
    /// of one without), and the world ([`Sim::world_form`]). `None` when the sink cannot say.
    #[cold]
    #[inline(never)]
    pub(super) fn form(&self, src: &crate::choice::Source) -> Option<crate::form::Key> {
        // the form with the processes named by `labels` ([`crate::form::Form::relabeled`])
        let build = |labels: Vec<u32>| {
            let mut f = crate::form::Form::relabeled(self.engine.now().0, labels);
            if !self.out.form(&mut f) {
                return None;
            }
            f.more_is_worse(i64::from(src.kills_left()));
            if !crate::form::plant::planted(crate::form::plant::Plant::WorldLeftOut) {
                self.world_form(&mut f);
            }
            Some(f)
        };
        let mut f = build(if src.symmetry() { self.labels() } else { Vec::new() })?;
        if f.wrote_raw_pids() {
            // (a part keeps process ids it cannot rename: the state is formed with ids)
            f = build(Vec::new())?;
        }
        let key = f.key();
        #[cfg(test)]
        crate::form::plant::keyed(&key);
        Some(key)
    }

    /// Symmetry reduction: each process's label, its place in a canonical order of the
    /// processes. Each is signed by its own form with every process named alike (its
    /// threads, clocks, phase and backend side, not which process it is); the processes are
    /// ordered by signature, ties by pid. Two states that differ only in which process is
    /// which (every part renaming the ids it keeps, [`crate::form::Form::pid`]) then give each
    /// process the same label and form alike; any order is sound, a tie only merges less.
    fn labels(&self) -> Vec<u32> {
        let now = self.engine.now();
        let n = self.procs.len();
        let mut signed: Vec<(u64, u32)> = (self.procs.iter().enumerate())
            .map(|(pid, p)| {
                let mut f = crate::form::Form::relabeled(now.0, vec![0; n]);
                p.form(&mut f, now);
                (f.exact_so_far(), pid as u32)
            })
            .collect();
        signed.sort_unstable();
        let mut labels = vec![0; n];
        for (label, &(_, pid)) in signed.iter().enumerate() {
            labels[pid as usize] = label as u32;
        }
        labels
    }

    /// The world's part of an explorer's form: each process (its threads, clocks, streams,
    /// and its backend side; a dead one by what a restart reads), the store and its queue, the
    /// backend's store side, the destination, the critical sections each process is in, and
    /// every pending event with how far ahead it is due. Two worlds with the same form go on
    /// alike. Instants are relative to now where every part says how (a backend's sides by
    /// their forms, its operations and replies holding none: `StoreSide::TIMELESS_MESSAGES`);
    /// open-loop arrivals and broker tasks keep theirs as they are, and make it absolute.
    fn world_form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        // (every field named: one added later is fingerprinted, or said here why not, or the
        // build fails)
        let Sim {
            sc: _,      // the scenario: the same for every run of an exploration
            out: _,     // the sink: its part is its own (`Sink::form`)
            backend: _, // the backend's configuration: the same for every run
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
            timers: _, // empty between turns (filled and drained within one)
            hop: _,    // `None` between turns
            lock_free,
            tasks,
            source: _, // the explorer's own: its state is the choices, not the world's
            to_store,
        } = self;
        let now = engine.now();
        let mut pending = 0u64;
        // (a sum: the same events pending in another order of scheduling are the same)
        let relabels = f.relabels();
        engine.for_each_pending(|at, e| {
            let due = if crate::form::plant::planted(crate::form::plant::Plant::PendingDue) {
                0
            } else {
                at.0 - now.0
            };
            let e = if relabels {
                fingerprint(&(due, e.renamed(|pid| f.pid(pid))))
            } else {
                fingerprint(&(due, e))
            };
            pending = pending.wrapping_add(rng::mix64(e));
        });
        f.word(pending);
        f.word(fingerprint(&lock_free.map(|(at, _)| at.0 - now.0)));
        if relabels {
            // (in the order of their names)
            let mut named: Vec<(u32, &crate::worker::Process<B::Process>)> = (procs.iter().enumerate())
                .map(|(pid, p)| (f.pid(pid as u32), p))
                .collect();
            named.sort_unstable_by_key(|&(label, _)| label);
            for (_, p) in named {
                p.form(f, now);
            }
            if !<B::Store as StoreSide>::SYMMETRIC || !<B::Process as crate::backend::ProcessSide>::SYMMETRIC {
                f.raw_pids();
            }
            if self.sc.tells_processes_apart().is_some() {
                f.raw_pids();
            }
        } else {
            for p in procs {
                p.form(f, now);
            }
        }
        store.form(f, now);
        store_side.form(f, store.clock.read(now));
        dest.form(f, now);
        f.word(fingerprint(&(active, fault_rng, to_store)));
        sections.form(f);
        if relabels {
            // (each process's arrival stream is drawn in open loop only, formed raw above)
            f.word(fingerprint(tasks));
        } else {
            f.word(fingerprint(&(arrivals, tasks)));
        }
        if !<B::Store as StoreSide>::TIMELESS_MESSAGES || self.sc.processes.arrival_rate.is_some() || tasks.is_some() {
            f.absolute();
        }
    }
}
