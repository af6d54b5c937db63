//! What the simulated and the real MySQL worlds share beyond the one run assembly
//! ([`crate::world`]): the cleanup job's pass and the bookkeeping of which fault a client's step
//! triggers and what the history says of it, and the tables a MySQL lock needs before any client
//! starts.

use super::lock::{insert_unique, DatabaseLock};
use crate::history::{EventKind, Recorder};
use crate::lock::mysql_options::{Cleanup, MysqlOptions};
use crate::scenario::Scenario;
use crate::sql::{SqlConn, SqlError};

/// One pass of the article's cleanup job at `now_ms` (the job's clock); a pass that deleted rows
/// is a fault in the history, since it frees locks nobody released.
pub async fn cleanup_pass<C: SqlConn>(
    conn: &mut C,
    options: &MysqlOptions,
    cleanup: Cleanup,
    now_ms: u64,
    rec: &Recorder,
) {
    let deleted = insert_unique::cleanup_once(conn, options, cleanup.lease_ms, now_ms).await;
    if let Ok(n @ 1..) = deleted {
        rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!(
                    "cleanup job deleted {n} lock row(s) older than {} ms",
                    cleanup.lease_ms
                ),
            },
        );
    }
}

/// Creates what `scenario`'s MySQL lock needs before any client runs (its table, and the lock's
/// row or fencing counter row), on the admin connection `conn`.
pub async fn prepare<L: DatabaseLock, C: SqlConn>(
    conn: &mut C,
    scenario: &Scenario,
) -> Result<(), SqlError> {
    let options = scenario.lock.mysql_options();
    L::prepare(conn, &options, &scenario.lock.key).await
}
