//! `--report DIR`: HTML reports a person opens after a CI run. One self-contained page per
//! scenario run (a timeline of the clients and servers, the verdict per checker, the replay
//! command, the whole history), an `index.html` for a suite, and for `lockcheck model` the
//! counterexample's steps. Jepsen's `timeline.html` and stateright's Explorer are the models.
//!
//! Pages are deterministic (the same run gives the same bytes) and need no network.

mod fault_notes;
pub mod model;
pub mod page;
pub mod timeline;

use crate::history::fmt_ms;
use crate::judge::SeedsOutcome;
use crate::junit::{Case, CaseResult};
use crate::scenario::Scenario;
use page::{esc, table};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The file name of a scenario's page in one mode: `<name>.<mode>.html`.
pub fn file_name(scenario: &str, mode: &str) -> String {
    let safe: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.{mode}.html")
}

/// The page of one scenario run (the run `outcome.shown`, over `outcome.seeds_run` seeds).
pub fn run_page(scenario: &Scenario, outcome: &SeedsOutcome) -> String {
    let r = &outcome.shown;
    let ok = outcome.matches_expectation();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>{}</h1>\n<p class=\"sub\">{} · {} · seed {}{} · trace {}</p>",
        esc(&scenario.name),
        esc(&scenario.about),
        r.mode.name(),
        r.seed,
        if outcome.seeds_run > 1 {
            format!(" (shown; {} seeds run)", outcome.seeds_run)
        } else {
            String::new()
        },
        esc(&r.trace_hash)
    );
    let _ = writeln!(
        body,
        "<p id=\"verdict\" class=\"verdict {}\">{} ({})</p>",
        if ok { "pass" } else { "fail" },
        outcome.headline_word(),
        esc(&outcome.expectation_text(scenario)),
    );
    let _ = writeln!(
        body,
        "<p>replay: <code id=\"replay\" class=\"replay\">{}</code></p>",
        esc(&r.replay())
    );
    let tl = timeline::build(scenario, &r.history);
    body.push_str(&page::timeline(
        &serde_json::to_value(&tl).unwrap_or_default(),
    ));
    let mut checks: Vec<_> = r.checks.iter().collect();
    checks.sort_by_key(|(name, _)| name.as_str() != crate::check::MUTUAL_EXCLUSION);
    let rows: Vec<Vec<(String, String)>> = checks
        .iter()
        .map(|(name, c)| {
            let v = c.verdict.to_string();
            vec![
                (String::new(), esc(name)),
                (v.clone(), esc(&v)),
                (
                    String::new(),
                    outcome
                        .expectations
                        .get(*name)
                        .map(|(e, _)| e.to_string())
                        .unwrap_or_default(),
                ),
                (String::new(), esc(&c.summary)),
            ]
        })
        .collect();
    body.push_str("<h2>Verdict per checker</h2>\n");
    body.push_str(&table(
        "checks",
        &["checker", "verdict", "expected", "summary"],
        &rows,
    ));
    if !tl.faults.is_empty() {
        body.push_str("<h2>Faults</h2>\n<ol id=\"faults\">\n");
        for f in &tl.faults {
            let _ = writeln!(body, "<li>{} ms: {}</li>", fmt_ms(f.at_us), esc(&f.what));
        }
        body.push_str("</ol>\n");
    }
    let _ = writeln!(
        body,
        "<details id=\"history\"><summary>History: {} events</summary>\n<pre>{}</pre></details>",
        r.history.events.len(),
        esc(&r.history.render())
    );
    page::document(&format!("{} — lockcheck", scenario.name), &body)
}

/// Writes the page of one run into `dir` (created if needed); returns the file written.
pub fn write_run(
    dir: &Path,
    scenario: &Scenario,
    outcome: &SeedsOutcome,
) -> Result<PathBuf, String> {
    let path = dir.join(file_name(&scenario.name, outcome.shown.mode.name()));
    write(&path, &run_page(scenario, outcome))?;
    Ok(path)
}

/// One row of a suite's index.
#[derive(Clone, Debug)]
pub struct IndexRow {
    /// The case as JUnit has it (scenario, mode, result, time): the index and the JUnit file
    /// report the same cases.
    pub case: Case,
    /// The verdict over the seeds (`violation`/`safe`), empty for a skipped case.
    pub verdict: String,
    /// The verdict the scenario expects, beside the one it got.
    pub expected: String,
    /// The page's file name, relative to the index.
    pub page: Option<String>,
}

