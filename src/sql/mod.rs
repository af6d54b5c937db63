//! The SQL seam: what a database lock needs from MySQL/MariaDB, and the two worlds behind it.
//!
//! A database lock (the MySQL locks article: `SELECT … FOR UPDATE` in a transaction, or a row
//! inserted under a unique key) is written against [`SqlConn`] only, the way a Redis lock is
//! written against a Redis connection. lockcheck supplies either
//! - a simulated InnoDB subset ([`engine::Engine`], driven through [`sim_conn::SimSqlConn`]): a pure,
//!   deterministic state machine with row locks, lock waits, `innodb_lock_wait_timeout`, duplicate
//!   keys and deadlock detection; or
//! - a real MariaDB/MySQL connection ([`real_conn::RealSqlConn`], over `mysql_async`).
//!
//! The lock's SQL text is the same in both worlds. The simulated engine parses it with `sqlparser`
//! (MySQL dialect) and refuses, with an error naming the statement, anything outside its subset.

pub mod engine;
pub mod error;
pub mod parse;
pub mod real_conn;
pub mod sim_conn;
pub mod value;

pub use engine::{Engine, SessionId, Step};
pub use error::SqlError;
pub use real_conn::RealSqlConn;
pub use sim_conn::{SharedEngine, SimSqlConn};
pub use value::{Output, Value};

use std::future::Future;

/// One client connection to a MySQL-compatible database, as a lock uses it.
///
/// Statements are SQL text with literal values (the locks quote their own values with
/// [`value::quote`]), so the simulated and the real database see exactly the same text. Every
/// method returns a `Send` future so a lock can run in tokio tasks and in madsim nodes.
pub trait SqlConn: Send {
    /// Runs a statement that returns rows (`SELECT`).
    fn query(
        &mut self,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, SqlError>> + Send;

    /// Runs a statement that changes rows or session state; returns the affected row count.
    fn execute(&mut self, sql: &str) -> impl Future<Output = Result<u64, SqlError>> + Send;

    /// `BEGIN`: starts an explicit transaction.
    fn begin(&mut self) -> impl Future<Output = Result<(), SqlError>> + Send {
        async {
            self.execute("BEGIN").await?;
            Ok(())
        }
    }

    /// `COMMIT`: makes the transaction's writes visible and releases its row locks.
    fn commit(&mut self) -> impl Future<Output = Result<(), SqlError>> + Send {
        async {
            self.execute("COMMIT").await?;
            Ok(())
        }
    }

    /// `ROLLBACK`: undoes the transaction's writes and releases its row locks.
    fn rollback(&mut self) -> impl Future<Output = Result<(), SqlError>> + Send {
        async {
            self.execute("ROLLBACK").await?;
            Ok(())
        }
    }
}
