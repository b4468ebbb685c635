//! [`Timeline`]: the streaming sink that bins what the plots and the derived table figures
//! need, in memory bounded by the binning rather than the number of events.
//!
//! Counts go into [`Grid`]s: fixed-width time bins starting at [`FINE_WIDTH_NS`] that coarsen
//! by a factor of ten whenever a run outgrows their cap (1 ms, 10 ms, 100 ms, 1 s, ...), so
//! every width divides one second and a 3600 s run at 10,000/s costs the same memory as a
//! 60 s one. Marks (fault windows, kills, fallback windows) are kept up to [`MAX_MARKS`] each.
//!
//! The largest stall after a kill is measured here, from the trace alone: after each `crash`,
//! the longest gap between consecutive progress events (`grant` or `arrival`, the crash
//! instant counting as the first point) among the gaps that begin within the settle window
//! `max(1 s, 10 × interval)` of the crash. A gap still open when the run ends counts up to the
//! end.
//!
//! A trace that declares platforms (`backend_detail.platforms`) has its arrivals binned per
//! platform too: each process's job is on the platform its last `platform` event names, and
//! its arrivals reach that platform's destination ([`Timeline::platform_arrivals`], and per
//! group of processes [`Timeline::platform_layers`]), for the first
//! [`MAX_PLATFORM_SERIES`] platforms.
//!
//! A trace with `job_event`s has each download event's life kept ([`Timeline::jobs`]): when
//! the tick created it, each walk of it (from `running` to the last fetch its process made
//! before turning to other work, being killed, or the event closing), and the state that
//! closed it; and every `backfill` state change. Up to [`MAX_MARKS`] events each.

use crate::check::common::LoopMap;
use crate::trace::{BackfillState, Event, FaultKind, Header, JobState, PlatformDetail, Sink};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Width of the finest time bin, nanoseconds (1 ms).
pub const FINE_WIDTH_NS: u64 = 1_000_000;
/// Bins of the aggregate arrival grid before it coarsens.
pub(crate) const ARRIVAL_CAP: usize = 1 << 16;
/// Bins of each per-process grid and each gauge grid before it coarsens.
pub(crate) const COARSE_CAP: usize = 4096;
/// Largest round trip the latency histogram tracks, ns (as `summary::Figures`; larger values
/// saturate).
pub(crate) const LATENCY_HIGH_NS: u64 = 10_000_000_000_000;
/// Most marks of each kind (fault windows, kills, fallback windows, download events, backfill
/// changes) kept for plotting.
pub const MAX_MARKS: usize = 4096;
/// Platforms whose arrivals are binned one by one (the plots draw a panel each); arrivals on
/// later platforms are counted in [`Timeline::platform_totals`] only.
pub const MAX_PLATFORM_SERIES: usize = 8;
/// Most groups of processes a per-platform stack is binned in ([`process_group`]).
pub const PROCESS_GROUPS: usize = 16;
/// Most walks kept per download event (a killed walk's event is delivered again and walks again).
pub const MAX_WALKS: usize = 16;

/// How many neighbouring pids share one group when `processes` processes are binned in at most
/// [`PROCESS_GROUPS`] groups: groups are `0..size`, `size..2 * size`, ...
pub fn process_group(processes: usize) -> usize {
    processes.max(1).div_ceil(PROCESS_GROUPS)
}

/// One walk of a download event: its process's fetches for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Walk {
    /// The process executing it.
    pub pid: u32,
    /// When the event turned `running`, ns.
    pub start: u64,
    /// The last fetch event (start, arrival or end) its process made for it, ns; `None` if it
    /// made none.
    pub(crate) last_fetch: Option<u64>,
    /// When its process stopped working on it (turned to another task, was killed, or the
    /// event closed), ns; `None` while it still does at the end of the run.
    pub left: Option<u64>,
}

impl Walk {
    /// When the walk's fetching ended: its last fetch, else its start.
    pub fn fetch_end(&self) -> u64 {
        self.last_fetch.unwrap_or(self.start).max(self.start)
    }
}

