//! `ceiling`: the aggregate rate ceiling, over every window length. A run that fetched
//! nothing (no arrival: every store operation failed, say) is not judged: no arrival cannot
//! show the rate held.
//!
//! A 1 s window is not enough: four limiters' 40 requests at 50/s fit inside one second (bound
//! 51) yet overshoot 4x over 0.2 s. So the check is conformance to GCRA(interval, tolerance),
//! in one streaming pass, reported as `burst_needed`: the smallest burst the sequence needs
//! (1 = perfectly paced; see [`crate::pacer::BurstMeter`] for the exact formula and its window
//! form). The interval of each request is the base interval times the backoff multiplier in
//! force for it (the multiplier of the grant that authorised it, or its process's own). The
//! grant that authorised an arrival is the latest one its thread got (`grant` and `arrival`
//! both name the thread): a process of several threads holds several grants at once, and
//! after a 429 a sibling thread's new grant carries a higher multiplier than the slot an
//! earlier grant already booked, which still fetches at that slot. An arrival with no grant of
//! its thread's outstanding (a backend that grants none, a fallback pacer) is charged its
//! process's own multiplier: its last grant's, or the last per-process `multiplier` event's.
//! One thread per process, its grant's multiplier is the process's last: nothing changes. A
//! process cut off from the store (between its `fallback` entry and exit) keeps the one it
//! last had from the shared authority: the steps its own fallback pacer takes on 429s slow it
//! down, but they are its own, not the fleet's, so they do not lower the ceiling.
//!
//! Two sequences are measured:
//! - **arrivals** at the destination: what the destination feels, and the verdict (`ceiling`);
//! - **slots** the pacer granted, mapped to reference time (`grant time + slot - now`):
//!   `slot_ceiling`. They differ: a slot granted "now" by an idle pacer starts late by the
//!   reply's latency and can bunch with the next, on-time slot; arrivals also carry the
//!   network's jitter.
//!
//! The largest count in any 1 s window `[t, t + 1 s)` of arrivals is reported against
//! `rate + 1` too, since people read that figure; it is not the verdict.

use crate::check::common::MostlySorted;
use crate::check::{Checker, Status, Verdict};
use crate::pacer::BurstMeter;
use crate::time::Nanos;
use crate::trace::{Event, Header, Sink};
use serde::Serialize;
use std::collections::VecDeque;

/// The largest count in a sliding window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MaxWindow {
    /// Window length, seconds.
    pub window_s: f64,
    /// Largest number of arrivals in any window `[t, t + window)`.
    pub count: u64,
    /// `rate * window + 1`, the most a paced sequence can put in such a window.
    pub bound: u64,
    /// Start of the first window reaching `count`, seconds.
    pub at_s: f64,
}

crate::exact_hash!(MaxWindow {
    window_s: bits,
    count,
    bound,
    at_s: bits
});

/// The ceiling checker.
#[derive(Clone, Debug)]
pub struct Ceiling {
    interval: Nanos,
    burst: u64,
    rate: f64,
    // pid -> multiplier in force for that process's next request that no grant of its own
    // thread authorised
    multiplier: Vec<f64>,
    // invariant: authorised[pid][thread] is the multiplier of that thread's latest grant while
    // no arrival of the thread has used it since.
    authorised: Vec<Vec<Option<f64>>>,
    // pid -> in fallback (its own multiplier steps are not the ceiling's)
    cut_off: Vec<bool>,
    arrivals: BurstMeter,
    arrival_pids: Vec<(usize, u32)>,
    slots: BurstMeter,
    // invariant: granted slots not yet released to `slots`, as (reference time, multiplier bits),
    // released in that order from both queues: the ones granted in that order (the usual
    // case, one store clock) in a FIFO, the others in a heap ([`MostlySorted`]).
    pending: MostlySorted<(u64, u64)>,
    window: Nanos,
    recent: VecDeque<u64>,
    max_window: MaxWindow,
    // the design takes locks (its facts state locks, a TTL or a lock use): it grants no slots,
    // and `slot_ceiling` does not apply to it
    lock_design: bool,
}

crate::exact_hash!(Ceiling {
    interval,
    burst,
    rate: bits,
    multiplier: bits,
    authorised: bits,
    cut_off,
    arrivals,
    arrival_pids,
    slots,
    pending,
    window,
    recent,
    max_window,
    lock_design
});

