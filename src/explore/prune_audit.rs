//! The pruning's soundness, audited four ways, each against a search that prunes nothing:
//!
//! - **meetings** ([`audit`]): every schedule of a tree runs to its end while recording each
//!   state a pruning run would have compared; wherever a later schedule reached a state an
//!   earlier one's covers, by a different history, and then made the same decisions, the
//!   world must have done the same (fetches, arrivals, grants, denials, crashes, relative to
//!   each state's instant) and the checks it broke must be among those the earlier one broke
//!   (the same, when the states are equal). A form that leaves out what the future depends on
//!   fails on the first such pair. It re-implements the covering, so it audits forms only;
//! - **cover** ([`cover`]): the explorer's own pruned search (its seen-state table, its
//!   closing of explored states, its walk) must visit states that cover every state the
//!   unpruned walk (a walk of its own) visits;
//! - **goals** ([`audit_goals`]): for the rarest patterns of fetches (alone, or with a check
//!   broken) the unpruned walk reaches, the pruned search looking for that pattern alone must
//!   reach it;
//! - **existence** ([`differential`]): with every check and each alone, a violation found by
//!   one search is found by the other (little power on its own: designs break everywhere or
//!   nowhere).
//!
//! Each planted pruning bug ([`crate::form::plant`]) is named in a test that watches an audit
//! fail on it, but `redis_gcra`'s TAT left out alone: it is implied by the rest of the form (an
//! ignored test measures it, and says why), and caught once its mirrors are left out too.
use super::*;
use crate::form::Key;
use std::collections::BTreeMap;

/// A state's exact part and the decisions a schedule made after reaching it.
type Meeting = (u64, Vec<u32>);

/// An earlier schedule's state there: its key, the decisions before it, whether its run was
/// cut by the duration, and the checks it broke.
struct Before {
    key: Key,
    before: Vec<u32>,
    cut: bool,
    broke: Vec<String>,
    // what the world did from there to the run's end, relative to the state's instant
    after: u64,
}

/// Pairs compared: at one instant, and at two.
#[derive(Debug, Default, Clone, Copy)]
struct Compared {
    same_instant: u64,
    shifted: u64,
    covered: u64,
}

/// Every schedule of `text` x `backend` within `opts`: the pairs of states compared (see the
/// module's docs) and how many schedules broke a check, or the first pair that breaks the
/// pruning's promise.
fn audit(text: &str, backend: &str, opts: &Options) -> Result<(Compared, u64), String> {
    let sc = crate::registry::parse("audit.toml", text).expect("a valid scenario");
    let spec = crate::registry::spec(backend).expect("a backend");
    let sc = Scenario {
        pacer: crate::scenario::PacerCfg {
            backend: backend.into(),
            ..sc.pacer.clone()
        },
        ..sc
    };
    let (sc, _) = prepare("audit.toml", text, &sc, opts).expect("prepares");
    let (mask, points) = kill_mask(spec, &sc, &[]).expect("kill points");
    let bounds = Bounds {
        kill_points: points,
        ..opts.bounds.clone()
    };
    let mut ex = Explorer::new(spec, bounds, mask, false, Vec::new());
    // (the goal checker logs what the world does; its goal is never met)
    ex.more = vec![GOAL_CHECKER];
    GOAL.with(|g| *g.borrow_mut() = Some(Pattern::Nothing));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            GOAL.with(|g| *g.borrow_mut() = None);
        }
    }
    let _reset = Reset;
    let mut seen: BTreeMap<Meeting, Vec<Before>> = BTreeMap::new();
    let mut compared = Compared::default();
    let mut failing = 0u64;
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        ex.audit = Some(Vec::new());
        let (s, (events, marks)) = plant::logging(|| {
            ex.run(&sc, p, Box::new(crate::choice::Walk), false, None)
                .expect("runs")
        });
        // (a witness's replay logs after the run's end: left out)
        let end = events.iter().position(|e| e.0 == 8).map_or(events.len(), |i| i + 1);
        let events = &events[..end];
        let cut = ex.reach.end.is_none_or(|(_, cut)| cut);
        let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
        let mut broke: Vec<String> = s.violation.iter().chain(&s.also).map(|v| v.check.clone()).collect();
        broke.sort();
        failing += u64::from(!broke.is_empty());
        for ((key, k), mark) in ex.audit.take().unwrap_or_default().into_iter().zip(marks) {
            // (processes named in the order they first act: a form may merge states that differ
            // only by which of two alike processes is which, whose continuations then differ
            // only so)
            let mut names: Vec<u32> = Vec::new();
            let after = crate::form::fingerprint(
                &events[mark.min(end)..]
                    .iter()
                    .map(|&(kind, pid, t)| {
                        let name = match names.iter().position(|&p| p == pid) {
                            _ if kind == 8 => u32::MAX,
                            Some(i) => i as u32,
                            None => {
                                names.push(pid);
                                names.len() as u32 - 1
                            }
                        };
                        (kind, name, t.wrapping_sub(key.now))
                    })
                    .collect::<Vec<_>>(),
            );
            let list = seen.entry((key.exact, made[k..].to_vec())).or_default();
            for b in list.iter() {
                if b.before == made[..k] {
                    continue;
                }
                let covers =
                    b.key.slack.len() == key.slack.len() && b.key.slack.iter().zip(&key.slack).all(|(a, n)| a >= n);
                let meets = b.key.now == key.now || (b.key.shifts && key.shifts && !b.cut && !cut);
                if !(covers && meets) {
                    continue;
                }
                if b.key.now == key.now {
                    compared.same_instant += 1;
                } else {
                    compared.shifted += 1;
                }
                let equal = b.key
                    == Key {
                        now: b.key.now,
                        ..key.clone()
                    };
                compared.covered += u64::from(!equal);
                let kept = if equal {
                    b.broke == broke
                } else {
                    broke.iter().all(|c| b.broke.contains(c))
                };
                if b.after != after {
                    return Err(format!(
                        "{backend}: a state after decisions {:?} (at {} ns) and one after {:?} (at {} ns) share a form, \
                         but the same decisions then ({:?}) made the world do otherwise (fetches, arrivals, grants, \
                         denials, crashes, relative to each state's instant, processes named in the order they act)",
                        b.before,
                        b.key.now,
                        &made[..k],
                        key.now,
                        &made[k..]
                    ));
                }
                if !kept {
                    return Err(format!(
                        "{backend}: a state after decisions {:?} (at {} ns, slack {:?}) covers one after {:?} (at {} ns, slack {:?}); then {:?}: broke {:?} against {broke:?}",
                        b.before,
                        b.key.now,
                        b.key.slack,
                        &made[..k],
                        key.now,
                        key.slack,
                        &made[k..],
                        b.broke
                    ));
                }
            }
            list.push(Before {
                key,
                before: made[..k].to_vec(),
                cut,
                broke: broke.clone(),
                after,
            });
        }
        prefix = next_walk(&s.made, 0);
    }
    Ok((compared, failing))
}

fn opts(processes: u32, requests: u64, vary: Vec<Site>, kills: u32) -> Options {
    Options {
        processes: Some(processes),
        requests: Some(requests),
        vary,
        bounds: Bounds {
            kills,
            restart_after: None,
            ..Bounds::default()
        },
        prune: false,
        shrink: false,
        // (the symmetry audits turn it on: `symmetric`)
        symmetry: false,
        ..Options::default()
    }
}

