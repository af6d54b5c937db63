//! Redis Cluster on real processes (`backend::redis::real::cluster`): it forms with every slot
//! covered, a key's write lands on the master of its slot and any other master redirects it
//! (`MOVED`), a crashed master's replica is promoted by the cluster within a bound derived from
//! `cluster-node-timeout`, a coordinated `CLUSTER FAILOVER` swaps roles without losing an
//! acknowledged write, and no process outlives the deployment, dropped or unwound by a panic.
//!
//! Every cluster here uses a 500 ms node timeout, so each test takes a few seconds.

use lockcheck::backend::redis::real::cluster_nodes::SLOTS;
use lockcheck::backend::redis::real::{
    ClusterOptions, ClusterRole, ManualFailover, RedisCluster, SlotRange,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// One real deployment at a time: promotion timings are what these tests look at.
fn serial() -> MutexGuard<'static, ()> {
    crate::common::real_servers_one_at_a_time()
}

fn start() -> RedisCluster {
    let t = Instant::now();
    let c = RedisCluster::start(ClusterOptions::default())
        .unwrap_or_else(|e| panic!("the cluster did not form: {e}"));
    eprintln!("formed in {:?}: {}", t.elapsed(), c.describe());
    c
}

/// A plain (not cluster-aware) connection to node `node`.
fn plain(c: &RedisCluster, node: usize) -> redis::Connection {
    c.control(node).expect("a connection")
}

/// The longest a crashed master's slots may go unserved with node timeout `t`: `t` until every
/// node suspects it, about `t` more for the suspicions to meet (gossip carries a few nodes per
/// ping) and the `fail` to spread, the replica's documented delay (500 ms + at most 500 ms at
/// rank 0), and a second for the election and a loaded two-core machine.
fn promotion_bound(t: Duration) -> Duration {
    2 * t + Duration::from_millis(1000) + Duration::from_secs(1)
}

/// Whether process `pid` is gone (or a zombie about to be reaped).
pub(crate) fn pid_gone(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks whether the pid exists.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim().starts_with(['Z', 'X']))
    });
    !alive || zombie
}

#[test]
fn a_cluster_forms_with_every_slot_covered_once() {
    let _serial = serial();
    let c = start();
    let opts = c.options().clone();
    assert_eq!(c.len(), opts.masters * (1 + opts.replicas));
    let mut ranges: Vec<SlotRange> = Vec::new();
    for m in 0..opts.masters {
        assert_eq!(c.role(m).unwrap(), ClusterRole::Master, "{}", c.name(m));
        ranges.extend(c.slot_ranges(m).unwrap());
        assert_eq!(c.replicas_of(m).unwrap(), c.initial_replicas(m));
        for r in c.initial_replicas(m) {
            assert_eq!(c.role(r).unwrap(), ClusterRole::Replica { of: m });
            assert!(
                c.slot_ranges(r).unwrap().is_empty(),
                "a replica serves no slot"
            );
        }
    }
    ranges.sort();
    assert_eq!(ranges.first().map(|r| r.first), Some(0));
    assert_eq!(ranges.last().map(|r| r.last), Some(SLOTS - 1));
    for w in ranges.windows(2) {
        assert_eq!(w[0].last + 1, w[1].first, "no gap, no overlap: {ranges:?}");
    }
    // The hash slot of "foo" is 12182 (Redis documentation, CLUSTER KEYSLOT), master 2's.
    assert_eq!(c.key_slot("foo").unwrap(), 12182);
    assert_eq!(c.master_of_key("foo").unwrap(), 2);
    for n in c.live_nodes() {
        let info = c.cluster_info(n).unwrap();
        assert!(info.contains("cluster_state:ok"), "{}: {info}", c.name(n));
        assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    }
}

#[test]
fn a_write_lands_on_the_master_of_its_slot_and_another_master_redirects_it() {
    let _serial = serial();
    let c = start();
    let key = "lock:{order-17}";
    let owner = c.master_of_key(key).unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("token-1")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(&mut plain(&c, owner))
        .unwrap();
    let other = (0..c.options().masters).find(|&m| m != owner).unwrap();
    let err = redis::cmd("SET")
        .arg(key)
        .arg("token-2")
        .query::<()>(&mut plain(&c, other))
        .expect_err("a master that does not own the slot refuses the key");
    // redis-rs reads `MOVED <slot> <host:port>` as (host:port, slot).
    let owner_at = format!("127.0.0.1:{}", c.port(owner).unwrap());
    let slot = c.key_slot(key).unwrap();
    assert_eq!(
        err.redirect_node(),
        Some((owner_at.as_str(), slot)),
        "MOVED names the slot and its owner: {err}"
    );
    // The owner's replica has it too, once replicated (READONLY reads on a replica).
    let replica = c.replicas_of(owner).unwrap()[0];
    let mut r = plain(&c, replica);
    let _: () = redis::cmd("READONLY").query(&mut r).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v: Option<String> = redis::cmd("GET").arg(key).query(&mut r).unwrap();
        if v.as_deref() == Some("token-1") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never got the key");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_crashed_masters_replica_is_promoted_and_serves_the_slot_again_within_the_bound() {
    let _serial = serial();
    let c = start();
    let key = "lock:{crash}";
    let slot = c.key_slot(key).unwrap();
    let old = c.master_of_slot(slot).unwrap();
    let replica = c.replicas_of(old).unwrap()[0];
    let bound = promotion_bound(c.options().node_timeout);
    let killed = Instant::now();
    assert!(c.crash(old));
    let new = c
        .wait_slot_served_by_new_master(slot, old, bound)
        .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail(replica)));
    let promoted = killed.elapsed();
    assert_eq!(new, replica, "the crashed master's own replica takes over");
    assert_eq!(c.role(new).unwrap(), ClusterRole::Master);
    let mut conn = plain(&c, new);
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("after")
        .query(&mut conn)
        .unwrap();
    eprintln!("promoted {promoted:?} after the kill (bound {bound:?})");
    // The crashed master comes back as its former replica's replica.
    c.restart(old).unwrap();
    c.wait_converged(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail(old)));
    assert_eq!(c.role(old).unwrap(), ClusterRole::Replica { of: new });
    eprintln!("rejoined {:?} after the kill", killed.elapsed());
}

