//! Every real run ends by `duration_ms` plus the grace period, whatever its servers do (issue
//! #41 item 7): a server paused for longer than the run, an ensemble crashed for good. Before,
//! the nemesis's wait for a pause's end held the run until the pause was over.

use crate::common::{assert_real_run_ends_in_time, crash_at_300_for_good, down_for_good};
use lockcheck::history::EventKind;

const LOCK: &str = "kind = \"zk-recipe\"\nwait_ms = 2000";

fn table(servers: u32) -> String {
    format!("[zookeeper]\nservers = {servers}\nsession_timeout_ms = 1000\ntick_ms = 100\n")
}

#[test]
fn a_server_paused_past_the_run_ends_it_by_its_grace() {
    let _turn = crate::zookeeper_turn();
    let s = down_for_good(
        "zk-paused-past-the-run",
        LOCK,
        &table(1),
        "\n[[faults]]\nkind = \"pause\"\nnode = \"zookeeper-0\"\nat_ms = 300\nfor_ms = 100000000\n",
    );
    let o = assert_real_run_ends_in_time(&s);
    // The pause was still under way at the end: the history says the run was cut there.
    let cut = o.history.events.iter().any(|e| {
        e.node == *"run"
            && matches!(&e.kind, EventKind::Fault { what } if what.starts_with("run cut at"))
    });
    assert!(cut, "no cut noted:\n{}", o.history.render());
}

#[test]
fn an_ensemble_crashed_for_good_ends_by_its_grace() {
    let _turn = crate::zookeeper_turn();
    let crashes: String = (0..3)
        .map(|i| crash_at_300_for_good(&format!("zookeeper-{i}")))
        .collect();
    let s = down_for_good("zk-crashed-for-good", LOCK, &table(3), &crashes);
    assert_real_run_ends_in_time(&s);
}
