//! What a lock on a MySQL/MariaDB database adds to [`Lock`]: the table set-up it needs before any
//! client starts. Both MySQL worlds (`backend::mysql::sim::world`, `backend::mysql::real::world`)
//! run any lock that implements it, registered by the MySQL backend (`backend::mysql::locks`).

use crate::lock::mysql_options::MysqlOptions;
use crate::lock::Lock;
use crate::sql::{SqlConn, SqlError};
use std::future::Future;

/// A lock on a database connection ([`SqlConn`]).
pub trait DatabaseLock: Lock {
    /// Creates what the lock on `key` needs before any client runs, on the admin connection
    /// `conn`: by default the lock table (and, with `fencing`, its counter row); a lock that
    /// needs more (the `FOR UPDATE` lock's row) says so.
    fn prepare<A: SqlConn>(
        conn: &mut A,
        options: &MysqlOptions,
        key: &str,
    ) -> impl Future<Output = Result<(), SqlError>> + Send {
        options.prepare(conn, key)
    }
}