/// A writer keeps appending to a list on the master while its replica is told `CLUSTER
/// FAILOVER`; the writer follows `MOVED`. Every append that was acknowledged is on the new
/// master afterwards.
#[test]
fn a_coordinated_failover_swaps_roles_and_loses_no_acknowledged_write() {
    let _serial = serial();
    let c = start();
    let key = "{ledger}:appends";
    let old = c.master_of_key(key).unwrap();
    let replica = c.replicas_of(old).unwrap()[0];
    let stop = AtomicBool::new(false);
    let acked = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut acked = Vec::new();
            let mut conn = plain(&c, old);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match redis::cmd("RPUSH").arg(key).arg(i).query::<u64>(&mut conn) {
                    Ok(_) => {
                        acked.push(i);
                        i += 1;
                    }
                    Err(e) => match e.redirect_node() {
                        Some((owner, _slot)) => {
                            let url = format!("redis://{owner}/");
                            conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                        }
                        None => {
                            // A timeout or a reset during the switch: not acknowledged.
                            conn = plain(&c, old);
                        }
                    },
                }
            }
            acked
        });
        std::thread::sleep(Duration::from_millis(100));
        c.failover(replica, ManualFailover::Coordinated).unwrap();
        c.wait_role(replica, ClusterRole::Master, Duration::from_secs(5))
            .unwrap();
        c.wait_role(
            old,
            ClusterRole::Replica { of: replica },
            Duration::from_secs(5),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap()
    });
    assert_eq!(c.master_of_key(key).unwrap(), replica);
    let stored: Vec<u64> = redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(&mut plain(&c, replica))
        .unwrap();
    assert!(acked.len() > 10, "the writer wrote: {}", acked.len());
    assert_eq!(
        stored, acked,
        "every acknowledged append, in order, nothing else"
    );
    c.wait_converged(Duration::from_secs(5)).unwrap();
}

/// `FORCE` and `TAKEOVER` both promote a replica whose master is alive; the old master learns of
/// the newer epoch and follows it.
#[test]
fn forced_and_takeover_failovers_promote_the_replica() {
    let _serial = serial();
    let c = start();
    for (m, how) in [(0, ManualFailover::Force), (1, ManualFailover::Takeover)] {
        let replica = c.initial_replicas(m)[0];
        let slot = c.slot_ranges(m).unwrap()[0].first;
        c.failover(replica, how).unwrap();
        c.wait_slot_served_by(slot, replica, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{how:?}: {e}"));
        c.wait_role(
            m,
            ClusterRole::Replica { of: replica },
            Duration::from_secs(5),
        )
        .unwrap_or_else(|e| panic!("{how:?}: {e}"));
    }
    c.wait_converged(Duration::from_secs(5)).unwrap();
}

#[test]
fn no_node_outlives_the_cluster_dropped_or_unwound_by_a_panic() {
    let _serial = serial();
    let c = start();
    // A crashed and restarted node is a new process; both are accounted for.
    let old_pid = c.pid(3).unwrap();
    c.crash(3);
    // Convergence is bounded, and its error names what has not converged.
    let e = c.wait_converged(Duration::from_millis(100)).unwrap_err();
    assert!(
        e.to_string()
            .contains("the cluster to converge (last: not running: redis-0-replica-0)"),
        "{e}"
    );
    c.restart(3).unwrap();
    let pids: Vec<u32> = c.live_nodes().iter().filter_map(|&n| c.pid(n)).collect();
    assert_eq!(pids.len(), c.len());
    drop(c);
    for pid in pids.iter().chain([&old_pid]) {
        assert!(pid_gone(*pid), "pid {pid} outlived the dropped cluster");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let c = RedisCluster::start(ClusterOptions::default()).unwrap();
        let pids: Vec<u32> = c.live_nodes().iter().filter_map(|&n| c.pid(n)).collect();
        tx.send(pids).unwrap();
        panic!("deliberate panic while holding a cluster");
    });
    let pids = rx.recv().unwrap();
    assert!(holder.join().is_err(), "the thread panicked");
    for pid in pids {
        assert!(pid_gone(pid), "pid {pid} outlived a panic");
    }
}

#[test]
fn fewer_than_three_masters_or_no_replica_is_refused_before_anything_starts() {
    for (masters, replicas) in [(2, 1), (3, 0)] {
        let e = RedisCluster::start(ClusterOptions {
            masters,
            replicas,
            ..ClusterOptions::default()
        })
        .err()
        .expect("refused");
        assert!(e.to_string().contains("at least 3 masters"), "{e}");
    }
}
