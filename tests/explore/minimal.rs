//! The shrinker ends 1-minimal: once a finding is shrunk, removing any one of its remaining
//! faults loses the violation (its last one included: a case that still violates without any
//! fault is written without one).

use super::{explore, options};
use lockcheck::explore::search::violated;
use lockcheck::{Mode, Outcome, Registry};

/// Runs each finding with each of its faults removed in turn: none still violates the found
/// check.
fn assert_one_minimal(fixture: &str, check: Option<&str>) {
    let (_, result, found) = explore(fixture, &options(2000, check));
    let found_case = result.found.expect("something to shrink");
    let r = found.expect("the finding replays");
    assert!(!found_case.cut_short, "no deadline was set");
    let s = &r.scenario;
    for i in 0..s.faults.len() {
        let mut fewer = s.clone();
        let removed = fewer.faults.remove(i);
        let run = Registry::new().run_sim(&fewer, fewer.seed);
        let o = Outcome::judge(&fewer, Mode::Sim, fewer.seed, run.history);
        assert_eq!(
            violated(&o, Some(&found_case.check)),
            None,
            "{fixture}: the finding still violates {} without {removed:?}",
            found_case.check
        );
    }
}

#[test]
fn a_shrunk_lease_expiry_keeps_no_spare_fault() {
    assert_one_minimal("gc-pause-no-faults", None);
}

#[test]
fn a_shrunk_foreign_release_keeps_no_spare_fault() {
    assert_one_minimal("foreign-release-no-faults", Some("foreign_release"));
}

#[test]
fn a_shrunk_failover_keeps_no_spare_fault() {
    assert_one_minimal("failover-no-faults", None);
}