impl Ceiling {
    /// A ceiling checker for the trace this header introduces.
    pub fn new(h: &Header) -> Ceiling {
        let interval = Nanos::interval_of_rate(h.rate);
        Ceiling {
            interval,
            burst: h.burst,
            rate: h.rate,
            multiplier: vec![1.0; h.processes as usize],
            authorised: vec![Vec::new(); h.processes as usize],
            cut_off: vec![false; h.processes as usize],
            arrivals: BurstMeter::new(interval.0).keeping(h.burst),
            arrival_pids: Vec::new(),
            slots: BurstMeter::new(interval.0).keeping(h.burst),
            pending: MostlySorted::default(),
            window: Nanos::SECOND,
            recent: VecDeque::with_capacity(16),
            max_window: MaxWindow {
                window_s: 1.0,
                count: 0,
                bound: (h.rate + 1.0).floor() as u64,
                at_s: 0.0,
            },
            lock_design: h.backend_detail.is_lock_design(),
        }
    }

    fn scaled(&self, m: f64) -> u64 {
        if m <= 1.0 {
            self.interval.0
        } else {
            self.interval.scale(m).0
        }
    }

    fn hold_slot(&mut self, slot: (u64, u64)) {
        self.pending.push(slot);
    }

    /// Releases the granted slots due by `upto` to `slots`, in time order.
    #[inline(always)]
    fn release_slots(&mut self, upto: u64) {
        // (checked inline: most events find none due)
        if self.pending.peek().is_some_and(|(t, _)| t <= upto) {
            self.release_due(upto);
        }
    }

    fn release_due(&mut self, upto: u64) {
        while let Some((t, mbits)) = self.pending.peek()
            && t <= upto
        {
            self.pending.pop();
            let i = self.scaled(f64::from_bits(mbits));
            self.slots.push_with_interval(t, i);
        }
    }

    /// An explorer's form at `now` ([`crate::form`]): what each meter reads of the arrivals
    /// and slots to come (its theoretical arrival time, only while ahead of now: a GCRA reads
    /// `max(tat, t)`), the slots granted and not yet reached (relative to now), what decides
    /// the multiplier of an arrival, and as slack whether each meter already needed more than
    /// the burst (its verdict fails then, whatever comes). The window of recent arrivals, the
    /// largest window and the meters' records of where they needed more are the witness's.
    pub fn form(&self, f: &mut crate::form::Form) {
        use crate::choice::fingerprint;
        // (every field named: one added later is placed here, or the build fails)
        let Ceiling {
            interval,
            burst,
            rate,
            multiplier,
            authorised,
            cut_off,
            arrivals,
            arrival_pids: _,
            slots,
            pending,
            window: _,
            recent: _,
            max_window: _,
            lock_design,
        } = self;
        f.word(fingerprint(&(
            interval,
            burst,
            rate.to_bits(),
            lock_design,
            // (no arrival yet: not judged if none comes)
            arrivals.is_empty(),
        )));
        // (each process's multiplier, its threads' authorised ones, whether it is cut off: by
        // the process's name)
        if crate::form::plant::planted(crate::form::plant::Plant::CeilingKeptById) {
            // (planted: kept by the processes' ids, in their order)
            f.word(crate::form::fingerprint_bits(multiplier));
            f.word(crate::form::fingerprint_bits(authorised));
            f.word(fingerprint(cut_off));
        } else {
            f.per_pid((multiplier.iter().enumerate()).map(|(pid, m)| (pid as u32, m.to_bits())));
            f.per_pid((authorised.iter().enumerate()).map(|(pid, a)| (pid as u32, crate::form::fingerprint_bits(a))));
            f.per_pid((cut_off.iter().enumerate()).map(|(pid, c)| (pid as u32, c)));
        }
        for (i, m) in [arrivals, slots].into_iter().enumerate() {
            use crate::form::plant::{Plant, planted};
            let planted = if i == 0 {
                planted(Plant::CeilingTat)
            } else {
                planted(Plant::GcraTatAndItsMirror) || planted(Plant::GcraTatAndEveryMirror)
            };
            if !planted {
                f.ahead(m.tat().unwrap_or(0));
            }
            f.more_is_worse(i64::from(m.first_exceeding(*burst).is_some()));
        }
        for (t, m) in pending.sorted() {
            f.instant(t);
            f.word(m);
        }
    }

    /// Did nothing reach the destination (no arrival)?
    pub fn fetched_nothing(&self) -> bool {
        self.arrivals.is_empty()
    }

    /// Smallest burst the destination arrivals conform to.
    pub fn burst_needed(&self) -> u64 {
        self.arrivals.burst_needed()
    }
    /// Smallest burst the granted slots conform to.
    pub fn slot_burst_needed(&self) -> u64 {
        self.slots.burst_needed()
    }
    /// The largest 1 s window of arrivals.
    pub fn max_window(&self) -> &MaxWindow {
        &self.max_window
    }
}

