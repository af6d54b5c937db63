//! What the MySQL backend reads off its scenario table, `[database]`: its server's node name and
//! how long a statement waits for its answer. The table's type,
//! `scenario::database::DatabaseSpec`, stays in the scenario format: `Scenario::database`, a
//! public field, names it.

use crate::scenario::Scenario;
use std::time::Duration;

/// The database server's node name in a MySQL scenario (faults name it).
pub const SERVER: &str = "mysql-0";

/// A statement's response timeout.
pub fn request_timeout(s: &Scenario) -> Duration {
    let ms = s
        .database
        .request_timeout_ms
        .unwrap_or(s.lock.mysql_options().lock_wait_timeout_s * 1000 + 2000);
    Duration::from_millis(ms)
}