/// The trees with symmetry reduction on: their pruned searches merge states that differ only
/// in which process is which, and their unpruned walks form states alike.
pub(crate) fn symmetric(trees: Vec<Tree>) -> Vec<Tree> {
    (trees.into_iter())
        .map(|mut t| {
            t.opts.symmetry = true;
            t.name = format!("{} (symmetry)", t.name);
            t
        })
        .collect()
}

fn restarting(mut o: Options, after_ns: u64) -> Options {
    o.bounds.restart_after = Some(after_ns);
    o
}

#[test]
fn states_merged_by_pruning_go_on_to_the_same_verdicts() {
    // a wait bound that some schedules keep and some break (a denied request's retries)
    let racers =
        include_str!("../../sims/explore-three-racers.toml").replace("burst = 3", "burst = 3\nwait_bound = \"200ms\"");
    let store = || vec![Site::StoreLatency];
    // trees whose states do meet: a denied GCRA request's retry, a kill at any point
    let cases = [
        ("row", opts(2, 2, store(), 1)),
        ("redis_gcra", opts(3, 1, store(), 1)),
        ("redis_gcra", opts(2, 2, store(), 0)),
        // a killed process restarting (what a dead process's fingerprint keeps: what a
        // restart carries over) while the other works
        ("row", restarting(opts(2, 2, store(), 1), 50_000_000)),
        // a defective design that a kill breaks on some schedules only (a dead holder's claim
        // is never cleared: self_heal and liveness fail when the kill hits a holder), so states
        // are merged where those verdicts differ (its states meet at one instant only; parts
        // of self_heal's form left out on purpose were not caught here: the form's own test,
        // tests/suite/checkers.rs, catches them)
        ("claim_row", opts(2, 1, store(), 1)),
    ];
    let (mut merged, mut mixed) = (0, 0);
    for (backend, o) in cases {
        // (a defective design joins the designs compared; one whose survivors poll a claim
        // that is never cleared polls until the duration ends: a short one keeps the tree small)
        let listed = format!("\"{backend}\"");
        let text = if racers.contains(&listed) {
            racers.clone()
        } else {
            racers
                .replace("compare = [", &format!("compare = [{listed}, "))
                .replace("duration = \"10s\"", "duration = \"400ms\"")
        };
        let (compared, broke) = audit(&text, backend, &o).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{backend} {} x {:?}, {} kill: {compared:?} merged states compared; {broke} schedules broke a check",
            o.processes.unwrap(),
            o.requests,
            o.bounds.kills
        );
        let all = compared.same_instant + compared.shifted;
        assert!(all > 0, "{backend}: no state was reached twice: nothing audited");
        merged += all;
        mixed += u64::from(broke > 0);
    }
    assert!(
        merged > 0 && mixed > 0,
        "a tree where some schedules break and some do not"
    );
}

// ---------------------------------------------------------------------------------------------
// The differential audit: the explorer's own pruned search against its unpruned one.

use crate::form::plant::{self, Plant};

/// One small tree of the differential audit: a scenario's text, a backend, the bounds.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    /// What it is, for a failure's message.
    pub name: String,
    text: String,
    backend: &'static str,
    opts: Options,
}

/// What the differential audit compared: trees, searches, and how many found a violation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Differential {
    /// Trees compared.
    pub trees: u64,
    /// Searches compared (each tree: every check, then each check alone), pairs of two.
    pub searches: u64,
    /// Of those, the ones where both found a violation.
    pub violated: u64,
    /// Schedules the unpruned searches ran, and the pruned ones.
    pub full_schedules: u64,
    /// Schedules the pruned searches ran.
    pub pruned_schedules: u64,
}

/// The trees: generated scenarios (the three racers as they are; with a wait bound that some
/// schedules keep and some break; with a burst of one, which the shared designs' first grants
/// at one instant can break) x `backends` (every registered one when empty: the defective
/// designs with them) x kills off and on, at `processes` x `requests`, store latency varied,
/// every run short (400 ms) so that some runs are cut by the duration.
pub(crate) fn trees(backends: &[&'static str], processes: u32, requests: u64, kills: &[u32]) -> Vec<Tree> {
    let base =
        include_str!("../../sims/explore-three-racers.toml").replace("duration = \"10s\"", "duration = \"400ms\"");
    let store = || vec![Site::StoreLatency];
    let variants = [
        ("racers", base.clone(), store()),
        (
            "racers+wait_bound",
            base.replace("burst = 3", "burst = 3\nwait_bound = \"150ms\""),
            store(),
        ),
        ("racers+burst1", base.replace("burst = 3", "burst = 1"), store()),
        // runs the duration cuts: the last fetch of a schedule starts before it or not
        (
            "racers+short",
            base.replace("duration = \"400ms\"", "duration = \"302ms\""),
            store(),
        ),
        // the destination's latency varied too: an arrival's instant is not its grant's (the
        // ceiling's memory of arrivals is not implied by the store's pace value)
        (
            "racers+destination",
            format!("{base}\n[destination]\nlatency = {{ dist = \"lognormal\", median = \"2ms\", sigma = 0.5 }}\n"),
            vec![Site::StoreLatency, Site::Destination],
        ),
    ];
    let all: Vec<&'static str> = if backends.is_empty() {
        crate::registry::all().map(|s| s.name).collect()
    } else {
        backends.to_vec()
    };
    let mut out = Vec::new();
    for (v, text, vary) in &variants {
        for &backend in &all {
            for &k in kills {
                let listed = format!("\"{backend}\"");
                let text = if text.contains(&listed) {
                    text.clone()
                } else {
                    text.replace("compare = [", &format!("compare = [{listed}, "))
                };
                out.push(Tree {
                    name: format!("{v} x {backend} at {processes} x {requests}, {k} kill"),
                    text,
                    backend,
                    opts: opts(processes, requests, vary.clone(), k),
                });
            }
        }
    }
    out
}

/// Search `tree` pruned and unpruned, with every check and with each check alone (so a
/// violation of a rare check is not hidden behind a common one's): each pair must agree on
/// whether a violation exists. `Err` names the first disagreement.
pub(crate) fn differential(tree: &Tree, d: &mut Differential) -> Result<(), String> {
    let spec = crate::registry::spec(tree.backend).ok_or_else(|| format!("{}: no backend", tree.name))?;
    let sc = crate::registry::parse("audit.toml", &tree.text).map_err(|e| format!("{}: {e}", tree.name))?;
    let sc = Scenario {
        pacer: crate::scenario::PacerCfg {
            backend: tree.backend.into(),
            ..sc.pacer.clone()
        },
        ..sc
    };
    let (sc, text) = match prepare("audit.toml", &tree.text, &sc, &tree.opts) {
        Ok(p) => p,
        // (a backend that cannot run this scenario: not a tree)
        Err(_) => return Ok(()),
    };
    d.trees += 1;
    let sets = std::iter::once(Vec::new()).chain(crate::check::ORDER.iter().map(|c| vec![c.to_string()]));
    for checks in sets {
        let search = |prune: bool| {
            let o = Options {
                prune,
                checks: checks.clone(),
                shrink: false,
                ..tree.opts.clone()
            };
            explore(spec, &sc, &text, &o, &mut |_| {})
        };
        let (full, pruned) = match (search(false), search(true)) {
            (Ok(f), Ok(p)) => (f, p),
            // (a check this backend's suite does not give: nothing to compare)
            (Err(_), Err(_)) => continue,
            (f, p) => return Err(format!("{}: {checks:?}: {f:?} against {p:?}", tree.name)),
        };
        d.searches += 1;
        d.full_schedules += full.schedules;
        d.pruned_schedules += pruned.schedules;
        // (a search that found a violation stops there; one that did not must have finished)
        for r in [&full, &pruned] {
            if r.counterexample.is_none() && !r.complete {
                return Err(format!(
                    "{}: {checks:?}: a search did not finish: {:?}",
                    tree.name, r.stopped
                ));
            }
        }
        let (f, p) = (full.counterexample.as_ref(), pruned.counterexample.as_ref());
        if f.is_some() != p.is_some() {
            let v = |c: Option<&Counterexample>| {
                c.map_or("no violation".to_string(), |c| {
                    format!("{} at schedule {}", c.violation.check, c.found_at)
                })
            };
            return Err(format!(
                "{}: checks {checks:?}: unpruned: {} in {} schedules; pruned: {} in {} schedules",
                tree.name,
                v(f),
                full.schedules,
                v(p),
                pruned.schedules
            ));
        }
        d.violated += u64::from(f.is_some());
    }
    Ok(())
}

