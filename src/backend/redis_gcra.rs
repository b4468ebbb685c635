//! `redis_gcra`: GCRA in one atomic Redis script on the Redis server's clock.
//!
//! - **In the store:** one key holding the theoretical arrival time `tat` (and, with
//!   `backoff = "global"`, the multiplier and clean streak in a hash beside it).
//! - **Atomic operation:** one Lua script (Redis runs scripts one at a time):
//!   `now = TIME; allow iff now >= tat - tau; on allow tat = max(tat, now) + T`, with
//!   `T = interval * multiplier` and `tau = T * (burst - 1)`. On deny it returns how long until
//!   the request would conform; the process sleeps that long and asks again.
//! - **Clock:** the Redis server's (`TIME`), one clock for everyone.
//! - **Store failure:** the process falls back (`super::fallback`).
//! - **SIGKILL leaves:** nothing but an advanced `tat` (at most one interval), self-healing.
//!
//! The decision rule is [`crate::pacer::Gcra`], differentially tested against `governor`.

use crate::backend::backoff::{BackoffReply, LocalBackoff, Placed, SharedBackoff, Signal};
use crate::backend::fallback::{FallbackCfg, Pace, ProcFallback};
use crate::backend::options::{self, Fallback, OptionError, Placement};
use crate::backend::{
    Backend, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide, Threads,
};
use crate::clock::Reading;
use crate::fault::KillPoint;
use crate::pacer::Gcra;
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::{Event, OpKind};
use serde::{Deserialize, Serialize};

/// `[pacer]` options of `redis_gcra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisGcraOptions {
    /// What a process does when Redis is unreachable. Default `divided`.
    pub fallback: Option<Fallback>,
    /// The divided fallback's cap. Default `processes.count - 1`.
    pub cap: Option<u32>,
    /// Where the backoff multiplier lives. Default `global` (a hash beside the key).
    pub backoff: Option<Placement>,
    /// Where the clean streak lives. Default: wherever the multiplier lives.
    pub streak: Option<Placement>,
    /// GCRA burst: requests that may go back to back. Default 1 (pacesim's choice: a pure
    /// pace, like the row).
    pub burst: Option<u32>,
    /// In fallback, how long a store error keeps the process from asking the Redis again (a
    /// circuit breaker). Default: none, every reservation asks (pacesim's choice; the records
    /// do not say).
    pub rejoin_after: Option<Nanos>,
}

/// An operation of `redis_gcra`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum GcraOp {
    /// GCRA check-and-update, with the sender's own multiplier if it keeps one.
    Gcra {
        /// Per-process multiplier, when backoff state is per process.
        multiplier: Option<f64>,
    },
    /// Tell shared backoff state about a response.
    Report(Signal),
}

/// Every part exact, multipliers by their bits.
impl std::hash::Hash for GcraOp {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            GcraOp::Gcra { multiplier } => multiplier.map(f64::to_bits).hash(h),
            GcraOp::Report(signal) => signal.hash(h),
        }
    }
}

impl StoreOp for GcraOp {
    fn kind(&self) -> OpKind {
        match self {
            GcraOp::Gcra { .. } => OpKind::Gcra,
            GcraOp::Report(_) => OpKind::Report,
        }
    }
}

/// The script's answer.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum GcraReply {
    /// Allowed, under the multiplier the script applied.
    Allowed {
        /// The multiplier applied.
        multiplier: f64,
    },
    /// Denied; it would conform after `retry_after`.
    Denied {
        /// Wait before the next try.
        retry_after: Nanos,
        /// The multiplier applied.
        multiplier: f64,
    },
    /// Shared backoff state after a report.
    Backoff(BackoffReply),
}

/// Every part exact, multipliers by their bits.
impl std::hash::Hash for GcraReply {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            GcraReply::Allowed { multiplier } => multiplier.to_bits().hash(h),
            GcraReply::Denied {
                retry_after,
                multiplier,
            } => (retry_after, multiplier.to_bits()).hash(h),
            GcraReply::Backoff(reply) => reply.hash(h),
        }
    }
}

impl StoreReply for GcraReply {}

/// The Redis GCRA backend.
#[derive(Clone, Debug)]
pub struct RedisGcra {
    gcra: Gcra,
    fallback: FallbackCfg,
    placed: Placed,
}

impl RedisGcra {
    /// From the scenario and the options.
    pub fn new(sc: &Scenario, o: RedisGcraOptions) -> Result<RedisGcra, OptionError> {
        options::at_least_one("burst", o.burst)?;
        Ok(RedisGcra {
            gcra: Gcra::new(sc.interval().0, o.burst.unwrap_or(1)),
            fallback: FallbackCfg::new(sc, o.fallback.unwrap_or(Fallback::Divided), o.cap, o.rejoin_after)?,
            placed: Placed::new(o.backoff, o.streak, sc.backoff_config()),
        })
    }

