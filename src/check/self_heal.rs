//! `self_heal`: after every kill, while demand exists, the pace returns to normal within one
//! interval times the multiplier; a pace that never resumes is a wedge.
//!
//! The pace is read from fetch starts (what the granted slots turn into; a slot granted to the
//! killed process is never used, which is exactly the hole this property is about). For each
//! `crash`:
//!
//! 1. **Normal spacing** `normal = max(interval x multiplier, median gap between the last 16
//!    fetch starts before the kill)`: the pace backends' interval, or the lock backends'
//!    observed throughput.
//! 2. **Stall**: the largest gap between consecutive fetch starts (each measured from when
//!    demand resumed, if no process was waiting for a while), from the last start before the
//!    kill until the pace is past the slot it had granted the victim (a reservation killed
//!    mid-flight leaves a hole at that slot, up to N intervals after the kill). It must be at most
//!    `normal + interval x multiplier + slack` (plus 10 % of normal for jitter). `slack` is
//!    the backend's own release mechanism for a dead holder: `backend_detail.detect_dead`
//!    (advisory: the store notices the dead session) or `ttl` (redis_lock: the key expires),
//!    0 for pace backends.
//! 3. **Wedge**: no fetch starts after the kill at all, for longer than `10 x interval x
//!    multiplier + slack`, while live processes are waiting: fail, the witness names the kill
//!    and the silence.
//! 4. **Throughput recovery**: when demand was saturated (some live process waiting at least
//!    90 % of the time) both before and after, the median gap between fetch starts measured
//!    from `interval x multiplier + slack` after the kill must come back to within 1.5 x the
//!    median gap before it (scaled by any multiplier change). This catches a slot claimed
//!    forever when other slots still run (throughput drops for good without stopping).
//!
//! The detail reports the largest stall after any kill.

use crate::check::common::{Demand, Opts, base_interval, mult, pid_list, secs};
use crate::check::{Checker, Verdict};
use crate::trace::{Event, Header, Sink};
use std::collections::{BTreeMap, VecDeque};

/// Gaps kept for the median before and after a kill.
const GAPS: usize = 16;
/// Fewest gaps for the throughput comparison.
const MIN_GAPS: usize = 8;

#[derive(Clone, Debug)]
struct Kill {
    t: u64,
    pid: u32,
    point: String,
    // the later of the kill and the slot the pace had granted the victim (a hole to come)
    until: u64,
    s_prev: Option<u64>,
    // the largest gap between fetch starts since the kill, and where it ended
    stall: Option<(u64, u64, u64)>,
    m: f64,
    pre_median: Option<u64>,
    pre_busy: bool,
}

impl Kill {
    fn name(&self) -> String {
        format!("pid {} killed at {} ({})", self.pid, secs(self.t), self.point)
    }
}

#[derive(Clone, Debug)]
struct Recovery {
    kill: Kill,
    from: u64,
    gaps: Vec<u64>,
    last: Option<u64>,
    busy_at_from: u64,
}

/// The self-heal checker.
#[derive(Debug)]
pub struct SelfHeal {
    base: u64,
    slack: u64,
    slack_note: String,
    demand: Demand,
    global_m: f64,
    pid_m: BTreeMap<u32, f64>,
    starts: VecDeque<(u64, u64)>,
    // pid -> reference time of a granted slot it has not used yet
    pending_slot: BTreeMap<u32, u64>,
    open: Vec<Kill>,
    recovering: Option<Recovery>,
    kills: u64,
    largest: Option<(u64, String, u64)>,
    failure: Option<String>,
    failures: u64,
    end: u64,
}

impl SelfHeal {
    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> SelfHeal {
        let o = Opts::of(h);
        let mut slack = 0;
        let mut slack_note = String::new();
        for key in ["detect_dead", "ttl"] {
            if let Some(d) = o.duration_ns(key)
                && d > slack
            {
                slack = d;
                slack_note = format!(" + {key} {}", secs(d));
            }
        }
        SelfHeal {
            base: base_interval(h),
            slack,
            slack_note,
            demand: Demand::new(h.processes),
            global_m: 1.0,
            pid_m: BTreeMap::new(),
            starts: VecDeque::new(),
            pending_slot: BTreeMap::new(),
            open: Vec::new(),
            recovering: None,
            kills: 0,
            largest: None,
            failure: None,
            failures: 0,
            end: 0,
        }
    }