/// An audit `one` of each tree of `trees`, adding to what it compared: the first failure, or
/// the sum.
fn over<D: Default>(trees: &[Tree], one: fn(&Tree, &mut D) -> Result<(), String>) -> Result<D, String> {
    let mut d = D::default();
    for t in trees {
        one(t, &mut d)?;
    }
    Ok(d)
}

/// The differential audit over `trees`: the first disagreement, or what was compared.
pub(crate) fn audit_trees(trees: &[Tree]) -> Result<Differential, String> {
    over(trees, differential)
}

/// The fast slice (`just test`, CI): two processes, one request each, kills off and on.
fn slice() -> Vec<Tree> {
    trees(&[], 2, 1, &[0, 1])
}

/// (Ignored: whether a violation exists agrees under every planted bug on these trees, where
/// a design breaks on every schedule or on none: the goal, cover and meetings audits below are
/// the ones with power. Kept as one more view in `just prune-audit`.)
#[test]
#[ignore = "no power on its own: just prune-audit"]
fn pruned_search_finds_a_violation_exactly_when_the_unpruned_one_does() {
    let d = audit_trees(&slice()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees > 20, "{d:?}: too few trees");
    assert!(
        d.pruned_schedules < d.full_schedules,
        "{d:?}: the pruning pruned nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// Goals: rare schedules the pruned search must still reach.
//
// Whether a violation exists says little on trees where every schedule breaks a check or none
// does (a defective design breaks on its first schedule, a correct one on none): an unsound
// merge there changes nothing either search reports. A goal makes a violation as rare as we
// like: a pattern of the fetches (process `pid`'s fetch `k` started `gap` after its previous
// one, or it made exactly `k` fetches), alone or with a check broken. The unpruned search (a
// walk of its own, below) lists every goal each schedule reaches; for the rarest, the pruned
// search, looking for that goal alone, must reach it too. A sound pruning merges two states
// only when their continuations reach the same goals (the goal's memory is in its checker's
// form; a check's failure is monotone in its slack, so a goal with a check broken stays
// reachable from the covering state), so any goal the pruning misses is a wrong merge (or a
// walk that skipped a way).

use crate::check::{CheckerSpec, Status, Verdict};
use crate::trace::{Event, Header, Sink};
use std::cell::RefCell;

/// What a schedule's fetches did, as a goal reads them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Pattern {
    /// Process `pid`'s first fetch started.
    First { pid: u32 },
    /// Process `pid`'s fetch `k` (from 0) started `gap` ns after its fetch `k - 1`.
    After { pid: u32, k: u32, gap: u64 },
    /// Process `pid` started exactly `k` fetches in the run.
    Made { pid: u32, k: u32 },
    /// The run's fetches, every one: which process started each, and how long after the one
    /// before (the first: 0), and no more.
    Fetches(std::sync::Arc<Vec<(u32, u64)>>),
    /// Never met (the cover audit's search, which must not stop).
    Nothing,
    // What no renaming of the processes changes (the symmetry audit's goals):
    /// Some process's fetch `k` (from 1) started `gap` ns after its fetch `k - 1`.
    AnyAfter { k: u32, gap: u64 },
    /// The processes' fetch counts, ascending.
    Counts(std::sync::Arc<Vec<u32>>),
    /// The run's fetches, each by the place of its process in the order of first fetches, and
    /// how long after the one before.
    ByFirst(std::sync::Arc<Vec<(u32, u64)>>),
}

impl Pattern {
    /// Whether no renaming of the processes changes it.
    fn symmetric(&self) -> bool {
        matches!(
            self,
            Pattern::AnyAfter { .. } | Pattern::Counts(_) | Pattern::ByFirst(_) | Pattern::Nothing
        )
    }
}

/// A goal: a pattern, with a check broken too (or not).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Goal {
    check: Option<&'static str>,
    pattern: Pattern,
}

thread_local! {
    // the goal the `goal` checker looks for (`None`: it records every pattern instead)
    static GOAL: RefCell<Option<Pattern>> = const { RefCell::new(None) };
    // the patterns the last run reached (recording)
    static REACHED: RefCell<Vec<Pattern>> = const { RefCell::new(Vec::new()) };
}

/// The `goal` checker: with a goal set ([`GOAL`]), breaks when its pattern happens; without,
/// records every pattern the run reaches ([`REACHED`]) and passes.
#[derive(Debug)]
struct GoalChecker {
    goal: Option<Pattern>,
    // each process's fetches started, and when its last one started
    fetches: BTreeMap<u32, (u32, u64)>,
    // the run's fetches (recording), or how many the goal's list matched (`None`: it cannot
    // match any more), and when the last started
    all: Vec<(u32, u64)>,
    matched: Option<usize>,
    last: u64,
    reached: Vec<Pattern>,
    met: bool,
    // the processes, and in the order of their first fetches
    processes: u32,
    order: Vec<u32>,
}

impl GoalChecker {
    fn make(h: &Header) -> Option<Box<dyn crate::check::Checker + Send>> {
        Some(Box::new(GoalChecker {
            processes: h.processes,
            order: Vec::new(),
            goal: GOAL.with(|g| g.borrow().clone()),
            fetches: BTreeMap::new(),
            all: Vec::new(),
            matched: Some(0),
            last: 0,
            reached: Vec::new(),
            met: false,
        }))
    }

    fn reach(&mut self, p: Pattern) {
        match &self.goal {
            Some(g) => self.met |= *g == p,
            None => self.reached.push(p),
        }
    }
}

