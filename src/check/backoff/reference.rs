//! Property 2 of [`super`], one reference machine: the multiplier changes are those of ONE
//! [`crate::pacer::Backoff`] fed every response of the fleet, applied in any order the reports'
//! flight allows, and every grant carries the reference multiplier.

use super::Failures;
use crate::check::common::{IdMap, LoopMap, PidSet, mult, secs};
use crate::pacer::{Backoff, BackoffConfig, Status};
use crate::trace::{Detail, Event, Header, MultiplierCause, OpKind, StoreErrorKind};
use std::collections::{BTreeSet, VecDeque};

/// At most this many pending responses are considered for reordering at once.
const MAX_REORDER: usize = 10;
/// At most this many reference states are kept.
const MAX_STATES: usize = 4096;
/// At most this many states one event's search may visit (every state's silent closure
/// together): past it the search stops, counts as truncated, and is lenient (the states not
/// yet searched are kept as they are; no failure is reported when none remains). Each event
/// then costs a bounded amount, so a trace is checked in time and memory linear in its
/// length; the search once visited every state's closure (4096 x 4096 states) at each event.
const MAX_WORK: usize = 8192;
/// A response whose fate is unknown (lost report, dead process) is forgotten after this long.
const FLOATING_HORIZON_NS: u64 = 10_000_000_000;

/// The rested reference state: streak 0, no pending response applied early.
const REST: State = State {
    streak: 0,
    applied: Vec::new(),
};

/// One reference state: the clean streak and which pending responses it already applied
/// (the multiplier is the same in every state: every change is observed).
#[derive(Hash, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct State {
    streak: u32,
    // invariant: sorted ids of pending responses this state has applied.
    applied: Vec<u64>,
}

#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
enum Fate {
    /// Just ended; we do not yet know whether the process reports it to the store.
    Fresh,
    /// Reported; applied by the time the report's reply arrives.
    InFlight,
    /// May have been applied at any time, or never.
    Floating,
}

/// A fresh response kept out of the maps ([`Reference::rested`]).
#[derive(Hash, Copy, Clone, Debug)]
struct Rested {
    id: u64,
    pid: u32,
    thread: u16,
    t: u64,
    code: u16,
}

#[derive(Hash, Clone, Debug)]
struct Response {
    pid: u32,
    t: u64,
    code: u16,
    fate: Fate,
    // its process was cut off from the store (in fallback) when it ended
    cut_off: bool,
}

/// The reference machine and the set of its states consistent with the trace so far.
#[derive(Clone, Debug)]
pub(super) struct Reference {
    config: Option<BackoffConfig>,
    // the schedule as stated (or assumed: the defaults, when the header lacks them), for
    // `config_note`, written only into a witness
    stated: Stated,
    m: f64,
    states: BTreeSet<State>,
    pending: IdMap<Response>,
    next_id: u64,
    // each thread loop's fresh response (a process of several threads has one per thread: each
    // reports its own response on its own connection)
    fresh: LoopMap<u64>,
    // invariant: the same entries as `fresh`, keyed by response id, with the thread loop and
    // when the response ended (ids grow with time, so the first entries are the oldest fresh
    // responses); every one is pending, as `Fate::Fresh`.
    fresh_by_id: IdMap<((u32, u16), u64)>,
    // invariant: no floating pending response is older than this (a lower bound; `None` when
    // none floats), so most events skip the scan for old floating responses.
    floating_since: Option<u64>,
    inflight: LoopMap<u64>,
    // invariant: a fresh response that forcing would only forget (the reference at rest, with
    // a schedule, at multiplier 1, in its one rested state; the response clean; its process
    // not cut off), kept out of `pending`, `fresh` and `fresh_by_id`, which are then empty:
    // the usual response, which would be entered in all three only to be forced out of them
    // at the next instant. Forced at rest, it is forgotten; anything else that would read or
    // change the maps, the multiplier or the states first enters it there (`unrest`).
    rested: Option<Rested>,
    // processes in fallback (between their `fallback` entry and exit)
    cut_off: PidSet,
    // when the last `state_lost` fault fired
    lost_at: Option<u64>,
    /// The reordering search was truncated somewhere.
    pub(super) approximate: bool,
    // states the current event's search has visited (reset by `force` and `observe_change`)
    work: usize,
    /// Responses seen (`fetch_end` events).
    pub(super) responses: u64,
    /// Multiplier changes seen.
    pub(super) changes: u64,
    // the last few responses (pid, code, t), formatted only into a failure's witness
    recent: VecDeque<(u32, u16, u64)>,
}

