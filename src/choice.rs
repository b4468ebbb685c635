//! The choice source: every nondeterministic decision a run makes, as one sequence.
//!
//! A run decides things a seed settles today: each latency and service draw, the order in
//! which operations that reach the store at the same instant are served, whether a kill
//! fires at a protocol point, which process a kill hits. A run can be given one [`Source`],
//! which then makes or records those decisions in the order the run makes them; the
//! simulator enters it ([`enter`]) on its thread while it builds and runs the world, and
//! every random stream ([`crate::rng::Rng`]) and draw consults the thread's source:
//!
//! - **no source** (every ordinary run): each stream draws from its own seeded PCG stream, as
//!   always; nothing is recorded, and every trace hash is what it was;
//! - **[`Tape::record`]**: the same draws, each 64-bit word written down in order (what
//!   `pacesim run --record-choices` saves);
//! - **[`Tape::replay`]**: the words given back in order, so the run repeats exactly
//!   (`pacesim run --choices`); past the last word each stream draws its own seeded words
//!   again (a run never waits on words a file does not hold: an all-zero word would keep a
//!   normal draw's rejection loop going for ever), and [`Source::replayed`] tells how many
//!   words the run drew against how many the file held;
//! - **[`Tape::steer`]**: an explorer's run. A draw from a distribution that is not constant
//!   becomes a choice among a few of its quantiles (say p1, p50, p99); operations reaching the
//!   store at one instant are served in a chosen order; at each of the backend's kill points a
//!   kill may fire (within a budget); other draws (jitter, a 503's coin) stay on the seeded
//!   streams. Each choice is `(index, of)`: a prefix given by the explorer, then whatever its
//!   [`Strategy`] picks. The choices made are the run's choice sequence: replayed as a prefix
//!   with no strategy past it (index 0), they give the same run.
//!
//! Nothing here reads a clock or iterates a hash map. A source sits behind a mutex only because
//! a run may be built on one thread and run on another (the trace pipeline's producer).

use crate::form::Key;
use crate::form::seen::{Seen, Stop};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a choice decides.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A value of a distribution: the index into the source's quantiles.
    Value,
    /// Which of the operations reaching the store at one instant is served first.
    Order,
    /// Whether a kill fires at a protocol point (1: it does).
    Kill,
    /// Which process a kill hits.
    Target,
}

/// Where a run stands in its decisions ([`Source::mark`]): those made, and the kills left.
#[derive(Clone, Debug)]
pub struct Mark {
    made: Vec<Choice>,
    kills_left: u32,
}

impl Mark {
    /// How many decisions were made.
    pub fn len(&self) -> usize {
        self.made.len()
    }

    /// None yet.
    pub fn is_empty(&self) -> bool {
        self.made.is_empty()
    }
}

/// One decision of a run: its kind, how many ways it could go, and the way it went.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Choice {
    /// What it decides.
    pub kind: Kind,
    /// The way taken, below `of`.
    pub index: u32,
    /// How many ways there were (2 or more: a decision with one way is not one).
    pub of: u32,
    /// The process that made it, if one did (a store-side draw has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A decision about to be made, as a [`Strategy`] sees it.
#[derive(Copy, Clone, Debug)]
pub struct Decision {
    /// What it decides.
    pub kind: Kind,
    /// How many ways it can go.
    pub of: u32,
    /// The process making it, if one is.
    pub pid: Option<u32>,
    /// Its place in the run's sequence (0 first).
    pub depth: usize,
    /// For [`Kind::Order`]: the processes of the candidates, in arrival order (up to 8).
    pub pids: [u32; 8],
}

/// Picks the way a decision goes, past the explorer's prefix.
pub trait Strategy: Send {
    /// The index taken, below `d.of` (a larger one is taken modulo `d.of`).
    fn choose(&mut self, d: &Decision) -> u32;
}

/// The strategy that always takes the first way: a prefix replayed as it was made.
#[derive(Copy, Clone, Debug, Default)]
pub struct First;

impl Strategy for First {
    fn choose(&mut self, _: &Decision) -> u32 {
        0
    }
}

