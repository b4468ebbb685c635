//! Checkers: properties over a trace. Each reads only the event stream (streaming), and
//! returns pass or fail plus a witness (the first violating window or event, with times in
//! seconds and process ids), never a panic.
//!
//! | verdict | property | applies when |
//! |---------|----------|--------------|
//! | `ceiling`, `slot_ceiling` | `ceiling`: arrivals / granted slots conform to the rate (not judged with none) | always |
//! | `backoff_coherence` | `backoff`: one multiplier schedule for the fleet, slots spaced by it | grants or multiplier changes |
//! | `self_heal` | [`self_heal`]: the pace resumes within one interval after a kill, and kills never leave the fleet's requests unserved for long (not judged when no fetch followed any kill) | a crash |
//! | `degradation` | `degradation`: within the rate and not zero while the store is out | an outage or partition window |
//! | `liveness` | `liveness`: throughput reaches the effective rate under demand | pace backends, rate/concurrency locks |
//! | `mutual_exclusion` | `mutual_exclusion`: at most K critical sections | lock events |
//! | `fairness` | `fairness`: Jain's index and the longest wait for permission (a verdict against `[checks] wait_bound`; reported only without one; not judged when nothing was fetched) | always |
//! | `work_heal` | `work_heal`: every download's event finalised or recovered by the sweep; no source re-strands forever | `job_event` events (`[jobs]`) |
//!
//! A trace that declares platforms (`backend_detail.platforms`) has `ceiling`,
//! `slot_ceiling` and `mutual_exclusion` judged per platform instead (`platforms`): each
//! platform has its own destination and its own lock key.
//!
//! A trace from an external worker program (its header's `backend_detail` names the `worker`;
//! [`crate::live::external`]) holds what the destination and the harness saw, plus whatever
//! events the worker chose to print: a check whose events are missing reads "not judged: needs
//! ..." instead of judging on missing evidence ([`Suite::verdicts`]).
//!
//! Checkers are configured from the header: the rate, the burst, the multiplier cap, and the
//! typed part of `backend_detail` ([`crate::trace::Detail`]: the backend's facts and the
//! scenario settings; each field says what its absence means). Each checker's docs say which
//! fields it reads; none reads the backend's opaque options.

/// A verdict's witness text: `format!` while verdicts are written in full, and an empty string
/// while only their statuses are wanted ([`Suite::statuses`]: an explorer judges every schedule
/// and reads the text of the few that fail, from a replay).
macro_rules! witness {
    ($($arg:tt)*) => {
        if $crate::check::witness_wanted() { format!($($arg)*) } else { String::new() }
    };
}

thread_local! {
    // Set while `Suite::statuses` runs on this thread.
    static TERSE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether verdicts being written now want their witness text (`witness!`).
#[inline]
pub(crate) fn witness_wanted() -> bool {
    !TERSE.with(std::cell::Cell::get)
}

pub(crate) mod backoff;
pub(crate) mod ceiling;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod common;
pub(crate) mod degradation;
pub(crate) mod fairness;
pub(crate) mod liveness;
pub(crate) mod mutual_exclusion;
pub(crate) mod platforms;
// reached by the suite, not the team API
#[doc(hidden)]
pub mod self_heal;
pub(crate) mod work_heal;

use crate::trace::{Event, Header, Sink};
use serde::Serialize;

/// What a check concluded: the property held, it broke, or the run could not say.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The property held.
    Pass,
    /// The property broke; the detail is the witness.
    Fail,
    /// The trace lacks what the check needs (events a worker did not report, or too little
    /// demand to judge): neither a pass nor a failure; the detail says what it needs. Outputs
    /// show it as its own value (`-` in tables, `"not_judged"` in JSON, `<skipped>` in JUnit);
    /// `--require-judged` makes it fail a command.
    NotJudged,
}

impl Status {
    /// `Pass` when `ok`, else `Fail`.
    pub fn of(ok: bool) -> Status {
        if ok { Status::Pass } else { Status::Fail }
    }
    /// The word in tables and JSON: `pass`, `fail`, `not_judged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotJudged => "not_judged",
        }
    }
}

