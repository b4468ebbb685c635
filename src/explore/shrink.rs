//! Shrinking a counterexample by shrinking what produced it (as Hypothesis does): the
//! scenario's processes and requests, the kills, and the choice sequence.
//!
//! A candidate is kept when a run of it still breaks the same property. A smaller scenario
//! (fewer processes, fewer requests, no kill) is tried first with the choices as they were,
//! then searched afresh: depth first for up to [`SEARCH`] runs, as the explorer would (a
//! smaller case that fails is as good as the same schedule shrunk). Then the sequence is cut
//! short (every later choice taking its first way) and each choice set to its first way. The
//! passes repeat until none makes progress (or [`Options::shrink_runs`] runs are spent). A kept
//! candidate's sequence is the one its run made, so the result always replays as it is. The
//! result is minimal for these passes: no smaller scenario failed within the search, and no
//! single choice of it can take its first way and still fail.

use super::{Counterexample, ExploreError, Explorer, Options, Schedule, Size, kills, next_prefix, prepare};
use crate::choice::{Choice, First, Kind};
use crate::scenario::Scenario;

/// The most runs shrinking makes, by default ([`Options::shrink_runs`]).
pub const MAX_RUNS: u64 = 4000;
/// The most runs a search for a smaller failing case makes.
pub const SEARCH: u64 = 300;

struct Case {
    sc: Scenario,
    text: String,
    made: Vec<Choice>,
    violation: super::Violation,
    // the kill budget its run had
    kills: u32,
}

