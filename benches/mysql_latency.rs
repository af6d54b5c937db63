//! How slow are the database locks? Lock+unlock cycles per second and acquire latency (p50, p99)
//! of `mysql-for-update`, `mysql-insert-unique` and `set-nx-px`, on real servers, in one run.
//!
//! `cargo bench --bench mysql_latency` (release; needs `mariadbd` and `redis-server`: lockcheck
//! spawns both on free ports, never 3306 or 6379). For 1 and 4 clients contending for one lock,
//! each client runs acquire then release with no hold, no think time and a 1-2 ms retry pause;
//! `LOCKCHECK_BENCH_CYCLES` sets the cycles per client (default 300).

use lockcheck::backend::mysql::lock::for_update::{self as mysql_for_update, MysqlForUpdate};
use lockcheck::backend::mysql::lock::insert_unique::MysqlInsertUnique;
use lockcheck::backend::mysql::real::server::{MariaDb, DATABASE, USER};
use lockcheck::backend::mysql::real::RealSqlConn;
use lockcheck::lock::mysql_options::MysqlOptions;
use lockcheck::lock::{Lock, LockConfig, RedlockOptions, SetNxPx};
use lockcheck::real::RealEnv;
use lockcheck::real::{RedisServer, ServerOptions};
use std::time::{Duration, Instant};

const KEY: &str = "bench-lock";

fn config() -> LockConfig {
    LockConfig {
        key: KEY.into(),
        ttl: Duration::from_millis(10_000),
        wait: Duration::from_secs(20),
        retry: (Duration::from_millis(1), Duration::from_millis(2)),
        watchdog: false,
        redlock: RedlockOptions::default(),
        wait_replicas: None,
        mysql: MysqlOptions::default(),
        params: (),
    }
}

/// `config` with the MySQL lock options `options`.
fn with(config: LockConfig, options: &MysqlOptions) -> LockConfig {
    LockConfig {
        mysql: options.clone(),
        ..config
    }
}

/// Runs `cycles` lock+unlock cycles on each lock concurrently: (cycles/s, acquire latencies µs).
async fn measure<L: Lock + 'static>(locks: Vec<L>, cycles: usize) -> (f64, Vec<u64>) {
    let start = Instant::now();
    let tasks: Vec<_> = locks
        .into_iter()
        .map(|mut lock| {
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(cycles);
                for _ in 0..cycles {
                    let t = Instant::now();
                    let guard = lock.acquire().await.unwrap().expect("acquired within 20 s");
                    lat.push(t.elapsed().as_micros() as u64);
                    assert!(lock.release(&guard).await.unwrap());
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rate = all.len() as f64 / start.elapsed().as_secs_f64();
    all.sort_unstable();
    (rate, all)
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn sql_conns(port: u16, n: usize) -> Vec<RealSqlConn> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(
            RealSqlConn::connect(port, USER, DATABASE, Duration::from_secs(60))
                .await
                .unwrap(),
        );
    }
    v
}

fn main() {
    let cycles: usize = std::env::var("LOCKCHECK_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    lockcheck::real::install_cleanup_handlers();
    let db = MariaDb::spawn().expect("spawning mariadbd (apt-get install mariadb-server)");
    let redis = RedisServer::spawn(ServerOptions::default()).expect("spawning redis-server");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("lock+unlock cycles, {cycles} per client, no hold; acquire latency in ms");
    println!(
        "{:<22} {:>7} {:>10} {:>8} {:>8}",
        "lock", "clients", "cycles/s", "p50", "p99"
    );
    rt.block_on(async {
        // Each lock its own table: the FOR UPDATE lock's row would hold the insert lock's key.
        let options = MysqlOptions::default();
        let insert_options = MysqlOptions {
            table: "insert_lock".into(),
            ..MysqlOptions::default()
        };
        let mut admin = sql_conns(db.port(), 1).await.remove(0);
        mysql_for_update::prepare(&mut admin, &options, KEY)
            .await
            .unwrap();
        insert_options.prepare(&mut admin, KEY).await.unwrap();
        for clients in [1usize, 4] {
            let env = RealEnv::default();
            let row = |name: &str, (rate, lat): (f64, Vec<u64>)| {
                println!(
                    "{name:<22} {clients:>7} {rate:>10.0} {:>8.3} {:>8.3}",
                    pct(&lat, 0.5),
                    pct(&lat, 0.99)
                )
            };
            let locks = sql_conns(db.port(), clients)
                .await
                .into_iter()
                .map(|c| MysqlForUpdate::new(with(config(), &options), vec![c], env.clone()))
                .collect();
            row("mysql-for-update", measure(locks, cycles).await);
            let locks = sql_conns(db.port(), clients)
                .await
                .into_iter()
                .map(|c| {
                    MysqlInsertUnique::new(with(config(), &insert_options), vec![c], env.clone())
                })
                .collect();
            row("mysql-insert-unique", measure(locks, cycles).await);
            let mut locks = Vec::new();
            for _ in 0..clients {
                let conn = redis::Client::open(redis.url())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                locks.push(SetNxPx::new(config(), vec![conn], env.clone()));
            }
            row("set-nx-px", measure(locks, cycles).await);
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
}
