//! A ZooKeeper ensemble without a quorum serves nobody, in both worlds (issue #41): with a
//! majority of its servers crashed for good (two of three, and all three), no leader is
//! elected, no lock is granted and no critical section starts after the quorum is lost, and the
//! waiters give up at their wait bound: liveness violated, nothing unsafe. ZAB commits nothing
//! without a majority and `FastLeaderElection` elects nobody without one; the simulation once
//! elected a crashed server 500 ms after the leader's crash and ran six critical sections with
//! every server down.
//!
//! In simulation only (spawned ensembles cut clients from servers, not servers from each
//! other): a partition that leaves the leader in a minority stops it there, while the majority
//! elects a leader and goes on; an ensemble split three ways serves nobody until it heals.

use lockcheck::judge::Outcome;
use lockcheck::scenario::Scenario;

use crate::common::{
    assert_crashed_majorities_grant_nothing, crashes_for_good, grants_within, TWO_CLIENTS_IN_TURN,
};
use crate::common::{judge_sim, IN_FLIGHT_US};

/// The scenario of an ensemble of three with two clients taking the lock in turn, each waiting
/// for it at most `wait_ms`, and `faults` (TOML `[[faults]]` tables). The lock may stay
/// unavailable for 1.5 s: no hand-over takes that long while the ensemble serves.
fn ensemble(name: &str, duration_ms: u64, wait_ms: u64, faults: &str) -> Scenario {
    let text = format!(
        r#"name = "{name}"
about = "a three-server ensemble that loses its quorum"
expect = "safe"
expect_checks = {{ mutual_exclusion = "safe", resource = "safe", liveness = "violation" }}
seed = 1
duration_ms = {duration_ms}

[lock]
kind = "zk-recipe"
wait_ms = {wait_ms}

[checks]
liveness_bound_ms = 1500

[zookeeper]
servers = 3
session_timeout_ms = 1000
tick_ms = 100
election_ms = 500

{TWO_CLIENTS_IN_TURN}{faults}"#
    );
    Scenario::parse(&format!("{name}.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

fn nemesis(o: &Outcome) -> String {
    o.history
        .events
        .iter()
        .filter(|e| e.node == *"nemesis")
        .map(|e| format!("{} {:?}", e.at_us, e.kind))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Both worlds, a majority crashed for good: the two followers (the leader left running alone),
/// then all three. The simulation's notes say that nobody was elected.
fn majority_crashed(real: bool) {
    assert_crashed_majorities_grant_nothing(
        |faults| ensemble("zk-majority-crashed", 5000, 2000, faults),
        &[
            &["zookeeper-1", "zookeeper-2"],
            &["zookeeper-1", "zookeeper-2", "zookeeper-0"],
        ],
        real,
        |o, what| {
            if !real {
                let n = nemesis(o);
                assert!(n.contains("no ZooKeeper leader elected"), "{what}:\n{n}");
                assert!(
                    !n.contains(" leads ("),
                    "{what}: a leader was elected:\n{n}"
                );
            }
        },
    );
}

/// `s` judged in simulation on seeds 1 to 5: each seed, its outcome and its nemesis's notes.
fn five_seeds(s: &Scenario) -> impl Iterator<Item = (u64, Outcome, String)> + '_ {
    (1..=5).map(|seed| {
        let o = judge_sim(s, seed);
        let n = nemesis(&o);
        (seed, o, n)
    })
}

/// Asserts that `client` (every client: `None`) was `granted` something, or nothing, within
/// true time `from_us..to_us`.
fn assert_grants(
    o: &Outcome,
    client: Option<u32>,
    (from_us, to_us): (u64, u64),
    granted: bool,
    what: &str,
) {
    let grants = grants_within(o, client, from_us, to_us);
    assert_eq!(
        !grants.is_empty(),
        granted,
        "{what}: grants of {client:?} within {from_us}..{to_us} µs: {grants:?}\n{}",
        o.history.render()
    );
}

#[test]
fn an_ensemble_with_a_majority_crashed_grants_nothing_in_simulation() {
    majority_crashed(false);
}

#[test]
fn an_ensemble_with_a_majority_crashed_grants_nothing_on_spawned_servers() {
    let _turn = crate::zookeeper_turn();
    let before = lockcheck::real::registered_children();
    majority_crashed(true);
    assert_eq!(lockcheck::real::registered_children(), before);
}

/// The leader and client-0 are cut off from the two other servers and client-1 for the rest of
/// the run at 1000 ms: on the leader's side nobody is granted anything again; the other side
/// elects a leader, and once client-0's session has expired there, client-1 takes the lock.
#[test]
fn the_minority_side_of_a_partition_grants_nothing() {
    let s = ensemble(
        "zk-minority-leader",
        6000,
        2000,
        r#"
[[faults]]
kind = "partition"
nodes = ["zookeeper-0", "client-0"]
at_ms = 1000
for_ms = 100000000
"#,
    );
    for (seed, o, n) in five_seeds(&s) {
        let stepped_down = o
            .history
            .events
            .iter()
            .find(|e| format!("{:?}", e.kind).contains("zookeeper-0 (the leader) steps down"))
            .unwrap_or_else(|| panic!("seed {seed}: the cut-off leader led on:\n{n}"))
            .at_us;
        assert_eq!(stepped_down, 1_000_000, "seed {seed}:\n{n}");
        assert!(n.contains("zookeeper-1 leads"), "seed {seed}:\n{n}");
        let after = (stepped_down + IN_FLIGHT_US, u64::MAX);
        let what = format!("seed {seed}, the minority side");
        assert_grants(&o, Some(0), after, false, &what);
        let what = format!("seed {seed}, the majority side");
        assert_grants(&o, Some(1), after, true, &what);
        for check in ["mutual_exclusion", "resource"] {
            assert_eq!(
                o.checks[check].verdict,
                lockcheck::Verdict::Safe,
                "seed {seed}: {check}: {}",
                o.checks[check].summary
            );
        }
    }
}

/// Every server cut off from the others from 1000 to 2500 ms: nobody leads, nothing is granted
/// during the split; once it heals, a leader is elected (500 ms) and the lock is taken again
/// (the clients wait up to 5 s, so none gives up during the split: a waiter that gives up
/// deletes its node once, and a delete lost to the split would leave its node in the queue for
/// as long as its session lives).
#[test]
fn an_ensemble_split_three_ways_serves_nobody_until_it_heals() {
    let s = ensemble(
        "zk-split-three-ways",
        8000,
        5000,
        r#"
[[faults]]
kind = "partition"
nodes = ["zookeeper-0"]
from = ["zookeeper-1", "zookeeper-2"]
at_ms = 1000
for_ms = 1500

[[faults]]
kind = "partition"
nodes = ["zookeeper-1"]
from = ["zookeeper-2"]
at_ms = 1000
for_ms = 1500
"#,
    );
    for (seed, o, n) in five_seeds(&s) {
        assert!(n.contains("steps down"), "seed {seed}:\n{n}");
        assert!(
            n.contains("no ZooKeeper leader elected"),
            "seed {seed}:\n{n}"
        );
        let what = format!("seed {seed}, split");
        assert_grants(
            &o,
            None,
            (1_000_000 + IN_FLIGHT_US, 3_000_000),
            false,
            &what,
        );
        assert!(
            n.contains("3000000 Fault { what: \"zookeeper-1 leads"),
            "seed {seed}:\n{n}"
        );
        let what = format!("seed {seed}, healed");
        assert_grants(&o, None, (3_000_000, u64::MAX), true, &what);
        assert_eq!(
            o.checks["mutual_exclusion"].verdict,
            lockcheck::Verdict::Safe
        );
    }
}

/// A run without a quorum repeats byte for byte.
#[test]
fn a_run_without_a_quorum_repeats_byte_for_byte() {
    let faults = crashes_for_good(&["zookeeper-1", "zookeeper-2"]);
    let s = ensemble("zk-majority-crashed", 5000, 2000, &faults);
    let a = lockcheck::Registry::new().run_sim(&s, 3).history;
    let b = lockcheck::Registry::new().run_sim(&s, 3).history;
    assert_eq!(a.trace_hash(), b.trace_hash());
}
