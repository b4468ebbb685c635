//! `self_heal`: after every kill, while demand exists, the pace returns to normal within one
//! interval times the multiplier; a pace that never resumes is a wedge.
//!
//! The pace is read from fetch starts (what the granted slots turn into; a slot granted to the
//! killed process is never used, which is exactly the hole this property is about). For each
//! `crash`:
//!
//! Every gap between fetch starts is measured in units of the multiplier in force for it (the
//! larger of the two starts' granted multipliers, or the shared multiplier for backends without
//! grants): 429s that back the pace off after a kill are not a failure to heal.
//!
//! A design that states a burst (`backend_detail.burst`, its [`crate::trace::Facts`]) may grant
//! that many slots at once and then stay quiet for `burst - 1` intervals: every allowance and
//! the wedge bound below add that quiet, so a correct bursty design is not failed for the
//! quiet part of its window, and a wedged one still is.
//!
//! A design whose processes pace alone (`local`, `local_divided`: `backend_detail.process_spacing_ns`)
//! is judged against one process's spacing rather than the fleet's interval: a kill leaves the
//! survivors' pacers as they were, and pacers that started together stay in phase, so the
//! fleet's gaps were that long before the kill too. (A dead process's share of the rate is lost
//! with it until it restarts: the design divides the rate, it does not share it.)
//!
//! 1. **Normal spacing** `normal = max(interval, median gap between the last 16 fetch starts
//!    before the kill) x multiplier`: the pace backends' interval, or the lock backends'
//!    observed throughput.
//! 2. **Stall**: the largest gap between consecutive fetch starts (each measured from when
//!    demand resumed, if no process was waiting for a while, and the first from no earlier
//!    than one normal spacing before the kill: an older silence is not the kill's doing), from
//!    the last start before the kill until the pace is past the slot it had granted the
//!    victim (a reservation killed mid-flight leaves a hole at that slot, up to N intervals
//!    after the kill). It must be at most `normal + interval x multiplier + slack`, plus a
//!    quarter of normal for jitter and one store round trip for a retry after a GCRA deny (the
//!    slowest answered within the gap, at least 2 ms: the retry that ends the stall is one of
//!    them, and a slow store makes it slow).
//!    `slack` is the backend's own release mechanism for a dead holder:
//!    [`Detail::dead_holder_release`](crate::trace::Detail::dead_holder_release): `detect_dead`
//!    (advisory: the store notices the dead session) or `ttl` (redis_lock: the key expires),
//!    0 for pace backends.
//!    Kills whose holes overlap (a second kill before the pace passed the first victim's slot)
//!    are judged together, each allowed one interval x multiplier.
//! 3. **Wedge**: no fetch starts after the kill at all, for longer than `10 x interval x
//!    multiplier + slack`, while live processes are waiting: fail, the witness names the kill
//!    and the silence.
//! 4. **Stall to the end**: the silence from the last fetch start after a kill (healed or not)
//!    to the end of the run is a stall too: processes that waited in it (in total, across
//!    their own kills and restarts) for longer than the allowance of step 2, and never longer
//!    than `normal + 10 x interval x multiplier + slack` however many kills it merged (a kill
//!    storm that wastes every slot to the end is a fleet that never heals), fail it.
//! 5. **Throughput recovery**: when demand was saturated (some live process waiting at least
//!    90 % of the time) both before and after, the median gap between fetch starts measured
//!    from `interval x multiplier + slack` after the kill (and after the victim's slot) must
//!    come back to within 1.5 x the median gap before it. This catches a slot claimed
//!    forever when other slots still run (throughput drops for good without stopping).
//!
//! A kill while the store is out (a `store_outage`, `partition` or `store_restart` window),
//! while some process paces through its fallback, or while an operation sent during an outage
//! (or in flight when it began) is still unanswered (a client timeout outlives the outage: that
//! process waits on the store, not the pace; [`crate::check::common::Stranded`]) is not judged
//! (the shared pace is not what paces the fleet then; `degradation` judges that time): the
//! detail lists it. When the store goes out or a process falls back while a kill is still
//! being measured, the measurement stops there: stalls and recovery gaps seen before are
//! judged, nothing after, and the detail lists the kill as cut short.
//!
//! 6. **Starved demand**: after the first kill, a request for permission (while the shared
//!    pace paces the fleet) followed by no fetch start at all, by anyone, for longer than ten
//!    normal spacings (and a burst's quiet) times the multiplier plus the slack, up to the
//!    next fetch start or the end of the run, fails: a kill ends its victim's wait, so in a
//!    kill storm whose restarts keep asking and being killed no single wait looks long, yet
//!    the fleet's demand goes unserved (one fetch in 2 s among hundreds of kills is no heal).
//!
//! **Not judged**: with no failure, a run in which no kill was measured (no fetch started
//! after a kill while the shared pace paced the fleet: the run ended first, nothing asked
//! again, or every kill came while the store was out or a process in its fallback) has
//! shown nothing healing, nor failing to: the verdict is not judged, saying which.
//!
//! The detail reports the largest stall after any kill; a list of kills (a storm) names a
//! few, how many more, and the last.

use crate::check::common::{Demand, LoopMap, PidSet, Shared, Stranded, base_interval, is_outage, pid_list, secs};
use crate::check::{Status, Verdict};
use crate::trace::{CrashPoint, Event, Header, OpKind};
use std::collections::VecDeque;

/// Gaps kept for the median before and after a kill.
const GAPS: usize = 16;
/// Fewest gaps for the throughput comparison.
const MIN_GAPS: usize = 8;
/// The least round trip a stall's allowance counts (2 ms).
const MIN_ROUND_TRIP: u64 = 2_000_000;

