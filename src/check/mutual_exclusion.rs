//! `mutual_exclusion` (lock backends): at most K critical sections at once, except while a
//! safety valve / broker error runs a job uncapped or the store is out, which is reported, not
//! failed; a lock the store drops under its live holder is not excused.
//!
//! A process is in its critical section from its `lock_acquired` until the section ends: a
//! `lock_released` with reason `release` (the holder finished) or `holder_died`, or its
//! `crash` / `restart`. A release with any other reason (`store_restart`, `ttl`,
//! `session_gone`) is the *store* dropping the lock; the holder does not know and its section
//! goes on, so another process may enter beside it: exactly the overlap this checker exists to
//! see. An `uncapped` job is a section without a lock; it lasts until the process next tries a
//! lock, dies, or has made [`Detail::walk_fetches`](crate::trace::Detail::walk_fetches) fetches, or
//! (download jobs, whose walks vary in length) until its task finalises its event (`job_event`).
//!
//! K is [`Detail::lock_count`](crate::trace::Detail::lock_count). An overlap (more than K
//! sections) is excused when one of the sections is uncapped (the design's declared way to run
//! without the lock) or a `store_outage` or `partition` window is open (the fallback policy
//! runs then, and the degradation check judges it); excused overlaps are counted and reported.
//! A lock the store dropped under a live holder (`store_restart`, `ttl`, `session_gone`)
//! excuses nothing: the holder still runs, nobody chose to run without the lock, and the second
//! walk beside it is the failure. Applies when the trace has lock events.

use crate::check::common::secs;
use crate::check::{Checker, Status, Verdict};
#[cfg(doc)]
use crate::trace::Detail;
use crate::trace::{Event, FaultKind, Header, OpKind, ReleaseReason, Sink, UncappedReason};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Hash, Clone, Debug)]
struct Section {
    lock: u32,
    since: u64,
    lost: Option<(ReleaseReason, u64)>,
    regranted: bool,
}

#[derive(Hash, Clone, Debug)]
struct Uncapped {
    since: u64,
    reason: UncappedReason,
    fetches: u64,
}

/// The mutual-exclusion checker.
#[derive(Clone, Hash, Debug)]
pub struct MutualExclusion {
    k: usize,
    walk: Option<u64>,
    sections: BTreeMap<u32, Section>,
    uncapped: BTreeMap<u32, Uncapped>,
    store: BTreeMap<u32, u32>,
    outages: BTreeSet<u32>,
    seen: bool,
    max: usize,
    // invariant: Some((since, excused)) while more than K sections run.
    overlap: Option<(u64, bool)>,
    excused: u64,
    excused_ns: u64,
    excused_first: Option<String>,
    violating_ns: u64,
    failure: Option<String>,
    failures: u64,
}

impl MutualExclusion {
    /// An explorer's form ([`crate::form`]): while nobody is in a critical section, uncapped,
    /// or overlapping, nothing it keeps holds an instant, and it meets its like at any
    /// instant; otherwise absolute.
    pub fn form(&self, f: &mut crate::form::Form) {
        let holds_pids = !(self.sections.is_empty() && self.uncapped.is_empty() && self.store.is_empty());
        if holds_pids || self.excused_first.is_some() || self.failure.is_some() {
            // (processes by id: who holds what, and the witnesses)
            f.raw_pids();
        }
        f.word(crate::choice::fingerprint(self));
        if !(self.sections.is_empty() && self.uncapped.is_empty() && self.overlap.is_none()) {
            f.absolute();
        }
    }

    /// A checker for the trace this header introduces.
    pub fn new(h: &Header) -> MutualExclusion {
        let d = &h.backend_detail;
        MutualExclusion {
            k: d.lock_count() as usize,
            walk: d.walk_fetches(),
            sections: BTreeMap::new(),
            uncapped: BTreeMap::new(),
            store: BTreeMap::new(),
            outages: BTreeSet::new(),
            seen: false,
            max: 0,
            overlap: None,
            excused: 0,
            excused_ns: 0,
            excused_first: None,
            violating_ns: 0,
            failure: None,
            failures: 0,
        }
    }

    fn count(&self) -> usize {
        self.sections.len() + self.uncapped.len()
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .sections
            .iter()
            .map(|(pid, s)| {
                let mut d = format!("pid {pid} holding lock {} since {}", s.lock, secs(s.since));
                if let Some((reason, at)) = &s.lost {
                    d.push_str(&format!(
                        " (the store dropped it at {}: {reason}; the holder does not know)",
                        secs(*at)
                    ));
                } else if s.regranted {
                    d.push_str(" (the store granted its lock to another: its key expired under it?)");
                }
                d
            })
            .collect();
        parts.extend(
            self.uncapped
                .iter()
                .map(|(pid, u)| format!("pid {pid} uncapped since {} ({})", secs(u.since), u.reason)),
        );
        parts.join("; ")
    }

    fn excuse(&self) -> Option<String> {
        if let Some((pid, u)) = self.uncapped.iter().next() {
            return Some(format!("pid {pid} uncapped ({})", u.reason));
        }
        if !self.outages.is_empty() {
            return Some("store outage in force".into());
        }
        None
    }

