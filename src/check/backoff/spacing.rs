//! Property 3 of [`super`], spacing: consecutive grants of one authority are spaced by the
//! interval times the multiplier in force, less the authority's GCRA tolerance; a grant
//! answering an operation sent to the store is the shared authority's, any other the
//! process's own pacer's.

use super::Failures;
use crate::check::common::{LoopMap, mult, secs};
use crate::trace::{Event, OpKind};

/// Rounding slack for slot spacing and interval arithmetic, nanoseconds.
const SLACK_NS: u64 = 1_000;

/// Each authority's next slot.
#[derive(Clone, Hash, Debug)]
pub(super) struct Spacing {
    base: u64,
    burst: u64,
    // thread loops with a request out that a shared grant answers
    outstanding: LoopMap<()>,
    shared_tat: Option<u64>,
    // each own pacer's next slot: a process's, or, when each thread runs its own instance of
    // the process side, a thread's
    local_tat: LoopMap<u64>,
    per_thread: bool,
    /// Grants seen.
    pub(super) grants: u64,
}

impl Spacing {
    /// For the base interval `base` and the shared authority's GCRA `burst`.
    /// An explorer's form at `now` ([`crate::form`]): each authority's theoretical arrival
    /// time relative to now (a later grant may name a slot before now: not clipped).
    pub(super) fn form(&self, f: &mut crate::form::Form) {
        let Spacing {
            base,
            burst,
            outstanding,
            shared_tat,
            local_tat,
            per_thread,
            grants,
        } = self;
        f.word(crate::choice::fingerprint(&(base, burst, per_thread, grants)));
        // (the loops with a request out, each by its process's name)
        outstanding.form_keys(f);
        use crate::form::plant::{Plant, planted};
        if !planted(Plant::GcraTatAndEveryMirror) {
            f.word(shared_tat.map_or(u64::MAX, |t| t.wrapping_sub(f.now())));
        }
        let now = f.now();
        f.per_pid(local_tat.iter().map(|((pid, th), t)| (pid, (th, t.wrapping_sub(now)))));
    }

    pub(super) fn new(base: u64, burst: u64, per_thread: bool) -> Spacing {
        Spacing {
            base,
            burst,
            outstanding: LoopMap::default(),
            shared_tat: None,
            local_tat: LoopMap::default(),
            per_thread,
            grants: 0,
        }
    }

    /// Every event but `grant`: which processes have a request out that a shared grant
    /// answers.
    #[inline(always)]
    pub(super) fn event(&mut self, ev: &Event) {
        match ev {
            Event::OpSent { pid, thread, op, .. } if shared_grant_answers(*op) => {
                self.outstanding.insert(*pid, *thread, ());
            }
            Event::Reply { pid, thread, op, .. } if shared_grant_answers(*op) => {
                self.outstanding.remove(*pid, *thread);
            }
            Event::StoreError { pid, thread, .. } => {
                self.outstanding.remove(*pid, *thread);
            }
            Event::Crash { pid, .. } | Event::Restart { pid, .. } => {
                self.outstanding.remove_process(*pid);
            }
            // the shared pace vanished with the store's state: the next grant starts it afresh
            Event::Fault {
                kind: crate::trace::FaultKind::StateLost,
                start: true,
                ..
            } => self.shared_tat = None,
            _ => {}
        }
    }

    /// A `grant` event: its slot against the previous one of the same authority.
    pub(super) fn grant(&mut self, f: &mut Failures, ev: &Event) {
        let Event::Grant {
            t,
            pid,
            thread,
            slot,
            now,
            interval,
            multiplier: m,
            ..
        } = *ev
        else {
            return;
        };
        self.grants += 1;
        let at = (t as i128 + slot as i128 - now as i128).clamp(0, u64::MAX as i128) as u64;
        let shared = self.outstanding.get(pid, thread).is_some();
        let own = if self.per_thread { thread } else { 0 };
        // (multiplier 1, the usual case, needs no rounding: the base interval is exact as a float)
        let expect = if m == 1.0 && self.base < 1 << 53 {
            self.base
        } else {
            (self.base as f64 * m).round() as u64
        };
        let tol = SLACK_NS.max(expect / 1_000_000);
        if shared && interval.abs_diff(expect) > tol {
            f.fail(format!(
                "at {}: grant to pid {pid} applied interval {:.3} ms under multiplier {}; interval x multiplier is {:.3} ms",
                secs(t),
                interval as f64 / 1e6,
                mult(m),
                expect as f64 / 1e6
            ));
        } else if !shared && interval + tol < expect {
            f.fail(format!(
                "at {}: pid {pid}'s own pacer applied interval {:.3} ms under multiplier {}, shorter than interval x multiplier {:.3} ms",
                secs(t),
                interval as f64 / 1e6,
                mult(m),
                expect as f64 / 1e6
            ));
        }
        let burst = if shared { self.burst } else { 1 };
        let tat = if shared {
            self.shared_tat
        } else {
            self.local_tat.get(pid, own).copied()
        };
        if let Some(x) = tat {
            let tau = interval.saturating_mul(burst - 1);
            let earliest = x.saturating_sub(tau);
            if at + SLACK_NS < earliest {
                let whose = if shared {
                    "the shared pace".to_string()
                } else {
                    format!("pid {pid}'s own pacer")
                };
                f.fail(format!(
                    "at {}: {whose} granted pid {pid} a slot at {} (reference time), {:.3} ms before the previous slot + interval x multiplier ({}){}",
                    secs(t),
                    secs(at),
                    (earliest - at) as f64 / 1e6,
                    secs(earliest),
                    if burst > 1 {
                        format!(" less the burst tolerance of {}", burst - 1)
                    } else {
                        String::new()
                    }
                ));
            }
        }
        let next = tat.unwrap_or(at).max(at).saturating_add(interval);
        if shared {
            self.shared_tat = Some(next);
        } else {
            self.local_tat.insert(pid, own, next);
        }
    }
}

/// Whether a `grant` that answers `op` comes from the shared authority: a reservation, a GCRA
/// check, or a backend's own request for permission ([`OpKind::Acquire`], treated like a
/// reservation), or a later step of such a request ([`OpKind::Complete`]: the write after a
/// check, which is what grants in a check-then-write design). A lock try asks for permission
/// too, but a lock answers it, never a grant.
fn shared_grant_answers(op: OpKind) -> bool {
    (op.asks_permission() || op == OpKind::Complete) && op != OpKind::TryLock
}
