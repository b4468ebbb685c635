//! The pruning's soundness, audited: a pruning run stops at a state an earlier run reached,
//! trusting that the two go on alike. Here every schedule of a tree runs to its end (nothing
//! pruned) while recording each state a pruning run would have compared, with the decisions
//! made by then; wherever two schedules reached the same state by different histories and then
//! made the same decisions, their verdicts (which checks broke) must be the same. A fingerprint
//! that left out something a verdict depends on (a checker's memory of arrivals, a pending
//! event) fails this on the first such pair; the test also counts the pairs, so it cannot pass
//! by finding none.

use super::*;
use std::collections::BTreeMap;

/// A state and the decisions a schedule made after reaching it.
type Meeting = (u64, Vec<u32>);
/// The decisions before it, and the checks that schedule broke.
type Before = (Vec<u32>, Vec<String>);

/// Every schedule of `text` x `backend` within `opts`: how many states were reached by two
/// different histories and continued alike (each such pair compared) and how many schedules
/// broke a check, or the first pair whose verdicts differ.
fn audit(text: &str, backend: &str, opts: &Options) -> Result<(u64, u64), String> {
    let sc = Scenario::parse("audit.toml", text).expect("a valid scenario");
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
    // (state, the decisions after it) -> (the decisions before it, the checks that broke)
    let mut seen: BTreeMap<Meeting, Before> = BTreeMap::new();
    let (mut compared, mut failing) = (0u64, 0u64);
    let mut prefix = Some(Vec::new());
    while let Some(p) = prefix {
        ex.audit = Some(Vec::new());
        let s = ex
            .run(&sc, p, Box::new(crate::choice::First), false, None)
            .expect("runs");
        let made: Vec<u32> = s.made.iter().map(|c| c.index).collect();
        let mut broke: Vec<String> = s.violation.iter().chain(&s.also).map(|v| v.check.clone()).collect();
        broke.sort();
        failing += u64::from(!broke.is_empty());
        for (state, k) in ex.audit.take().unwrap_or_default() {
            let key = (state, made[k..].to_vec());
            match seen.get(&key) {
                None => {
                    seen.insert(key, (made[..k].to_vec(), broke.clone()));
                }
                Some((before, theirs)) if *before != made[..k] => {
                    compared += 1;
                    if *theirs != broke {
                        return Err(format!(
                            "{backend}: the same state after decisions {before:?} and {:?}, then {:?}: broke {theirs:?} against {broke:?}",
                            &made[..k],
                            &made[k..]
                        ));
                    }
                }
                Some(_) => {}
            }
        }
        prefix = next_prefix(&s.made, 0);
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
    ];
    let (mut merged, mut mixed) = (0, 0);
    for (backend, o) in cases {
        let (compared, broke) = audit(&racers, backend, &o).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{backend} {} x {:?}, {} kill: {compared} merged states compared; {broke} schedules broke a check",
            o.processes.unwrap(),
            o.requests,
            o.bounds.kills
        );
        assert!(compared > 0, "{backend}: no state was reached twice: nothing audited");
        merged += compared;
        mixed += u64::from(broke > 0);
    }
    assert!(
        merged > 0 && mixed > 0,
        "a tree where some schedules break and some do not"
    );
}