    /// After any change in the sections at `t`.
    fn update(&mut self, t: u64) {
        let n = self.count();
        self.max = self.max.max(n);
        match self.overlap {
            None if n > self.k => {
                let excuse = self.excuse();
                match excuse {
                    Some(why) => {
                        self.excused += 1;
                        if self.excused_first.is_none() {
                            self.excused_first = Some(format!("first at {} ({why})", secs(t)));
                        }
                        self.overlap = Some((t, true));
                    }
                    None => {
                        self.failures += 1;
                        if self.failure.is_none() {
                            self.failure = Some(format!(
                                "at {}: {n} critical sections at once, more than K = {}: {}",
                                secs(t),
                                self.k,
                                self.describe()
                            ));
                        }
                        self.overlap = Some((t, false));
                    }
                }
            }
            Some((since, excused)) if n <= self.k => {
                if excused {
                    self.excused_ns += t - since;
                } else {
                    self.violating_ns += t - since;
                }
                self.overlap = None;
            }
            _ => {}
        }
    }

    fn end_section(&mut self, pid: u32) {
        if let Some(s) = self.sections.remove(&pid)
            && self.store.get(&s.lock) == Some(&pid)
        {
            self.store.remove(&s.lock);
        }
    }
}

impl Sink for MutualExclusion {
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        // (checked inline) the events that can start or end a section; any other leaves the
        // sections, and so `update`, as they were
        let relevant = match ev {
            Event::LockAcquired { .. }
            | Event::LockReleased { .. }
            | Event::Uncapped { .. }
            | Event::OpSent {
                op: OpKind::TryLock, ..
            }
            | Event::Crash { .. }
            | Event::Restart { .. }
            | Event::JobEvent { .. }
            | Event::Fault { .. } => true,
            Event::FetchEnd { .. } => !self.uncapped.is_empty(),
            _ => false,
        };
        if relevant {
            self.section_event(ev);
        }
    }
}

impl MutualExclusion {
    fn section_event(&mut self, ev: &Event) {
        let t = ev.t();
        match ev {
            Event::LockAcquired { pid, lock, .. } => {
                self.seen = true;
                self.uncapped.remove(pid);
                if let Some(&other) = self.store.get(lock)
                    && other != *pid
                    && let Some(s) = self.sections.get_mut(&other)
                    && s.lost.is_none()
                {
                    s.regranted = true;
                }
                self.store.insert(*lock, *pid);
                self.sections.insert(
                    *pid,
                    Section {
                        lock: *lock,
                        since: t,
                        lost: None,
                        regranted: false,
                    },
                );
            }
            Event::LockReleased { pid, lock, reason, .. } => {
                self.seen = true;
                if reason.ends_section() {
                    self.end_section(*pid);
                } else {
                    if self.store.get(lock) == Some(pid) {
                        self.store.remove(lock);
                    }
                    if let Some(s) = self.sections.get_mut(pid)
                        && s.lock == *lock
                    {
                        s.lost = Some((*reason, t));
                    }
                }
            }
            Event::Uncapped { pid, reason, .. } => {
                self.uncapped.insert(
                    *pid,
                    Uncapped {
                        since: t,
                        reason: *reason,
                        fetches: 0,
                    },
                );
            }
            Event::FetchEnd { pid, .. } => {
                if let Some(u) = self.uncapped.get_mut(pid) {
                    u.fetches += 1;
                    if self.walk.is_some_and(|w| u.fetches >= w) {
                        self.uncapped.remove(pid);
                    }
                }
            }
            Event::OpSent {
                pid,
                op: OpKind::TryLock,
                ..
            } => {
                self.uncapped.remove(pid);
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.end_section(*pid);
                self.uncapped.remove(pid);
            }
            Event::JobEvent {
                pid: Some(pid), state, ..
            } if state.is_final() => {
                // a download task's walk is over once it finalises its event
                self.uncapped.remove(pid);
            }
            Event::Fault {
                id,
                kind: FaultKind::StoreOutage | FaultKind::Partition,
                start,
                ..
            } => {
                if *start {
                    self.outages.insert(*id);
                } else {
                    self.outages.remove(id);
                }
            }
            _ => {}
        }
        self.update(t);
    }
}

impl Checker for MutualExclusion {
    fn verdicts(&mut self) -> Vec<Verdict> {
        if !self.seen {
            return Vec::new();
        }
        let reported = if self.excused > 0 {
            witness!(
                "; {} overlap(s) excused, {} in all, {}",
                self.excused,
                secs(self.excused_ns),
                self.excused_first.as_deref().unwrap_or("")
            )
        } else {
            String::new()
        };
        let v = match &self.failure {
            None => Verdict {
                name: "mutual_exclusion",
                status: Status::Pass,
                detail: witness!(
                    "at most {} critical section(s) at once (K = {}){reported}",
                    self.max,
                    self.k
                ),
            },
            Some(f) => Verdict {
                name: "mutual_exclusion",
                status: Status::Fail,
                detail: witness!(
                    "{f} ({} overlap(s), {} in all{reported})",
                    self.failures,
                    secs(self.violating_ns)
                ),
            },
        };
        vec![v]
    }
}
