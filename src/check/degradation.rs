//! `degradation`: while the store is unreachable (each `store_outage` or `partition` fault
//! window), destination arrivals stay within the rate and do not drop to zero, unless the
//! fallback is `fail_closed`, which must then halt.
//!
//! For each window `[start, end)`:
//!
//! 1. **Within the rate.** The arrivals inside the window conform to GCRA at the interval times
//!    each process's multiplier, with burst tolerance `max(checks.burst, cap + 2)`: a
//!    `divided` fallback paces each of up to `cap + 1` processes at `rate / (cap + 1)`,
//!    starting one fallback interval after its last shared slot, so the streams sum to the rate
//!    with a burst of `cap + 1`, plus one for the jitter of a shared slot's late start next to
//!    an exact local one at the switch; anything faster grows without bound with the window
//!    (`fail_open`'s N x rate needs a burst of about `(N - 1) x rate x window`). `cap` is
//!    [`Detail::fallback_cap`](crate::trace::Detail::fallback_cap). Under a `partition` the
//!    connected processes keep the full shared rate, so the partitioned ones' fallback comes on
//!    top of it: the excess grows with the window.
//! 2. **Not zero.** Unless the mode is `fail_closed`, at least one arrival, when processes
//!    asked for permission in the window and it was long enough for a fallback slot: longer
//!    than the slowest store error for an operation sent in it (the detection delay: a
//!    refusal's round trip, or the client's timeout, possibly seen after the window; an
//!    operation in flight when the window began counts too, and one still unanswered when the
//!    trace ends counts as failing at the end) plus two
//!    fallback intervals; and only when some process did detect it (a store error: nobody falls
//!    back on a store that has not failed them yet, or after they died). Windows are judged at
//!    the end of the trace; a zero excused this way is said in the window's summary.
//! 3. **Fail-closed halts.** Under `fail_closed`, no process starts a fetch while it is in
//!    fallback (between its `fallback` enter and exit events).
//!
//! The mode is the `mode` of the trace's `fallback` events, else
//! [`Detail::fallback`](crate::trace::Detail::fallback).

use crate::check::common::{PidMap, Shared, base_interval, secs};
use crate::check::{Status, Verdict};
use crate::pacer::BurstMeter;
use crate::trace::{Event, FallbackMode, FaultKind, Header, StoreFallback};
use std::collections::BTreeMap;

#[derive(Clone, Hash, Debug)]
struct Window {
    id: u32,
    kind: FaultKind,
    start: u64,
    meter: BurstMeter,
    pids: Vec<u32>,
    last_arrival: u64,
    longest_gap: u64,
    detect: u64,
    // some process got a store error for an operation pending in the window (only then can a
    // fallback have begun)
    detected: bool,
    demand: bool,
}

/// The degradation checker.
#[derive(Clone, Debug)]
pub struct Degradation {
    base: u64,
    rate: f64,
    ceiling_burst: u64,
    divisor: u64,
    tolerance: u64,
    detail_mode: Option<StoreFallback>,
    trace_mode: Option<FallbackMode>,
    multiplier: PidMap<f64>,
    end: u64,
    in_fallback: PidMap<(u64, FallbackMode)>,
    open: BTreeMap<u32, Window>,
    // closed windows, with their end, judged at the end of the trace
    // invariant: in the order they ended, so by end (until `verdicts` closes the open ones)
    closed: Vec<(Window, u64)>,
    windows: u64,
    summaries: Vec<String>,
    failure: Option<String>,
    failures: u64,
}

crate::exact_hash!(Degradation {
    base,
    rate: bits,
    ceiling_burst,
    divisor,
    tolerance,
    detail_mode,
    trace_mode,
    multiplier: bits,
    end,
    in_fallback,
    open,
    closed,
    windows,
    summaries,
    failure,
    failures
});

