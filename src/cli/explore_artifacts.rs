//! `lockcheck explore --junit FILE --report DIR`: a search is one test case (mode `explore`),
//! failed when it found a violation (the failure names the check and replays the written
//! scenario), passed when the budget ran out with none. The report is the found scenario's page.

use crate::explore::SearchResult;
use crate::judge::SeedsOutcome;
use crate::junit::{Case, CaseResult};
use crate::scenario::Scenario;
use crate::suite::{Artifacts, Suite};

/// Writes the search's JUnit case and report page, when asked for.
pub fn write(
    base: &Scenario,
    r: &SearchResult,
    found: Option<(&Scenario, &SeedsOutcome)>,
    artifacts: &Artifacts,
) -> Result<(), String> {
    if artifacts.junit.is_none() && artifacts.report.is_none() {
        return Ok(());
    }
    let title = base
        .path
        .as_ref()
        .map_or(base.name.clone(), |p| p.display().to_string());
    let mut suite = Suite::new(format!("explore {title}"), artifacts.clone());
    let result = match (&r.found, found) {
        (Some(f), Some((_, o))) => CaseResult::Failed {
            summary: format!(
                "explore found a {} violation in {} cases: {}",
                f.check, r.tried, f.outcome.checks[&f.check].summary
            ),
            replay: o.shown.replay(),
        },
        _ => CaseResult::Passed,
    };
    let page = match (&artifacts.report, found) {
        (Some(dir), Some((s, o))) => {
            crate::report_html::write_run(dir, s, o)?;
            Some(crate::report_html::file_name(&s.name, o.shown.mode.name()))
        }
        _ => None,
    };
    suite.add_case(
        Case {
            scenario: base.name.clone(),
            mode: "explore".into(),
            result,
            time: r.elapsed,
        },
        "no violation".into(),
        page,
    );
    suite.finish()
}
