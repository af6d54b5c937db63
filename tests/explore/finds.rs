//! What explore must find, starting from no faults.

use super::{explore, fault_kinds, options};
use lockcheck::Verdict;

/// Asserts the replayed finding violates `check` and matches the expectation written into it.
fn assert_found(r: &lockcheck::explore::Replayed, check: &str) {
    let shown = &r.outcome.shown;
    assert_eq!(shown.checks[check].verdict, Verdict::Violation, "{check}");
    assert!(
        r.outcome.matches_expectation(),
        "the found file expects what it does"
    );
    assert_eq!(r.scenario.expected(check), Some(Verdict::Violation));
    assert!(r.scenario.about.contains("Found by lockcheck explore"));
}

#[test]
fn failover_lock_loss_of_set_nx_px_with_one_replica() {
    let (_, result, found) = explore("failover-no-faults", &options(2000, None));
    let r = found.expect("explore finds the failover lock loss");
    assert_eq!(result.found.unwrap().check, "mutual_exclusion");
    assert_found(&r, "mutual_exclusion");
    assert_eq!(
        fault_kinds(&r),
        ["failover"],
        "shrunk to the failover alone"
    );
    assert!(r.scenario.workload.clients <= 2);
}

#[test]
fn lease_expiry_under_a_gc_pause_of_set_nx_px() {
    let (_, _, found) = explore("gc-pause-no-faults", &options(2000, None));
    let r = found.expect("explore finds the lease expiry");
    assert_found(&r, "mutual_exclusion");
    assert_eq!(fault_kinds(&r), ["pause"]);
    // The pause outlasts the holder's remaining lease, which is 1000 ms at most.
    let lockcheck::scenario::FaultKind::Pause { for_ms, .. } = r.scenario.faults[0].kind else {
        unreachable!()
    };
    assert!(for_ms > 0 && for_ms <= 3 * 1000, "{for_ms}");
}

#[test]
fn foreign_release_of_set_ex_nx_del() {
    let (_, _, found) = explore(
        "foreign-release-no-faults",
        &options(2000, Some("foreign_release")),
    );
    let r = found.expect("explore finds a DEL of another client's entry");
    assert_found(&r, "foreign_release");
    assert_eq!(fault_kinds(&r), ["pause"]);
}

#[test]
fn stuck_lock_of_naive_setnx_expire_after_a_crash_while_holding() {
    let (_, _, found) = explore("naive-crash-no-faults", &options(2000, Some("liveness")));
    let r = found.expect("explore finds the lock that never expires");
    assert_found(&r, "liveness");
    assert_eq!(fault_kinds(&r), ["client_crash"]);
    // Only a crash between SETNX and EXPIRE leaves a key with no lease.
    let trigger = format!("{:?}", r.scenario.faults[0].trigger);
    assert!(trigger.contains("after_setnx"), "{trigger}");
}

#[test]
fn redlock_violation_from_clock_jumps() {
    let (_, _, found) = explore("redlock-jump-no-faults", &options(2000, None));
    let r = found.expect("explore finds two Redlock holders after clock jumps");
    assert_found(&r, "mutual_exclusion");
    let kinds = fault_kinds(&r);
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == "clock_jump"),
        "{kinds:?}"
    );
}

/// Fencing refuses a stale write only once a newer token has written: a holder that wakes from a
/// short pause and writes before the next holder does gets its write in, and the next holder's
/// read-modify-write (which read before it) overwrites it. Explore finds that lost update with a
/// single pause.
#[test]
fn fenced_counter_loses_an_update_under_a_short_pause() {
    let (_, _, found) = explore("fenced-pauses", &options(2000, Some("resource")));
    let r = found.expect("explore finds the unfenced read");
    assert_found(&r, "resource");
    assert_eq!(fault_kinds(&r), ["pause"]);
}
