//! Server lanes of the backends that elect a leader, expire sessions and revoke leases: from
//! hand-written histories (each note worded as its world writes it) and from simulated runs.

use super::*;
use crate::history::Event;

/// A scenario of `lock` (a `[lock]` table's body) with `table` (its service's table), 2 clients.
fn scenario(lock: &str, table: &str) -> Scenario {
    Scenario::parse(
        "lanes.toml",
        &format!(
            "name = \"lanes\"\nexpect = \"safe\"\nduration_ms = 5000\n[lock]\n{lock}\n{table}\n\
             [workload]\nclients = 2\ncycles = 1\nhold_ms = [10, 10]\n"
        ),
    )
    .unwrap()
}

/// A history of nemesis notes `(at_us, what)`, ended at `end_us`.
fn notes(notes: &[(u64, &str)], end_us: u64) -> History {
    let ev = |at_us, node: &str, kind| Event {
        at_us,
        node: node.into(),
        kind,
    };
    let mut events: Vec<Event> = notes
        .iter()
        .map(|&(at, what)| ev(at, "nemesis", EventKind::Fault { what: what.into() }))
        .collect();
    events.push(ev(end_us, "run", EventKind::RunEnd));
    History { events }
}

/// `(kind, from, to)` of every span of `lane` on row 0 (its role), in order.
fn roles(t: &Timeline, lane: &str) -> Vec<(&'static str, u64, u64)> {
    spans(t, lane, |s| s.row == 0)
}

fn spans(t: &Timeline, lane: &str, keep: impl Fn(&Span) -> bool) -> Vec<(&'static str, u64, u64)> {
    let l = t.lanes.iter().find(|l| l.name == lane).expect(lane);
    l.spans
        .iter()
        .filter(|s| keep(s))
        .map(|s| (s.kind, s.from_us, s.to_us))
        .collect()
}

/// `(kind, at)` of every mark of `lane`.
fn marks(t: &Timeline, lane: &str) -> Vec<(&'static str, u64)> {
    let l = t.lanes.iter().find(|l| l.name == lane).expect(lane);
    l.marks.iter().map(|m| (m.kind, m.at_us)).collect()
}

fn names(t: &Timeline) -> Vec<(&str, &str)> {
    t.lanes.iter().map(|l| (l.name.as_str(), l.kind)).collect()
}

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

fn simulated(file: &str) -> (Scenario, History) {
    let s = Scenario::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    let h = crate::registry::Registry::new().run_sim(&s, s.seed).history;
    (s, h)
}

/// The simulated runs the browser test draws: the lone ZooKeeper server expires the cut-off
/// holder's session on its own lane, which shows the cut too; the etcd leader's crash and the
/// election are on the members' lanes.
#[test]
fn simulated_zookeeper_and_etcd_runs_have_their_server_lanes() {
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