impl Sink for GoalChecker {
    fn event(&mut self, ev: &Event) {
        // (the meetings audit's log: what the world did, each kind with its process and instant)
        let logged = match *ev {
            Event::FetchStart { t, pid, .. } => Some((1, pid, t)),
            Event::Arrival { t, pid, .. } => Some((2, pid, t)),
            Event::Crash { t, pid, .. } => Some((3, pid, t)),
            Event::Restart { t, pid } => Some((4, pid, t)),
            Event::Grant { t, pid, .. } => Some((5, pid, t)),
            Event::Deny { t, pid, .. } => Some((6, pid, t)),
            Event::FetchEnd { t, pid, .. } => Some((7, pid, t)),
            Event::End { t } => Some((8, 0, t)),
            _ => None,
        };
        if let Some((k, pid, t)) = logged {
            plant::log_event(k, pid, t);
        }
        if let Event::FetchStart { t, pid, .. } = *ev {
            let gap = if self.all.is_empty() && self.matched == Some(0) {
                0
            } else {
                t - self.last
            };
            self.last = t;
            let place = match self.order.iter().position(|&p| p == pid) {
                Some(i) => i as u32,
                None => {
                    self.order.push(pid);
                    self.order.len() as u32 - 1
                }
            };
            match &self.goal {
                None => self.all.push((pid, gap)),
                Some(Pattern::Fetches(list)) => {
                    self.matched = self
                        .matched
                        .filter(|&i| list.get(i) == Some(&(pid, gap)))
                        .map(|i| i + 1);
                }
                Some(Pattern::ByFirst(list)) => {
                    self.matched = self
                        .matched
                        .filter(|&i| list.get(i) == Some(&(place, gap)))
                        .map(|i| i + 1);
                }
                Some(_) => {}
            }
            let e = self.fetches.entry(pid).or_insert((0, t));
            let p = match e.0 {
                0 => Pattern::First { pid },
                k => Pattern::After { pid, k, gap: t - e.1 },
            };
            let any = (e.0 > 0).then(|| Pattern::AnyAfter { k: e.0, gap: t - e.1 });
            *e = (e.0 + 1, t);
            self.reach(p);
            if let Some(any) = any {
                self.reach(any);
            }
        }
    }

    /// The goal's memory: met; or the goal's process's fetches so far and when its last
    /// started (relative to now), as far as the goal can still be met by them.
    fn form(&self, f: &mut crate::form::Form) -> bool {
        // (every field named: one added later is placed here, or the build fails)
        let GoalChecker {
            goal,
            fetches,
            all: _, // recorded only with no goal set (no form then)
            matched,
            last,
            reached: _, // likewise
            met,
            processes: _, // the counts' length, the same for every run
            order,
        } = self;
        let Some(goal) = goal.clone() else {
            return false;
        };
        if let Pattern::Nothing = goal {
            f.word(0);
            return true;
        }
        if let Pattern::ByFirst(_) = goal {
            // as below, and each process's place in the order of first fetches (by its name)
            f.per_pid(order.iter().enumerate().map(|(place, &pid)| (pid, place)));
        }
        if let Pattern::Counts(list) = &goal {
            // each process's fetches so far (by its name), up to one more than any count wanted
            let most = list.iter().max().copied().unwrap_or(0) + 1;
            f.per_pid(fetches.iter().map(|(&pid, &(n, _))| (pid, n.min(most))));
            return true;
        }
        if let Pattern::AnyAfter { k, .. } = goal {
            if *met {
                f.word(1);
                return true;
            }
            // each process's fetches so far (past `k`, alike), and when its last started if
            // its next is the `k`th
            let now = f.now();
            f.per_pid(
                (fetches.iter())
                    .map(|(&pid, &(n, last))| (pid, (n.min(k + 1), if n == k { last.wrapping_sub(now) } else { 0 }))),
            );
            return true;
        }
        if let Pattern::Fetches(_) | Pattern::ByFirst(_) = goal {
            // how many matched (any fetch more: never met), and when the last started
            match *matched {
                None => f.word(2),
                Some(0) => f.word(3),
                Some(i) => {
                    f.word(3 + i as u64);
                    f.instant(*last);
                }
            }
            return true;
        }
        if *met {
            f.word(1);
            return true;
        }
        let (pid, want) = match goal {
            Pattern::Fetches(_)
            | Pattern::Nothing
            | Pattern::ByFirst(_)
            | Pattern::Counts(_)
            | Pattern::AnyAfter { .. } => unreachable!(),
            Pattern::First { pid } => (pid, 0),
            Pattern::After { pid, k, .. } | Pattern::Made { pid, k } => (pid, k),
        };
        let (n, last) = fetches.get(&pid).copied().unwrap_or((0, 0));
        match goal {
            // (past its fetch `k`: the goal cannot be met any more)
            _ if n > want + u32::from(matches!(goal, Pattern::Made { .. })) => f.word(2),
            Pattern::After { .. } if n == want && n > 0 => {
                f.word(3 + u64::from(n));
                f.instant(last);
            }
            _ => f.word(3 + u64::from(n)),
        }
        true
    }
}

impl crate::check::Checker for GoalChecker {
    /// A goal no renaming of the processes changes is formed by the processes' names.
    fn relabels(&self) -> bool {
        self.goal.as_ref().is_some_and(Pattern::symmetric)
    }

    fn verdicts(&mut self) -> Vec<Verdict> {
        for (&pid, &(k, _)) in &self.fetches.clone() {
            self.reach(Pattern::Made { pid, k });
        }
        let mut counts: Vec<u32> = (0..self.processes)
            .map(|pid| self.fetches.get(&pid).map_or(0, |&(n, _)| n))
            .collect();
        counts.sort_unstable();
        match &self.goal {
            None => {
                let all = std::mem::take(&mut self.all);
                let by_first = (all.iter())
                    .map(|&(pid, gap)| (self.order.iter().position(|&p| p == pid).unwrap_or(0) as u32, gap))
                    .collect();
                self.reach(Pattern::Fetches(std::sync::Arc::new(all)));
                self.reach(Pattern::ByFirst(std::sync::Arc::new(by_first)));
                self.reach(Pattern::Counts(std::sync::Arc::new(counts)));
            }
            Some(Pattern::Fetches(list) | Pattern::ByFirst(list)) => self.met = self.matched == Some(list.len()),
            Some(Pattern::Counts(list)) => self.met = **list == counts,
            Some(_) => {}
        }
        if self.goal.is_none() {
            let reached = std::mem::take(&mut self.reached);
            REACHED.with(|r| *r.borrow_mut() = reached);
        }
        vec![Verdict {
            name: "goal",
            status: Status::of(!self.met),
            detail: format!("{:?}: {}", self.goal, if self.met { "met" } else { "not met" }),
        }]
    }
}

const GOAL_CHECKER: CheckerSpec = CheckerSpec {
    name: "goal",
    summary: "the prune audit's goal: a pattern of the fetches",
    new: GoalChecker::make,
};