/// A checker's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Checker name.
    #[serde(skip)]
    pub name: &'static str,
    /// Pass, fail, or not judged.
    #[serde(rename = "verdict")]
    pub status: Status,
    /// One line: the figure measured, the witness of the violation, or what the check needs.
    pub detail: String,
}

impl Verdict {
    /// Did the property hold? (False for a failure and for a check not judged.)
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
    /// Did the property break?
    pub fn failed(&self) -> bool {
        self.status == Status::Fail
    }
    /// Did the check judge the run (pass or fail)?
    pub fn judged(&self) -> bool {
        self.status != Status::NotJudged
    }
}

/// How a verdict's detail begins when the trace lacks what the checker needs (an external
/// worker that does not report those events): its status is [`Status::NotJudged`], and the
/// detail says what it needs.
pub const NOT_JUDGED: &str = "not judged: needs ";

/// What an external worker's trace holds, for [`Suite::verdicts`]: which checks it can judge.
/// Only traces whose header names an external `worker` are screened this way; pacesim's own
/// workers report every event.
#[derive(Clone, Hash, Debug, Default)]
struct Seen {
    grant: bool,
    multiplier: bool,
    lock: bool,
    asks: bool,
    pressure: bool,
    crash: bool,
    /// The header's `demand = "closed_loop"`: demand is known from the fetches alone.
    implied_demand: bool,
    /// The design the worker implements takes locks (its detail states locks or a TTL).
    lock_design: bool,
    /// The header states `[checks] wait_bound`: `fairness` judges waits.
    wait_bound: bool,
}

impl Seen {
    fn event(&mut self, ev: &Event) {
        match ev {
            Event::Grant { .. } => {
                self.grant = true;
                self.asks = true;
            }
            Event::Multiplier { .. } => self.multiplier = true,
            Event::LockAcquired { .. } | Event::LockReleased { .. } => self.lock = true,
            Event::OpSent { op, .. } if op.asks_permission() => self.asks = true,
            Event::FetchEnd { status, .. } if *status == 429 || *status == 503 => self.pressure = true,
            Event::Crash { .. } => self.crash = true,
            _ => {}
        }
    }

    /// The verdict of check `name` as it stands, or what replaces it: `Some(needs)` when the
    /// trace lacks what the check needs.
    fn needs(&self, name: &str) -> Option<&'static str> {
        let demand =
            "op_sent or grant events (when a process asks for permission), or a closed loop without think time";
        match name {
            "slot_ceiling" if !self.grant => Some("grant events (the slots the pacer granted)"),
            "backoff_coherence" if !self.multiplier && (self.pressure || !self.grant) => {
                Some("multiplier events (the worker's backoff multiplier) to judge its backoff")
            }
            "mutual_exclusion" if self.lock_design && !self.lock => {
                Some("lock_acquired and lock_released events (the worker's critical sections)")
            }
            "self_heal" if self.crash && !self.asks && !self.implied_demand => Some(demand),
            "liveness" if !self.asks && !self.implied_demand && !self.lock_design => Some(demand),
            "fairness" if self.wait_bound && !self.asks => {
                Some("op_sent or grant events (when a process asks for permission) to judge its waits")
            }
            _ => None,
        }
    }
}

/// Every checker's verdict name, in the order [`Suite::verdicts`] reports them (the verdict
/// matrix's columns).
pub const ORDER: [&str; 9] = [
    "ceiling",
    "slot_ceiling",
    "backoff_coherence",
    "self_heal",
    "degradation",
    "liveness",
    "mutual_exclusion",
    "fairness",
    "work_heal",
];

/// A streaming checker. (`self_heal`, `degradation`, `liveness` and `fairness` read what the
/// suite follows once for all of them, [`common::Shared`], and take it with each event and
/// for their verdicts instead.)
pub trait Checker: Sink {
    /// The verdicts, after the last event; empty when the property does not apply to the trace.
    fn verdicts(&mut self) -> Vec<Verdict>;
    /// Whether its form ([`Sink::form`]) writes every process id it keeps through
    /// [`crate::form::Form::pid`] (data kept per process through
    /// [`crate::form::Form::per_pid`]) and its verdict treats every process alike, so that an
    /// explorer may merge states that differ only in which process is which (symmetry
    /// reduction). `false` (the default): a state is then formed with processes named by id.
    fn relabels(&self) -> bool {
        false
    }
    /// A copy of this checker as it stands, for an explorer that branches from a saved world
    /// rather than replaying a run's first decisions (`pacesim explore`): `Some(Box::new(
    /// self.clone()))` for a checker that is `Clone`. `None` (the default): the explorer replays
    /// every run from its start, as fast as before but without the saving.
    fn duplicate(&self) -> Option<Box<dyn Checker + Send>> {
        None
    }
}

