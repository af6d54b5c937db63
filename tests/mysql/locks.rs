//! The two locks of the MySQL locks article, the same code on the simulated database and on a real
//! MariaDB: mutual exclusion under contention, and the article's claims about the insert lock
//! (stuck forever after its owner dies; a cleanup by age frees a live owner's lock).

use lockcheck::backend::mysql::lock::for_update::{self as mysql_for_update, MysqlForUpdate};
use lockcheck::backend::mysql::lock::insert_unique::{cleanup_once, MysqlInsertUnique};
use lockcheck::backend::mysql::real::server::{self as mariadb, MariaDb};
use lockcheck::backend::mysql::real::RealSqlConn;
use lockcheck::backend::mysql::sim::SharedEngine;
use lockcheck::env::Env;
use lockcheck::lock::mysql_options::{MysqlOptions, WaitMode};
use lockcheck::lock::{Lock, LockConfig, RedlockOptions};
use lockcheck::real::RealEnv;
use lockcheck::sql::SqlConn;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn config(wait_ms: u64) -> LockConfig {
    LockConfig {
        key: "orders".into(),
        ttl: Duration::from_millis(1000),
        wait: Duration::from_millis(wait_ms),
        retry: (Duration::from_millis(2), Duration::from_millis(8)),
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

pub async fn real_conn(db: &MariaDb) -> RealSqlConn {
    RealSqlConn::connect(
        db.port(),
        mariadb::USER,
        mariadb::DATABASE,
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

/// `clients` locks contend for `cycles` critical sections each; returns how many sections ran.
/// Panics if two sections ever overlap.
async fn contend<L: Lock + 'static>(locks: Vec<L>, cycles: u32) -> u32 {
    let inside = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for mut lock in locks {
        let inside = inside.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..cycles {
                let guard = lock
                    .acquire()
                    .await
                    .unwrap()
                    .expect("acquired within the wait");
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                assert!(lock.release(&guard).await.unwrap(), "released our own lock");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::SeqCst)
}

fn sim() -> SharedEngine {
    SharedEngine::new(wall_ms)
}

async fn for_update_contention<C: SqlConn + Sync + 'static>(mut conns: Vec<C>, mode: WaitMode) {
    let options = MysqlOptions {
        wait_mode: mode,
        ..MysqlOptions::default()
    };
    mysql_for_update::prepare(&mut conns[0], &options, "orders")
        .await
        .unwrap();
    let locks: Vec<_> = conns
        .into_iter()
        .map(|c| MysqlForUpdate::new(with(config(20_000), &options), vec![c], RealEnv::default()))
        .collect();
    assert_eq!(contend(locks, 10).await, 30);
}

async fn insert_unique_contention<C: SqlConn + Sync + 'static>(mut conns: Vec<C>) {
    let options = MysqlOptions::default();
    options
        .prepare(&mut conns[0], "lockcheck:lock")
        .await
        .unwrap();
    let locks: Vec<_> = conns
        .into_iter()
        .map(|c| {
            MysqlInsertUnique::new(with(config(20_000), &options), vec![c], RealEnv::default())
        })
        .collect();
    assert_eq!(contend(locks, 10).await, 30);
}

#[test]
fn for_update_is_mutually_exclusive_on_the_simulated_database() {
    let db = sim();
    for mode in [WaitMode::Wait, WaitMode::Nowait, WaitMode::SkipLocked] {
        let db = db.clone();
        block_on(async move {
            let conns = (0..3).map(|_| db.connect(RealEnv::default())).collect();
            for_update_contention(conns, mode).await
        });
    }
}

#[test]
fn for_update_is_mutually_exclusive_on_mariadb() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    for mode in [WaitMode::Wait, WaitMode::Nowait, WaitMode::SkipLocked] {
        block_on(async {
            let mut conns = Vec::new();
            for _ in 0..3 {
                conns.push(real_conn(&db).await);
            }
            for_update_contention(conns, mode).await
        });
    }
}

#[test]
fn insert_unique_is_mutually_exclusive_on_both_databases() {
    let db = sim();
    block_on(insert_unique_contention(
        (0..3).map(|_| db.connect(RealEnv::default())).collect(),
    ));
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        let mut conns = Vec::new();
        for _ in 0..3 {
            conns.push(real_conn(&db).await);
        }
        insert_unique_contention(conns).await
    });
}

