//! An advisory lock's round trip on a real server, and a termination that frees it behind its
//! holder's back.

use crate::{connect, fails, holders, one, primary, q};
use lockcheck::backend::postgres::seam::{PgError, ADMIN_SHUTDOWN};

/// `pg_advisory_lock` answers one row holding `""` (a `void`), another session's try-lock `f`,
/// its unlock `f` (with a WARNING, which is no error); the holder's unlock `t` frees it.
#[tokio::test]
async fn an_advisory_lock_round_trip() {
    let p = primary();
    let mut a = connect(&p.conninfo()).await;
    let mut b = connect(&p.conninfo()).await;
    assert_eq!(
        q(&mut a, "SELECT pg_advisory_lock(1)").await,
        vec![vec![Some(String::new())]]
    );
    assert_eq!(
        one(&mut b, "SELECT pg_try_advisory_lock(1)").await,
        Some("f".into())
    );
    assert_eq!(
        one(&mut b, "SELECT pg_advisory_unlock(1)").await,
        Some("f".into()),
        "the non-holder's unlock"
    );
    assert_eq!(
        holders(p, 1).await,
        vec![a.backend_pid().await.unwrap().to_string()]
    );
    assert_eq!(
        one(&mut a, "SELECT pg_advisory_unlock(1)").await,
        Some("t".into())
    );
    assert_eq!(
        one(&mut b, "SELECT pg_try_advisory_lock(1)").await,
        Some("t".into())
    );
    assert_eq!(
        one(&mut b, "SELECT pg_advisory_unlock_all()").await,
        Some(String::new())
    );
    assert_eq!(
        one(&mut a, "SELECT NULL::text").await,
        None,
        "SQL NULL is None"
    );
}

/// `pg_terminate_backend` of the holder frees its lock at once; the holder learns it only on
/// its next statement, which fails with the server's FATAL (its session is gone), and the one
/// after opens a new session.
#[tokio::test]
async fn a_terminated_holder_loses_its_lock_and_learns_it_on_its_next_statement() {
    let p = primary();
    let mut holder = connect(&p.conninfo()).await;
    let mut other = connect(&p.conninfo()).await;
    q(&mut holder, "SELECT pg_advisory_lock(2)").await;
    let pid = holder.backend_pid().await.unwrap();
    assert_eq!(
        one(
            &mut other,
            &format!("SELECT pg_terminate_backend({pid}, 5000)")
        )
        .await,
        Some("t".into())
    );
    assert_eq!(
        one(&mut other, "SELECT pg_try_advisory_lock(2)").await,
        Some("t".into())
    );
    let err = fails(&mut holder, "SELECT 1").await;
    eprintln!("the terminated holder's next statement: {err:?}");
    assert!(err.session_gone(), "{err:?}");
    assert_eq!(err.sqlstate(), Some(ADMIN_SHUTDOWN), "{err:?}");
    assert!(
        matches!(&err, PgError::Server { severity, message, .. }
            if severity == "FATAL" && message == "terminating connection due to administrator command"),
        "{err:?}"
    );
    assert!(!holder.is_connected());
    assert_eq!(
        one(&mut holder, "SELECT pg_try_advisory_lock(2)").await,
        Some("f".into())
    );
    assert_ne!(holder.backend_pid().await.unwrap(), pid, "a new session");
}

/// What `tokio-postgres` itself reports when the server ends an idle session: the `FATAL` goes
/// to the connection future (which ends with it), and the client's next statement fails with
/// "connection closed" (or, when its request was written before the driver read the `FATAL`,
/// with the `FATAL` itself). `RealPgConn` reports the `FATAL` in both cases.
#[tokio::test]
async fn raw_tokio_postgres_sees_the_fatal_on_the_connection_future() {
    let p = primary();
    let (client, connection) = tokio_postgres::connect(&p.conninfo(), tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let answer = client
        .simple_query("SELECT pg_backend_pid()")
        .await
        .unwrap();
    let pid: u32 = answer
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0)?.parse().ok(),
            _ => None,
        })
        .unwrap();
    let mut other = connect(&p.conninfo()).await;
    q(
        &mut other,
        &format!("SELECT pg_terminate_backend({pid}, 5000)"),
    )
    .await;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), driver)
        .await
        .expect("the connection future ends by itself")
        .unwrap();
    let ended = ended.expect_err("it ends with the server's error");
    eprintln!("raw: the connection future ended with: {ended}");
    let db = ended.as_db_error().expect("a server error");
    assert_eq!((db.severity(), db.code().code()), ("FATAL", ADMIN_SHUTDOWN));
    let next = client.simple_query("SELECT 1").await.unwrap_err();
    eprintln!(
        "raw: the next statement: {next} (is_closed: {})",
        next.is_closed()
    );
    assert!(next.is_closed(), "{next}");
}