/// A tree's backend, its scenario as prepared (and its text), and an explorer of it that
/// prunes nothing, with the goal checker beside the suite and `checks` counted; `None` when the
/// backend cannot run the scenario.
type Ready = (&'static BackendSpec, Scenario, String, Explorer);

fn ready(tree: &Tree, checks: Vec<String>) -> Result<Option<Ready>, String> {
    let spec = crate::registry::spec(tree.backend).ok_or_else(|| format!("{}: no backend", tree.name))?;
    let sc = crate::registry::parse("audit.toml", &tree.text).map_err(|e| format!("{}: {e}", tree.name))?;
    let sc = Scenario {
        pacer: crate::scenario::PacerCfg {
            backend: tree.backend.into(),
            ..sc.pacer.clone()
        },
        ..sc
    };
    let Ok((sc, text)) = prepare("audit.toml", &tree.text, &sc, &tree.opts) else {
        return Ok(None);
    };
    let (mask, points) = kill_mask(spec, &sc, &[]).map_err(|e| e.to_string())?;
    let bounds = Bounds {
        kill_points: points,
        ..tree.opts.bounds.clone()
    };
    let mut ex = Explorer::new(spec, bounds, mask, false, checks);
    ex.more = vec![GOAL_CHECKER];
    // (its walk forms states as the pruned search it is compared with does)
    let pruning = Options {
        prune: true,
        ..tree.opts.clone()
    };
    ex.symmetric(tree.opts.symmetry && symmetry(spec, &sc, &pruning).is_ok());
    Ok(Some((spec, sc, text, ex)))
}

/// The walk of the audit's own (not the explorer's: a walk that skips a way must not skip it
/// here too): after a run that took `made` (`choices`), the deepest choice with a way left
/// takes its next way; `None` when none has.
fn next_own(made: &[u32], choices: &[Choice]) -> Option<Vec<u32>> {
    choices.iter().rposition(|c| c.index + 1 < c.of).map(|j| {
        let mut p = made[..j].to_vec();
        p.push(made[j] + 1);
        p
    })
}

/// A tree walked without pruning, by a walk of its own (each way of the deepest choice that
/// has one left, then the first way of every later choice): the goals each schedule reached.
#[derive(Debug, Default)]
pub(crate) struct Reference {
    /// Schedules walked.
    schedules: u64,
    /// Each goal: the schedules that reached it, and the first one's decisions.
    goals: BTreeMap<Goal, (u64, Vec<u32>)>,
}

/// Walk `tree` without pruning (never under a plant: the reference is the truth).
pub(crate) fn reference(tree: &Tree) -> Result<Option<(Scenario, String, Reference)>, String> {
    let Some((_, sc, text, mut ex)) = ready(tree, Vec::new())? else {
        return Ok(None);
    };
    GOAL.with(|g| *g.borrow_mut() = None);
    let mut r = Reference::default();
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        REACHED.with(|x| x.borrow_mut().clear());
        let s = ex
            .run(&sc, p, Box::new(crate::choice::First), false, None)
            .map_err(|e| format!("{}: {e}", tree.name))?;
        r.schedules += 1;
        let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
        let mut reached: Vec<Pattern> = REACHED.with(|x| std::mem::take(&mut *x.borrow_mut()));
        reached.sort();
        reached.dedup();
        let broke: Vec<&'static str> = s
            .violation
            .iter()
            .chain(&s.also)
            .filter_map(|v| crate::check::ORDER.iter().copied().find(|c| *c == v.check))
            .collect();
        for pattern in &reached {
            let pattern = pattern.clone();
            for check in std::iter::once(None).chain(broke.iter().copied().map(Some)) {
                let e = r
                    .goals
                    .entry(Goal {
                        check,
                        pattern: pattern.clone(),
                    })
                    .or_insert((0, made.clone()));
                e.0 += 1;
            }
        }
        // (the walk of its own: the deepest choice with a way left takes its next way)
        prefix = next_own(&made, &s.made);
    }
    Ok(Some((sc, text, r)))
}

/// The `n` rarest goals of a reference (fewest schedules reach them; of those, the ones first
/// reached latest in the reference's walk first).
fn rarest(r: &Reference, n: usize, symmetric: bool) -> Vec<(&Goal, &(u64, Vec<u32>))> {
    // (a search that reduces by symmetry looks for goals no renaming of the processes
    // changes; one that does not, for goals that name processes, as it always has)
    let mut all: Vec<_> = (r.goals.iter())
        .filter(|(g, _)| g.pattern.symmetric() == symmetric)
        .collect();
    all.sort_by(|a, b| a.1.0.cmp(&b.1.0).then_with(|| b.1.1.cmp(&a.1.1)));
    all.truncate(n);
    all
}

/// What the goal audit compared.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Goals {
    /// Trees walked.
    pub trees: u64,
    /// Schedules the reference walks ran.
    pub reference_schedules: u64,
    /// Goals searched for with pruning (each reached by the reference).
    pub goals: u64,
    /// Goals reached by a single schedule of their tree.
    pub single: u64,
    /// Schedules the pruned searches ran, and those they stopped at a seen state.
    pub pruned_schedules: u64,
    /// Runs the pruned searches stopped at a seen state.
    pub pruned_runs: u64,
}

/// The reference walks of `trees` and the `per_tree` rarest goals of each, computed once
/// (outside any plant).
pub(crate) fn references(trees: &[Tree]) -> Result<Vec<(Tree, Scenario, String, Reference)>, String> {
    let mut out = Vec::new();
    for t in trees {
        if let Some((sc, text, r)) = reference(t)? {
            out.push((t.clone(), sc, text, r));
        }
    }
    Ok(out)
}

/// For each tree's `per_tree` rarest goals: the pruned search looking for that goal alone must
/// reach it. `Err` names the first goal it missed.
pub(crate) fn audit_goals(refs: &[(Tree, Scenario, String, Reference)], per_tree: usize) -> Result<Goals, String> {
    let mut d = Goals::default();
    for (tree, sc, text, r) in refs {
        let spec = crate::registry::spec(tree.backend).ok_or("no backend")?;
        d.trees += 1;
        d.reference_schedules += r.schedules;
        for (goal, (count, first)) in rarest(r, per_tree, tree.opts.symmetry) {
            let opts = Options {
                prune: true,
                checks: std::iter::once("goal").chain(goal.check).map(String::from).collect(),
                every_check: true,
                more_checkers: vec![GOAL_CHECKER],
                shrink: false,
                threads: 1,
                ..tree.opts.clone()
            };
            GOAL.with(|g| *g.borrow_mut() = Some(goal.pattern.clone()));
            let res = explore(spec, sc, text, &opts, &mut |_| {});
            GOAL.with(|g| *g.borrow_mut() = None);
            let rep = res.map_err(|e| format!("{}: {goal:?}: {e}", tree.name))?;
            d.goals += 1;
            d.single += u64::from(*count == 1);
            d.pruned_schedules += rep.schedules;
            d.pruned_runs += rep.pruned;
            if rep.counterexample.is_none() {
                return Err(format!(
                    "{}: goal {goal:?}, reached by {count} of the {} schedules of the unpruned walk \
                     (first by decisions {first:?}), was reached by none of the pruned search's {} \
                     schedules ({} runs stopped at seen states; {})",
                    tree.name,
                    r.schedules,
                    rep.schedules,
                    rep.pruned,
                    if rep.complete { "complete" } else { "incomplete" }
                ));
            }
        }
    }
    Ok(d)
}

/// The slice's references, walked once for every test of this module.
fn slice_refs() -> &'static Vec<(Tree, Scenario, String, Reference)> {
    static REFS: std::sync::OnceLock<Vec<(Tree, Scenario, String, Reference)>> = std::sync::OnceLock::new();
    REFS.get_or_init(|| references(&slice()).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn pruned_search_reaches_every_rare_goal_the_unpruned_one_does() {
    let refs = slice_refs();
    let d = audit_goals(refs, GOALS_PER_TREE).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees > 20, "{d:?}: too few trees");
    assert!(d.single > 0, "{d:?}: no goal was rare");
    assert!(d.pruned_runs > 0, "{d:?}: the pruning pruned nothing");
}

/// Goals searched for per tree.
const GOALS_PER_TREE: usize = 8;

