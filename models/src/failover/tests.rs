//! The failover model's verdicts and shortest traces.

use crate::report::Finding;
use crate::test_util::{self, actions};
use crate::{ModelReport, Strategy};

fn check(property: &str, params: &[(&str, &str)], strategy: Strategy) -> ModelReport {
    test_util::check("failover", property, params, strategy)
}

#[test]
fn failover_before_replication_loses_the_lock() {
    let r = check("mutual_exclusion", &[], Strategy::Bfs);
    assert_eq!(
        actions(&r),
        [
            "client-0: SET lock client-0 NX PX 3 on redis-0 (master) -> OK",
            "failover: redis-0 dies, redis-0-replica-0 is promoted",
            "client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK",
        ]
    );
    let v: toml::Value = toml::from_str(&r.to_scenario_toml().unwrap()).unwrap();
    assert_eq!(v["redis"]["replicas"].as_integer(), Some(1));
    assert_eq!(v["faults"][0]["kind"].as_str(), Some("failover"));
    assert_eq!(v["faults"][0]["at_ms"].as_integer(), Some(50));
    // The write must not reach the replica before the failover.
    assert_eq!(v["redis"]["replication_lag_ms"][0].as_integer(), Some(150));
}

#[test]
fn wait_that_times_out_and_proceeds_does_not_help() {
    let r = check("mutual_exclusion", &[("wait", "1")], Strategy::Bfs);
    assert_eq!(
        actions(&r),
        [
            "client-0: SET lock client-0 NX PX 3 on redis-0 (master) -> OK",
            "tick: true time 0 -> 1",
            "client-0: WAIT 1 1 times out with 0 acks -> proceeds anyway",
            "failover: redis-0 dies, redis-0-replica-0 is promoted",
            "client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK",
            "tick: true time 1 -> 2",
            "client-1: WAIT 1 1 times out with 0 acks -> proceeds anyway",
        ]
    );
    assert!(r.to_scenario_toml().is_some());
}

#[test]
fn wait_for_one_of_two_replicas_promotes_the_other() {
    let p = [
        ("wait", "1"),
        ("replicas", "2"),
        ("on_wait_timeout", "give-up"),
    ];
    let r = check("mutual_exclusion", &p, Strategy::Bfs);
    let a = actions(&r);
    assert_eq!(a.len(), 7, "{a:?}");
    assert!(a[1].starts_with("replication: redis-0-replica-"), "{a:?}");
    assert_eq!(a[2], "client-0: WAIT 1 -> enough acks, proceeds");
    assert!(a[3].starts_with("failover: redis-0 dies"));
    let acked = a[1].split_whitespace().nth(1).unwrap();
    let promoted = a[3].split_whitespace().nth(4).unwrap();
    assert_ne!(
        acked, promoted,
        "the promoted replica is not the one that acked: {a:?}"
    );
}

#[test]
fn skewed_replica_clock_expires_an_acknowledged_key_early() {
    let p = [
        ("wait", "1"),
        ("on_wait_timeout", "give-up"),
        ("replica_skew", "2"),
    ];
    let r = check("mutual_exclusion", &p, Strategy::Bfs);
    let a = actions(&r);
    assert_eq!(
        a[1],
        "replication: redis-0-replica-0 applies the next write from the master"
    );
    assert!(
        a.contains(
            &"client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK".to_string()
        ),
        "{a:?}"
    );
    let toml = r.to_scenario_toml().unwrap();
    assert!(
        toml.contains(
            "kind = \"clock_jump\"\nnode = \"redis-0-replica-0\"\nat_ms = 0\nby_ms = 200"
        ),
        "{toml}"
    );
}

#[test]
fn strict_wait_on_every_replica_holds_within_the_bound() {
    let p = [("wait", "1"), ("on_wait_timeout", "give-up")];
    let r = check("mutual_exclusion", &p, Strategy::Dfs);
    assert!(matches!(r.outcome, Finding::Holds { .. }));
    let r = check("no_stale_write", &p, Strategy::Dfs);
    assert!(matches!(r.outcome, Finding::Holds { .. }));
    check("handover", &p, Strategy::Bfs);
}

#[test]
fn stale_write_after_failover() {
    let r = check("no_stale_write", &[], Strategy::Bfs);
    let a = actions(&r);
    assert_eq!(a.len(), 5, "{a:?}");
    assert_eq!(a[3], "client-1 writes to the storage");
    assert_eq!(a[4], "client-0 writes to the storage");
}
