//! `work_heal` (download jobs): every download's event is finalised, or recovered by the
//! sweep, within a bound, and no source re-strands forever.
//!
//! It reads only `job_event` events (and the run's end). An event opens `pending` (the tick);
//! `requeued` and `redelivered` keep it open (the same event: a re-enqueue makes no new one);
//! `running` starts its walk; a final state (`complete`, `partial`, `timeout`, `soft_limit`)
//! or `stranded` (the recovery sweep) closes it. The property fails on the first of:
//!
//! 1. **An event left open too long**: pending for longer than the bound without its walk
//!    starting (a task lost with its process), or running for longer than the bound without
//!    being finalised or stranded (a sweep that does not recover). The bound is
//!    [`Detail::heal_bound`](crate::trace::Detail::heal_bound): `stranded_after + sweep_every`,
//!    the latest the sweep can recover a running event. Events still within it at the end of
//!    the run are not judged.
//! 2. **A source that re-strands forever**: "forever" is
//!    [`Detail::strand_limit`](crate::trace::Detail::strand_limit) strands of one source in a
//!    row with no event of it finalised in between (default 3).
//! 3. **A second open event for a source**: a re-run or a re-enqueue that made a new event
//!    while the source's event was still open.
//! 4. **An event finalised after the sweep stranded it**: the sweep took a live job for dead.
//!
//! Applies when the trace has `job_event` events. The witness names the event, its source and
//! the times; the pass line counts the events by how they closed and states the longest strand
//! streak against the limit.

use crate::check::common::secs;
use crate::check::{Checker, Status, Verdict};
use crate::trace::{Event, Header, JobState, Sink};
use std::collections::BTreeMap;

#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq)]
enum Open {
    Pending,
    Running,
}

#[derive(Hash, Clone, Debug)]
struct Tracked {
    source: u32,
    open: Option<Open>,
    since: u64,
    stranded: bool,
}

/// The work-heal checker.
#[derive(Clone, Hash, Debug)]
pub struct WorkHeal {
    bound: Option<u64>,
    limit: u64,
    events: BTreeMap<u32, Tracked>,
    // invariant: open[source] is the source's open event, if any.
    open: BTreeMap<u32, u32>,
    streak: BTreeMap<u32, u64>,
    longest: (u64, u32),
    closed: BTreeMap<JobState, u64>,
    seen: bool,
    end: u64,
    failure: Option<String>,
    failures: u64,
}

impl WorkHeal {
    /// An explorer's form ([`crate::form`]): while it follows no job event, nothing it keeps
    /// holds an instant (its `end` is set by the trace's last event only), and it meets its
    /// like at any instant; otherwise absolute.
    pub fn form(&self, f: &mut crate::form::Form) {
        let quiet = self.events.is_empty() && self.open.is_empty() && self.streak.is_empty();
        if !quiet || self.longest != (0, 0) || self.failure.is_some() {
            // (processes and jobs by id)
            f.raw_pids();
        }
        f.word(crate::choice::fingerprint(self));
        if !(self.events.is_empty() && self.open.is_empty() && self.streak.is_empty()) {
            f.absolute();
        }
    }

    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> WorkHeal {
        let d = &h.backend_detail;
        WorkHeal {
            bound: d.heal_bound(),
            limit: d.strand_limit(),
            events: BTreeMap::new(),
            open: BTreeMap::new(),
            streak: BTreeMap::new(),
            longest: (0, 0),
            closed: BTreeMap::new(),
            seen: false,
            end: 0,
            failure: None,
            failures: 0,
        }
    }

    fn fail(&mut self, why: String) {
        self.failures += 1;
        if self.failure.is_none() {
            self.failure = Some(why);
        }
    }

    /// An open event whose phase began at `since` has overstayed the bound by `t`.
    fn overdue(&self, since: u64, t: u64) -> bool {
        self.bound.is_some_and(|b| t.saturating_sub(since) > b)
    }

    fn check_overdue(&mut self, event: u32, t: u64) {
        let Some(e) = self.events.get(&event) else {
            return;
        };
        let (Some(open), since, source) = (e.open, e.since, e.source) else {
            return;
        };
        if self.overdue(since, t) {
            let b = self.bound.unwrap_or(0);
            let what = match open {
                Open::Pending => "pending (its walk never started: a lost task?)",
                Open::Running => "running (neither finalised nor stranded by the sweep)",
            };
            self.fail(format!(
                "event {event} (source {source}) {what} from {} to {}: longer than the bound {} \
                 (stranded_after + sweep_every)",
                secs(since),
                secs(t),
                secs(b)
            ));
            if let Some(e) = self.events.get_mut(&event) {
                e.open = None; // one report per event
            }
        }
    }

    fn close(&mut self, event: u32, state: JobState, t: u64) {
        let Some(e) = self.events.get_mut(&event) else {
            return;
        };
        let (source, was_open, stranded) = (e.source, e.open.is_some(), e.stranded);
        e.open = None;
        if self.open.get(&source) == Some(&event) {
            self.open.remove(&source);
        }
        *self.closed.entry(state).or_default() += 1;
        if state == JobState::Stranded {
            if let Some(e) = self.events.get_mut(&event) {
                e.stranded = true;
            }
            let s = self.streak.entry(source).or_default();
            *s += 1;
            let s = *s;
            if s > self.longest.0 {
                self.longest = (s, source);
            }
            if s == self.limit {
                self.fail(format!(
                    "source {source} stranded {s} times in a row (event {event} at {}), never finalised \
                     in between: it re-strands every run (limit {})",
                    secs(t),
                    self.limit
                ));
            }
        } else {
            if stranded || !was_open {
                self.fail(format!(
                    "event {event} (source {source}) finalised {state} at {} after the sweep had \
                     stranded it: the sweep took a live job for dead",
                    secs(t)
                ));
            }
            self.streak.insert(source, 0);
        }
    }
}

