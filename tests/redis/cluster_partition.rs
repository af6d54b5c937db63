//! A partitioned Redis Cluster on real processes (`RedisCluster::partition`, the cluster bus cut
//! through link proxies): a master cut off alone keeps acknowledging writes until its node
//! timeout tells it it is in the minority, the majority promotes its replica meanwhile, and once
//! the partition heals the old master follows the new one and the writes it acknowledged alone
//! are gone.

use lockcheck::backend::redis::real::{ClusterOptions, ClusterRole, RedisCluster};
use std::time::{Duration, Instant};

#[test]
fn a_master_cut_off_alone_acknowledges_writes_that_the_heal_throws_away() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let c = RedisCluster::start(ClusterOptions {
        partitionable: true,
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("the cluster did not form: {e}"));
    let t = c.options().node_timeout;
    let key = "lock:{split}";
    let slot = c.key_slot(key).unwrap();
    let old = c.master_of_slot(slot).unwrap();
    let replica = c.replicas_of(old).unwrap()[0];
    // lockcheck's own connections come from 127.0.0.1, no node's address: never cut.
    let mut minority = c.control(old).unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("before")
        .query(&mut minority)
        .unwrap();

    c.partition(&[old]).unwrap();
    let cut = Instant::now();
    let mut acked = 0;
    let refused_at = loop {
        let reply = redis::cmd("SET")
            .arg(key)
            .arg(format!("minority-{acked}"))
            .query::<()>(&mut minority);
        match reply {
            Ok(()) => acked += 1,
            Err(e) => {
                assert!(
                    e.to_string().contains("CLUSTERDOWN") || e.to_string().contains("ClusterDown"),
                    "{e}"
                );
                break cut.elapsed();
            }
        }
        assert!(
            cut.elapsed() < 4 * t + Duration::from_secs(2),
            "the minority master never stopped"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        acked > 0,
        "the cut-off master acknowledged writes before it knew"
    );
    assert!(
        refused_at >= t,
        "refused at {refused_at:?}, before the node timeout {t:?}"
    );

    let new = c
        .wait_slot_served_by_new_master(slot, old, 2 * t + Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(new, replica);
    let promoted_at = cut.elapsed();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("majority")
        .query(&mut c.control(new).unwrap())
        .unwrap();

    c.heal();
    c.wait_role(
        old,
        ClusterRole::Replica { of: new },
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail(old)));
    c.wait_converged(Duration::from_secs(10)).unwrap();
    let kept: Option<String> = redis::cmd("GET")
        .arg(key)
        .query(&mut c.control(new).unwrap())
        .unwrap();
    assert_eq!(
        kept.as_deref(),
        Some("majority"),
        "the minority's {acked} acknowledged writes are gone"
    );
    eprintln!(
        "minority master: {acked} writes acknowledged, refused from {refused_at:?}; replica promoted at {promoted_at:?} (node timeout {t:?})"
    );
}