    fn m(&self) -> f64 {
        self.pid_m.values().copied().fold(self.global_m, f64::max).max(1.0)
    }

    fn paced(&self, m: f64) -> u64 {
        (self.base as f64 * m.max(1.0)).round() as u64
    }

    fn fail(&mut self, msg: String) {
        self.failures += 1;
        if self.failure.is_none() {
            self.failure = Some(msg);
        }
    }

    fn pre_median(&self) -> Option<u64> {
        let gaps: Vec<u64> = self
            .starts
            .iter()
            .zip(self.starts.iter().skip(1))
            .map(|(a, b)| b.0 - a.0)
            .collect();
        median(gaps, MIN_GAPS)
    }

    fn pre_busy(&self, t: u64) -> bool {
        match self.starts.front() {
            Some(&(t0, busy0)) if t > t0 => {
                let busy = self.demand.busy_until(t) - busy0;
                busy as f64 >= 0.9 * (t - t0) as f64
            }
            _ => false,
        }
    }

    /// A fetch start after a kill: the gap since the previous start (or since demand
    /// resumed) is a stall candidate. Returns true once the pace is past the hole.
    fn observe(&mut self, i: usize, s_next: u64) -> bool {
        let since = self.demand.since().unwrap_or(0);
        let k = &mut self.open[i];
        let prev = k.stall.map_or(k.s_prev.unwrap_or(k.t), |s| s.2);
        let from = prev.max(since).min(s_next);
        let gap = s_next - from;
        let (best, bfrom, _) = k.stall.unwrap_or((0, from, s_next));
        k.stall = Some(if gap >= best { (gap, from, s_next) } else { (best, bfrom, s_next) });
        s_next > k.until
    }

    /// The pace is past the hole the kill left: judge the largest stall.
    fn judge(&mut self, k: Kill) {
        let Some((stall, from, to)) = k.stall else { return };
        let paced = self.paced(k.m);
        let normal = paced.max(k.pre_median.unwrap_or(0));
        let allowed = normal + paced + self.slack + normal / 10 + 1_000_000;
        if self.largest.as_ref().is_none_or(|l| stall > l.0) {
            self.largest = Some((stall, k.name(), normal));
        }
        if stall > allowed {
            let kind = if stall > 10 * paced + self.slack {
                "wedge (resumed late)"
            } else {
                "slow heal"
            };
            self.fail(format!(
                "{kind}: after {}, no fetch started for {} (from {} to {}) while processes waited; \
                 normal spacing {}, allowed {} (normal + interval x multiplier {}{})",
                k.name(),
                secs(stall),
                secs(from),
                secs(to),
                secs(normal),
                secs(allowed),
                secs(paced),
                self.slack_note
            ));
        }
        let from = k.until.max(k.t + paced + self.slack);
        self.recovering = Some(Recovery {
            busy_at_from: 0,
            kill: k,
            from,
            gaps: Vec::new(),
            last: None,
        });
    }

    fn recovery_start(&mut self, t: u64) {
        let Some(r) = &mut self.recovering else { return };
        if t < r.from {
            return;
        }
        if r.last.is_none() {
            r.busy_at_from = self.demand.busy_until(t);
            r.from = t;
        }
        if let Some(l) = r.last {
            r.gaps.push(t - l);
        }
        r.last = Some(t);
        if r.gaps.len() >= GAPS {
            self.finish_recovery(t);
        }
    }

    fn finish_recovery(&mut self, t: u64) {
        let Some(r) = self.recovering.take() else { return };
        let k = &r.kill;
        let (Some(pre), Some(post)) = (k.pre_median, median(r.gaps.clone(), MIN_GAPS)) else {
            return;
        };
        let span = t.saturating_sub(r.from);
        let busy = self.demand.busy_until(t).saturating_sub(r.busy_at_from);
        if !k.pre_busy || span == 0 || (busy as f64) < 0.9 * span as f64 {
            return;
        }
        let expect = (pre as f64 * (self.m() / k.m).max(1.0)) as u64;
        if post as f64 > 1.5 * expect as f64 {
            self.fail(format!(
                "after {}, the pace did not return to normal: fetch starts {:.1}x further apart than before \
                 (median gap {} over {} gaps from {}, against {} before), under continuous demand: \
                 capacity lost for good (a slot held by the dead process?)",
                k.name(),
                post as f64 / expect.max(1) as f64,
                secs(post),
                r.gaps.len(),
                secs(r.from),
                secs(expect)
            ));
        }
    }
}