impl Degradation {
    /// An explorer's form at `now` ([`crate::form`]): while no process is in fallback and no
    /// store window was seen, its configuration, multipliers and counts, and the last event's
    /// instant relative to now; otherwise all of it, absolute.
    pub fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        if !(self.in_fallback.is_empty() && self.open.is_empty() && self.closed.is_empty()) {
            // (processes by id: windows open and closed, each process's)
            f.raw_pids();
            f.word(fingerprint(self));
            f.absolute();
            return;
        }
        if !(self.summaries.is_empty() && self.failure.is_none()) {
            // (its witnesses name processes by id)
            f.raw_pids();
        }
        // (every field named: one added later is placed here, or the build fails)
        let Degradation {
            base,
            rate,
            ceiling_burst,
            divisor,
            tolerance,
            detail_mode,
            trace_mode,
            multiplier,
            end,
            in_fallback: _,
            open: _,
            closed: _,
            windows,
            summaries,
            failure,
            failures,
        } = self;
        f.word(fingerprint(&(
            (
                base,
                rate.to_bits(),
                ceiling_burst,
                divisor,
                tolerance,
                detail_mode,
                trace_mode,
            ),
            (windows, summaries, failure, failures),
        )));
        // (each process's multiplier, by its name)
        f.per_pid(multiplier.iter().map(|(pid, m)| (pid, m.to_bits())));
        f.instant(*end);
    }

    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> Degradation {
        let divisor = h.backend_detail.fallback_cap(h.processes) + 1;
        Degradation {
            base: base_interval(h),
            rate: h.rate,
            ceiling_burst: h.burst,
            divisor,
            tolerance: h.burst.max(divisor + 1),
            detail_mode: h.backend_detail.fallback,
            trace_mode: None,
            multiplier: PidMap::new(),
            end: 0,
            in_fallback: PidMap::new(),
            open: BTreeMap::new(),
            closed: Vec::new(),
            windows: 0,
            summaries: Vec::new(),
            failure: None,
            failures: 0,
        }
    }

    /// The fallback mode: the trace's, else the header's.
    fn mode(&self) -> Option<StoreFallback> {
        self.trace_mode.map(StoreFallback::from).or(self.detail_mode)
    }

    fn fail(&mut self, msg: String) {
        self.failures += 1;
        if self.failure.is_none() {
            self.failure = Some(msg);
        }
    }

    /// An operation sent at `sent` failed (or was still unanswered) at `t`: a window it was
    /// pending in (sent before the window ended, failed after it began: sent during it, or in
    /// flight when it began) could not be detected sooner.
    /// `error`: the operation failed at `t` (false: it was still unanswered at the end).
    fn detected(&mut self, sent: u64, t: u64, error: bool) {
        let d = t.saturating_sub(sent);
        for w in self.open.values_mut() {
            w.detect = w.detect.max(d);
            w.detected |= error;
        }
        // (`closed` is in the order the windows ended: only those ending after `sent` can
        // count, the last few, so a store error costs the windows it may concern, not all)
        let from = self.closed.partition_point(|(_, end)| *end <= sent);
        for (w, end) in &mut self.closed[from..] {
            if sent < *end && t >= w.start {
                w.detect = w.detect.max(d);
                w.detected |= error;
            }
        }
    }

    fn close(&mut self, w: Window, end: u64) {
        let mode = self.mode().map_or("none", StoreFallback::name);
        let len = end.saturating_sub(w.start);
        let n = w.meter.len() as u64;
        let per_s = if len > 0 { n as f64 / (len as f64 / 1e9) } else { 0.0 };
        let name = format!("{} #{} {}–{}", w.kind, w.id, secs(w.start), secs(end));
        let longest = if n == 0 {
            len
        } else {
            w.longest_gap.max(end - w.last_arrival)
        };
        self.summaries.push(format!(
            "{name} ({mode}): {n} arrivals = {per_s:.2}/s, burst needed {}, longest gap {}",
            w.meter.burst_needed(),
            secs(longest)
        ));
        if let Some(e) = w.meter.first_exceeding(self.tolerance) {
            let pid = w.pids.get(e.index).map(|p| format!(" (pid {p})")).unwrap_or_default();
            self.fail(format!(
                "during {name} ({mode} fallback) arrivals exceeded the rate: {n} arrivals = {per_s:.2}/s against {}/s, \
                 burst needed {} > allowed {} (max(ceiling burst {}, cap + 2 = {})); first excess: arrival #{} at {}{pid}",
                self.rate,
                w.meter.burst_needed(),
                self.tolerance,
                self.ceiling_burst,
                self.divisor + 1,
                e.index,
                secs(e.at)
            ));
        }
        let fallback_interval = match self.mode() {
            Some(StoreFallback::FailOpen) => self.base,
            _ => self.base.saturating_mul(self.divisor),
        };
        let m = self.multiplier.values().copied().fold(1.0, f64::max);
        let needed = w.detect + 2 * (fallback_interval as f64 * m) as u64;
        if self.mode() == Some(StoreFallback::FailClosed) || n > 0 || !w.demand {
            return;
        }
        let excuse = if !w.detected {
            Some("no process detected the outage in time to fall back".to_string())
        } else if len <= needed {
            Some(format!(
                "detection {} + two fallback intervals {} outlast the window",
                secs(w.detect),
                secs(2 * fallback_interval)
            ))
        } else {
            None
        };
        match excuse {
            Some(e) => {
                if let Some(summary) = self.summaries.last_mut() {
                    summary.push_str(&format!(" (zero excused: {e})"));
                }
            }
            None => self.fail(format!(
                "during {name} ({mode} fallback) arrivals dropped to zero for the whole {} although processes asked \
                 to fetch (detection {} + two fallback intervals {} would have allowed one)",
                secs(len),
                secs(w.detect),
                secs(2 * fallback_interval)
            )),
        }
    }
}