// ---------------------------------------------------------------------------------------------
// The cover audit: every state the unpruned search reaches, the pruned one reaches or covers.
//
// A pruning run stops at a state a seen one covers (the same exact part, no less slack), whose
// continuations are (or will be) explored from there. If the two truly go on alike, every state
// a continuation of the stopped one would have reached is reached from the seen one, with no
// less slack (the slack a verdict is monotone in only grows along a run). So the states the
// pruned search visits must cover every state the unpruned walk visits. A form that leaves out
// what the future depends on (a store's value, a pending event's due time, a checker's memory)
// merges states whose continuations differ: the stopped one's continuations reach states the
// seen one's never do, and this audit names one. So does slack compared the wrong way (the
// stopped state's worse slack is carried into its continuations), a state closed as though no
// continuation reached the duration (one met earlier goes on past where the seen one's were
// cut), and a walk that skips a way.

/// What the cover audit compared.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Covered {
    /// Trees compared.
    pub trees: u64,
    /// Schedules the unpruned walks ran, and the distinct states they visited.
    pub reference_schedules: u64,
    /// Distinct states (exact part and slack) the unpruned walks visited.
    pub reference_states: u64,
    /// Schedules the pruned searches ran to their end.
    pub pruned_schedules: u64,
    /// Runs the pruned searches stopped at a seen state.
    pub pruned_runs: u64,
}

/// The cover audit of one tree (under whatever is planted on this thread: the unpruned walk
/// computes the forms the pruned search compares).
pub(crate) fn cover(tree: &Tree, d: &mut Covered) -> Result<(), String> {
    let Some((spec, sc, text, mut ex)) = ready(tree, vec!["goal".into()])? else {
        return Ok(());
    };
    GOAL.with(|g| *g.borrow_mut() = Some(Pattern::Nothing));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            GOAL.with(|g| *g.borrow_mut() = None);
        }
    }
    let _reset = Reset;
    // the unpruned walk, a walk of its own: each state with the decisions that first reached it
    let mut reached: BTreeMap<(u64, Box<[i64]>), Vec<u32>> = BTreeMap::new();
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        ex.audit = Some(Vec::new());
        let s = ex
            .run(&sc, p, Box::new(crate::choice::First), false, None)
            .map_err(|e| format!("{}: {e}", tree.name))?;
        d.reference_schedules += 1;
        let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
        for (key, k) in ex.audit.take().unwrap_or_default() {
            reached
                .entry((key.exact, key.slack))
                .or_insert_with(|| made[..k].to_vec());
        }
        prefix = next_own(&made, &s.made);
    }
    // the pruned search, to its end (its one check is never broken)
    let opts = Options {
        prune: true,
        checks: vec!["goal".into()],
        more_checkers: vec![GOAL_CHECKER],
        shrink: false,
        threads: 1,
        ..tree.opts.clone()
    };
    let (rep, visited) = plant::watching(|| explore(spec, &sc, &text, &opts, &mut |_| {}));
    let rep = rep.map_err(|e| format!("{}: {e}", tree.name))?;
    if !rep.complete || rep.counterexample.is_some() {
        return Err(format!(
            "{}: the pruned search did not finish: {:?}",
            tree.name, rep.stopped
        ));
    }
    let mut pruned: BTreeMap<u64, Vec<Box<[i64]>>> = BTreeMap::new();
    for k in visited {
        let list = pruned.entry(k.exact).or_default();
        if !list.contains(&k.slack) {
            list.push(k.slack);
        }
    }
    d.trees += 1;
    d.reference_states += reached.len() as u64;
    d.pruned_schedules += rep.schedules;
    d.pruned_runs += rep.pruned;
    for ((exact, slack), before) in &reached {
        let covered = pruned.get(exact).is_some_and(|list| {
            list.iter()
                .any(|s| s.len() == slack.len() && s.iter().zip(slack.iter()).all(|(a, b)| a >= b))
        });
        if !covered {
            return Err(format!(
                "{}: a state the unpruned walk reached after decisions {before:?} (slack {slack:?}; \
                 {} others of its exact part) is covered by none of the states the pruned search \
                 visited ({} schedules, {} runs stopped at seen states)",
                tree.name,
                pruned.get(exact).map_or(0, Vec::len),
                rep.schedules,
                rep.pruned
            ));
        }
    }
    Ok(())
}

/// The cover audit over `trees`: the first state not covered, or what was compared.
pub(crate) fn cover_trees(trees: &[Tree]) -> Result<Covered, String> {
    over(trees, cover)
}

/// The cover audit's trees: every design x kills off and on at two processes x two requests,
/// in each variant but the one with the destination varied (whose trees run to millions of
/// schedules: `just prune-audit`).
fn cover_slice(backends: &[&'static str]) -> Vec<Tree> {
    trees(backends, 2, 2, &[0, 1])
        .into_iter()
        .filter(|t| !t.name.contains("destination"))
        .collect()
}

#[test]
fn pruned_search_covers_every_state_the_unpruned_one_reaches() {
    let mut t = cover_slice(&[]);
    t.push(cut_tree());
    let d = cover_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees >= 60, "{d:?}: too few trees");
    assert!(d.pruned_runs > 0, "{d:?}: the pruning pruned nothing");
    assert!(d.pruned_schedules < d.reference_schedules, "{d:?}");
}

/// The deeper cover audit (`just prune-audit`): with the destination's latency varied too, for
/// the designs whose memory of grants the checkers mirror.
#[test]
#[ignore = "minutes: just prune-audit"]
fn pruned_search_covers_every_state_the_unpruned_one_reaches_deep() {
    let t: Vec<Tree> = trees(&["row", "redis_gcra", "advisory"], 2, 2, &[0])
        .into_iter()
        .filter(|t| t.name.contains("destination"))
        .collect();
    let d = cover_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
}

/// The cover audit under planted bug `p` over `trees`: its message (it must fail).
fn uncovered(p: Plant, trees: &[Tree]) -> String {
    match plant::with(p, || cover_trees(trees)) {
        Err(e) => e,
        Ok(d) => panic!("{p:?} planted: the cover audit passed ({d:?})"),
    }
}

const UNCOVERED: &str = "is covered by none of the states the pruned search visited";

#[test]
fn the_cover_audit_catches_a_form_that_leaves_the_world_out() {
    let e = uncovered(Plant::WorldLeftOut, &cover_slice(&["row"]));
    assert!(e.contains(UNCOVERED), "{e}");
}

#[test]
fn the_cover_audit_catches_pending_events_without_their_due_offset() {
    let e = uncovered(Plant::PendingDue, &cover_slice(&["row"]));
    assert!(e.contains(UNCOVERED), "{e}");
}

#[test]
fn the_cover_audit_catches_slack_compared_the_wrong_way() {
    let e = uncovered(Plant::SlackReversed, &cover_slice(&["row"]));
    assert!(e.contains(UNCOVERED), "{e}");
}

#[test]
fn the_cover_audit_catches_a_walk_that_skips_the_last_way_of_every_choice() {
    let e = uncovered(Plant::WalkSkipsLast, &cover_slice(&["row"]));
    assert!(e.contains(UNCOVERED), "{e}");
}