/// The exhaustive walk's order of a decision's ways: a value's largest quantile first (the
/// slowest draw), every other decision's ways in index order. A state reached by slower draws
/// has waited more, and an explorer's seen state covers a new one only when it has at least
/// as much slack ([`crate::form`]: time waited, slots owed); walked slowest first, the state
/// seen first is the one that waited most, and the same state reached sooner is covered by it
/// rather than explored again. The order is its own inverse: `walk_rank` of a rank is the way
/// of that rank.
pub fn walk_rank(kind: Kind, index: u32, of: u32) -> u32 {
    match kind {
        Kind::Value => of.saturating_sub(1).saturating_sub(index),
        _ => index,
    }
}

/// The strategy that takes each decision's first way in the walk's order ([`walk_rank`]):
/// the exhaustive explorer's, past its prefix.
#[derive(Copy, Clone, Debug, Default)]
pub struct Walk;

impl Strategy for Walk {
    fn choose(&mut self, d: &Decision) -> u32 {
        walk_rank(d.kind, 0, d.of)
    }
}

/// The bounds a steered run explores within (the explorer's, written into a choice file).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bounds {
    /// The quantiles a non-constant distribution's draw chooses among (each in `(0, 1)`).
    pub quantiles: Vec<f64>,
    /// At most this many kills fire at protocol points.
    pub kills: u32,
    /// The protocol points a kill may fire at (written by name, `mid_reservation`).
    pub kill_points: Vec<KillPoint>,
    /// A killed process restarts after this long (nanoseconds); `None`: it stays dead.
    pub restart_after: Option<u64>,
    /// The most operations ordered at one instant (more are served in arrival order).
    pub order_width: u32,
    /// Which network hops are choices (the others take their medians).
    #[serde(default)]
    pub hops: Hops,
}

/// Which network hops of a steered run are choices (each other hop takes its median).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hops {
    /// The hops to the store of operations that ask for permission or complete such a request
    /// (reserve, gcra, try_lock, acquire, complete): where two processes race for a slot or a
    /// lock. A report's or an unlock's hop, and every reply's, only shift when its process goes
    /// on.
    #[default]
    Permission,
    /// [`Hops::Permission`]'s hops, each only while another operation is on its way to the
    /// store, or there: when nothing else is in flight, no order at the store can change, and
    /// the hop takes its median (a reduction for order races; a design whose defect is in
    /// timing alone wants `permission`).
    Racing,
    /// Every hop to the store.
    Sent,
    /// Every hop, both ways.
    All,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            quantiles: vec![0.01, 0.5, 0.99],
            kills: 0,
            kill_points: Vec::new(),
            restart_after: Some(1_000_000_000),
            order_width: 8,
            hops: Hops::Permission,
        }
    }
}

/// Where in its protocol a process is killed: the one type every route names a kill point by
/// (a scenario's `[[faults]] point`, `[live] kill_points`, a backend's
/// [`kill_points`](crate::backend::Backend::kill_points), a steered run's
/// [`Bounds::kill_points`] and its kill mask ([`KillPoint::bit`]), and the trace's `crash`
/// events, [`crate::trace::CrashPoint::At`]). Its serde name is the name scenario files,
/// traces, choice files and `--kill-points` write ([`KillPoint::name`]).
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillPoint {
    /// The store applied the process's operation; the reply never arrives.
    MidReservation,
    /// Right after the process acquired a lock.
    HoldingLock,
    /// While the process's transaction (holding the row lock) is open.
    InTransaction,
    /// While sleeping until its slot.
    SleepingToSlot,
    /// After the fetch request left, before the response.
    MidFetch,
}