/// One download event's life (the record's DownloadEvent), from `job_event`s.
#[derive(Clone, Debug, PartialEq)]
pub struct JobLife {
    /// The source it downloads.
    pub source: u32,
    /// The event's number.
    pub event: u32,
    /// When the tick created it (`pending`), ns.
    pub pending: u64,
    /// Its walks, in order (at most [`MAX_WALKS`]).
    pub walks: Vec<Walk>,
    /// When and how it closed: a final state, or `stranded` by the sweep; `None` if still
    /// open at the end of the run.
    pub closed: Option<(u64, JobState)>,
    /// How often its task re-enqueued itself on contention (`requeued`).
    pub(crate) requeues: u32,
    /// When the broker delivered its task again after a kill (`redelivered`; at most
    /// [`MAX_WALKS`]).
    pub redelivered: Vec<u64>,
}

/// A source's backfill state change (`backfill` event).
#[derive(Clone, Debug, PartialEq)]
pub struct BackfillMark {
    /// Time, ns.
    pub t: u64,
    /// The source.
    pub source: u32,
    /// The new state.
    pub state: BackfillState,
    /// Chunks finished so far.
    pub chunks: u32,
}

/// One bin's content: something two adjacent bins can be merged into.
pub trait Cell: Clone + Default {
    /// Absorb the bin that follows this one.
    fn absorb(&mut self, later: &Self);
}

impl Cell for u32 {
    fn absorb(&mut self, later: &Self) {
        *self = self.saturating_add(*later);
    }
}

/// A piecewise-constant value (a backoff multiplier) seen through one bin.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Gauge {
    /// Largest value in force at any time in the bin (set only if it changed in the bin).
    pub max: Option<f64>,
    /// Value in force at the end of the bin (set only if it changed in the bin).
    pub last: Option<f64>,
}

impl Cell for Gauge {
    fn absorb(&mut self, later: &Self) {
        self.max = match (self.max, later.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.last = later.last.or(self.last);
    }
}

impl Gauge {
    /// Record a change `from -> to` in this bin.
    fn change(&mut self, from: f64, to: f64) {
        let m = self.max.map_or(from.max(to), |m| m.max(from).max(to));
        self.max = Some(m);
        self.last = Some(to);
    }
}

/// Fixed-width time bins from 0, coarsening tenfold whenever a time falls past the cap.
#[derive(Clone, Debug)]
pub struct Grid<T> {
    width: u64,
    cells: Vec<T>,
    cap: usize,
}

impl<T: Cell> Grid<T> {
    /// Bins of `width` ns, at most `cap` of them (`cap` at least 10).
    pub fn new(width: u64, cap: usize) -> Self {
        Grid {
            width,
            cells: Vec::new(),
            cap: cap.max(10),
        }
    }
    /// Bin width, nanoseconds.
    pub fn width(&self) -> u64 {
        self.width
    }
    /// The bins, from time 0.
    pub fn cells(&self) -> &[T] {
        &self.cells
    }
    /// The bin holding time `t`, created (and the grid coarsened) as needed.
    pub fn at(&mut self, t: u64) -> &mut T {
        let mut i = t / self.width;
        while i >= self.cap as u64 {
            self.coarsen();
            i = t / self.width;
        }
        let i = i as usize;
        if self.cells.len() <= i {
            self.cells.resize(i + 1, T::default());
        }
        &mut self.cells[i]
    }
    /// Make sure the bins reach time `t` (empty bins up to it).
    pub(crate) fn extend_to(&mut self, t: u64) {
        self.at(t);
    }
    /// Merge every ten adjacent bins into one.
    pub fn coarsen(&mut self) {
        self.width *= 10;
        self.cells = self
            .cells
            .chunks(10)
            .map(|c| {
                let mut a = c[0].clone();
                for x in &c[1..] {
                    a.absorb(x);
                }
                a
            })
            .collect();
    }
    /// Coarsen until the width is at least `width`.
    pub fn coarsen_to(&mut self, width: u64) {
        while self.width < width {
            self.coarsen();
        }
    }
}

/// A fault window from `fault` events (`end` is `None` while open, and for `clock` faults,
/// which last the whole run).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultWindow {
    /// Index in the scenario's fault list.
    pub id: u32,
    /// Fault kind.
    pub kind: FaultKind,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: Option<u64>,
}

/// The largest stall after a kill (see the module doc).
#[derive(Clone, Debug, Default)]
struct StallMeter {
    settle: u64,
    /// Start of the current gap: the last progress event or crash.
    cursor: u64,
    /// Gaps that begin at or before this count.
    watch_until: Option<u64>,
    max: Option<u64>,
}

