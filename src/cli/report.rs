//! Reports: the text a person reads (verdict first, then the two holders, then how to replay) and
//! the JSON object of the CLI contract.

use crate::check::MUTUAL_EXCLUSION;
use crate::history::{fmt_ms, EventKind};
use crate::judge::SeedsOutcome;
use crate::scenario::Scenario;
use std::fmt::Write as _;

/// The full text report of one scenario.
pub fn text(scenario: &Scenario, o: &SeedsOutcome) -> String {
    let r = &o.shown;
    let mut out = String::new();
    let ok = if o.matches_expectation() {
        "as expected"
    } else {
        "NOT AS EXPECTED"
    };
    let seeds = if o.seeds_run > 1 {
        let v = &o.violating_seeds[MUTUAL_EXCLUSION];
        format!(
            ", {} of {} seeds violated, showing seed {}",
            v.len(),
            o.seeds_run,
            r.seed
        )
    } else {
        format!(", seed {}", r.seed)
    };
    let _ = writeln!(
        out,
        "{} ({ok}: expected {}) — {} [{}{seeds}]",
        o.verdict().to_string().to_uppercase(),
        scenario.expect,
        scenario.name,
        r.mode.name(),
    );
    if !scenario.about.is_empty() {
        let _ = writeln!(out, "  {}", scenario.about);
    }
    // The headline check first, the damage checks after it.
    let mut checks: Vec<_> = r.checks.iter().collect();
    checks.sort_by_key(|(name, _)| name.as_str() != MUTUAL_EXCLUSION);
    for (name, c) in checks {
        let expected = o
            .expectations
            .get(name)
            .map(|(e, _)| format!(" (expected {e})"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {name}: {}{expected} — {}", c.verdict, c.summary);
        for line in &c.timeline {
            let _ = writeln!(out, "    {line}");
        }
    }
    let faults: Vec<String> = r
        .history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault { what } => Some(format!("    {:>10} ms  {what}", fmt_ms(e.at_us))),
            _ => None,
        })
        .collect();
    if !faults.is_empty() {
        let _ = writeln!(out, "  faults:");
        for f in faults.iter().take(12) {
            let _ = writeln!(out, "{f}");
        }
    }
    if let Some(c) = super::unstarted_cycles::cut_short(scenario, &r.history) {
        let _ = writeln!(out, "  warning: {c}");
    }
    let _ = writeln!(
        out,
        "  history: {} events, trace {}",
        r.history.events.len(),
        r.trace_hash
    );
    let _ = writeln!(out, "replay: {}", r.replay());
    out
}

/// One line for directory runs.
pub fn line(scenario: &Scenario, o: &SeedsOutcome) -> String {
    let r = &o.shown;
    format!(
        "{}  {:<32} {:<9} (expected {:<9}) {} seed={} trace={}",
        if o.matches_expectation() {
            "PASS"
        } else {
            "FAIL"
        },
        scenario.name,
        o.verdict().to_string(),
        scenario.expect.to_string(),
        r.mode.name(),
        r.seed,
        r.trace_hash
    )
}

/// The JSON object of the CLI contract.
pub fn json(scenario: &Scenario, o: &SeedsOutcome) -> serde_json::Value {
    let r = &o.shown;
    let checks: serde_json::Map<String, serde_json::Value> = r
        .checks
        .iter()
        .map(|(name, c)| {
            let mut obj = serde_json::json!({
                "verdict": c.verdict,
                "summary": c.summary,
            });
            if let (Some(m), serde_json::Value::Object(ev)) = (obj.as_object_mut(), &c.evidence) {
                for (k, v) in ev {
                    m.insert(k.clone(), v.clone());
                }
            }
            if let Some((e, _)) = o.expectations.get(name) {
                obj["expected"] = serde_json::json!(e);
            }
            (name.clone(), obj)
        })
        .collect();
    let cut_short = super::unstarted_cycles::cut_short(scenario, &r.history).map(|c| c.json());
    serde_json::json!({
        "scenario": scenario.name,
        "cycles_cut_short": cut_short,
        "mode": r.mode.name(),
        "seed": r.seed,
        "seeds_run": o.seeds_run,
        "violating_seeds": o.violating_seeds,
        "verdict": o.verdict(),
        "expected": scenario.expect,
        "matches_expectation": o.matches_expectation(),
        "checks": checks,
        "trace_hash": r.trace_hash,
        "replay": r.replay(),
    })
}
