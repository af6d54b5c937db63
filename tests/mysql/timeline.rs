//! The HTML timeline's server lanes of a MySQL (MariaDB) server: from hand-written histories (each note worded as
//! its world writes it) and from simulated runs. The timeline (`report_html::timeline`) names no
//! service; these hold that it reads this backend's notes right.

use crate::common::lanes::{names, notes, roles, scenario, spans};
use lockcheck::report_html::timeline::build;

/// A lone server serves alone; its pause (a real `SIGSTOP`, whose resumption says how) and its
/// crash and restart are on its lane, and it comes back serving alone.
#[test]
fn a_standalone_server_keeps_its_role_over_a_restart() {
    let s = scenario("kind = \"mysql-for-update\"", "");
    let h = notes(
        &[
            (10, "mysql-0 paused for 300 ms (SIGSTOP, pid Some(4))"),
            (310, "mysql-0 resumed (SIGCONT)"),
            (400, "mysql-0 killed (SIGKILL, pid Some(4))"),
            (900, "mysql-0 restarted (InnoDB crash recovery)"),
        ],
        1000,
    );
    let t = build(&s, &h);
    assert_eq!(names(&t)[2], ("mysql-0", "node"));
    assert_eq!(
        roles(&t, "mysql-0"),
        [
            ("standalone", 0, 400),
            ("killed", 400, 900),
            ("standalone", 900, 1000)
        ]
    );
    assert_eq!(
        spans(&t, "mysql-0", |s| s.kind == "paused"),
        [("paused", 10, 310)]
    );
}