/// A fetch start: when, the cumulative demand time then, and the multiplier in force for it.
#[derive(Copy, Clone, Debug)]
struct Start {
    t: u64,
    busy: u64,
    m: f64,
}

crate::exact_hash!(Start { t, busy, m: bits });

/// A gap between fetch starts after a kill.
#[derive(Hash, Copy, Clone, Debug)]
struct Gap {
    len: u64,
    from: u64,
    to: u64,
    normal: u64,
    allowed: u64,
}

#[derive(Clone, Debug)]
struct Kill {
    t: u64,
    pid: u32,
    point: CrashPoint,
    // the later of the kill and the slot the pace had granted the victim (a hole to come)
    until: u64,
    // the multiplier of the victim's unused grant: the hole is spaced by it
    victim_m: f64,
    // kills merged into this one (a second kill before the first hole was passed): each may
    // cost one interval
    holes: u32,
    // the other victims merged in, as `pid N killed at T (point)`
    others: Vec<String>,
    // the last fetch start seen (before the kill, then since)
    last: Start,
    // median gap before the kill, per unit of multiplier
    pre_norm: Option<f64>,
    pre_busy: bool,
    largest: Option<Gap>,
    worst: Option<Gap>,
}

crate::exact_hash!(Kill {
    t,
    pid,
    point,
    until,
    victim_m: bits,
    holes,
    others,
    last,
    pre_norm: bits,
    pre_busy,
    largest,
    worst
});

impl Kill {
    fn name(&self) -> String {
        let mut n = format!("pid {} killed at {} ({})", self.pid, secs(self.t), self.point);
        n.push_str(&summarised(&self.others, " and ", "other kills"));
        n
    }
}

#[derive(Clone, Debug)]
struct Recovery {
    kill: Kill,
    from: u64,
    // gaps per unit of multiplier
    gaps: Vec<f64>,
    last: Option<Start>,
    busy_at_from: u64,
}

crate::exact_hash!(Recovery {
    kill,
    from,
    gaps: bits,
    last,
    busy_at_from
});

/// The self-heal checker.
#[derive(Clone, Debug)]
pub struct SelfHeal {
    base: u64,
    // the design's stated burst ([`crate::trace::Detail::gcra_burst`]): a design that may grant
    // `burst` slots at once may then leave `burst - 1` intervals quiet
    burst: u64,
    slack: u64,
    slack_note: String,
    global_m: f64,
    starts: VecDeque<Start>,
    // (pid, thread) -> (reference time, multiplier) of a granted slot that thread has not used
    // yet
    pending_slot: LoopMap<(u64, f64)>,
    // the trace has grants: a pace, whose normal spacing is at least the interval
    paced_backend: bool,
    open: Vec<Kill>,
    recovering: Option<Recovery>,
    // the last kill judged (the pace passed its hole): a silence from the last fetch start to
    // the end of the run is a stall after it
    last_judged: Option<Kill>,
    kills: u64,
    // kills not judged because the store was out or processes were in fallback then
    unjudged: Vec<String>,
    // open store_outage / partition / store_restart windows
    outages: std::collections::BTreeSet<u32>,
    // processes pacing through their fallback pacer
    in_fallback: PidSet,
    // processes waiting on an operation the store's outage may have lost: they wait on the
    // store, not on the pace
    stranded: Stranded,
    // the slowest permission round trip (request to reply) answered since the last fetch start:
    // within the gap that start ends
    round_trip: u64,
    largest: Option<(Gap, String)>,
    // the most severe violation (starved by several kills 4, wedge 3, capacity lost 2, slow heal
    // 1), first among equals
    failure: Option<(u8, String)>,
    failures: u64,
    // after the first kill: requests for permission, restarts, and fetch starts (kills that
    // starve every request of a restarted fleet are a failure, not an absence of demand)
    first_kill: Option<u64>,
    asks_after_kill: u64,
    restarts_after_kill: u64,
    fetches_after_kill: u64,
    // after the first kill, while the shared pace paces the fleet: the earliest request for
    // permission no fetch start has followed yet (a kill ends a process's wait, not the
    // fleet's demand: a stream of kills whose restarts keep asking starves a fleet whose waits
    // each look short)
    // (when, and the silence after it that is a wedge: fixed when it is asked)
    unserved: Option<(u64, u64)>,
    // the last kill (for a verdict not judged: when it came)
    last_kill: u64,
    end: u64,
}

crate::exact_hash!(SelfHeal {
    base,
    burst,
    slack,
    slack_note,
    global_m: bits,
    starts,
    pending_slot: bits,
    paced_backend,
    open,
    recovering,
    last_judged,
    kills,
    unjudged,
    outages,
    in_fallback,
    stranded,
    round_trip,
    largest,
    failure,
    failures,
    first_kill,
    asks_after_kill,
    restarts_after_kill,
    fetches_after_kill,
    unserved,
    last_kill,
    end
});

/// Items listed in full up to this many; a longer list (a kill storm) is summarised.
const LISTED: usize = 4;

/// `items`, each preceded by `sep`, or for more than [`LISTED`] the first few, how many more
/// (`what`) and the last: a kill storm names a handful of kills, not every one of thousands.
fn summarised(items: &[String], sep: &str, what: &str) -> String {
    let mut s = String::new();
    if items.len() <= LISTED {
        for i in items {
            s.push_str(sep);
            s.push_str(i);
        }
        return s;
    }
    for i in &items[..LISTED - 1] {
        s.push_str(sep);
        s.push_str(i);
    }
    let more = items.len() - LISTED;
    s.push_str(&format!("{sep}{more} {what} and the last, {}", items[items.len() - 1]));
    s
}