impl Sink for WorkHeal {
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        // (checked inline: the other events, nearly all of them, change nothing here)
        if matches!(ev, Event::JobEvent { .. } | Event::End { .. }) {
            self.job(ev);
        }
    }
}

impl WorkHeal {
    fn job(&mut self, ev: &Event) {
        match *ev {
            Event::JobEvent {
                t,
                source,
                event,
                state,
                ..
            } => {
                self.seen = true;
                self.check_overdue(event, t);
                match state {
                    JobState::Pending => {
                        if let Some(&other) = self.open.get(&source)
                            && other != event
                        {
                            self.fail(format!(
                                "source {source} got a new event {event} at {} while its event {other} \
                                 was still open",
                                secs(t)
                            ));
                        }
                        self.open.insert(source, event);
                        self.events.insert(
                            event,
                            Tracked {
                                source,
                                open: Some(Open::Pending),
                                since: t,
                                stranded: false,
                            },
                        );
                    }
                    JobState::Requeued | JobState::Redelivered => {}
                    JobState::Running => {
                        if let Some(e) = self.events.get_mut(&event)
                            && e.open.is_some()
                        {
                            e.open = Some(Open::Running);
                            e.since = t;
                        }
                    }
                    s => self.close(event, s, t),
                }
            }
            Event::End { t } => self.end = t,
            _ => {}
        }
    }
}

impl Checker for WorkHeal {
    fn verdicts(&mut self) -> Vec<Verdict> {
        if !self.seen {
            return Vec::new();
        }
        let open: Vec<u32> = self
            .events
            .iter()
            .filter(|(_, e)| e.open.is_some())
            .map(|(k, _)| *k)
            .collect();
        let end = self.end;
        for event in open {
            self.check_overdue(event, end);
        }
        let count = |s: JobState| self.closed.get(&s).copied().unwrap_or(0);
        let finals: u64 = JobState::ALL.iter().filter(|s| s.is_final()).map(|s| count(*s)).sum();
        let summary = witness!(
            "{} events: {finals} finalised ({} complete, {} partial, {} timeout, {} soft_limit), {} stranded \
             and recovered by the sweep; longest strand streak {} (limit {})",
            self.events.len(),
            count(JobState::Complete),
            count(JobState::Partial),
            count(JobState::Timeout),
            count(JobState::SoftLimit),
            count(JobState::Stranded),
            self.longest.0,
            self.limit,
        );
        let detail = match &self.failure {
            Some(f) => witness!("{f} ({} violations in all; {summary})", self.failures),
            None => match self.bound {
                Some(b) => witness!("{summary}; every event closed within {} per phase", secs(b)),
                None => witness!("{summary}; no sweep stated: open events not bounded"),
            },
        };
        vec![Verdict {
            name: "work_heal",
            status: Status::of(self.failure.is_none()),
            detail,
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Detail, Header};

    fn header() -> Header {
        let d = Detail {
            stranded_after_ns: Some(1800),
            sweep_every_ns: Some(300),
            ..Detail::default()
        };
        Header {
            ev: "header".into(),
            version: 3,
            source: "sim".into(),
            scenario: "t".into(),
            backend: "redis_lock".into(),
            seed: 1,
            processes: 1,
            rate: 1.0,
            burst: 1,
            multiplier_cap: 8.0,
            backend_detail: d,
        }
    }

    fn job(t: u64, event: u32, state: JobState) -> Event {
        Event::JobEvent {
            t,
            source: 0,
            event,
            pid: None,
            state,
        }
    }

    fn run(evs: &[Event]) -> Verdict {
        let mut c = WorkHeal::new(&header());
        for e in evs {
            c.event(e);
        }
        c.verdicts().pop().expect("applies")
    }

    #[test]
    fn finalised_and_recovered_events_pass() {
        let v = run(&[
            job(0, 0, JobState::Pending),
            job(1, 0, JobState::Running),
            job(900, 0, JobState::Timeout),
            job(1000, 1, JobState::Pending),
            job(1001, 1, JobState::Running),
            job(2900, 1, JobState::Stranded),
            Event::End { t: 5000 },
        ]);
        assert!(v.passed(), "{}", v.detail);
        assert!(v.detail.contains("1 stranded"), "{}", v.detail);
    }

    #[test]
    fn three_strands_in_a_row_fail() {
        let mut evs = Vec::new();
        for i in 0..3u32 {
            let t = u64::from(i) * 3000;
            evs.push(job(t, i, JobState::Pending));
            evs.push(job(t + 1, i, JobState::Running));
            evs.push(job(t + 1900, i, JobState::Stranded));
        }
        let v = run(&evs);
        assert!(
            v.failed() && v.detail.contains("stranded 3 times in a row"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn a_lost_pending_event_a_second_event_and_a_live_job_swept_fail() {
        let v = run(&[job(0, 0, JobState::Pending), Event::End { t: 2101 }]);
        assert!(v.failed() && v.detail.contains("pending"), "{}", v.detail);
        let v = run(&[job(0, 0, JobState::Pending), Event::End { t: 2100 }]);
        assert!(v.passed(), "within the bound: {}", v.detail);
        let v = run(&[job(0, 0, JobState::Pending), job(5, 1, JobState::Pending)]);
        assert!(v.failed() && v.detail.contains("still open"), "{}", v.detail);
        let v = run(&[
            job(0, 0, JobState::Pending),
            job(1, 0, JobState::Running),
            job(1900, 0, JobState::Stranded),
            job(1950, 0, JobState::Complete),
        ]);
        assert!(v.failed() && v.detail.contains("live job"), "{}", v.detail);
    }
}