fn median(mut v: Vec<u64>, min: usize) -> Option<u64> {
    if v.len() < min {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

impl Sink for SelfHeal {
    fn event(&mut self, ev: &Event) {
        let t = ev.t();
        self.end = self.end.max(t);
        match ev {
            Event::Crash { pid, point, .. } => {
                self.kills += 1;
                // a kill during the previous kill's recovery window: judge it on what it has
                self.finish_recovery(t);
                let until = self.pending_slot.remove(pid).unwrap_or(t).max(t);
                let k = Kill {
                    t,
                    pid: *pid,
                    point: point.clone(),
                    until,
                    s_prev: self.starts.back().map(|s| s.0),
                    stall: None,
                    m: self.m(),
                    pre_median: self.pre_median(),
                    pre_busy: self.pre_busy(t),
                };
                self.open.push(k);
            }
            Event::FetchStart { pid, .. } => {
                self.pending_slot.remove(pid);
                let mut i = 0;
                while i < self.open.len() {
                    if self.observe(i, t) {
                        let k = self.open.remove(i);
                        self.judge(k);
                    } else {
                        i += 1;
                    }
                }
                self.recovery_start(t);
                self.starts.push_back((t, self.demand.busy_until(t)));
                if self.starts.len() > GAPS + 1 {
                    self.starts.pop_front();
                }
            }
            Event::Grant {
                pid,
                multiplier,
                slot,
                now,
                ..
            } => {
                self.pid_m.insert(*pid, *multiplier);
                let at = (t as i128 + *slot as i128 - *now as i128).clamp(0, u64::MAX as i128) as u64;
                self.pending_slot.insert(*pid, at);
            }
            Event::Multiplier { pid: None, to, .. } => {
                self.global_m = *to;
                self.pid_m.clear();
            }
            Event::Multiplier { pid: Some(p), to, .. } => {
                self.pid_m.insert(*p, *to);
            }
            _ => {}
        }
        self.demand.event(ev);
    }
}

impl Checker for SelfHeal {
    fn verdicts(&mut self) -> Vec<Verdict> {
        if self.kills == 0 {
            return Vec::new();
        }
        let end = self.end;
        for k in std::mem::take(&mut self.open) {
            if k.stall.is_some() {
                // the pace resumed but the trace ended before the victim's slot: judge what it saw
                self.judge(k);
                continue;
            }
            let paced = self.paced(k.m);
            let from = k.s_prev.unwrap_or(k.t).max(self.demand.since().unwrap_or(end));
            let silence = end.saturating_sub(from);
            let normal = paced.max(k.pre_median.unwrap_or(0));
            let allowed = normal + paced + self.slack + normal / 10 + 1_000_000;
            if self.demand.waiting() == 0 || silence <= allowed {
                continue;
            }
            let waiting = pid_list(&self.demand.waiting_pids());
            let what = if silence > 10 * paced + self.slack {
                "wedge"
            } else {
                "not healed by the end"
            };
            self.fail(format!(
                "{what}: after {}, no fetch started in the {} from {} to the end at {} while live processes waited \
                 (pids {waiting}); normal spacing {}, allowed {} (interval x multiplier {}{})",
                k.name(),
                secs(silence),
                secs(from),
                secs(end),
                secs(normal),
                secs(allowed),
                secs(paced),
                self.slack_note
            ));
        }
        self.finish_recovery(end);
        let largest = match &self.largest {
            Some((stall, who, normal)) => {
                format!("largest stall {} after {who} (normal spacing {})", secs(*stall), secs(*normal))
            }
            None => "no fetch after any kill (no demand)".to_string(),
        };
        let v = match &self.failure {
            None => Verdict {
                name: "self_heal",
                pass: true,
                detail: format!(
                    "{} kill(s): {largest}; healed within interval x multiplier{} (multiplier {})",
                    self.kills,
                    self.slack_note,
                    mult(self.m())
                ),
            },
            Some(f) => Verdict {
                name: "self_heal",
                pass: false,
                detail: if self.failures > 1 {
                    format!("{f} ({} violations; {largest})", self.failures)
                } else {
                    f.clone()
                },
            },
        };
        vec![v]
    }
}
