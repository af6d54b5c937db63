//! The MySQL locks: what a lock on a database adds to [`crate::lock::Lock`] (`database_lock.rs`:
//! its table set-up) and the two locks of the MySQL locks article, `SELECT … FOR UPDATE`
//! (`for_update.rs`) and a unique insert (`insert_unique.rs`), written against the SQL seam
//! (`crate::sql::SqlConn`). Their `[lock]` keys (`lock::mysql_options::MysqlOptions`) stay with
//! the `[lock]` table: `LockConfig::mysql` names them.

pub mod database_lock;
pub mod for_update;
pub mod insert_unique;

pub use database_lock::DatabaseLock;
pub use for_update::MysqlForUpdate;
pub use insert_unique::MysqlInsertUnique;
