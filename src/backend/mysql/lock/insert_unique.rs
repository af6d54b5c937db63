//! A lock that is a row inserted under a unique key (the MySQL locks article).
//!
//! Acquire is `INSERT` of the lock name (the primary key) with an owner token and the creation
//! time, in autocommit; a duplicate-key error (1062) means somebody holds it, so the client
//! pauses and tries again. Release is `DELETE … WHERE name = ? AND owner = ?`. The article's
//! claims: when the owner dies without releasing, the row stays forever (a liveness failure)
//! unless a cleanup job deletes old rows; and a cleanup that deletes by age alone also deletes the
//! row of a live owner that holds longer than the age, so a second client gets the lock (a
//! mutual-exclusion failure).

use super::DatabaseLock;
use crate::env::{Env, TaskHandle};
use crate::lock::mysql_options::{Cleanup, MysqlOptions};
use crate::lock::{Guard, Lock, LockConfig, LockError};
use crate::sql::error::ER_DUP_ENTRY;
use crate::sql::value::quote;
use crate::sql::{SqlConn, SqlError};
use std::time::Duration;

/// One client's handle on a unique-key insert lock.
pub struct MysqlInsertUnique<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
    options: MysqlOptions,
}

/// The kind's scenario-file name.
pub const NAME: &str = "mysql-insert-unique";

impl<C, E> MysqlInsertUnique<C, E> {
    /// One client's lock over the database session `conn`; `options` names the lock table and
    /// the cleanup job, if any, that deletes old rows.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        MysqlInsertUnique {
            conn: crate::lock::only_connection(conns),
            env,
            options: config.mysql.clone(),
            config,
        }
    }
}

impl<C: SqlConn, E> MysqlInsertUnique<C, E> {
    /// The next fencing token: read the lock's counter row, then compare-and-set it one higher
    /// (autocommit; a concurrent bump makes the set match no row, and it reads again).
    async fn next_token(&mut self) -> Result<u64, SqlError> {
        let table = self.options.fence_table();
        let key = quote(&self.config.key);
        loop {
            let rows = self
                .conn
                .query(&format!("SELECT token FROM {table} WHERE name = {key}"))
                .await?;
            let Some(crate::sql::Value::Int(t)) = rows.first().and_then(|r| r.first()) else {
                return Err(SqlError::Unsupported(format!(
                    "fencing counter row for {key} missing in {table}"
                )));
            };
            let t = *t;
            let set = format!(
                "UPDATE {table} SET token = {} WHERE name = {key} AND token = {t}",
                t + 1
            );
            if self.conn.execute(&set).await? == 1 {
                return Ok(t as u64 + 1);
            }
        }
    }
}

impl<C, E> Lock for MysqlInsertUnique<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "MySQL: INSERT the lock name under a unique key, duplicate key = busy; DELETE by owner to release; optional age-based cleanup job (the MySQL locks article, docs/mysql.md)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let deadline = self.env.now_ms() + self.config.wait.as_millis() as u64;
        loop {
            let started = self.env.now_ms();
            let insert = format!(
                "INSERT INTO {} (name, owner, created_ms) VALUES ({}, {}, {started})",
                self.options.table,
                quote(&self.config.key),
                quote(&owner)
            );
            match self.conn.execute(&insert).await {
                Ok(_) => {
                    // With a cleanup job the row lives `lease_ms` at most; without one, forever.
                    let valid_until_ms = match self.options.cleanup {
                        Some(c) => started + c.lease_ms,
                        None => u64::MAX,
                    };
                    let fencing_token = if self.options.fencing {
                        Some(self.next_token().await?)
                    } else {
                        None
                    };
                    return Ok(Some(Guard {
                        owner,
                        fencing_token,
                        acquired_at_ms: started,
                        valid_until_ms,
                    }));
                }
                Err(e) if e.code() == Some(ER_DUP_ENTRY) => {}
                // No answer: the row may or may not exist now. The article's lock does not look;
                // if it was inserted, it is ours but nobody knows, until the cleanup job runs.
                Err(e) if e.connection_gone() => {}
                Err(e) if e.is_busy() => {}
                Err(e) => return Err(e.into()),
            }
            if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
                return Ok(None);
            }
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let delete = format!(
            "DELETE FROM {} WHERE name = {} AND owner = {}",
            self.options.table,
            quote(&self.config.key),
            quote(&guard.owner)
        );
        Ok(self.conn.execute(&delete).await? == 1)
    }
}

/// One pass of the article's cleanup job: deletes lock rows created more than `lease_ms` before
/// `now_ms` (by whichever clock the job runs on). Returns how many rows it deleted.
pub async fn cleanup_once<C: SqlConn>(
    conn: &mut C,
    options: &MysqlOptions,
    lease_ms: u64,
    now_ms: u64,
) -> Result<u64, SqlError> {
    let cutoff = now_ms.saturating_sub(lease_ms);
    conn.execute(&format!(
        "DELETE FROM {} WHERE created_ms < {cutoff}",
        options.table
    ))
    .await
}

/// Runs the cleanup job on `env`'s node every `interval_ms` until the handle is aborted. Errors
/// are skipped (the job simply runs again next time), as a scheduled job would.
pub fn spawn_cleanup<C, E>(
    mut conn: C,
    env: E,
    options: MysqlOptions,
    cleanup: Cleanup,
) -> TaskHandle
where
    C: SqlConn + 'static,
    E: Env,
{
    let job_env = env.clone();
    env.spawn(async move {
        loop {
            job_env
                .sleep(Duration::from_millis(cleanup.interval_ms))
                .await;
            let now = job_env.now_ms();
            let _ = cleanup_once(&mut conn, &options, cleanup.lease_ms, now).await;
        }
    })
}

/// Its table (and fencing counter row) is all it needs.
impl<C, E> DatabaseLock for MysqlInsertUnique<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
}