impl KillPoint {
    /// Every point, in declaration order (its bit's order: [`KillPoint::bit`]).
    pub const ALL: &'static [KillPoint] = &[
        KillPoint::MidReservation,
        KillPoint::HoldingLock,
        KillPoint::InTransaction,
        KillPoint::SleepingToSlot,
        KillPoint::MidFetch,
    ];

    /// Name as written in scenario files, traces, choice files and `--kill-points` (the serde
    /// name).
    pub const fn name(self) -> &'static str {
        match self {
            KillPoint::MidReservation => "mid_reservation",
            KillPoint::HoldingLock => "holding_lock",
            KillPoint::InTransaction => "in_transaction",
            KillPoint::SleepingToSlot => "sleeping_to_slot",
            KillPoint::MidFetch => "mid_fetch",
        }
    }

    /// The point named `name`; an error naming it and every point otherwise.
    pub fn parse(name: &str) -> Result<KillPoint, String> {
        KillPoint::ALL
            .iter()
            .copied()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let all: Vec<&str> = KillPoint::ALL.iter().map(|p| p.name()).collect();
                format!("no kill point `{name}` (one of {})", all.join(", "))
            })
    }

    /// The point's bit in a steered run's kill mask ([`Tape::steer`]).
    pub const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// The kill mask of `points`: each one's [`bit`](KillPoint::bit).
    pub fn mask(points: &[KillPoint]) -> u32 {
        points.iter().fold(0, |m, p| m | p.bit())
    }

    /// The one reachability check: does backend `backend`, whose processes can be found at
    /// `reached` (its [`kill_points`](crate::backend::Backend::kill_points), or an external
    /// worker's `[live] kill_points`), ever reach this point? A kill armed at a point it never
    /// reaches would never fire, and the run would pass quietly, so every route refuses it
    /// with this error.
    pub fn reached_by(self, backend: &str, reached: &[KillPoint]) -> Result<(), Unreachable> {
        if reached.contains(&self) {
            return Ok(());
        }
        Err(Unreachable {
            backend: backend.to_string(),
            point: self,
            reached: reached.to_vec(),
        })
    }
}

impl std::fmt::Display for KillPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KillPoint {
    type Err = String;
    fn from_str(s: &str) -> Result<KillPoint, String> {
        KillPoint::parse(s)
    }
}

/// A kill point a backend never reaches ([`KillPoint::reached_by`]): the backend, the point,
/// and the points it does reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The backend (`external` for an external worker).
    pub backend: String,
    /// The point asked for.
    pub point: KillPoint,
    /// The points it reaches.
    pub reached: Vec<KillPoint>,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reached: Vec<&str> = self.reached.iter().map(|p| p.name()).collect();
        write!(
            f,
            "backend `{}` never reaches `{}` (it reaches: {})",
            self.backend,
            self.point,
            if reached.is_empty() {
                "none".to_string()
            } else {
                reached.join(", ")
            }
        )
    }
}

impl std::error::Error for Unreachable {}

#[derive(Debug)]
enum Mode {
    Record,
    Replay,
    Steer,
}

/// The decisions of one run (see the module docs), behind a [`Source`].
pub struct Tape {
    mode: Mode,
    // Record / Replay: the 64-bit words drawn, in order; `at`: the next to give back (past
    // the end: words drawn from the streams' own generators, counted)
    words: Vec<u64>,
    at: usize,
    // Steer: the prefix to take first, then the strategy's picks; every decision made.
    prefix: Vec<u32>,
    made: Vec<Choice>,
    strategy: Box<dyn Strategy>,
    bounds: Bounds,
    // the standard normal's quantiles at `bounds.quantiles` (a log-normal draw's exponent)
    z: Vec<f64>,
    kills_left: u32,
    // invariant: a kill point's bit (`KillPoint::bit`) set when a kill may fire there
    kill_mask: u32,
    // the states seen so far, when the explorer prunes them (`Source::visit`); states are
    // compared only past `visit_from` decisions (the choices above it are a shard's)
    seen: Option<Seen>,
    visit_from: usize,
    // the seen states are formed with interchangeable processes relabeled (`Tape::relabeling`)
    symmetry: bool,
    // the states this run added to `seen`, each with the decisions made by then and its
    // instant; where a run stopped at a seen state would have ended; where it ended
    opened: Vec<Opened>,
    stop: Option<Stop>,
    ended: Option<(u64, bool)>,
    // an audit of the pruning (tests): every state visited, with the decisions made by then;
    // nothing is pruned
    #[cfg(test)]
    audit: Option<Vec<(Key, usize)>>,
    // the explorer's limits, asked now and then during a run with the bytes the seen states
    // take ([`Source::halt`]); whether they stopped this run
    halt: Option<Halt>,
    halted: bool,
}

/// An explorer's limits (a deadline, a memory limit, a signal), asked now and then during a
/// steered run with the bytes the seen states take: `true` stops the run part way.
pub type Halt = Box<dyn FnMut(u64) -> bool + Send>;