impl Degradation {
    /// One event, with the suite's shared state ([`Shared`]: the operation it answers).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, shared: &Shared) {
        self.end = self.end.max(ev.t());
        // (checked inline) arrivals and requests count only inside an open window, fetch starts
        // only for a process in fallback, a grant only for its multiplier (taken here, as
        // `window_event` would), and fetch ends, replies (the suite tracks what they answer),
        // and the lock and job events never
        let relevant = match ev {
            Event::Grant { pid, multiplier, .. } => {
                self.multiplier.insert(*pid, *multiplier);
                false
            }
            Event::Arrival { .. } | Event::OpSent { .. } => !self.open.is_empty(),
            Event::FetchStart { .. } => !self.in_fallback.is_empty(),
            Event::FetchEnd { .. }
            | Event::Reply { .. }
            | Event::Deny { .. }
            | Event::LockAcquired { .. }
            | Event::LockReleased { .. }
            | Event::Uncapped { .. }
            | Event::JobEvent { .. }
            | Event::Backfill { .. }
            | Event::Platform { .. } => false,
            _ => true,
        };
        if relevant {
            self.window_event(ev, shared.answered());
        }
    }

    fn window_event(&mut self, ev: &Event, answered: Option<u64>) {
        let t = ev.t();
        match ev {
            Event::Fault { id, kind, start, .. } if matches!(kind, FaultKind::StoreOutage | FaultKind::Partition) => {
                if *start {
                    self.windows += 1;
                    self.open.insert(
                        *id,
                        Window {
                            id: *id,
                            kind: *kind,
                            start: t,
                            meter: BurstMeter::new(self.base).keeping(self.tolerance),
                            pids: Vec::new(),
                            last_arrival: t,
                            longest_gap: 0,
                            detect: 0,
                            detected: false,
                            demand: false,
                        },
                    );
                } else if let Some(w) = self.open.remove(id) {
                    self.closed.push((w, t));
                }
            }
            Event::Grant { pid, multiplier, .. } => {
                self.multiplier.insert(*pid, *multiplier);
            }
            Event::Multiplier { pid: Some(p), to, .. } => {
                self.multiplier.insert(*p, *to);
            }
            Event::Multiplier { pid: None, to, .. } => {
                for m in self.multiplier.values_mut() {
                    *m = *to;
                }
            }
            Event::OpSent { op, .. } if op.asks_permission() => {
                for w in self.open.values_mut() {
                    w.demand = true;
                }
            }
            Event::StoreError { .. } => {
                if let Some(sent) = answered {
                    for w in self.open.values_mut() {
                        w.demand = true;
                    }
                    self.detected(sent, t, true);
                }
            }
            Event::Fallback { pid, enter, mode, .. } => {
                self.trace_mode.get_or_insert(*mode);
                if *enter {
                    self.in_fallback.get_or_insert_with(*pid, || (t, *mode));
                } else {
                    self.in_fallback.remove(pid);
                }
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.in_fallback.remove(pid);
            }
            Event::FetchStart { pid, .. } => {
                if let Some((since, mode)) = self.in_fallback.get(pid)
                    && *mode == FallbackMode::FailClosed
                {
                    let since = *since;
                    self.fail(format!(
                        "pid {pid} started a fetch at {} while in fail_closed fallback (since {}): fail_closed must halt",
                        secs(t),
                        secs(since)
                    ));
                }
            }
            Event::Arrival { pid, .. } => {
                let m = self.multiplier.get(pid).copied().unwrap_or(1.0).max(1.0);
                let interval = if m <= 1.0 {
                    self.base
                } else {
                    (self.base as f64 * m).round() as u64
                };
                for w in self.open.values_mut() {
                    w.longest_gap = w.longest_gap.max(t - w.last_arrival);
                    w.last_arrival = t;
                    w.meter.push_with_interval(t, interval.max(1));
                    w.pids.push(*pid);
                }
            }
            Event::End { .. } => {
                for (_, w) in std::mem::take(&mut self.open) {
                    self.closed.push((w, t));
                }
            }
            _ => {}
        }
    }
}

