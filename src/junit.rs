//! JUnit XML for CI systems (`--junit FILE` on `run`, `simulate` and `matrix`): one test case
//! per scenario x backend x property, in the structure Jenkins, GitLab, GitHub Actions
//! reporters and Azure Pipelines read:
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
//! the command that reproduces it (`pacesim run FILE --seed N --backend B`).

use std::fmt::Write as _;
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

/// Escape text for an XML attribute value or element text: the five predefined entities, and
/// control characters XML 1.0 does not allow dropped (tab, newline and carriage return are kept
/// in text, written as character references in attributes).
pub fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' | '\r' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML document for `cases`, suites in the order their scenarios first appear.
pub fn render(cases: &[Case]) -> String {
    let mut suites: Vec<(&str, Vec<&Case>)> = Vec::new();
    for c in cases {
        match suites.iter_mut().find(|s| s.0 == c.scenario) {
            Some(s) => s.1.push(c),
            None => suites.push((&c.scenario, vec![c])),
        }
    }
    let count = |cs: &[&Case]| {
        let failures = cs
            .iter()
            .filter(|c| matches!(c.outcome, CaseOutcome::Fail { .. }))
            .count();
        let skipped = cs
            .iter()
            .filter(|c| matches!(c.outcome, CaseOutcome::Skipped | CaseOutcome::NotJudged { .. }))
            .count();
        format!(
            r#"tests="{}" failures="{failures}" errors="0" skipped="{skipped}""#,
            cs.len()
        )
    };
    let all: Vec<&Case> = cases.iter().collect();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(x, r#"<testsuites name="pacesim" {}>"#, count(&all));
    for (name, cs) in &suites {
        let _ = writeln!(x, r#"  <testsuite name="{}" {}>"#, escape(name, true), count(cs));
        for c in cs {
            let _ = write!(
                x,
                r#"    <testcase name="{}" classname="{}" time="0""#,
                escape(&format!("{}: {}", c.backend, c.property), true),
                escape(&format!("pacesim.{}.{}", c.scenario, c.backend), true),
            );
            match &c.outcome {
                CaseOutcome::Pass => x.push_str("/>\n"),
                CaseOutcome::Skipped => x.push_str(
                    ">\n      <skipped message=\"the property does not apply to this run\"/>\n    </testcase>\n",
                ),
                CaseOutcome::NotJudged { needs } => {
                    let _ = writeln!(
                        x,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        escape(needs, true)
                    );
                }
                CaseOutcome::Fail { witness, reproduce } => {
                    let _ = writeln!(
                        x,
                        ">\n      <failure message=\"{}\" type=\"{}\">{}\nreproduce: {}</failure>\n    </testcase>",
                        escape(witness, true),
                        escape(&c.property, true),
                        escape(witness, false),
                        escape(reproduce, false)
                    );
                }
            }
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// Write [`render`]`(cases)` to `path`.
pub fn write(path: &Path, cases: &[Case]) -> std::io::Result<()> {
    std::fs::write(path, render(cases))
}

/// Cases from run summaries (`run`, `simulate`): one per scenario x backend x check; with
/// several seeds of one scenario and backend, a case fails when any seed fails (the first
/// failing seed's witness and reproducer). `file` is each summary's scenario file.
pub fn from_summaries<'a>(runs: impl IntoIterator<Item = (&'a Path, &'a crate::summary::Summary)>) -> Vec<Case> {
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
                    reproduce: crate::summary::reproduce(file, s.seed, &s.backend),
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
