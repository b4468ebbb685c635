//! The run loop: pops the engine's events in order and hands each to the world
//! ([`Sim::run`]), until every worker is done or the duration is reached; the progress guard
//! ([`progress_bound`], [`NoProgress`]), and an explorer's steps (the order of operations that
//! reach the store at one instant, its limits, its visited forms), which an ordinary run's loop
//! does not carry at all.

use super::save::{Looped, Saves};
use super::world::{Ev, Sim};
use crate::backend::Backend;
use crate::choice::Source;
use crate::scenario::Scenario;
use crate::time::{Instant, Nanos};
use crate::trace::{Event, Header, Sink};

/// Figures about the run itself (not about the pacer: those come from the trace).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Virtual time when the run ended.
    pub end: Instant,
    /// Engine events processed (a lock release that was never queued, since nobody waited for
    /// it, is not one: see `Sim::hold_lock`).
    pub events: u64,
    /// Store operations served.
    pub store_ops: u64,
    /// The most events handled in a row at one virtual instant (what [`progress_bound`] is
    /// held against).
    pub same_instant_peak: u64,
    /// An explorer's run stopped at a state an earlier run reached ([`crate::choice`]): the
    /// trace stops there, without its `end` event.
    pub pruned: bool,
}

/// A run stopped making progress: virtual time stood still at `at` while `events` engine
/// events were handled in a row (a livelock, e.g. a pacer that keeps answering "retry now").
/// The run is abandoned there; its trace is incomplete and has no `end` event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no progress at t = {}: {events} events without time advancing; looping: {looping}", Nanos(at.0))]
pub struct NoProgress {
    /// The virtual instant time stood still at.
    pub at: Instant,
    /// Events handled in a row at that instant when the run was stopped.
    pub events: u64,
    /// What loops: the kinds of the last events handled there, each with how many and the
    /// processes they belong to, e.g. `store_recv x 86 (processes 0, 1, 2, 3), ...`.
    pub looping: String,
}

/// The most events a run of `sc` may handle in a row at one virtual instant before it is
/// stopped as a livelock ([`NoProgress`]): 2^20, plus 64 for each thread loop, fault, and
/// `[jobs]` source, times the largest burst the run allows, the backend's stated burst
/// (`burst`, its [`crate::backend::Facts`]) or `[checks] burst` (one grant per loop at an
/// instant needs about ten events: its start, operation, reply, fetch, wake). A run that
/// progresses handles a few events per loop at one instant (the busiest shipped scenario
/// stays below 1% of its bound: `tests/suite/livelock.rs`); a run that loops at one instant reaches
/// it within a second or two.
pub fn progress_bound(sc: &Scenario, burst: Option<u64>) -> u64 {
    let loops = u64::from(sc.processes.count) * u64::from(sc.processes.threads.max(1));
    let sources = sc
        .jobs
        .as_ref()
        .map_or(0, |j| u64::from(crate::task::Jobs::new(j).sources));
    let burst = burst.unwrap_or(1).max(1).max(sc.checks.burst.max(1));
    let things = loops.saturating_add(sc.faults.len() as u64).saturating_add(sources);
    (1u64 << 20).saturating_add(things.saturating_mul(64).saturating_mul(burst))
}

/// How many events past the bound are handled (and tallied) to say what loops.
const LOOP_SAMPLE: u64 = 4096;

/// How often (in events, a state's form weighing one per process) a steered run asks its
/// explorer whether to stop ([`crate::choice::Source::halt`]).
const HALT_EVERY: u64 = 1024;

