//! The summary of one run: the headline figures `pacesim run --json` prints, computed in one
//! streaming pass over the trace (so a live trace gives the same figures).

use crate::check::{Suite, Verdict, ceiling::MaxWindow};
use crate::sim::run::NoProgress;
use crate::trace::{Detail, Event, Header, OpKind, Sink, Tee, Writer};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Reservation round-trip latency (send to reply), milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Round trips measured.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub(crate) p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub(crate) max_ms: f64,
}

/// One check's result in `--json`: `{"verdict": "pass" | "fail" | "not_judged", "detail": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckOut {
    /// Pass, fail, or not judged (the trace lacks what the check needs).
    pub verdict: crate::check::Status,
    /// Witness, figure, or what the check needs.
    pub detail: String,
}

impl CheckOut {
    /// Did it hold? (False for a failure and for a check not judged.)
    pub fn passed(&self) -> bool {
        self.verdict == crate::check::Status::Pass
    }
    /// Did it break?
    pub fn failed(&self) -> bool {
        self.verdict == crate::check::Status::Fail
    }
    /// Did it judge the run?
    pub fn judged(&self) -> bool {
        self.verdict != crate::check::Status::NotJudged
    }
}

/// The headline figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Backend.
    pub backend: String,
    /// Backend options in force, and the scenario settings the checkers read.
    pub backend_detail: Detail,
    /// Seed.
    pub seed: u64,
    /// Worker processes.
    pub processes: u32,
    /// Fetches that reached the destination.
    pub fetches: u64,
    /// First fetch start, seconds of reference time.
    pub first_start_s: f64,
    /// Last fetch start, seconds.
    pub last_start_s: f64,
    /// `(fetches - 1) / (last_start - first_start)`: fetches per second between them.
    pub achieved_rate: f64,
    /// The configured ceiling.
    pub rate: f64,
    /// Largest 1 s window of destination arrivals.
    pub max_window: MaxWindow,
    /// Smallest burst the destination arrivals conform to.
    pub burst_needed: u64,
    /// Smallest burst the granted slots conform to.
    pub slot_burst_needed: u64,
    /// Responses 429.
    pub status_429: u64,
    /// Responses 503.
    pub(crate) status_503: u64,
    /// Permission round trips: each operation that asks for permission (a reservation, a GCRA
    /// check, a lock try, a backend's own acquire), sent to its reply. (Named for the
    /// reservation, the first kind; the JSON keeps the name.)
    pub reservation: Latency,
    /// Total process-seconds spent in fallback.
    pub fallback_s: f64,
    /// Processes killed.
    pub crashes: u64,
    /// Store errors seen by processes.
    pub(crate) store_errors: u64,
    /// Reference time the run ended, seconds.
    pub end_s: f64,
    /// The trace hash ([`crate::trace::TraceHash`]): 16 hex digits.
    pub trace_hash: String,
    /// Verdicts by checker name.
    pub checks: BTreeMap<String, CheckOut>,
}

impl Summary {
    /// True when no check failed (a check not judged does not fail a run: see
    /// [`Summary::all_judged`]).
    pub fn all_pass(&self) -> bool {
        !self.checks.values().any(CheckOut::failed)
    }
    /// True when every check judged the run (none is [`crate::check::Status::NotJudged`]).
    pub fn all_judged(&self) -> bool {
        self.checks.values().all(CheckOut::judged)
    }
    /// The checks not judged, by name.
    pub fn not_judged(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|(_, c)| !c.judged())
            .map(|(k, _)| k.as_str())
            .collect()
    }
}

/// Streams the figures that are not checker verdicts.
#[derive(Debug)]
pub struct Figures {
    header: Option<Header>,
    fetches: u64,
    first_start: Option<u64>,
    last_start: u64,
    s429: u64,
    s503: u64,
    hist: Histogram<u64>,
    // round trips of zero time (the histogram's range starts at 1 ns)
    zero_latency: u64,
    in_fallback: Vec<Option<u64>>,
    fallback_ns: u64,
    crashes: u64,
    store_errors: u64,
    end: u64,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            header: None,
            fetches: 0,
            first_start: None,
            last_start: 0,
            s429: 0,
            s503: 0,
            hist: Histogram::new_with_bounds(1, 10_000_000_000_000, 3).expect("valid histogram bounds"),
            zero_latency: 0,
            in_fallback: Vec::new(),
            fallback_ns: 0,
            crashes: 0,
            store_errors: 0,
            end: 0,
        }
    }
}