    /// The GCRA in force.
    pub fn gcra(&self) -> &Gcra {
        &self.gcra
    }
}

impl Backend for RedisGcra {
    type Op = GcraOp;
    type Reply = GcraReply;
    type Process = GcraProcess;
    type Store = GcraStore;

    fn name(&self) -> &str {
        "redis_gcra"
    }

    fn detail(&self) -> serde_json::Value {
        let detail = serde_json::json!({
            "interval_ns": self.gcra.interval(),
            "streak": self.placed.streak,
        });
        self.fallback.stated(detail)
    }

    fn facts(&self) -> crate::backend::Facts {
        crate::backend::Facts {
            burst: Some(u64::from(self.gcra.burst())),
            fallback: Some(self.fallback.trace_mode().into()),
            backoff: Some(self.placed.multiplier.into()),
            ..Default::default()
        }
    }

    /// Shared: a process's backoff machine, its cached shared multiplier and its fallback
    /// switch are per process (the records'); nothing is kept per operation in flight.
    fn threads(&self) -> Threads {
        Threads::Shared
    }

    fn process(&self, _pid: u32) -> GcraProcess {
        GcraProcess {
            backoff: self.placed.local(),
            fallback: self.fallback.fresh(),
            shared_multiplier: 1.0,
        }
    }

    fn kill_points(&self) -> Vec<KillPoint> {
        vec![
            KillPoint::MidReservation,
            KillPoint::SleepingToSlot,
            KillPoint::MidFetch,
        ]
    }

    fn store(&self) -> GcraStore {
        GcraStore {
            tat: None,
            backoff: self.placed.shared(),
            gcra: self.gcra,
        }
    }
}

/// The keys in Redis.
#[derive(Clone, Hash, Debug)]
pub struct GcraStore {
    // invariant: only ever advanced by an allowed request, to max(tat, now) + T.
    tat: Option<u64>,
    // the multiplier and clean streak in the hash beside it
    backoff: SharedBackoff,
    gcra: Gcra,
}

impl StoreSide for GcraStore {
    type Op = GcraOp;
    type Reply = GcraReply;

    /// The key's `tat` by how far ahead of the Redis clock it is (the script reads only
    /// `max(tat, now)`: any past one, or none, alike), the backoff hash as it is.
    fn form(&self, f: &mut crate::form::Form, now: Reading) {
        let GcraStore { tat, backoff, gcra } = self;
        let now = now.max(0) as u64;
        use crate::form::plant::{Plant, planted};
        let tat = tat.map_or(0, |t| t.saturating_sub(now));
        if [Plant::GcraTat, Plant::GcraTatAndItsMirror, Plant::GcraTatAndEveryMirror]
            .into_iter()
            .any(planted)
        {
            #[cfg(test)]
            crate::form::plant::left_out(tat);
        } else {
            f.word(tat);
        }
        f.word(crate::choice::fingerprint(&(backoff, gcra)));
    }

    // (durations, multipliers and backoff signals only)
    const TIMELESS_MESSAGES: bool = true;

    // (its form keeps no process id: the TAT, the shared backoff, the rate)
    const SYMMETRIC: bool = true;

    /// The `tat` key and the backoff hash are gone (a flush, an eviction): the next check
    /// finds no key and allows at once.
    fn on_state_lost(&mut self, cx: &mut StoreCx) {
        self.tat = None;
        self.backoff.lost(cx);
    }

    fn serve(&mut self, cx: &mut StoreCx, s: Session, op: &GcraOp, now: Reading) -> Served<GcraReply> {
        match *op {
            GcraOp::Gcra { multiplier } => {
                let m = multiplier.unwrap_or(self.backoff.multiplier());
                let g = self.gcra.scaled(m);
                let now_ns = now.max(0) as u64;
                let d = g.decide(self.tat, now_ns);
                match d.retry_at() {
                    None => {
                        self.tat = Some(d.tat());
                        cx.out.grant(cx.t.0, s.pid, s.thread, now, now, g.interval(), m);
                        Served::now(GcraReply::Allowed { multiplier: m })
                    }
                    Some(at) => {
                        cx.out.event(&Event::Deny { t: cx.t.0, pid: s.pid });
                        Served::now(GcraReply::Denied {
                            retry_after: Nanos(at - now_ns),
                            multiplier: m,
                        })
                    }
                }
            }
            GcraOp::Report(signal) => Served::now(GcraReply::Backoff(self.backoff.serve(cx, signal))),
        }
    }
}