impl<B: Backend> Sim<'_, B> {
    /// Run to completion: until every worker is done, or the duration is reached.
    ///
    /// # Errors
    ///
    /// More than [`progress_bound`] events in a row at one virtual instant: the run is
    /// stopped there ([`NoProgress`]), without its `end` event.
    pub fn run(&mut self) -> Result<Outcome, NoProgress> {
        self.run_from(Looped::default(), None)
    }

    /// [`Sim::run`] from where the loop stood (`looped`: a saved world's), saving the world
    /// into `saves` after each event that made a decision (a steered run's only).
    pub(super) fn run_from(&mut self, looped: Looped, saves: Option<&mut Saves<B>>) -> Result<Outcome, NoProgress> {
        match self.source.clone() {
            None => self.run_loop::<false>(looped, None),
            Some(s) => {
                let _entered = crate::choice::enter(s);
                self.run_loop::<true>(looped, saves)
            }
        }
    }

    /// The run loop; `STEERED` (a run with a choice source) adds the explorer's steps, which
    /// an ordinary run's loop does not carry at all.
    fn run_loop<const STEERED: bool>(
        &mut self,
        looped: Looped,
        mut saves: Option<&mut Saves<B>>,
    ) -> Result<Outcome, NoProgress> {
        let limit = Instant(self.sc.duration.0);
        let bound = progress_bound(self.sc, self.backend.facts().burst);
        let Looped {
            mut last,
            mut same,
            mut peak,
            mut work,
        } = looped;
        // invariant: events handled in a row at `last`; `peak` the most before `last`
        let mut ev = Ev::Tick; // (overwritten by each pop)
        // (steered: `work` is the work since the explorer's limits were last asked, in events)
        let form_weight = u64::from(self.sc.processes.count) * u64::from(self.sc.processes.threads.max(1));
        while self.active > 0 || self.sc.processes.arrival_rate.is_some() || self.tasks.is_some() {
            let Some(t) = self.engine.pop_into(limit, &mut ev) else {
                break;
            };
            // the progress guard: one compare per event, the rest only when time moves
            if t == last {
                same += 1;
                if same > bound {
                    return Err(self.no_progress(t, same, limit, &mut ev));
                }
            } else {
                peak = peak.max(same);
                same = 1;
            }
            last = t;
            if STEERED {
                crate::choice::set_pid(ev.describe().1);
                if matches!(ev, Ev::StoreRecv { .. }) {
                    self.choose_order(t, &mut ev);
                }
            }
            self.turn(t, &ev);
            if STEERED && let Some(src) = &self.source {
                // (a form reads every process: it weighs as many events)
                work += 1 + u64::from(src.would_visit()) * form_weight;
                // the explorer's limits (its time, its memory, a signal) hold inside a run too,
                // asked every so often; and a run at a state an earlier run reached stops: either
                // way here, unjudged (the explorer reads `Source::halted`)
                let halt = work >= HALT_EVERY && {
                    work = 0;
                    src.halt()
                };
                if halt || (src.take_fresh() && self.form(src).is_some_and(|key| !src.visit(key, limit.0))) {
                    return Ok(Outcome {
                        end: t,
                        events: self.engine.processed(),
                        store_ops: self.store.served,
                        same_instant_peak: peak.max(same),
                        pruned: true,
                    });
                }
                // a decision made since the world was last saved: save it (a later run that
                // makes the same decisions goes on from here)
                if let Some(sv) = saves.as_deref_mut()
                    && sv.on()
                    && src.made_len() > sv.depth()
                {
                    let looped = Looped { last, same, peak, work };
                    sv.keep(self.save(looped, src));
                }
            }
        }
        // A release of the lock never queued (nobody waited for it) counts as it would have:
        // popped if due by the limit, else pending. (Only when the loop ran out of events:
        // when the last loop finished first, it was pending, as now, and `end` is `last`.)
        let mut pending = self.engine.pending();
        if let Some((at, _)) = self.lock_free
            && self.active > 0
        {
            if at <= limit {
                last = last.max(at);
            } else {
                pending += 1;
            }
        }
        let end = if pending > 0 && self.active > 0 {
            limit.max(last)
        } else {
            last
        };
        if STEERED && let Some(src) = &self.source {
            // (cut: the duration stopped a run with work left, as `end` says; a run whose
            // processes were all done stops whatever is pending, at any instant alike)
            src.ended(end.0, pending > 0 && self.active > 0);
        }
        self.out.event(&Event::End { t: end.0 });
        Ok(Outcome {
            end,
            events: self.engine.processed(),
            store_ops: self.store.served,
            same_instant_peak: peak.max(same),
            pruned: false,
        })
    }

    /// One turn of the run loop: handle the event popped at `t`.
    #[inline(always)]
    fn turn(&mut self, t: Instant, ev: &Ev<B::Op, B::Reply>) {
        self.handle(ev);
        // A fetch that reaches the destination at the instant it starts (no latency: the
        // default) has its place in the firing order, taken when it started. When nothing
        // pending comes before that place, which is nearly always, it is handled here,
        // exactly as if it had been queued and popped; otherwise queued in its place.
        if let Some((seq, pid, th, inc, platform)) = self.hop.take() {
            if self.engine.next_is(seq) {
                self.dest_recv(pid, th, inc, platform);
            } else {
                self.engine.at_reserved(t, seq, Ev::DestRecv { pid, th, inc, platform });
            }
        }
    }

    /// An explorer's run: `ev`, an operation reaching the store at `t`, and those reaching it
    /// at the same instant right after it (up to the source's width) are candidates; the
    /// source chooses which is served first, and the others go back to their places in the
    /// firing order (each of them is a choice again when popped). Other events due at `t`
    /// touch one process's own state only, and are not reordered (they commute).
    #[cold]
    #[inline(never)]
    fn choose_order(&mut self, t: Instant, ev: &mut Ev<B::Op, B::Reply>) {
        // (nearly always alone at its instant: then there is nothing to order, nor to allocate)
        if !matches!(self.engine.peek_now(), Some(Ev::StoreRecv { .. })) {
            return;
        }
        let Some(src) = self.source.clone() else {
            return;
        };
        let width = src.order_width();
        if width < 2 {
            return;
        }
        let mut cands = vec![(self.engine.current_seq(), ev.clone())];
        while cands.len() < width && matches!(self.engine.peek_now(), Some(Ev::StoreRecv { .. })) {
            let mut next = Ev::Tick;
            if self.engine.pop_into(t, &mut next).is_none() {
                break;
            }
            cands.push((self.engine.current_seq(), next));
        }
        if cands.len() < 2 {
            return;
        }
        let pids: Vec<u32> = cands.iter().map(|(_, e)| e.describe().1.unwrap_or(0)).collect();
        let i = src.order(&pids).unwrap_or(0) as usize;
        let (seq, chosen) = cands.remove(i.min(cands.len() - 1));
        for (s, e) in cands {
            self.engine.at_reserved(t, s, e);
        }
        self.engine.set_current(seq);
        *ev = chosen;
    }

    /// The run is stuck at `t` after `same` events there, `ev` popped and not yet handled:
    /// handle it and up to [`LOOP_SAMPLE`] more while time stands still, tallying their kinds
    /// and processes, and say what loops. (Cold: reached once, by a run that is over.)
    #[cold]
    #[inline(never)]
    fn no_progress(&mut self, t: Instant, mut same: u64, limit: Instant, ev: &mut Ev<B::Op, B::Reply>) -> NoProgress {
        // kind -> (events, processes), in first-seen order: a few kinds, no hash map
        let mut tally: Vec<(&'static str, u64, std::collections::BTreeSet<u32>)> = Vec::new();
        for _ in 0..LOOP_SAMPLE {
            let (kind, pid) = ev.describe();
            let i = tally.iter().position(|k| k.0 == kind).unwrap_or_else(|| {
                tally.push((kind, 0, std::collections::BTreeSet::new()));
                tally.len() - 1
            });
            tally[i].1 += 1;
            tally[i].2.extend(pid);
            self.turn(t, ev);
            match self.engine.pop_into(limit, ev) {
                Some(next) if next == t => same += 1,
                _ => break, // (it moved on after all, or ran out: still far past the bound)
            }
        }
        tally.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let looping = tally
            .iter()
            .map(|(kind, n, pids)| {
                let mut s = format!("{kind} x {n}");
                if !pids.is_empty() {
                    let shown: Vec<String> = pids.iter().take(8).map(u32::to_string).collect();
                    let more = pids.len().saturating_sub(8);
                    let word = if pids.len() == 1 { "process" } else { "processes" };
                    s.push_str(&format!(" ({word} {}", shown.join(", ")));
                    if more > 0 {
                        s.push_str(&format!(" and {more} more"));
                    }
                    s.push(')');
                }
                s
            })
            .collect::<Vec<_>>()
            .join(", ");
        NoProgress {
            at: t,
            events: same,
            looping,
        }
    }
}

