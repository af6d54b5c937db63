//! An etcd cluster without a quorum serves nobody, in both worlds (issue #41): with a majority
//! of its members crashed for good (the two followers, the leader left running alone; then all
//! three), no lease is granted, no key written, no lock granted and no critical section started
//! after the quorum is lost, and the waiters give up at their wait bound: liveness violated,
//! nothing unsafe. Raft commits nothing without a majority, and etcd's leader steps down once
//! it has not heard from one for an election timeout (`CheckQuorum`); the simulated leader once
//! went on serving with both followers down.

use lockcheck::scenario::Scenario;

use crate::common::{
    assert_crashed_majorities_grant_nothing, real_servers_one_at_a_time, TWO_CLIENTS_IN_TURN,
};

/// A three-member cluster with two clients taking the lock in turn, and `faults` (TOML
/// `[[faults]]` tables). The lock may stay unavailable for 1.5 s: no hand-over takes that long
/// while the cluster serves.
fn cluster(faults: &str) -> Scenario {
    let text = format!(
        r#"name = "etcd-majority-crashed"
about = "a three-member cluster that loses its quorum for good"
expect = "safe"
expect_checks = {{ mutual_exclusion = "safe", resource = "safe", liveness = "violation" }}
seed = 1
duration_ms = 6000

[lock]
kind = "etcd-lock"
ttl_ms = 2000
wait_ms = 2000

[checks]
liveness_bound_ms = 1500

[etcd]
servers = 3

{TWO_CLIENTS_IN_TURN}{faults}"#
    );
    Scenario::parse("etcd-majority-crashed.toml", &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Both worlds: the two followers crash for good (the leader left running alone), then all
/// three members. The simulation's notes say that the leader stepped down and nobody was
/// elected.
fn majority_crashed(real: bool) {
    assert_crashed_majorities_grant_nothing(
        cluster,
        &[&["etcd-1", "etcd-2"], &["etcd-1", "etcd-2", "etcd-0"]],
        real,
        |o, what| {
            if !real {
                let r = o.history.render();
                assert!(r.contains("etcd-0 (the leader) steps down"), "{what}:\n{r}");
                assert!(!r.contains("elected leader"), "{what}:\n{r}");
            }
        },
    );
}

#[test]
fn a_cluster_with_a_majority_crashed_grants_nothing_in_simulation() {
    majority_crashed(false);
}

#[test]
fn a_cluster_with_a_majority_crashed_grants_nothing_on_spawned_members() {
    let _turn = real_servers_one_at_a_time();
    let before = lockcheck::real::registered_children();
    majority_crashed(true);
    assert_eq!(lockcheck::real::registered_children(), before);
}
