//! The defect matrix: every scenario in `sims/` with every backend it compares, against every
//! property, must equal `tests/expected-matrix.toml` (written from the design records'
//! reasoning). And flipping a backend to its defective behaviour must turn it red.

use crate::common;
use pacesim::matrix::{self, Outcome};
use pacesim::scenario::Scenario;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scenarios() -> Vec<Scenario> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("sims"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files.iter().map(|p| pacesim::registry::load(p).unwrap()).collect()
}

fn expected() -> matrix::Expected {
    matrix::load_expected(&root().join("tests/expected-matrix.toml")).unwrap()
}

fn load(name: &str) -> Scenario {
    pacesim::registry::load(&root().join("sims").join(name)).unwrap()
}

#[test]
fn the_matrix_equals_the_expected_matrix() {
    let m = matrix::run(&scenarios(), 1).unwrap();
    let diffs = matrix::compare(&m, &expected());
    assert!(
        diffs.is_empty(),
        "the defect matrix differs from tests/expected-matrix.toml:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn flipping_a_backend_to_its_defect_turns_the_matrix_red() {
    // (a flipped row is named by what differs, issue 53: `row (fallback=fail_open)`)
    // outage-divided with the fallback flipped to fail_open: N x rate during the outage
    let mut sc = load("outage-divided.toml");
    sc.pacer.set("fallback", "'fail_open'");
    sc.pacer.compare = vec!["row".into()];
    let m = matrix::run(&[sc], 1).unwrap();
    let diffs = matrix::compare(&m, &expected());
    println!("{}", diffs.join("\n"));
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("outage-divided/row (fallback=fail_open): degradation must pass but FAILED")),
        "{diffs:?}"
    );

    // backoff-global with the multiplier flipped to per-process
    let mut sc = load("backoff-global.toml");
    sc.pacer.set("backoff", "'per_process'");
    let m = matrix::run(&[sc], 1).unwrap();
    let diffs = matrix::compare(&m, &expected());
    println!("{}", diffs.join("\n"));
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("backoff-global/row (backoff=per_process): backoff_coherence must pass but FAILED")),
        "{diffs:?}"
    );
}

#[test]
fn compare_reports_rows_without_expectations_and_vacuous_cells() {
    let mut sc = load("four-limiters.toml");
    sc.name = "not-in-the-file".into();
    sc.pacer.compare = vec!["local".into()];
    let m = matrix::run(&[sc], 2).unwrap();
    assert_eq!(m.rows.len(), 1);
    assert_eq!(m.rows[0].cells["ceiling"].outcome, Outcome::Fail);
    assert_eq!(m.rows[0].cells["self_heal"].outcome, Outcome::NotApplicable);
    let diffs = matrix::compare(&m, &expected());
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].contains("not in the expected matrix (it fails [ceiling, slot_ceiling])"),
        "{diffs:?}"
    );

    // an expectation naming a property that must apply, on a run where it cannot
    let mut e = expected();
    let row = e.get_mut("four-limiters").unwrap().get_mut("row").unwrap();
    row.apply.insert("self_heal".into());
    let mut sc = load("four-limiters.toml");
    sc.pacer.compare = vec!["row".into()];
    let m = matrix::run(&[sc], 1).unwrap();
    let diffs = matrix::compare(&m, &e);
    assert!(
        diffs[0].contains("four-limiters/row: self_heal must apply"),
        "{diffs:?}"
    );
}

#[test]
fn the_cli_prints_the_matrix_as_json() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .args(["matrix", "sims/four-limiters.toml", "--json"])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 5);
    assert_eq!(v["rows"][4]["backend"], "local");
    assert_eq!(v["rows"][4]["cells"]["ceiling"]["outcome"], "fail");
    assert!(v["mismatches"].as_array().unwrap().is_empty());
}