/// An explorer's run of `sc` steered by `source` into `out`: from the deepest world in `saves`
/// it agrees with, else from the start (the header first); saving its world as it goes.
/// `saves` is the explorer's, kept between its runs (of one backend: another's is replaced).
pub(crate) fn run_saving<B: Backend>(
    sc: &Scenario,
    source: &Source,
    backend: B,
    header: &Header,
    out: &mut dyn Sink,
    saves: &mut Option<Box<dyn std::any::Any + Send>>,
) -> Result<Outcome, NoProgress>
where
    B::Process: 'static,
    B::Store: 'static,
{
    if !saves.as_ref().is_some_and(|s| s.is::<Saves<B>>()) {
        *saves = Some(Box::new(Saves::<B>::default()));
    }
    let saves = saves
        .as_mut()
        .and_then(|s| s.downcast_mut::<Saves<B>>())
        .expect("made above");
    let (mut sim, looped) = match saves.deepest_for(source) {
        Some(saved) => {
            let looped = saved.looped;
            (Sim::restored(sc, backend, out, source.clone(), saved), looped)
        }
        None => {
            out.header(header);
            (
                Sim::with_source(sc, backend, out, Some(source.clone())),
                Looped::default(),
            )
        }
    };
    sim.run_from(looped, Some(saves))
}
