//! Shrinking a counterexample by shrinking what produced it (as Hypothesis does): the
//! scenario's processes and requests, and the choice sequence.
//!
//! A candidate is kept when its run still breaks the same property. The passes, repeated until
//! none makes progress (or [`MAX_RUNS`] runs are spent): fewer processes (the fewest first),
//! each kill undone, fewer requests (the fewest first), the sequence cut short (every later
//! choice then takes its first way), and each choice set to its first way. A kept candidate's
//! sequence is the one its run made, so the result always replays as it is. The result is
//! minimal for these passes: no single step of any pass still fails.

use super::{Counterexample, ExploreError, Explorer, Options, Schedule, Size, kills, prepare};
use crate::choice::{Choice, First, Kind};
use crate::scenario::Scenario;

/// The most runs shrinking makes.
pub const MAX_RUNS: u64 = 2000;

struct Case {
    sc: Scenario,
    text: String,
    made: Vec<Choice>,
    violation: super::Violation,
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
        kills: kills(made),
        choices: made.len(),
    };
    let found = size(sc, &s.made);
    let mut best = Case {
        sc: sc.clone(),
        text: text.to_string(),
        made: s.made,
        violation,
    };
    let start = ex.runs;
    if opts.shrink {
        let check = best.violation.check.clone();
        // the same property broken, by `sc` run with `prefix`
        let attempt = |ex: &mut Explorer, sc: &Scenario, prefix: Vec<u32>| -> Result<Option<Schedule>, ExploreError> {
            if ex.runs - start >= MAX_RUNS {
                return Ok(None);
            }
            let r = ex.run(sc, prefix, Box::new(First), false, None)?;
            Ok(r.violation.as_ref().is_some_and(|v| v.check == check).then_some(r))
        };
        let resized = |best: &Case, p: u32, r: Option<u64>| -> Result<(Scenario, String), ExploreError> {
            let o = Options {
                processes: Some(p),
                requests: r,
                ..opts.clone()
            };
            prepare(&best.sc.name, &best.text, &best.sc, &o)
        };
        loop {
            let before = (best.sc.processes.count, best.sc.processes.requests, best.made.clone());
            // fewer processes, the fewest first
            for p in 1..best.sc.processes.count {
                let (sc2, t2) = resized(&best, p, best.sc.processes.requests)?;
                if let Some(r) = attempt(ex, &sc2, indices(&best.made))? {
                    best = keep(sc2, t2, r);
                    break;
                }
            }
            // each kill undone
            let mut i = 0;
            while i < best.made.len() {
                if best.made[i].kind == Kind::Kill && best.made[i].index == 1 {
                    let mut p = indices(&best.made);
                    p[i] = 0;
                    if let Some(r) = attempt(ex, &best.sc, p)? {
                        let (sc, text) = (best.sc.clone(), best.text.clone());
                        best = keep(sc, text, r);
                        continue;
                    }
                }
                i += 1;
            }
            // fewer requests, the fewest first
            if let Some(req) = best.sc.processes.requests {
                for r in 1..req {
                    let (sc2, t2) = resized(&best, best.sc.processes.count, Some(r))?;
                    if let Some(run) = attempt(ex, &sc2, indices(&best.made))? {
                        best = keep(sc2, t2, run);
                        break;
                    }
                }
            }
            // an earlier end of the sequence: every later choice its first way
            let len = best.made.len();
            for cut in [0, len / 8, len / 4, len / 2, 3 * len / 4, len.saturating_sub(1)] {
                if cut >= best.made.len() || best.made[cut..].iter().all(|c| c.index == 0) {
                    continue;
                }
                if let Some(r) = attempt(ex, &best.sc, indices(&best.made[..cut]))? {
                    let (sc, text) = (best.sc.clone(), best.text.clone());
                    best = keep(sc, text, r);
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
                    if let Some(r) = attempt(ex, &best.sc, p)? {
                        let (sc, text) = (best.sc.clone(), best.text.clone());
                        best = keep(sc, text, r);
                    }
                }
            }
            let after = (best.sc.processes.count, best.sc.processes.requests, best.made.clone());
            if after == before || ex.runs - start >= MAX_RUNS {
                break;
            }
        }
    }
    let shrunk = size(&best.sc, &best.made);
    Ok(Counterexample {
        violation: best.violation,
        found_at,
        found_choices: found.choices,
        found,
        shrunk,
        shrink_runs: ex.runs - start,
        choices: best.made,
        scenario: best.text,
    })
}

fn indices(made: &[Choice]) -> Vec<u32> {
    made.iter().map(|c| c.index).collect()
}

fn keep(sc: Scenario, text: String, r: Schedule) -> Case {
    Case {
        sc,
        text,
        violation: r.violation.expect("kept runs broke the property"),
        made: r.made,
    }
}
