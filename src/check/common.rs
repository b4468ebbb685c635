//! What several checkers share: the header's pacing interval, formatting times for witnesses,
//! and tracking demand (which live processes are waiting for permission) and operations in
//! flight.

use crate::trace::{Event, FaultKind, Header};

/// Seconds with millisecond precision, as witnesses print times: `12.345s`.
pub fn secs(ns: u64) -> String {
    format!("{:.3}s", ns as f64 / 1e9)
}

/// A multiplier, printed short: `1`, `2`, `1.5`.
pub(crate) fn mult(m: f64) -> String {
    if m.fract() == 0.0 && m.abs() < 1e15 {
        format!("{}", m as i64)
    } else {
        format!("{m}")
    }
}

/// The pacing interval of the header's rate, in nanoseconds (at least 1).
pub(crate) fn base_interval(h: &Header) -> u64 {
    if h.rate.is_finite() && h.rate > 0.0 {
        ((1e9 / h.rate).ceil() as u64).max(1)
    } else {
        1
    }
}

/// Which live processes are waiting for permission to fetch.
///
/// A process waits from the moment it asks for permission (an `op_sent` of an operation that
/// [asks for permission](crate::trace::OpKind::asks_permission), or a `grant` from an in-process pacer) until its fetch starts; a
/// crash ends its wait, and a dead process does not wait until it restarts (the store may still
/// grant the reservation it sent before it died). Between jobs (thinking, idle in an open
/// loop, finished) it does not wait. While at least one live process waits, demand exceeds
/// what the pacer is giving.
#[derive(Hash, Clone, Debug, Default)]
pub struct Demand {
    // invariant: waiting[pid] = Some(since) iff pid's thread 0 asked and has not yet started
    // its fetch.
    waiting: Vec<Option<u64>>,
    // invariant: the same for the other threads of a process of several (`(pid, thread)`
    // -> since); thread 0 stays in `waiting`, where every one-thread trace lives.
    others: std::collections::BTreeMap<(u32, u16), u64>,
    // invariant: dead[pid] iff pid crashed and has not restarted; then waiting[pid] is None.
    dead: Vec<bool>,
    count: usize,
    // invariant: Some(t) iff count > 0, t = when count last rose from 0.
    since: Option<u64>,
    // invariant: total time with count > 0 up to `last`.
    busy_ns: u64,
    last: u64,
    // Some when demand is implied by a closed loop without think time (an external worker
    // that reports no asks): a live process waits from each fetch end until its next fetch
    // start, while it has requests left (`requests` per process, or unbounded)
    implied: Option<Option<u64>>,
    // fetch starts per process (for `implied` with a request bound)
    starts: Vec<u64>,
}

impl Demand {
    /// An explorer's form at `now` ([`crate::form`]): who waits, and since when each began
    /// (`waits`: when `fairness` judges a wait bound), relative to now. Not when demand last
    /// rose from none, nor the time waited so far (`busy_ns`), nor the last event's instant:
    /// their only reader, `self_heal`, gives them in its own part, as it reads them (with
    /// demand's clock at or before now, `busy_until(t) - busy_until(now)` depends on who waits,
    /// not on `last`).
    pub fn form(&self, f: &mut crate::form::Form, waits: bool) {
        // (every field named: one added later is placed here, or the build fails)
        let Demand {
            waiting,
            others,
            dead,
            count,
            since: _,
            busy_ns: _,
            last: _,
            implied,
            starts,
        } = self;
        let now = f.now();
        let wait = |w: &Option<u64>| match w {
            Some(t) if waits => t.wrapping_sub(now),
            Some(_) => 0,
            None => u64::MAX,
        };
        f.per_pid(waiting.iter().enumerate().map(|(pid, w)| (pid as u32, wait(w))));
        f.per_pid((others.iter()).map(|(&(pid, th), &t)| (pid, (th, if waits { t.wrapping_sub(now) } else { 0 }))));
        f.per_pid(
            (dead.iter().enumerate())
                .filter(|&(_, &d)| d)
                .map(|(pid, _)| (pid as u32, ())),
        );
        f.per_pid(
            (starts.iter().enumerate())
                .filter(|&(_, &n)| n > 0)
                .map(|(pid, &n)| (pid as u32, n)),
        );
        f.word(crate::choice::fingerprint(&(count, implied)));
    }

    /// For `processes` processes.
    pub fn new(processes: u32) -> Demand {
        Demand {
            waiting: vec![None; processes as usize],
            ..Demand::default()
        }
    }

    /// For the trace `h` introduces: [`Demand::new`], or, when the header's `backend_detail`
    /// says `demand = "closed_loop"` (an external worker in a closed loop without think time,
    /// which reports no asks), demand inferred from the fetches: a live process waits for
    /// permission from each of its fetch ends until its next fetch start, unless it has made
    /// its `requests` (per process, when the detail gives them). A process's wait before its
    /// first fetch (its start-up) is not counted.
    pub fn for_header(h: &crate::trace::Header) -> Demand {
        let mut d = Demand::new(h.processes);
        let o = &h.backend_detail.other;
        if o.get("demand").and_then(|v| v.as_str()) == Some("closed_loop") {
            d.implied = Some(o.get("requests").and_then(|v| v.as_u64()));
        }
        d
    }

