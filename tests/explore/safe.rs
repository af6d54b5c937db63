//! Where the lock holds, explore must come back empty over at least 2,000 cases.

use super::{explore, options};

#[test]
fn redlock_with_drift_inside_its_allowance_and_no_jumps() {
    let (_, result, found) = explore("redlock-drift-safe", &options(2000, None));
    assert!(
        found.is_none(),
        "{:?}",
        result.found.map(|f| f.scenario.faults)
    );
    assert_eq!(result.tried, 2000);
    assert!(
        result.distinct_traces > 1900,
        "the cases differ: {}",
        result.distinct_traces
    );
}

#[test]
fn redisson_watchdog_under_pauses_shorter_than_two_thirds_of_its_lease() {
    let (_, result, found) = explore("redisson-short-pauses", &options(2000, None));
    assert!(
        found.is_none(),
        "{:?}",
        result.found.map(|f| f.scenario.faults)
    );
    assert_eq!(result.tried, 2000);
    assert!(
        result.distinct_traces > 1900,
        "the cases differ: {}",
        result.distinct_traces
    );
}

/// Failover alone: the promoted replica may hand out a token again, but without a pause the old
/// holder writes before the new one, so the storage never accepts a stale write. (With pauses
/// added, explore finds the lost update of `finds::fenced_counter_loses_an_update_under_a_short_pause`.)
#[test]
fn fenced_resource_under_failover() {
    let (_, result, found) = explore("fenced-failover", &options(2000, Some("resource")));
    assert!(
        found.is_none(),
        "{:?}",
        result.found.map(|f| f.scenario.faults)
    );
    assert_eq!(result.tried, 2000);
}
