//! `redis_gcra`: GCRA in one atomic Redis script on the Redis server's clock.
//!
//! - **In the store:** one key holding the theoretical arrival time `tat` (and, with
//!   `backoff = "global"`, the multiplier and clean streak in a hash beside it).
//! - **Atomic operation:** one Lua script (Redis runs scripts one at a time):
//!   `now = TIME; allow iff now >= tat - tau; on allow tat = max(tat, now) + T`, with
//!   `T = interval * multiplier` and `tau = T * (burst - 1)`. On deny it returns how long until
//!   the request would conform; the process sleeps that long and asks again.
//! - **Clock:** the Redis server's (`TIME`), one clock for everyone.
//! - **Store failure:** the process falls back ([`super::fallback`]).
//! - **SIGKILL leaves:** nothing but an advanced `tat` (at most one interval), self-healing.
//!
//! The decision rule is [`crate::pacer::Gcra`], differentially tested against `governor`.

use crate::backend::backoff::Backoffs;
use crate::backend::fallback::Fallbacks;
use crate::backend::{Backend, Cx, Op, ProcView, Reply, Served, Step};
use crate::clock::Reading;
use crate::pacer::Gcra;
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::Event;

/// The Redis GCRA backend.
#[derive(Debug)]
pub struct RedisGcra {
    // ---- in Redis ----
    // invariant: only ever advanced by an allowed request, to max(tat, now) + T.
    tat: Option<u64>,
    // the multiplier and clean streak in the hash beside it, and each process's own machine
    backoff: Backoffs,
    // ---- options ----
    gcra: Gcra,
    // ---- each process's memory ----
    fallbacks: Fallbacks,
}

impl RedisGcra {
    /// Build from a scenario (`[pacer] burst`, default 1).
    pub fn new(sc: &Scenario) -> RedisGcra {
        RedisGcra {
            tat: None,
            backoff: Backoffs::new(sc),
            gcra: Gcra::new(sc.interval().0, sc.pacer.burst.unwrap_or(1).max(1)),
            fallbacks: Fallbacks::new(sc),
        }
    }
}

impl Backend for RedisGcra {
    fn name(&self) -> &'static str {
        "redis_gcra"
    }

    fn detail(&self) -> serde_json::Value {
        serde_json::json!({
            "interval_ns": self.gcra.interval(),
            "burst": self.gcra.burst(),
            "fallback": self.fallbacks.mode_name(),
            "backoff": self.backoff.placed.multiplier,
            "streak": self.backoff.placed.streak,
        })
    }

    fn acquire(&mut self, _cx: &mut Cx, p: &ProcView) -> Step {
        Step::Send(Op::Gcra {
            multiplier: self.backoff.own_multiplier(p.pid),
        })
    }

    fn serve(&mut self, cx: &mut Cx, pid: u32, op: &Op, now: Reading) -> Served {
        match *op {
            Op::Gcra { multiplier } => {
                let m = multiplier.unwrap_or(self.backoff.shared_multiplier());
                let g = self.gcra.scaled(m);
                let now_ns = now.max(0) as u64;
                let d = g.decide(self.tat, now_ns);
                match d.retry_at() {
                    None => {
                        self.tat = Some(d.tat());
                        cx.out.event(&Event::Grant {
                            t: cx.t.0,
                            pid,
                            slot: now,
                            now,
                            interval: g.interval(),
                            multiplier: m,
                        });
                        Served::now(Reply::Allowed)
                    }
                    Some(at) => {
                        cx.out.event(&Event::Deny { t: cx.t.0, pid });
                        Served::now(Reply::Denied {
                            retry_after: Nanos(at - now_ns),
                        })
                    }
                }
            }
            Op::Report(signal) => Served::now(self.backoff.serve(cx, signal)),
            other => unreachable!("redis_gcra never sends {other:?}"),
        }
    }

    fn on_reply(&mut self, cx: &mut Cx, p: &ProcView, _op: &Op, reply: Reply) -> Step {
        self.fallbacks.on_success(cx, p.pid);
        match reply {
            Reply::Allowed => {
                self.fallbacks.note_slot(p, cx.t);
                Step::FetchAt(cx.t)
            }
            Reply::Denied { retry_after } => Step::RetryAt(cx.t + p.mono.ref_duration(retry_after)),
            Reply::Backoff { .. } => self.backoff.on_reply(cx, p.pid, reply),
            other => unreachable!("redis_gcra never gets {other:?}"),
        }
    }

    fn on_store_error(&mut self, cx: &mut Cx, p: &ProcView, op: &Op) -> Step {
        match op {
            Op::Report(_) => Step::Done,
            _ => self.fallbacks.on_error(cx, p, self.backoff.in_force(p.pid)),
        }
    }

    fn after_fetch(&mut self, cx: &mut Cx, p: &ProcView, status: u16) -> Step {
        self.backoff.after_fetch(cx, p.pid, status)
    }

    fn on_restart(&mut self, pid: u32) {
        self.backoff.reset(pid);
        self.fallbacks.reset(pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Collect;

    #[test]
    fn matches_the_gcra_rule() {
        // allow iff now >= tat - tau; on allow tat = max(tat, now) + T; T = 100 ms, burst 3
        let src = "name='t'\nduration='1s'\n[pacer]\nbackend='redis_gcra'\nrate=10.0\nburst=3\n[processes]\ncount=1\n";
        let mut g = RedisGcra::new(&Scenario::parse("t", src).unwrap());
        let mut sink = Collect::default();
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Store);
        let mut timers = Vec::new();
        let mut cx = Cx {
            t: crate::time::Instant(0),
            out: &mut sink,
            store_rng: &mut rng,
            timers: &mut timers,
        };
        let op = Op::Gcra { multiplier: None };
        let t = 100_000_000i64;
        let mut replies = Vec::new();
        for now in [0, 0, 0, 0, t / 2, t, 3 * t] {
            replies.push(g.serve(&mut cx, 0, &op, now).reply);
        }
        use Reply::*;
        assert_eq!(
            replies,
            vec![
                Allowed, // tat 0 -> T
                Allowed, // T -> 2T
                Allowed, // 2T -> 3T (burst 3)
                Denied {
                    retry_after: Nanos(t as u64)
                }, // tat - tau = 3T - 2T = T
                Denied {
                    retry_after: Nanos(t as u64 / 2)
                },
                Allowed, // now = T >= 3T - 2T
                Allowed, // idle: tat = max(4T, 3T) + T
            ]
        );
    }
}
