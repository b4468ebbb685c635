//! Per-platform verdicts (a trace that declares platforms: `backend_detail.platforms`):
//! `ceiling` / `slot_ceiling` and `mutual_exclusion` judged for each platform on its own.
//!
//! Every platform has its own destination, so one fleet-wide ceiling means nothing: a
//! serialised platform at 2/s and an uncapped one at 8/s together make 10/s, and neither is
//! over its own limit. This checker follows each process's job from its `platform` events and
//! routes what it does to the platform's own checkers:
//!
//! - **`ceiling`, `slot_ceiling`**: one [`Ceiling`] per platform, at that platform's `limit`
//!   and `burst` (absent: the header's), fed the arrivals and grants of the processes whose job is
//!   on it; multiplier and fallback events go to every platform's (they are the process's).
//!   The verdict passes when every platform's does, and names each platform with its figure;
//!   a failure names the platform that failed first in the list, and its witness.
//! - **`mutual_exclusion`**: one [`MutualExclusion`] with K = 1 per serialised platform (one
//!   key each: "only a second walk on the SAME serialized platform waits"), fed that lock's
//!   `lock_acquired` / `lock_released` and the events of the processes whose job is on it
//!   (their uncapped valve walks, fetches, crashes); fault windows go to all. Walks on an
//!   uncapped platform take no lock and are no one's critical section.
//!
//! Applies when the header declares platforms; [`crate::check::Suite`] then reports these
//! verdicts in place of the fleet-wide ones.

use crate::check::ceiling::Ceiling;
use crate::check::mutual_exclusion::MutualExclusion;
use crate::check::{Checker, Status, Verdict};
use crate::trace::{Event, Header, PlatformDetail, Sink};

/// The per-platform checker.
#[derive(Clone, Hash, Debug)]
pub struct PerPlatform {
    platforms: Vec<PlatformDetail>,
    // invariant: job[pid] is the platform of pid's current job, from its last `platform` event.
    job: Vec<Option<u32>>,
    ceilings: Vec<Ceiling>,
    // Some(checker) for a serialised platform, one key each
    exclusion: Vec<Option<MutualExclusion>>,
}

impl PerPlatform {
    /// The checker for a trace whose header declares platforms; `None` if it declares none.
    pub fn new(h: &Header) -> Option<PerPlatform> {
        let platforms = h.backend_detail.platforms().to_vec();
        if platforms.is_empty() {
            return None;
        }
        let ceilings = platforms
            .iter()
            .map(|p| {
                let mut own = h.clone();
                own.rate = p.limit;
                own.burst = p.burst.unwrap_or(h.burst);
                Ceiling::new(&own)
            })
            .collect();
        let exclusion = platforms
            .iter()
            .map(|p| {
                p.serialized.then(|| {
                    let mut own = h.clone();
                    own.backend_detail.locks = Some(1);
                    MutualExclusion::new(&own)
                })
            })
            .collect();
        Some(PerPlatform {
            job: vec![None; h.processes as usize],
            platforms,
            ceilings,
            exclusion,
        })
    }

    fn of(&self, pid: u32) -> Option<usize> {
        self.job.get(pid as usize).copied().flatten().map(|p| p as usize)
    }

