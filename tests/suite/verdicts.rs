//! Three verdicts (issue 32, item 3): a check that lacks what it needs is **not judged**, a
//! third value that no output reports as a pass: `"verdict": "not_judged"` in `--json`,
//! `<skipped>` in JUnit, `-` in tables, `n/j` in the matrix; `--require-judged` turns it into
//! exit 1. `sims/eight-reservers.toml` (seed 47, `row`) offers less load than the rate, so
//! `liveness` cannot be judged there while every other check passes.

use crate::common;
use common::pacesim;

const FILE: &str = "sims/eight-reservers.toml";

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pacesim-verdicts-{name}-{}", std::process::id()))
}

#[test]
fn json_says_not_judged_and_never_pass() {
    let (code, out, err) = pacesim(&["run", FILE, "--json"]);
    assert_eq!(code, 0, "a check not judged does not fail a run by default: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let live = &v["checks"]["liveness"];
    assert_eq!(live["verdict"], "not_judged", "{live}");
    assert!(
        live.get("pass").is_none(),
        "no boolean that could read as a pass: {live}"
    );
    assert!(live["detail"].as_str().unwrap().contains("not judged"), "{live}");
    assert_eq!(v["checks"]["ceiling"]["verdict"], "pass");
}

#[test]
fn require_judged_fails_the_command_and_names_the_check() {
    let (code, _, err) = pacesim(&["run", FILE, "--require-judged"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not judged (--require-judged): liveness"), "{err}");
    // a run whose checks are all judged still passes with it
    let (code, _, err) = pacesim(&["run", "sims/four-limiters.toml", "--require-judged"]);
    assert_eq!(code, 0, "{err}");
    // simulate exits 0 whatever the verdicts, but not with a check not judged
    let (code, _, err) = pacesim(&["simulate", FILE, "--require-judged"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("eight-reservers/row liveness (seed 47)"), "{err}");
    let (code, _, err) = pacesim(&["matrix", FILE, "--require-judged"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("eight-reservers/row liveness"), "{err}");
}

/// Issue 52 item 17: `check --require-judged` honours the flag. The trace of a run whose
/// `liveness` is not judged passes `check` (exit 0) and fails `check --require-judged` (exit 1,
/// naming the check); a `check` that ignored the flag passed both.
#[test]
fn check_of_a_trace_with_a_check_not_judged_fails_with_require_judged() {
    let trace = tmp("check-trace.jsonl");
    let (code, _, err) = pacesim(&["run", FILE, "--trace", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let t = trace.to_str().unwrap();
    let (code, out, err) = pacesim(&["check", t, "--json"]);
    assert_eq!(code, 0, "a check not judged does not fail `check` by default: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["checks"]["liveness"]["verdict"], "not_judged", "{out}");
    let (code, _, err) = pacesim(&["check", t, "--require-judged"]);
    let _ = std::fs::remove_file(&trace);
    assert_eq!(code, 1, "--require-judged makes a check not judged fail `check`: {err}");
    assert!(err.contains("not judged (--require-judged): liveness"), "{err}");
}

#[test]
fn tables_show_a_dash_and_junit_skips_with_what_it_needs() {
    let (code, out, _) = pacesim(&["run", FILE]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.trim_start().starts_with("liveness")).unwrap();
    assert!(line.contains(" -  ") && !line.contains("pass"), "{line}");

    let j = tmp("junit.xml");
    let (code, _, err) = pacesim(&["run", FILE, "--junit", j.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let xml = std::fs::read_to_string(&j).unwrap();
    let _ = std::fs::remove_file(&j);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("row: liveness"))
        .unwrap_or_else(|| panic!("{xml}"));
    let skipped = case
        .children()
        .find(|n| n.has_tag_name("skipped"))
        .unwrap_or_else(|| panic!("a check not judged is skipped, not passed: {xml}"));
    assert!(skipped.attribute("message").unwrap().contains("not judged"), "{xml}");
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("failures"), Some("0"));
    assert!(
        suite.attribute("skipped").unwrap().parse::<u32>().unwrap() >= 1,
        "{xml}"
    );

    let (code, out, err) = pacesim(&["matrix", FILE]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with("eight-reservers/row ")).unwrap();
    assert!(row.contains("n/j"), "{out}");
}

/// An explorer judges each schedule by its statuses alone (`Suite::statuses`: pacesim's checkers
/// skip their witness text) and replays the few that break a check for the text. That is sound
/// only if a verdict's status never depends on its text: every scenario with every backend it
/// compares, judged both ways over one trace, must agree check by check.
#[test]
fn a_verdict_without_its_witness_text_has_the_same_status() {
    use pacesim::check::Suite;
    use pacesim::trace::Tee;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sims");
    let (mut runs, mut failing) = (0, 0);
    for f in pacesim::run::scenario_files_in(&root) {
        let Ok(sc) = pacesim::registry::load(&f) else {
            continue; // not a scenario (the expected matrix)
        };
        for b in sc.compared_backends() {
            let v = pacesim::registry::with_backend(&sc, &b).unwrap();
            let (mut loud, mut terse) = (Suite::new(), Suite::new());
            {
                let mut tee = Tee::new();
                tee.push(&mut loud);
                tee.push(&mut terse);
                pacesim::registry::spec(&b).unwrap().simulate(&v, &mut tee).unwrap();
            }
            let (full, bare) = (loud.verdicts(), terse.statuses());
            let statuses = |v: &[pacesim::check::Verdict]| v.iter().map(|x| (x.name, x.status)).collect::<Vec<_>>();
            assert_eq!(statuses(&full), statuses(&bare), "{} / {b}", sc.name);
            // (a passing check's text, the common case, is not written; a failure found while
            // the events streamed keeps the text it was found with)
            for x in bare.iter().filter(|x| x.passed()) {
                assert!(
                    x.detail.is_empty(),
                    "{} / {b}: {} wrote its text: {}",
                    sc.name,
                    x.name,
                    x.detail
                );
            }
            assert!(
                full.iter().all(|x| !x.detail.is_empty()),
                "{} / {b}: a verdict without text",
                sc.name
            );
            runs += 1;
            failing += usize::from(full.iter().any(|x| x.failed()));
        }
    }
    // (the comparison covers failures as well as passes)
    assert!(runs > 100 && failing > 30, "{runs} runs, {failing} with a failure");
}
