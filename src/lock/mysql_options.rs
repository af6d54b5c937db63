//! Options of the two locks from the MySQL locks article, and the table each one uses.
//!
//! The article's locks need a table; these options say which, how long a blocked `FOR UPDATE`
//! waits inside the server, whether it waits at all (`NOWAIT`, `SKIP LOCKED`), and whether the
//! unique-key lock has the cleanup job the article suggests for rows whose owner died.
//!
//! The locks themselves live in their backend's folder (`backend::mysql::lock`); their options
//! stay here, beside the `[lock]` table that carries their keys (`LockConfig::mysql` is one).

use crate::sql::SqlConn;
use crate::sql::SqlError;

/// What a locking read does when another transaction holds the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitMode {
    /// Wait inside the server, up to `innodb_lock_wait_timeout` (error 1205 after it).
    #[default]
    Wait,
    /// `FOR UPDATE NOWAIT`: fail at once; the client retries after its own pause.
    Nowait,
    /// `FOR UPDATE SKIP LOCKED`: an empty result at once; the client retries.
    SkipLocked,
}

/// The unique-key lock's cleanup job: delete lock rows older than `lease_ms`, every `interval_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cleanup {
    /// Age after which a row counts as abandoned (the lock's only lease: without cleanup, a
    /// dead owner's row stays forever).
    pub lease_ms: u64,
    /// How often the job runs; a dead owner's row can outlive `lease_ms` by up to this much.
    pub interval_ms: u64,
}

/// Options for `mysql-for-update` and `mysql-insert-unique`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlOptions {
    /// The lock table.
    pub table: String,
    /// `innodb_lock_wait_timeout` for the lock's session, in seconds (whole seconds, as MariaDB
    /// takes them). InnoDB's default is 50.
    pub lock_wait_timeout_s: u64,
    /// `FOR UPDATE`, `FOR UPDATE NOWAIT` or `FOR UPDATE SKIP LOCKED`.
    pub wait_mode: WaitMode,
    /// The unique-key lock's cleanup job; `None` is the article's lock without one.
    pub cleanup: Option<Cleanup>,
    /// The unique-key lock hands out a fencing token with each grant: a counter row (in
    /// `<table>_fence`) bumped by a compare-and-set after the insert.
    pub fencing: bool,
}

impl Default for MysqlOptions {
    fn default() -> Self {
        MysqlOptions {
            table: "distributed_lock".into(),
            lock_wait_timeout_s: 50,
            wait_mode: WaitMode::Wait,
            cleanup: None,
            fencing: false,
        }
    }
}

impl MysqlOptions {
    /// The lock table as the article sketches it: the lock name is the primary (unique) key, with
    /// the owner and the creation time (for the cleanup job).
    pub fn create_table(&self) -> String {
        format!(
            "CREATE TABLE {} (name VARCHAR(64) NOT NULL PRIMARY KEY, owner VARCHAR(64), created_ms BIGINT) ENGINE=InnoDB",
            self.table
        )
    }

    /// The fencing counter table: one row per lock name with the last token handed out.
    pub fn fence_table(&self) -> String {
        format!("{}_fence", self.table)
    }

    /// Creates the lock table (once, before any client runs); an existing table is kept. With
    /// `fencing`, also the counter table and the lock's counter row.
    pub async fn prepare<C: SqlConn>(&self, conn: &mut C, key: &str) -> Result<(), SqlError> {
        ignore(conn.execute(&self.create_table()).await, 1050)?;
        if self.fencing {
            let create = format!(
                "CREATE TABLE {} (name VARCHAR(64) NOT NULL PRIMARY KEY, token BIGINT) ENGINE=InnoDB",
                self.fence_table()
            );
            ignore(conn.execute(&create).await, 1050)?;
            let row = format!(
                "INSERT INTO {} (name, token) VALUES ({}, 0)",
                self.fence_table(),
                crate::sql::value::quote(key)
            );
            ignore(conn.execute(&row).await, crate::sql::error::ER_DUP_ENTRY)?;
        }
        Ok(())
    }
}

/// `r`, with the server error `code` (the thing already exists) taken as success.
fn ignore(r: Result<u64, SqlError>, code: u16) -> Result<(), SqlError> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(code) => Ok(()),
        Err(e) => Err(e),
    }
}