/// A state a run added to the seen states: its handle, the decisions made before it, its
/// instant.
#[derive(Copy, Clone, Debug)]
pub struct Opened {
    /// Its handle ([`Seen::close`]).
    pub at: (u64, u32),
    /// The decisions made before it: its continuations are the runs that begin so.
    pub depth: usize,
    /// Its instant (virtual ns).
    pub now: u64,
}

/// What a pruning run reached: the states it added, and where it ended (or, stopped at a seen
/// state, would have ended: `None` when that is not known).
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// The states it added, in order.
    pub opened: Vec<Opened>,
    /// Its end (virtual ns) and whether the scenario's duration cut it.
    pub end: Option<(u64, bool)>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("mode", &self.mode)
            .field("words", &self.words.len())
            .field("made", &self.made.len())
            .finish()
    }
}

impl Tape {
    fn new(mode: Mode) -> Tape {
        Tape {
            mode,
            words: Vec::new(),
            at: 0,
            prefix: Vec::new(),
            made: Vec::new(),
            strategy: Box::new(First),
            bounds: Bounds::default(),
            z: Vec::new(),
            kills_left: 0,
            kill_mask: 0,
            seen: None,
            symmetry: false,
            visit_from: 0,
            opened: Vec::new(),
            stop: None,
            ended: None,
            #[cfg(test)]
            audit: None,
            halt: None,
            halted: false,
        }
    }

    /// Record every word an ordinary run draws.
    pub fn record() -> Tape {
        Tape::new(Mode::Record)
    }

    /// Give `words` back in order; past the end, the streams' own words.
    pub fn replay(words: Vec<u64>) -> Tape {
        Tape {
            words,
            ..Tape::new(Mode::Replay)
        }
    }

    /// Steer a run within `bounds`: `prefix` first, then `strategy`. `kill_mask` has the bit
    /// ([`KillPoint::bit`]) of each kill point a kill may fire at ([`KillPoint::mask`]).
    pub fn steer(bounds: Bounds, kill_mask: u32, prefix: Vec<u32>, strategy: Box<dyn Strategy>) -> Tape {
        let z = bounds.quantiles.iter().map(|&q| probit(q)).collect();
        // (the run makes its prefix's decisions and usually a few more: room for them at once,
        // not grown by doubling in every run)
        let made = Vec::with_capacity(prefix.len() + 32);
        Tape {
            made,
            prefix,
            strategy,
            kills_left: bounds.kills,
            kill_mask,
            z,
            bounds,
            ..Tape::new(Mode::Steer)
        }
    }

    /// Prune: a run stops at a state in `seen` (or adds the state to it): see [`Source::visit`].
    /// The table may be shared with runs on other threads ([`Seen`]).
    /// States reached before `from` decisions are neither compared nor added (a shard's
    /// prefix: their continuations are partly another shard's).
    pub fn pruning(mut self, seen: Seen, from: usize) -> Tape {
        self.seen = Some(seen);
        self.visit_from = from;
        self
    }

    /// Form the states it prunes with interchangeable processes relabeled (symmetry reduction:
    /// [`crate::form::Form::relabeled`]); the explorer sets it where every part of the world
    /// and every checker can name processes by label.
    pub fn relabeling(mut self, on: bool) -> Tape {
        self.symmetry = on;
        self
    }

    /// Stop the run part way when `halt` says so ([`Source::halt`]): an explorer's limits hold
    /// inside a run too, not only between runs.
    pub fn halting(mut self, halt: Halt) -> Tape {
        self.halt = Some(halt);
        self
    }

    /// Audit the pruning instead (tests): every state a pruning run would visit is recorded
    /// with the number of decisions made by then, and the run goes on ([`Source::take_audit`]).
    #[cfg(test)]
    pub(crate) fn auditing(mut self) -> Tape {
        self.seen = Some(Seen::default());
        self.audit = Some(Vec::new());
        self
    }