/// A team's own checker, handed to pacesim by its program ([`register`];
/// [`crate::cli::main_with_checkers`] does it): a property pacesim does not know, judged beside
/// pacesim's on every trace the program judges (`run`, `simulate`, `matrix`, `sweep`, `check`,
/// `live`, `conform`, `explore`), in every output (tables, `--json`, JUnit, the expected
/// matrix's columns, `--checks`).
#[derive(Clone, Copy)]
pub struct CheckerSpec {
    /// Its verdict's name: `a-z`, `0-9` and `_`, none of [`ORDER`]. The suite names every
    /// verdict the checker gives this.
    pub name: &'static str,
    /// One line: the property (for `--help`-like listings and the docs).
    pub summary: &'static str,
    /// The checker for the trace this header introduces (configured from the header, as
    /// pacesim's are; its [`Sink::header`] is not called again); `None` when the property
    /// does not apply to it (then no verdict). It judges by [`Checker::verdicts`] after the last event; a trace that lacks what it
    /// needs gets [`Status::NotJudged`] with what it needs. Its [`Sink::state`] is what an
    /// explorer prunes by (the default, `None`, never prunes a run it judges).
    pub new: fn(&Header) -> Option<Box<dyn Checker + Send>>,
}

crate::exact_hash!(CheckerSpec {
    name,
    summary: ignored("its name's text: the same checker"),
    new: ignored("its name's constructor: the same checker")
});

impl std::fmt::Debug for CheckerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckerSpec").field("name", &self.name).finish()
    }
}

/// Checkers registered by the program that runs pacesim ([`register`]).
static REGISTERED: std::sync::OnceLock<Vec<CheckerSpec>> = std::sync::OnceLock::new();

/// Add a team's own checkers to every suite: the program's `main` hands them over once,
/// before anything runs ([`crate::cli::main_with_checkers`] does it).
///
/// # Errors
///
/// A second call, a name that is empty, not of `a-z`, `0-9` and `_`, one of pacesim's
/// ([`ORDER`]), or given twice.
pub fn register(specs: Vec<CheckerSpec>) -> Result<(), String> {
    registrable("checker", ORDER.to_vec(), specs.iter().map(|s| s.name))?;
    REGISTERED
        .set(specs)
        .map_err(|_| "checkers are registered once, before anything runs".to_string())
}

/// Names a team registers (`what`: backend, checker) beside `taken` (pacesim's own): each of
/// `a-z`, `0-9` and `_`, not empty, not taken, given once.
pub(crate) fn registrable<'a>(
    what: &str,
    mut taken: Vec<&'a str>,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    for n in names {
        if n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(format!("{what} name `{n}`: use a-z, 0-9 and _"));
        }
        if taken.contains(&n) {
            return Err(format!("{what} `{n}` is registered twice (or is one of pacesim's)"));
        }
        taken.push(n);
    }
    Ok(())
}

/// The registered checkers ([`register`]), in the order given.
pub fn registered() -> &'static [CheckerSpec] {
    REGISTERED.get().map_or(&[], Vec::as_slice)
}

/// Every verdict name: pacesim's ([`ORDER`]), then the registered checkers'.
pub fn names() -> Vec<&'static str> {
    ORDER
        .iter()
        .copied()
        .chain(registered().iter().map(|c| c.name))
        .collect()
}

/// A team's checker in a suite.
struct Own {
    name: &'static str,
    checker: Box<dyn Checker + Send>,
}

// its name only: its state is its own form (`Checker::form`) or `Sink::state`
crate::exact_hash!(Own {
    name,
    checker: ignored("its state is its own form: `Checker::form`")
});

impl std::fmt::Debug for Own {
    // its name only: its state is what its `Sink::state` says (see `Suite::state`)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What may still come in a run, as an explorer knows it when it compares a state
/// ([`Suite::form`]): what a checker's state can still be read by.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ahead {
    /// A process may still be killed.
    pub kills: bool,
    /// At most this many fetches may still start (`None`: no bound known).
    pub fetch_starts: Option<u64>,
}

