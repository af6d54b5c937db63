//! The errors a lock meets on a real server, with their texts and SQLSTATEs: a lock wait past
//! `lock_timeout` or `statement_timeout`, and a session ended by `idle_session_timeout` or
//! `idle_in_transaction_session_timeout` (set per session here, so the shared primary keeps its
//! defaults), whose locks go with it.

use crate::{connect, fails, one, primary, q};
use lockcheck::backend::postgres::seam::{
    PgError, IDLE_IN_TRANSACTION_TIMEOUT, IDLE_SESSION_TIMEOUT, LOCK_NOT_AVAILABLE, QUERY_CANCELED,
};
use std::time::Duration;

fn server_error(err: &PgError) -> (&str, &str, &str) {
    match err {
        PgError::Server {
            severity,
            sqlstate,
            message,
        } => (severity, sqlstate, message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test]
async fn lock_and_statement_timeouts_are_errors_the_session_survives() {
    let p = primary();
    let mut holder = connect(&p.conninfo()).await;
    let mut waiter = connect(&p.conninfo()).await;
    q(&mut holder, "SELECT pg_advisory_lock(3)").await;
    q(&mut waiter, "SET lock_timeout = 100").await;
    let err = fails(&mut waiter, "SELECT pg_advisory_lock(3)").await;
    eprintln!("lock_timeout: {err:?}");
    assert_eq!(
        server_error(&err),
        (
            "ERROR",
            LOCK_NOT_AVAILABLE,
            "canceling statement due to lock timeout"
        )
    );
    assert!(err.is_busy() && !err.session_gone());
    q(&mut waiter, "SET lock_timeout = 0").await;
    q(&mut waiter, "SET statement_timeout = 100").await;
    let err = fails(&mut waiter, "SELECT pg_advisory_lock(3)").await;
    eprintln!("statement_timeout: {err:?}");
    assert_eq!(
        server_error(&err),
        (
            "ERROR",
            QUERY_CANCELED,
            "canceling statement due to statement timeout"
        )
    );
    assert_eq!(one(&mut waiter, "SELECT 1").await, Some("1".into()));
}

#[tokio::test]
async fn idle_timeouts_end_the_session_and_free_its_locks() {
    let p = primary();
    let mut idle = connect(&p.conninfo()).await;
    let mut in_transaction = connect(&p.conninfo()).await;
    let mut other = connect(&p.conninfo()).await;
    q(&mut idle, "SET idle_session_timeout = 200").await;
    q(&mut idle, "SELECT pg_advisory_lock(4)").await;
    q(
        &mut in_transaction,
        "SET idle_in_transaction_session_timeout = 200",
    )
    .await;
    q(&mut in_transaction, "BEGIN").await;
    q(&mut in_transaction, "SELECT pg_advisory_lock(5)").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        one(&mut other, "SELECT pg_try_advisory_lock(4)").await,
        Some("t".into())
    );
    assert_eq!(
        one(&mut other, "SELECT pg_try_advisory_lock(5)").await,
        Some("t".into())
    );
    let err = fails(&mut idle, "SELECT 1").await;
    eprintln!("idle_session_timeout: {err:?}");
    assert_eq!(
        server_error(&err),
        (
            "FATAL",
            IDLE_SESSION_TIMEOUT,
            "terminating connection due to idle-session timeout"
        )
    );
    let err = fails(&mut in_transaction, "SELECT 1").await;
    eprintln!("idle_in_transaction_session_timeout: {err:?}");
    assert_eq!(
        server_error(&err),
        (
            "FATAL",
            IDLE_IN_TRANSACTION_TIMEOUT,
            "terminating connection due to idle-in-transaction timeout"
        )
    );
    assert!(err.session_gone());
    // The settings the shared primary was started with reached it (seconds, shown bare).
    assert_eq!(
        one(&mut other, "SHOW tcp_keepalives_idle").await,
        Some("7".into())
    );
    assert_eq!(
        one(&mut other, "SHOW tcp_keepalives_interval").await,
        Some("2".into())
    );
    assert_eq!(
        one(&mut other, "SHOW tcp_keepalives_count").await,
        Some("3".into())
    );
    assert_eq!(
        one(&mut other, "SHOW max_connections").await,
        Some("60".into())
    );
    assert_eq!(
        one(&mut other, "SHOW wal_level").await,
        Some("replica".into())
    );
}