#[test]
fn the_goal_audit_catches_a_walk_that_skips_the_last_way_of_every_choice() {
    let refs = slice_refs();
    match plant::with(Plant::WalkSkipsLast, || audit_goals(refs, GOALS_PER_TREE)) {
        Err(e) => assert!(e.contains("was reached by none of the pruned search's"), "{e}"),
        Ok(d) => panic!("the goal audit passed ({d:?})"),
    }
}

/// A tree where the ceiling's memory of arrivals is not implied by the world: the
/// destination's latency varied (an arrival's instant is not its grant's), a burst of one.
fn arrivals_apart() -> (String, Options) {
    let racers =
        include_str!("../../sims/explore-three-racers.toml").replace("duration = \"10s\"", "duration = \"400ms\"");
    let text = format!(
        "{}\n[destination]\nlatency = {{ dist = \"lognormal\", median = \"2ms\", sigma = 0.5 }}\n",
        racers.replace("burst = 3", "burst = 1")
    );
    (text, opts(2, 2, vec![Site::Destination], 0))
}

#[test]
fn merged_states_go_on_alike_where_arrivals_are_not_their_grants() {
    let (text, o) = arrivals_apart();
    for b in ["redis_gcra", "row"] {
        let (c, broke) = audit(&text, b, &o).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.same_instant > 0 && broke > 0, "{b}: {c:?}, {broke}");
    }
}

#[test]
fn the_meetings_audit_catches_a_checker_form_without_a_field_its_verdict_reads() {
    let (text, o) = arrivals_apart();
    match plant::with(Plant::CeilingTat, || audit(&text, "redis_gcra", &o)) {
        Err(e) => assert!(e.contains("broke [\"ceiling\"] against []"), "{e}"),
        Ok(c) => panic!("the meetings audit passed ({c:?})"),
    }
}

/// The states of `tree`'s unpruned walk (a walk of its own) under `p`, a plant that leaves a
/// value out of the form ([`plant::left_out`]): how many exact parts were reached with more
/// than one value of it (0: the rest of the form implies it on this tree), of how many.
fn not_implied(p: Plant, tree: &Tree) -> (usize, usize) {
    let Some((_, sc, _, mut ex)) = ready(tree, vec!["goal".into()]).unwrap_or_else(|e| panic!("{e}")) else {
        panic!("{}: not a tree", tree.name);
    };
    GOAL.with(|g| *g.borrow_mut() = Some(Pattern::Nothing));
    let ((), pairs) = plant::with(p, || {
        plant::leaving_out(|| {
            let mut prefix = Some(Vec::new());
            while let Some(at) = prefix {
                // (recording its states: an unpruned run takes a state's form only then)
                ex.audit = Some(Vec::new());
                let s = ex
                    .run(&sc, at, Box::new(crate::choice::First), false, None)
                    .unwrap_or_else(|e| panic!("{}: {e}", tree.name));
                let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
                prefix = next_own(&made, &s.made);
            }
        })
    });
    GOAL.with(|g| *g.borrow_mut() = None);
    let mut values: BTreeMap<u64, std::collections::BTreeSet<u64>> = BTreeMap::new();
    for (exact, v) in pairs {
        values.entry(exact).or_default().insert(v);
    }
    (values.values().filter(|v| v.len() > 1).count(), values.len())
}

/// The tree where `redis_gcra`'s TAT has the fewest mirrors: one process x three requests,
/// no kill, the destination's latency varied too (a fetch start is then a choice point, where
/// the form is taken with the TAT ahead of now by more than any pending event shows).
fn tat_tree() -> Tree {
    trees(&["redis_gcra"], 1, 3, &[0])
        .into_iter()
        .find(|t| t.name.contains("destination"))
        .expect("the racers with the destination varied")
}

/// `redis_gcra`'s TAT left out of its store's form alone is implied by the rest of the form
/// (docs/explore.md, the audit: `backoff_coherence`'s spacing property keeps the shared
/// authority's TAT, which is the store's in reference time; the slot meter and each process's
/// last shared slot with the pending events imply it too), so that no audit can catch it; left
/// out with every one of those mirrors, it is not implied (states with different TATs share
/// an exact part) and the cover audit catches it.
#[test]
fn the_cover_audit_catches_a_gcra_tat_left_out_with_every_mirror() {
    let t = [tat_tree()];
    // unplanted, the audit passes; the TAT alone: implied (one TAT for every exact part), and it
    // passes
    cover_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    let (several, of) = not_implied(Plant::GcraTat, &t[0]);
    assert!(
        several == 0 && of > 50,
        "{several} of {of} exact parts with several TATs"
    );
    plant::with(Plant::GcraTat, || cover_trees(&t)).unwrap_or_else(|e| panic!("{e}"));
    // with every mirror: not implied, and caught
    let (several, of) = not_implied(Plant::GcraTatAndEveryMirror, &t[0]);
    assert!(
        several > 0,
        "every mirror left out, yet one TAT for each of {of} exact parts"
    );
    let e = uncovered(Plant::GcraTatAndEveryMirror, &t);
    assert!(e.contains(UNCOVERED), "{e}");
}

/// The TAT alone, as the issue planted it (and with the slot meter's left out too): NOT caught,
/// and it cannot be on these trees, because it is implied: on each tree below, every exact part
/// the unpruned walk reaches comes with one TAT (so no state more is merged, and the meetings
/// and cover audits compare exactly what they compare without the plant). The argument, for
/// every tree pacesim's explorer builds (docs/explore.md): `backoff_coherence` is in the form
/// of every `redis_gcra` run (the backend states its backoff), and its spacing property keeps
/// the shared authority's TAT, the previous shared grant's slot plus interval x multiplier,
/// which is the store's TAT in reference time: the store advances its TAT to `max(tat, now) +
/// interval x m` exactly when it grants, and the grant event carries that instant, interval and
/// multiplier; a `state_lost` fault clears both; a grant to a process whose request is no
/// longer awaited (killed, or timed out, before the store served it) goes to that process's own
/// slot (`local_tat`), from which, with the shared one, the store's TAT follows. Ignored: it
/// walks 2 x 2 trees (seconds); run with `--ignored`.
#[test]
#[ignore = "the TAT alone is implied: see its doc; the_cover_audit_catches_a_gcra_tat_left_out_with_every_mirror"]
fn the_gcra_tat_left_out_alone_is_implied_by_the_rest_of_the_form() {
    let mut t: Vec<Tree> = cover_slice(&["redis_gcra"]);
    t.push(tat_tree());
    for tree in &t {
        for p in [Plant::GcraTat, Plant::GcraTatAndItsMirror] {
            let (several, of) = not_implied(p, tree);
            eprintln!("{}: {p:?}: {several} of {of} exact parts with several TATs", tree.name);
            assert_eq!(several, 0, "{}: {p:?}: the TAT is not implied", tree.name);
        }
    }
    let (text, o) = arrivals_apart();
    let (c, _) = audit(&text, "redis_gcra", &o).unwrap_or_else(|e| panic!("{e}"));
    for p in [Plant::GcraTat, Plant::GcraTatAndItsMirror] {
        let (planted, _) = plant::with(p, || audit(&text, "redis_gcra", &o)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (planted.same_instant, planted.shifted, planted.covered),
            (c.same_instant, c.shifted, c.covered),
            "{p:?}: more states merged"
        );
    }
}