    /// Whether demand is inferred from the fetches ([`Demand::for_header`]).
    pub fn implied(&self) -> bool {
        self.implied.is_some()
    }

    #[inline]
    fn slot(&mut self, pid: u32) -> &mut Option<u64> {
        let i = pid as usize;
        if i >= self.waiting.len() {
            self.grow(i);
        }
        &mut self.waiting[i]
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.waiting.resize(i + 1, None);
    }

    #[inline(always)]
    fn start(&mut self, pid: u32, thread: u16, t: u64) {
        if self.dead.get(pid as usize).copied().unwrap_or(false) {
            return;
        }
        let fresh = if thread == 0 {
            let w = self.slot(pid);
            w.is_none() && w.replace(t).is_none()
        } else {
            self.start_other(pid, thread, t)
        };
        if fresh {
            self.count += 1;
            if self.count == 1 {
                self.since = Some(t);
            }
        }
    }

    /// A thread other than 0 starts waiting; whether it was not already.
    #[inline(never)]
    fn start_other(&mut self, pid: u32, thread: u16, t: u64) -> bool {
        match self.others.entry((pid, thread)) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(t);
                true
            }
            std::collections::btree_map::Entry::Occupied(_) => false,
        }
    }

    #[inline]
    fn stop(&mut self, pid: u32, thread: u16) {
        let was = if thread == 0 {
            self.slot(pid).take().is_some()
        } else {
            self.others.remove(&(pid, thread)).is_some()
        };
        if was {
            self.count -= 1;
            if self.count == 0 {
                self.since = None;
            }
        }
    }

    /// Every thread of `pid` stops waiting (a crash, a restart).
    fn stop_process(&mut self, pid: u32) {
        self.stop(pid, 0);
        if !self.others.is_empty() {
            let threads: Vec<u16> = self
                .others
                .range((pid, 1)..=(pid, u16::MAX))
                .map(|(k, _)| k.1)
                .collect();
            for th in threads {
                self.stop(pid, th);
            }
        }
    }

    /// Feed one event (after reading any figure that must reflect the state before it).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event) {
        let t = ev.t();
        if self.count > 0 {
            self.busy_ns += t.saturating_sub(self.last);
        }
        self.last = self.last.max(t);
        match *ev {
            Event::OpSent { pid, thread, op, t } if op.asks_permission() => self.start(pid, thread, t),
            Event::Grant { pid, thread, t, .. } => self.start(pid, thread, t),
            Event::FetchStart { pid, thread, .. } => {
                self.stop(pid, thread);
                if self.implied.is_some() {
                    let i = pid as usize;
                    if i >= self.starts.len() {
                        self.starts.resize(i + 1, 0);
                    }
                    self.starts[i] += 1;
                }
            }
            Event::FetchEnd { pid, thread, t, .. } => {
                if let Some(bound) = self.implied
                    && bound.is_none_or(|r| self.starts.get(pid as usize).copied().unwrap_or(0) < r)
                {
                    self.start(pid, thread, t);
                }
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.stop_process(pid);
                let i = pid as usize;
                if i >= self.dead.len() {
                    self.dead.resize(i + 1, false);
                }
                self.dead[i] = matches!(ev, Event::Crash { .. });
            }
            _ => {}
        }
    }

    /// Whether `ev` can change who waits. [`Demand::event`] with any other event only moves
    /// the clock that [`Demand::busy_until`] reads, so a reader that never asks for the busy
    /// time may skip it.
    #[inline]
    pub(crate) fn changes_waits(&self, ev: &Event) -> bool {
        match ev {
            Event::OpSent { op, .. } => op.asks_permission(),
            Event::Grant { .. } | Event::FetchStart { .. } | Event::Crash { .. } | Event::Restart { .. } => true,
            Event::FetchEnd { .. } => self.implied.is_some(),
            _ => false,
        }
    }

    /// Number of live processes waiting now.
    pub fn waiting(&self) -> usize {
        self.count
    }

    /// When demand last rose from none, if some process waits now.
    pub fn since(&self) -> Option<u64> {
        self.since
    }

    /// Since when `pid` has waited (its longest-waiting thread), if it waits now.
    pub(crate) fn waiting_since(&self, pid: u32) -> Option<u64> {
        let first = self.waiting.get(pid as usize).copied().flatten();
        if self.others.is_empty() {
            return first;
        }
        let rest = self.others.range((pid, 1)..=(pid, u16::MAX)).map(|(_, &t)| t).min();
        first.into_iter().chain(rest).min()
    }

    /// The waiting processes (any of their threads), ascending.
    pub(crate) fn waiting_pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.waiting.len() as u32)
            .filter(|&p| self.waiting[p as usize].is_some())
            .collect();
        if !self.others.is_empty() {
            v.extend(self.others.keys().map(|k| k.0));
            v.sort_unstable();
            v.dedup();
        }
        v
    }

    /// Total time, up to `t`, during which some process waited.
    pub fn busy_until(&self, t: u64) -> u64 {
        self.busy_ns + if self.count > 0 { t.saturating_sub(self.last) } else { 0 }
    }
}