impl StallMeter {
    fn crash(&mut self, t: u64) {
        self.close(t);
        self.cursor = t;
        self.watch_until = Some(t + self.settle);
        self.max.get_or_insert(0);
    }
    fn close(&mut self, t: u64) {
        if let Some(w) = self.watch_until
            && self.cursor <= w
        {
            let gap = t - self.cursor.min(t);
            self.max = Some(self.max.map_or(gap, |m| m.max(gap)));
        }
    }
    fn progress(&mut self, t: u64) {
        self.close(t);
        self.cursor = t;
    }
}

/// The plotting sink for one run (see the module doc).
#[derive(Debug)]
pub struct Timeline {
    series: bool,
    header: Option<Header>,
    arrivals: Grid<u32>,
    per_process: Vec<Grid<u32>>,
    per_process_total: Vec<u64>,
    latency: Histogram<u64>,
    // each thread loop's permission request in flight: when it was sent
    sent: LoopMap<u64>,
    global_mult: Grid<Gauge>,
    has_global_mult: bool,
    // the shared multiplier now
    global_now: f64,
    // the header says the multiplier is shared (`backoff = "global"`)
    shared_backoff: bool,
    pp_mult: Vec<f64>,
    pp_mean: Grid<Gauge>,
    pp_max: Grid<Gauge>,
    has_pp_mult: bool,
    faults: Vec<FaultWindow>,
    crashes: Vec<u64>,
    in_fallback: Vec<bool>,
    fallback_count: u32,
    fallback: Vec<(u64, Option<u64>)>,
    stall: StallMeter,
    end: u64,
    platforms: Vec<PlatformDetail>,
    // invariant: job_platform[pid] is the platform of pid's current job (its last `platform`)
    job_platform: Vec<Option<u32>>,
    platform_arrivals: Vec<Grid<u32>>,
    // [platform][group of processes]
    platform_layers: Vec<Vec<Grid<u32>>>,
    platform_totals: Vec<u64>,
    group_size: usize,
    unplaced: u64,
    jobs: Vec<JobLife>,
    // event number -> index in `jobs`
    job_index: BTreeMap<u32, usize>,
    jobs_dropped: u64,
    // invariant: walking[pid] is the index in `jobs` of the event whose walk pid runs now
    walking: Vec<Option<usize>>,
    backfill: Vec<BackfillMark>,
}

impl Timeline {
    /// A sink that keeps every series the plots need.
    pub fn new() -> Timeline {
        Timeline::with_series(true)
    }

    /// With `series` false only the round-trip histogram and the derived figures (stall after
    /// a kill) are kept: for runs that feed statistics but not plots.
    pub(crate) fn with_series(series: bool) -> Timeline {
        Timeline {
            series,
            header: None,
            arrivals: Grid::new(FINE_WIDTH_NS, ARRIVAL_CAP),
            per_process: Vec::new(),
            per_process_total: Vec::new(),
            latency: Histogram::new_with_bounds(1, LATENCY_HIGH_NS, 3).expect("valid histogram bounds"),
            sent: LoopMap::default(),
            global_mult: Grid::new(FINE_WIDTH_NS, COARSE_CAP),
            has_global_mult: false,
            global_now: 1.0,
            shared_backoff: false,
            pp_mult: Vec::new(),
            pp_mean: Grid::new(FINE_WIDTH_NS, COARSE_CAP),
            pp_max: Grid::new(FINE_WIDTH_NS, COARSE_CAP),
            has_pp_mult: false,
            faults: Vec::new(),
            crashes: Vec::new(),
            in_fallback: Vec::new(),
            fallback_count: 0,
            fallback: Vec::new(),
            stall: StallMeter::default(),
            end: 0,
            platforms: Vec::new(),
            job_platform: Vec::new(),
            platform_arrivals: Vec::new(),
            platform_layers: Vec::new(),
            platform_totals: Vec::new(),
            group_size: 1,
            unplaced: 0,
            jobs: Vec::new(),
            job_index: BTreeMap::new(),
            jobs_dropped: 0,
            walking: Vec::new(),
            backfill: Vec::new(),
        }
    }

