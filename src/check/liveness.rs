//! `liveness`: when offered load exceeds the effective rate, achieved throughput reaches at
//! least `(1 - epsilon)` of it.
//!
//! - **Effective rate**: `rate / multiplier in force`, integrated over time. For a pace the
//!   multiplier in force is the one granted for the last slot reached (a pace grants slots up
//!   to N intervals ahead and spaces the next slot by the previous grant's interval, so a
//!   change takes effect on the slot timeline, not when announced); without grants, the last
//!   one announced. For concurrency locks ([`Detail::lock_use`] = `concurrency`) a lock
//!   cannot give more than `locks / fetch time`, so the target is the smaller of that and the
//!   rate ([`Detail::lock_count`], [`Detail::fetch_mean_ns`]).
//!   A design whose processes pace alone (`local_divided`: [`Detail::process_spacing_ns`])
//!   divides the rate among its processes: while some are dead (a kill, until the restart), the
//!   target is the live processes' share, `rate x live / processes`; their slots are not the
//!   survivors' to take.
//! - **Demand**: the rate is owed only while some live process waits for permission (see
//!   [`crate::check::common::Demand`]); the expected count is the effective rate integrated
//!   over exactly those times. When the header's options give the offered load
//!   ([`Detail::arrival_rate`] per process, or closed-loop `think_mean_ns + fetch_mean_ns`)
//!   and it is below the rate, the property does not apply.
//! - **Excluded**:
//!   - fault windows in which the store or its lock is out of the backend's hands
//!     (`store_outage`, `store_restart`, `partition`, `long_transaction`, `store_latency`;
//!     `degradation` judges those), until every store operation sent during one is answered
//!     (a client timeout outlives the outage);
//!   - after such a window ends, while a `divided` fallback may still park a process on its
//!     local slot before it asks the store again: `(cap + 1)` intervals x multiplier
//!     ([`Detail::fallback_cap`]; a divided fallback is assumed when [`Detail::fallback`] is
//!     absent);
//!   - after each kill, the time `self_heal` allows for healing: interval x multiplier plus
//!     the backend's release delay for a dead holder ([`Detail::dead_holder_release`]);
//!     a wedge lasts beyond it and is counted.
//!
//!   Not excluded: `destination_throttle`, which leaves the store and backend untouched (the
//!   multiplier it raises already lowers the target).
//! - **Verdict**: fetch starts outside excluded windows `>= (1 - epsilon) x expected - 1`.
//!   `epsilon` is [`Detail::epsilon`] (the scenario's `checks.epsilon`), else
//!   [`Detail::DEFAULT_EPSILON`], which the verdict then names.
//!
//! An external worker's trace with `demand = "closed_loop"` in its detail (no asks reported,
//! a closed loop without think time) infers demand from the fetches
//! ([`crate::check::common::Demand::for_header`]), and is judged like a pace backend's unless
//! the detail states a walk lock (`ttl_ns` or `walk`).
//!
//! It catches the in-transaction serialisation (every reserver waits behind an open
//! transaction: throughput about 1 / hold) and connection exhaustion (holders occupy every
//! session), and a wedged pace. Applies to pace backends (the trace has grants) and to lock
//! backends that state a lock use; a walk lock has no throughput target.

use crate::check::common::{Demand, MostlySorted, Shared, Stranded, base_interval, secs};
use crate::check::{Status, Verdict};
use crate::trace::{Detail, Event, FaultKind, Header, LockUse, StoreFallback};
use std::collections::BTreeSet;

