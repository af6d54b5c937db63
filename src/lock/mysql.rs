//! The MySQL lock a scenario names, as one type both MySQL worlds run, and the table set-up it
//! needs before any client starts.

use super::mysql_for_update::{self, MysqlForUpdate};
use super::mysql_insert_unique::MysqlInsertUnique;
use super::mysql_options::MysqlOptions;
use super::{Guard, Lock, LockConfig, LockError, LockKind};
use crate::env::Env;
use crate::sql::{SqlConn, SqlError};

/// One of the two MySQL locks, chosen by the scenario's kind.
pub enum SqlLock<C, E> {
    /// `kind = "mysql-for-update"`: a row lock held by an open transaction.
    ForUpdate(MysqlForUpdate<C, E>),
    /// `kind = "mysql-insert-unique"`: a row inserted under a unique key.
    InsertUnique(MysqlInsertUnique<C, E>),
}

impl<C, E> SqlLock<C, E> {
    /// The lock of `kind` (a MySQL kind) for one client, on its own connection.
    pub fn build(
        kind: LockKind,
        conn: C,
        env: E,
        config: LockConfig,
        options: MysqlOptions,
    ) -> Self {
        match kind {
            LockKind::MysqlForUpdate => {
                SqlLock::ForUpdate(MysqlForUpdate::new(conn, env, config, options))
            }
            _ => SqlLock::InsertUnique(MysqlInsertUnique::new(conn, env, config, options)),
        }
    }
}

impl<C, E> Lock for SqlLock<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        match self {
            SqlLock::ForUpdate(l) => l.acquire().await,
            SqlLock::InsertUnique(l) => l.acquire().await,
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        match self {
            SqlLock::ForUpdate(l) => l.release(guard).await,
            SqlLock::InsertUnique(l) => l.release(guard).await,
        }
    }
}

/// Creates what a lock of `kind` on `key` needs before any client runs: its table, and the
/// lock's row (`FOR UPDATE`) or fencing counter row.
pub async fn prepare<C: SqlConn>(
    conn: &mut C,
    kind: LockKind,
    options: &MysqlOptions,
    key: &str,
) -> Result<(), SqlError> {
    match kind {
        LockKind::MysqlForUpdate => mysql_for_update::prepare(conn, options, key).await,
        _ => options.prepare(conn, key).await,
    }
}
