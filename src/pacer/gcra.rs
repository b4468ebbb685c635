//! The Generic Cell Rate Algorithm (ITU-T I.371 / ATM Forum TM 4.0 "virtual scheduling"), as
//! a pure decision function, and [`BurstMeter`], the conformance measure checkers apply to a
//! trace of request instants.
//!
//! GCRA keeps one number per limiter, the theoretical arrival time `tat`, and with emission
//! interval `T` and tolerance `tau = T * (burst - 1)` decides each arrival at `now` by
//!
//! ```text
//! allow  iff  now >= tat - tau          (a missing tat counts as now)
//! on allow:   tat = max(tat, now) + T
//! on deny:    tat unchanged; the earliest conforming instant is tat - tau
//! ```
//!
//! `burst` is the number of back-to-back cells a rested limiter admits (governor's
//! `max_burst`); `burst = 1` is strict pacing at one cell per `T`.

use super::{Nanos, scale_interval};

/// A GCRA configuration: emission interval `T` and burst capacity `b`, hence tolerance
/// `tau = T * (b - 1)`.
///
/// ```
/// use pacesim::pacer::Gcra;
/// let gcra = Gcra::new(200_000_000, 2); // 5/s, burst 2
/// let first = gcra.decide(None, 0);
/// let second = gcra.decide(Some(first.tat()), 0);
/// let third = gcra.decide(Some(second.tat()), 0);
/// assert!(first.is_allowed() && second.is_allowed());
/// assert_eq!(third.retry_at(), Some(200_000_000));
/// ```
#[derive(Hash, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    // invariant: >= 1 ns.
    interval: Nanos,
    // invariant: >= 1.
    burst: u32,
}

/// The outcome of one [`Gcra::decide`]: whether the arrival conforms, and the `tat` the
/// limiter's state must hold afterwards (written back with compare-and-swap by whatever store
/// holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The arrival conforms; store `tat`.
    Allow {
        /// The new theoretical arrival time, `max(old tat, now) + T`.
        tat: Nanos,
    },
    /// The arrival does not conform; the stored `tat` is unchanged.
    Deny {
        /// The unchanged theoretical arrival time.
        tat: Nanos,
        /// The earliest instant at which an arrival would conform, `tat - tau` (assuming no
        /// other arrival is allowed meanwhile).
        retry_at: Nanos,
    },
}

impl Decision {
    /// Whether the arrival was allowed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The `tat` the state must hold after this decision (new on allow, unchanged on deny).
    pub fn tat(&self) -> Nanos {
        match *self {
            Decision::Allow { tat } | Decision::Deny { tat, .. } => tat,
        }
    }

    /// On deny, the earliest conforming instant; `None` on allow.
    pub fn retry_at(&self) -> Option<Nanos> {
        match *self {
            Decision::Allow { .. } => None,
            Decision::Deny { retry_at, .. } => Some(retry_at),
        }
    }
}

impl Gcra {
    /// GCRA with emission interval `interval` (ns per cell) and burst capacity `burst`.
    ///
    /// # Panics
    ///
    /// If `interval` or `burst` is 0.
    pub fn new(interval: Nanos, burst: u32) -> Self {
        assert!(interval > 0, "GCRA interval must be at least 1 ns");
        assert!(burst > 0, "GCRA burst must be at least 1");
        Self { interval, burst }
    }

    /// The emission interval `T`, in nanoseconds.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// The burst capacity `b`.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The tolerance `tau = T * (b - 1)` (saturating).
    pub fn tolerance(&self) -> Nanos {
        self.interval.saturating_mul(Nanos::from(self.burst - 1))
    }

    /// The same burst at the interval scaled by a backoff `multiplier` (rounded as in
    /// [`scale_interval`]); the tolerance scales with it.
    ///
    /// # Panics
    ///
    /// If `multiplier` is not finite or is below 1.0.
    pub fn scaled(&self, multiplier: f64) -> Self {
        Self::new(scale_interval(self.interval, multiplier), self.burst)
    }

    /// Decides an arrival at `now` against the stored `tat` (`None` for a limiter that has
    /// never allowed anything, which behaves as `tat = now`).
    pub fn decide(&self, tat: Option<Nanos>, now: Nanos) -> Decision {
        let tat = tat.unwrap_or(now);
        let earliest = tat.saturating_sub(self.tolerance());
        if now < earliest {
            Decision::Deny {
                tat,
                retry_at: earliest,
            }
        } else {
            Decision::Allow {
                tat: tat.max(now).saturating_add(self.interval),
            }
        }
    }
}

/// Where a trace first needed more than a given burst: see [`BurstMeter::first_exceeding`].
#[derive(Hash, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceedance {
    /// The 0-based position of the arrival in the pushed sequence.
    pub index: usize,
    /// The arrival's instant.
    pub at: Nanos,
    /// The burst this arrival needed (more than any earlier arrival needed).
    pub burst_needed: u64,
}

