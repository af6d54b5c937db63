//! Every real run ends by `duration_ms` plus the grace period, whatever its servers do (issue
//! #41 item 7): before, a crash of `mysql-0` whose restart fell after the run held the run until
//! that restart (the nemesis's settle waited for the server's pid).

use crate::common::{assert_real_run_ends_in_time, crash_at_300_for_good, down_for_good};

const LOCK: &str = "kind = \"mysql-for-update\"\nlock_wait_timeout_s = 1\nwait_ms = 2000";

#[test]
fn a_server_crashed_for_good_ends_the_run_by_its_grace() {
    let _turn = crate::mariadb_turn();
    let faults = crash_at_300_for_good("mysql-0");
    assert_real_run_ends_in_time(&down_for_good("mysql-crashed-for-good", LOCK, "", &faults));
}