/// When each thread loop sent the store operation it still awaits: from its `op_sent` until
/// the reply or the error that answers it (each thread has its own connection, so a process of
/// several threads can await several); a crash or a restart forgets all of its process's.
#[derive(Hash, Clone, Debug, Default)]
pub struct Awaiting(LoopMap<u64>);

impl Awaiting {
    /// Feed one event; when it answers an awaited operation (a reply or an error), when that
    /// operation was sent.
    #[inline(always)]
    pub fn event(&mut self, ev: &Event) -> Option<u64> {
        match *ev {
            Event::OpSent { t, pid, thread, .. } => {
                self.0.insert(pid, thread, t);
                None
            }
            Event::Reply { pid, thread, .. } | Event::StoreError { pid, thread, .. } => self.0.remove(pid, thread),
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.0.remove_process(pid);
                None
            }
            _ => None,
        }
    }

    /// The thread loops awaiting an answer, with when they sent: thread 0s by ascending pid,
    /// then the other threads by `(pid, thread)`.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u16), u64)> + '_ {
        self.0.iter().map(|(k, &t)| (k, t))
    }
}

/// A map keyed by thread loop `(pid, thread)`: thread 0's entries in a [`PidMap`] (every
/// one-thread trace lives there, at its speed), the other threads' in an ordered map.
#[derive(Hash, Clone, Debug)]
pub(crate) struct LoopMap<V> {
    first: PidMap<V>,
    others: std::collections::BTreeMap<(u32, u16), V>,
}

/// Floats by their bits, each loop's in order ([`crate::form::Floats`]).
impl<V: crate::form::Floats> crate::form::Floats for LoopMap<V> {
    fn hash_bits<H: std::hash::Hasher>(&self, h: &mut H) {
        let LoopMap { first, others } = self;
        first.hash_bits(h);
        h.write_usize(others.len());
        for (k, v) in others {
            std::hash::Hash::hash(k, h);
            v.hash_bits(h);
        }
    }
}

impl<V> Default for LoopMap<V> {
    fn default() -> Self {
        LoopMap {
            first: PidMap::default(),
            others: Default::default(),
        }
    }
}

impl<V> LoopMap<V> {
    /// An explorer's form of the loops it holds, without their entries
    /// ([`crate::form::Form::per_pid`]).
    pub fn form_keys(&self, f: &mut crate::form::Form) {
        f.per_pid(self.iter().map(|((pid, th), _)| (pid, th)));
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty() && self.others.is_empty()
    }
    /// `(pid, thread)`'s entry.
    pub fn get(&self, pid: u32, thread: u16) -> Option<&V> {
        if thread == 0 {
            self.first.get(&pid)
        } else {
            self.others.get(&(pid, thread))
        }
    }
    /// Sets `(pid, thread)`'s entry; returns the previous one.
    #[inline]
    pub fn insert(&mut self, pid: u32, thread: u16, v: V) -> Option<V> {
        if thread == 0 {
            self.first.insert(pid, v)
        } else {
            self.others.insert((pid, thread), v)
        }
    }
    /// Removes and returns `(pid, thread)`'s entry.
    #[inline]
    pub fn remove(&mut self, pid: u32, thread: u16) -> Option<V> {
        if thread == 0 {
            self.first.remove(&pid)
        } else {
            self.others.remove(&(pid, thread))
        }
    }
    /// Removes every thread's entry of process `pid`.
    #[inline]
    pub(crate) fn remove_process(&mut self, pid: u32) {
        self.first.remove(&pid);
        if !self.others.is_empty() {
            self.others.retain(|k, _| k.0 != pid);
        }
    }
    /// The values, in [`iter`](Self::iter)'s order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.first.values().chain(self.others.values())
    }
    /// Removes every entry.
    pub fn clear(&mut self) {
        self.first.clear();
        self.others.clear();
    }
    /// The threads of process `pid` that have an entry, ascending.
    pub(crate) fn threads_of(&self, pid: u32) -> Vec<u16> {
        let mut v: Vec<u16> = self.first.get(&pid).map(|_| 0).into_iter().collect();
        if !self.others.is_empty() {
            v.extend(self.others.range((pid, 1)..=(pid, u16::MAX)).map(|(k, _)| k.1));
        }
        v
    }
    /// The entries: thread 0s by ascending pid, then the others by `(pid, thread)`.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u16), &V)> {
        self.first
            .iter()
            .map(|(p, v)| ((p, 0), v))
            .chain(self.others.iter().map(|(k, v)| (*k, v)))
    }
}

/// Processes stranded by a store window: an operation sent during one, or still unanswered when
/// one began (its request or reply may cross into the window and be lost), that has not been
/// answered yet. A client timeout can outlive the window: until the answer comes, such a
/// process waits on the store, not on the pacer. The operations in flight are the suite's
/// ([`Shared::awaiting`]).
#[derive(Hash, Clone, Debug, Default)]
pub struct Stranded {
    // invariant: a subset of the thread loops awaiting an answer
    stranded: LoopMap<()>,
}

impl Stranded {
    /// An explorer's form: the loops stranded, each by its process's name
    /// ([`crate::form::Form::per_pid`]).
    pub fn form(&self, f: &mut crate::form::Form) {
        let Stranded { stranded } = self;
        stranded.form_keys(f);
    }

