//! The HTML timeline's server lanes of a ZooKeeper ensemble: from hand-written histories (each note worded as
//! its world writes it) and from simulated runs. The timeline (`report_html::timeline`) names no
//! service; these hold that it reads this backend's notes right.

use crate::common::lanes::{marks, names, notes, roles, scenario, simulated, spans};
use lockcheck::report_html::timeline::build;

/// A three-server ensemble: the leader crashes, another is elected, it expires a cut-off
/// client's session, the old leader comes back as a follower, a follower is paused; the cut
/// runs between a client and a server, so both lanes show it.
#[test]
fn an_ensemble_lane_per_server_with_its_roles_its_expiry_and_its_faults() {
    let s = scenario("kind = \"zk-recipe\"", "[zookeeper]\nservers = 3");
    let h = notes(
        &[
            (
                10,
                "partition: client-0 cut off from zookeeper-1 for 3000 ms",
            ),
            (
                100,
                "zookeeper-0 (the leader) crashed; the ensemble elects a new leader",
            ),
            (
                600,
                "zookeeper-1 leads (a new epoch; every session's timeout starts again)",
            ),
            (
                700,
                "zookeeper-1 expired session 0x100000000000001 (its ephemeral nodes are deleted)",
            ),
            (
                900,
                "zookeeper-0 restarted (every session's timeout starts again)",
            ),
            (
                950,
                "zookeeper-2 paused for 50 ms (answers nothing; its session tracker stands still)",
            ),
            (1000, "zookeeper-2 resumed"),
            (1200, "partition healed"),
        ],
        1500,
    );
    let t = build(&s, &h);
    assert_eq!(
        names(&t),
        [
            ("client-0", "client"),
            ("client-1", "client"),
            ("zookeeper-0", "node"),
            ("zookeeper-1", "node"),
            ("zookeeper-2", "node"),
        ]
    );
    assert_eq!(
        roles(&t, "zookeeper-0"),
        [
            ("leader", 0, 100),
            ("killed", 100, 900),
            ("follower", 900, 1500)
        ]
    );
    assert_eq!(
        roles(&t, "zookeeper-1"),
        [("follower", 0, 600), ("leader", 600, 1500)]
    );
    assert_eq!(roles(&t, "zookeeper-2"), [("follower", 0, 1500)]);
    assert_eq!(
        spans(&t, "zookeeper-2", |s| s.kind == "paused"),
        [("paused", 950, 1000)]
    );
    assert_eq!(marks(&t, "zookeeper-1"), [("expiry", 700)]);
    assert!(marks(&t, "zookeeper-0").is_empty());
    for lane in ["client-0", "zookeeper-1"] {
        assert_eq!(
            spans(&t, lane, |s| s.kind == "partitioned"),
            [("partitioned", 10, 1200)],
            "{lane}"
        );
    }
    assert!(spans(&t, "zookeeper-0", |s| s.kind == "partitioned").is_empty());
    assert_eq!(
        t.faults.len(),
        8,
        "every note is still a fault across every lane"
    );
}

/// An ensemble losing its quorum: both followers crash, the leader that still runs steps down
/// and follows nobody; nobody is elected, and its lane shows it a follower from then on.
#[test]
fn a_leader_without_a_quorum_steps_down_to_a_follower_on_its_lane() {
    let s = scenario("kind = \"zk-recipe\"", "[zookeeper]\nservers = 3");
    let h = notes(
        &[
            (
                100,
                "zookeeper-1 crashed (a follower: its clients move to another server)",
            ),
            (
                200,
                "zookeeper-2 crashed (a follower: its clients move to another server)",
            ),
            (
                200,
                "zookeeper-0 (the leader) steps down: 1 of 3 servers run and reach it, no quorum \
                 (ZAB commits nothing without a majority); the ensemble serves nobody and elects \
                 a new leader",
            ),
            (
                700,
                "no ZooKeeper leader elected: at most 1 of 3 servers run and reach each other, no \
                 quorum (the ensemble serves nobody)",
            ),
        ],
        1500,
    );
    let t = build(&s, &h);
    assert_eq!(
        roles(&t, "zookeeper-0"),
        [("leader", 0, 200), ("follower", 200, 1500)]
    );
    assert_eq!(
        roles(&t, "zookeeper-2"),
        [("follower", 0, 200), ("killed", 200, 1500)]
    );
}

/// The simulated run the browser test draws: the lone ZooKeeper server expires the cut-off
/// holder's session on its own lane, which shows the cut too.
#[test]
fn a_simulated_run_has_the_server_lane_with_its_expiry_and_its_cut() {
    let (s, h) = simulated("scenarios/zk-curator-206-partition.toml");
    let t = build(&s, &h);
    assert_eq!(names(&t)[2..], [("zookeeper-0", "node")]);
    let zk = roles(&t, "zookeeper-0");
    assert_eq!(zk, [("standalone", 0, t.end_us)]);
    let expired = marks(&t, "zookeeper-0");
    assert_eq!(expired.len(), 1, "{}", h.render());
    assert_eq!(expired[0].0, "expiry");
    assert_eq!(
        spans(&t, "zookeeper-0", |s| s.kind == "partitioned").len(),
        1
    );
}
