//! The connection layer of the simulated Redis: response timeouts on slow links (the abandoned
//! request still executes when it arrives) and pipelines answered in one round trip.

use lockcheck::backend::redis::sim::cluster::{Cluster, ClusterConfig};
use lockcheck::sim::clock::Clocks;
use lockcheck::sim::network::Network;
use lockcheck::sim::SimConnection;
use redis::Value;
use std::time::Duration;

/// One master (node 0) and a client at node 1, over links of `one_way_ms`.
fn cluster(one_way_ms: u64) -> (Cluster, Network) {
    let clocks = Clocks::new(2);
    let net = Network::new([one_way_ms, one_way_ms]);
    let cluster = Cluster::new(
        &ClusterConfig {
            masters: 1,
            replicas: 0,
            replication_lag_ms: [1, 1],
        },
        clocks,
        net.clone(),
        lockcheck::sim::clock::TrueTime::recorder(),
    );
    cluster.start();
    (cluster, net)
}

fn conn(cluster: &Cluster, net: &Network, id: u64, timeout_ms: u64) -> SimConnection {
    SimConnection::new(
        cluster.clone(),
        net.clone(),
        1,
        0,
        id,
        Duration::from_millis(timeout_ms),
    )
}

fn sim<F: std::future::Future<Output = ()>>(f: impl FnOnce() -> F) {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(f());
}

/// madsim adds up to a few microseconds of jitter to each timer.
fn about(elapsed: Duration, ms: u64) {
    let want = Duration::from_millis(ms);
    assert!(
        elapsed >= want && elapsed < want + Duration::from_millis(1),
        "took {elapsed:?}, expected {want:?}"
    );
}

async fn get(conn: &mut SimConnection, key: &str) -> Value {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

#[test]
fn a_round_trip_longer_than_the_timeout_fails_but_the_request_executes_later() {
    sim(|| async {
        // 600 ms each way: the request reaches the server after the 500 ms timeout.
        let (cluster, net) = cluster(600);
        let mut slow = conn(&cluster, &net, 1, 500);
        let t0 = madsim::time::Instant::now();
        let r: redis::RedisResult<Value> = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut slow)
            .await;
        let err = r.expect_err("a 1,200 ms round trip must not succeed under a 500 ms timeout");
        assert!(err.is_timeout(), "{err}");
        about(t0.elapsed(), 500);
        // A patient client, after the abandoned request has arrived, sees its write.
        madsim::time::sleep(Duration::from_millis(200)).await;
        let mut patient = conn(&cluster, &net, 2, 5_000);
        assert_eq!(
            get(&mut patient, "k").await,
            Value::BulkString(b"v".to_vec())
        );
    });
}

#[test]
fn a_reply_arriving_after_the_timeout_is_a_timeout_although_the_write_happened() {
    sim(|| async {
        // 300 ms each way: executed at 300 ms, the reply would arrive at 600 ms > 500 ms.
        let (cluster, net) = cluster(300);
        let mut c = conn(&cluster, &net, 1, 500);
        let r: redis::RedisResult<Value> = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut c)
            .await;
        assert!(r.expect_err("reply after the timeout").is_timeout());
        let mut patient = conn(&cluster, &net, 2, 5_000);
        assert_eq!(
            get(&mut patient, "k").await,
            Value::BulkString(b"v".to_vec())
        );
    });
}

#[test]
fn a_pipeline_costs_one_round_trip() {
    sim(|| async {
        let (cluster, net) = cluster(10);
        let mut c = conn(&cluster, &net, 1, 5_000);
        let t0 = madsim::time::Instant::now();
        let (a, b, n): (String, Option<String>, i64) = redis::pipe()
            .cmd("SET")
            .arg("k")
            .arg("v")
            .ignore()
            .cmd("GET")
            .arg("k")
            .cmd("GET")
            .arg("missing")
            .cmd("INCR")
            .arg("n")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!((a.as_str(), b, n), ("v", None, 1));
        // One round trip of 2 x 10 ms, not one per command.
        about(t0.elapsed(), 20);
        // An atomic pipeline (MULTI ... EXEC) too.
        let t1 = madsim::time::Instant::now();
        let (x,): (i64,) = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg("n")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(x, 2);
        about(t1.elapsed(), 20);
    });
}

#[test]
fn blpop_waits_for_a_push_or_its_timeout() {
    sim(|| async {
        let (cluster, net) = cluster(1);
        let mut waiter = conn(&cluster, &net, 1, 5_000);
        let t0 = madsim::time::Instant::now();
        let r: Value = redis::cmd("BLPOP")
            .arg("q")
            .arg("0.1")
            .query_async(&mut waiter)
            .await
            .unwrap();
        assert_eq!(r, Value::Nil, "a timed-out BLPOP answers a null array");
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t0.elapsed()
        );
        let mut pusher = conn(&cluster, &net, 2, 5_000);
        let woken = madsim::task::spawn(async move {
            let r: Value = redis::cmd("BLPOP")
                .arg("q")
                .arg("0")
                .query_async(&mut waiter)
                .await
                .unwrap();
            r
        });
        madsim::time::sleep(Duration::from_millis(50)).await;
        let _: i64 = redis::cmd("RPUSH")
            .arg("q")
            .arg("go")
            .query_async(&mut pusher)
            .await
            .unwrap();
        let r = woken.await.unwrap();
        assert_eq!(
            r,
            Value::Array(vec![
                Value::BulkString(b"q".to_vec()),
                Value::BulkString(b"go".to_vec())
            ])
        );
    });
}
