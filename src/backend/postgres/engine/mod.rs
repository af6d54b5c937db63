//! The simulated PostgreSQL: its advisory lock table, the statements advisory locks send, and
//! the sessions the server keeps and ends.

pub mod advisory;
pub mod machine;
pub mod parse;

pub use advisory::{Key, Mode, Scope, SessionId};
pub use machine::{Engine, Settings, Step, Woken};
