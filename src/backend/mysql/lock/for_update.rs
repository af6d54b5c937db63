//! `SELECT … FOR UPDATE` inside a transaction (the MySQL locks article).
//!
//! The lock is a row of the lock table, one per lock name; holding the lock is holding that row's
//! exclusive lock, inside an open transaction; releasing is `COMMIT`. The article's claim: safe
//! while the transaction lives, because InnoDB keeps the row lock until the transaction ends, and
//! a dead client's connection is closed and rolled back by the server. What it cannot prevent:
//! the server ending the transaction (`wait_timeout`, a killed connection, a server restart)
//! while the holder still believes it holds the lock; and it is slow (a round trip per statement,
//! a connection per holder).

use super::DatabaseLock;
use crate::env::Env;
use crate::lock::mysql_options::{MysqlOptions, WaitMode};
use crate::lock::{Guard, Lock, LockConfig, LockError};
use crate::sql::error::{ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT};
use crate::sql::value::quote;
use crate::sql::{SqlConn, SqlError};

/// One client's handle on a `SELECT … FOR UPDATE` lock. It owns its connection: the transaction
/// (and so the lock) lives in that session.
pub struct MysqlForUpdate<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
    options: MysqlOptions,
    session_ready: bool,
}

/// The kind's scenario-file name.
pub const NAME: &str = "mysql-for-update";

impl<C, E> MysqlForUpdate<C, E> {
    /// One client's lock over its own database session `conn` (the row lock belongs to the
    /// session's transaction, so clients cannot share one); `options` names the lock table
    /// and the session's lock-wait behaviour.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        MysqlForUpdate {
            conn: crate::lock::only_connection(conns),
            env,
            options: config.mysql.clone(),
            config,
            session_ready: false,
        }
    }

    /// The row the lock locks; it must exist before the first `FOR UPDATE` (an absent row would
    /// only take a gap lock, which two clients can hold at once).
    pub fn insert_row_sql(options: &MysqlOptions, key: &str) -> String {
        format!(
            "INSERT INTO {} (name, owner, created_ms) VALUES ({}, NULL, 0)",
            options.table,
            quote(key)
        )
    }

    fn select_sql(&self) -> String {
        let suffix = match self.options.wait_mode {
            WaitMode::Wait => "",
            WaitMode::Nowait => " NOWAIT",
            WaitMode::SkipLocked => " SKIP LOCKED",
        };
        format!(
            "SELECT name FROM {} WHERE name = {} FOR UPDATE{suffix}",
            self.options.table,
            quote(&self.config.key)
        )
    }
}

/// Creates the lock table and the lock's row (idempotent).
pub async fn prepare<C: SqlConn>(
    conn: &mut C,
    options: &MysqlOptions,
    key: &str,
) -> Result<(), SqlError> {
    options.prepare(conn, key).await?;
    let insert = MysqlForUpdate::<C, ()>::insert_row_sql(options, key);
    match conn.execute(&insert).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(ER_DUP_ENTRY) => Ok(()),
        Err(e) => Err(e),
    }
}

impl<C, E> Lock for MysqlForUpdate<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "MySQL: BEGIN; SELECT … FOR UPDATE on the lock's row; COMMIT to release; the row lock lives as long as the transaction (the MySQL locks article, docs/mysql.md)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let deadline = self.env.now_ms() + self.config.wait.as_millis() as u64;
        let select = self.select_sql();
        loop {
            if !self.session_ready {
                let set = format!(
                    "SET SESSION innodb_lock_wait_timeout = {}",
                    self.options.lock_wait_timeout_s
                );
                match self.conn.execute(&set).await {
                    Ok(_) => self.session_ready = true,
                    Err(e) if e.connection_gone() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let started = self.env.now_ms();
            let attempt = async {
                self.conn.begin().await?;
                self.conn.query(&select).await
            };
            match attempt.await {
                Ok(rows) if !rows.is_empty() => {
                    return Ok(Some(Guard {
                        owner,
                        fencing_token: None,
                        acquired_at_ms: started,
                        // No lease: the lock lasts as long as the transaction.
                        valid_until_ms: u64::MAX,
                    }));
                }
                // SKIP LOCKED: the row is someone else's.
                Ok(_) => {
                    let _ = self.conn.rollback().await;
                }
                Err(e) if matches!(e.code(), Some(ER_LOCK_WAIT_TIMEOUT | ER_LOCK_DEADLOCK)) => {
                    let _ = self.conn.rollback().await;
                }
                Err(e) if e.connection_gone() => self.session_ready = false,
                Err(e) => return Err(e.into()),
            }
            if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
                return Ok(None);
            }
        }
    }

    async fn release(&mut self, _guard: &Guard) -> Result<bool, LockError> {
        match self.conn.commit().await {
            Ok(()) => Ok(true),
            // The server closed the connection, so it already rolled back: the lock was lost
            // before this release.
            Err(SqlError::ConnectionLost(_)) => {
                self.session_ready = false;
                Ok(false)
            }
            // No answer: the COMMIT may still run (a stopped or partitioned server reads it
            // later) or the server may roll back when it sees the hang-up. Which one, the client
            // cannot know, so the release's outcome is unknown, not "lost".
            Err(e @ SqlError::NoAnswer(_)) => {
                self.session_ready = false;
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl<C, E> DatabaseLock for MysqlForUpdate<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
    async fn prepare<A: SqlConn>(
        conn: &mut A,
        options: &MysqlOptions,
        key: &str,
    ) -> Result<(), SqlError> {
        prepare(conn, options, key).await
    }
}