    /// Feed one event; `window_open`: a store window is open as it happens.
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, window_open: bool) {
        match *ev {
            Event::OpSent { pid, thread, .. } if window_open => {
                self.stranded.insert(pid, thread, ());
            }
            // (nothing to remove from an empty set: the usual case, no store window)
            Event::Reply { pid, thread, .. } | Event::StoreError { pid, thread, .. } if !self.stranded.is_empty() => {
                self.stranded.remove(pid, thread);
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } if !self.stranded.is_empty() => {
                self.stranded.remove_process(pid);
            }
            _ => {}
        }
    }

    /// A store window begins: every operation in flight (`awaiting`) may be lost in it.
    pub(crate) fn window_began(&mut self, awaiting: &Awaiting) {
        for ((pid, thread), _) in awaiting.iter() {
            self.stranded.insert(pid, thread, ());
        }
    }

    /// No process is stranded.
    pub fn is_empty(&self) -> bool {
        self.stranded.is_empty()
    }
}

/// What several checkers follow alike, kept once for the whole suite rather than once in each:
/// which store operations are awaited ([`Awaiting`]: the figures, `degradation`, and the
/// stranded processes of `liveness` and `self_heal`) and who waits for permission ([`Demand`]:
/// `liveness`, `self_heal`, `fairness`). [`crate::check::Suite`] feeds it every event in two
/// halves around the checkers: [`Shared::before`] (the checkers read what the event answered)
/// and [`Shared::after`] (they read who waited before it, as each did with its own copy).
#[derive(Hash, Clone, Debug, Default)]
pub struct Shared {
    awaiting: Awaiting,
    // invariant: what `awaiting` returned for the event being fed
    answered: Option<u64>,
    demand: Demand,
}

impl Shared {
    /// An explorer's form at `now` ([`crate::form`]): the operations awaited, since when
    /// (relative to now), and the demand's ([`Demand::form`], `waits` as it says).
    /// (Not `answered`: set anew for each event before any checker reads it.)
    pub fn form(&self, f: &mut crate::form::Form, waits: bool) {
        let Shared {
            awaiting,
            answered: _,
            demand,
        } = self;
        let now = f.now();
        f.per_pid(awaiting.iter().map(|((pid, th), t)| (pid, (th, t.wrapping_sub(now)))));
        f.word(0xA5A5);
        demand.form(f, waits);
    }

    /// For the trace `h` introduces (its demand as [`Demand::for_header`] infers it).
    pub fn for_header(h: &Header) -> Shared {
        Shared {
            demand: Demand::for_header(h),
            ..Shared::default()
        }
    }

    /// Before the checkers see `ev`: the operations it answers, sends or forgets.
    #[inline(always)]
    pub fn before(&mut self, ev: &Event) {
        self.answered = self.awaiting.event(ev);
    }

    /// After the checkers saw `ev`: the waits it starts or ends, and the demand's clock.
    #[inline(always)]
    pub fn after(&mut self, ev: &Event) {
        self.demand.event(ev);
    }

    /// The operations awaited, the current event's taken into account.
    pub fn awaiting(&self) -> &Awaiting {
        &self.awaiting
    }

    /// When the operation the current event answers (a reply or a store error) was sent.
    #[inline]
    pub fn answered(&self) -> Option<u64> {
        self.answered
    }

    /// Who waits for permission, up to (not including) the current event.
    #[inline]
    pub fn demand(&self) -> &Demand {
        &self.demand
    }
}

/// Fault kinds during which the store is (partly) unreachable.
pub(crate) fn is_outage(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::StoreOutage | FaultKind::Partition | FaultKind::StoreRestart
    )
}

/// Print a list of pids short: `0, 2, 3` (at most 8, then `...`).
pub(crate) fn pid_list(pids: &[u32]) -> String {
    let mut s: Vec<String> = pids.iter().take(8).map(|p| p.to_string()).collect();
    if pids.len() > 8 {
        s.push("...".into());
    }
    s.join(", ")
}

/// Process ids below this are kept densely, by index; larger ones (a hand-written or foreign
/// trace may use any `u32`) spill into an ordered map.
const DENSE_PIDS: u32 = 1 << 22;

/// A map keyed by process id with `BTreeMap`'s iteration order (ascending pid) and array
/// speed for the dense ids a simulation uses: checkers look a process up on almost every
/// event, and an ordered tree there dominated their cost.
#[derive(Hash, Clone, Debug)]
pub struct PidMap<V> {
    // invariant: dense[i] is the entry of pid i (< DENSE_PIDS); spill holds pids >= DENSE_PIDS.
    dense: Vec<Option<V>>,
    spill: std::collections::BTreeMap<u32, V>,
    // invariant: the number of `Some` in `dense` plus `spill.len()`.
    len: usize,
}

/// Floats by their bits, each pid's in order ([`crate::form::Floats`]).
impl<V: crate::form::Floats> crate::form::Floats for PidMap<V> {
    fn hash_bits<H: std::hash::Hasher>(&self, h: &mut H) {
        let PidMap { dense, spill, len } = self;
        h.write_usize(dense.len());
        for v in dense {
            v.as_ref().hash_bits(h);
        }
        for (pid, v) in spill {
            h.write_u32(*pid);
            v.hash_bits(h);
        }
        h.write_usize(*len);
    }
}

