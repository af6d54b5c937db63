//! PgBouncer in transaction mode hands a client's statements to whichever server connection
//! is free, so a session advisory lock stays on the server connection it ran on: the same
//! client's unlock, landing on another one, answers `f` and the lock stays held, and the
//! client next given the first server connection "holds" it at once (reentrant session
//! locks). pgbouncer#102, rails#32622, pressly/goose#191.
//!
//! Deterministic with `default_pool_size = 2`: after the lock, other clients open transactions
//! until one sits on the lock's server connection (the other is given back), so the locking
//! client's next statement can only get the other server connection.

use crate::{connect, holders, primary, q};
use lockcheck::backend::postgres::real::{BouncerSettings, PgBouncer, PoolMode};
use lockcheck::backend::postgres::seam::Row;
use std::time::Instant;

fn texts(rows: Vec<Row>) -> Vec<String> {
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0]
        .iter()
        .map(|v| v.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn transaction_pooling_sends_the_unlock_to_another_server_connection() {
    let p = primary();
    let started = Instant::now();
    let settings = BouncerSettings {
        pool_mode: PoolMode::Transaction,
        default_pool_size: 2,
        ..BouncerSettings::default()
    };
    let bouncer = tokio::task::spawn_blocking(move || PgBouncer::spawn(p, &settings))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("pgbouncer: spawned in {:?}", started.elapsed());
    let mut client = connect(&bouncer.conninfo()).await;
    let mut b = connect(&bouncer.conninfo()).await;
    let mut c = connect(&bouncer.conninfo()).await;

    let locked = texts(q(&mut client, "SELECT pg_advisory_lock(7), pg_backend_pid()").await);
    let lock_server = locked[1].clone();
    // Park a transaction on the lock's server connection.
    q(&mut b, "BEGIN").await;
    let mut parked = b;
    if texts(q(&mut parked, "SELECT pg_backend_pid()").await)[0] != lock_server {
        q(&mut c, "BEGIN").await;
        assert_eq!(
            texts(q(&mut c, "SELECT pg_backend_pid()").await)[0],
            lock_server,
            "with two server connections, the second transaction gets the other one"
        );
        q(&mut parked, "COMMIT").await;
        parked = c;
    }
    let unlocked = texts(
        q(
            &mut client,
            "SELECT pg_advisory_unlock(7), pg_backend_pid()",
        )
        .await,
    );
    assert_eq!(
        unlocked[0], "f",
        "the unlock ran on another server connection"
    );
    assert_ne!(unlocked[1], lock_server);
    assert_eq!(
        holders(p, 7).await,
        vec![lock_server.clone()],
        "the lock stays"
    );
    // The client parked on that server connection "acquires" the lock it never took.
    assert_eq!(
        texts(q(&mut parked, "SELECT pg_try_advisory_lock(7)").await),
        vec!["t".to_string()]
    );
    q(&mut parked, "COMMIT").await;
    drop((client, parked));
    drop(bouncer);
    // The pooler's server connections closed with it: the stranded lock goes too.
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while !holders(p, 7).await.is_empty() {
        assert!(Instant::now() < deadline, "the lock outlived pgbouncer");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
