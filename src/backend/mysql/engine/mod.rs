//! The simulated InnoDB subset: a pure, deterministic engine behind the SQL seam
//! ([`crate::sql::SqlConn`]), as `simredis/` is the simulated Redis engine behind a Redis
//! connection. A simulated world drives it through `sim::SimSqlConn`.
//!
//! The lock's SQL text is the same in both worlds: the engine parses it with `sqlparser` (MySQL
//! dialect) and refuses, with an error naming the statement, anything outside its subset.

pub mod machine;
pub mod parse;

pub use machine::{Engine, SessionId, Step};