impl<V> Default for PidMap<V> {
    fn default() -> Self {
        PidMap {
            dense: Vec::new(),
            spill: std::collections::BTreeMap::new(),
            len: 0,
        }
    }
}

impl<V> PidMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the map is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// `pid`'s entry.
    #[inline]
    pub fn get(&self, pid: &u32) -> Option<&V> {
        if *pid < DENSE_PIDS {
            self.dense.get(*pid as usize)?.as_ref()
        } else {
            self.spill.get(pid)
        }
    }
    /// `pid`'s entry, mutably.
    #[inline]
    pub fn get_mut(&mut self, pid: &u32) -> Option<&mut V> {
        if *pid < DENSE_PIDS {
            self.dense.get_mut(*pid as usize)?.as_mut()
        } else {
            self.spill.get_mut(pid)
        }
    }
    /// Whether `pid` has an entry.
    pub fn contains_key(&self, pid: &u32) -> bool {
        self.get(pid).is_some()
    }
    /// Sets `pid`'s entry; returns the previous one.
    #[inline]
    pub fn insert(&mut self, pid: u32, v: V) -> Option<V> {
        let old = if pid < DENSE_PIDS {
            let i = pid as usize;
            if i >= self.dense.len() {
                self.grow(i);
            }
            self.dense[i].replace(v)
        } else {
            self.spill_insert(pid, v)
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.dense.resize_with(i + 1, || None);
    }
    #[cold]
    #[inline(never)]
    fn spill_insert(&mut self, pid: u32, v: V) -> Option<V> {
        self.spill.insert(pid, v)
    }
    #[cold]
    #[inline(never)]
    fn spill_remove(&mut self, pid: u32) -> Option<V> {
        self.spill.remove(&pid)
    }
    /// `pid`'s entry, inserting `f()` first if it has none.
    pub(crate) fn get_or_insert_with(&mut self, pid: u32, f: impl FnOnce() -> V) -> &mut V {
        if !self.contains_key(&pid) {
            self.insert(pid, f());
        }
        self.get_mut(&pid).expect("inserted above")
    }
    /// Removes and returns `pid`'s entry.
    #[inline]
    pub fn remove(&mut self, pid: &u32) -> Option<V> {
        let old = if *pid < DENSE_PIDS {
            self.dense.get_mut(*pid as usize)?.take()
        } else {
            self.spill_remove(*pid)
        };
        if old.is_some() {
            self.len -= 1;
        }
        old
    }
    /// Removes every entry.
    pub fn clear(&mut self) {
        self.dense.clear();
        self.spill.clear();
        self.len = 0;
    }
    /// The entries in ascending pid order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        let dense = if self.len == 0 {
            &self.dense[..0]
        } else {
            &self.dense[..]
        };
        dense
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i as u32, v)))
            .chain(self.spill.iter().map(|(p, v)| (*p, v)))
    }
    /// The entries in ascending pid order, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut V)> {
        let dense = if self.len == 0 {
            &mut self.dense[..0]
        } else {
            &mut self.dense[..]
        };
        dense
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| v.as_mut().map(|v| (i as u32, v)))
            .chain(self.spill.iter_mut().map(|(p, v)| (*p, v)))
    }
    /// The values in ascending pid order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
    /// The values in ascending pid order, mutably.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.iter_mut().map(|(_, v)| v)
    }
    /// The pids in ascending order.
    pub fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|(p, _)| p)
    }
}

/// A set of process ids: a [`PidMap`] of nothing.
pub(crate) type PidSet = PidMap<()>;

impl PidMap<()> {
    /// Adds `pid`; whether it was new.
    #[inline]
    pub fn add(&mut self, pid: u32) -> bool {
        self.insert(pid, ()).is_none()
    }
    /// Whether `pid` is in the set.
    pub fn contains(&self, pid: &u32) -> bool {
        self.contains_key(pid)
    }
}

#[cfg(test)]
mod pid_map_tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random operations applied to a `PidMap` and a `BTreeMap` keep them identical,
    /// including iteration order across the dense/spill boundary.
    #[test]
    fn behaves_like_a_btreemap() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut a: PidMap<u64> = PidMap::new();
        let mut b: BTreeMap<u32, u64> = BTreeMap::new();
        for step in 0..20_000u64 {
            let pid = match rng.random_range(0..10u32) {
                0 => DENSE_PIDS + rng.random_range(0..5u32),
                1 => u32::MAX - rng.random_range(0..3u32),
                _ => rng.random_range(0..300u32),
            };
            match rng.random_range(0..4u32) {
                0 | 1 => assert_eq!(a.insert(pid, step), b.insert(pid, step)),
                2 => assert_eq!(a.remove(&pid), b.remove(&pid)),
                _ => {
                    *a.get_or_insert_with(pid, || 7) += 1;
                    *b.entry(pid).or_insert(7) += 1;
                }
            }
            assert_eq!(a.len(), b.len());
            assert_eq!(a.get(&pid), b.get(&pid));
            if step % 1000 == 0 {
                let x: Vec<(u32, u64)> = a.iter().map(|(p, v)| (p, *v)).collect();
                let y: Vec<(u32, u64)> = b.iter().map(|(p, v)| (*p, *v)).collect();
                assert_eq!(x, y);
            }
        }
        a.clear();
        assert!(a.is_empty() && a.iter().next().is_none());
    }
}