    /// The trace header, once seen.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }
    /// Destination arrivals per bin, from 0 to the end of the run.
    pub fn arrivals(&self) -> &Grid<u32> {
        &self.arrivals
    }
    /// Each process's arrivals per bin (grids may differ in width; see [`Grid::coarsen_to`]).
    pub fn per_process(&self) -> &[Grid<u32>] {
        &self.per_process
    }
    /// Each process's arrivals in total.
    pub(crate) fn per_process_total(&self) -> &[u64] {
        &self.per_process_total
    }
    /// Reservation round trips (send to reply), nanoseconds; the same measure as the
    /// summary's `reservation` figures.
    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }
    /// The shared multiplier, if the run had one.
    pub(crate) fn global_multiplier(&self) -> Option<&Grid<Gauge>> {
        self.has_global_mult.then_some(&self.global_mult)
    }
    /// The per-process multipliers' mean and max across processes, if the run had them.
    pub(crate) fn per_process_multiplier(&self) -> Option<(&Grid<Gauge>, &Grid<Gauge>)> {
        self.has_pp_mult.then_some((&self.pp_mean, &self.pp_max))
    }
    /// Fault windows, in start order.
    pub fn faults(&self) -> &[FaultWindow] {
        &self.faults
    }
    /// Kill times (the first [`MAX_MARKS`]).
    pub fn crashes(&self) -> &[u64] {
        &self.crashes
    }
    /// Windows in which at least one process was in fallback.
    pub fn fallback(&self) -> &[(u64, Option<u64>)] {
        &self.fallback
    }
    /// The largest stall after a kill, ns; `None` when nothing was killed.
    pub(crate) fn largest_stall_after_kill(&self) -> Option<u64> {
        let mut s = self.stall.clone();
        s.close(self.end);
        s.max
    }
    /// The last event's time, ns.
    pub fn end(&self) -> u64 {
        self.end
    }
    /// The platforms the trace declares (empty: one destination).
    pub fn platforms(&self) -> &[PlatformDetail] {
        &self.platforms
    }
    /// Arrivals per bin on each of the first [`MAX_PLATFORM_SERIES`] platforms, in index order
    /// (empty without platforms, or without series).
    pub fn platform_arrivals(&self) -> &[Grid<u32>] {
        &self.platform_arrivals
    }
    /// Arrivals per bin on platform `p` (one of the first [`MAX_PLATFORM_SERIES`]) per group
    /// of [`Timeline::platform_group_size`] neighbouring pids, lowest pids first.
    pub fn platform_layers(&self, p: usize) -> &[Grid<u32>] {
        self.platform_layers.get(p).map_or(&[], |v| &v[..])
    }
    /// Pids per group of [`Timeline::platform_layers`] ([`process_group`] of the header's
    /// process count).
    pub fn platform_group_size(&self) -> usize {
        self.group_size
    }
    /// Arrivals on each platform in total, every platform (empty without platforms).
    pub fn platform_totals(&self) -> &[u64] {
        &self.platform_totals
    }
    /// Arrivals of a process before any `platform` event of it (on no known platform).
    pub(crate) fn unplaced_arrivals(&self) -> u64 {
        self.unplaced
    }
    /// Each download event's life, in creation order (the first [`MAX_MARKS`]); empty
    /// without `job_event`s.
    pub fn jobs(&self) -> &[JobLife] {
        &self.jobs
    }
    /// Download events past [`MAX_MARKS`], not kept.
    pub(crate) fn jobs_dropped(&self) -> u64 {
        self.jobs_dropped
    }
    /// Backfill state changes, in time order (the first [`MAX_MARKS`]).
    pub fn backfill(&self) -> &[BackfillMark] {
        &self.backfill
    }

    fn pid_slot<T: Clone>(v: &mut Vec<T>, pid: u32, fill: T) -> &mut T {
        let i = pid as usize;
        if v.len() <= i {
            v.resize(i + 1, fill);
        }
        &mut v[i]
    }

    fn multiplier(&mut self, t: u64, pid: Option<u32>, from: f64, to: f64) {
        match pid {
            None => {
                self.has_global_mult = true;
                self.global_now = to;
                self.global_mult.at(t).change(from, to);
            }
            Some(p) => {
                self.has_pp_mult = true;
                let (old_mean, old_max) = self.pp_stats();
                *Self::pid_slot(&mut self.pp_mult, p, 1.0) = to;
                let (mean, max) = self.pp_stats();
                self.pp_mean.at(t).change(old_mean, mean);
                self.pp_max.at(t).change(old_max, max);
            }
        }
    }

    fn platform_arrival(&mut self, t: u64, pid: u32) {
        let Some(p) = self.job_platform.get(pid as usize).copied().flatten() else {
            self.unplaced += 1;
            return;
        };
        let p = p as usize;
        if let Some(n) = self.platform_totals.get_mut(p) {
            *n += 1;
        }
        if let Some(g) = self.platform_arrivals.get_mut(p) {
            *g.at(t) += 1;
        }
        let layer = pid as usize / self.group_size;
        if let Some(g) = self.platform_layers.get_mut(p).and_then(|v| v.get_mut(layer)) {
            *g.at(t) += 1;
        }
    }

    /// `pid` stops working on the walk it runs, at `t`.
    fn leave_walk(&mut self, pid: u32, t: u64) {
        if let Some(slot) = self.walking.get_mut(pid as usize)
            && let Some(i) = slot.take()
            && let Some(w) = self.jobs[i]
                .walks
                .iter_mut()
                .rev()
                .find(|w| w.pid == pid && w.left.is_none())
        {
            w.left = Some(t);
        }
    }

    fn job_event(&mut self, t: u64, source: u32, event: u32, pid: Option<u32>, state: JobState) {
        let known = self.job_index.get(&event).copied();
        // a process turning to another event has left the walk it ran
        if let Some(p) = pid
            && self
                .walking
                .get(p as usize)
                .copied()
                .flatten()
                .is_some_and(|i| Some(i) != known)
        {
            self.leave_walk(p, t);
        }
        let i = match (known, state) {
            (Some(i), _) => i,
            (None, JobState::Pending) => {
                if self.jobs.len() >= MAX_MARKS {
                    self.jobs_dropped += 1;
                    return;
                }
                self.jobs.push(JobLife {
                    source,
                    event,
                    pending: t,
                    walks: Vec::new(),
                    closed: None,
                    requeues: 0,
                    redelivered: Vec::new(),
                });
                self.job_index.insert(event, self.jobs.len() - 1);
                return;
            }
            // an event created before the cap, or one the trace opened without `pending`
            (None, _) => return,
        };
        match state {
            JobState::Pending => {}
            JobState::Requeued => self.jobs[i].requeues += 1,
            JobState::Redelivered => {
                let j = &mut self.jobs[i];
                if j.redelivered.len() < MAX_WALKS {
                    j.redelivered.push(t);
                }
            }
            JobState::Running => {
                let Some(p) = pid else { return };
                self.leave_walk(p, t);
                let j = &mut self.jobs[i];
                if j.walks.len() < MAX_WALKS {
                    j.walks.push(Walk {
                        pid: p,
                        start: t,
                        last_fetch: None,
                        left: None,
                    });
                    *Self::pid_slot(&mut self.walking, p, None) = Some(i);
                }
            }
            s if s.closes() => {
                if self.jobs[i].closed.is_none() {
                    self.jobs[i].closed = Some((t, s));
                }
                let walkers: Vec<u32> = self.jobs[i]
                    .walks
                    .iter()
                    .filter(|w| w.left.is_none())
                    .map(|w| w.pid)
                    .collect();
                for p in walkers {
                    if self.walking.get(p as usize).copied().flatten() == Some(i) {
                        self.leave_walk(p, t);
                    }
                }
            }
            _ => {}
        }
    }

    fn fetch_activity(&mut self, t: u64, pid: u32) {
        if let Some(i) = self.walking.get(pid as usize).copied().flatten()
            && let Some(w) = self.jobs[i]
                .walks
                .iter_mut()
                .rev()
                .find(|w| w.pid == pid && w.left.is_none())
        {
            w.last_fetch = Some(t);
        }
    }

    fn pp_stats(&self) -> (f64, f64) {
        if self.pp_mult.is_empty() {
            return (1.0, 1.0);
        }
        let sum: f64 = self.pp_mult.iter().sum();
        let max = self.pp_mult.iter().copied().fold(f64::MIN, f64::max);
        (sum / self.pp_mult.len() as f64, max)
    }

    fn fallback_edge(&mut self, t: u64, pid: u32, enter: bool) {
        let slot = Self::pid_slot(&mut self.in_fallback, pid, false);
        if *slot == enter {
            return;
        }
        *slot = enter;
        // a backend with a shared multiplier: a cut-off process's own steps end with its
        // fallback (it paces by the shared multiplier again)
        if !enter && self.shared_backoff && self.series {
            let shared = self.global_now;
            if self.pp_mult.get(pid as usize).is_some_and(|m| *m != shared) {
                let (old_mean, old_max) = self.pp_stats();
                *Self::pid_slot(&mut self.pp_mult, pid, 1.0) = shared;
                let (mean, max) = self.pp_stats();
                self.pp_mean.at(t).change(old_mean, mean);
                self.pp_max.at(t).change(old_max, max);
            }
        }
        if enter {
            self.fallback_count += 1;
            if self.fallback_count == 1 {
                if self.fallback.len() < MAX_MARKS {
                    self.fallback.push((t, None));
                } else if let Some(last) = self.fallback.last_mut() {
                    last.1 = None; // past the cap: extend the last window
                }
            }
        } else {
            self.fallback_count -= 1;
            if self.fallback_count == 0
                && let Some(last) = self.fallback.last_mut()
            {
                last.1 = Some(t);
            }
        }
    }
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Sink for Timeline {
    fn header(&mut self, h: &Header) {
        let n = h.processes as usize;
        self.sent = LoopMap::default();
        self.in_fallback = vec![false; n];
        if self.series {
            self.per_process = vec![Grid::new(FINE_WIDTH_NS, COARSE_CAP); n];
            self.per_process_total = vec![0; n];
            self.pp_mult = vec![1.0; n];
        }
        let interval = (1e9 / h.rate).ceil() as u64;
        self.stall.settle = (10 * interval).max(1_000_000_000);
        self.shared_backoff = h.backend_detail.backoff == Some(crate::trace::BackoffPlace::Global);
        self.platforms = h.backend_detail.platforms().to_vec();
        self.job_platform = vec![None; n];
        self.group_size = process_group(n);
        if self.series && !self.platforms.is_empty() {
            let k = self.platforms.len().min(MAX_PLATFORM_SERIES);
            let groups = n.max(1).div_ceil(self.group_size);
            self.platform_arrivals = vec![Grid::new(FINE_WIDTH_NS, ARRIVAL_CAP); k];
            self.platform_layers = vec![vec![Grid::new(FINE_WIDTH_NS, COARSE_CAP); groups]; k];
            self.platform_totals = vec![0; self.platforms.len()];
        }
        self.header = Some(h.clone());
    }

    fn event(&mut self, ev: &Event) {
        self.end = self.end.max(ev.t());
        match *ev {
            Event::Arrival { t, pid, .. } => {
                self.stall.progress(t);
                if self.series {
                    *self.arrivals.at(t) += 1;
                    let g = Self::pid_slot(&mut self.per_process, pid, Grid::new(FINE_WIDTH_NS, COARSE_CAP));
                    *g.at(t) += 1;
                    *Self::pid_slot(&mut self.per_process_total, pid, 0) += 1;
                    if !self.platforms.is_empty() {
                        self.platform_arrival(t, pid);
                    }
                    self.fetch_activity(t, pid);
                }
            }
            Event::FetchStart { t, pid, .. } | Event::FetchEnd { t, pid, .. } if self.series => {
                self.fetch_activity(t, pid);
            }
            Event::Platform { pid, platform, .. } if self.series => {
                *Self::pid_slot(&mut self.job_platform, pid, None) = Some(platform);
            }
            Event::JobEvent {
                t,
                source,
                event,
                pid,
                state,
            } if self.series => self.job_event(t, source, event, pid, state),
            Event::Backfill {
                t,
                source,
                state,
                chunks,
            } if self.series && self.backfill.len() < MAX_MARKS => {
                self.backfill.push(BackfillMark {
                    t,
                    source,
                    state,
                    chunks,
                });
            }
            Event::Grant { t, .. } => self.stall.progress(t),
            // The same round-trip definition as `summary::Figures`.
            Event::OpSent { t, pid, thread, op } if op.asks_permission() => {
                self.sent.insert(pid, thread, t);
            }
            Event::Reply { t, pid, thread, op, .. } if op.asks_permission() => {
                if let Some(s) = self.sent.remove(pid, thread) {
                    self.latency.saturating_record((t - s).max(1));
                }
            }
            Event::StoreError { pid, thread, .. } => {
                self.sent.remove(pid, thread);
            }
            Event::Crash { t, pid, .. } => {
                self.sent.remove_process(pid);
                self.stall.crash(t);
                if self.series {
                    if self.crashes.len() < MAX_MARKS {
                        self.crashes.push(t);
                    }
                    self.fallback_edge(t, pid, false);
                    self.leave_walk(pid, t);
                }
            }
            Event::Multiplier { t, pid, from, to, .. } if self.series => self.multiplier(t, pid, from, to),
            Event::Fallback { t, pid, enter, .. } if self.series => self.fallback_edge(t, pid, enter),
            Event::Fault { t, id, kind, start } if self.series => {
                if start {
                    if self.faults.len() < MAX_MARKS {
                        self.faults.push(FaultWindow {
                            id,
                            kind,
                            start: t,
                            end: None,
                        });
                    }
                } else if let Some(w) = self.faults.iter_mut().rev().find(|w| w.id == id && w.end.is_none()) {
                    w.end = Some(t);
                }
            }
            _ => {}
        }
        if self.series {
            self.arrivals.extend_to(self.end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_coarsens_tenfold_and_keeps_counts() {
        let mut g: Grid<u32> = Grid::new(1, 10);
        for t in 0..10 {
            *g.at(t) += 1;
        }
        assert_eq!((g.width(), g.cells().len()), (1, 10));
        *g.at(25) += 1;
        assert_eq!(g.width(), 10);
        assert_eq!(g.cells(), &[10, 0, 1]);
        g.coarsen_to(100);
        assert_eq!(g.cells(), &[11]);
    }

    #[test]
    fn gauge_merges_max_and_last() {
        let mut a = Gauge::default();
        a.change(1.0, 4.0);
        let mut b = Gauge::default();
        b.change(4.0, 2.0);
        a.absorb(&b);
        assert_eq!((a.max, a.last), (Some(4.0), Some(2.0)));
        let mut c = Gauge::default();
        c.absorb(&Gauge::default());
        assert_eq!(c, Gauge::default());
    }

    /// A walk lasts from `running` to its process's last fetch for it; a kill ends it, and the
    /// task delivered again walks anew on another process until the event closes.
    #[test]
    fn job_walks_follow_their_process() {
        use crate::trace::CrashPoint;
        let mut tl = Timeline::new();
        let job = |t, pid, state| Event::JobEvent {
            t,
            source: 3,
            event: 7,
            pid,
            state,
        };
        for e in [
            job(0, None, JobState::Pending),
            job(5, Some(0), JobState::Running),
            Event::FetchStart {
                t: 6,
                pid: 0,
                thread: 0,
            },
            Event::Arrival {
                t: 8,
                pid: 0,
                thread: 0,
                status: 200,
            },
            // another process's fetch is not this walk's
            Event::Arrival {
                t: 9,
                pid: 1,
                thread: 0,
                status: 200,
            },
            Event::Crash {
                t: 10,
                pid: 0,
                point: CrashPoint::Immediate,
            },
            Event::Arrival {
                t: 11,
                pid: 0,
                thread: 0,
                status: 200,
            },
            job(12, None, JobState::Redelivered),
            job(20, Some(1), JobState::Running),
            Event::FetchEnd {
                t: 25,
                pid: 1,
                thread: 0,
                status: 200,
            },
            job(30, Some(1), JobState::Complete),
        ] {
            tl.event(&e);
        }
        let j = &tl.jobs()[0];
        assert_eq!((j.source, j.event, j.pending), (3, 7, 0));
        assert_eq!(
            j.walks,
            vec![
                Walk {
                    pid: 0,
                    start: 5,
                    last_fetch: Some(8),
                    left: Some(10)
                },
                Walk {
                    pid: 1,
                    start: 20,
                    last_fetch: Some(25),
                    left: Some(30)
                }
            ]
        );
        assert_eq!(j.redelivered, vec![12]);
        assert_eq!(j.closed, Some((30, JobState::Complete)));
    }

    #[test]
    fn stall_after_kill() {
        let mut s = StallMeter {
            settle: 1000,
            ..Default::default()
        };
        s.progress(10);
        s.progress(20);
        assert_eq!(s.max, None);
        s.crash(100);
        s.progress(150); // 50 after the crash
        s.progress(900); // 750
        s.progress(5000); // 4100: it begins inside the settle window (until 1100)
        s.progress(5010);
        s.progress(20_000); // begins after the settle window: not a stall after the kill
        assert_eq!(s.max, Some(4100));
    }
}