/// A tree whose runs the duration cuts where they are early or late: one process, two
/// requests, `redis_gcra`, its store's latency varied, 104 ms long: the second fetch starts
/// before the end when the first request's hops were quick, and not when they were slow. The
/// walk takes the slow ways first, so a state met later at an earlier instant (the same state,
/// its hops quicker) goes on past where the seen one's continuations were cut.
fn cut_tree() -> Tree {
    let text =
        include_str!("../../sims/explore-three-racers.toml").replace("duration = \"10s\"", "duration = \"104ms\"");
    Tree {
        name: "racers x redis_gcra at 1 x 2, 104 ms".into(),
        text,
        backend: "redis_gcra",
        opts: opts(1, 2, vec![Site::StoreLatency], 0),
    }
}

#[test]
fn the_audits_catch_a_cut_continuation_forgotten_when_a_state_is_closed() {
    let t = [cut_tree()];
    // (unplanted, both audits pass on it)
    let refs = references(&t).unwrap_or_else(|e| panic!("{e}"));
    audit_goals(&refs, usize::MAX).unwrap_or_else(|e| panic!("{e}"));
    cover_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    let e = uncovered(Plant::CutForgotten, &t);
    assert!(e.contains(UNCOVERED), "{e}");
    match plant::with(Plant::CutForgotten, || audit_goals(&refs, usize::MAX)) {
        Err(e) => assert!(e.contains("was reached by none of the pruned search's"), "{e}"),
        Ok(d) => panic!("the goal audit passed ({d:?})"),
    }
}

// ---------------------------------------------------------------------------------------------
// Symmetry reduction, audited against the search without it.
//
// A search that reduces by symmetry ([`symmetry`]) merges states that differ only in which
// process is which. Its goals are those no renaming of the processes changes (some process's
// fetch `k` after a gap, the fetch counts, the fetches by the order of first fetches): every
// one the unreduced walk reaches, the reduced search looking for it alone must reach. Trees:
// the fast slice's (two processes) and three processes of one request each for the designs
// that declare their sides symmetric, kills off and on.

/// The symmetry audit's trees (the fast slice): two processes of one request, and three for
/// `redis_gcra` (the racers as they are, and with a burst of one).
fn symmetric_slice() -> Vec<Tree> {
    let mut t = symmetric(trees(&["redis_gcra", "local", "local_divided"], 2, 1, &[0, 1]));
    let three = trees(&["redis_gcra"], 3, 1, &[0, 1]);
    t.extend(symmetric(
        three
            .into_iter()
            .filter(|t| t.name.starts_with("racers x") || t.name.starts_with("racers+burst1"))
            .collect(),
    ));
    t
}

/// The deeper symmetry audit's trees (`just prune-audit`): three processes of one request for
/// every design whose sides declare symmetry, and two of two for `redis_gcra`.
fn symmetric_slice_deep() -> Vec<Tree> {
    let mut t = symmetric(trees(&["redis_gcra", "local", "local_divided"], 3, 1, &[0, 1]));
    t.extend(symmetric(trees(&["redis_gcra"], 2, 2, &[0, 1])));
    t
}

/// The symmetry audit's references, walked once for every test of this module.
fn symmetric_refs() -> &'static Vec<(Tree, Scenario, String, Reference)> {
    static REFS: std::sync::OnceLock<Vec<(Tree, Scenario, String, Reference)>> = std::sync::OnceLock::new();
    REFS.get_or_init(|| references(&symmetric_slice()).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn a_search_reduced_by_symmetry_reaches_every_rare_goal_the_unreduced_one_does() {
    let refs = symmetric_refs();
    let d = audit_goals(refs, GOALS_PER_TREE).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees >= 20, "{d:?}: too few trees");
    assert!(d.single > 0, "{d:?}: no goal was rare");
    assert!(d.pruned_runs > 0, "{d:?}: the pruning pruned nothing");
}

#[test]
fn a_search_reduced_by_symmetry_covers_every_state_its_unpruned_walk_reaches() {
    let d = cover_trees(&symmetric_slice()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees >= 20, "{d:?}: too few trees");
    assert!(d.pruned_runs > 0, "{d:?}: the pruning pruned nothing");
}

/// Symmetry merges and keeps every verdict: on the symmetry audit's three-process trees, the
/// reduced search sees fewer states than the unreduced one and finds what it finds (a
/// violation exactly when it does, of the same check, with every check and with each alone).
#[test]
fn symmetry_merges_states_and_keeps_every_verdict() {
    // (trees where some schedules break a check and some do not: a burst of one, a wait bound)
    let t: Vec<Tree> = symmetric(trees(&["redis_gcra", "local_divided", "local"], 3, 1, &[0, 1]))
        .into_iter()
        .filter(|t| t.name.starts_with("racers+burst1") || t.name.starts_with("racers+wait_bound"))
        .collect();
    let (mut with, mut without, mut violated) = (0, 0, 0);
    for tree in &t {
        let Some((spec, sc, text, _)) = ready(tree, Vec::new()).unwrap() else {
            continue;
        };
        for checks in std::iter::once(Vec::new()).chain(crate::check::ORDER.iter().map(|c| vec![c.to_string()])) {
            let search = |symmetry: bool| {
                let o = Options {
                    prune: true,
                    symmetry,
                    checks: checks.clone(),
                    shrink: false,
                    threads: 1,
                    ..tree.opts.clone()
                };
                explore(spec, &sc, &text, &o, &mut |_| {})
            };
            let (Ok(r), Ok(u)) = (search(true), search(false)) else {
                continue;
            };
            assert_eq!(
                r.counterexample.as_ref().map(|c| &c.violation.check),
                u.counterexample.as_ref().map(|c| &c.violation.check),
                "{}: {checks:?}: reduced {r:?}, unreduced {u:?}",
                tree.name
            );
            assert!(r.complete || r.counterexample.is_some(), "{}: {r:?}", tree.name);
            assert!(
                r.symmetry.ends_with("interchangeable processes"),
                "{}: {}",
                tree.name,
                r.symmetry
            );
            violated += u64::from(r.counterexample.is_some());
            if checks.is_empty() && r.counterexample.is_none() {
                with += r.states;
                without += u.states;
            }
        }
    }
    eprintln!("states: {with} reduced, {without} unreduced; {violated} searches found a violation");
    assert!(violated > 0, "no tree has a violation");
    assert!(
        with < without,
        "symmetry merged nothing: {with} states against {without}"
    );
}

/// The symmetry cover audit under planted bug `p`: its message (it must fail).
fn uncovered_by_symmetry(p: Plant) -> String {
    let t: Vec<Tree> = symmetric_slice()
        .into_iter()
        .filter(|t| t.opts.processes == Some(3))
        .collect();
    uncovered(p, &t)
}

#[test]
fn the_symmetry_audit_catches_a_checker_keeping_data_by_id_while_processes_are_renamed() {
    let e = uncovered_by_symmetry(Plant::CeilingKeptById);
    assert!(e.contains(UNCOVERED), "{e}");
}

/// The deeper symmetry audits (`just prune-audit`).
#[test]
#[ignore = "minutes: just prune-audit"]
fn pruned_search_reduced_by_symmetry_finds_what_the_unreduced_one_does_deep() {
    let t = symmetric_slice_deep();
    let refs = references(&t).unwrap_or_else(|e| panic!("{e}"));
    let d = audit_goals(&refs, GOALS_PER_TREE).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    let d = cover_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
}