/// The article: when the owner dies, its row stays, and nobody gets the lock again.
async fn owner_crash_sticks<C: SqlConn + Sync + 'static>(mut owner: C, other: C) {
    let options = MysqlOptions::default();
    options.prepare(&mut owner, "lockcheck:lock").await.unwrap();
    let mut first = MysqlInsertUnique::new(
        with(config(1000), &options),
        vec![owner],
        RealEnv::default(),
    );
    first.acquire().await.unwrap().expect("free lock");
    drop(first); // the owner crashes: its connection closes, its row stays
    let mut second =
        MysqlInsertUnique::new(with(config(300), &options), vec![other], RealEnv::default());
    assert_eq!(
        second.acquire().await.unwrap(),
        None,
        "the dead owner's row still holds the lock"
    );
}

/// The article: a cleanup by age deletes a live owner's row, and a second client gets the lock
/// while the first still holds it.
async fn age_cleanup_frees_a_live_owner<C: SqlConn + Sync + 'static>(mut a: C, b: C, mut job: C) {
    let options = MysqlOptions::default();
    options.prepare(&mut a, "lockcheck:lock").await.unwrap();
    let env = RealEnv::default();
    let mut first = MysqlInsertUnique::new(with(config(1000), &options), vec![a], env.clone());
    let held = first.acquire().await.unwrap().expect("free lock");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let deleted = cleanup_once(&mut job, &options, 100, env.now_ms())
        .await
        .unwrap();
    assert_eq!(deleted, 1, "the cleanup deleted the live owner's row");
    let mut second = MysqlInsertUnique::new(with(config(1000), &options), vec![b], env);
    assert!(second.acquire().await.unwrap().is_some(), "a second holder");
    assert!(
        !first.release(&held).await.unwrap(),
        "the first holder's row was gone"
    );
}

/// A crashed `FOR UPDATE` holder's connection closes; the server rolls back and frees the row.
async fn for_update_owner_crash_frees<C: SqlConn + Sync + 'static>(mut a: C, b: C) {
    let options = MysqlOptions::default();
    mysql_for_update::prepare(&mut a, &options, "orders")
        .await
        .unwrap();
    let mut first = MysqlForUpdate::new(with(config(1000), &options), vec![a], RealEnv::default());
    first.acquire().await.unwrap().expect("free lock");
    drop(first);
    let mut second = MysqlForUpdate::new(with(config(5000), &options), vec![b], RealEnv::default());
    assert!(second.acquire().await.unwrap().is_some());
}

#[test]
fn article_claims_hold_on_the_simulated_database() {
    let db = sim();
    let c = || db.connect(RealEnv::default());
    block_on(owner_crash_sticks(c(), c()));
    let db = sim();
    let c = || db.connect(RealEnv::default());
    block_on(age_cleanup_frees_a_live_owner(c(), c(), c()));
    let db = sim();
    let c = || db.connect(RealEnv::default());
    block_on(for_update_owner_crash_frees(c(), c()));
}

#[test]
fn article_claims_hold_on_mariadb() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        owner_crash_sticks(real_conn(&db).await, real_conn(&db).await).await;
    });
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        let (a, b, j) = (
            real_conn(&db).await,
            real_conn(&db).await,
            real_conn(&db).await,
        );
        age_cleanup_frees_a_live_owner(a, b, j).await;
    });
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        for_update_owner_crash_frees(real_conn(&db).await, real_conn(&db).await).await;
    });
}

#[test]
fn mariadb_pause_crash_and_restart() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    let dir = db.dir().to_path_buf();
    assert_ne!(db.port(), 3306);
    db.pause().unwrap();
    db.resume().unwrap();
    db.restart().unwrap();
    block_on(async {
        let mut c = real_conn(&db).await;
        assert_eq!(c.execute("BEGIN").await.unwrap(), 0);
    });
    drop(db);
    assert!(!dir.exists(), "the data directory is removed");
}