#[cfg(test)]
mod demand_tests {
    use super::*;
    use crate::trace::{CrashPoint, OpKind};

    /// A process waits from its request to its fetch; a dead one does not wait, even when the
    /// store grants the reservation it sent before it died, until it restarts and asks again.
    #[test]
    fn a_dead_process_does_not_wait() {
        let mut d = Demand::new(1);
        let reserve = |t| Event::OpSent {
            t,
            pid: 0,
            thread: 0,
            op: OpKind::Reserve,
        };
        let grant = |t| Event::Grant {
            t,
            pid: 0,
            thread: 0,
            slot: t as i64,
            now: t as i64,
            interval: 10,
            multiplier: 1.0,
        };
        d.event(&reserve(0));
        d.event(&Event::FetchStart {
            t: 10,
            pid: 0,
            thread: 0,
        });
        assert_eq!(d.busy_until(10), 10);
        d.event(&reserve(20));
        d.event(&Event::Crash {
            t: 25,
            pid: 0,
            point: CrashPoint::Immediate,
        });
        d.event(&grant(26)); // the store serves what the dead process sent
        assert_eq!(d.waiting(), 0);
        assert_eq!(d.busy_until(1_000), 15);
        d.event(&Event::Restart { t: 1_000, pid: 0 });
        d.event(&reserve(1_000));
        d.event(&Event::FetchStart {
            t: 1_005,
            pid: 0,
            thread: 0,
        });
        assert_eq!(d.busy_until(1_005), 20);
    }
}

#[cfg(test)]
mod permission_tests {
    use super::*;
    use crate::trace::OpKind;

    /// Every operation that asks for permission (a backend's own `acquire` included) starts a
    /// wait; reports and unlocks do not.
    #[test]
    fn asking_operations_start_a_wait() {
        for &op in OpKind::ALL {
            let mut d = Demand::new(1);
            d.event(&Event::OpSent {
                t: 0,
                pid: 0,
                thread: 0,
                op,
            });
            assert_eq!(d.waiting() == 1, op.asks_permission(), "{op}");
        }
        assert!(OpKind::Acquire.asks_permission());
        assert!(!OpKind::Report.asks_permission() && !OpKind::Unlock.asks_permission());
    }
}

#[cfg(test)]
mod stranded_tests {
    use super::*;
    use crate::trace::{CrashPoint, OpKind, StoreErrorKind};

    fn sent(t: u64, pid: u32) -> Event {
        Event::OpSent {
            t,
            pid,
            thread: 0,
            op: OpKind::Reserve,
        }
    }

    /// Sent during a window, or in flight when it began: stranded until answered. Answered
    /// before the window: not stranded.
    #[test]
    fn in_flight_and_during_a_window_until_answered() {
        let mut a = Awaiting::default();
        let mut s = Stranded::default();
        let feed = |a: &mut Awaiting, s: &mut Stranded, ev: &Event, window_open: bool| {
            a.event(ev);
            s.event(ev, window_open);
        };
        feed(&mut a, &mut s, &sent(0, 0), false);
        feed(&mut a, &mut s, &sent(0, 1), false);
        feed(
            &mut a,
            &mut s,
            &Event::Reply {
                t: 1,
                pid: 1,
                thread: 0,
                op: OpKind::Reserve,
                wait: 0,
            },
            false,
        );
        assert!(s.is_empty());
        s.window_began(&a); // pid 0's operation is still in flight
        assert!(!s.is_empty());
        feed(
            &mut a,
            &mut s,
            &Event::StoreError {
                t: 5,
                pid: 0,
                thread: 0,
                error: StoreErrorKind::Timeout,
            },
            true,
        );
        assert!(s.is_empty());
        feed(&mut a, &mut s, &sent(6, 2), true); // sent during the window
        assert!(!s.is_empty());
        feed(
            &mut a,
            &mut s,
            &Event::Crash {
                t: 7,
                pid: 2,
                point: CrashPoint::Immediate,
            },
            false,
        );
        assert!(s.is_empty());
    }
}

/// A min-queue for values that mostly arrive in ascending order (granted slots): those in
/// order wait in a FIFO, the rest in a heap, and the least of the two heads comes out first.
/// The same values come out in the same order as from one `BinaryHeap` of `Reverse`s, at a
/// FIFO's cost in the usual case.
#[derive(Clone, Debug)]
pub struct MostlySorted<T> {
    // invariant: ascending, front first
    in_order: std::collections::VecDeque<T>,
    others: std::collections::BinaryHeap<std::cmp::Reverse<T>>,
}

/// Every value, the heap's in its own order (as its `Debug` prints them).
impl<T: std::hash::Hash> std::hash::Hash for MostlySorted<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let MostlySorted { in_order, others } = self;
        in_order.hash(h);
        h.write_usize(others.len());
        for v in others.iter() {
            v.0.hash(h);
        }
    }
}