    fn decide(&mut self, kind: Kind, of: u32, pid: Option<u32>, pids: [u32; 8]) -> (u32, bool) {
        let depth = self.made.len();
        let (index, fresh) = match self.prefix.get(depth) {
            // the prefix's last decision is new too: a depth-first explorer's prefix ends with
            // the branch it has not taken yet, so the state it leads to is one no run reached
            // that way (and its fingerprint may still meet one reached another way)
            Some(&i) => (i.min(of - 1), depth + 1 == self.prefix.len()),
            None => {
                let d = Decision {
                    kind,
                    of,
                    pid,
                    depth,
                    pids,
                };
                (self.strategy.choose(&d) % of, true)
            }
        };
        self.made.push(Choice { kind, index, of, pid });
        (index, fresh)
    }
}

/// A fingerprint of a value's declared parts, by hashing ([`crate::form::fingerprint`]).
pub use crate::form::fingerprint;

thread_local! {
    // invariant: true exactly while `CURRENT` holds a source
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static CURRENT: RefCell<Option<Source>> = const { RefCell::new(None) };
    // the process whose event the run is handling (what a decision is attributed to)
    static PID: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Is a source entered on this thread? (One load: every random word asks.)
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// `f` with this thread's source, if one is entered.
pub fn with<R>(f: impl FnOnce(&Source) -> Option<R>) -> Option<R> {
    if !active() {
        return None;
    }
    CURRENT.with(|c| c.borrow().as_ref().and_then(f))
}

/// The word a stream drew, `own`, as this thread's source has it (recorded, replayed, or
/// `own`); `own` when none is entered.
#[cold]
pub fn word(own: u64) -> u64 {
    with(|s| Some(s.word(|| own))).unwrap_or(own)
}

/// Attribute the decisions from now on to process `pid` (the simulator sets it per event).
pub fn set_pid(pid: Option<u32>) {
    PID.with(|p| p.set(pid));
}

/// The process decisions are attributed to.
pub fn pid() -> Option<u32> {
    PID.with(Cell::get)
}

/// This thread's source while it lives ([`enter`]); the one before it after.
#[derive(Debug)]
pub struct Entered {
    before: Option<Source>,
}

/// Enter `source` on this thread until the guard drops (a panic drops it too).
pub fn enter(source: Source) -> Entered {
    let before = CURRENT.with(|c| c.borrow_mut().replace(source));
    ACTIVE.with(|a| a.set(true));
    Entered { before }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let before = self.before.take();
        let on = before.is_some();
        CURRENT.with(|c| *c.borrow_mut() = before);
        ACTIVE.with(|a| a.set(on));
        PID.with(|p| p.set(None));
    }
}

/// The standard normal quantile at `q` (clamped into `[1e-12, 1 - 1e-12]`).
pub(crate) fn probit(q: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(q.clamp(1e-12, 1.0 - 1e-12))
}

/// A run's choice source: shared by every stream of the run.
#[derive(Clone, Debug)]
pub struct Source(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    tape: Mutex<Tape>,
    // invariant: true when a decision past the prefix (or its last) was made since the last
    // `take_fresh`
    fresh: AtomicBool,
    // the tape prunes (it holds the seen states): fixed when the source is made
    prunes: AtomicBool,
    // invariant: the tape's decisions made (`made.len()`), read by a steered run's loop after
    // every event without taking the tape
    made: AtomicUsize,
    // the tape's `symmetry`: fixed when the source is made
    symmetry: bool,
}

impl Source {
    /// A source over `tape`.
    pub fn new(tape: Tape) -> Source {
        let prunes = AtomicBool::new(tape.seen.is_some());
        let symmetry = tape.symmetry;
        Source(Arc::new(Shared {
            tape: Mutex::new(tape),
            fresh: AtomicBool::new(false),
            prunes,
            made: AtomicUsize::new(0),
            symmetry,
        }))
    }

    /// Whether the states this source prunes are formed with interchangeable processes
    /// relabeled ([`Tape::relabeling`]).
    pub fn symmetry(&self) -> bool {
        self.0.symmetry
    }

    fn tape(&self) -> MutexGuard<'_, Tape> {
        // (a panic while the tape was held leaves it as it was: nothing half-written)
        self.0.tape.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn decide(&self, t: &mut Tape, kind: Kind, of: u32, pid: Option<u32>, pids: [u32; 8]) -> u32 {
        let (i, fresh) = t.decide(kind, of, pid, pids);
        self.0.made.store(t.made.len(), Ordering::Relaxed);
        if fresh {
            self.0.fresh.store(true, Ordering::Relaxed);
        }
        i
    }

