//! What the simulated and the real PostgreSQL worlds share: the objects a lock needs before any
//! client starts, and the application's other traffic through the pooler.
//!
//! The application's other traffic (`[postgres] app_transactions`) is a connection per
//! transaction that is not a lock client: `BEGIN` at its `at_ms`, `COMMIT` `for_ms` later.
//!
//! Why a lock test needs it: behind PgBouncer in transaction mode, a server connection is lent
//! for one transaction and the idle ones are lent again last-returned first. Which connection a
//! lock client is lent, and so whether it meets a session lock left on that connection (it
//! "acquires" it at once: session locks stack) or waits for it on another (stranded until
//! `server_lifetime`), depends on what else holds connections at that moment. In production
//! that is the application's own traffic; here it is these transactions, at times the scenario
//! states, so the outcome follows from the file and not from a race.

use crate::backend::postgres::lock::FENCE_SEQUENCE;
use crate::backend::postgres::seam::{PgClient, PgError};
use crate::env::Env;
use crate::history::{EventKind, Recorder};
use std::time::Duration;

/// Creates what the locks need on the admin connection `conn`: the fencing sequence.
pub async fn prepare<C: PgClient>(conn: &mut C) -> Result<(), PgError> {
    conn.simple_query(&format!("CREATE SEQUENCE IF NOT EXISTS {FENCE_SEQUENCE}"))
        .await
        .map(|_| ())
}

/// What the history calls application transaction `i` (1-based, in the order written).
fn app_transaction(i: usize) -> String {
    format!("application transaction {}", i + 1)
}

/// Runs application transaction `i`: waits until `at_ms` of true time, `BEGIN` on `conn`, keeps
/// the transaction open `for_ms` (on `env`'s clock), `COMMIT`. The history says when each went
/// through, or why not: a transaction the pooler could not serve is no lock client's concern,
/// so an error is noted, never raised.
pub async fn run_app_transaction<C: PgClient, E: Env>(
    i: usize,
    (at_ms, for_ms): (u64, u64),
    mut conn: C,
    env: E,
    rec: Recorder,
) {
    let now = Duration::from_micros(rec.now_us());
    env.sleep(Duration::from_millis(at_ms).saturating_sub(now))
        .await;
    let what = app_transaction(i);
    let note = |text: String| rec.record("nemesis", EventKind::Fault { what: text });
    match conn.simple_query("BEGIN").await {
        Ok(_) => note(format!(
            "{what} began through pgbouncer: it keeps a server connection for {for_ms} ms"
        )),
        Err(e) => {
            note(format!("{what} could not begin: {e}"));
            return;
        }
    }
    env.sleep(Duration::from_millis(for_ms)).await;
    match conn.simple_query("COMMIT").await {
        Ok(_) => note(format!(
            "{what} committed: its server connection goes back to the pool"
        )),
        Err(e) => note(format!("{what} could not commit: {e}")),
    }
}

/// The client number an application transaction's connection goes by in the simulated server's
/// books (never a lock client's: those count up from 0).
pub fn app_client_number(i: usize) -> u32 {
    u32::MAX - i as u32
}
