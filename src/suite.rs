//! What a CI suite run leaves behind besides its text: the JUnit file (`--junit FILE`), the HTML
//! reports (`--report DIR`), the `SKIP` lines of scenarios that cannot run in the mode asked for,
//! and the summary line (passed, failed, skipped, time). `run`, `explore` and `table` feed one
//! [`Suite`] each, case by case, and call [`Suite::finish`] at the end.

use crate::judge::SeedsOutcome;
use crate::junit::{self, Case, CaseResult};
use crate::report_html::{self, IndexRow};
use crate::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a suite writes its artifacts (both optional): the command-line flags `run`, `explore`
/// and `table` share.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Artifacts {
    /// Write a JUnit XML report here: one test case per scenario and mode (failures carry the
    /// verdict and the replay command, skips their reason).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write self-contained HTML reports into this directory: one page per scenario run (a
    /// timeline of clients and Redis nodes, the verdicts, the replay command) and index.html.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// The cases of one suite run, in the order they were reported.
#[derive(Debug)]
pub struct Suite {
    title: String,
    artifacts: Artifacts,
    rows: Vec<IndexRow>,
    started: Instant,
}

/// Why a scenario cannot run in this mode, or `None` when it can: the scenario's faults have no
/// real-mode recipe, or (in simulation) its lock is an external program that needs `--real`.
pub fn skip_reason(scenario: &Scenario, real: bool) -> Option<String> {
    if real {
        // The error reads "cannot run on real processes: <why>"; a SKIP line needs only the why.
        scenario.real_mode_unsupported().map(|r| {
            r.strip_prefix("cannot run on real processes: ")
                .map(str::to_string)
                .unwrap_or(r)
        })
    } else if scenario.lock.kind.is_client_program() {
        Some(
            "lock kind `client-program` runs a client program against real servers lockcheck spawns: add --real"
                .into(),
        )
    } else {
        None
    }
}

/// The failure text of an outcome that does not match its expectation: each differing check,
/// then the shown run's summary of it.
pub fn mismatch_summary(o: &SeedsOutcome) -> String {
    let parts: Vec<String> = o
        .expectations
        .iter()
        .filter(|(_, (e, obs))| e != obs)
        .map(|(name, (e, obs))| {
            let summary = o
                .shown
                .checks
                .get(name)
                .map(|c| format!(" ({})", c.summary))
                .unwrap_or_default();
            format!("{name}: {obs}, expected {e}{summary}")
        })
        .collect();
    parts.join("; ")
}

impl Suite {
    /// A suite titled `title` (the scenario directory or file) writing `artifacts`.
    pub fn new(title: impl Into<String>, artifacts: Artifacts) -> Suite {
        Suite {
            title: title.into(),
            artifacts,
            rows: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Records a judged scenario (writing its page when `--report` is on).
    pub fn add(&mut self, s: &Scenario, o: &SeedsOutcome, time: Duration) -> Result<(), String> {
        let result = if o.matches_expectation() {
            CaseResult::Passed
        } else {
            CaseResult::Failed {
                summary: mismatch_summary(o),
                replay: o.shown.replay(),
            }
        };
        let page = match &self.artifacts.report {
            Some(dir) => {
                report_html::write_run(dir, s, o)?;
                Some(report_html::file_name(&s.name, o.shown.mode.name()))
            }
            None => None,
        };
        self.rows.push(IndexRow {
            case: Case {
                scenario: s.name.clone(),
                mode: o.shown.mode.name().into(),
                result,
                time,
            },
            verdict: o.verdict().to_string(),
            expected: s.expect.to_string(),
            page,
        });
        Ok(())
    }

    /// Records a scenario that did not run in `mode`, and why.
    pub fn skip(&mut self, s: &Scenario, mode: &str, reason: &str) {
        self.add_case(
            Case {
                scenario: s.name.clone(),
                mode: mode.into(),
                result: CaseResult::Skipped {
                    reason: reason.into(),
                },
                time: Duration::ZERO,
            },
            s.expect.to_string(),
            None,
        );
    }

    /// Removes from `indices` the scenarios that cannot run in this mode, printing
    /// `SKIP <name>: <reason>` for each (to stderr under `--json`, which owns stdout) and
    /// recording it as a skipped case.
    pub fn skip_unrunnable(
        &mut self,
        scenarios: &[Scenario],
        indices: &mut Vec<u64>,
        real: bool,
        json: bool,
    ) {
        let mode = if real { "real" } else { "sim" };
        indices.retain(|&i| {
            let s = &scenarios[i as usize];
            let Some(reason) = skip_reason(s, real) else {
                return true;
            };
            if json {
                eprintln!("SKIP {}: {reason}", s.name);
            } else {
                crate::outln!("SKIP {}: {reason}", s.name);
            }
            self.skip(s, mode, &reason);
            false
        });
    }

    /// Records any other case (an explore search, for instance), with its page if it has one.
    pub fn add_case(&mut self, case: Case, expected: String, page: Option<String>) {
        self.rows.push(IndexRow {
            case,
            verdict: String::new(),
            expected,
            page,
        });
    }

    /// (passed, failed, skipped).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for r in &self.rows {
            match r.case.result {
                CaseResult::Passed => c.0 += 1,
                CaseResult::Failed { .. } => c.1 += 1,
                CaseResult::Skipped { .. } => c.2 += 1,
            }
        }
        c
    }

    /// `summary: 29 passed, 0 failed, 2 skipped, 4.210 s`.
    pub fn summary(&self) -> String {
        let (p, f, s) = self.counts();
        format!(
            "summary: {p} passed, {f} failed, {s} skipped, {:.3} s",
            self.started.elapsed().as_secs_f64()
        )
    }

    /// Writes the JUnit file and the report index (when asked for); the error names the file.
    pub fn finish(&self) -> Result<(), String> {
        if let Some(path) = &self.artifacts.junit {
            let cases: Vec<Case> = self.rows.iter().map(|r| r.case.clone()).collect();
            junit::write(path, &self.title, &cases)?;
        }
        if let Some(dir) = &self.artifacts.report {
            report_html::write_index(dir, &format!("lockcheck: {}", self.title), &self.rows)?;
        }
        Ok(())
    }
}

/// Runs `f` and measures how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let r = f();
    (r, started.elapsed())
}

/// A suite's title from the path it ran: the directory or file as given.
pub fn title(path: &Path) -> String {
    path.display().to_string()
}