crate::exact_hash!(Reference {
    config,
    stated,
    m: bits,
    states,
    pending,
    next_id,
    fresh,
    fresh_by_id,
    floating_since,
    inflight,
    rested,
    cut_off,
    lost_at,
    approximate,
    work,
    responses,
    changes,
    recent
});

/// The backoff schedule a header states, each part it lacks assumed at its default.
#[derive(Clone, Debug)]
struct Stated {
    factor: Option<f64>,
    decay_after: Option<u32>,
    cap: f64,
}

crate::exact_hash!(Stated {
    factor: bits,
    decay_after,
    cap: bits
});

impl Stated {
    fn factor(&self) -> f64 {
        self.factor.unwrap_or(Detail::DEFAULT_BACKOFF_FACTOR)
    }
    fn decay_after(&self) -> u32 {
        self.decay_after.unwrap_or(Detail::DEFAULT_DECAY_AFTER)
    }
}

impl Reference {
    /// The schedule, as a witness names it.
    pub(super) fn config_note(&self) -> String {
        let s = &self.stated;
        let mut notes = Vec::new();
        if s.factor.is_none() {
            notes.push(format!("factor {} assumed", mult(Detail::DEFAULT_BACKOFF_FACTOR)));
        }
        if s.decay_after.is_none() {
            notes.push(format!("decay_after {} assumed", Detail::DEFAULT_DECAY_AFTER));
        }
        let mut note = format!(
            "factor {}, decay_after {}, cap {}",
            mult(s.factor()),
            s.decay_after(),
            mult(s.cap)
        );
        if !notes.is_empty() {
            note.push_str(&format!(" ({}: backend_detail lacks them)", notes.join(", ")));
        }
        if self.config.is_none() {
            note.push_str("; no reference machine for this schedule, range and spacing only");
        }
        note
    }

