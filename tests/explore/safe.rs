//! Where the lock holds, explore must come back empty over at least 2,000 cases.
//!
//! The default suite tries 2,000 cases of each (a few seconds each on two cores);
//! `LOCKCHECK_EXPLORE_CASES=20000 cargo test --release --test explore safe` searches longer.

use super::{explore, options};
use lockcheck::explore::{search, SearchResult};
use lockcheck::scenario::Scenario;
use lockcheck::scenario::Space;

/// Cases per safe search in the default suite.
const DEFAULT_SAFE_CASES: u64 = 2_000;

/// Cases per safe search: `LOCKCHECK_EXPLORE_CASES`, or `DEFAULT_SAFE_CASES`.
fn safe_cases() -> u64 {
    match std::env::var("LOCKCHECK_EXPLORE_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("LOCKCHECK_EXPLORE_CASES={v:?} is not a number")),
        Err(_) => DEFAULT_SAFE_CASES,
    }
}

/// Explores `fixture` for `safe_cases()` cases and asserts nothing was found, every case ran and
/// (with `varied`) the cases ran into many different histories.
fn assert_safe(fixture: &str, check: Option<&str>, varied: bool) -> SearchResult {
    let cases = safe_cases();
    let (_, result, found) = explore(fixture, &options(cases, check));
    assert!(
        found.is_none(),
        "{fixture}: {:?}",
        result.found.map(|f| f.scenario.faults)
    );
    assert_eq!(result.tried, cases, "{fixture}");
    assert_eq!(result.violating, 0, "{fixture}");
    if varied {
        assert!(
            result.distinct_traces * 100 > cases * 95,
            "{fixture}: the cases differ: {} distinct traces of {cases}",
            result.distinct_traces
        );
    }
    result
}

#[test]
fn redlock_with_drift_inside_its_allowance_and_no_jumps() {
    assert_safe("redlock-drift-safe", None, true);
}

#[test]
fn redisson_watchdog_under_pauses_shorter_than_two_thirds_of_its_lease() {
    assert_safe("redisson-short-pauses", None, true);
}

/// Failover alone: the promoted replica may hand out a token again, but without a pause the old
/// holder writes before the new one, so the storage never accepts a stale write. (With pauses
/// added, explore finds the lost update of `finds::fenced_counter_loses_an_update_under_a_short_pause`.)
#[test]
fn fenced_resource_under_failover() {
    assert_safe("fenced-failover", Some("resource"), false);
}

/// The safe searches can fail: the same fixtures with a pause longer than Redisson's lease, or
/// with drift far beyond Redlock's allowance, violate mutual exclusion within a few dozen cases.
#[test]
fn widening_the_safe_spaces_finds_the_violations() {
    for (fixture, from, to) in [
        (
            "redisson-short-pauses",
            "pause_ms = [1, 390]",
            "pause_ms = [1, 3000]",
        ),
        (
            "redlock-drift-safe",
            "clock_drift_ppm = [-4000, 4000]",
            "clock_drift_ppm = [-300000, 300000]",
        ),
    ] {
        let text = std::fs::read_to_string(super::fixture(fixture)).unwrap();
        assert!(text.contains(from), "{fixture}");
        let base = Scenario::parse(fixture, &text.replace(from, to)).unwrap();
        let space = Space::of(&base).unwrap();
        let result = search(&base, &space, &options(200, None), &|_, _| {});
        let found = result.found.expect(fixture);
        assert_eq!(found.check, "mutual_exclusion", "{fixture}");
    }
}