/// Every checker, run together in one pass; only those that apply to the trace report.
/// (`Suite::default()` is [`Suite::new`]: the registered checkers too.)
#[derive(Hash, Debug)]
pub struct Suite {
    ceiling: Option<ceiling::Ceiling>,
    others: Option<Others>,
    // Some when the header declares platforms: its verdicts replace the fleet-wide ones
    platforms: Option<platforms::PerPlatform>,
    // Some for an external worker's trace (see `Seen`)
    external: Option<Seen>,
    // what several checkers follow alike, kept once
    shared: common::Shared,
    // the checkers it was given to build for each trace ([`CheckerSpec`]), and those built
    specs: Vec<CheckerSpec>,
    own: Vec<Own>,
}

impl Suite {
    /// A copy of the suite as it stands, for an explorer that branches from a saved world:
    /// `None` when a team checker cannot be copied ([`Checker::duplicate`]).
    pub fn duplicate(&self) -> Option<Suite> {
        // (every field named: one added later is copied here, or the build fails)
        let Suite {
            ceiling,
            others,
            platforms,
            external,
            shared,
            specs,
            own,
        } = self;
        let own = own
            .iter()
            .map(|o| {
                Some(Own {
                    name: o.name,
                    checker: o.checker.duplicate()?,
                })
            })
            .collect::<Option<Vec<Own>>>()?;
        Some(Suite {
            ceiling: ceiling.clone(),
            others: others.clone(),
            platforms: platforms.clone(),
            external: external.clone(),
            shared: shared.clone(),
            specs: specs.clone(),
            own,
        })
    }

    /// A fingerprint of what the suite keeps that its verdicts can still depend on, for an
    /// explorer's pruning ([`crate::trace::Sink::state`]): its whole value as its `Hash` declares it, but without
    /// `self_heal` while no process was killed and none may be (`kills_ahead` false): it
    /// judges kills alone, so its verdict is settled then (none), whatever else it saw.
    ///
    /// A team's checker adds its own [`Sink::state`]; `None` when one of them cannot say (then
    /// no run is pruned).
    pub fn state(&self, kills_ahead: bool) -> Option<u64> {
        let mut own = 0u64;
        for o in &self.own {
            own = crate::rng::mix64(own ^ o.checker.state()?);
        }
        Some(crate::rng::mix64(own ^ self.builtin_state(kills_ahead)))
    }

    /// The suite's part of an explorer's form ([`crate::form`]), with `ahead` to come: each
    /// team checker's ([`Sink::form`]), and each of pacesim's by its own form: instants relative
    /// to now, and as slack what its verdict is monotone in. `self_heal` is left out while no
    /// process was killed and none may be (it judges kills alone), and otherwise gives its own
    /// form. Per-platform verdicts and an external worker's trace make the suite absolute (its
    /// [`Suite::state`]). `false` when a team checker cannot say.
    pub fn form(&self, ahead: Ahead, f: &mut crate::form::Form) -> bool {
        let kills_ahead = ahead.kills;
        for o in &self.own {
            if f.relabels() && !o.checker.relabels() {
                f.raw_pids();
            }
            if !o.checker.form(f) {
                return false;
            }
        }
        // (every field named: one added later is placed here, or the build fails)
        let Suite {
            ceiling,
            others,
            platforms,
            external,
            shared,
            specs,
            own: _,
        } = self;
        if platforms.is_some() || external.is_some() {
            f.raw_pids();
            f.word(self.builtin_state(kills_ahead));
            f.absolute();
            return true;
        }
        f.word(crate::choice::fingerprint(specs));
        match ceiling {
            Some(c) => c.form(f),
            None => f.word(1),
        }
        let Some(o) = others else {
            shared.form(f, true);
            return true;
        };
        let Others {
            backoff,
            self_heal,
            degradation,
            liveness,
            mutual_exclusion,
            fairness,
            work_heal,
        } = o;
        let healing = kills_ahead || self_heal.kills() > 0;
        // (when each wait began is read by `fairness` with a bound only)
        shared.form(f, fairness.bounded());
        backoff.form(f);
        if healing {
            self_heal.form(f, shared.demand(), ahead);
        }
        degradation.form(f);
        liveness.form(f);
        mutual_exclusion.form(f);
        fairness.form(f);
        work_heal.form(f);
        true
    }

