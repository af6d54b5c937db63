//! A scenario with `[redis.cluster]` on a real Redis Cluster (`backend::redis::real::cluster_world`):
//! every client has one cluster-aware connection; without faults `set-nx-px` keeps the clients
//! apart and every client gets the lock; a crash of the lock key's master at an acquire is
//! answered by the cluster's own election, recorded in the history, after which the clients take
//! the lock on the promoted replica; no node outlives the run; and what real mode cannot do on a
//! cluster is refused before anything is spawned, with the reason.
//!
//! Every cluster here has a 500 ms node timeout.

use crate::cluster::pid_gone;
use lockcheck::backend::redis::engine::cluster::slot::key_slot;
use lockcheck::backend::redis::engine::cluster::topology::initial_slots;
use lockcheck::history::EventKind;
use lockcheck::{Outcome, Scenario, Verdict};
use std::time::Instant;

/// A key whose slot master 0 of 3 serves when the cluster forms.
fn key_on_master_0() -> String {
    let slots = initial_slots(0, 3);
    (0..)
        .map(|i| format!("lock:{{orders-{i}}}"))
        .find(|k| slots.contains(key_slot(k.as_bytes())))
        .expect("a key of master 0")
}

/// A `set-nx-px` scenario on a cluster of 3 masters with a replica each, with `rest` appended
/// (checks, faults).
fn scenario(name: &str, duration_ms: u64, clients: u32, rest: &str) -> Scenario {
    scenario_of(
        "set-nx-px",
        &key_on_master_0(),
        name,
        duration_ms,
        clients,
        rest,
    )
}

/// A scenario of lock `kind` on `key`, as [`scenario`] otherwise.
fn scenario_of(
    kind: &str,
    key: &str,
    name: &str,
    duration_ms: u64,
    clients: u32,
    rest: &str,
) -> Scenario {
    let text = format!(
        r#"name = "{name}"
about = "{kind} on a real Redis Cluster"
expect = "safe"
seed = 1
duration_ms = {duration_ms}

[lock]
kind = "{kind}"
key = "{key}"
ttl_ms = 1000
wait_ms = 10000

[redis]
masters = 3
replicas = 1
request_timeout_ms = 300

[redis.cluster]
node_timeout_ms = 500

[workload]
clients = {clients}
cycles = 100000
hold_ms = [5, 10]
think_ms = [5, 10]
{rest}"#
    );
    Scenario::parse(&format!("{name}.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> Outcome {
    let started = Instant::now();
    let o = crate::common::judge_in(s, true, 1);
    eprintln!("{}: {:.1} s", s.name, started.elapsed().as_secs_f64());
    o
}

/// The true times (µs) of each client's grants.
fn grants(o: &Outcome) -> Vec<(String, u64)> {
    o.history
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Acquired { .. }))
        .map(|e| (e.node.as_str().to_string(), e.at_us))
        .collect()
}

/// The true time (µs) of the first nemesis note that starts with `prefix`.
fn note_at(o: &Outcome, prefix: &str) -> Option<u64> {
    o.history.events.iter().find_map(|e| match &e.kind {
        EventKind::Fault { what } if what.starts_with(prefix) => Some(e.at_us),
        _ => None,
    })
}

/// Mutual exclusion held and each of the `clients` clients got the lock at least once.
fn assert_safe_and_every_client_locked(o: &Outcome, clients: u32) {
    let render = o.history.render();
    assert_eq!(
        o.checks["mutual_exclusion"].verdict,
        Verdict::Safe,
        "{render}"
    );
    let grants = grants(o);
    for c in 0..clients {
        assert!(
            grants.iter().any(|(n, _)| *n == format!("client-{c}")),
            "client-{c} never got the lock\n{render}"
        );
    }
}

#[test]
fn set_nx_px_on_a_real_cluster_is_safe_and_every_client_gets_the_lock() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let s = scenario("cluster-no-faults", 1500, 3, "");
    let o = run(&s);
    assert_safe_and_every_client_locked(&o, 3);
    let lines = crate::common::fault_lines(&o.history);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Redis Cluster: redis-0 pid ")),
        "the deployment is described: {lines:?}"
    );
}

/// Redisson's lock on a cluster: its waiters subscribe to the lock's channel on one node and hear
/// the unlock `PUBLISH`ed on the key's master (the cluster delivers it to every node's
/// subscribers). The key has no hash tag, so the channel (`redisson_lock__channel:{key}`) hashes
/// to the key's slot, as the lock's script (which names both) needs in a cluster.
#[test]
fn redisson_on_a_real_cluster_is_safe_and_every_client_gets_the_lock() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let s = scenario_of("redisson", "orders", "cluster-redisson", 1500, 3, "");
    let o = run(&s);
    assert_safe_and_every_client_locked(&o, 3);
}

/// The lock key's master is killed at the first acquire and stays down; the cluster's masters
/// agree it failed and elect its replica (within 2 × node timeout + 2 s, the bound
/// `tests/redis/cluster.rs` measures), which the history records; the clients then take the lock
/// on the promoted replica. The run lasts 4.5 s: the promotion's bound (3 s) and 1.5 s more to
/// acquire, which takes milliseconds once the slot is served.
#[test]
fn a_crashed_key_master_is_replaced_by_the_clusters_election_and_clients_lock_again() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let faults = r#"
[checks]
liveness_bound_ms = 10000

