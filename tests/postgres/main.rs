//! PostgreSQL's real side: lockcheck's own `postgres` (a primary, a standby it promotes),
//! `pgbouncer` in front of it, and the `tokio-postgres` session behind the seam, on advisory
//! locks; and the cleanup promises (no server, backend or directory left after a drop, a
//! panic or a `SIGKILL`).
//!
//! Most tests share one primary ([`primary`]), each on advisory keys and tables of its own, so
//! the binary pays for one `initdb` and start-up instead of one per test; the tests that kill,
//! pause or restart a server, or count what is left of it, spawn their own.

mod advisory;
mod bouncer;
mod cleanup;
#[path = "../common/mod.rs"]
mod common;
mod differential;
mod ends;
mod errors;
mod scenarios;
mod standby;
mod stranded;
mod table;

use lockcheck::backend::postgres::real::{Postgres, RealPgConn, ServerSettings};
use lockcheck::backend::postgres::seam::{PgClient, PgError, Row};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One test at a time that runs many real servers or many statements (the scenarios on real
/// servers, the differential test): two cores shared with them miss no timing then.
pub fn real_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every statement's and connect's timeout in these tests.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of the shared primary: keepalive values that are not the defaults, so a test
/// can see `ServerSettings` reach the server.
pub fn shared_settings() -> ServerSettings {
    ServerSettings {
        tcp_keepalives_idle_s: 7,
        tcp_keepalives_interval_s: 2,
        tcp_keepalives_count: 3,
        max_connections: 60,
        ..ServerSettings::default()
    }
}

/// The primary the tests share, started by the first that asks; killed and removed when the
/// test binary exits (a static is never dropped, so an `atexit` hook does it).
pub fn primary() -> &'static Postgres {
    static PRIMARY: OnceLock<Postgres> = OnceLock::new();
    extern "C" fn kill_the_shared_primary() {
        if let Some(p) = PRIMARY.get() {
            p.kill();
            let _ = std::fs::remove_dir_all(p.dir());
        }
    }
    PRIMARY.get_or_init(|| {
        let started = Instant::now();
        let p = Postgres::spawn(&shared_settings()).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("shared primary: spawned in {:?}", started.elapsed());
        // SAFETY: registering a plain extern "C" function with no preconditions.
        unsafe { libc::atexit(kill_the_shared_primary) };
        p
    })
}

/// A new session with `conninfo`.
pub async fn connect(conninfo: &str) -> RealPgConn {
    RealPgConn::connect(conninfo, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("connecting to {conninfo}: {e}"))
}

/// One statement that must succeed.
pub async fn q(conn: &mut RealPgConn, sql: &str) -> Vec<Row> {
    conn.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The single value a statement answers.
pub async fn one(conn: &mut RealPgConn, sql: &str) -> Option<String> {
    let rows = q(conn, sql).await;
    assert_eq!(rows.len(), 1, "{sql} answered {rows:?}");
    assert_eq!(rows[0].len(), 1, "{sql} answered {rows:?}");
    rows[0][0].clone()
}

/// One statement that must fail.
pub async fn fails(conn: &mut RealPgConn, sql: &str) -> PgError {
    match conn.simple_query(sql).await {
        Ok(rows) => panic!("{sql} answered {rows:?}, expected an error"),
        Err(e) => e,
    }
}

/// The pids holding the advisory lock on `key` (granted), from a session of `server`.
pub async fn holders(server: &Postgres, key: i64) -> Vec<String> {
    let mut conn = connect(&server.conninfo()).await;
    q(
        &mut conn,
        &format!(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND ((classid::bigint << 32) | objid::bigint) = {key} ORDER BY pid"
        ),
    )
    .await
    .into_iter()
    .map(|r| r[0].clone().unwrap_or_default())
    .collect()
}