/// The liveness checker.
#[derive(Clone, Debug)]
pub struct Liveness {
    rate: f64,
    base: u64,
    epsilon: f64,
    // the header stated no epsilon (the witness says the default was assumed)
    epsilon_assumed: bool,
    lock_cap: Option<f64>,
    lock_use: Option<LockUse>,
    // the processes pace alone ([`Detail::process_spacing_ns`]): the target is the live ones'
    // share; how many there are and how many are dead now
    divided: bool,
    processes: u32,
    dead: u32,
    shares_lost: bool,
    offered: Option<f64>,
    // demand is inferred from the fetches ([`Demand::for_header`]); who waits is the suite's
    // ([`Shared::demand`])
    implied: bool,
    m: f64,
    // invariant: `target_for(m)`, the effective rate (kept, not recomputed for every event).
    target: f64,
    // invariant: granted slots (reference time, multiplier bits) not yet reached.
    slots: MostlySorted<(u64, u64)>,
    excluded: BTreeSet<u32>,
    // processes whose store operation was sent while the store was out, or was in flight when
    // it went out, and is not yet answered (a client timeout outlives the outage)
    stranded: Stranded,
    // after a kill, the backend's allowance to heal (interval x multiplier + its release
    // mechanism's delay) is judged by self_heal, not here
    heal_slack: u64,
    heal_until: u64,
    started: bool,
    last: u64,
    // the slots expected in the busy time before the current target took force; the busy time
    // since is `busy_at_target` (whole nanoseconds: a sum that does not depend on how the time
    // was cut into events, so two runs that waited alike keep equal states, as an explorer's
    // pruning needs; `expected()` folds it in)
    expected_before: f64,
    busy_at_target: u64,
    busy_ns: u64,
    total_ns: u64,
    starts: u64,
    grants: bool,
    // the longest a divided fallback parks a process on a local slot, at multiplier 1 (ns)
    fallback_park: u64,
    // the detail states a walk lock (a TTL or fetches per walk): no throughput target
    walk_lock: bool,
}

crate::exact_hash!(Liveness {
    rate: bits,
    base,
    epsilon: bits,
    epsilon_assumed,
    lock_cap: bits,
    lock_use,
    divided,
    processes,
    dead,
    shares_lost,
    offered: bits,
    implied,
    m: bits,
    target: bits,
    slots,
    excluded,
    stranded,
    heal_slack,
    heal_until,
    started,
    last,
    expected_before: bits,
    busy_at_target,
    busy_ns,
    total_ns,
    starts,
    grants,
    fallback_park,
    walk_lock
});

impl Liveness {
    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> Liveness {
        let d = &h.backend_detail;
        let (epsilon, epsilon_assumed) = match d.epsilon {
            Some(e) if (0.0..1.0).contains(&e) => (e, false),
            _ => (Detail::DEFAULT_EPSILON, true),
        };
        let lock_use = d.lock_use;
        let fetch = d.fetch_mean_ns.filter(|f| *f > 0.0);
        let locks = d.lock_count() as f64;
        let lock_cap = match (lock_use, fetch) {
            (Some(LockUse::Concurrency), Some(f)) => Some(locks * 1e9 / f),
            _ => None,
        };
        let n = h.processes as f64;
        // a closed loop per thread; a process's `max_concurrency` permits let at most K of
        // them fetch at once (a thinking thread holds none)
        let threads = d.threads() as f64;
        let offered = match d.arrival_rate {
            Some(a) => Some(a * n),
            None => match (d.think_mean_ns, fetch) {
                (Some(think), Some(f)) if think + f > 0.0 => {
                    let per_process = threads * 1e9 / (think + f);
                    let bound = d.max_concurrency().map_or(f64::INFINITY, |k| k as f64 * 1e9 / f);
                    Some(n * per_process.min(bound))
                }
                _ => None,
            },
        };
        let mut l = Liveness {
            rate: h.rate,
            base: base_interval(h),
            epsilon,
            epsilon_assumed,
            lock_cap,
            lock_use,
            divided: d.process_spacing_ns.is_some(),
            processes: h.processes.max(1),
            dead: 0,
            shares_lost: false,
            offered,
            implied: Demand::for_header(h).implied(),
            fallback_park: match d.fallback {
                Some(StoreFallback::Divided) | None => base_interval(h).saturating_mul(d.fallback_cap(h.processes) + 1),
                Some(_) => 0,
            },
            walk_lock: d.ttl_ns.is_some() || d.walk.is_some(),
            m: 1.0,
            target: f64::NAN, // set below
            slots: MostlySorted::default(),
            excluded: BTreeSet::new(),
            stranded: Stranded::default(),
            heal_slack: d.dead_holder_release().map_or(0, |(_, ns)| ns),
            heal_until: 0,
            started: false,
            last: 0,
            expected_before: 0.0,
            busy_at_target: 0,
            busy_ns: 0,
            total_ns: 0,
            starts: 0,
            grants: false,
        };
        l.set_m(1.0);
        l
    }