impl<T: Ord + Copy> Default for MostlySorted<T> {
    fn default() -> Self {
        MostlySorted {
            in_order: std::collections::VecDeque::with_capacity(8),
            others: std::collections::BinaryHeap::new(),
        }
    }
}

impl<T: Ord + Copy> MostlySorted<T> {
    /// Add `v`.
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        // (inline: the usual value, in order, goes on the FIFO's back; the heap out of line)
        if self.in_order.back().is_none_or(|b| *b <= v) {
            self.in_order.push_back(v);
        } else {
            self.push_out_of_order(v);
        }
    }

    #[inline(never)]
    fn push_out_of_order(&mut self, v: T) {
        self.others.push(std::cmp::Reverse(v));
    }

    /// Every value, ascending (an explorer's form).
    pub fn sorted(&self) -> Vec<T> {
        let mut v: Vec<T> = self
            .in_order
            .iter()
            .copied()
            .chain(self.others.iter().map(|r| r.0))
            .collect();
        v.sort_unstable();
        v
    }

    /// The least value, if any.
    #[inline]
    pub fn peek(&self) -> Option<T> {
        let a = self.in_order.front().copied();
        if self.others.is_empty() {
            return a;
        }
        let b = self.others.peek().map(|r| r.0);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Remove the least value (the one [`MostlySorted::peek`] returns).
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        // (the usual case, nothing out of order: the FIFO's front is the least)
        if self.others.is_empty() {
            return self.in_order.pop_front();
        }
        let least = self.peek()?;
        if self.in_order.front() == Some(&least) {
            self.in_order.pop_front()
        } else {
            self.others.pop().map(|r| r.0)
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.in_order.len() + self.others.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A map keyed by ids handed out in increasing order (a checker's numbering of responses),
/// with `BTreeMap`'s iteration order (ascending id): the entries in a deque sorted by id. A new
/// id goes on the back; a lookup is a binary search; a removal shifts the entries between it
/// and the nearer end, which is where removals happen (the oldest entries are settled first,
/// the newest often next), so each is O(1) in the usual case, where an ordered tree allocated
/// and rebalanced for every response.
#[derive(Hash, Clone, Debug)]
pub struct IdMap<V> {
    // invariant: ascending by id, each id once.
    entries: std::collections::VecDeque<(u64, V)>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            entries: std::collections::VecDeque::with_capacity(8),
        }
    }
}

impl<V> IdMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn find(&self, id: u64) -> Result<usize, usize> {
        // the front and the back first: where lookups usually land
        match (self.entries.front(), self.entries.back()) {
            (None, _) => Err(0),
            (Some(f), _) if f.0 == id => Ok(0),
            (_, Some(b)) if b.0 == id => Ok(self.entries.len() - 1),
            (_, Some(b)) if b.0 < id => Err(self.entries.len()),
            _ => self.entries.binary_search_by_key(&id, |e| e.0),
        }
    }

    /// Sets `id`'s entry; returns the previous one.
    #[inline]
    pub fn insert(&mut self, id: u64, v: V) -> Option<V> {
        match self.find(id) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, v)),
            Err(i) if i == self.entries.len() => {
                self.entries.push_back((id, v));
                None
            }
            Err(i) => {
                self.entries.insert(i, (id, v));
                None
            }
        }
    }

    /// `id`'s entry.
    #[inline]
    pub fn get(&self, id: &u64) -> Option<&V> {
        self.find(*id).ok().map(|i| &self.entries[i].1)
    }

    /// `id`'s entry, mutably.
    #[inline]
    pub fn get_mut(&mut self, id: &u64) -> Option<&mut V> {
        self.find(*id).ok().map(|i| &mut self.entries[i].1)
    }

    /// Removes and returns `id`'s entry.
    #[inline]
    pub fn remove(&mut self, id: &u64) -> Option<V> {
        let i = self.find(*id).ok()?;
        let e = if i == 0 {
            self.entries.pop_front()
        } else if i + 1 == self.entries.len() {
            self.entries.pop_back()
        } else {
            self.entries.remove(i)
        };
        e.map(|e| e.1)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The entry of the least id.
    #[inline]
    pub fn first(&self) -> Option<(&u64, &V)> {
        self.entries.front().map(|(id, v)| (id, v))
    }

    /// The entries in ascending id order (reversible).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&u64, &V)> {
        self.entries.iter().map(|(id, v)| (id, v))
    }

    /// The values in ascending id order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl<V> std::ops::Index<&u64> for IdMap<V> {
    type Output = V;
    fn index(&self, id: &u64) -> &V {
        self.get(id).expect("no entry for this id")
    }
}

