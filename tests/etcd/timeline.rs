//! The HTML timeline's server lanes of an etcd cluster: from hand-written histories (each note worded as
//! its world writes it) and from simulated runs. The timeline (`report_html::timeline`) names no
//! service; these hold that it reads this backend's notes right.

use crate::common::lanes::{marks, names, notes, roles, scenario, simulated};
use lockcheck::report_html::timeline::build;

/// A three-member cluster: the leader crashes, a member is elected, the leader revokes an
/// expired lease (the note names no member), the old leader rejoins as a follower and a second
/// election moves the lead again: each revocation sits on the lane of the leader of its time.
#[test]
fn a_cluster_lane_per_member_with_its_roles_and_the_revocations_on_the_leader() {
    let s = scenario("kind = \"etcd-lock\"\nttl_ms = 2000", "[etcd]\nservers = 3");
    let h = notes(
        &[
            (5, "etcd-0 crashed (it was the leader)"),
            (
                1100,
                "etcd-2 elected leader (every lease extended by an election timeout)",
            ),
            (
                2000,
                "etcd revoked expired lease(s) 1a (their keys deleted)",
            ),
            (3000, "etcd-0 restarted"),
            (
                3500,
                "etcd-1 elected leader (every lease extended by an election timeout)",
            ),
            (
                4000,
                "etcd revoked expired lease(s) 2b, 3c (their keys deleted)",
            ),
        ],
        4500,
    );
    let t = build(&s, &h);
    assert_eq!(
        names(&t),
        [
            ("client-0", "client"),
            ("client-1", "client"),
            ("etcd-0", "node"),
            ("etcd-1", "node"),
            ("etcd-2", "node"),
        ]
    );
    assert_eq!(
        roles(&t, "etcd-0"),
        [
            ("leader", 0, 5),
            ("killed", 5, 3000),
            ("follower", 3000, 4500)
        ]
    );
    assert_eq!(
        roles(&t, "etcd-1"),
        [("follower", 0, 3500), ("leader", 3500, 4500)]
    );
    assert_eq!(
        roles(&t, "etcd-2"),
        [
            ("follower", 0, 1100),
            ("leader", 1100, 3500),
            ("follower", 3500, 4500)
        ]
    );
    assert_eq!(marks(&t, "etcd-2"), [("revoked", 2000)]);
    assert_eq!(marks(&t, "etcd-1"), [("revoked", 4000)]);
    assert!(marks(&t, "etcd-0").is_empty());
    let revoked = &t.lanes[4].marks[0];
    assert_eq!(
        revoked.title,
        "etcd revoked expired lease(s) 1a (their keys deleted)"
    );
}

/// The simulated run the browser test draws: the etcd leader's crash and the election are on
/// the members' lanes.
#[test]
fn a_simulated_leader_failover_has_a_lane_per_member() {
    let (s, h) = simulated("scenarios/etcd-lock-leader-failover.toml");
    let t = build(&s, &h);
    let lanes: Vec<_> = names(&t)[2..].iter().map(|(n, _)| *n).collect();
    assert_eq!(lanes, ["etcd-0", "etcd-1", "etcd-2"]);
    let kinds = |lane| -> Vec<&str> { roles(&t, lane).iter().map(|r| r.0).collect() };
    assert_eq!(kinds("etcd-0"), ["leader", "killed"], "{}", h.render());
    assert_eq!(kinds("etcd-1"), ["follower", "leader"], "{}", h.render());
    assert_eq!(kinds("etcd-2"), ["follower"]);
    assert!(
        roles(&t, "etcd-0")[1].1 < roles(&t, "etcd-1")[1].1,
        "the leader falls, then another is elected"
    );
}