/// Shrink the violation `s` found at schedule `found_at` of `sc` (`text`: its TOML).
pub fn shrink(
    ex: &mut Explorer,
    sc: &Scenario,
    text: &str,
    found_at: u64,
    s: Schedule,
    opts: &Options,
) -> Result<Counterexample, ExploreError> {
    let violation = s.violation.clone().expect("a violation to shrink");
    let size = |sc: &Scenario, made: &[Choice]| Size {
        processes: sc.processes.count,
        requests: sc.processes.requests,
        seconds: sc.duration.0 as f64 / 1e9,
        kills: kills(made),
        choices: made.len(),
    };
    let found = size(sc, &s.made);
    let budget = ex.kills();
    let mut best = Case {
        sc: sc.clone(),
        text: text.to_string(),
        made: s.made,
        violation,
        kills: budget,
    };
    let start = ex.runs;
    if opts.shrink {
        let check = best.violation.check.clone();
        // (the exploration's limits hold while shrinking too: the case found so far stands)
        let spent = |ex: &Explorer| ex.runs - start >= opts.shrink_runs || ex.stopping().is_some();
        // the same property broken by `sc` with a kill budget of `k`: the prefix first, then
        // (`search`) depth first afresh
        let attempt = |ex: &mut Explorer,
                       sc: &Scenario,
                       k: u32,
                       prefix: Vec<u32>,
                       search: bool|
         -> Result<Option<Schedule>, ExploreError> {
            ex.set_kills(k);
            let mut next = Some(prefix);
            let mut runs = 0;
            while let Some(p) = next.take() {
                if spent(ex) {
                    break;
                }
                let r = ex.run(sc, p, Box::new(First), false, None)?;
                runs += 1;
                if r.broke(&check).is_some() {
                    return Ok(Some(r));
                }
                if search && runs < SEARCH {
                    next = if runs == 1 {
                        Some(Vec::new())
                    } else {
                        next_prefix(&r.made, 0)
                    };
                }
            }
            Ok(None)
        };
        // (a smaller scenario that is not valid, say a fault naming a process it no longer
        // has, is no candidate)
        let resized = |best: &Case, p: u32, r: Option<u64>| -> Option<(Scenario, String)> {
            let o = Options {
                processes: Some(p),
                requests: r,
                ..opts.clone()
            };
            prepare(&best.sc.name, &best.text, &best.sc, &o).ok()
        };
        let shortened = |best: &Case, d: crate::time::Nanos| -> Option<(Scenario, String)> {
            let mut doc: toml::Table = best.text.parse().ok()?;
            doc.insert("duration".into(), format!("{}ns", d.0).into());
            let text = toml::to_string(&doc).ok()?;
            Some((crate::registry::parse(&best.sc.name, &text).ok()?, text))
        };
        let keep = |sc: Scenario, text: String, k: u32, r: Schedule| Case {
            sc,
            text,
            violation: r.broke(&check).cloned().expect("kept runs broke the property"),
            made: r.made,
            kills: k,
        };
        loop {
            let before = (
                best.sc.processes.count,
                best.sc.processes.requests,
                best.sc.duration,
                best.made.clone(),
                best.kills,
            );
            // fewer processes, the fewest first
            for p in 1..best.sc.processes.count {
                // (a count of billions is not walked once the runs are spent)
                if spent(ex) {
                    break;
                }
                let Some((sc2, t2)) = resized(&best, p, best.sc.processes.requests) else {
                    continue;
                };
                if let Some(r) = attempt(ex, &sc2, best.kills, indices(&best.made), true)? {
                    best = keep(sc2, t2, best.kills, r);
                    break;
                }
            }
            // no kill at all (and no kill budget: a case that needs none runs without one)
            if best.kills > 0 {
                let search = kills(&best.made) > 0;
                if let Some(r) = attempt(ex, &best.sc, 0, without_kills(&best.made), search)? {
                    let (sc, text) = (best.sc.clone(), best.text.clone());
                    best = keep(sc, text, 0, r);
                }
            }
            // each kill undone (a case that needs a kill: fewer)
            let mut i = 0;
            while i < best.made.len() && kills(&best.made) > 1 {
                if best.made[i].kind == Kind::Kill && best.made[i].index == 1 {
                    let mut p = indices(&best.made);
                    p[i] = 0;
                    if let Some(r) = attempt(ex, &best.sc, best.kills, p, false)? {
                        let (sc, text) = (best.sc.clone(), best.text.clone());
                        best = keep(sc, text, best.kills, r);
                        continue;
                    }
                }
                i += 1;
            }
            // fewer requests, the fewest first
            if let Some(req) = best.sc.processes.requests {
                for r in 1..req {
                    if spent(ex) {
                        break;
                    }
                    let Some((sc2, t2)) = resized(&best, best.sc.processes.count, Some(r)) else {
                        continue;
                    };
                    if let Some(run) = attempt(ex, &sc2, best.kills, indices(&best.made), true)? {
                        best = keep(sc2, t2, best.kills, run);
                        break;
                    }
                }
            }
            // a shorter run: an eighth, a quarter, half of the duration
            for div in [8, 4, 2] {
                let d = crate::time::Nanos(best.sc.duration.0 / div);
                if d.0 == 0 {
                    continue;
                }
                let Some((sc2, t2)) = shortened(&best, d) else {
                    continue;
                };
                if let Some(r) = attempt(ex, &sc2, best.kills, indices(&best.made), false)? {
                    best = keep(sc2, t2, best.kills, r);
                    break;
                }
            }
            // an earlier end of the sequence: every later choice its first way
            let len = best.made.len();
            for cut in [0, len / 8, len / 4, len / 2, 3 * len / 4, len.saturating_sub(1)] {
                if cut >= best.made.len() || best.made[cut..].iter().all(|c| c.index == 0) {
                    continue;
                }
                if let Some(r) = attempt(ex, &best.sc, best.kills, indices(&best.made[..cut]), false)? {
                    let (sc, text) = (best.sc.clone(), best.text.clone());
                    best = keep(sc, text, best.kills, r);
                    break;
                }
            }
            // each choice its first way (the last ones first: they matter least often)
            let mut i = best.made.len();
            while i > 0 {
                i -= 1;
                if i < best.made.len() && best.made[i].index > 0 && best.made[i].kind != Kind::Kill {
                    let mut p = indices(&best.made);
                    p[i] = 0;
                    if let Some(r) = attempt(ex, &best.sc, best.kills, p, false)? {
                        let (sc, text) = (best.sc.clone(), best.text.clone());
                        best = keep(sc, text, best.kills, r);
                    }
                }
            }
            let after = (
                best.sc.processes.count,
                best.sc.processes.requests,
                best.sc.duration,
                best.made.clone(),
                best.kills,
            );
            if after == before || spent(ex) {
                break;
            }
        }
        ex.set_kills(budget);
    }
    let shrunk = size(&best.sc, &best.made);
    Ok(Counterexample {
        violation: best.violation,
        found_at,
        found,
        shrunk,
        shrink_runs: ex.runs - start,
        choices: best.made,
        kills: best.kills,
        scenario: best.text,
    })
}

fn indices(made: &[Choice]) -> Vec<u32> {
    made.iter().map(|c| c.index).collect()
}

/// The choices with every kill decision left out (the run they came from had a kill budget;
/// one without makes no such decision).
fn without_kills(made: &[Choice]) -> Vec<u32> {
    made.iter().filter(|c| c.kind != Kind::Kill).map(|c| c.index).collect()
}
