//! JUnit XML for CI: GitHub Actions, GitLab and Jenkins all show a JUnit file as a test report,
//! so a suite run becomes one test case per scenario and mode, with the verdict summary and the
//! replay command on a failure and the reason on a skip.
//!
//! The XML is written by `quick-junit`, a maintained crate that follows the schema those CI
//! systems read, rather than by hand. The input is a plain [`Case`], independent of how the
//! runner judges a scenario, so every command (`run`, `explore`, `table`) can feed it.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::Path;
use std::time::Duration;

/// What became of one scenario in one mode: the CI-facing result of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseResult {
    /// The verdicts were what the scenario expects.
    Passed,
    /// A verdict differs from its expectation.
    Failed {
        /// Which verdict differs, in one line: the JUnit failure message.
        summary: String,
        /// The command that reproduces the run, so a CI failure can be replayed locally.
        replay: String,
    },
    /// The scenario did not run in this mode.
    Skipped {
        /// Why not (for example no real-mode recipe), so a skip is never silent.
        reason: String,
    },
}

/// One test case: a scenario run in one mode (`sim` or `real`).
#[derive(Clone, Debug)]
pub struct Case {
    /// The scenario's name.
    pub scenario: String,
    /// `sim` or `real`: the JUnit class name, so CI groups cases by mode.
    pub mode: String,
    /// Passed, failed or skipped, with what CI shows for each.
    pub result: CaseResult,
    /// Wall time the run took.
    pub time: Duration,
}

/// Builds the JUnit report for one suite (`suite` names it, e.g. the scenario directory).
pub fn report(suite: &str, cases: &[Case]) -> Report {
    let mut test_suite = TestSuite::new(suite);
    let mut total = Duration::ZERO;
    for case in cases {
        let status = match &case.result {
            CaseResult::Passed => TestCaseStatus::success(),
            CaseResult::Failed { summary, replay } => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(summary.as_str())
                    .set_type("verdict")
                    .set_description(format!("{summary}\nreplay: {replay}"));
                s
            }
            CaseResult::Skipped { reason } => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(reason.as_str());
                s
            }
        };
        let mut test_case = TestCase::new(case.scenario.as_str(), status);
        test_case
            .set_classname(format!("lockcheck.{}", case.mode))
            .set_time(case.time);
        test_suite.add_test_case(test_case);
        total += case.time;
    }
    test_suite.set_time(total);
    let mut report = Report::new("lockcheck");
    report.set_time(total).add_test_suite(test_suite);
    report
}

/// Writes the report to `path`; the error names the file, for the exit-2 message.
pub fn write(path: &Path, suite: &str, cases: &[Case]) -> Result<(), String> {
    let xml = report(suite, cases)
        .to_string()
        .map_err(|e| format!("{}: cannot serialize JUnit report: {e}", path.display()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create its directory: {e}", path.display()))?;
    }
    std::fs::write(path, xml).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases() -> Vec<Case> {
        vec![
            Case {
                scenario: "failover-lock-loss".into(),
                mode: "sim".into(),
                result: CaseResult::Passed,
                time: Duration::from_millis(12),
            },
            Case {
                scenario: "set-nx-px-safe".into(),
                mode: "sim".into(),
                result: CaseResult::Failed {
                    summary: "mutual_exclusion: unsafe, expected safe".into(),
                    replay: "lockcheck run scenarios/set-nx-px-safe.toml --seed 3".into(),
                },
                time: Duration::from_millis(7),
            },
            Case {
                scenario: "naive-crash-after-setnx".into(),
                mode: "real".into(),
                result: CaseResult::Skipped {
                    reason: "no real-mode recipe for crash".into(),
                },
                time: Duration::ZERO,
            },
        ]
    }

    #[test]
    fn junit_parses_back_with_failure_and_skip() {
        let xml = report("scenarios", &cases()).to_string().unwrap();
        let back = Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        assert_eq!(back.tests, 3);
        assert_eq!(back.failures, 1);
        let suite = &back.test_suites[0];
        assert_eq!(suite.name.as_str(), "scenarios");
        assert_eq!(suite.test_cases.len(), 3);
        assert_eq!(suite.test_cases[0].name.as_str(), "failover-lock-loss");
        assert!(matches!(
            suite.test_cases[0].status,
            TestCaseStatus::Success { .. }
        ));
        match &suite.test_cases[1].status {
            TestCaseStatus::NonSuccess {
                kind,
                message,
                description,
                ..
            } => {
                assert_eq!(*kind, NonSuccessKind::Failure);
                assert_eq!(
                    message.as_ref().unwrap().as_str(),
                    "mutual_exclusion: unsafe, expected safe"
                );
                assert!(description
                    .as_ref()
                    .unwrap()
                    .as_str()
                    .contains("replay: lockcheck run scenarios/set-nx-px-safe.toml --seed 3"));
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        match &suite.test_cases[2].status {
            TestCaseStatus::Skipped { message, .. } => assert_eq!(
                message.as_ref().unwrap().as_str(),
                "no real-mode recipe for crash"
            ),
            other => panic!("expected a skip, got {other:?}"),
        }
        assert_eq!(
            suite.test_cases[2].classname.as_ref().unwrap().as_str(),
            "lockcheck.real"
        );
    }

    #[test]
    fn junit_write_names_the_file_on_error() {
        // The parent is a file, so neither the directory nor the file can be made (even as root).
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml/j.xml"));
        let err = write(path, "s", &cases()).unwrap_err();
        assert!(err.starts_with(&format!("{}:", path.display())), "{err}");
    }
}