impl Degradation {
    /// The verdicts, after the last event (none without a store window); `shared`: the suite's
    /// state after it.
    pub fn verdicts(&mut self, shared: &Shared) -> Vec<Verdict> {
        if self.windows == 0 {
            return Vec::new();
        }
        // an operation still unanswered at the end (a client timeout longer than what is left
        // of the trace) has not detected its window by then
        let outstanding: Vec<u64> = shared.awaiting().iter().map(|(_, sent)| sent).collect();
        for sent in outstanding {
            self.detected(sent, self.end, false);
        }
        let end = self.open.values().map(|w| w.last_arrival).max().unwrap_or(0);
        for (_, w) in std::mem::take(&mut self.open) {
            self.closed.push((w, end));
        }
        for (w, end) in std::mem::take(&mut self.closed) {
            self.close(w, end);
        }
        let more = if self.summaries.len() > 1 {
            witness!(" (+{} more windows)", self.summaries.len() - 1)
        } else {
            String::new()
        };
        let first = self.summaries.first().cloned().unwrap_or_default();
        let v = match &self.failure {
            None => Verdict {
                name: "degradation",
                status: Status::Pass,
                detail: witness!(
                    "{first}{more}; within the rate (burst allowed {}) and not zero while a fallback slot was due{}",
                    self.tolerance,
                    if self.mode() == Some(StoreFallback::FailClosed) {
                        " (fail_closed: halted)"
                    } else {
                        ""
                    }
                ),
            },
            Some(f) => Verdict {
                name: "degradation",
                status: Status::Fail,
                detail: if self.failures > 1 {
                    witness!("{f} ({} violations)", self.failures)
                } else {
                    f.clone()
                },
            },
        };
        vec![v]
    }
}