/// The suite's `index.html`: one row per scenario and mode, linking to its page.
pub fn index_page(title: &str, rows: &[IndexRow]) -> String {
    let count = |f: fn(&CaseResult) -> bool| rows.iter().filter(|r| f(&r.case.result)).count();
    let passed = count(|c| matches!(c, CaseResult::Passed));
    let failed = count(|c| matches!(c, CaseResult::Failed { .. }));
    let skipped = count(|c| matches!(c, CaseResult::Skipped { .. }));
    let mut body = format!("<h1>{}</h1>\n", esc(title));
    let _ = writeln!(
        body,
        "<p id=\"summary\" class=\"verdict {}\">{passed} passed, {failed} failed, {skipped} skipped</p>",
        if failed == 0 { "pass" } else { "fail" }
    );
    let cells: Vec<Vec<(String, String)>> = rows
        .iter()
        .map(|r| {
            let (status, detail) = match &r.case.result {
                CaseResult::Passed => ("passed", String::new()),
                CaseResult::Failed { summary, replay } => (
                    "failed",
                    format!("{}<br><code>{}</code>", esc(summary), esc(replay)),
                ),
                CaseResult::Skipped { reason } => ("skipped", esc(reason)),
            };
            let name = match &r.page {
                Some(p) => format!("<a href=\"{}\">{}</a>", esc(p), esc(&r.case.scenario)),
                None => esc(&r.case.scenario),
            };
            vec![
                (String::new(), name),
                (String::new(), esc(&r.case.mode)),
                (status.to_string(), status.to_string()),
                (r.verdict.clone(), esc(&r.verdict)),
                (String::new(), esc(&r.expected)),
                (String::new(), format!("{:.3} s", r.case.time.as_secs_f64())),
                (String::new(), detail),
            ]
        })
        .collect();
    body.push_str(&table(
        "runs",
        &[
            "scenario", "mode", "result", "verdict", "expected", "time", "detail",
        ],
        &cells,
    ));
    page::document(title, &body)
}

/// Writes `index.html` into `dir`.
pub fn write_index(dir: &Path, title: &str, rows: &[IndexRow]) -> Result<PathBuf, String> {
    let path = dir.join("index.html");
    write(&path, &index_page(title, rows))?;
    Ok(path)
}

/// Writes a page, creating its directory; the error names the path.
pub fn write(path: &Path, html: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create report directory: {e}", dir.display()))?;
    }
    std::fs::write(path, html).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::{Mode, Outcome};

    /// The run page of bundled scenario `name`, seed 1, in simulation.
    fn page_of(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.toml"));
        let s = Scenario::load(&path).unwrap();
        let history = crate::registry::Registry::new().run_sim(&s, 1).history;
        let o = Outcome::judge(&s, Mode::Sim, 1, history);
        run_page(&s, &SeedsOutcome::aggregate(&s, vec![o]))
    }

    #[test]
    fn run_page_is_self_contained_and_names_the_verdict() {
        let html = page_of("failover-lock-loss");
        assert!(html.contains("VIOLATION (as expected: mutual_exclusion, resource violated)"));
        assert!(html.contains("lockcheck run "), "replay command");
        assert!(html.contains("redis-0-replica-0 promoted to master of group 0"));
        // Nothing is fetched: no external scripts, styles or images.
        for needle in ["src=", "href=\"http", "@import", "url("] {
            assert!(!html.contains(needle), "{needle} in the page");
        }
        // The data the script draws names both clients and the overlap.
        let data = html
            .split("<script id=\"timeline-data\" type=\"application/json\">")
            .nth(1)
            .and_then(|r| r.split("</script>").next())
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["overlaps"].as_array().unwrap().len(), 1);
        assert_eq!(v["lanes"][1]["name"], "client-1");
    }

    /// The headline is every check's, as the text report's: a run whose mutual exclusion held
    /// but whose liveness failed (as expected) says so, not "SAFE (as expected)".
    #[test]
    fn run_page_headline_names_every_check() {
        let html = page_of("naive-crash-after-setnx");
        assert!(
            html.contains("VIOLATION (as expected: liveness violated, mutual_exclusion safe)"),
            "{}",
            html.lines()
                .find(|l| l.contains("id=\"verdict\""))
                .unwrap_or("")
        );
    }

    #[test]
    fn index_counts_and_links() {
        let row = |name: &str, result| IndexRow {
            case: Case {
                scenario: name.into(),
                mode: "sim".into(),
                result,
                time: std::time::Duration::from_millis(5),
            },
            verdict: "safe".into(),
            expected: "safe".into(),
            page: Some(file_name(name, "sim")),
        };
        let html = index_page(
            "suite",
            &[
                row("a", CaseResult::Passed),
                row(
                    "b <x>",
                    CaseResult::Skipped {
                        reason: "no recipe".into(),
                    },
                ),
            ],
        );
        assert!(html.contains("1 passed, 0 failed, 1 skipped"), "{html}");
        assert!(html.contains("<a href=\"a.sim.html\">a</a>"));
        assert!(html.contains("b &lt;x&gt;"));
        assert!(html.contains("href=\"b__x_.sim.html\""));
    }
}