    /// The effective rate under multiplier `m`.
    fn target_for(&self, m: f64) -> f64 {
        let mut r = self.rate / m.max(1.0);
        if self.divided && self.dead > 0 {
            r *= f64::from(self.processes.saturating_sub(self.dead)) / f64::from(self.processes);
        }
        self.lock_cap.map_or(r, |c| r.min(c))
    }

    /// An explorer's form at `now` ([`crate::form`]): its configuration and target, the slots
    /// granted and not yet reached and where its accounting stands (relative to now), the
    /// heal allowance while it lasts, and as slack the sums the verdict is monotone in: it
    /// fails when the time waited is at least ten intervals and the fetch starts fall short of
    /// `(1 - epsilon) x expected - 1`, so more time waited, more slots expected (before the
    /// current target, and time at it) and fewer starts are worse; with the same events to
    /// come each grows alike. (The total time is the witness's.)
    pub fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        // (every field named: one added later is placed here, or the build fails)
        let Liveness {
            rate,
            base,
            epsilon,
            epsilon_assumed,
            lock_cap,
            lock_use,
            divided,
            processes,
            dead,
            shares_lost,
            offered,
            implied,
            m,
            target,
            slots,
            excluded,
            stranded,
            heal_slack,
            heal_until,
            started,
            last,
            expected_before,
            busy_at_target,
            busy_ns,
            total_ns: _,
            starts,
            grants,
            fallback_park,
            walk_lock,
        } = self;
        f.word(fingerprint(&(
            (
                rate.to_bits(),
                base,
                epsilon.to_bits(),
                epsilon_assumed,
                lock_cap.map(f64::to_bits),
                lock_use,
            ),
            (
                divided,
                processes,
                dead,
                shares_lost,
                offered.map(f64::to_bits),
                implied,
            ),
            (m.to_bits(), target.to_bits(), heal_slack, started),
            (grants, fallback_park, walk_lock),
        )));
        // (who is excluded, who is stranded: each process by its name)
        f.per_pid(excluded.iter().map(|&pid| (pid, ())));
        stranded.form(f);
        for (t, mb) in slots.sorted() {
            f.instant(t);
            f.word(mb);
        }
        // (read only against the accounting's clock, `last`: one not after it reads as none)
        f.word(heal_until.saturating_sub(*last));
        f.instant(*last);
        // (non-negative floats order as their bits do)
        f.more_is_worse(expected_before.max(0.0).to_bits() as i64);
        f.more_is_worse(*busy_at_target as i64);
        f.more_is_worse(*busy_ns as i64);
        f.less_is_worse(*starts as i64);
    }

    /// A process died (`+1`) or restarted (`-1`): a divided design's target follows.
    fn set_dead(&mut self, dead: u32) {
        self.dead = dead.min(self.processes);
        if self.divided {
            self.shares_lost |= self.dead > 0;
            let m = self.m;
            self.set_m(m);
        }
    }

    fn set_m(&mut self, m: f64) {
        self.m = m;
        let target = self.target_for(m);
        if target.to_bits() != self.target.to_bits() {
            self.expected_before = self.expected();
            self.busy_at_target = 0;
            self.target = target;
        }
    }

    /// The slots expected in the busy time so far.
    fn expected(&self) -> f64 {
        if self.busy_at_target == 0 {
            self.expected_before
        } else {
            self.expected_before + self.busy_at_target as f64 / 1e9 * self.target
        }
    }
}

impl Liveness {
    fn included(&self) -> bool {
        self.excluded.is_empty() && self.stranded.is_empty()
    }