    fn builtin_state(&self, kills_ahead: bool) -> u64 {
        use crate::choice::fingerprint;
        let Some(o) = &self.others else {
            return fingerprint(self);
        };
        if kills_ahead || o.self_heal.kills() > 0 {
            return fingerprint(self);
        }
        // (every other field named: one added later is fingerprinted or the build fails)
        let Suite {
            ceiling,
            others: _,
            platforms,
            external,
            shared,
            specs,
            own,
        } = self;
        let Others {
            backoff,
            self_heal: _,
            degradation,
            liveness,
            mutual_exclusion,
            fairness,
            work_heal,
        } = o;
        fingerprint(&(
            ceiling,
            (backoff, degradation, liveness, mutual_exclusion, fairness, work_heal),
            platforms,
            external,
            shared,
            specs,
            own,
        ))
    }
}

#[derive(Clone, Hash, Debug)]
struct Others {
    backoff: backoff::BackoffCoherence,
    self_heal: self_heal::SelfHeal,
    degradation: degradation::Degradation,
    liveness: liveness::Liveness,
    mutual_exclusion: mutual_exclusion::MutualExclusion,
    fairness: fairness::Fairness,
    work_heal: work_heal::WorkHeal,
}

impl Others {
    /// Each checker in turn, called directly rather than through `dyn`: the inline checks with
    /// which each skips the events it ignores are then made here, without a call. `shared`:
    /// the suite's shared state, as [`common::Shared`] says.
    #[inline(always)]
    fn event(&mut self, ev: &Event, shared: &common::Shared) {
        self.backoff.event(ev);
        self.self_heal.event(ev, shared);
        self.degradation.event(ev, shared);
        self.liveness.event(ev, shared);
        self.mutual_exclusion.event(ev);
        self.fairness.event(ev, shared);
        self.work_heal.event(ev);
    }

    /// Their verdicts, in [`ORDER`], after the last event.
    fn verdicts(&mut self, shared: &common::Shared) -> Vec<Verdict> {
        let mut v = self.backoff.verdicts();
        v.extend(self.self_heal.verdicts(shared));
        v.extend(self.degradation.verdicts(shared));
        v.extend(self.liveness.verdicts());
        v.extend(self.mutual_exclusion.verdicts());
        v.extend(self.fairness.verdicts());
        v.extend(self.work_heal.verdicts());
        v
    }
}

impl Suite {
    /// An empty suite of pacesim's checkers and the registered ones ([`register`]); checkers
    /// are configured from the header.
    pub fn new() -> Suite {
        Suite::with(registered())
    }

    /// An empty suite of pacesim's checkers and `own`.
    pub fn with(own: &[CheckerSpec]) -> Suite {
        Suite {
            ceiling: None,
            others: None,
            platforms: None,
            external: None,
            shared: common::Shared::default(),
            specs: own.to_vec(),
            own: Vec::new(),
        }
    }

    /// The ceiling checker's figures (after the run).
    pub fn ceiling(&self) -> Option<&ceiling::Ceiling> {
        self.ceiling.as_ref()
    }

    /// When the operation the last event answered (a reply or a store error) was sent: the
    /// round trip it ends, which the figures also measure.
    #[inline]
    pub fn answered(&self) -> Option<u64> {
        self.shared.answered()
    }