impl Figures {
    /// The header, once, before any event.
    pub fn header(&mut self, h: &Header) {
        self.in_fallback = vec![None; h.processes as usize];
        self.header = Some(h.clone());
    }

    /// One event; `answered`: when the operation it answers was sent, if it answers one (the
    /// suite tracks the operations in flight: [`Suite::answered`]).
    #[inline(always)]
    pub fn event(&mut self, ev: &Event, answered: Option<u64>) {
        self.end = self.end.max(ev.t());
        // (checked inline) grants, requests, fetch ends and the rest count nowhere here
        if matches!(
            ev,
            Event::Reply { .. }
                | Event::StoreError { .. }
                | Event::FetchStart { .. }
                | Event::Arrival { .. }
                | Event::Crash { .. }
                | Event::Fallback { .. }
        ) {
            self.count(ev, answered);
        }
    }

    // (inlined into each caller: the consumers' copy for one kind of event keeps only that
    // kind's arm)
    #[inline(always)]
    fn count(&mut self, ev: &Event, answered: Option<u64>) {
        match *ev {
            Event::FetchStart { t, .. } => {
                self.first_start.get_or_insert(t);
                self.last_start = t;
            }
            Event::Arrival { status, .. } => {
                self.fetches += 1;
                match status {
                    429 => self.s429 += 1,
                    503 => self.s503 += 1,
                    _ => {}
                }
            }
            Event::Reply { t, op, .. } if op.asks_permission() => {
                if let Some(sent) = answered {
                    // the histogram's range starts at 1 ns: zero round trips are counted apart
                    match t - sent {
                        0 => self.zero_latency += 1,
                        d => self.hist.saturating_record(d),
                    }
                }
            }
            Event::StoreError { .. } => self.store_errors += 1,
            Event::Crash { pid, t, .. } => {
                self.crashes += 1;
                if let Some(Some(since)) = self.in_fallback.get_mut(pid as usize).map(|s| s.take()) {
                    self.fallback_ns += t - since;
                }
            }
            Event::Fallback { t, pid, enter, .. } => {
                if let Some(slot) = self.in_fallback.get_mut(pid as usize) {
                    match (enter, slot.take()) {
                        (true, None) => *slot = Some(t),
                        (true, Some(s)) => *slot = Some(s),
                        (false, Some(since)) => self.fallback_ns += t - since,
                        (false, None) => {}
                    }
                }
            }
            _ => {}
        }
    }
}

impl Figures {
    fn latency(&self) -> Latency {
        let h = &self.hist;
        let zeros = self.zero_latency;
        if h.is_empty() && zeros == 0 {
            return Latency::default();
        }
        let ms = |v: u64| v as f64 / 1e6;
        if zeros == 0 {
            return Latency {
                count: h.len(),
                mean_ms: h.mean() / 1e6,
                p50_ms: ms(h.value_at_quantile(0.50)),
                p95_ms: ms(h.value_at_quantile(0.95)),
                p99_ms: ms(h.value_at_quantile(0.99)),
                max_ms: ms(h.max()),
            };
        }
        // some round trips took no time at all (a zero-latency store): they are the lowest
        let total = h.len() + zeros;
        let q = |p: f64| {
            let rank = p * total as f64;
            if rank <= zeros as f64 || h.is_empty() {
                0.0
            } else {
                ms(h.value_at_quantile(((rank - zeros as f64) / h.len() as f64).min(1.0)))
            }
        };
        Latency {
            count: total,
            mean_ms: if h.is_empty() {
                0.0
            } else {
                h.mean() * h.len() as f64 / total as f64 / 1e6
            },
            p50_ms: q(0.50),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: if h.is_empty() { 0.0 } else { ms(h.max()) },
        }
    }