    /// Account for the time from `self.last` to `t` in which nothing changed but the slots
    /// reached; `waiting`: some live process waited for permission throughout.
    #[inline(always)]
    fn advance(&mut self, t: u64, waiting: bool) {
        // (checked inline) an event at the instant of the last one, with no slot reached, has
        // nothing to account: every sum below would add zero (the expected count too, as long
        // as the target is finite)
        let reached = self.slots.peek().is_some_and(|(at, _)| at <= t);
        if t <= self.last && self.target.is_finite() && !reached {
            return;
        }
        // (checked inline) no slot reached and no heal allowance ending in between: the time
        // up to `t` is one stretch, which `account` would take in one turn of its loop
        if !reached && t > self.last && self.heal_until <= self.last {
            let dt = t - self.last;
            if self.started && self.included() {
                self.total_ns += dt;
                if waiting {
                    self.busy_ns += dt;
                    self.busy_at_target += dt;
                }
            }
            self.last = t;
            return;
        }
        self.account(t, waiting);
    }

    fn account(&mut self, t: u64, waiting: bool) {
        loop {
            let next = match self.slots.peek() {
                Some((at, m)) if at <= t => Some((at, f64::from_bits(m))),
                _ => None,
            };
            let mut upto = next.map_or(t, |n| n.0.max(self.last));
            if self.heal_until > self.last && self.heal_until < upto {
                upto = self.heal_until;
            }
            let dt = upto.saturating_sub(self.last);
            if self.started && self.included() && self.last >= self.heal_until {
                self.total_ns += dt;
                if waiting {
                    self.busy_ns += dt;
                    self.busy_at_target += dt;
                }
            }
            self.last = self.last.max(upto);
            match next {
                Some((at, m)) if at <= self.last => {
                    self.slots.pop();
                    // (the same multiplier as in force, the usual case: the same target)
                    if m.to_bits() != self.m.to_bits() {
                        self.set_m(m);
                    }
                }
                _ if self.last >= t => break,
                _ => {}
            }
        }
    }
}