    /// The verdicts that replace the fleet-wide `ceiling`, `slot_ceiling` and
    /// `mutual_exclusion`.
    pub fn verdicts(&mut self) -> Vec<Verdict> {
        let mut by_name: Vec<(&'static str, Vec<(String, Verdict)>)> = Vec::new();
        let mut add = |name: String, v: Verdict| match by_name.iter_mut().find(|(n, _)| *n == v.name) {
            Some((_, vs)) => vs.push((name, v)),
            None => by_name.push((v.name, vec![(name, v)])),
        };
        // a platform nothing reached has no ceiling to judge; it leaves the verdict not judged
        // only when no platform was reached at all
        let any_reached = self.ceilings.iter().any(|c| !c.fetched_nothing());
        for (p, c) in self.platforms.iter().zip(&mut self.ceilings) {
            let quiet = any_reached && c.fetched_nothing();
            for v in c.verdicts() {
                if !(quiet && v.name == "ceiling") {
                    add(p.name.clone(), v);
                }
            }
        }
        for (p, m) in self.platforms.iter().zip(&mut self.exclusion) {
            if let Some(m) = m {
                for v in m.verdicts() {
                    add(witness!("{} (key fc:download_lock:{})", p.name, p.name), v);
                }
            }
        }
        by_name
            .into_iter()
            .map(|(name, vs)| {
                // a failure on any platform fails; else not judged on any leaves it unjudged
                let worst = vs
                    .iter()
                    .find(|(_, v)| v.failed())
                    .or_else(|| vs.iter().find(|(_, v)| !v.judged()));
                let status = worst.map_or(Status::Pass, |(_, v)| v.status);
                let detail = match worst {
                    Some((p, v)) => witness!("platform {p}: {}", v.detail),
                    None => witness!(
                        "{}",
                        vs.iter()
                            .map(|(p, v)| format!("{p}: {}", v.detail))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                };
                Verdict { name, status, detail }
            })
            .collect()
    }
}

impl Sink for PerPlatform {
    fn event(&mut self, ev: &Event) {
        match *ev {
            Event::Platform { pid, platform, .. } => {
                if let Some(j) = self.job.get_mut(pid as usize) {
                    *j = Some(platform);
                }
            }
            // what a process does on its job's platform
            Event::Arrival { pid, .. } | Event::Grant { pid, .. } => {
                if let Some(p) = self.of(pid)
                    && let Some(c) = self.ceilings.get_mut(p)
                {
                    c.event(ev);
                }
            }
            Event::LockAcquired { lock, .. } | Event::LockReleased { lock, .. } => {
                if let Some(Some(m)) = self.exclusion.get_mut(lock as usize) {
                    m.event(ev);
                }
            }
            Event::Uncapped { pid, .. } | Event::FetchEnd { pid, .. } | Event::OpSent { pid, .. } => {
                if let Some(p) = self.of(pid)
                    && let Some(Some(m)) = self.exclusion.get_mut(p)
                {
                    m.event(ev);
                }
            }
            Event::Crash { .. } | Event::Restart { .. } => {
                // every section of a dead process ends, whatever its job was
                for m in self.exclusion.iter_mut().flatten() {
                    m.event(ev);
                }
            }
            _ => {
                // faults, multipliers, fallbacks, the end: every platform's
                for c in &mut self.ceilings {
                    c.event(ev);
                }
                for m in self.exclusion.iter_mut().flatten() {
                    m.event(ev);
                }
            }
        }
    }
}

impl Checker for PerPlatform {
    fn verdicts(&mut self) -> Vec<Verdict> {
        PerPlatform::verdicts(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Detail, ReleaseReason};

    fn header(locks: u64) -> Header {
        let mut d = Detail {
            locks: Some(locks),
            ..Detail::default()
        };
        d.platforms = Some(vec![
            PlatformDetail {
                name: "patreon".into(),
                limit: 2.0,
                burst: None,
                serialized: true,
            },
            PlatformDetail {
                name: "kemono".into(),
                limit: 2.0,
                burst: None,
                serialized: true,
            },
        ]);
        Header {
            ev: "header".into(),
            version: 3,
            source: "sim".into(),
            scenario: "t".into(),
            backend: "redis_lock".into(),
            seed: 1,
            processes: 2,
            rate: 2.0,
            burst: 2,
            multiplier_cap: 8.0,
            backend_detail: d,
        }
    }

    fn run(c: &mut dyn Checker, evs: &[Event]) -> Vec<Verdict> {
        for e in evs {
            c.event(e);
        }
        c.verdicts()
    }

    /// Two walks on the same key at once, with two keys in all: the fleet-wide count (K = 2)
    /// sees nothing wrong; judged per key, patreon's key has two holders.
    #[test]
    fn two_holders_of_one_key_fail_per_key_though_k_is_two() {
        let s = 1_000_000_000;
        let evs = [
            Event::Platform {
                t: 0,
                pid: 0,
                platform: 0,
            },
            Event::Platform {
                t: 0,
                pid: 1,
                platform: 0,
            },
            Event::LockAcquired { t: 0, pid: 0, lock: 0 },
            Event::LockAcquired { t: s, pid: 1, lock: 0 },
            Event::LockReleased {
                t: 2 * s,
                pid: 0,
                lock: 0,
                reason: ReleaseReason::Release,
            },
            Event::LockReleased {
                t: 3 * s,
                pid: 1,
                lock: 0,
                reason: ReleaseReason::Release,
            },
            Event::End { t: 4 * s },
        ];
        let h = header(2);
        let fleet = run(&mut MutualExclusion::new(&h), &evs);
        assert!(fleet[0].passed(), "{fleet:?}");
        let per = run(&mut PerPlatform::new(&h).unwrap(), &evs);
        let me = per.iter().find(|v| v.name == "mutual_exclusion").unwrap();
        assert!(me.failed(), "{me:?}");
        assert!(me.detail.starts_with("platform patreon"), "{}", me.detail);
        // one walk on each key at once is what the record wants: it passes
        let mut ok = evs.to_vec();
        ok[1] = Event::Platform {
            t: 0,
            pid: 1,
            platform: 1,
        };
        ok[3] = Event::LockAcquired { t: s, pid: 1, lock: 1 };
        ok[5] = Event::LockReleased {
            t: 3 * s,
            pid: 1,
            lock: 1,
            reason: ReleaseReason::Release,
        };
        let per = run(&mut PerPlatform::new(&h).unwrap(), &ok);
        assert!(per.iter().all(|v| !v.failed()), "{per:?}");
        // (no walk fetched: the ceilings have nothing to judge; the locks pass)
        let judged: Vec<_> = per.iter().map(|v| (v.name, v.status)).collect();
        assert_eq!(
            judged,
            [("ceiling", Status::NotJudged), ("mutual_exclusion", Status::Pass)],
            "{per:?}"
        );
    }

    /// Each platform's arrivals are judged at its own limit: 3/s on each of two 2/s platforms
    /// fails the first; 2/s on each (4/s in all) passes.
    #[test]
    fn arrivals_are_judged_at_their_platforms_limit() {
        let ms = 1_000_000;
        let h = header(2);
        let arrivals = |gap0: u64| {
            let mut evs = vec![
                Event::Platform {
                    t: 0,
                    pid: 0,
                    platform: 0,
                },
                Event::Platform {
                    t: 0,
                    pid: 1,
                    platform: 1,
                },
            ];
            let mut t = [0u64, 0];
            while t[0] < 10_000 * ms || t[1] < 10_000 * ms {
                let pid = if t[0] <= t[1] { 0 } else { 1 };
                evs.push(Event::Arrival {
                    t: t[pid],
                    pid: pid as u32,
                    thread: 0,
                    status: 200,
                });
                t[pid] += if pid == 0 { gap0 } else { 500 * ms };
            }
            evs.push(Event::End { t: 10_000 * ms });
            evs
        };
        let per = run(&mut PerPlatform::new(&h).unwrap(), &arrivals(500 * ms));
        assert!(per.iter().all(|v| v.passed()), "{per:?}");
        let per = run(&mut PerPlatform::new(&h).unwrap(), &arrivals(333 * ms));
        let c = per.iter().find(|v| v.name == "ceiling").unwrap();
        assert!(c.failed() && c.detail.starts_with("platform patreon"), "{c:?}");
    }
}
