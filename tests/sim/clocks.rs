//! Node clocks in the simulator, end to end: Redis expiry on a server follows that server's clock
//! (offset, drift, jumps), replicated absolute expiries are judged by the replica's clock, a
//! client's `Env` reads and sleeps on its own clock, and partitions can cut one way only.
//! True time (madsim's clock) is what the history records.

use lockcheck::backend::redis::sim::cluster::{Cluster, ClusterConfig};
use lockcheck::env::Env;
use lockcheck::sim::clock::{Clocks, EPOCH_MS};
use lockcheck::sim::network::Network;
use lockcheck::sim::SimConnection;
use lockcheck::sim::SimEnv;
use redis::aio::ConnectionLike;
use std::time::Duration;

/// `masters` groups of `replicas`, plus one client at node index `servers`.
struct World {
    cluster: Cluster,
    clocks: Clocks,
    net: Network,
    client: usize,
}

fn world(masters: u32, replicas: u32) -> World {
    let servers = (masters * (1 + replicas)) as usize;
    let clocks = Clocks::new(servers + 1);
    let net = Network::new([1, 1]);
    let cluster = Cluster::new(
        &ClusterConfig {
            masters,
            replicas,
            replication_lag_ms: [5, 5],
        },
        clocks.clone(),
        net.clone(),
        lockcheck::sim::clock::TrueTime::recorder(),
    );
    cluster.start();
    World {
        cluster,
        clocks,
        net,
        client: servers,
    }
}

impl World {
    fn conn(&self, group: usize) -> SimConnection {
        SimConnection::new(
            self.cluster.clone(),
            self.net.clone(),
            self.client,
            group,
            1,
            Duration::from_millis(100),
        )
    }
}

async fn cmd<T: redis::FromRedisValue>(
    conn: &mut impl ConnectionLike,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query_async(conn).await
}

fn sim<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F) {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(f());
}

#[test]
fn expiry_follows_each_servers_clock() {
    sim(|| async {
        let w = world(3, 0);
        // redis-0 runs 10% fast, redis-1 is true, redis-2 will jump.
        w.clocks.set_drift(0, 100_000);
        let mut conns: Vec<_> = (0..3).map(|g| w.conn(g)).collect();
        for c in &mut conns {
            let ok: Option<String> = cmd(c, &["SET", "k", "v", "NX", "PX", "1000"])
                .await
                .unwrap();
            assert!(ok.is_some());
        }
        // ~950 ms of true time later: redis-0's clock has run ~1045 ms, the key is gone there.
        madsim::time::sleep(Duration::from_millis(945)).await;
        let pttl = |c: &mut SimConnection| {
            let mut c = c.clone();
            async move { cmd::<i64>(&mut c, &["PTTL", "k"]).await.unwrap() }
        };
        assert_eq!(pttl(&mut conns[0]).await, -2, "fast clock expired the key");
        let left = pttl(&mut conns[1]).await;
        assert!((1..=60).contains(&left), "true clock: {left} ms left");
        // A jump past the expiry time expires the key at once.
        w.clocks.jump(2, 5_000);
        assert_eq!(
            pttl(&mut conns[2]).await,
            -2,
            "jumped clock expired the key"
        );
        // A backwards jump makes a fresh key outlive its TTL in true time.
        w.clocks.jump(1, -10_000);
        madsim::time::sleep(Duration::from_millis(200)).await;
        assert!(
            pttl(&mut conns[1]).await > 0,
            "clock stepped back, key lives on"
        );
    });
}

#[test]
fn replicated_expiry_is_absolute_and_judged_by_the_replicas_clock() {
    sim(|| async {
        let w = world(1, 1); // redis-0 (master, index 0), redis-0-replica-0 (index 1)
        w.clocks.jump(1, 15_000); // the replica's clock is 15 s ahead
        let mut c = w.conn(0);
        let _: Option<String> = cmd(&mut c, &["SET", "k", "v", "PX", "10000"])
            .await
            .unwrap();
        madsim::time::sleep(Duration::from_millis(50)).await; // replication lag is 5 ms
        assert_eq!(w.cluster.dbsize(0), 1, "the master's key has 10 s left");
        assert_eq!(
            w.cluster.dbsize(1),
            0,
            "the replica received PXAT master+10 s and its clock is already past it"
        );
        // With the replica's clock back in line, the same absolute time is 10 s away again.
        w.clocks.jump(1, -15_000);
        assert_eq!(w.cluster.dbsize(1), 1);
    });
}

