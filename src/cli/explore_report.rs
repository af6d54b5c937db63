//! What `lockcheck explore` prints.
//!
//! Standard output holds only what the search decided (counts, the minimal scenario, its
//! timeline), so it is byte-identical for any `--jobs`; timings (time to the first violation,
//! shrink time, cases per second) depend on the machine and go to standard error.

use crate::explore::SearchResult;
use crate::judge::SeedsOutcome;
use crate::scenario::Scenario;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// What the report says about a finding: the replayed scenario and where it was written.
pub struct Written<'a> {
    /// The minimal scenario as parsed back from the file.
    pub scenario: &'a Scenario,
    /// Its replay, whose timeline the report prints.
    pub outcome: &'a SeedsOutcome,
    /// The file's text, printed so the finding can be read without opening it.
    pub text: &'a str,
    /// Where the file was written, for the `lockcheck run` line that replays it.
    pub out: &'a Path,
    /// On real servers: how often the file violated when run from the file.
    pub rate: Option<crate::explore::Rate>,
}

/// The text report.
pub fn text(base: &Scenario, r: &SearchResult, written: Option<&Written<'_>>) -> String {
    let mut out = String::new();
    match (&r.found, written) {
        (Some(f), Some(w)) => {
            let _ = writeln!(
                out,
                "FOUND {} violation — {} (case {} of the search, shrunk in {} steps)",
                f.check, base.name, f.index, f.shrink_steps
            );
            if f.run_cut {
                let _ = writeln!(
                    out,
                    "the time limit cut this case's run: the violation is in the part that ran, \
                     judged up to the cut; the case is not shrunk (it may not be minimal) and the \
                     finding was not replayed (`lockcheck run` runs it whole)"
                );
            } else if f.cut_short {
                let _ = writeln!(
                    out,
                    "the time limit cut the shrink short: this case violates, a smaller one may too"
                );
            }
            if let (Some(confirmed), Some(rate)) = (f.confirmed, w.rate) {
                let _ = writeln!(
                    out,
                    "on real servers: the case as drawn violated again in {confirmed}; the minimal scenario violated in {rate}"
                );
            }
            let _ = writeln!(out, "minimal scenario, written to {}:", w.out.display());
            for line in w.text.lines() {
                let _ = writeln!(out, "  | {line}");
            }
            out.push_str(&super::report::text(w.scenario, w.outcome));
        }
        _ => {
            let _ = writeln!(
                out,
                "NOTHING FOUND — {}: no case violated{}",
                base.name,
                if r.cut_run {
                    " before the time limit (it cut the last case's run, judged up to the cut)"
                } else if r.timed_out {
                    " before the time limit"
                } else {
                    ""
                }
            );
        }
    }
    let _ = writeln!(
        out,
        "cases tried: {}, violating: {}, distinct traces: {}, shrink steps: {}",
        r.tried,
        r.violating,
        r.distinct_traces,
        r.found.as_ref().map_or(0, |f| f.shrink_steps)
    );
    if r.skipped > 0 {
        let _ = writeln!(
            out,
            "cases skipped: {} (real mode has no recipe for one of their faults)",
            r.skipped
        );
    }
    out
}

/// The JSON report.
pub fn json(base: &Scenario, r: &SearchResult, written: Option<&Written<'_>>) -> serde_json::Value {
    let found = match (&r.found, written) {
        (Some(f), Some(w)) => serde_json::json!({
            "check": f.check,
            "case": f.index,
            "shrink_steps": f.shrink_steps,
            "shrink_cut_short": f.cut_short,
            "out": w.out.display().to_string(),
            "confirmed": f.confirmed.map(|r| serde_json::json!({"violated": r.violated, "runs": r.runs})),
            "rate": w.rate.map(|r| serde_json::json!({"violated": r.violated, "runs": r.runs})),
            "scenario_toml": w.text,
            "run": super::report::json(w.scenario, w.outcome),
        }),
        _ => serde_json::Value::Null,
    };
    serde_json::json!({
        "scenario": base.name,
        "cases_tried": r.tried,
        "cases_violating": r.violating,
        "distinct_traces": r.distinct_traces,
        "timed_out": r.timed_out,
        "cut_run": r.cut_run,
        "cases_skipped": r.skipped,
        "found": found,
    })
}

/// The timing line (standard error). The rate counts the search alone: shrinking re-runs one
/// case on one thread and is timed apart.
pub fn timing(r: &SearchResult, jobs: usize) -> String {
    let shrink = r.found.as_ref().map_or(Duration::ZERO, |f| f.shrink_time);
    let secs = r.elapsed.saturating_sub(shrink).as_secs_f64().max(1e-9);
    let mut s = format!(
        "{} cases in {:.2} s on {jobs} thread(s): {:.1} cases/s, {:.3} s per case",
        r.tried,
        secs,
        r.tried as f64 / secs,
        secs * jobs.min(r.tried.max(1) as usize) as f64 / r.tried.max(1) as f64
    );
    if let Some(f) = &r.found {
        let _ = write!(
            s,
            "; time to first violation {:.2} s, shrink time {:.2} s ({} steps)",
            f.time_to_first.as_secs_f64(),
            f.shrink_time.as_secs_f64(),
            f.shrink_steps
        );
    }
    s
}