fn median(mut v: Vec<f64>, min: usize) -> Option<f64> {
    if v.len() < min {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

impl SelfHeal {
    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> SelfHeal {
        let (slack, slack_note) = match h.backend_detail.dead_holder_release() {
            Some((key, d)) => (d, format!(" + {key} {}", secs(d))),
            None => (0, String::new()),
        };
        SelfHeal {
            // a design whose processes pace alone: a survivor's next slot is one of its own
            // spacings away, whatever the kill did
            base: base_interval(h).max(h.backend_detail.process_spacing_ns.unwrap_or(0)),
            burst: h.backend_detail.gcra_burst(),
            slack,
            slack_note,
            global_m: 1.0,
            starts: VecDeque::with_capacity(8),
            pending_slot: LoopMap::default(),
            paced_backend: false,
            open: Vec::new(),
            recovering: None,
            last_judged: None,
            kills: 0,
            unjudged: Vec::new(),
            outages: Default::default(),
            in_fallback: Default::default(),
            stranded: Default::default(),
            round_trip: 0,
            largest: None,
            failure: None,
            failures: 0,
            first_kill: None,
            asks_after_kill: 0,
            restarts_after_kill: 0,
            fetches_after_kill: 0,
            unserved: None,
            last_kill: 0,
            end: 0,
        }
    }

    fn fail(&mut self, severity: u8, msg: String) {
        self.failures += 1;
        if self.failure.as_ref().is_none_or(|f| severity > f.0) {
            self.failure = Some((severity, msg));
        }
    }

    fn pre_norm(&self) -> Option<f64> {
        let gaps: Vec<f64> = self
            .starts
            .iter()
            .zip(self.starts.iter().skip(1))
            .map(|(a, b)| (b.t - a.t) as f64 / a.m.max(b.m).max(1.0))
            .collect();
        median(gaps, MIN_GAPS)
    }

    fn pre_busy(&self, d: &Demand, t: u64) -> bool {
        match self.starts.front() {
            Some(s) if t > s.t => {
                let busy = d.busy_until(t) - s.busy;
                busy as f64 >= 0.9 * (t - s.t) as f64
            }
            _ => false,
        }
    }

    /// Normal spacing and the allowed stall for a gap under multiplier `m`, after `holes`
    /// kills (each may cost one interval), and the quiet a bursty design may keep after a
    /// burst (`burst - 1` intervals).
    fn allowance(&self, pre_norm: Option<f64>, m: f64, holes: u32) -> (u64, u64) {
        let m = m.max(1.0);
        let paced = (self.base as f64 * m) as u64 * (u64::from(holes.max(1)) + self.burst - 1);
        let normal = (self.base as f64).max(pre_norm.unwrap_or(0.0)) * m;
        let normal = normal as u64;
        // jitter: a quarter of the normal spacing plus a store round trip (a retry after a GCRA
        // deny adds one on top of the lost interval): the slowest answered within the gap, and
        // at least 2 ms
        let round_trip = self.round_trip.max(MIN_ROUND_TRIP);
        (normal, normal + paced + self.slack + normal / 4 + round_trip)
    }

    /// Is a stall of `len` under multiplier `m` a wedge rather than a slow heal?
    fn is_wedge(&self, len: u64, m: f64) -> bool {
        len > self.wedge_after(m)
    }

    /// Ten intervals (and a burst's quiet) under multiplier `m`, plus the slack.
    fn wedge_after(&self, m: f64) -> u64 {
        (10 + self.burst - 1) * (self.base as f64 * m.max(1.0)) as u64 + self.slack
    }

    /// A fetch start after kill `i`. Returns true once the pace is past the hole.
    fn observe(&mut self, d: &Demand, i: usize, s: Start) -> bool {
        let since = d.since().unwrap_or(0);
        let k = &self.open[i];
        let from = k.last.t.max(since).min(s.t);
        let m = k.last.m.max(s.m).max(k.victim_m);
        let (normal, allowed) = self.allowance(k.pre_norm, m, k.holes);
        let gap = Gap {
            len: s.t - from,
            from,
            to: s.t,
            normal,
            allowed,
        };
        let k = &mut self.open[i];
        if k.largest.is_none_or(|l| gap.len > l.len) {
            k.largest = Some(gap);
        }
        if gap.len > gap.allowed && k.worst.is_none_or(|w| gap.len - gap.allowed > w.len - w.allowed) {
            k.worst = Some(gap);
        }
        k.last = s;
        s.t > k.until
    }

    /// The pace is past the hole the kill left: judge its worst stall.
    fn judge(&mut self, k: Kill) {
        if let Some(l) = k.largest
            && self.largest.as_ref().is_none_or(|(g, _)| l.len > g.len)
        {
            self.largest = Some((l, k.name()));
        }
        if let Some(w) = k.worst {
            let m = w.normal as f64 / (self.base as f64).max(k.pre_norm.unwrap_or(0.0));
            let (severity, kind) = if self.is_wedge(w.len, m) {
                (3, "wedge (resumed late)")
            } else {
                (1, "slow heal")
            };
            self.fail(
                severity,
                format!(
                    "{kind}: after {}, no fetch started for {} (from {} to {}) while processes waited; \
                     normal spacing {}, allowed {} (normal + interval x multiplier{})",
                    k.name(),
                    secs(w.len),
                    secs(w.from),
                    secs(w.to),
                    secs(w.normal),
                    secs(w.allowed),
                    self.slack_note
                ),
            );
        }
        self.last_judged = Some(k.clone());
        let paced = (self.base as f64 * k.last.m.max(1.0)) as u64;
        let from = k.until.max(k.t + paced + self.slack);
        self.recovering = Some(Recovery {
            busy_at_from: 0,
            kill: k,
            from,
            gaps: Vec::new(),
            last: None,
        });
    }

    /// The shared pace stops pacing the fleet (the store goes out, or a process falls back):
    /// what is being measured after a kill is judged on what was seen until now, and nothing
    /// after (the fallback's pace is not the shared one: `degradation` judges that time).
    fn interrupt(&mut self, d: &Demand, t: u64, why: &str) {
        // a request for permission before the store went out (or a process fell back) is
        // not the shared pace's to serve now
        self.unserved = None;
        if let Some(r) = &self.recovering
            && r.gaps.len() < MIN_GAPS
        {
            let note = format!("the recovery after {} (cut short: {why} at {})", r.kill.name(), secs(t));
            self.unjudged.push(note);
        }
        self.finish_recovery(d, t);
        for k in std::mem::take(&mut self.open) {
            let note = format!("{} (cut short: {why} at {})", k.name(), secs(t));
            if k.largest.is_some() {
                // the stall so far is judged; the recovery that would follow is not measured
                self.judge(k);
                self.recovering = None;
            }
            self.unjudged.push(note);
        }
        // what follows is the fallback's or the outage's time, not a stall after these kills
        self.last_judged = None;
    }

    /// Does the shared pace pace the fleet now (no store window open, no process in its
    /// fallback, no operation from an outage still unanswered)?
    fn paced_by_the_store(&self) -> bool {
        self.outages.is_empty() && self.in_fallback.is_empty() && self.stranded.is_empty()
    }

    /// How long a request for permission after a kill may go without any fetch start before
    /// the kills starved the demand: a wedge's ten normal spacings (and a burst's quiet) under
    /// the multiplier in force, plus the slack (the normal spacing is the fleet's own, the
    /// median gap of its last fetch starts, when longer than the interval: a lock design's
    /// pace is its holders' throughput).
    fn starve_bound(&self) -> u64 {
        let m = self.global_m.max(self.starts.back().map_or(1.0, |s| s.m)).max(1.0);
        let normal = (self.base as f64).max(self.pre_norm().unwrap_or(0.0)) * m;
        ((10 + self.burst - 1) as f64 * normal) as u64 + self.slack
    }

    /// A request for permission at `asked` after a kill, and no fetch start until `to` (the
    /// end of the run, `at_end`): the kills starved the demand when that is longer than
    /// `bound`.
    fn starved(&mut self, asked: u64, bound: u64, to: u64, at_end: bool) {
        let silence = to.saturating_sub(asked);
        if silence <= bound {
            return;
        }
        let first = self.first_kill.unwrap_or(asked);
        // with no fetch at all after the first kill this account comes first (one kill's
        // wedge names that kill, and stays first); with some, a wedge or lost capacity the
        // stalls show is the plainer witness
        let severity = match (self.fetches_after_kill, self.kills) {
            (0, k) if k > 1 => 4,
            (0, _) => 3,
            _ => 2,
        };
        self.fail(
            severity,
            witness!(
                "kills starved the demand: after the first kill at {}, a request for permission at {} was followed by no fetch start for {}{} (allowed {}: ten normal spacings x multiplier{}); {} kills, {} requests for permission and {} restarts after the first, {} fetch starts",
                secs(first),
                secs(asked),
                secs(silence),
                if at_end { " to the end of the run" } else { "" },
                secs(bound),
                self.slack_note,
                self.kills,
                self.asks_after_kill,
                self.restarts_after_kill,
                self.fetches_after_kill
            ),
        );
    }

    /// The silence from the last fetch start `last` after kill `k` to the end of the run: a
    /// stall that runs to the end, judged when processes waited in it (in total, across their
    /// crashes and restarts) for longer than the allowance.
    fn trailing(&mut self, d: &Demand, k: &Kill, last: Start, m: f64) {
        let end = self.end;
        let (normal, allowed) = self.allowance(k.pre_norm, m, k.holes);
        // each kill merged in may cost an interval, but not without bound: a storm of kills
        // that wastes every slot to the end is a fleet that never heals (a wedge)
        let wedge = normal + self.wedge_after(m);
        let allowed = allowed.min(wedge);
        let silence = end.saturating_sub(last.t);
        let demand = d.busy_until(end).saturating_sub(last.busy).min(silence);
        if demand <= allowed {
            return;
        }
        let (severity, what) = if demand >= wedge || self.is_wedge(demand, m) {
            (3, "wedge")
        } else {
            (1, "not healed by the end")
        };
        let waiting = match d.waiting() {
            0 => "none waiting at the end".to_string(),
            _ => format!("pids {} waiting at the end", pid_list(&d.waiting_pids())),
        };
        self.fail(
            severity,
            format!(
                "{what}: after {}, no fetch started in the {} from {} to the end at {} while processes waited \
                 {} of it ({waiting}); normal spacing {}, allowed {} (normal + interval x multiplier{})",
                k.name(),
                secs(silence),
                secs(last.t),
                secs(end),
                secs(demand),
                secs(normal),
                secs(allowed),
                self.slack_note
            ),
        );
    }

    fn recovery_start(&mut self, d: &Demand, s: Start) {
        let Some(r) = &mut self.recovering else { return };
        if s.t < r.from {
            return;
        }
        match r.last {
            None => {
                r.busy_at_from = d.busy_until(s.t);
                r.from = s.t;
            }
            Some(l) => r.gaps.push((s.t - l.t) as f64 / l.m.max(s.m).max(1.0)),
        }
        r.last = Some(s);
        if r.gaps.len() >= GAPS {
            self.finish_recovery(d, s.t);
        }
    }

    fn finish_recovery(&mut self, d: &Demand, t: u64) {
        let Some(r) = self.recovering.take() else { return };
        let k = &r.kill;
        let (Some(pre), Some(post)) = (k.pre_norm, median(r.gaps.clone(), MIN_GAPS)) else {
            return;
        };
        // A paced fleet's normal spacing is never below the interval (a start-up burst before
        // the kill would otherwise make any paced recovery look slow). A lock backend has no
        // interval: its normal spacing is what it did before the kill.
        let pre = if self.paced_backend {
            pre.max(self.base as f64)
        } else {
            pre
        };
        let span = t.saturating_sub(r.from);
        let busy = d.busy_until(t).saturating_sub(r.busy_at_from);
        if !k.pre_busy || span == 0 || (busy as f64) < 0.9 * span as f64 {
            return;
        }
        if post > 1.5 * pre {
            self.fail(
                2,
                format!(
                    "after {}, the pace did not return to normal: fetch starts {:.1}x further apart than before \
                     (median gap {} over {} gaps from {}, against {} before, per unit of multiplier), under \
                     continuous demand: capacity lost for good (a slot held by the dead process?)",
                    k.name(),
                    post / pre,
                    secs(post as u64),
                    r.gaps.len(),
                    secs(r.from),
                    secs(pre as u64)
                ),
            );
        }
    }
}

/// A fetch start's part of a form: its instant relative to now, its demand time relative to
/// the demand time now (`busy_now`: every reader takes differences of them), its multiplier.
fn start_form(f: &mut crate::form::Form, s: &Start, busy_now: u64) {
    f.instant(s.t);
    timeless_start_form(f, s, busy_now);
}

/// A fetch start's part without its instant (for a start whose instant no reader reads).
fn timeless_start_form(f: &mut crate::form::Form, s: &Start, busy_now: u64) {
    f.word(busy_now.wrapping_sub(s.busy));
    f.word(s.m.to_bits());
}

/// Where the next gap after a fetch start at `last` would be measured from, as far as it is
/// known now ([`SelfHeal::observe`]: from the later of the start and when demand last rose):
/// the later of the two while some process waits (`since`). While none does, the start's
/// instant: demand usually rises again before the next start, later than it, but not always
/// (a lock holder past its valve fetches without asking).
fn gap_from_form(f: &mut crate::form::Form, last: u64, since: Option<u64>) {
    match since {
        Some(since) => f.instant(last.max(since)),
        None => {
            f.word(u64::MAX - 3);
            f.instant(last);
        }
    }
}

/// A gap's part: its lengths (the instants it ran between are the witness's).
fn gap_form(f: &mut crate::form::Form, g: &Option<Gap>) {
    match g {
        Some(g) => f.word(crate::choice::fingerprint(&(g.len, g.normal, g.allowed))),
        None => f.word(u64::MAX),
    }
}

/// A kill's part: its instants relative to now, what its verdict reads, not its witness (who
/// was killed, where).
fn kill_form(f: &mut crate::form::Form, k: &Kill, busy_now: u64, since: Option<u64>) {
    // (every field named: one added later is placed here, or the build fails)
    let Kill {
        t,
        pid: _,
        point: _,
        until,
        victim_m,
        holes,
        others: _,
        last,
        pre_norm,
        pre_busy,
        largest,
        worst,
    } = k;
    // (the kill's instant is read by the recovery after it, judged only with a normal spacing)
    if pre_norm.is_some() {
        f.instant(*t);
    }
    // (read only as whether a fetch start is past it: any before now reads alike)
    f.ahead(until.saturating_add(1));
    f.word(crate::choice::fingerprint(&(
        victim_m.to_bits(),
        holes,
        pre_norm.map(f64::to_bits),
        // (read by the recovery, which is judged only with a normal spacing)
        pre_norm.is_some() && *pre_busy,
        largest.is_some(),
    )));
    // (the last start's instant is read only as where the next gap is measured from)
    gap_from_form(f, last.t, since);
    timeless_start_form(f, last, busy_now);
    gap_form(f, worst);
}

impl SelfHeal {
    /// An explorer's form at `now` ([`crate::form`]), relative to now: every instant it keeps
    /// (fetch starts, kills, their holes, slots granted, the recovery's start) as how
    /// far it lies from now, and every demand time as how far it lies behind `busy_now`, the
    /// demand time now ([`Demand::busy_until`]): its verdicts read only differences of both.
    /// What only its witness reads is left out (the instants a gap ran between, the names of
    /// kills merged or not judged, the largest stall; of a failure, all but its severity), and
    /// what can no longer be read: the fetch starts before the last unless a kill may still
    /// come (`kills_ahead`: the normal spacing before it is their median), a recovery's gaps
    /// when it cannot fail (its kill had no normal spacing or no saturated demand before it),
    /// of the last kill judged only what the silence to the end is judged by; of the counts
    /// after the first kill, whether there were any (the restarts not even that). As slack, the
    /// slowest round trip in the gap so far: a smaller one is worse.
    pub fn form(&self, f: &mut crate::form::Form, d: &Demand, ahead: crate::check::Ahead) {
        let kills_ahead = ahead.kills;
        let (busy_now, since) = (d.busy_until(f.now()), d.since());
        use crate::choice::fingerprint;
        // (every field named: one added later is placed here, or the build fails)
        let SelfHeal {
            base,
            burst,
            slack,
            slack_note: _,
            global_m,
            starts,
            pending_slot,
            paced_backend,
            open,
            recovering,
            last_judged,
            kills,
            unjudged,
            outages,
            in_fallback,
            stranded,
            round_trip,
            largest: _,
            failure,
            failures: _,
            first_kill,
            asks_after_kill: _,
            restarts_after_kill: _,
            fetches_after_kill: _,
            unserved,
            last_kill: _,
            end: _,
        } = self;
        f.word(fingerprint(&(
            (base, burst, slack, global_m.to_bits(), paced_backend, kills),
            (unjudged.is_empty(), outages),
            (failure.as_ref().map(|x| x.0), first_kill.is_some()),
            // (a kill measured: else the verdict is not judged)
            self.largest.is_some(),
        )));
        // (who is in fallback, who is stranded: each process by its name)
        f.per_pid(in_fallback.keys().map(|pid| (pid, ())));
        stranded.form(f);
        // (the earliest request for permission no fetch has followed since the first kill:
        // kills starved the demand when it waits longer than a wedge)
        match unserved {
            Some((a, bound)) => {
                f.instant(*a);
                f.word(*bound);
            }
            None => f.word(u64::MAX - 7),
        }
        // a smaller round trip is worse: it leaves a smaller allowance for the gap it is in
        f.less_is_worse((*round_trip).max(MIN_ROUND_TRIP) as i64);
        // The normal spacing before a kill is the median of the gaps between the starts before
        // it, given MIN_GAPS of them; it is read only by a start after the kill, or by a
        // process waiting at the end (which has a fetch still to start): so only when the
        // starts kept and the fetches still to start (when bounded) number more than that.
        let spacing_read = ahead
            .fetch_starts
            .is_none_or(|n| starts.len() as u64 + n > MIN_GAPS as u64 + 1);
        if kills_ahead && !spacing_read {
            // (the kill measures its first gap from the last start, or from when demand rose
            // if later, or from one normal spacing before the kill if earlier)
            f.word(u64::MAX - 6);
            if let Some(s) = starts.back() {
                start_form(f, s, busy_now);
                gap_from_form(f, s.t, since);
            }
        } else if kills_ahead {
            // (the normal spacing before a kill is their gaps' median; the kill measures its first
            // gap from the last one, or from when demand rose if later)
            f.word(starts.len() as u64);
            for s in starts {
                start_form(f, s, busy_now);
            }
            if let Some(s) = starts.back() {
                gap_from_form(f, s.t, since);
            }
        } else if let Some(s) = starts.back() {
            // (the silence to the end is measured from the last start: its demand time; that
            // it is not before the last kill judged holds whenever it is read)
            timeless_start_form(f, s, busy_now);
        } else {
            f.word(u64::MAX - 4);
        }
        let now = f.now();
        f.per_pid(
            pending_slot
                .iter()
                .map(|((pid, th), (at, m))| (pid, (th, m.to_bits(), at.wrapping_sub(now)))),
        );
        f.word(open.len() as u64);
        for k in open.iter() {
            kill_form(f, k, busy_now, since);
        }
        match recovering {
            Some(r) => {
                let Recovery {
                    kill,
                    from,
                    gaps,
                    last,
                    busy_at_from,
                } = r;
                // (only a recovery that can fail is read: its kill had a normal spacing and
                // saturated demand before it; one cut short by an outage or a fallback is noted
                // as not judged, which matters only to the starved-demand account, and a
                // recovery follows a fetch after the kill, which rules that out)
                f.word(u64::MAX - 5);
                if kill.pre_norm.is_some() && kill.pre_busy {
                    f.instant(*from);
                    f.word(fingerprint(&(gaps.len(), last.is_some())));
                    f.word(kill.pre_norm.map_or(0, f64::to_bits));
                    f.word(fingerprint(&gaps.iter().map(|g| g.to_bits()).collect::<Vec<_>>()));
                    // (the demand time at the recovery's start is set with its first start)
                    if let Some(s) = last {
                        start_form(f, s, busy_now);
                        f.word(busy_now.wrapping_sub(*busy_at_from));
                    }
                }
            }
            None => f.word(u64::MAX - 1),
        }
        match last_judged {
            // (the silence to the end after it is judged by its allowance)
            Some(k) => {
                f.word(fingerprint(&(k.pre_norm.map(f64::to_bits), k.holes)));
            }
            None => f.word(u64::MAX - 2),
        }
        // (not `end`, the last event's instant so far: a judged run ends with its `end` event,
        // at or after every other, which sets it anew)
    }
}

impl SelfHeal {
    /// Kills seen so far (with none, there is nothing to judge: no verdict).
    pub fn kills(&self) -> u64 {
        self.kills
    }

    /// One event, with the suite's shared state ([`Shared`]: who waited before it, and what
    /// it answered).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, shared: &Shared) {
        let t = ev.t();
        // (checked inline) events that do nothing here but move the end's clock, and the usual
        // ones that `step` would take as here: a request before any kill (none to count) and
        // outside store windows (none to strand it), an answer when none is stranded, a grant
        match ev {
            _ if super::common::moves_clocks_only(ev) || matches!(ev, Event::Multiplier { pid: Some(_), .. }) => {
                self.end = self.end.max(t);
            }
            Event::OpSent { .. } if self.first_kill.is_none() && self.outages.is_empty() => {
                self.end = self.end.max(t);
            }
            Event::Reply { op, .. } if self.stranded.is_empty() => {
                self.end = self.end.max(t);
                self.answer(shared.answered(), *op, t);
            }
            Event::Grant {
                pid,
                thread,
                multiplier,
                slot,
                now,
                ..
            } => {
                self.end = self.end.max(t);
                self.granted(t, *pid, *thread, *slot, *now, *multiplier);
            }
            // before any kill no kill is open or recovering: a fetch start only joins the starts
            Event::FetchStart { pid, thread, .. } if self.first_kill.is_none() => {
                self.end = self.end.max(t);
                let s = self.start_of(shared.demand(), *pid, *thread, t);
                self.push_start(s);
            }
            _ => self.step(ev, shared),
        }
    }

    /// The fetch start of `(pid, thread)` at `t`: the slot it used (its grant's multiplier)
    /// is no longer pending.
    #[inline]
    fn start_of(&mut self, d: &Demand, pid: u32, thread: u16, t: u64) -> Start {
        let m = self.pending_slot.remove(pid, thread).map_or(self.global_m, |p| p.1);
        Start {
            t,
            busy: d.busy_until(t),
            m,
        }
    }

    /// `s` joins the last starts (the gaps before a kill).
    #[inline]
    fn push_start(&mut self, s: Start) {
        // (a new gap begins: its allowance counts the round trips answered within it)
        self.round_trip = 0;
        self.starts.push_back(s);
        if self.starts.len() > GAPS + 1 {
            self.starts.pop_front();
        }
    }

    /// A grant at `t` to `(pid, thread)`.
    #[inline]
    fn granted(&mut self, t: u64, pid: u32, thread: u16, slot: i64, now: i64, multiplier: f64) {
        self.paced_backend = true;
        let at = (t as i128 + slot as i128 - now as i128).clamp(0, u64::MAX as i128) as u64;
        self.pending_slot.insert(pid, thread, (at, multiplier));
    }

    /// A reply at `t` to `op`, answering an operation sent at `sent`: a round trip.
    #[inline]
    fn answer(&mut self, sent: Option<u64>, op: OpKind, t: u64) {
        if let Some(sent) = sent
            && op.asks_permission()
        {
            self.round_trip = self.round_trip.max(t - sent);
        }
    }

    fn step(&mut self, ev: &Event, shared: &Shared) {
        let d = shared.demand();
        let t = ev.t();
        self.end = self.end.max(t);
        if self.first_kill.is_some() {
            match ev {
                Event::OpSent { op, .. } if op.asks_permission() => {
                    self.asks_after_kill += 1;
                    if self.unserved.is_none() && self.paced_by_the_store() {
                        self.unserved = Some((t, self.starve_bound()));
                    }
                }
                Event::Restart { .. } => self.restarts_after_kill += 1,
                Event::FetchStart { .. } => {
                    self.fetches_after_kill += 1;
                    if let Some((a, bound)) = self.unserved.take() {
                        self.starved(a, bound, t, false);
                    }
                }
                _ => {}
            }
        } else if matches!(ev, Event::Crash { .. }) {
            self.first_kill = Some(t);
        }
        if matches!(ev, Event::Crash { .. }) {
            self.last_kill = t;
        }
        match ev {
            Event::Crash { pid, point, .. }
                if !self.outages.is_empty() || !self.in_fallback.is_empty() || !self.stranded.is_empty() =>
            {
                // the shared pace is not what paces the fleet now: degradation judges this time
                self.kills += 1;
                self.in_fallback.remove(pid);
                self.pending_slot.remove_process(*pid);
                self.unjudged.push(format!("pid {pid} killed at {} ({point})", secs(t)));
            }
            Event::Crash { pid, point, .. } => {
                self.kills += 1;
                // every thread of the process dies: each slot granted and not yet used is a hole
                let victims: Vec<(u64, f64)> = self
                    .pending_slot
                    .threads_of(*pid)
                    .into_iter()
                    .filter_map(|th| self.pending_slot.remove(*pid, th))
                    .collect();
                let until = victims.iter().map(|p| p.0).max().unwrap_or(t).max(t);
                let victim_m = victims.iter().map(|p| p.1).fold(1.0, f64::max);
                let holes = victims.len().max(1) as u32;
                if let Some(k) = self.open.last_mut() {
                    // a second kill before the first hole was passed: one window, two holes
                    k.holes += holes;
                    k.until = k.until.max(until);
                    k.victim_m = k.victim_m.max(victim_m);
                    k.others.push(format!("pid {pid} killed at {} ({point})", secs(t)));
                } else {
                    // a kill during the previous kill's recovery window: judge it on what it has
                    self.finish_recovery(d, t);
                    let mut last = self.starts.back().copied().unwrap_or(Start {
                        t,
                        busy: 0,
                        m: self.global_m,
                    });
                    // a silence that began more than one normal spacing before the kill is not
                    // the kill's doing (an outage, a stalled pace): measure from then
                    let pre_norm = self.pre_norm();
                    let (normal, _) = self.allowance(pre_norm, last.m.max(self.global_m), 1);
                    if last.t < t.saturating_sub(normal) {
                        // demand grows at most 1 ns per ns: a bound on the demand time then
                        last.t = t.saturating_sub(normal);
                        last.busy = last.busy.max(d.busy_until(t).saturating_sub(normal));
                    }
                    let k = Kill {
                        t,
                        pid: *pid,
                        point: *point,
                        until,
                        victim_m,
                        holes,
                        others: Vec::new(),
                        last,
                        pre_norm,
                        pre_busy: self.pre_busy(d, t),
                        largest: None,
                        worst: None,
                    };
                    self.open.push(k);
                }
            }
            Event::FetchStart { pid, thread, .. } => {
                let s = self.start_of(d, *pid, *thread, t);
                let mut i = 0;
                while i < self.open.len() {
                    if self.observe(d, i, s) {
                        let k = self.open.remove(i);
                        self.judge(k);
                    } else {
                        i += 1;
                    }
                }
                self.recovery_start(d, s);
                self.push_start(s);
            }
            Event::Grant {
                pid,
                thread,
                multiplier,
                slot,
                now,
                ..
            } => self.granted(t, *pid, *thread, *slot, *now, *multiplier),
            Event::Multiplier { pid: None, to, .. } => self.global_m = *to,
            Event::Fault { id, kind, start, .. } if is_outage(*kind) => {
                if *start {
                    self.interrupt(d, t, kind.name());
                    self.outages.insert(*id);
                    self.stranded.window_began(shared.awaiting());
                } else {
                    self.outages.remove(id);
                }
            }
            Event::Fallback { pid, enter, .. } => {
                if *enter {
                    if self.in_fallback.is_empty() {
                        self.interrupt(d, t, "fallback");
                    }
                    self.in_fallback.add(*pid);
                } else {
                    self.in_fallback.remove(pid);
                }
            }
            Event::Restart { pid, .. } => {
                self.in_fallback.remove(pid);
            }
            _ => {}
        }
        self.stranded.event(ev, !self.outages.is_empty());
        if let Event::Reply { op, .. } = ev {
            self.answer(shared.answered(), *op, t);
        }
    }

    /// The verdicts, after the last event (none without a kill); `shared`: the suite's state
    /// after it.
    pub fn verdicts(&mut self, shared: &Shared) -> Vec<Verdict> {
        let d = shared.demand();
        if self.kills == 0 {
            return Vec::new();
        }
        let end = self.end;
        let had_open = !self.open.is_empty();
        for k in std::mem::take(&mut self.open) {
            let m = k.last.m.max(self.global_m);
            self.trailing(d, &k, k.last, m);
            if k.largest.is_some() {
                // the pace resumed but the trace ended before the victim's slot: judge what it saw
                self.judge(k);
            }
        }
        // the pace passed the last kill's hole and then stopped: the silence from the last fetch
        // start to the end is judged as a stall after that kill
        if !had_open
            && let (Some(k), Some(&last)) = (self.last_judged.take(), self.starts.back())
            && last.t >= k.t
        {
            self.trailing(d, &k, last, last.m.max(self.global_m));
        }
        self.finish_recovery(d, end);
        if let Some((a, bound)) = self.unserved.take() {
            // a stream of kills that starved the fleet to the end: this account before the
            // stall it also is (one kill's wedge names that kill, and stays first)
            self.starved(a, bound, end, true);
        }
        if self.failure.is_none() && self.largest.is_none() {
            // no kill was measured: no fetch started after one while the shared pace paced the
            // fleet (the run ended first, nothing asked, or the store was out): nothing healed
            // or failed to, which is no pass
            let why = if !self.unjudged.is_empty() && self.fetches_after_kill == 0 {
                witness!(
                    "a fetch after a kill while the shared pace paces the fleet: {}",
                    summarised(&self.unjudged, ", ", "more").trim_start_matches(", ")
                )
            } else if !self.unjudged.is_empty() {
                witness!(
                    "a kill while the shared pace paces the fleet; not judged (store out, fallback in force, or a store operation sent during an outage still unanswered): {}",
                    summarised(&self.unjudged, ", ", "more").trim_start_matches(", ")
                )
            } else {
                witness!(
                    "a fetch after a kill: {} kill(s), the last at {}, and no fetch started after one by the end at {} ({} requests for permission after the first)",
                    self.kills,
                    secs(self.last_kill),
                    secs(end),
                    self.asks_after_kill
                )
            };
            return vec![Verdict {
                name: "self_heal",
                status: Status::NotJudged,
                detail: witness!("{}{why}", crate::check::NOT_JUDGED),
            }];
        }
        let largest = match &self.largest {
            Some((g, who)) => witness!(
                "largest stall {} after {who} (normal spacing {}, allowed {})",
                secs(g.len),
                secs(g.normal),
                secs(g.allowed)
            ),
            None if !self.unjudged.is_empty() => "no stall measured".to_string(),
            None => "no fetch after any kill (no demand)".to_string(),
        };
        let healed = match &self.largest {
            Some(_) => witness!("; healed within interval x multiplier{}", self.slack_note),
            None => String::new(),
        };
        let largest = if self.unjudged.is_empty() {
            largest
        } else {
            witness!(
                "{largest}; not judged (store out, fallback in force, or a store operation sent during an outage \
                 still unanswered): {}",
                summarised(&self.unjudged, ", ", "more").trim_start_matches(", ")
            )
        };
        let v = match &self.failure {
            None => Verdict {
                name: "self_heal",
                status: Status::Pass,
                detail: witness!("{} kill(s): {largest}{healed}", self.kills),
            },
            Some((_, f)) => Verdict {
                name: "self_heal",
                status: Status::Fail,
                detail: if self.failures > 1 {
                    witness!("{f} ({} violations; {largest})", self.failures)
                } else {
                    f.clone()
                },
            },
        };
        vec![v]
    }
}
