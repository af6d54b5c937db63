//! What `expect_checks` may say beside `expect`: every check's name, and nothing that contradicts
//! `expect` (the run's verdict, mutual exclusion's). Beside `tests.rs`, which is full.

use super::tests::GOOD;
use super::*;
use crate::check::{CHECK_NAMES, MUTUAL_EXCLUSION};

#[test]
fn every_check_name_is_accepted_in_expect_checks() {
    for c in CHECK_NAMES {
        // Mutual exclusion's expectation is `expect` itself: stated safe, so is `expect`.
        let expect = if *c == MUTUAL_EXCLUSION {
            "safe"
        } else {
            "violation"
        };
        let text = GOOD.replace(
            "expect = \"violation\"",
            &format!("expect = \"{expect}\"\nexpect_checks = {{ {c} = \"safe\" }}"),
        ) + "[checks]\nmin_throughput = 0.5\n";
        let s = Scenario::parse("t.toml", &text).unwrap();
        assert_eq!(s.expected(c), Some(Verdict::Safe));
    }
    // The throughput check runs only with a minimum; expecting it without one is an error.
    let text = GOOD.replace(
        "expect = \"violation\"",
        "expect = \"violation\"\nexpect_checks = { throughput = \"safe\" }",
    );
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(
        e.message.contains(
            "`expect_checks` names `throughput`, which runs only when `[checks] min_throughput` is set"
        ),
        "{e}"
    );
    let text = GOOD.to_string() + "[checks]\nmin_throughput = 1.5\n";
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("[0, 1]"), "{e}");
    let text = GOOD.to_string() + "[checks]\nliveness_bound_ms = 250\n";
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.checks.liveness_bound_ms(100), 250);
    let s = Scenario::parse("t.toml", GOOD).unwrap();
    assert_eq!(s.checks.liveness_bound_ms(100), 300);
    let text = GOOD.replace(
        "expect = \"violation\"",
        "expect = \"violation\"\nexpect_checks = { damage = \"safe\" }",
    );
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("`foreign_release`"), "{e}");
}

/// `expect` is the expectation of the run's verdict, mutual exclusion's: an `expect_checks` entry
/// for mutual exclusion that says otherwise is refused at the entry, either way round. Other
/// checks' entries state what `expect` leaves open (or overrides, for `expect = "safe"`), so
/// none of them contradicts it.
#[test]
fn an_expect_that_contradicts_expect_checks_is_refused_at_the_entry() {
    for (expect, me) in [("safe", "violation"), ("violation", "safe")] {
        let text = GOOD.replace(
            "expect = \"violation\"",
            &format!(
                "expect = \"{expect}\"\nexpect_checks = {{ resource = \"safe\", {MUTUAL_EXCLUSION} = \"{me}\" }}"
            ),
        );
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        // GOOD starts with an empty line: `expect` is on line 3, `expect_checks` on line 4, and
        // the error points at the `mutual_exclusion` key, not at the table's start.
        let col = text.lines().nth(3).unwrap().find(MUTUAL_EXCLUSION).unwrap() + 1;
        assert_eq!((e.line, e.column), (4, col), "{e}");
        assert!(
            e.message.contains(&format!(
                "`expect_checks` says `{MUTUAL_EXCLUSION} = \"{me}\"`, but `expect = \"{expect}\"` (line 3)"
            )),
            "{e}"
        );
        assert!(e.message.contains("they contradict"), "{e}");
        // Agreeing, it loads; so does `expect = "safe"` with another check expected violated.
        let ok = text.replace(
            &format!("{MUTUAL_EXCLUSION} = \"{me}\""),
            &format!("{MUTUAL_EXCLUSION} = \"{expect}\""),
        );
        Scenario::parse("t.toml", &ok).unwrap();
    }
    for other in CHECK_NAMES.iter().filter(|c| **c != MUTUAL_EXCLUSION) {
        for (expect, verdict) in [
            ("safe", "violation"),
            ("violation", "safe"),
            ("safe", "safe"),
            ("violation", "violation"),
        ] {
            let text = GOOD.replace(
                "expect = \"violation\"",
                &format!("expect = \"{expect}\"\nexpect_checks = {{ {other} = \"{verdict}\" }}"),
            ) + "[checks]\nmin_throughput = 0.5\n";
            Scenario::parse("t.toml", &text)
                .unwrap_or_else(|e| panic!("{other} {expect} {verdict}: {e}"));
        }
    }
}
