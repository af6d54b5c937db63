//! What the simulated and the real MySQL worlds share beyond the one run assembly
//! ([`crate::world`]): the cleanup job's pass and the bookkeeping of which fault a client's step
//! triggers and what the history says of it, and the tables a MySQL lock needs before any client
//! starts.

use crate::history::{EventKind, Recorder};
use crate::lock::mysql::DatabaseLock;
use crate::lock::mysql_insert_unique;
use crate::lock::mysql_options::{Cleanup, MysqlOptions};
use crate::scenario::{FaultKind, Scenario};
use crate::schedule::Schedule;
use crate::sql::{SqlConn, SqlError};

/// The faults a client reaching `point` now sets off.
pub fn due(schedule: &Schedule, rec: &Recorder, client: u32, point: &str) -> Vec<FaultKind> {
    schedule
        .take_at_point(rec.now_us() / 1000, client, point)
        .into_iter()
        .map(|f| f.kind)
        .collect()
}

/// One pass of the article's cleanup job at `now_ms` (the job's clock); a pass that deleted rows
/// is a fault in the history, since it frees locks nobody released.
pub async fn cleanup_pass<C: SqlConn>(
    conn: &mut C,
    options: &MysqlOptions,
    cleanup: Cleanup,
    now_ms: u64,
    rec: &Recorder,
) {
    let deleted = mysql_insert_unique::cleanup_once(conn, options, cleanup.lease_ms, now_ms).await;
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

/// Records that `client` crashed at `point` (its own event and the nemesis's note, which says
/// how this world carries the crash out).
pub fn record_client_crash(rec: &Recorder, client: u32, point: &str, how: &str) {
    rec.record(
        &format!("client-{client}"),
        EventKind::Crashed {
            point: point.to_string(),
        },
    );
    rec.record(
        "nemesis",
        EventKind::Fault {
            what: format!("client-{client} crashed at {point} ({how})"),
        },
    );
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