/// One process's side: its backoff machine and fallback.
#[derive(Clone, Debug)]
pub struct GcraProcess {
    backoff: LocalBackoff,
    fallback: ProcFallback,
    // The shared multiplier as the store last reported it.
    shared_multiplier: f64,
}

crate::exact_hash!(GcraProcess {
    backoff,
    fallback,
    shared_multiplier: bits
});

impl GcraProcess {
    /// What its fallback pace starts from: its own multiplier, or the shared one it last saw.
    fn pace(&self) -> Pace {
        match self.backoff.own_multiplier() {
            Some(m) => Pace::Own(m),
            None => Pace::Shared(self.shared_multiplier),
        }
    }
}

impl ProcessSide for GcraProcess {
    type Op = GcraOp;
    type Reply = GcraReply;

    // (it keeps no process id: its backoff, its fallback, the multiplier last reported)
    const SYMMETRIC: bool = true;

    fn form(&self, f: &mut crate::form::Form, mono_now: u64) {
        let GcraProcess {
            backoff,
            fallback,
            shared_multiplier,
        } = self;
        f.word(crate::choice::fingerprint(&(backoff, shared_multiplier.to_bits())));
        fallback.form(f, mono_now);
    }

    fn acquire(&mut self, cx: &mut ProcCx) -> Step<GcraOp> {
        if let Some(step) = self.fallback.short_circuit(cx, self.pace()) {
            return step;
        }
        Step::Send(GcraOp::Gcra {
            multiplier: self.backoff.own_multiplier(),
        })
    }

    fn on_reply(&mut self, cx: &mut ProcCx, _op: &GcraOp, reply: GcraReply) -> Step<GcraOp> {
        self.fallback.on_success(cx);
        match reply {
            GcraReply::Allowed { multiplier } => {
                self.shared_multiplier = multiplier;
                self.fallback.note_slot(cx, cx.t);
                Step::FetchAt(cx.t)
            }
            GcraReply::Denied {
                retry_after,
                multiplier,
            } => {
                self.shared_multiplier = multiplier;
                Step::RetryAt(cx.after_mono(retry_after))
            }
            GcraReply::Backoff(r) => {
                self.shared_multiplier = r.multiplier;
                self.backoff.on_reply(cx, r)
            }
        }
    }

    fn on_store_error(&mut self, cx: &mut ProcCx, op: &GcraOp) -> Step<GcraOp> {
        match op {
            GcraOp::Report(_) => Step::Done,
            GcraOp::Gcra { .. } => {
                let pace = self.pace();
                self.fallback.on_error(cx, pace)
            }
        }
    }

    fn after_fetch(&mut self, cx: &mut ProcCx, status: u16) -> Step<GcraOp> {
        self.fallback.on_response(cx, status);
        let step = self.backoff.after_fetch(cx, status, GcraOp::Report);
        self.fallback.hold_report(cx, step)
    }
}

impl crate::backend::Configure for RedisGcraOptions {
    type Backend = RedisGcra;
    fn build(self, sc: &Scenario) -> Result<RedisGcra, OptionError> {
        RedisGcra::new(sc, self)
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
        let sc = crate::registry::parse("t", src).unwrap();
        let b = RedisGcra::new(&sc, options::parse("redis_gcra", &sc.pacer.options, true).unwrap()).unwrap();
        let mut g = b.store();
        let mut sink = Collect::default();
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Store);
        let mut timers = Vec::new();
        let mut cx = StoreCx {
            t: crate::time::Instant(0),
            out: &mut sink,
            rng: &mut rng,
            timers: &mut timers,
        };
        let op = GcraOp::Gcra { multiplier: None };
        let s = Session {
            pid: 0,
            incarnation: 0,
            thread: 0,
        };
        let t = 100_000_000i64;
        let mut replies = Vec::new();
        for now in [0, 0, 0, 0, t / 2, t, 3 * t] {
            replies.push(g.serve(&mut cx, s, &op, now).reply);
        }
        let allowed = GcraReply::Allowed { multiplier: 1.0 };
        let denied = |d: i64| GcraReply::Denied {
            retry_after: Nanos(d as u64),
            multiplier: 1.0,
        };
        assert_eq!(
            replies,
            vec![
                allowed,   // tat 0 -> T
                allowed,   // T -> 2T
                allowed,   // 2T -> 3T (burst 3)
                denied(t), // tat - tau = 3T - 2T = T
                denied(t / 2),
                allowed, // now = T >= 3T - 2T
                allowed, // idle: tat = max(4T, 3T) + T
            ]
        );
    }
}