#[cfg(test)]
mod id_map_tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Ids inserted mostly in ascending order and removed anywhere, with lookups and walks
    /// both ways: the same answers and order as a `BTreeMap`.
    #[test]
    fn behaves_like_a_btreemap() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        let mut a: IdMap<u64> = IdMap::new();
        let mut b: BTreeMap<u64, u64> = BTreeMap::new();
        let mut next = 0u64;
        for step in 0..20_000u64 {
            let id = match rng.random_range(0..6u32) {
                0 | 1 => {
                    next += 1;
                    next
                }
                2 => next.saturating_sub(rng.random_range(0..40u64)),
                _ => b.keys().next().copied().unwrap_or(next),
            };
            match rng.random_range(0..5u32) {
                0 | 1 => assert_eq!(a.insert(id, step), b.insert(id, step)),
                2 | 3 => assert_eq!(a.remove(&id), b.remove(&id)),
                _ => {
                    if let (Some(x), Some(y)) = (a.get_mut(&id), b.get_mut(&id)) {
                        *x += 1;
                        *y += 1;
                    }
                }
            }
            assert_eq!(a.len(), b.len());
            assert_eq!(a.get(&id), b.get(&id));
            if step % 500 == 0 {
                assert!(a.iter().eq(b.iter()));
                assert!(a.iter().rev().eq(b.iter().rev()));
            }
        }
        a.clear();
        assert!(a.is_empty() && a.iter().next().is_none());
    }
}

#[cfg(test)]
mod mostly_sorted_tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Mostly ascending pushes with some out of order, interleaved with pops: the same values
    /// come out as from a binary heap.
    #[test]
    fn pops_what_a_binary_heap_pops() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let mut a = MostlySorted::default();
        let mut b = BinaryHeap::new();
        let mut next = 0u64;
        for _ in 0..20_000 {
            if rng.random_bool(0.55) {
                next += rng.random_range(0..5u64);
                let v = if rng.random_bool(0.1) {
                    (
                        next.saturating_sub(rng.random_range(0..20u64)),
                        rng.random_range(0..3u64),
                    )
                } else {
                    (next, rng.random_range(0..3u64))
                };
                a.push(v);
                b.push(Reverse(v));
            } else {
                assert_eq!(a.peek(), b.peek().map(|r| r.0));
                assert_eq!(a.pop(), b.pop().map(|r| r.0));
            }
            assert_eq!(a.len(), b.len());
        }
        while let Some(Reverse(v)) = b.pop() {
            assert_eq!(a.pop(), Some(v));
        }
        assert!(a.is_empty() && a.pop().is_none());
    }
}

#[cfg(test)]
mod thread_tests {
    use super::*;
    use crate::trace::OpKind;

    fn sent(t: u64, pid: u32, thread: u16) -> Event {
        Event::OpSent {
            t,
            pid,
            thread,
            op: OpKind::Reserve,
        }
    }

    fn reply(t: u64, pid: u32, thread: u16) -> Event {
        Event::Reply {
            t,
            pid,
            thread,
            op: OpKind::Reserve,
            wait: 0,
        }
    }

    /// Two threads of one process with reservations in flight at once: each reply answers
    /// its own thread's operation (keyed by pid alone, the second send would overwrite the
    /// first, and thread 0's round trip would read 6 instead of 10).
    #[test]
    fn each_thread_awaits_its_own_operation() {
        let mut a = Awaiting::default();
        assert_eq!(a.event(&sent(0, 3, 0)), None);
        assert_eq!(a.event(&sent(5, 3, 1)), None);
        assert_eq!(a.event(&reply(6, 3, 1)), Some(5));
        assert_eq!(a.event(&reply(10, 3, 0)), Some(0));
        // a crash forgets every thread's
        a.event(&sent(11, 3, 0));
        a.event(&sent(12, 3, 2));
        a.event(&Event::Crash {
            t: 13,
            pid: 3,
            point: crate::trace::CrashPoint::Immediate,
        });
        assert_eq!(a.iter().count(), 0);
    }

    /// A process's threads wait for permission each on its own: the process waits while any
    /// of them does, and a crash ends every one of their waits.
    #[test]
    fn demand_counts_each_thread_and_a_crash_ends_them_all() {
        let mut d = Demand::new(2);
        d.event(&sent(0, 1, 0));
        d.event(&sent(2, 1, 4));
        assert_eq!(d.waiting(), 2);
        assert_eq!(d.waiting_since(1), Some(0));
        assert_eq!(d.waiting_pids(), vec![1]);
        d.event(&Event::FetchStart {
            t: 3,
            pid: 1,
            thread: 0,
        });
        assert_eq!(d.waiting(), 1, "thread 4 still waits");
        assert_eq!(d.waiting_since(1), Some(2));
        d.event(&sent(4, 1, 0));
        d.event(&Event::Crash {
            t: 5,
            pid: 1,
            point: crate::trace::CrashPoint::Immediate,
        });
        assert_eq!(d.waiting(), 0);
        assert_eq!(d.since(), None);
    }
}

/// Events that liveness and self_heal act on only by moving their clocks and feeding their
/// [`Demand`] (a fetch end may start a wait the demand infers): their inline fast path.
#[inline]
pub fn moves_clocks_only(ev: &Event) -> bool {
    matches!(
        ev,
        Event::Arrival { .. }
            | Event::FetchEnd { .. }
            | Event::Deny { .. }
            | Event::LockAcquired { .. }
            | Event::LockReleased { .. }
            | Event::Uncapped { .. }
            | Event::JobEvent { .. }
            | Event::Backfill { .. }
            | Event::Platform { .. }
            | Event::End { .. }
    )
}
