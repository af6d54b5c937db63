//! A lease lock through redis-rs's async Redis Cluster connection (`cluster-async`), on a real
//! cluster: `SET NX PX` to take it and lockcheck's compare-and-delete script
//! (`lock::lease::COMPARE_AND_DELETE`) to release it, routed by the key's slot; the connection
//! follows `MOVED` once a failover has moved the slot, and keeps working across a master crash.

use lockcheck::backend::redis::real::{ClusterOptions, ClusterRole, ManualFailover, RedisCluster};
use lockcheck::lock::lease::COMPARE_AND_DELETE;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use std::time::{Duration, Instant};

const KEY: &str = "lock:{inventory}";

/// `SET KEY token NX PX 30000`: whether the lock was taken.
async fn acquire(conn: &mut ClusterConnection, token: &str) -> redis::RedisResult<bool> {
    let reply: Option<String> = redis::cmd("SET")
        .arg(KEY)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await?;
    Ok(reply.is_some())
}

/// Deletes `KEY` only while it holds `token`: whether it did.
async fn release(conn: &mut ClusterConnection, token: &str) -> redis::RedisResult<bool> {
    let removed: i64 = COMPARE_AND_DELETE
        .key(KEY)
        .arg(token)
        .invoke_async(conn)
        .await?;
    Ok(removed == 1)
}

/// Retries `acquire` until it answers (a crash leaves the slot unserved for a while), within
/// `bound`: the first answer, and how long it took.
async fn acquire_within(
    conn: &mut ClusterConnection,
    token: &str,
    bound: Duration,
) -> (bool, Duration) {
    let started = Instant::now();
    loop {
        match acquire(conn, token).await {
            Ok(taken) => return (taken, started.elapsed()),
            Err(e) if started.elapsed() < bound => {
                eprintln!("{:?}: {e}", started.elapsed());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no answer within {bound:?}: {e}"),
        }
    }
}

#[test]
fn a_cluster_client_locks_follows_moved_and_survives_a_master_crash() {
    let _serial = crate::common::real_servers_one_at_a_time();
    let c = RedisCluster::start(ClusterOptions::default()).expect("the cluster forms");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let owner = c.master_of_key(KEY).unwrap();
    let replica = c.replicas_of(owner).unwrap()[0];
    // Seeded with a node that does not own the key: the client learns the slots itself.
    let seed = (0..c.options().masters).find(|&m| m != owner).unwrap();
    let client = ClusterClient::builder([c.url(seed).unwrap()])
        .connection_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(500))
        .retries(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = client.get_async_connection().await.unwrap();
        assert!(acquire(&mut conn, "a").await.unwrap(), "the lock is free");
        assert!(!acquire(&mut conn, "b").await.unwrap(), "held by a");
        assert!(
            !release(&mut conn, "b").await.unwrap(),
            "b cannot release a's lock"
        );
        assert!(release(&mut conn, "a").await.unwrap());

        // A coordinated failover moves the slot; the client's slot map is now stale, and the old
        // master (a replica now) answers MOVED, which the client follows.
        c.failover(replica, ManualFailover::Coordinated).unwrap();
        c.wait_role(
            owner,
            ClusterRole::Replica { of: replica },
            Duration::from_secs(5),
        )
        .unwrap();
        assert!(
            acquire(&mut conn, "c").await.unwrap(),
            "taken on the new master"
        );
        assert_eq!(c.master_of_key(KEY).unwrap(), replica);
        let mut direct = c.control(replica).unwrap();
        let held: Option<String> = redis::cmd("GET").arg(KEY).query(&mut direct).unwrap();
        assert_eq!(
            held.as_deref(),
            Some("c"),
            "the lock is on the slot's new master"
        );
        assert!(release(&mut conn, "c").await.unwrap());

        // The master crashes; the cluster promotes the old master back, and the client's next
        // request, retried, is answered by it.
        let killed = Instant::now();
        assert!(c.crash(replica));
        let (taken, took) = acquire_within(&mut conn, "d", Duration::from_secs(10)).await;
        assert!(taken, "the lock is free on the promoted replica");
        eprintln!("acquired {took:?} after the crash ({:?})", killed.elapsed());
        assert_eq!(c.master_of_key(KEY).unwrap(), owner);
        assert!(release(&mut conn, "d").await.unwrap());
    });
}