    /// All verdicts, in a fixed order: `ceiling`, `slot_ceiling`, `backoff_coherence`,
    /// `self_heal`, `degradation`, `liveness`, `mutual_exclusion`, `fairness`, `work_heal`.
    ///
    /// For an external worker's trace (its header's `backend_detail` names a `worker`), a
    /// check whose events the worker did not report is "not judged" ([`Status::NotJudged`],
    /// its detail naming what it needs) rather than judged on missing evidence: `slot_ceiling` needs
    /// grants; `backoff_coherence` multiplier events (when the run saw 429/503 or has no
    /// grants); `mutual_exclusion`, for a lock design, lock events; `self_heal` (after a kill)
    /// and `liveness` need to know when processes wait for permission: `op_sent` / `grant`
    /// events, or the header's `demand = "closed_loop"`; so does `fairness` when the header
    /// states a wait bound. `ceiling` and `degradation` need only the arrivals and the fault
    /// windows, and are always judged.
    ///
    /// Then the team's checkers' verdicts ([`CheckerSpec`]), in the order registered, each named
    /// as its spec.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        self.judged(true)
    }

    /// The verdicts as [`Suite::verdicts`] gives them, but pacesim's checkers leave their
    /// details empty (the statuses are the same; formatting the witness text of every check of
    /// every schedule was a tenth of an explorer's time). A team's checkers write theirs as
    /// always.
    pub fn statuses(&mut self) -> Vec<Verdict> {
        self.judged(false)
    }

    fn judged(&mut self, text: bool) -> Vec<Verdict> {
        // (text back on however the builtin verdicts end)
        struct Loud;
        impl Drop for Loud {
            fn drop(&mut self) {
                TERSE.with(|t| t.set(false));
            }
        }
        TERSE.with(|t| t.set(!text));
        let loud = Loud;
        let mut v = self.builtin_verdicts();
        drop(loud);
        for o in &mut self.own {
            v.extend(o.checker.verdicts().into_iter().map(|x| Verdict { name: o.name, ..x }));
        }
        v
    }

    fn builtin_verdicts(&mut self) -> Vec<Verdict> {
        let mut v = Vec::new();
        if let Some(c) = &mut self.ceiling {
            v.extend(c.verdicts());
        }
        if let Some(o) = &mut self.others {
            v.extend(o.verdicts(&self.shared));
        }
        if let Some(p) = &mut self.platforms {
            let mut own = p.verdicts();
            for x in &mut v {
                if let Some(i) = own.iter().position(|o| o.name == x.name) {
                    *x = own.remove(i);
                }
            }
            v.extend(own);
        }
        if let Some(seen) = &self.external {
            let mut out = Vec::new();
            for name in ORDER {
                match seen.needs(name) {
                    Some(needs) => out.push(Verdict {
                        name,
                        status: Status::NotJudged,
                        detail: format!("{NOT_JUDGED}{needs}"),
                    }),
                    None => out.extend(v.iter().filter(|x| x.name == name).cloned()),
                }
            }
            return out;
        }
        v
    }
}

impl Default for Suite {
    fn default() -> Suite {
        Suite::new()
    }
}

