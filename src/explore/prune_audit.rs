//! The pruning's soundness, audited: a pruning run stops at a state a seen state covers
//! ([`crate::form`]: the same exact part, at the same instant or, nothing absolute in either,
//! at another, and no less slack), trusting that whatever the new state's continuations break,
//! the seen state's break too. Here every schedule of a tree runs to its end (nothing pruned)
//! while recording each state a pruning run would have compared, with the decisions made by
//! then; wherever a later schedule reached a state an earlier one's covers, by a different
//! history, and then made the same decisions, the checks it broke must be among those the
//! earlier one broke (the same, when the two states are equal). A form that left out something
//! a verdict depends on (a checker's memory of arrivals, a pending event), or called slack
//! what is not, fails this on the first such pair; the test also counts the pairs, so it cannot
//! pass by finding none.

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
    let mut seen: BTreeMap<Meeting, Vec<Before>> = BTreeMap::new();
    let mut compared = Compared::default();
    let mut failing = 0u64;
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        ex.audit = Some(Vec::new());
        let s = ex
            .run(&sc, p, Box::new(crate::choice::Walk), false, None)
            .expect("runs");
        let cut = ex.reach.end.is_none_or(|(_, cut)| cut);
        let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
        let mut broke: Vec<String> = s.violation.iter().chain(&s.also).map(|v| v.check.clone()).collect();
        broke.sort();
        failing += u64::from(!broke.is_empty());
        for (key, k) in ex.audit.take().unwrap_or_default() {
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
        ..Options::default()
    }
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
    let variants = [
        ("racers", base.clone()),
        (
            "racers+wait_bound",
            base.replace("burst = 3", "burst = 3\nwait_bound = \"150ms\""),
        ),
        ("racers+burst1", base.replace("burst = 3", "burst = 1")),
    ];
    let all: Vec<&'static str> = if backends.is_empty() {
        crate::registry::all().map(|s| s.name).collect()
    } else {
        backends.to_vec()
    };
    let mut out = Vec::new();
    for (v, text) in &variants {
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
                    opts: opts(processes, requests, vec![Site::StoreLatency], k),
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

/// The differential audit over `trees`: the first disagreement, or what was compared.
pub(crate) fn audit_trees(trees: &[Tree]) -> Result<Differential, String> {
    let mut d = Differential::default();
    for t in trees {
        differential(t, &mut d)?;
    }
    Ok(d)
}

/// The fast slice (`just test`, CI): two processes, one request each, kills off and on.
fn slice() -> Vec<Tree> {
    trees(&[], 2, 1, &[0, 1])
}

/// (Ignored: not yet seen failing on a pruning bug. Even with the whole world left out of the
/// form, below, the two searches agree on every tree of the slice: the comparison cannot see a
/// wrong merge on these trees yet. `just prune-audit` runs it.)
#[test]
#[ignore = "no power shown yet: see the_audit_catches_a_form_that_leaves_the_world_out"]
fn pruned_search_finds_a_violation_exactly_when_the_unpruned_one_does() {
    let d = audit_trees(&slice()).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
    assert!(d.trees > 20, "{d:?}: too few trees");
    assert!(
        d.violated > 0 && d.violated < d.searches,
        "{d:?}: some searches find a violation, some do not"
    );
    assert!(
        d.pruned_schedules < d.full_schedules,
        "{d:?}: the pruning pruned nothing"
    );
}

/// The deeper audit (`just prune-audit`, `just deep`): two processes x two requests and three
/// x one, kills off and on. Ignored in the ordinary run.
#[test]
#[ignore = "minutes: just prune-audit"]
fn pruned_search_finds_a_violation_exactly_when_the_unpruned_one_does_deep() {
    let mut t = trees(&[], 2, 2, &[0, 1]);
    t.extend(trees(&[], 3, 1, &[0, 1]));
    let d = audit_trees(&t).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{d:?}");
}

/// The audit's power: each planted pruning bug should fail it. NOT YET: on these trees (the
/// slice; `redis_gcra` 2 x 2 for the TAT) the pruned and unpruned searches still agree, check by
/// check, under every one of the six (measured: each test below fails, "the audit passed"), so
/// they are ignored, a record of what the audit cannot see yet, not a claim. Run them with
/// `cargo test --profile fast-test --lib explore::prune_audit::the_audit_catches -- --ignored`.
/// (The walk's plant changes both searches alike: it needs a reference walk of its own.)
fn caught(p: Plant, trees: &[Tree]) -> String {
    match plant::with(p, || audit_trees(trees)) {
        Err(e) => e,
        Ok(d) => panic!("{p:?} planted: the audit passed ({d:?})"),
    }
}

/// What the audit should see at the least: a form that leaves the whole world out merges states
/// that go on differently. Measured: it does NOT fail the slice (the pruned searches ran 3,032
/// schedules against 78,325, and still agreed on every tree, check by check): the trees'
/// violations are everywhere or nowhere. Ignored, as a record.
#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_a_form_that_leaves_the_world_out() {
    let e = caught(Plant::WorldLeftOut, &slice());
    assert!(e.contains("unpruned: ") && e.contains("pruned: "), "{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_a_gcra_store_form_without_its_tat() {
    let e = caught(Plant::GcraTat, &trees(&["redis_gcra"], 2, 2, &[0, 1]));
    eprintln!("{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_pending_events_without_their_due_offset() {
    let e = caught(Plant::PendingDue, &slice());
    eprintln!("{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_slack_compared_the_wrong_way() {
    let e = caught(Plant::SlackReversed, &slice());
    eprintln!("{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_a_cut_continuation_forgotten_when_a_state_is_closed() {
    let e = caught(Plant::CutForgotten, &slice());
    eprintln!("{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_a_checker_form_without_a_field_its_verdict_reads() {
    let e = caught(Plant::CeilingTat, &slice());
    eprintln!("{e}");
}

#[test]
#[ignore = "not yet caught by the audit: see `caught`"]
fn the_audit_catches_a_walk_that_skips_the_last_way_of_every_choice() {
    let e = caught(Plant::WalkSkipsLast, &slice());
    eprintln!("{e}");
}