#[test]
fn a_wall_clock_jump_moves_redis_expiry_and_a_clients_wall_clock_but_not_its_monotonic_one() {
    sim(|| async {
        let w = world(1, 0);
        let mut conn = w.conn(0);
        let ok: Option<String> = cmd(&mut conn, &["SET", "k", "v", "NX", "PX", "1000"])
            .await
            .unwrap();
        assert!(ok.is_some());
        // Redis expires keys on its wall clock: stepped back 5 s, the key outlives its TTL.
        w.clocks.jump_wall(0, -5_000);
        madsim::time::sleep(Duration::from_millis(2_000)).await;
        let left: i64 = cmd(&mut conn, &["PTTL", "k"]).await.unwrap();
        assert!((3_900..=4_000).contains(&left), "{left} ms left");
        // The client's wall clock steps back; its monotonic clock (and sleeps) go on.
        let env = SimEnv::new(w.clocks.clone(), w.client);
        let (wall, mono) = (env.now_ms(), env.monotonic_ms());
        assert_eq!(wall, mono);
        w.clocks.jump_wall(w.client, -10_000);
        env.sleep(Duration::from_millis(100)).await;
        assert_eq!(env.monotonic_ms(), mono + 100);
        assert_eq!(env.now_ms(), wall + 100 - 10_000);
    });
}

#[test]
fn a_clients_env_reads_and_sleeps_on_its_own_clock() {
    sim(|| async {
        let clocks = Clocks::new(2);
        clocks.jump(1, -300); // starts 300 ms behind
        clocks.set_drift(1, -500_000); // and runs at half speed
        let env = SimEnv::new(clocks.clone(), 1);
        assert_eq!(env.now_ms(), EPOCH_MS - 300);
        let t0 = madsim::time::Instant::now();
        env.sleep(Duration::from_millis(1000)).await;
        let took = t0.elapsed().as_millis();
        assert_eq!(took, 2000, "1 s of its clock is 2 s of true time");
        assert_eq!(env.now_ms(), EPOCH_MS - 300 + 1000);
        assert_eq!(clocks.now_ms(0), EPOCH_MS + 2000, "true time");
        // A timeout is measured on the same clock.
        let t0 = madsim::time::Instant::now();
        let r = env
            .timeout(Duration::from_millis(100), std::future::pending::<()>())
            .await;
        assert_eq!(r, None);
        assert_eq!(t0.elapsed().as_millis(), 200);
        let r = env.timeout(Duration::from_millis(100), async { 7 }).await;
        assert_eq!(r, Some(7));
    });
}

#[test]
fn one_way_cuts_lose_requests_or_replies() {
    sim(|| async {
        let w = world(1, 0); // redis-0 = 0, the client = 1
        let mut c = w.conn(0);
        // The server's replies to the client are lost: the SET lands, the client sees a timeout.
        w.net.cut(0, w.client);
        let r: redis::RedisResult<Option<String>> =
            cmd(&mut c, &["SET", "a", "v", "NX", "PX", "5000"]).await;
        assert!(r.unwrap_err().is_timeout());
        assert_eq!(w.cluster.dbsize(0), 1, "the request arrived");
        w.net.heal(0, w.client);
        // The client's requests are lost: nothing lands.
        w.net.cut(w.client, 0);
        let r: redis::RedisResult<Option<String>> =
            cmd(&mut c, &["SET", "b", "v", "NX", "PX", "5000"]).await;
        assert!(r.unwrap_err().is_timeout());
        assert_eq!(w.cluster.dbsize(0), 1, "the request never arrived");
        // Two overlapping cuts of one link: it heals when both have ended.
        w.net.cut(w.client, 0);
        w.net.heal(w.client, 0);
        assert!(!w.net.reachable(w.client, 0));
        w.net.heal(w.client, 0);
        assert!(w.net.reachable(w.client, 0));
    });
}

#[test]
fn clocks_table_draws_per_node_clocks_from_the_seed() {
    let text = r#"
name = "t"
expect = "safe"
duration_ms = 100
[lock]
kind = "redlock"
ttl_ms = 1000
[redis]
masters = 3
[workload]
clients = 1
cycles = 1
[clocks]
offset_ms = [-1000, 1000]
drift_ppm = [-100, 100]
nodes = ["redis-0", "redis-2"]
"#;
    let s = lockcheck::scenario::Scenario::parse("t.toml", text).unwrap();
    let clock_lines = |seed| {
        lockcheck::Registry::new()
            .run_sim(&s, seed)
            .history
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                lockcheck::history::EventKind::Fault { what } if what.contains("clock starts") => {
                    Some(what.clone())
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let a = clock_lines(1);
    assert_eq!(a.len(), 2, "{a:?}");
    assert!(a[0].starts_with("redis-0 clock starts") && a[1].starts_with("redis-2"));
    assert_eq!(a, clock_lines(1), "same seed, same clocks");
    assert_ne!(a, clock_lines(2), "another seed, other clocks");
    // A node name that is not in the topology is an error that says which.
    let bad = text.replace("\"redis-2\"]", "\"redis-9\"]");
    let e = lockcheck::scenario::Scenario::parse("t.toml", &bad).unwrap_err();
    assert!(
        e.message.contains("unknown node `redis-9` in [clocks]"),
        "{e}"
    );
    assert_eq!(e.line, 16);
}