    /// The schedule this header states.
    /// An explorer's form ([`crate::form`]): while no response is pending, in flight, fresh,
    /// floating or at rest and no loss is being explained, nothing it keeps holds an instant
    /// (the last responses it keeps are a witness's) and it meets its like at any instant;
    /// otherwise all of it, absolute.
    pub(super) fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        let quiet = self.pending.is_empty()
            && self.fresh.is_empty()
            && self.fresh_by_id.is_empty()
            && self.inflight.is_empty()
            && self.floating_since.is_none()
            && self.rested.is_none()
            && self.lost_at.is_none();
        if !quiet {
            // (responses in flight, each loop's: processes by id)
            f.raw_pids();
            f.word(fingerprint(self));
            f.absolute();
            return;
        }
        // (every field named: one added later is placed here, or the build fails)
        let Reference {
            config,
            stated,
            m,
            states,
            pending: _,
            next_id,
            fresh: _,
            fresh_by_id: _,
            floating_since: _,
            inflight: _,
            rested: _,
            cut_off,
            lost_at: _,
            approximate,
            work,
            responses,
            changes,
            recent: _,
        } = self;
        f.word(fingerprint(&(
            (config, stated, m.to_bits(), states, next_id),
            (approximate, work, responses, changes),
        )));
        // (the processes cut off, each by its name)
        f.per_pid(cut_off.keys().map(|pid| (pid, ())));
    }

    pub(super) fn new(h: &Header) -> Reference {
        let d = &h.backend_detail;
        let stated = Stated {
            factor: d.backoff_factor,
            decay_after: d.decay_after,
            cap: h.multiplier_cap,
        };
        let config = BackoffConfig::new(stated.factor(), stated.cap, stated.decay_after()).ok();
        Reference {
            config,
            stated,
            m: 1.0,
            states: BTreeSet::from([State {
                streak: 0,
                applied: Vec::new(),
            }]),
            pending: IdMap::new(),
            next_id: 0,
            fresh: LoopMap::default(),
            fresh_by_id: IdMap::new(),
            floating_since: None,
            inflight: LoopMap::default(),
            rested: None,
            cut_off: PidSet::new(),
            lost_at: None,
            approximate: false,
            work: 0,
            responses: 0,
            changes: 0,
            recent: VecDeque::with_capacity(8),
        }
    }

    /// Whether a fresh response of `code` from `pid`, ending now, may be kept as
    /// [`Reference::rested`].
    #[inline]
    fn may_rest(&self, pid: u32, code: u16) -> bool {
        self.rested.is_none()
            && self.pending.is_empty()
            && self.config.is_some()
            && self.m <= 1.0
            && !Status::from_http(code).is_rate_pressure()
            && !self.cut_off.contains(&pid)
            && self.at_rest()
    }

    /// One canonical state, and it is [`REST`] (compared field by field: a `Vec`'s `==` calls
    /// `memcmp` even when both are empty, which showed in the explorer's profile).
    #[inline]
    fn at_rest(&self) -> bool {
        self.states.len() == 1
            && self
                .states
                .first()
                .is_some_and(|s| s.streak == REST.streak && s.applied.is_empty())
    }

    /// The rested response, if any, enters the maps as any fresh response (its id is the
    /// newest: it goes last).
    #[inline]
    fn unrest(&mut self) {
        if let Some(r) = self.rested.take() {
            let response = Response {
                pid: r.pid,
                t: r.t,
                code: r.code,
                fate: Fate::Fresh,
                cut_off: false,
            };
            self.enter_fresh(r.id, r.thread, response);
        }
    }

    /// Fresh response `id` of thread `thread` of its process enters the maps.
    fn enter_fresh(&mut self, id: u64, thread: u16, r: Response) {
        let (pid, t) = (r.pid, r.t);
        self.pending.insert(id, r);
        self.fresh.insert(pid, thread, id);
        self.fresh_by_id.insert(id, ((pid, thread), t));
    }

    fn note_response(&mut self, r: &Response) {
        if self.recent.len() == 4 {
            self.recent.pop_front();
        }
        self.recent.push_back((r.pid, r.code, r.t));
    }

    /// The pending responses considered for reordering: those whose fate is known (fresh or in
    /// flight) oldest first, then those that may or may not have been applied, newest first.
    fn eligible(&self) -> Vec<u64> {
        let known = self.pending.iter().filter(|(_, r)| r.fate != Fate::Floating);
        let floating = self.pending.iter().rev().filter(|(_, r)| r.fate == Fate::Floating);
        known.chain(floating).map(|(id, _)| *id).take(MAX_REORDER + 1).collect()
    }

    /// Response `id` was never applied (the store refused its report): forget it. States that
    /// applied it early keep its effect (lenient: a superset of the truth).
    fn drop_response(&mut self, id: u64) {
        if self.pending.remove(&id).is_some() {
            self.states = std::mem::take(&mut self.states)
                .into_iter()
                .map(|mut s| {
                    s.applied.retain(|a| *a != id);
                    s
                })
                .collect();
        }
    }

    /// At multiplier 1 the streak cannot matter (a decay at 1 changes nothing and pressure
    /// resets it), nor can which clean or error responses were applied early: the state
    /// collapses to the pressure responses it applied. Keeps the state set small under high
    /// concurrency.
    fn canon(&self, s: State) -> State {
        if self.m > 1.0 {
            return s;
        }
        let applied = s
            .applied
            .into_iter()
            .filter(|id| {
                self.pending
                    .get(id)
                    .is_some_and(|r| Status::from_http(r.code).is_rate_pressure())
            })
            .collect();
        State { streak: 0, applied }
    }

    /// Every state reachable from `s` by applying pending responses (other than `except`)
    /// that change nothing, `s` included. With `collapse`, states are put in canonical form
    /// (only when no change follows within the same step: a clean response applied before a
    /// 429 must stay recorded as applied, or it would be applied again after it).
    fn silent_closure(&mut self, config: BackoffConfig, s: &State, except: Option<u64>, collapse: bool) -> Vec<State> {
        let eligible: Vec<u64> = self.eligible().into_iter().filter(|id| Some(*id) != except).collect();
        if self.m > 1.0 && self.pending.len() > MAX_REORDER + 1 {
            self.approximate = true;
        }
        let mut seen = BTreeSet::from([s.clone()]);
        let mut queue = VecDeque::from([s.clone()]);
        while let Some(cur) = queue.pop_front() {
            for &id in &eligible {
                let Err(at) = cur.applied.binary_search(&id) else {
                    continue;
                };
                let status = Status::from_http(self.pending[&id].code);
                let Ok(mut b) = Backoff::restore(config, self.m, cur.streak) else {
                    continue;
                };
                if b.on_response(status).is_none() {
                    let mut applied = cur.applied.clone();
                    applied.insert(at, id);
                    let n = State {
                        streak: b.clean_streak(),
                        applied,
                    };
                    let n = if collapse { self.canon(n) } else { n };
                    if seen.len() >= MAX_STATES || self.work >= MAX_WORK {
                        self.approximate = true;
                        break;
                    }
                    if seen.insert(n.clone()) {
                        self.work += 1;
                        queue.push_back(n);
                    }
                }
            }
        }
        seen.into_iter().collect()
    }

    /// Response `id` must have been applied by now (its report was answered, or its process
    /// sent none): states that have not applied it apply it now (possibly after other pending
    /// responses), silently, or die.
    fn force(&mut self, f: &mut Failures, id: u64, t: u64) {
        let Some(config) = self.config else {
            self.pending.remove(&id);
            return;
        };
        let Some((code, unreported)) = self
            .pending
            .get(&id)
            .map(|r| (r.code, r.cut_off && r.fate == Fate::Fresh))
        else {
            return;
        };
        if unreported {
            // a cut-off process that never reported it: the store never heard of it
            self.drop_response(id);
            return;
        }
        let status = Status::from_http(code);
        if self.m <= 1.0 && !status.is_rate_pressure() && self.at_rest() {
            // At rest (multiplier 1, one canonical state that applied nothing) a response that
            // is not rate pressure changes nothing and leaves the state at rest: the general
            // path below would explore its silent closure only to collapse back to `REST`.
            self.pending.remove(&id);
            return;
        }
        let mut next = BTreeSet::new();
        let mut would: Option<(f64, f64, u32)> = None;
        self.work = 0;
        for s in std::mem::take(&mut self.states) {
            if self.work >= MAX_WORK {
                // out of budget: the rest stay as they are (as if `id` changed nothing there)
                self.approximate = true;
                next.insert(s);
                continue;
            }
            self.work += 1;
            if let Ok(i) = s.applied.binary_search(&id) {
                let mut s = s;
                s.applied.remove(i);
                next.insert(s);
                continue;
            }
            for r in self.silent_closure(config, &s, Some(id), true) {
                let Ok(mut b) = Backoff::restore(config, self.m, r.streak) else {
                    continue;
                };
                match b.on_response(status) {
                    None => {
                        next.insert(self.canon(State {
                            streak: b.clean_streak(),
                            applied: r.applied,
                        }));
                    }
                    Some(c) => {
                        would.get_or_insert((c.from, c.to, r.streak));
                    }
                }
            }
        }
        let r = self.pending.remove(&id).expect("present above");
        if next.is_empty() && self.work >= MAX_WORK {
            // the search ran out before finding a state: no verdict on this response
            self.approximate = true;
            self.resync(self.m);
        } else if next.is_empty() {
            let (from, to, streak) = would.unwrap_or((self.m, self.m, 0));
            let k = config.decay_after();
            let what = if status.is_rate_pressure() {
                format!("backs off {}→{} on this {}", mult(from), mult(to), r.code)
            } else {
                format!(
                    "decays {}→{} on this clean response, the {k}th in a row of the fleet (streak was {streak}/{k})",
                    mult(from),
                    mult(to)
                )
            };
            f.fail(format!(
                "the reference machine ({}) {what} (fetch_end pid {} at {}), but the trace shows no multiplier change by {}: {}",
                self.config_note(),
                r.pid,
                secs(r.t),
                if t == u64::MAX { "the end".to_string() } else { secs(t) },
                if status.is_rate_pressure() {
                    "a 429/503 was ignored"
                } else {
                    "the streak is not counted once for the fleet (per-process streak?)"
                }
            ));
            // resynchronise on the reference's own step so one defect is reported once
            self.resync(to);
        } else {
            self.states = next.into_iter().take(MAX_STATES).collect();
        }
    }

    /// Response `id` may or may not have been applied, at any time from now on.
    fn float(&mut self, id: u64) {
        if let Some(r) = self.pending.get_mut(&id) {
            r.fate = Fate::Floating;
            self.floating_since = Some(self.floating_since.map_or(r.t, |f| f.min(r.t)));
        }
    }

    fn forget_old_floating(&mut self, t: u64) {
        match self.floating_since {
            Some(f) if f + FLOATING_HORIZON_NS < t => {}
            _ => return,
        }
        self.floating_since = self
            .pending
            .values()
            .filter(|r| r.fate == Fate::Floating && r.t + FLOATING_HORIZON_NS >= t)
            .map(|r| r.t)
            .min();
        let old: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, r)| r.fate == Fate::Floating && r.t + FLOATING_HORIZON_NS < t)
            .map(|(id, _)| *id)
            .collect();
        if old.is_empty() {
            return;
        }
        for id in &old {
            self.pending.remove(id);
        }
        self.states = std::mem::take(&mut self.states)
            .into_iter()
            .map(|mut s| {
                s.applied.retain(|a| !old.contains(a));
                s
            })
            .collect();
    }

    /// A `multiplier` event: explain it by applying pending responses.
    pub(super) fn observe_change(
        &mut self,
        f: &mut Failures,
        t: u64,
        pid: Option<u32>,
        from: f64,
        to: f64,
        cause: MultiplierCause,
    ) {
        self.unrest();
        self.changes += 1;
        if cause == MultiplierCause::StateLost {
            // the stored multiplier vanished with the store's state: it comes back rested
            if pid.is_some() || !eq(to, 1.0) || self.lost_at != Some(t) {
                f.fail(format!(
                    "at {}: multiplier {}→{} (state_lost) without a state_lost fault at that instant, or not back to 1",
                    secs(t),
                    mult(from),
                    mult(to)
                ));
            }
            self.resync(to);
            return;
        }
        let Some(config) = self.config else {
            self.m = to;
            return;
        };
        let whose = pid.map_or("shared".to_string(), |p| format!("pid {p}'s own"));
        if !eq(from, self.m) {
            f.fail(format!(
                "at {}: {whose} multiplier changed {}→{} ({cause}) but the fleet's reference multiplier is {}: \
                 multipliers diverge between processes (each writes its own pace into the shared one)",
                secs(t),
                mult(from),
                mult(to),
                mult(self.m)
            ));
            self.resync(to);
            return;
        }
        let eligible = self.eligible();
        let mut out = BTreeSet::new();
        self.work = 0;
        for s in std::mem::take(&mut self.states) {
            if self.work >= MAX_WORK {
                self.approximate = true;
                self.states.insert(s);
                continue;
            }
            for r in self.silent_closure(config, &s, None, false) {
                for &id in &eligible {
                    let Err(at) = r.applied.binary_search(&id) else {
                        continue;
                    };
                    let code = self.pending[&id].code;
                    let status = Status::from_http(code);
                    let Ok(mut b) = Backoff::restore(config, self.m, r.streak) else {
                        continue;
                    };
                    if let Some(c) = b.on_response(status) {
                        let cause_ok = cause == cause_of(status);
                        if cause_ok && eq(c.to, to) {
                            let mut applied = r.applied.clone();
                            applied.insert(at, id);
                            out.insert(State {
                                streak: b.clean_streak(),
                                applied,
                            });
                        }
                    }
                }
            }
            self.states.insert(s);
        }
        if out.is_empty() && self.work >= MAX_WORK {
            // the search ran out before explaining it: no verdict on this change
            self.approximate = true;
            self.resync(to);
        } else if out.is_empty() {
            let s = self.states.iter().next().cloned().unwrap_or(State {
                streak: 0,
                applied: Vec::new(),
            });
            let k = config.decay_after();
            let unapplied: Vec<String> = self
                .pending
                .iter()
                .filter(|(id, _)| s.applied.binary_search(id).is_err())
                .map(|(_, r)| format!("pid {} {}", r.pid, r.code))
                .collect();
            let why = if cause == MultiplierCause::Decay {
                let clean = self
                    .pending
                    .iter()
                    .filter(|(id, r)| s.applied.binary_search(id).is_err() && Status::from_http(r.code).is_clean())
                    .count();
                format!(
                    "the fleet's clean streak is {}/{k} with {clean} clean response(s) pending: decayed too early \
                     (a streak counted per process: N processes cross the threshold together)",
                    s.streak
                )
            } else {
                "no pending 429/503 response explains it".to_string()
            };
            let recent: Vec<String> = self
                .recent
                .iter()
                .map(|(pid, code, t)| format!("pid {pid} {code} at {}", secs(*t)))
                .collect();
            f.fail(format!(
                "at {}: {whose} multiplier {}→{} ({cause}) does not match the reference machine ({}): {why}; \
                 pending responses [{}]; last responses [{}]",
                secs(t),
                mult(from),
                mult(to),
                self.config_note(),
                unapplied.join(", "),
                recent.join("; ")
            ));
            self.resync(to);
        } else {
            self.m = to;
            self.states = out.into_iter().take(MAX_STATES).map(|s| self.canon(s)).collect();
        }
    }

    fn resync(&mut self, m: f64) {
        self.m = m;
        self.states = BTreeSet::from([State {
            streak: 0,
            applied: Vec::new(),
        }]);
    }

    /// Forces every fresh response older than `t`, in process order.
    fn force_fresh_before(&mut self, f: &mut Failures, t: u64) {
        // the usual case, one due (a response forced as time moves on), without a list
        let mut first: Option<((u32, u16), u64)> = None;
        let mut due: Vec<((u32, u16), u64)> = Vec::new();
        for (&id, &(key, ended)) in self.fresh_by_id.iter() {
            if ended >= t {
                break; // this one and every later id end at or after `t`
            }
            match first {
                None => first = Some((key, id)),
                Some(_) => due.push((key, id)),
            }
        }
        let Some(first) = first else { return };
        if due.is_empty() {
            let ((pid, thread), id) = first;
            self.take_fresh(pid, thread);
            self.force(f, id, t);
            return;
        }
        due.push(first);
        due.sort_unstable();
        for ((pid, thread), id) in due {
            self.take_fresh(pid, thread);
            self.force(f, id, t);
        }
    }

    /// Removes and returns thread `thread` of `pid`'s fresh response.
    fn take_fresh(&mut self, pid: u32, thread: u16) -> Option<u64> {
        let id = self.fresh.remove(pid, thread)?;
        self.fresh_by_id.remove(&id);
        Some(id)
    }

    /// The thread loop's next step shows its fresh response applied.
    #[inline]
    pub(super) fn force_fresh_of(&mut self, f: &mut Failures, pid: u32, thread: u16, t: u64) {
        if self.rested.is_some_and(|r| (r.pid, r.thread) == (pid, thread)) {
            self.rested = None; // forced at rest: forgotten
            return;
        }
        if self.fresh_by_id.is_empty() {
            return; // (the usual case: the last response was forced as time moved on)
        }
        if let Some(id) = self.take_fresh(pid, thread) {
            self.force(f, id, t);
        }
    }

    /// A step of the process as a whole (no thread named): every thread's fresh response.
    fn force_fresh_of_process(&mut self, f: &mut Failures, pid: u32, t: u64) {
        if self.rested.is_some_and(|r| r.pid == pid) {
            self.rested = None; // forced at rest: forgotten (no other is fresh)
            return;
        }
        if self.fresh_by_id.is_empty() {
            return;
        }
        for thread in self.fresh.threads_of(pid) {
            self.force_fresh_of(f, pid, thread, t);
        }
    }

    fn abandon(&mut self, pid: u32) {
        for thread in self.fresh.threads_of(pid) {
            if let Some(id) = self.take_fresh(pid, thread) {
                self.float(id);
            }
        }
        for thread in self.inflight.threads_of(pid) {
            if let Some(id) = self.inflight.remove(pid, thread) {
                self.float(id);
            }
        }
    }

    /// Before any event at `t`: responses whose fate is settled by now are applied or
    /// forgotten.
    #[inline(always)]
    pub(super) fn advance(&mut self, f: &mut Failures, t: u64) {
        // (checked here, inline, as most events find nothing to do)
        if self.rested.is_some_and(|r| r.t < t) {
            self.rested = None; // forced at rest as time moved on: forgotten (no other is fresh)
        }
        if self.fresh_by_id.first().is_some_and(|(_, &(_, ended))| ended < t) {
            self.force_fresh_before(f, t);
        }
        if self.floating_since.is_some_and(|since| since + FLOATING_HORIZON_NS < t) {
            self.forget_old_floating(t);
        }
    }

    /// Every event but `multiplier` and `grant` (which the checker passes to
    /// [`observe_change`](Self::observe_change) and [`grant`](Self::grant)).
    #[inline(always)]
    pub(super) fn event(&mut self, f: &mut Failures, ev: &Event) {
        // (checked inline) events that settle no response: a step of a process with none
        // fresh, a reply to anything but a report, and the job and end events
        let idle = match ev {
            Event::FetchStart { pid, .. }
            | Event::Arrival { pid, .. }
            | Event::Deny { pid, .. }
            | Event::LockAcquired { pid, .. }
            | Event::LockReleased { pid, .. }
            | Event::Uncapped { pid, .. } => self.fresh_by_id.is_empty() && self.rested.is_none_or(|r| r.pid != *pid),
            // a request that forces no fresh response and floats none in flight
            Event::OpSent { pid, op, .. } => {
                *op != OpKind::Report
                    && self.fresh_by_id.is_empty()
                    && self.inflight.is_empty()
                    && self.rested.is_none_or(|r| r.pid != *pid)
            }
            Event::Reply { op, .. } => *op != OpKind::Report,
            Event::JobEvent { .. } | Event::Backfill { .. } | Event::Platform { .. } | Event::End { .. } => true,
            _ => false,
        };
        if !idle {
            self.settle(f, ev);
        }
    }

    // (inlined into each caller: the suite's copy for one kind of event keeps only that
    // kind's arm)
    #[inline(always)]
    fn settle(&mut self, f: &mut Failures, ev: &Event) {
        let t = ev.t();
        match ev {
            Event::FetchEnd {
                pid, thread, status, ..
            } => {
                let (pid, thread) = (*pid, *thread);
                self.force_fresh_of(f, pid, thread, t);
                let r = Response {
                    pid,
                    t,
                    code: *status,
                    fate: Fate::Fresh,
                    cut_off: self.cut_off.contains(&pid),
                };
                self.note_response(&r);
                self.responses += 1;
                let id = self.next_id;
                self.next_id += 1;
                if self.may_rest(pid, r.code) {
                    self.rested = Some(Rested {
                        id,
                        pid,
                        thread,
                        t,
                        code: r.code,
                    });
                } else {
                    self.unrest();
                    self.enter_fresh(id, thread, r);
                }
            }
            Event::OpSent { pid, thread, op, .. } => {
                let (pid, thread) = (*pid, *thread);
                match op {
                    OpKind::Report => {
                        self.unrest();
                        if let Some(id) = self.inflight.remove(pid, thread) {
                            self.float(id);
                        }
                        if let Some(id) = self.take_fresh(pid, thread) {
                            if let Some(r) = self.pending.get_mut(&id) {
                                r.fate = Fate::InFlight;
                            }
                            self.inflight.insert(pid, thread, id);
                        }
                    }
                    _ => {
                        self.force_fresh_of(f, pid, thread, t);
                        if let Some(id) = self.inflight.remove(pid, thread) {
                            self.float(id);
                        }
                    }
                }
            }
            Event::Reply {
                pid,
                thread,
                op: OpKind::Report,
                ..
            } => {
                self.unrest();
                if let Some(id) = self.inflight.remove(*pid, *thread) {
                    self.force(f, id, t);
                }
            }
            Event::StoreError { pid, thread, error, .. } => {
                self.unrest();
                if let Some(id) = self.inflight.remove(*pid, *thread) {
                    // refused: the store never saw it; a timeout may have been applied
                    if *error == StoreErrorKind::Refused {
                        self.drop_response(id);
                    } else {
                        self.float(id);
                    }
                }
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.unrest();
                self.cut_off.remove(pid);
                self.abandon(*pid);
            }
            Event::Fallback { pid, enter, .. } => {
                self.unrest();
                self.force_fresh_of_process(f, *pid, t);
                if *enter {
                    self.cut_off.add(*pid);
                } else {
                    self.cut_off.remove(pid);
                }
            }
            Event::FetchStart { pid, thread, .. } => self.force_fresh_of(f, *pid, *thread, t),
            Event::Deny { pid, .. }
            | Event::Arrival { pid, .. }
            | Event::LockAcquired { pid, .. }
            | Event::LockReleased { pid, .. }
            | Event::Uncapped { pid, .. } => self.force_fresh_of_process(f, *pid, t),
            Event::Fault {
                kind: crate::trace::FaultKind::StateLost,
                start: true,
                ..
            } => self.lost_at = Some(t),
            Event::Reply { .. }
            | Event::Multiplier { .. }
            | Event::Grant { .. }
            | Event::Fault { .. }
            | Event::JobEvent { .. }
            | Event::Backfill { .. }
            | Event::Platform { .. }
            | Event::End { .. } => {}
        }
    }

    /// A grant applied multiplier `m`: it must be the reference's (a grant at another is a
    /// process pacing with its own, diverged multiplier).
    pub(super) fn grant(&mut self, f: &mut Failures, t: u64, pid: u32, m: f64) {
        if self.config.is_some() && !eq(m, self.m) {
            self.unrest();
            f.fail(format!(
                "at {}: grant to pid {pid} applied multiplier {} while the fleet's reference multiplier is {}: \
                 the process paces with its own, diverged multiplier",
                secs(t),
                mult(m),
                mult(self.m)
            ));
            // one report per divergence: follow the grants from here
            self.m = m;
        }
    }

    /// The schedule (`None`: the header states none this build can run).
    pub(super) fn config(&self) -> Option<BackoffConfig> {
        self.config
    }

    /// The trace ended: every response not yet reported is applied now.
    pub(super) fn finish(&mut self, f: &mut Failures) {
        self.unrest();
        let fresh: Vec<u64> = self.fresh.values().copied().collect();
        self.fresh.clear();
        self.fresh_by_id.clear();
        for id in fresh {
            self.force(f, id, u64::MAX);
        }
    }
}

/// Multipliers equal up to rounding.
fn eq(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

/// The cause a `multiplier` event names for a change a response of `status` makes.
pub(super) fn cause_of(status: Status) -> MultiplierCause {
    match status {
        Status::Ok => MultiplierCause::Decay,
        Status::TooManyRequests => MultiplierCause::TooManyRequests,
        Status::Unavailable => MultiplierCause::Unavailable,
        Status::Error => MultiplierCause::Error,
    }
}