    /// Combine with the checkers' results into a summary.
    pub fn summary(mut self, suite: &mut Suite, trace_hash: String) -> Summary {
        let h = self.header.clone().expect("trace has a header");
        let open: u64 = self.in_fallback.iter().flatten().map(|&s| self.end - s).sum();
        self.fallback_ns += open;
        let first = self.first_start.unwrap_or(0);
        let span = (self.last_start - first) as f64 / 1e9;
        let achieved_rate = if self.fetches > 1 && span > 0.0 {
            (self.fetches - 1) as f64 / span
        } else {
            0.0
        };
        let verdicts: Vec<Verdict> = suite.verdicts();
        let c = suite.ceiling();
        Summary {
            scenario: h.scenario.clone(),
            backend: h.backend.clone(),
            backend_detail: h.backend_detail.clone(),
            seed: h.seed,
            processes: h.processes,
            fetches: self.fetches,
            first_start_s: first as f64 / 1e9,
            last_start_s: self.last_start as f64 / 1e9,
            achieved_rate,
            rate: h.rate,
            max_window: c.map(|c| c.max_window().clone()).unwrap_or_default(),
            burst_needed: c.map_or(1, |c| c.burst_needed()),
            slot_burst_needed: c.map_or(1, |c| c.slot_burst_needed()),
            status_429: self.s429,
            status_503: self.s503,
            reservation: self.latency(),
            fallback_s: self.fallback_ns as f64 / 1e9,
            crashes: self.crashes,
            store_errors: self.store_errors,
            end_s: self.end as f64 / 1e9,
            trace_hash,
            checks: verdicts
                .into_iter()
                .map(|v| {
                    (
                        v.name.to_string(),
                        CheckOut {
                            verdict: v.status,
                            detail: v.detail,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// Why a simulated run gave no summary.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// Writing the trace file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The run stopped making progress (a livelock); the trace written so far ends there.
    #[error(transparent)]
    NoProgress(#[from] NoProgress),
}

/// Summarise a run in one pass from any producer of its trace (header first): the simulator
/// driving a backend value ([`crate::builder::SimBuilder`]), or a scenario's own backend
/// ([`crate::registry::simulate`]); optionally also write the trace, and feed the events to
/// extra consumers (plots, reports).
///
/// # Errors
///
/// Writing the trace failed, or the producer reported that the run stopped making progress.
pub fn simulate_with(
    produce: impl FnOnce(&mut dyn Sink) -> Result<(), NoProgress> + Send,
    trace: Option<Box<dyn Write + Send>>,
    extra: Option<&mut dyn Sink>,
) -> Result<Summary, SimulateError> {
    let writer = match trace {
        Some(w) => Writer::to(w),
        None => Writer::hash_only(),
    };
    let (figures, mut suite, writer, produced) = stream(produce, Some(writer), extra);
    let mut writer = writer.expect("the writer comes back");
    writer.finish()?;
    produced?;
    Ok(figures.summary(&mut suite, writer.hash_hex()))
}

/// [`simulate_with`] with no trace file and no trace hash (`trace_hash` is `"-"`): the same
/// figures and verdicts, minus the canonical encoding of every event, which is the largest
/// fixed cost per event. For benchmarks and scale runs only; never where determinism is
/// being checked.
///
/// # Panics
///
/// If the run stops making progress ([`crate::builder::NoProgress`]).
pub fn simulate_unhashed_with(
    name: &str,
    produce: impl FnOnce(&mut dyn Sink) -> Result<(), NoProgress> + Send,
) -> Summary {
    let (figures, mut suite, _, produced) = stream(produce, None, None);
    if let Err(e) = produced {
        panic!("{name}: {e}");
    }
    figures.summary(&mut suite, "-".into())
}

/// The consumers of a run's trace on the checkers' thread: the writer (the trace hash, when it
/// writes no file), the figures, the checkers and an extra consumer. A [`Tee`] of them would
/// call each through `dyn`; called directly, the inline checks with which each skips the
/// events it ignores are made here, without a call.
struct Consumers<'a, 'e> {
    writer: Option<&'a mut Writer>,
    figures: &'a mut Figures,
    suite: &'a mut Suite,
    extra: Option<&'a mut (dyn Sink + 'e)>,
}

impl Sink for Consumers<'_, '_> {
    fn header(&mut self, h: &Header) {
        if let Some(w) = &mut self.writer {
            w.header(h);
        }
        self.figures.header(h);
        self.suite.header(h);
        if let Some(e) = &mut self.extra {
            e.header(h);
        }
    }
    fn event(&mut self, ev: &Event) {
        // The kinds of nearly every event, each to its own copy of `each` (see below).
        if !ev.to_own_method(self) {
            self.other(ev);
        }
    }

    // The copies of [`Consumers::each`] for the kinds of nearly every event, which a producer
    // on this thread (no pipe) also calls directly. Each is its own function, handed an event
    // built from the fields, whose kind is a constant the compiler sees: the consumers' own
    // matches of the kind fold away in it, and only that kind's work is left. (Copies inlined
    // into one function are merged back into one before the kind is propagated into them, and
    // one function holding all of them grows past the inliner's budget.) For the same reason
    // each consumer's per-event entry point is `#[inline(always)]`: called out of line, it
    // would match the kind again. Measured on R1-large, the consumers' instructions per event
    // fell by a sixth.

    crate::trace::event::with_events!(crate::trace::event::own_methods [[#[inline(never)] by_ref each]]);
}

impl Consumers<'_, '_> {
    /// Any other kind, rarer: one copy of `each` for all of them. (Out of line too, so that
    /// the dispatch in `event` needs no stack frame and reaches every copy with a jump.)
    #[inline(never)]
    fn other(&mut self, ev: &Event) {
        self.each(ev);
    }
}

impl Consumers<'_, '_> {
    #[inline(always)]
    fn each(&mut self, ev: &Event) {
        if let Some(w) = &mut self.writer {
            w.event(ev);
        }
        self.suite.event(ev);
        self.figures.event(ev, self.suite.answered());
        if let Some(e) = &mut self.extra {
            e.event(ev);
        }
    }
}

/// Run the simulator once, streaming its events to the figures, the checkers, and the
/// optional trace writer and extra consumer.
///
/// On two cores the run is a pipeline ([`crate::trace::pipe`]): the simulator on one thread,
/// the consumers on this one. A writer that writes a trace file encodes every event, as much
/// work as the checkers, so it rides with the simulator; the figures and a hash-only writer
/// are light and read with the checkers. (Each side's state lives on its own thread's stack:
/// state written by both threads within one cache line would stall them both.)
fn stream(
    produce: impl FnOnce(&mut dyn Sink) -> Result<(), NoProgress> + Send,
    writer: Option<Writer>,
    extra: Option<&mut dyn Sink>,
) -> (Figures, Suite, Option<Writer>, Result<(), NoProgress>) {
    let (mut near_writer, mut far_writer) = match writer {
        Some(w) if w.writes() => (Some(w), None),
        w => (None, w),
    };
    let mut figures = Figures::default();
    let mut suite = Suite::new();
    let mut far = Consumers {
        writer: far_writer.as_mut(),
        figures: &mut figures,
        suite: &mut suite,
        extra,
    };
    let near = move |out: &mut dyn Sink| {
        let produced = match &mut near_writer {
            Some(w) => {
                let mut tee = Tee::new();
                tee.push(w);
                tee.push(out);
                produce(&mut tee)
            }
            // nothing to write: the simulator's events go straight to the consumers
            None => produce(out),
        };
        (near_writer, produced)
    };
    // the two halves on one core each, events in order, so all is as single-threaded
    let (near_writer, produced) = if crate::trace::pipe::worth_it() {
        crate::trace::pipe::pipelined(near, &mut far)
    } else {
        near(&mut far)
    };
    (figures, suite, near_writer.or(far_writer), produced)
}

/// Summarise an existing trace (from a file, or a live run): the same figures and checks.
pub fn from_trace(file: &str, input: impl std::io::BufRead) -> Result<Summary, crate::trace::ReadError> {
    summarise(|sink| crate::trace::read(file, input, sink).map(|_| ()))
}

/// The figures and checks of the trace `feed` writes into the consumers (a hash-only writer,
/// the figures, the suite), unless it fails.
fn summarise<E>(feed: impl FnOnce(&mut dyn Sink) -> Result<(), E>) -> Result<Summary, E> {
    let mut writer = Writer::hash_only();
    let mut figures = Figures::default();
    let mut suite = Suite::new();
    feed(&mut Consumers {
        writer: Some(&mut writer),
        figures: &mut figures,
        suite: &mut suite,
        extra: None,
    })?;
    Ok(figures.summary(&mut suite, writer.hash_hex()))
}

/// The command that reproduces one run exactly: `pacesim run FILE --seed N --backend B` (the
/// file quoted for a POSIX shell when it needs it).
pub fn reproduce(file: &Path, seed: u64, backend: &str) -> String {
    let f = file.display().to_string();
    let plain = !f.is_empty()
        && f.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | ':' | '@' | ','));
    let f = if plain {
        f
    } else {
        format!("'{}'", f.replace('\'', "'\\''"))
    };
    format!("{} run {f} --seed {seed} --backend {backend}", program())
}

static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The command that runs pacesim, as reproducers name it: `pacesim`, or a team's own program
/// that registers its backends (set once by [`crate::cli::main_with_backends`]).
pub fn program() -> &'static str {
    PROGRAM.get().map_or("pacesim", String::as_str)
}

/// Name the program reproducers give (once; later calls are ignored).
pub(crate) fn set_program(name: &str) {
    let _ = PROGRAM.set(name.to_string());
}