impl Sink for Suite {
    fn header(&mut self, h: &Header) {
        self.shared = common::Shared::for_header(h);
        self.ceiling = Some(ceiling::Ceiling::new(h));
        self.platforms = platforms::PerPlatform::new(h);
        self.others = Some(Others {
            backoff: backoff::BackoffCoherence::new(h),
            self_heal: self_heal::SelfHeal::new(h),
            degradation: degradation::Degradation::new(h),
            liveness: liveness::Liveness::new(h),
            mutual_exclusion: mutual_exclusion::MutualExclusion::new(h),
            fairness: fairness::Fairness::new(h),
            work_heal: work_heal::WorkHeal::new(h),
        });
        let d = &h.backend_detail;
        self.external = d.other.contains_key("worker").then(|| Seen {
            implied_demand: d.other.get("demand").and_then(|v| v.as_str()) == Some("closed_loop"),
            lock_design: d.is_lock_design(),
            wait_bound: d.wait_bound_ns.is_some(),
            ..Seen::default()
        });
        self.own = self
            .specs
            .iter()
            .filter_map(|s| {
                Some(Own {
                    name: s.name,
                    checker: (s.new)(h)?,
                })
            })
            .collect();
    }
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        if let Some(s) = &mut self.external {
            s.event(ev);
        }
        if let Some(c) = &mut self.ceiling {
            c.event(ev);
        }
        if let Some(p) = &mut self.platforms {
            p.event(ev);
        }
        self.shared.before(ev);
        if let Some(o) = &mut self.others {
            o.event(ev, &self.shared);
        }
        self.shared.after(ev);
        for o in &mut self.own {
            o.checker.event(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Header, OpKind};

    fn header(src_backend: &str, worker: bool, closed_loop: bool) -> Header {
        let sc = crate::registry::parse(
            "t.toml",
            &format!(
                "name = \"t\"\nduration = \"2s\"\n[pacer]\nbackend = \"{src_backend}\"\nrate = 10.0\n[processes]\ncount = 2\n"
            ),
        )
        .unwrap();
        let mut h = crate::registry::header(&sc, "live");
        if worker {
            h.backend_detail.other.insert("worker".into(), "python3 w.py".into());
        }
        if closed_loop {
            h.backend_detail.other.insert("demand".into(), "closed_loop".into());
        }
        h
    }

    fn verdicts(h: &Header, evs: &[Event]) -> Vec<Verdict> {
        let mut s = Suite::new();
        s.header(h);
        for e in evs {
            s.event(e);
        }
        s.verdicts()
    }

    fn get<'a>(v: &'a [Verdict], name: &str) -> Option<&'a Verdict> {
        v.iter().find(|x| x.name == name)
    }

    /// Two processes, each fetching every 100 ms (the rate), one killed at 0.55 s.
    fn fetches() -> Vec<Event> {
        let mut evs = Vec::new();
        for i in 0..18u64 {
            let (t, pid) = (i * 100_000_000, (i % 2) as u32);
            evs.push(Event::FetchStart { t, pid, thread: 0 });
            evs.push(Event::Arrival {
                t,
                pid,
                thread: 0,
                status: 200,
            });
            evs.push(Event::FetchEnd {
                t: t + 10_000_000,
                pid,
                thread: 0,
                status: 200,
            });
        }
        evs.push(Event::Crash {
            t: 550_000_000,
            pid: 1,
            point: crate::trace::CrashPoint::Immediate,
        });
        evs.sort_by_key(Event::t);
        evs
    }

    #[test]
    fn an_external_trace_without_events_says_what_each_check_needs() {
        let v = verdicts(&header("row", true, false), &fetches());
        for (name, needs) in [
            ("slot_ceiling", "grant events"),
            ("self_heal", "op_sent or grant events"),
            ("liveness", "op_sent or grant events"),
            ("backoff_coherence", "multiplier events"),
        ] {
            let x = get(&v, name).unwrap_or_else(|| panic!("no {name}"));
            assert!(
                x.status == Status::NotJudged && x.detail.starts_with(NOT_JUDGED) && x.detail.contains(needs),
                "{name}: {}",
                x.detail
            );
        }
        let c = get(&v, "ceiling").unwrap();
        assert!(!c.detail.starts_with(NOT_JUDGED), "{}", c.detail);
        // fairness is reported as always without a wait bound; with one it needs the asks
        assert!(!get(&v, "fairness").unwrap().detail.starts_with(NOT_JUDGED));
        let mut bounded = header("row", true, false);
        bounded.backend_detail.wait_bound_ns = Some(1_000_000_000);
        let f = verdicts(&bounded, &fetches());
        let f = get(&f, "fairness").unwrap();
        assert!(
            f.status == Status::NotJudged && f.detail.starts_with(NOT_JUDGED),
            "{}",
            f.detail
        );
        // pacesim's own trace with the same events is judged as it always was, but for the
        // slots and the backoff: a pace design that wrote no grant event (and states a
        // backoff multiplier, but wrote no multiplier event either) cannot be judged on them
        // (issue 32)
        let own = verdicts(&header("row", false, false), &fetches());
        for x in &own {
            assert_eq!(
                x.judged(),
                !["slot_ceiling", "backoff_coherence"].contains(&x.name),
                "{own:?}"
            );
        }
    }

    #[test]
    fn a_closed_loop_or_reported_asks_let_liveness_and_self_heal_judge() {
        let v = verdicts(&header("row", true, true), &fetches());
        for name in ["liveness", "self_heal"] {
            let x = get(&v, name).unwrap_or_else(|| panic!("no {name}"));
            assert!(!x.detail.starts_with(NOT_JUDGED), "{name}: {}", x.detail);
        }
        let mut evs = fetches();
        evs.insert(
            0,
            Event::OpSent {
                t: 0,
                pid: 0,
                thread: 0,
                op: OpKind::Reserve,
            },
        );
        let v = verdicts(&header("row", true, false), &evs);
        assert!(!get(&v, "self_heal").unwrap().detail.starts_with(NOT_JUDGED));
        // a walk lock without lock events: mutual exclusion cannot be judged
        let v = verdicts(&header("redis_lock", true, true), &fetches());
        let me = get(&v, "mutual_exclusion").unwrap();
        assert!(
            me.detail.contains("lock_acquired and lock_released events"),
            "{}",
            me.detail
        );
        assert!(get(&v, "liveness").is_none(), "a walk lock has no throughput target");
    }

    #[test]
    fn implied_demand_catches_a_closed_loop_that_starves() {
        // one fetch per second at a 10/s rate while both processes always want the next one
        let mut evs = Vec::new();
        for i in 0..4u64 {
            let t = i * 1_000_000_000;
            let pid = (i % 2) as u32;
            evs.push(Event::FetchStart { t, pid, thread: 0 });
            evs.push(Event::FetchEnd {
                t: t + 10_000_000,
                pid,
                thread: 0,
                status: 200,
            });
        }
        let v = verdicts(&header("row", true, true), &evs);
        let l = get(&v, "liveness").unwrap();
        assert!(l.failed(), "{}", l.detail);
    }

    /// A team's checker: counts fetch starts, fails above 2; states its state only when told.
    #[derive(Clone, Debug)]
    struct Starts(u64, bool);
    impl Sink for Starts {
        fn event(&mut self, ev: &Event) {
            if matches!(ev, Event::FetchStart { .. }) {
                self.0 += 1;
            }
        }
        fn state(&self) -> Option<u64> {
            self.1.then_some(self.0)
        }
    }
    impl Checker for Starts {
        fn verdicts(&mut self) -> Vec<Verdict> {
            vec![Verdict {
                name: "anything",
                status: Status::of(self.0 <= 2),
                detail: format!("{} starts", self.0),
            }]
        }
    }

    #[test]
    fn a_teams_checker_is_judged_after_pacesims_and_named_as_registered() {
        let specs = [
            CheckerSpec {
                name: "few_starts",
                summary: "at most two fetch starts",
                new: |_| Some(Box::new(Starts(0, true))),
            },
            CheckerSpec {
                name: "never_applies",
                summary: "-",
                new: |_| None,
            },
        ];
        let h = header("row", false, false);
        let run = |n: u64, stated: bool| {
            let specs = [CheckerSpec {
                new: if stated {
                    specs[0].new
                } else {
                    |_| Some(Box::new(Starts(0, false)))
                },
                ..specs[0]
            }];
            let mut s = Suite::with(&specs);
            s.header(&h);
            for i in 0..n {
                s.event(&Event::FetchStart {
                    t: i,
                    pid: 0,
                    thread: 0,
                });
            }
            s
        };
        let mut s = Suite::with(&specs);
        s.header(&h);
        for i in 0..3 {
            s.event(&Event::FetchStart {
                t: i,
                pid: 0,
                thread: 0,
            });
        }
        let v = s.verdicts();
        let last = v.last().unwrap();
        assert_eq!((last.name, last.status), ("few_starts", Status::Fail), "{v:?}");
        assert!(get(&v, "ceiling").is_some() && get(&v, "never_applies").is_none());
        // its state is part of the suite's; a checker that cannot say stops pruning
        assert_ne!(run(1, true).state(false), run(2, true).state(false));
        assert_eq!(run(1, false).state(false), None);
        assert!(Suite::new().state(true).is_some(), "pacesim's own always say");
    }

    #[test]
    fn a_registered_name_is_plain_new_and_given_once() {
        let ok = registrable("checker", ORDER.to_vec(), ["log_limit", "p99_wait"]);
        assert_eq!(ok, Ok(()));
        let e = registrable("checker", ORDER.to_vec(), ["Log-Limit"]).unwrap_err();
        assert!(e.contains("checker name `Log-Limit`: use a-z, 0-9 and _"), "{e}");
        let e = registrable("checker", ORDER.to_vec(), ["ceiling"]).unwrap_err();
        assert!(
            e.contains("`ceiling` is registered twice (or is one of pacesim's)"),
            "{e}"
        );
        let e = registrable("backend", vec!["row"], ["mine", "mine"]).unwrap_err();
        assert!(e.starts_with("backend `mine`"), "{e}");
        assert!(registrable("backend", vec![], [""]).is_err());
    }
}