#[test]
fn run_on_a_file_that_is_not_a_scenario_says_what_it_is_in_one_line() {
    let (code, _, err) = common::pacesim(&["run", "tests/expected-matrix.toml"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("tests/expected-matrix.toml: not a scenario: it is an expected matrix"),
        "{err}"
    );
    let (code, _, err) = common::pacesim(&["simulate", "sims/four-limiters.toml", "tests/expected-matrix.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a scenario"), "{err}");
    // a scenario with a mistake is still reported by file, line and field
    let d = std::env::temp_dir().join(format!("pacesim-notscenario-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nbogus = 1\n").unwrap();
    let (code, _, err) = common::pacesim(&["run", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml:2: bogus: unknown field"), "{err}");
    let other = d.join("other.toml");
    std::fs::write(&other, "[server]\nport = 1\n").unwrap();
    let (code, _, err) = common::pacesim(&["run", other.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a scenario: it has none of a scenario's keys"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A team's checker for the test below: the least gap between two arrivals at the
/// destination is at least half an interval (a paced fleet's are one interval apart).
#[derive(Debug)]
struct MinGap {
    half_interval: u64,
    last: Option<u64>,
    least: Option<u64>,
}

impl pacesim::trace::Sink for MinGap {
    fn event(&mut self, ev: &pacesim::trace::Event) {
        if let pacesim::trace::Event::Arrival { t, .. } = *ev {
            if let Some(l) = self.last {
                self.least = Some(self.least.map_or(t - l, |g| g.min(t - l)));
            }
            self.last = Some(t);
        }
    }
}

impl pacesim::check::Checker for MinGap {
    fn verdicts(&mut self) -> Vec<pacesim::check::Verdict> {
        use pacesim::check::{Status, Verdict};
        let (status, detail) = match self.least {
            None => (Status::NotJudged, "not judged: needs two arrivals".to_string()),
            Some(g) => (
                Status::of(g >= self.half_interval),
                format!("least gap {g} ns (at least {} ns)", self.half_interval),
            ),
        };
        vec![Verdict {
            name: "min_gap",
            status,
            detail,
        }]
    }
}

/// Issue 52 item 20: a team's own checker (`check::register`, as `main_with_checkers` does)
/// is a column of the matrix: its verdicts reach the cells, a difference from the expected
/// matrix names it, the expected file may name it, and JUnit has its cases. Registering is once
/// per process, and would add the column to every other test's runs: the test runs itself
/// again, alone, in a process of its own, and that child does the checking.
#[test]
fn a_teams_own_checker_is_a_column_of_the_matrix() {
    const CHILD: &str = "PACESIM_TEST_TEAM_CHECKER_CHILD";
    const NAME: &str = "matrix::a_teams_own_checker_is_a_column_of_the_matrix";
    if std::env::var_os(CHILD).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--test-threads=1", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "the child failed:\n{text}");
        assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
        return;
    }
    pacesim::check::register(vec![pacesim::check::CheckerSpec {
        name: "min_gap",
        summary: "arrivals at least half an interval apart",
        new: |h| {
            Some(Box::new(MinGap {
                half_interval: (5e8 / h.rate) as u64,
                last: None,
                least: None,
            }))
        },
    }])
    .unwrap();
    let dir = std::env::temp_dir().join(format!("pacesim-matrix-team-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sweep-test.toml");
    std::fs::write(&file, include_str!("common/sweep-test.toml")).unwrap();
    let o = matrix::evaluate(vec![file.clone()], 1, None).unwrap();
    let m = &o.matrix;
    assert_eq!(m.columns.last().map(String::as_str), Some("min_gap"), "{:?}", m.columns);
    let cell = |b: &str| {
        let row = m.rows.iter().find(|r| r.backend == b).unwrap();
        row.cells.get("min_gap").map(|c| (c.outcome, c.detail.clone()))
    };
    let (row, local) = (cell("row").unwrap(), cell("local").unwrap());
    assert_eq!(row.0, Outcome::Pass, "row paces its arrivals: {}", row.1);
    assert_eq!(local.0, Outcome::Fail, "local's three pacers do not: {}", local.1);
    // an expectation that leaves it out differs, naming it; one that names it matches
    let failing = m.rows.iter().find(|r| r.backend == "local").unwrap().failing();
    let entry = |fail: &std::collections::BTreeSet<String>| {
        let list: Vec<String> = fail.iter().map(|f| format!("\"{f}\"")).collect();
        format!(
            "[sweep-test]\nrow = {{ fail = [], apply = [\"min_gap\"] }}\nlocal = {{ fail = [{}] }}\n",
            list.join(", ")
        )
    };
    let without: std::collections::BTreeSet<String> = failing.iter().filter(|f| *f != "min_gap").cloned().collect();
    let exp = dir.join("without.toml");
    std::fs::write(&exp, entry(&without)).unwrap();
    let o = matrix::evaluate(vec![file.clone()], 1, Some(&exp)).unwrap();
    assert!(
        !o.matches() && o.mismatches.iter().any(|d| d.contains("min_gap")),
        "{:?}",
        o.mismatches
    );
    let exp = dir.join("with.toml");
    std::fs::write(&exp, entry(&failing)).unwrap();
    let o = matrix::evaluate(vec![file], 1, Some(&exp)).unwrap();
    assert!(o.matches(), "{:?}", o.mismatches);
    let cases = matrix::junit_cases(&o.matrix);
    assert!(
        cases.iter().any(|c| c.backend == "local" && c.property == "min_gap"),
        "JUnit has the team's cases"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
