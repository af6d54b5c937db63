//! `lockcheck model … --report DIR`: the model checker's result as a page, with the
//! counterexample (or the example of a `sometimes` property) step by step: the tick, the action,
//! and what each step changed, the last step of a counterexample marked as the one that breaks
//! the property. stateright's Explorer shows the same path interactively.

use super::page::{self, esc, table};
use lockcheck_models::{Finding, ModelReport, PropertyKind, Step};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The page's file name: `model-<name>-<property>.html`.
pub fn file_name(report: &ModelReport) -> String {
    format!("model-{}-{}.html", report.model, report.property)
}

/// The page of one model-checking run.
pub fn model_page(report: &ModelReport) -> String {
    let ok = report.matches_expectation();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>model {}: {}</h1>\n<p class=\"sub\">{}</p>",
        esc(&report.model),
        esc(&report.property),
        esc(&report.property_about)
    );
    let _ = writeln!(
        body,
        "<p id=\"verdict\" class=\"verdict {}\">{} (expected {}: {})</p>",
        if ok { "pass" } else { "fail" },
        esc(&report.outcome.headline(report.property_kind)),
        report.expected.as_str(),
        if report.is_bounded() {
            "not decided within the bound"
        } else if ok {
            "matches"
        } else {
            "DOES NOT MATCH"
        }
    );
    let params: Vec<String> = report
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(
        body,
        "<p>params: <code>{}</code> · search: {}, {} unique states, depth {} · 1 tick = {} ms</p>",
        esc(&params.join(" ")),
        report.strategy.as_str(),
        report.unique_states,
        report.depth_reached,
        report.tick_ms
    );
    let (title, steps, last_breaks): (&str, &[Step], bool) =
        match (&report.outcome, report.property_kind) {
            (Finding::Violated { trace, .. }, PropertyKind::Always) => {
                ("Counterexample", trace, true)
            }
            (Finding::Holds { .. }, PropertyKind::Sometimes) => {
                ("Example", report.witness.as_deref().unwrap_or(&[]), false)
            }
            _ => ("No trace", &[], false),
        };
    if steps.is_empty() {
        body.push_str("<p id=\"no-trace\">No trace: the checker found no path to show.</p>\n");
    } else {
        let _ = writeln!(
            body,
            "<h2>{title}: {} steps</h2>\n<p id=\"initial\">initial: {}</p>",
            steps.len(),
            esc(&report.initial.join("; "))
        );
        let rows: Vec<Vec<(String, String)>> = steps
            .iter()
            .map(|s| {
                vec![
                    (String::new(), s.index.to_string()),
                    (
                        String::new(),
                        format!("{} ({} ms)", s.tick, u64::from(s.tick) * report.tick_ms),
                    ),
                    (String::new(), esc(&s.action)),
                    (
                        String::new(),
                        esc(&s.changes.join("\n")).replace('\n', "<br>"),
                    ),
                ]
            })
            .collect();
        let mut t = table("steps", &["step", "tick", "action", "changes"], &rows);
        if last_breaks {
            // The last row is the step after which the property no longer holds.
            if let Some(i) = t.rfind("<tr><td>") {
                t.replace_range(i..i + 4, "<tr class=\"violating-step\">");
            }
        }
        body.push_str(&t);
    }
    if let Some(note) = &report.scenario_note {
        let _ = writeln!(body, "<p>scenario: {}</p>", esc(note));
    }
    let _ = writeln!(
        body,
        "<h2>Text report</h2>\n<pre>{}</pre>",
        esc(&report.to_text())
    );
    page::document(
        &format!("model {} {} — lockcheck", report.model, report.property),
        &body,
    )
}

/// Writes the page into `dir`; returns the file written.
pub fn write_model(dir: &Path, report: &ModelReport) -> Result<PathBuf, String> {
    let path = dir.join(file_name(report));
    super::write(&path, &model_page(report))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_counterexample_is_a_step_table() {
        let report = lockcheck_models::run("failover", &Default::default()).unwrap();
        let Finding::Violated { trace, .. } = &report.outcome else {
            panic!(
                "the failover model finds a counterexample: {}",
                report.to_text()
            );
        };
        let html = model_page(&report);
        assert!(html.contains("<table id=\"steps\">"));
        assert_eq!(html.matches("<tr class=\"violating-step\">").count(), 1);
        // One header row plus one row per step.
        let table = html.split("<table id=\"steps\">").nth(1).unwrap();
        let table = table.split("</table>").next().unwrap();
        assert_eq!(table.matches("<tr").count(), trace.len() + 1);
        assert!(html.contains(&esc(&trace[0].action)));
    }
}