impl Sink for Ceiling {
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        self.release_slots(ev.t());
        if matches!(
            ev,
            Event::Grant { .. } | Event::Fallback { .. } | Event::Multiplier { .. } | Event::Arrival { .. }
        ) {
            self.counted(ev);
        }
    }
}

impl Ceiling {
    // (inlined into each caller: the suite's copy for one kind of event keeps only that
    // kind's arm)
    #[inline(always)]
    fn counted(&mut self, ev: &Event) {
        match *ev {
            Event::Grant {
                t,
                pid,
                thread,
                slot,
                now,
                multiplier,
                ..
            } => {
                let at = t.saturating_add(slot.saturating_sub(now).max(0) as u64);
                self.hold_slot((at, multiplier.to_bits()));
                if let Some(m) = self.multiplier.get_mut(pid as usize) {
                    *m = multiplier;
                }
                if let Some(a) = self.authorised.get_mut(pid as usize) {
                    let th = usize::from(thread);
                    if a.len() <= th {
                        a.resize(th + 1, None);
                    }
                    a[th] = Some(multiplier);
                }
            }
            Event::Fallback { pid, enter, .. } => {
                if let Some(c) = self.cut_off.get_mut(pid as usize) {
                    *c = enter;
                }
            }
            Event::Multiplier { pid: Some(pid), to, .. }
                if !self.cut_off.get(pid as usize).copied().unwrap_or(false) =>
            {
                if let Some(m) = self.multiplier.get_mut(pid as usize) {
                    *m = to;
                }
            }
            Event::Arrival { t, pid, thread, .. } => {
                let own = self
                    .authorised
                    .get_mut(pid as usize)
                    .and_then(|a| a.get_mut(usize::from(thread)))
                    .and_then(Option::take);
                let m = own.unwrap_or_else(|| self.multiplier.get(pid as usize).copied().unwrap_or(1.0));
                let before = self.arrivals.burst_needed();
                let i = self.scaled(m);
                self.arrivals.push_with_interval(t, i);
                if self.arrivals.burst_needed() > before && self.arrival_pids.len() < 64 {
                    self.arrival_pids.push((self.arrivals.len() - 1, pid));
                }
                // sliding window [t - w, t]: arrivals within one window ending here
                self.recent.push_back(t);
                while let Some(&f) = self.recent.front() {
                    // (t - f, not f + window: near the clock's end the sum would wrap and empty
                    // the window)
                    if t - f >= self.window.0 {
                        self.recent.pop_front();
                    } else {
                        break;
                    }
                }
                let c = self.recent.len() as u64;
                if c > self.max_window.count {
                    self.max_window.count = c;
                    self.max_window.at_s = *self.recent.front().expect("non-empty") as f64 / 1e9;
                }
            }
            _ => {}
        }
    }
}

