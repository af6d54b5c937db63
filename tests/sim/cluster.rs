//! The simulated deployment seen through lockcheck's `ConnectionLike`: replication lag, WAIT,
//! INFO, expiry on each node's clock, failover routing, and timeouts for dead or cut-off nodes.

use lockcheck::backend::redis::sim::cluster::{Cluster, ClusterConfig};
use lockcheck::sim::clock::Clocks;
use lockcheck::sim::network::Network;
use lockcheck::sim::SimConnection;
use redis::Value;
use std::time::Duration;

/// One master with one replica (node 0 and 1), and a client at node 2.
struct Rig {
    cluster: Cluster,
    net: Network,
    clocks: Clocks,
    conn: SimConnection,
}

fn rig() -> Rig {
    let clocks = Clocks::new(3);
    let net = Network::new([1, 1]);
    let cluster = Cluster::new(
        &ClusterConfig {
            masters: 1,
            replicas: 1,
            replication_lag_ms: [50, 50],
        },
        clocks.clone(),
        net.clone(),
        lockcheck::sim::clock::TrueTime::recorder(),
    );
    cluster.start();
    let conn = SimConnection::new(
        cluster.clone(),
        net.clone(),
        2,
        0,
        1,
        Duration::from_millis(500),
    );
    Rig {
        cluster,
        net,
        clocks,
        conn,
    }
}

fn sim<F: std::future::Future<Output = ()>>(f: impl FnOnce() -> F) {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(f());
}

async fn cmd(conn: &mut SimConnection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async(conn).await
}

#[test]
fn writes_reach_the_replica_after_the_lag_and_wait_counts_them() {
    sim(|| async {
        let mut r = rig();
        cmd(&mut r.conn, &["SET", "k", "v"]).await.unwrap();
        assert_eq!(r.cluster.dbsize(1), 0, "replication is asynchronous");
        // WAIT blocks until the replica applied this connection's write (50 ms lag).
        let t = madsim::time::Instant::now();
        let acked = cmd(&mut r.conn, &["WAIT", "1", "400"]).await.unwrap();
        assert_eq!(acked, Value::Int(1));
        assert!(
            t.elapsed() >= Duration::from_millis(45),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(r.cluster.dbsize(1), 1);
        // WAIT with a timeout shorter than the lag answers 0.
        cmd(&mut r.conn, &["SET", "k2", "v"]).await.unwrap();
        let acked = cmd(&mut r.conn, &["WAIT", "1", "10"]).await.unwrap();
        assert_eq!(acked, Value::Int(0));
    });
}

#[test]
fn info_replication_reports_roles() {
    sim(|| async {
        let mut r = rig();
        let Value::BulkString(info) = cmd(&mut r.conn, &["INFO", "replication"]).await.unwrap()
        else {
            panic!("INFO is a bulk string")
        };
        let info = String::from_utf8(info).unwrap();
        assert!(info.contains("role:master"), "{info}");
        assert!(info.contains("connected_slaves:1"), "{info}");
    });
}

#[test]
fn expiry_follows_the_servers_clock_and_reaches_the_replica_as_a_del() {
    sim(|| async {
        let mut r = rig();
        cmd(&mut r.conn, &["SET", "k", "v", "PX", "10000"])
            .await
            .unwrap();
        madsim::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(r.cluster.dbsize(1), 1);
        // The master's clock jumps past the expiry: its sweep deletes the key and replicates DEL.
        r.clocks.jump(0, 20_000);
        madsim::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(r.cluster.dbsize(0), 0);
        let got = cmd(&mut r.conn, &["GET", "k"]).await.unwrap();
        assert_eq!(got, Value::Nil);
        // The replica's clock did not jump, yet the master's DEL removed the key there too.
        assert_eq!(r.cluster.dbsize(1), 0);
    });
}

#[test]
fn failover_routes_clients_to_the_promoted_replica_which_lacks_recent_writes() {
    sim(|| async {
        let mut r = rig();
        cmd(&mut r.conn, &["SET", "old", "1"]).await.unwrap();
        madsim::time::sleep(Duration::from_millis(100)).await; // replicated
        cmd(&mut r.conn, &["SET", "lock", "me", "NX", "PX", "10000"])
            .await
            .unwrap();
        r.cluster.kill(0); // before the 50 ms lag delivered "lock"
        let err = cmd(&mut r.conn, &["GET", "old"]).await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        r.cluster.promote(0).unwrap();
        assert_eq!(
            cmd(&mut r.conn, &["GET", "old"]).await.unwrap(),
            Value::BulkString(b"1".to_vec())
        );
        assert_eq!(
            cmd(&mut r.conn, &["GET", "lock"]).await.unwrap(),
            Value::Nil
        );
        let again = cmd(&mut r.conn, &["SET", "lock", "you", "NX", "PX", "10000"])
            .await
            .unwrap();
        assert_eq!(
            again,
            Value::Okay,
            "the promoted replica grants the lock again"
        );
    });
}

#[test]
fn a_cut_link_times_out_after_the_request_timeout_and_heals() {
    sim(|| async {
        let mut r = rig();
        r.net.cut(2, 0);
        let t = madsim::time::Instant::now();
        let err = cmd(&mut r.conn, &["PING"]).await.unwrap_err();
        assert!(err.is_timeout());
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(500) && waited < Duration::from_millis(510),
            "{waited:?}"
        );
        r.net.heal(2, 0);
        assert_eq!(
            cmd(&mut r.conn, &["PING"]).await.unwrap(),
            Value::SimpleString("PONG".into())
        );
        // A reply lost on the way back: the write happened, the client still sees a timeout.
        r.net.cut(0, 2);
        assert!(cmd(&mut r.conn, &["SET", "x", "1"]).await.is_err());
        r.net.heal(0, 2);
        assert_eq!(
            cmd(&mut r.conn, &["GET", "x"]).await.unwrap(),
            Value::BulkString(b"1".to_vec())
        );
    });
}

