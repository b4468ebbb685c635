//! JUnit XML for CI systems (`--junit FILE` on `run`, `simulate`, `matrix`, `live` and
//! `conform`): one test case per scenario x backend x property (for `conform`, one per
//! comparison of live with simulated), in the structure Jenkins, GitLab, GitHub Actions
//! reporters and Azure Pipelines read (written by the quick-junit crate):
//!
//! ```xml
//! <testsuites name="pacesim" tests="3" failures="1" errors="0" skipped="1">
//!   <testsuite name="four-limiters" tests="3" failures="1" errors="0" skipped="1">
//!     <testcase name="local: ceiling" classname="pacesim.four-limiters.local" time="0">
//!       <failure message="(the checker's witness)" type="ceiling">(witness, reproducer)</failure>
//!     </testcase>
//!     <testcase name="row: self_heal" classname="pacesim.four-limiters.row" time="0">
//!       <skipped message="the property does not apply to this run"/>
//!     </testcase>
//!   </testsuite>
//! </testsuites>
//! ```
//!
//! A suite is a scenario; a case's `classname` is `pacesim.<scenario>.<backend>` and its name
//! `<backend>: <property>`. A failure's `message` is the checker's witness and its text adds
//! the command that reproduces it (`pacesim run FILE --seed N --backend B`; for a live run,
//! the `pacesim live` command).

use std::path::Path;

/// One test case: a property of one scenario run with one backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The scenario (the suite).
    pub scenario: String,
    /// The backend.
    pub backend: String,
    /// The property (checker verdict name).
    pub property: String,
    /// What happened.
    pub outcome: CaseOutcome,
}

/// A test case's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseOutcome {
    /// The property held.
    Pass,
    /// The property failed: the checker's witness and the command that reproduces it.
    Fail {
        /// The checker's witness (one line).
        witness: String,
        /// `pacesim run FILE --seed N --backend B`.
        reproduce: String,
    },
    /// The property does not apply to this run.
    Skipped,
    /// The run lacks what the check needs: neither a pass nor a failure (`<skipped>` with the
    /// checker's detail, which says what it needs).
    NotJudged {
        /// What the check needs (the checker's detail).
        needs: String,
    },
}

/// The JUnit XML document for `cases`, suites in the order their scenarios first appear.
///
/// The model and the serialiser are quick-junit's (nextest's). One thing is added after it:
/// quick-xml escapes the five entities in an attribute but leaves a newline, tab or carriage
/// return as is, which every XML reader then turns into a space (attribute-value
/// normalisation); a witness of several lines keeps them as character references here.
pub fn render(cases: &[Case]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut suites: Vec<TestSuite> = Vec::new();
    for c in cases {
        let status = match &c.outcome {
            CaseOutcome::Pass => TestCaseStatus::success(),
            CaseOutcome::Skipped => {
                let mut s = TestCaseStatus::skipped();
                s.set_message("the property does not apply to this run");
                s
            }
            CaseOutcome::NotJudged { needs } => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(needs.as_str());
                s
            }
            CaseOutcome::Fail { witness, reproduce } => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(witness.as_str())
                    .set_type(c.property.as_str())
                    .set_description(format!("{witness}\nreproduce: {reproduce}"));
                s
            }
        };
        let mut case = TestCase::new(format!("{}: {}", c.backend, c.property), status);
        case.set_classname(format!("pacesim.{}.{}", c.scenario, c.backend))
            .set_time(std::time::Duration::ZERO);
        match suites.iter_mut().find(|s| s.name.as_str() == c.scenario) {
            Some(s) => {
                s.add_test_case(case);
            }
            None => {
                let mut s = TestSuite::new(c.scenario.as_str());
                s.add_test_case(case);
                suites.push(s);
            }
        }
    }
    let mut report = Report::new("pacesim");
    report.add_test_suites(suites);
    let xml = report.to_string().expect("JUnit XML serialises to a string");
    references_in_attributes(&xml)
}

/// `xml` with each newline, carriage return and tab inside a tag (so inside an attribute value:
/// quick-xml escapes `<` and `>` everywhere else, so a `<` always opens a tag and a `>` closes
/// it) written as a character reference; element text is left as it is.
fn references_in_attributes(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut in_tag = false;
    for c in xml.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ => {}
        }
        match c {
            '\n' if in_tag => out.push_str("&#10;"),
            '\r' if in_tag => out.push_str("&#13;"),
            '\t' if in_tag => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

/// Write [`render`]`(cases)` to `path`.
pub fn write(path: &Path, cases: &[Case]) -> std::io::Result<()> {
    std::fs::write(path, render(cases))
}

/// Cases from run summaries (`run`, `simulate`): one per scenario x backend x check; with
/// several seeds of one scenario and backend, a case fails when any seed fails (the first
/// failing seed's witness and reproducer). `file` is each summary's scenario file.
pub fn from_summaries<'a>(runs: impl IntoIterator<Item = (&'a Path, &'a crate::summary::Summary)>) -> Vec<Case> {
    from_summaries_with(runs, |file, s| crate::summary::reproduce(file, s.seed, &s.backend))
}

/// [`from_summaries`] with the reproducer of a failure given by `reproduce(file, summary)`
/// (`live`: the live command, not the simulation's).
pub(crate) fn from_summaries_with<'a>(
    runs: impl IntoIterator<Item = (&'a Path, &'a crate::summary::Summary)>,
    reproduce: impl Fn(&Path, &crate::summary::Summary) -> String,
) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for (file, s) in runs {
        for (name, c) in &s.checks {
            let outcome = match c.verdict {
                crate::check::Status::Pass => CaseOutcome::Pass,
                crate::check::Status::NotJudged => CaseOutcome::NotJudged {
                    needs: c.detail.clone(),
                },
                crate::check::Status::Fail => CaseOutcome::Fail {
                    witness: c.detail.clone(),
                    reproduce: reproduce(file, s),
                },
            };
            match cases
                .iter_mut()
                .find(|k| k.scenario == s.scenario && k.backend == s.backend && &k.property == name)
            {
                // a failing seed decides; a seed not judged outranks a pass
                Some(k) => {
                    let replace = matches!(
                        (&k.outcome, &outcome),
                        (CaseOutcome::Pass, _) | (CaseOutcome::NotJudged { .. }, CaseOutcome::Fail { .. })
                    );
                    if replace {
                        k.outcome = outcome;
                    }
                }
                None => cases.push(Case {
                    scenario: s.scenario.clone(),
                    backend: s.backend.clone(),
                    property: name.clone(),
                    outcome,
                }),
            }
        }
    }
    cases
}