impl Checker for Ceiling {
    fn verdicts(&mut self) -> Vec<Verdict> {
        self.release_slots(u64::MAX);
        let rate = self.rate;
        let arrivals = match self.arrivals.first_exceeding(self.burst) {
            // nothing reached the destination: nothing to judge the ceiling on (a run whose
            // every store operation failed is no pass)
            None if self.arrivals.is_empty() => Verdict {
                name: "ceiling",
                status: Status::NotJudged,
                detail: witness!(
                    "{}arrivals at the destination: the run fetched nothing",
                    super::NOT_JUDGED
                ),
            },
            None => Verdict {
                name: "ceiling",
                status: Status::Pass,
                detail: witness!(
                    "{} arrivals need burst {} (allowed {}) at {rate}/s; max {} in 1 s (bound {})",
                    self.arrivals.len(),
                    self.arrivals.burst_needed(),
                    self.burst,
                    self.max_window.count,
                    self.max_window.bound
                ),
            },
            Some(e) => {
                let pid = self
                    .arrival_pids
                    .iter()
                    .find(|p| p.0 == e.index)
                    .map(|p| witness!(" (pid {})", p.1))
                    .unwrap_or_default();
                Verdict {
                    name: "ceiling",
                    status: Status::Fail,
                    detail: witness!(
                        "arrivals need burst {} (allowed {}) at {rate}/s; first violation: arrival #{} at {:.6}s{pid}",
                        self.arrivals.burst_needed(),
                        self.burst,
                        e.index,
                        e.at as f64 / 1e9
                    ),
                }
            }
        };
        // no grant event in the whole run: a lock design grants none (the check does not
        // apply); any other design that wrote none cannot be judged on its slots
        if self.slots.is_empty() {
            if self.lock_design {
                return vec![arrivals];
            }
            return vec![
                arrivals,
                Verdict {
                    name: "slot_ceiling",
                    status: Status::NotJudged,
                    detail: witness!(
                        "{}grant events (the slots the pacer granted): the run wrote none",
                        super::NOT_JUDGED
                    ),
                },
            ];
        }
        let slots = match self.slots.first_exceeding(self.burst) {
            None => Verdict {
                name: "slot_ceiling",
                status: Status::Pass,
                detail: witness!(
                    "{} slots need burst {} (allowed {})",
                    self.slots.len(),
                    self.slots.burst_needed(),
                    self.burst
                ),
            },
            Some(e) => Verdict {
                name: "slot_ceiling",
                status: Status::Fail,
                detail: witness!(
                    "slots need burst {} (allowed {}); first violation: slot #{} at {:.6}s",
                    self.slots.burst_needed(),
                    self.burst,
                    e.index,
                    e.at as f64 / 1e9
                ),
            },
        };
        vec![arrivals, slots]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `row` trace's header at 10/s, burst 2, for `processes` processes.
    fn header(processes: u32) -> Header {
        Header {
            ev: "header".into(),
            version: crate::trace::TRACE_VERSION,
            source: "sim".into(),
            scenario: "t".into(),
            backend: "row".into(),
            seed: 1,
            processes,
            rate: 10.0,
            burst: 2,
            multiplier_cap: 8.0,
            backend_detail: Default::default(),
        }
    }

    /// Slots granted out of time order (clocks that disagree) are released in time order, as
    /// if every slot had waited in one heap.
    #[test]
    fn out_of_order_grants_release_in_time_order() {
        let h = header(2);
        let grant = |t: u64, slot: i64, multiplier: f64| Event::Grant {
            t,
            pid: 0,
            thread: 0,
            slot,
            now: 0,
            interval: 0,
            multiplier,
        };
        // slots at 100, 400, 200 (out of order), 200 with another multiplier, 900 ms
        let ms: u64 = 1_000_000;
        let mut c = Ceiling::new(&h);
        for (slot, m) in [(100, 1.0), (400, 1.0), (200, 2.0), (200, 1.0), (900, 1.0)] {
            c.event(&grant(0, (slot * ms) as i64, m));
        }
        c.event(&Event::End { t: 2_000 * ms });
        let mut reference = BurstMeter::new(100 * ms);
        for (t, m) in [(100, 1.0), (200, 1.0), (200, 2.0), (400, 1.0), (900, 1.0)] {
            reference.push_with_interval(t * ms, c.scaled(m));
        }
        assert_eq!(c.slot_burst_needed(), reference.burst_needed());
        assert_eq!(c.slots.len(), 5);
        assert_eq!(c.slots.tat(), reference.tat());
    }

    /// Threads of one process hold several grants at once: after a 429, thread 3's grant at
    /// x8 comes before the x1 slots threads 0..2 booked earlier arrive. Each arrival is charged
    /// its own thread's grant, not the process's latest one; an arrival with no grant of its
    /// thread's outstanding is charged the process's own multiplier.
    #[test]
    fn an_arrival_is_charged_its_own_thread_s_grant() {
        let ms: u64 = 1_000_000;
        let h = header(1);
        let grant = |t: u64, thread: u16, slot: u64, multiplier: f64| Event::Grant {
            t: t * ms,
            pid: 0,
            thread,
            slot: (slot * ms) as i64,
            now: (t * ms) as i64,
            interval: 0,
            multiplier,
        };
        let arrival = |t: u64, thread: u16| Event::Arrival {
            t: t * ms,
            pid: 0,
            thread,
            status: 429,
        };
        let mut c = Ceiling::new(&h);
        for e in [
            grant(0, 0, 100, 1.0),
            grant(0, 1, 200, 1.0),
            grant(0, 2, 300, 1.0),
            grant(50, 3, 1100, 8.0),
            arrival(100, 0),
            arrival(200, 1),
            arrival(300, 2),
            arrival(1100, 3),
        ] {
            c.event(&e);
        }
        // every arrival at its own grant's slot, spaced by its own interval
        assert_eq!(c.burst_needed(), 1);
        // charged the process's latest grant (x8) each, the same arrivals would need 3
        let mut latest = BurstMeter::new(100 * ms);
        for t in [100, 200, 300, 1100] {
            latest.push_with_interval(t * ms, c.scaled(8.0));
        }
        assert_eq!(latest.burst_needed(), 3);
        // thread 1 used its grant at 200 ms: its next arrival, with no grant (its process's
        // own pacer now, at x2), is charged x2: 700 ms before the x8 tat of 1900 ms, 4 intervals
        c.event(&Event::Multiplier {
            t: 1150 * ms,
            pid: Some(0),
            from: 8.0,
            to: 2.0,
            cause: crate::trace::MultiplierCause::Decay,
        });
        c.event(&arrival(1200, 1));
        assert_eq!(c.burst_needed(), 5);
    }
}
