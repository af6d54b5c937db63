//! Every real run ends by `duration_ms` plus the grace period, whatever its servers do (issue
//! #41 item 7): before, a crash of `pg-0` whose restart fell after the run held the run until
//! that restart (the nemesis's settle waited for it).

use crate::common::{assert_real_run_ends_in_time, crash_at_300_for_good, down_for_good};

const LOCK: &str = "kind = \"pg-advisory-lock\"\nwait_ms = 2000";

#[test]
fn a_server_crashed_for_good_ends_the_run_by_its_grace() {
    let _turn = crate::real_turn();
    let faults = crash_at_300_for_good("pg-0");
    assert_real_run_ends_in_time(&down_for_good("pg-crashed-for-good", LOCK, "", &faults));
}