    /// The next word of a stream whose own generator would give `own`: recorded, replayed,
    /// or (steered) `own` itself.
    pub fn word(&self, own: impl FnOnce() -> u64) -> u64 {
        let mut t = self.tape();
        match t.mode {
            Mode::Record => {
                let w = own();
                t.words.push(w);
                w
            }
            Mode::Replay => {
                // past the end the stream's own word: a zero for ever would hold a rejection
                // loop (a normal draw's) in place
                let w = match t.words.get(t.at) {
                    Some(&w) => w,
                    None => own(),
                };
                t.at = t.at.saturating_add(1);
                w
            }
            Mode::Steer => own(),
        }
    }

    /// Steered: the index of the quantile a non-constant distribution's draw takes, and that
    /// quantile and its standard normal quantile; `None` when not steered.
    pub fn value(&self, pid: Option<u32>) -> Option<(f64, f64)> {
        let mut t = self.tape();
        if !matches!(t.mode, Mode::Steer) {
            return None;
        }
        let n = t.bounds.quantiles.len() as u32;
        let i = if n > 1 {
            self.decide(&mut t, Kind::Value, n, pid, [0; 8])
        } else {
            0
        } as usize;
        Some((*t.bounds.quantiles.get(i).unwrap_or(&0.5), *t.z.get(i).unwrap_or(&0.0)))
    }

    /// Steered: which of `of` candidates (their processes `pids`) goes first; `None` when not
    /// steered or there is nothing to choose.
    pub fn order(&self, pids: &[u32]) -> Option<u32> {
        let mut t = self.tape();
        let of = (pids.len() as u32).min(t.bounds.order_width);
        if !matches!(t.mode, Mode::Steer) || of < 2 {
            return None;
        }
        let mut p = [0; 8];
        for (slot, &pid) in p.iter_mut().zip(pids) {
            *slot = pid;
        }
        Some(self.decide(&mut t, Kind::Order, of, None, p))
    }

    /// Which hops are choices ([`Bounds::hops`]); `None` when not steered.
    pub fn hops(&self) -> Option<Hops> {
        let t = self.tape();
        matches!(t.mode, Mode::Steer).then_some(t.bounds.hops)
    }

    /// The most candidates an order choice considers.
    pub fn order_width(&self) -> usize {
        self.tape().bounds.order_width as usize
    }

    /// Steered: does a kill fire as process `pid` reaches kill point `point`? Within the
    /// budget only; never when not steered.
    pub fn kill(&self, pid: u32, point: KillPoint) -> Option<Option<u64>> {
        let mut t = self.tape();
        if !matches!(t.mode, Mode::Steer) || t.kills_left == 0 || t.kill_mask & point.bit() == 0 {
            return None;
        }
        if self.decide(&mut t, Kind::Kill, 2, Some(pid), [0; 8]) == 1 {
            t.kills_left -= 1;
            return Some(t.bounds.restart_after);
        }
        None
    }

    /// Whether a process this source kills restarts (its bounds' `restart_after`).
    pub fn restarts(&self) -> bool {
        self.tape().bounds.restart_after.is_some()
    }

    /// Steered: which of `n` processes a kill hits; `None` when not steered.
    pub fn target(&self, n: u32) -> Option<u32> {
        let mut t = self.tape();
        if !matches!(t.mode, Mode::Steer) {
            return None;
        }
        Some(if n > 1 {
            self.decide(&mut t, Kind::Target, n, None, [0; 8])
        } else {
            0
        })
    }

    /// Replayed: how many words the run drew, and how many the tape held (a run that drew
    /// more went on with its streams' own words past the end; either way it is not the
    /// recorded run). `None` when not replaying.
    pub fn replayed(&self) -> Option<(usize, usize)> {
        let t = self.tape();
        matches!(t.mode, Mode::Replay).then_some((t.at, t.words.len()))
    }

    /// The words recorded (or given) so far.
    pub fn words(&self) -> Vec<u64> {
        self.tape().words.clone()
    }

    /// How many more kills the explorer may fire in this run (none when not steered).
    pub fn kills_left(&self) -> u32 {
        let t = self.tape();
        if matches!(t.mode, Mode::Steer) { t.kills_left } else { 0 }
    }

