//! Reports: the text a person reads (verdict first, then the two holders, then how to replay) and
//! the JSON object of the CLI contract.

use crate::check::MUTUAL_EXCLUSION;
use crate::history::{fmt_ms, EventKind};
use crate::judge::SeedsOutcome;
use crate::scenario::Scenario;
use std::fmt::Write as _;

/// The seeds part of the headline: how many seeds violated some check, and each check's count.
fn seeds_text(o: &SeedsOutcome) -> String {
    let seed = o.shown.seed;
    if o.seeds_run <= 1 {
        return format!(", seed {seed}");
    }
    let per_check: Vec<String> = o
        .violated_checks()
        .iter()
        .map(|c| format!("{c} on {}", o.violating_seeds[*c].len()))
        .collect();
    let per_check = if per_check.is_empty() {
        String::new()
    } else {
        format!(" ({})", per_check.join(", "))
    };
    format!(
        ", {} of {} seeds violated{per_check}, showing seed {seed}",
        o.seeds_violating_any, o.seeds_run
    )
}

/// The full text report of one scenario.
pub fn text(scenario: &Scenario, o: &SeedsOutcome) -> String {
    let r = &o.shown;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}) — {} [{}{}]",
        o.headline_word(),
        o.expectation_text(scenario),
        scenario.name,
        r.mode.name(),
        seeds_text(o),
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
    let mismatches: Vec<String> = o.mismatches().iter().map(|m| m.text(o.seeds_run)).collect();
    format!(
        "{}  {:<32} {:<9} (expected {:<9}) {} seed={} trace={}{}",
        if o.matches_expectation() {
            "PASS"
        } else {
            "FAIL"
        },
        scenario.name,
        o.headline_word().to_lowercase(),
        scenario.expect.to_string(),
        r.mode.name(),
        r.seed,
        r.trace_hash,
        if mismatches.is_empty() {
            String::new()
        } else {
            format!(" — {}", mismatches.join("; "))
        }
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
        "any_violation": o.any_violation(),
        "not_as_expected": o.mismatches(),
        "not_judged_seeds": o.not_judged_seeds,
        "checks": checks,
        "trace_hash": r.trace_hash,
        "replay": r.replay(),
    })
}

#[cfg(test)]
mod headline {
    use super::*;
    use crate::history::{Event, EventKind, History};
    use crate::judge::{Mode, Outcome};

    fn scenario(expect_checks: &str) -> Scenario {
        Scenario::parse(
            "t.toml",
            &format!(
                "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\nexpect_checks = {{ {expect_checks} }}\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 1000\n"
            ),
        )
        .unwrap()
    }

    /// A release that answered "released" with nothing removed, with or without the servers'
    /// watching event.
    fn lying_release(watched: bool) -> History {
        let ev = |at_us, node: &str, kind| Event {
            at_us,
            node: node.into(),
            kind,
        };
        let mut events = vec![
            ev(1, "client-0", EventKind::AcquireStart),
            ev(
                2,
                "client-0",
                EventKind::Acquired {
                    owner: "o".into(),
                    fencing_token: None,
                    acquired_at_ms: 0,
                    valid_until_ms: 1000,
                },
            ),
            ev(3, "client-0", EventKind::Enter),
            ev(4, "client-0", EventKind::Exit),
            ev(5, "client-0", EventKind::Released { deleted: true }),
            ev(6, "run", EventKind::RunEnd),
        ];
        if watched {
            let key = "k".into();
            events.insert(
                0,
                ev(
                    0,
                    "servers",
                    EventKind::LockEntriesWatched {
                        key,
                        placed_within_us: 0,
                    },
                ),
            );
        }
        History { events }
    }

    fn report(s: &Scenario, h: History) -> String {
        let o = SeedsOutcome::aggregate(s, vec![Outcome::judge(s, Mode::Sim, 1, h)]);
        text(s, &o)
    }

    /// What explore writes for a release finding (mutual exclusion safe, release violated) is
    /// replayed under a headline that names the release violation, as its FOUND line does.
    #[test]
    fn a_release_finding_is_a_violation_in_the_headline() {
        let s = scenario("release = \"violation\"");
        let out = report(&s, lying_release(true));
        assert!(
            out.starts_with("VIOLATION (as expected: release violated, mutual_exclusion safe)"),
            "{out}"
        );
    }

    /// `expect = "safe"` states every check safe: a release violation with no `expect_checks`
    /// entry is not as expected (before, only mutual exclusion was held to `expect`, and this
    /// exited 0).
    #[test]
    fn a_bare_expect_safe_holds_every_check_to_safe() {
        let s = Scenario::parse(
            "t.toml",
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 1000\n",
        )
        .unwrap();
        let o = SeedsOutcome::aggregate(
            &s,
            vec![Outcome::judge(&s, Mode::Sim, 1, lying_release(true))],
        );
        assert!(!o.matches_expectation());
        let out = text(&s, &o);
        assert!(
            out.starts_with("VIOLATION (NOT AS EXPECTED: release violated, expected safe)"),
            "{out}"
        );
        // Unwatched, the release check cannot judge; nobody stated it, so it neither passes
        // nor fails the run, and the report says it was not judged.
        let o = SeedsOutcome::aggregate(
            &s,
            vec![Outcome::judge(&s, Mode::Sim, 1, lying_release(false))],
        );
        assert!(o.matches_expectation());
        assert!(
            text(&s, &o).contains("  release: not judged"),
            "{}",
            text(&s, &o)
        );
    }

    /// `expect = "violation"` says nothing of the other checks.
    #[test]
    fn expect_violation_leaves_the_other_checks_unstated() {
        let s = Scenario::parse(
            "t.toml",
            "name = \"t\"\nexpect = \"violation\"\nduration_ms = 1000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 1000\n",
        )
        .unwrap();
        let release = crate::check::release::Release::DECLARATION.name;
        assert_eq!(s.expected(release), None);
        assert_eq!(
            s.expected(crate::check::MUTUAL_EXCLUSION),
            Some(crate::check::Verdict::Violation)
        );
    }

    /// A check that could not judge says so, and is not counted as the safe it was expected to be.
    #[test]
    fn not_judged_is_not_safe() {
        let s = scenario("release = \"safe\"");
        let out = report(&s, lying_release(false));
        assert!(
            out.starts_with("SAFE (NOT AS EXPECTED: release not judged, expected safe)"),
            "{out}"
        );
        assert!(
            out.contains("  release: not judged (expected safe) — "),
            "{out}"
        );
    }
}