/// Streaming measure of the smallest GCRA burst a sequence of arrivals conforms to.
///
/// Push the instants `t_0 <= t_1 <= ...` in order, each with the interval `T_i` in force when
/// it arrived (the base interval times the backoff multiplier, or one fixed interval). Then
/// [`burst_needed`](Self::burst_needed) is the smallest `b` such that every arrival `i` is
/// allowed by GCRA with interval `T_i` and tolerance `T_i * (b - 1)` (that is, by
/// `Gcra::new(T_i, b)` via [`Gcra::decide`], the whole sequence allowed).
///
/// # The formula
///
/// Run GCRA with unlimited tolerance, so everything is allowed and the theoretical arrival
/// time evolves as
///
/// ```text
/// X_{-1} = none,        X_i = max(X_{i-1}, t_i) + T_i
/// ```
///
/// Arrival `i` needs the tolerance `g_i = max(0, X_{i-1} - t_i)` (0 for the first arrival),
/// hence the burst
///
/// ```text
/// need_i        = 1 + ceil(g_i / T_i)        (exact integer ceiling division in ns)
/// burst_needed  = max(1, max_i need_i)
/// ```
///
/// Why: if arrivals `0..i` all conform to GCRA(`b`), its `tat` before arrival `i` equals
/// `X_{i-1}` (an allowed arrival updates `tat` exactly as the unlimited one does), so arrival
/// `i` conforms iff `t_i >= X_{i-1} - T_i (b - 1)`, iff `b - 1 >= g_i / T_i`, iff
/// `b >= need_i` (`b` is an integer). By induction the sequence conforms iff
/// `b >= max_i need_i`, and the first arrival with `need_i > b` is exactly the first one that
/// GCRA(`b`) denies.
///
/// **Window form.** With one fixed interval `T`, unrolling the max-plus recurrence gives
/// `X_{j-1} = max_{i<j} (t_i + (j - i) T)`, and so
///
/// ```text
/// burst_needed = max over i <= j of  (j - i + 1) - floor((t_j - t_i) / T)
/// ```
///
/// the number of arrivals in the window `[t_i, t_j]` minus the whole intervals it spans
/// (`tests/suite/gcra_governor.rs` checks this against an O(n^2) brute force).
///
/// Memory is O(number of times the running maximum increases), for
/// [`first_exceeding`](Self::first_exceeding).
///
/// ```
/// use pacesim::pacer::BurstMeter;
/// let mut meter = BurstMeter::new(10);
/// for t in [0, 0, 0, 30] {
///     meter.push(t);
/// }
/// assert_eq!(meter.burst_needed(), 3);
/// assert_eq!(meter.first_exceeding(2).map(|e| e.index), Some(2));
/// ```
#[derive(Hash, Debug, Clone)]
pub struct BurstMeter {
    // invariant: >= 1 ns; the interval `push` uses.
    interval: Nanos,
    // invariant: X_{n-1} of the formula (None before the first arrival).
    tat: Option<Nanos>,
    // invariant: the instant of the last pushed arrival; pushes never go backwards.
    last: Option<Nanos>,
    // invariant: the number of arrivals pushed.
    count: usize,
    // invariant: the strict prefix maxima of need_i, in push order: records[0] is arrival 0
    // (need 1), and each later record needed strictly more than every arrival before it;
    // none after the first that needed more than `keep`.
    records: Vec<Exceedance>,
    // invariant: the largest need_i so far (1 for none).
    most: u64,
    // the largest burst `first_exceeding` is asked about (`u64::MAX`: any)
    keep: u64,
}

impl BurstMeter {
    /// An empty meter whose [`push`](Self::push) uses `interval`.
    ///
    /// # Panics
    ///
    /// If `interval` is 0.
    pub fn new(interval: Nanos) -> Self {
        assert!(interval > 0, "BurstMeter interval must be at least 1 ns");
        Self {
            interval,
            tat: None,
            last: None,
            count: 0,
            records: Vec::new(),
            most: 1,
            keep: u64::MAX,
        }
    }

    /// The same meter, asked [`first_exceeding`](Self::first_exceeding) only for bursts up
    /// to `burst`: it keeps no record past the first arrival that needed more, so its memory
    /// stays bounded however far over the rate the arrivals run (a fleet at N x rate sets a
    /// new record at almost every arrival). [`burst_needed`](Self::burst_needed) is exact.
    pub fn keeping(mut self, burst: u64) -> Self {
        self.keep = burst;
        self
    }

    /// Pushes an arrival at `t` under the meter's interval; returns the burst this arrival
    /// needed (`need_i`).
    ///
    /// # Panics
    ///
    /// If `t` is earlier than the previous arrival.
    pub fn push(&mut self, t: Nanos) -> u64 {
        self.push_with_interval(t, self.interval)
    }