    /// How many decisions were made so far.
    #[inline]
    pub fn made_len(&self) -> usize {
        self.0.made.load(Ordering::Relaxed)
    }

    /// Where the run stands in its decisions, to resume from in a later run that makes the same
    /// first ones ([`Source::resume`]): an explorer's saved world keeps it.
    pub fn mark(&self) -> Mark {
        let t = self.tape();
        Mark {
            made: t.made.clone(),
            kills_left: t.kills_left,
        }
    }

    /// Does this run's prefix begin with the decisions `m` made (so that a world saved at `m`
    /// is where this run will be once it made them)?
    pub fn agrees(&self, m: &Mark) -> bool {
        let t = self.tape();
        m.made.len() <= t.prefix.len() && m.made.iter().zip(&t.prefix).all(|(c, &i)| c.index == i)
    }

    /// Go on from `m` ([`Source::mark`]), as if this run had made its decisions (which it
    /// [`agrees`](Source::agrees) with): a world saved there is being resumed.
    pub fn resume(&self, m: &Mark) {
        let mut t = self.tape();
        debug_assert!(t.made.is_empty(), "a run resumes before its first decision");
        t.made.clear();
        t.made.extend_from_slice(&m.made);
        t.kills_left = m.kills_left;
        self.0.made.store(t.made.len(), Ordering::Relaxed);
    }

    /// The decisions made so far.
    pub fn made(&self) -> Vec<Choice> {
        self.tape().made.clone()
    }

    /// Was a decision past the prefix made since the last call, in a run that prunes? (Clears
    /// it.) The world then asks [`Source::visit`] about its state.
    #[inline]
    pub fn take_fresh(&self) -> bool {
        self.0.fresh.swap(false, Ordering::Relaxed) && self.tape().seen.is_some()
    }

    /// Will the world ask [`Source::visit`] about its state after this event (a decision past
    /// the prefix was made, in a run that prunes)? Unlike [`Source::take_fresh`], clears
    /// nothing.
    #[inline]
    pub fn would_visit(&self) -> bool {
        self.0.fresh.load(Ordering::Relaxed) && self.0.prunes.load(Ordering::Relaxed)
    }

    /// A state the run reached past its prefix ([`crate::form`]): `true` when no seen state
    /// covers it (it is now seen); `false` when one does, whose continuations were or will be
    /// explored there: this run stops. `limit`: the scenario's duration (virtual ns).
    pub fn visit(&self, key: Key, limit: u64) -> bool {
        let mut t = self.tape();
        let made = t.made.len();
        #[cfg(test)]
        crate::form::plant::saw(&key);
        #[cfg(test)]
        if let Some(a) = &mut t.audit {
            a.push((key, made));
            return true;
        }
        if made < t.visit_from {
            return true;
        }
        let Some(seen) = t.seen.as_ref() else {
            return true;
        };
        let now = key.now;
        match seen.find_or_insert(key, limit) {
            Err(stop) => {
                t.stop = Some(stop);
                false
            }
            Ok(at) => {
                t.opened.push(Opened { at, depth: made, now });
                true
            }
        }
    }

    /// The world ended the run at `end` (virtual ns); `cut`: by the scenario's duration, with
    /// work left.
    pub fn ended(&self, end: u64, cut: bool) {
        self.tape().ended = Some((end, cut));
    }

    /// What the run reached ([`Reach`]), taken.
    pub fn take_reach(&self) -> Reach {
        let mut t = self.tape();
        Reach {
            opened: std::mem::take(&mut t.opened),
            end: match (t.stop.take(), t.ended.take()) {
                (Some(stop), _) => stop,
                (None, Some(e)) => Some(e),
                (None, None) => None,
            },
        }
    }

    /// The states an auditing run visited ([`Tape::auditing`]), each with the decisions made by
    /// then.
    #[cfg(test)]
    pub(crate) fn take_audit(&self) -> Vec<(Key, usize)> {
        self.tape().audit.take().unwrap_or_default()
    }

    /// Must the run stop now (the explorer's limits: [`Tape::halting`])? The simulator asks
    /// now and then; once `true`, always `true`.
    pub fn halt(&self) -> bool {
        let mut t = self.tape();
        if !t.halted {
            let bytes = t.seen.as_ref().map_or(0, Seen::bytes);
            if let Some(h) = t.halt.as_mut() {
                t.halted = h(bytes);
            }
        }
        t.halted
    }

