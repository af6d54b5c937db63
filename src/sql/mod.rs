//! The SQL seam: what a database lock needs from MySQL/MariaDB, and the values and errors it sees.
//!
//! A database lock (the MySQL locks article: `SELECT … FOR UPDATE` in a transaction, or a row
//! inserted under a unique key) is written against [`SqlConn`] only, the way a Redis lock is
//! written against a Redis connection. Each world supplies its side: the simulated world a
//! session on the simulated InnoDB subset (`backend/mysql/engine/`, through `sim::SimSqlConn`), real mode a
//! MariaDB/MySQL connection (`real::RealSqlConn`, over `mysql_async`). The lock's SQL text is the
//! same in both.

pub mod error;
pub mod value;

pub use error::SqlError;
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