    /// Pushes an arrival at `t` under `interval`, the interval in force for it (the base
    /// interval scaled by the backoff multiplier at that moment); returns `need_i`.
    ///
    /// # Panics
    ///
    /// If `interval` is 0 or `t` is earlier than the previous arrival.
    pub fn push_with_interval(&mut self, t: Nanos, interval: Nanos) -> u64 {
        assert!(interval > 0, "BurstMeter interval must be at least 1 ns");
        if let Some(last) = self.last {
            assert!(
                t >= last,
                "BurstMeter arrivals must be pushed in time order: {t} after {last}"
            );
        }
        let gap = self.tat.map_or(0, |tat| tat.saturating_sub(t));
        // (a paced arrival has no gap: no division)
        let need = if gap == 0 { 1 } else { 1 + gap.div_ceil(interval) };
        self.most = self.most.max(need);
        if self
            .records
            .last()
            .is_none_or(|r| need > r.burst_needed && r.burst_needed <= self.keep)
        {
            self.records.push(Exceedance {
                index: self.count,
                at: t,
                burst_needed: need,
            });
        }
        self.tat = Some(self.tat.unwrap_or(t).max(t).saturating_add(interval));
        self.last = Some(t);
        self.count += 1;
        need
    }

    /// The smallest burst the arrivals so far conform to (1 for no arrivals).
    pub fn burst_needed(&self) -> u64 {
        self.most
    }

    /// The first arrival that needed more than `burst`, i.e. the first arrival GCRA with that
    /// burst would deny; `None` if the whole sequence conforms to it.
    ///
    /// # Panics
    ///
    /// With `burst` above the one the meter was made [`keeping`](Self::keeping).
    pub fn first_exceeding(&self, burst: u64) -> Option<Exceedance> {
        assert!(
            burst <= self.keep,
            "the meter keeps records up to burst {} only",
            self.keep
        );
        let k = self.records.partition_point(|r| r.burst_needed <= burst);
        self.records.get(k).copied()
    }

    /// The theoretical arrival time `X_{n-1}` after the last arrival (`None` if empty).
    pub fn tat(&self) -> Option<Nanos> {
        self.tat
    }

    /// The number of arrivals pushed.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no arrival has been pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_one_is_strict_pacing() {
        let g = Gcra::new(10, 1);
        let a = g.decide(None, 100);
        assert_eq!(a, Decision::Allow { tat: 110 });
        let d = g.decide(Some(a.tat()), 109);
        assert_eq!(
            d,
            Decision::Deny {
                tat: 110,
                retry_at: 110
            }
        );
        assert!(g.decide(Some(110), 110).is_allowed());
    }

    #[test]
    fn burst_allows_back_to_back_then_paces() {
        let g = Gcra::new(10, 3);
        assert_eq!(g.tolerance(), 20);
        let mut tat = None;
        for expected_tat in [10, 20, 30] {
            let d = g.decide(tat, 0);
            assert_eq!(d, Decision::Allow { tat: expected_tat });
            tat = Some(d.tat());
        }
        assert_eq!(g.decide(tat, 0).retry_at(), Some(10));
        assert_eq!(g.decide(tat, 10), Decision::Allow { tat: 40 });
    }

    #[test]
    fn scaled_scales_interval_and_tolerance() {
        let g = Gcra::new(10, 3).scaled(4.0);
        assert_eq!((g.interval(), g.burst(), g.tolerance()), (40, 3, 80));
    }

    #[test]
    fn meter_on_paced_and_bursty_sequences() {
        let mut m = BurstMeter::new(10);
        assert_eq!(m.burst_needed(), 1);
        assert_eq!(m.first_exceeding(0), None);
        for t in (0..10).map(|k| k * 10) {
            assert_eq!(m.push(t), 1);
        }
        assert_eq!(m.burst_needed(), 1);
        assert_eq!(m.first_exceeding(1), None);
        assert_eq!(m.first_exceeding(0).map(|e| e.index), Some(0));
        // Two at once after pacing: the second needs tolerance 10 -> burst 2.
        assert_eq!(m.push(100), 1);
        assert_eq!(m.push(100), 2);
        // 19 ns of debt at a 10 ns interval rounds up to 2 cells of tolerance.
        assert_eq!(m.push(101), 3);
        assert_eq!(
            m.first_exceeding(2),
            Some(Exceedance {
                index: 12,
                at: 101,
                burst_needed: 3
            })
        );
        assert_eq!(m.first_exceeding(3), None);
        assert_eq!(m.len(), 13);
        assert_eq!(m.tat(), Some(130));
    }

    #[test]
    fn meter_uses_the_interval_in_force() {
        let mut m = BurstMeter::new(10);
        m.push_with_interval(0, 40);
        // tat 40; at 10 the gap is 30: 3 cells of 10 ns, but 1 cell of 40 ns.
        assert_eq!(m.push_with_interval(10, 10), 4);
        let mut m = BurstMeter::new(10);
        m.push_with_interval(0, 40);
        assert_eq!(m.push_with_interval(10, 40), 2);
    }

    #[test]
    #[should_panic(expected = "time order")]
    fn meter_rejects_time_travel() {
        let mut m = BurstMeter::new(10);
        m.push(5);
        m.push(4);
    }
}