    /// Did the explorer's limits stop the run part way ([`Source::halt`])?
    pub fn halted(&self) -> bool {
        self.tape().halted
    }

    /// The states seen, back from a run that pruned.
    pub fn take_seen(&self) -> Option<Seen> {
        self.tape().seen.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probit_is_the_normal_quantile() {
        assert!((probit(0.5)).abs() < 1e-12);
        assert!((probit(0.99) - 2.326_347_874).abs() < 1e-6);
        assert!((probit(0.01) + 2.326_347_874).abs() < 1e-6);
    }

    #[test]
    fn a_prefix_is_taken_first_then_the_strategy() {
        struct Last;
        impl Strategy for Last {
            fn choose(&mut self, d: &Decision) -> u32 {
                d.of - 1
            }
        }
        let s = Source::new(Tape::steer(Bounds::default(), 0, vec![1], Box::new(Last)));
        assert_eq!(s.value(Some(0)).map(|v| v.0), Some(0.5));
        assert_eq!(s.value(Some(0)).map(|v| v.0), Some(0.99));
        assert_eq!(s.order(&[3, 1, 2]), Some(2));
        assert_eq!(s.order(&[3]), None, "one candidate is no choice");
        assert_eq!(s.kill(0, KillPoint::MidReservation), None, "no budget");
        let made = s.made();
        assert_eq!(made.len(), 3);
        assert_eq!((made[0].index, made[1].index, made[2].index), (1, 2, 2));
    }

    #[test]
    fn words_are_recorded_and_replayed() {
        let r = Source::new(Tape::record());
        let mut n = 7u64;
        let drawn: Vec<u64> = (0..3)
            .map(|_| {
                r.word(|| {
                    n += 1;
                    n
                })
            })
            .collect();
        assert_eq!(r.words(), drawn);
        let p = Source::new(Tape::replay(drawn.clone()));
        let again: Vec<u64> = (0..3).map(|_| p.word(|| unreachable!())).collect();
        assert_eq!(again, [8, 9, 10]);
        assert_eq!(p.replayed(), Some((3, 3)));
        // past the end: the stream's own word, counted
        assert_eq!(p.word(|| 42), 42);
        assert_eq!(p.replayed(), Some((4, 3)));
    }

    /// A kill point's name is its serde name, its bit its place in `ALL`, and a bad name is
    /// refused naming it and every point.
    #[test]
    fn a_kill_point_has_one_name_and_one_bit() {
        for (i, &p) in KillPoint::ALL.iter().enumerate() {
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.name()));
            assert_eq!(KillPoint::parse(p.name()), Ok(p));
            assert_eq!(p.bit(), 1 << i);
        }
        assert_eq!(
            KillPoint::mask(&[KillPoint::MidFetch, KillPoint::MidReservation]),
            0b10001
        );
        assert_eq!(
            KillPoint::parse("nowhere").unwrap_err(),
            "no kill point `nowhere` (one of mid_reservation, holding_lock, in_transaction, \
             sleeping_to_slot, mid_fetch)"
        );
        assert_eq!(KillPoint::MidFetch.reached_by("b", &[KillPoint::MidFetch]), Ok(()));
        assert_eq!(
            KillPoint::MidFetch.reached_by("b", &[]).unwrap_err().to_string(),
            "backend `b` never reaches `mid_fetch` (it reaches: none)"
        );
    }

    #[test]
    fn a_kill_spends_the_budget() {
        let b = Bounds {
            kills: 1,
            ..Bounds::default()
        };
        struct Yes;
        impl Strategy for Yes {
            fn choose(&mut self, _: &Decision) -> u32 {
                1
            }
        }
        let s = Source::new(Tape::steer(b, KillPoint::HoldingLock.bit(), vec![], Box::new(Yes)));
        assert_eq!(s.kill(0, KillPoint::MidReservation), None, "not the backend's point");
        assert_eq!(s.kill(0, KillPoint::HoldingLock), Some(Some(1_000_000_000)));
        assert_eq!(s.kill(1, KillPoint::HoldingLock), None, "the budget is spent");
        assert_eq!(s.made().len(), 1);
    }
}
