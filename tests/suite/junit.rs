//! `--junit FILE` on `matrix`, `run` and `simulate`: well-formed XML in the structure CI systems
//! read (Jenkins, GitLab, GitHub Actions reporters, Azure Pipelines): `testsuites` >
//! `testsuite` > `testcase` (`name`, `classname`) > `failure` (`message`) / `skipped`, with
//! `tests`, `failures`, `errors`, `skipped` counts that add up; one case per scenario x backend
//! x property, a failure's message the checker's witness and its text the reproducer. And every
//! failing verdict names its reproducer in tables and JSON too.

use crate::common;
use common::pacesim;
use pacesim::junit::{self, Case, CaseOutcome};
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pacesim-junit-{name}-{}.xml", std::process::id()))
}

fn count(n: roxmltree::Node, attr: &str) -> usize {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("<{}> has no {attr}", n.tag_name().name()))
        .parse()
        .unwrap()
}

/// One test case read back: suite, classname, name, and a failure's message and text.
type ReadCase = (String, String, String, Option<(String, String)>);

/// Check the JUnit structure; returns every test case.
fn validate(xml: &str) -> Vec<ReadCase> {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let mut cases = Vec::new();
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    for suite in root.children().filter(|n| n.is_element()) {
        assert_eq!(suite.tag_name().name(), "testsuite");
        let name = suite.attribute("name").expect("suite name").to_string();
        let (mut t, mut f, mut s) = (0, 0, 0);
        for case in suite.children().filter(|n| n.is_element()) {
            assert_eq!(case.tag_name().name(), "testcase");
            let cname = case.attribute("name").expect("case name");
            let class = case.attribute("classname").expect("classname");
            assert!(!cname.is_empty() && !class.is_empty());
            case.attribute("time").expect("time").parse::<f64>().unwrap();
            t += 1;
            let kids: Vec<_> = case.children().filter(|n| n.is_element()).collect();
            assert!(kids.len() <= 1, "one outcome element per case");
            let mut failure = None;
            if let Some(k) = kids.first() {
                match k.tag_name().name() {
                    "failure" => {
                        f += 1;
                        failure = Some((
                            k.attribute("message").expect("failure message").to_string(),
                            k.text().unwrap_or("").to_string(),
                        ));
                    }
                    "skipped" => s += 1,
                    other => panic!("unexpected <{other}> in a testcase"),
                }
            }
            cases.push((name.clone(), class.to_string(), cname.to_string(), failure));
        }
        assert_eq!(
            (count(suite, "tests"), count(suite, "failures"), count(suite, "skipped")),
            (t, f, s)
        );
        assert_eq!(count(suite, "errors"), 0);
        (tests, failures, skipped) = (tests + t, failures + f, skipped + s);
    }
    assert_eq!(
        (count(root, "tests"), count(root, "failures"), count(root, "skipped")),
        (tests, failures, skipped)
    );
    cases
}

#[test]
fn matrix_junit_has_one_case_per_scenario_backend_property() {
    let path = tmp("matrix");
    let (code, out, err) = pacesim(&["matrix", "sims/four-limiters.toml", "--junit", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // the table's witnesses name their reproducer
    assert!(
        out.contains("reproduce: pacesim run sims/four-limiters.toml --seed 1 --backend local"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&path).unwrap();
    let cases = validate(&xml);
    // 5 backends x 8 properties
    assert_eq!(cases.len(), 5 * pacesim::matrix::properties().len(), "{xml}");
    let ceiling = cases
        .iter()
        .find(|c| c.1 == "pacesim.four-limiters.local" && c.2 == "local: ceiling")
        .expect("local's ceiling case");
    let (message, text) = ceiling.3.as_ref().expect("local fails the ceiling");
    assert!(message.contains("burst"), "the witness: {message}");
    assert!(
        text.contains("reproduce: pacesim run sims/four-limiters.toml --seed 1 --backend local"),
        "{text}"
    );
    assert!(
        cases
            .iter()
            .filter(|c| c.1 == "pacesim.four-limiters.row")
            .all(|c| c.3.is_none())
    );

    // JSON cells carry it too
    let (_, out, _) = pacesim(&["matrix", "sims/four-limiters.toml", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["rows"][4]["cells"]["ceiling"]["reproduce"],
        "pacesim run sims/four-limiters.toml --seed 1 --backend local"
    );
    assert!(v["rows"][0]["cells"]["ceiling"].get("reproduce").is_none());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn run_and_simulate_write_junit_and_name_the_reproducer() {
    let path = tmp("run");
    let (code, out, _) = pacesim(&[
        "run",
        "sims/four-limiters.toml",
        "--backend",
        "local",
        "--seed",
        "3",
        "--junit",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("reproduce: pacesim run sims/four-limiters.toml --seed 3 --backend local"),
        "{out}"
    );
    let cases = validate(&std::fs::read_to_string(&path).unwrap());
    assert!(cases.iter().any(|c| c.2 == "local: ceiling" && c.3.is_some()));
    let (_, out, _) = pacesim(&["run", "sims/four-limiters.toml", "--backend", "local", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["reproduce"],
        "pacesim run sims/four-limiters.toml --seed 1 --backend local"
    );
    let (code, out, _) = pacesim(&["run", "sims/four-limiters.toml", "--json"]);
    assert_eq!(code, 0);
    assert!(!out.contains("reproduce"), "a passing run names no reproducer");

    let (code, out, err) = pacesim(&[
        "simulate",
        "sims/four-limiters.toml",
        "sims/outage-fail-open.toml",
        "--seeds",
        "2",
        "--junit",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("reproduce: pacesim run sims/four-limiters.toml --seed 1 --backend local"),
        "{out}"
    );
    let cases = validate(&std::fs::read_to_string(&path).unwrap());
    let suites: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(suites.len(), 2, "one suite per scenario: {suites:?}");
    // one case per scenario x backend x property, whatever the number of seeds
    let mut keys: Vec<_> = cases.iter().map(|c| (&c.0, &c.2)).collect();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn junit_escapes_what_xml_does_not_allow() {
    let nasty = "a < b && c > \"d\" 'e'\u{1}\nnext line ]]> </failure>";
    let xml = junit::render(&[
        Case {
            scenario: "s<&>".into(),
            backend: "b\"'".into(),
            property: "ceiling".into(),
            outcome: CaseOutcome::Fail {
                witness: nasty.into(),
                reproduce: "pacesim run 'it''s.toml' --seed 1 --backend b".into(),
            },
        },
        Case {
            scenario: "s<&>".into(),
            backend: "b\"'".into(),
            property: "self_heal".into(),
            outcome: CaseOutcome::Skipped,
        },
    ]);
    let cases = validate(&xml);
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0].0, "s<&>");
    assert_eq!(cases[0].1, "pacesim.s<&>.b\"'");
    let (message, text) = cases[0].3.as_ref().unwrap();
    assert_eq!(message, "a < b && c > \"d\" 'e'\nnext line ]]> </failure>");
    assert!(
        text.starts_with("a < b && c > \"d\" 'e'\nnext line ]]> </failure>\nreproduce: "),
        "{text}"
    );
}