impl Liveness {
    /// One event, with the suite's shared state ([`Shared`]: who waited before it).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, shared: &Shared) {
        let t = ev.t();
        self.advance(t, shared.demand().waiting() > 0);
        // (checked inline) events that do nothing here but move the accounting's clock, and the
        // usual ones outside store windows: a request (no window to strand it), an answer (none
        // stranded), a grant and a fetch start, which `step` would take as here
        match ev {
            _ if super::common::moves_clocks_only(ev) => {}
            Event::OpSent { .. } if self.excluded.is_empty() => self.started = true,
            Event::Reply { .. } | Event::StoreError { .. } if self.stranded.is_empty() => {}
            Event::Grant {
                multiplier, slot, now, ..
            } => self.granted(t, *slot, *now, *multiplier),
            Event::FetchStart { .. } => self.fetch_started(t),
            _ => self.step(ev, shared),
        }
    }

    /// A grant at `t`.
    #[inline]
    fn granted(&mut self, t: u64, slot: i64, now: i64, multiplier: f64) {
        self.started = true;
        self.grants = true;
        // the multiplier takes effect at the granted slot: a pace grants up to N slots
        // ahead, and spaces the next slot by this grant's interval
        let at = (t as i128 + slot as i128 - now as i128).clamp(0, u64::MAX as i128) as u64;
        self.slots.push((at.max(t), multiplier.to_bits()));
    }

    /// A fetch start at `t`.
    #[inline]
    fn fetch_started(&mut self, t: u64) {
        self.started = true;
        if self.included() && t >= self.heal_until {
            self.starts += 1;
        }
    }

    /// Any event, after [`Liveness::advance`] to its time.
    fn step(&mut self, ev: &Event, shared: &Shared) {
        let t = ev.t();
        self.stranded.event(ev, !self.excluded.is_empty());
        match ev {
            Event::OpSent { .. } => self.started = true,
            Event::Grant {
                multiplier, slot, now, ..
            } => self.granted(t, *slot, *now, *multiplier),
            Event::Multiplier { to, .. } if !self.grants => self.set_m(*to),
            Event::Crash { .. } => {
                let paced = (self.base as f64 * self.m.max(1.0)) as u64;
                self.heal_until = self.heal_until.max(t + paced + self.heal_slack);
                self.set_dead(self.dead + 1);
            }
            Event::Restart { .. } => self.set_dead(self.dead.saturating_sub(1)),
            Event::FetchStart { .. } => self.fetch_started(t),
            Event::Fault {
                id,
                kind:
                    FaultKind::StoreOutage
                    | FaultKind::StoreRestart
                    | FaultKind::Partition
                    | FaultKind::LongTransaction
                    | FaultKind::StoreLatency,
                start,
                ..
            } => {
                if *start {
                    self.excluded.insert(*id);
                    self.stranded.window_began(shared.awaiting());
                } else {
                    self.excluded.remove(id);
                    // processes that fell back (a refusal, or a timeout behind the slow store or
                    // the held lock) may sit out a local slot before they ask the store again
                    let park = (self.fallback_park as f64 * self.m.max(1.0)) as u64;
                    self.heal_until = self.heal_until.max(t + park);
                }
            }
            _ => {}
        }
    }

    /// The verdicts, after the last event (none when the property does not apply).
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let lock_target = self.lock_use.is_some();
        // an external closed loop: demand is known from the fetches, so the rate is owed
        // (not for a walk lock, which has no throughput target)
        let implied = self.implied && !self.walk_lock;
        if !self.grants && !lock_target && !implied {
            return Vec::new();
        }
        let eps = self.epsilon;
        let target_note = match self.lock_cap {
            Some(c) if c < self.rate => witness!("locks / fetch time = {c:.2}/s"),
            _ if self.shares_lost => witness!(
                "rate {}/s / multiplier, x the live processes' share while some were dead",
                self.rate
            ),
            _ => witness!("rate {}/s / multiplier", self.rate),
        };
        if let Some(o) = self.offered
            && o < self.rate
        {
            return vec![Verdict {
                name: "liveness",
                status: Status::NotJudged,
                detail: witness!(
                    "offered load about {o:.2}/s does not exceed the rate {}/s: not judged; {} fetches",
                    self.rate,
                    self.starts
                ),
            }];
        }
        let busy_s = self.busy_ns as f64 / 1e9;
        if self.busy_ns < 10 * self.base {
            return vec![Verdict {
                name: "liveness",
                status: Status::NotJudged,
                detail: witness!(
                    "not judged: processes waited for permission only {}, too little demand to judge",
                    secs(self.busy_ns)
                ),
            }];
        }
        let expected = self.expected();
        let effective = expected / busy_s;
        let achieved = self.starts as f64 / busy_s;
        let needed = (1.0 - eps) * expected - 1.0;
        let share = if self.total_ns > 0 {
            100.0 * self.busy_ns as f64 / self.total_ns as f64
        } else {
            0.0
        };
        let pass = self.starts as f64 >= needed;
        let epsilon_note = if self.epsilon_assumed {
            witness!(" (epsilon {} assumed)", Detail::DEFAULT_EPSILON)
        } else {
            String::new()
        };
        let detail = if pass {
            witness!(
                "achieved {achieved:.2}/s ({} fetch starts) over {} of demand ({share:.0}% of the run) against effective \
                 {effective:.2}/s ({target_note}, time-weighted): at least {:.0}%{}",
                self.starts,
                secs(self.busy_ns),
                100.0 * (1.0 - eps),
                epsilon_note
            )
        } else {
            witness!(
                "throughput collapsed: achieved {achieved:.2}/s ({} fetch starts) while processes waited for permission \
                 {} ({share:.0}% of the run), below {:.0}% of the effective {effective:.2}/s ({target_note}, time-weighted; \
                 needed {:.0} starts){}: serialised reservations, exhausted sessions or a wedge",
                self.starts,
                secs(self.busy_ns),
                100.0 * (1.0 - eps),
                needed.ceil(),
                epsilon_note
            )
        };
        vec![Verdict {
            name: "liveness",
            status: Status::of(pass),
            detail,
        }]
    }
}