[[faults]]
kind = "crash"
node = "redis-0"
on = "acquired"
restart_after_ms = 100000000
"#;
    let s = scenario("cluster-crash-key-master", 4500, 2, faults);
    let o = run(&s);
    let render = o.history.render();
    let killed = note_at(&o, "redis-0 killed").unwrap_or_else(|| panic!("no kill\n{render}"));
    let promoted = note_at(
        &o,
        "redis-0-replica-0 promoted to master of group 0 (cluster election",
    )
    .unwrap_or_else(|| panic!("no promotion recorded\n{render}"));
    assert!(promoted > killed, "{render}");
    assert!(
        promoted - killed <= 3_000_000,
        "promoted {} ms after the kill\n{render}",
        (promoted - killed) / 1000
    );
    assert!(
        grants(&o).iter().any(|&(_, at)| at > promoted),
        "nobody took the lock on the promoted replica\n{render}"
    );
    assert!(
        note_at(&o, "redis-0 stays down").is_some(),
        "its restart falls after the run\n{render}"
    );
}

/// The other five nodes of a 3 × 1 cluster, as a partition's `from`.
const ALL_BUT_REDIS_0: &str =
    r#"["redis-1", "redis-2", "redis-0-replica-0", "redis-1-replica-0", "redis-2-replica-0"]"#;

/// The lock key's master is cut off from every other node for 4 s (the clients still reach it):
/// the majority elects its replica within the promotion's bound (3 s), and once the cut heals
/// the old master learns of the newer epoch and follows it, which the history records as the
/// simulated cluster does; the clients take the lock on the new master. The run lasts 6 s: the
/// cut, and 1.8 s after the heal for the old master to hear of it (a ping, well under a second).
#[test]
fn a_key_master_cut_off_is_replaced_and_follows_the_new_master_after_the_heal() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let faults = format!(
        r#"
[checks]
liveness_bound_ms = 10000

[[faults]]
kind = "partition"
nodes = ["redis-0"]
from = {ALL_BUT_REDIS_0}
at_ms = 200
for_ms = 4000
"#
    );
    let s = scenario("cluster-partition-key-master", 6000, 2, &faults);
    let o = run(&s);
    let render = o.history.render();
    let cut = note_at(&o, "partition").unwrap_or_else(|| panic!("no cut\n{render}"));
    let promoted = note_at(
        &o,
        "redis-0-replica-0 promoted to master of group 0 (cluster election",
    )
    .unwrap_or_else(|| panic!("no promotion recorded\n{render}"));
    let healed = note_at(&o, "partition healed").unwrap_or_else(|| panic!("no heal\n{render}"));
    let demoted = note_at(
        &o,
        "redis-0 demoted to a replica (follows redis-0-replica-0)",
    )
    .unwrap_or_else(|| panic!("the old master never followed the new one\n{render}"));
    assert!(
        cut < promoted && promoted < healed && healed < demoted,
        "{render}"
    );
    assert!(
        grants(&o).iter().any(|&(_, at)| at > promoted),
        "nobody took the lock on the promoted replica\n{render}"
    );
}

/// Every pid a note names (`pid 123`).
fn pids(lines: &[String]) -> Vec<u32> {
    let mut out = Vec::new();
    for l in lines {
        let words: Vec<&str> = l.split([' ', ',', '(', ')']).collect();
        for w in words.windows(2) {
            if w[0] == "pid" {
                if let Ok(p) = w[1].parse() {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// A replica crashed and restarted during the run is a second process for its node; neither it
/// nor any other node outlives the run.
#[test]
fn no_cluster_node_outlives_a_run() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let faults = r#"
[[faults]]
kind = "crash"
node = "redis-1-replica-0"
at_ms = 100
restart_after_ms = 200
"#;
    let s = scenario("cluster-no-orphans", 1000, 2, faults);
    let o = run(&s);
    let lines = crate::common::fault_lines(&o.history);
    let pids = pids(&lines);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("redis-1-replica-0 restarted empty (pid ")),
        "{lines:?}"
    );
    // Six nodes, the restarted one again.
    assert_eq!(pids.len(), 7, "{lines:?}");
    for pid in pids {
        assert!(pid_gone(pid), "pid {pid} outlived the run: {lines:?}");
    }
}

#[test]
fn what_a_cluster_cannot_do_in_real_mode_is_refused_with_the_reason() {
    let cases = [
        (
            r#"
[[faults]]
kind = "partition"
nodes = ["redis-0"]
at_ms = 100
for_ms = 100
"#,
            "the cluster client connects from 127.0.0.1",
        ),
        (
            r#"
[[faults]]
kind = "clock_jump"
node = "redis-1"
at_ms = 100
by_ms = 1000
"#,
            "without libfaketime",
        ),
    ];
    for (faults, why) in cases {
        let s = scenario("cluster-refused", 1000, 2, faults);
        let e = lockcheck::backend::redis::real::world::real_check(&s)
            .expect_err("refused before anything is spawned");
        assert!(e.to_string().contains(why), "{e}");
    }
    // Servers lockcheck did not start are never a cluster it can run on.
    let s = scenario("cluster-external", 1000, 2, "");
    let ext = lockcheck::real::ExternalRedis::parse("redis://127.0.0.1:1/", None).unwrap();
    let why = lockcheck::backend::redis::real::external::refusal(&s, &ext).expect("refused");
    assert!(why.contains("only on nodes it spawns"), "{why}");
    // A partition among cluster nodes has a recipe.
    let s = scenario(
        "cluster-partition",
        1000,
        2,
        &format!(
            r#"
[[faults]]
kind = "partition"
nodes = ["redis-0"]
from = {ALL_BUT_REDIS_0}
at_ms = 100
for_ms = 100
"#
        ),
    );
    lockcheck::backend::redis::real::world::real_check(&s).unwrap();
}