#[test]
fn scripts_run_through_redis_script_with_the_noscript_fallback() {
    sim(|| async {
        let mut r = rig();
        cmd(&mut r.conn, &["SET", "lock", "me"]).await.unwrap();
        let s = &*lockcheck::lock::lease::COMPARE_AND_DELETE;
        // First invocation: EVALSHA answers NOSCRIPT, redis-rs loads the script and retries.
        let n: i64 = s
            .key("lock")
            .arg("someone-else")
            .invoke_async(&mut r.conn)
            .await
            .unwrap();
        assert_eq!(n, 0);
        let n: i64 = s
            .key("lock")
            .arg("me")
            .invoke_async(&mut r.conn)
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            cmd(&mut r.conn, &["EXISTS", "lock"]).await.unwrap(),
            Value::Int(0)
        );
    });
}

/// A pause that starts after `SET NX` was sent does not hold the request: it arrives and runs on
/// the server at its arrival time, as on a real server when the client is `SIGSTOP`ped; only the
/// paused client's reading of the reply waits for it to resume. Its real half, on a spawned
/// `redis-server` with a `SIGSTOP`ped client process: `tests/redis/pause_on_the_wire.rs`.
#[test]
fn a_request_on_the_wire_runs_at_arrival_while_its_client_is_paused() {
    use lockcheck::scenario::ClientRef;
    use lockcheck::sim::client_faults::ClientFaults;
    sim(|| async {
        let clocks = Clocks::new(4);
        let net = Network::new([20, 20]);
        let rec = lockcheck::sim::clock::TrueTime::recorder();
        let cluster = Cluster::new(
            &ClusterConfig {
                masters: 1,
                replicas: 0,
                replication_lag_ms: [1, 1],
            },
            clocks.clone(),
            net.clone(),
            rec.clone(),
        );
        cluster.start();
        let handle = madsim::runtime::Handle::current();
        let client = handle.create_node().name("client-0").build();
        let nodes = [("redis-0".to_string(), 0), ("client-0".to_string(), 1)]
            .into_iter()
            .collect();
        let faults = ClientFaults::new(rec.clone(), net.clone(), vec![client.id()], nodes);
        let (c2, n2) = (cluster.clone(), net.clone());
        let sent = client.spawn(async move {
            let mut conn = SimConnection::new(c2, n2, 1, 0, 1, Duration::from_millis(5_000));
            let t = madsim::time::Instant::now();
            let r = cmd(&mut conn, &["SET", "k", "v", "NX", "PX", "100000"]).await;
            (r, t.elapsed())
        });
        // 5 ms after the request left, the client stops for a second.
        madsim::time::sleep(Duration::from_millis(5)).await;
        faults.pause_client(&ClientRef::Index(0), None, 1_000, "GC pause");
        // At 25 ms the request has arrived (20 ms one way): the key is there, on time.
        madsim::time::sleep(Duration::from_millis(20)).await;
        let mut other = SimConnection::new(
            cluster.clone(),
            net.clone(),
            2,
            0,
            2,
            Duration::from_millis(500),
        );
        let seen = cmd(&mut other, &["GET", "k"]).await.unwrap();
        assert_eq!(
            seen,
            Value::BulkString(b"v".to_vec()),
            "the SET ran at its arrival"
        );
        // The paused client reads its reply only after it resumes.
        let (r, took) = sent.await.unwrap();
        assert_eq!(r.unwrap(), Value::Okay);
        assert!(took >= Duration::from_millis(1_000), "{took:?}");
        let notes = crate::common::fault_lines(&rec.snapshot());
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("client-0 paused for 1000 ms")),
            "{notes:?}"
        );
    });
}
