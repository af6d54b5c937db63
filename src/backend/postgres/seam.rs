//! The PostgreSQL seam: what a lock on PostgreSQL needs from a session, and what it sees back.
//!
//! A PostgreSQL lock (an advisory lock, a fenced counter row) is written against [`PgClient`]
//! only. Each world supplies its side: the simulated world a session of the simulated server
//! (`engine/`, reached over the simulated network, through the simulated PgBouncer when the
//! scenario has one), real mode a `tokio-postgres` connection to a spawned `postgres` (or to a
//! spawned `pgbouncer` in front of it). The statement text is the same in both.
//!
//! Statements go through the *simple query protocol*, whose answers are text: a `boolean` is
//! `t`/`f`, a `void` (what `pg_advisory_lock` returns) is the empty string, a `bigint` its
//! digits. The simulated server answers in the same text, so the differential test compares
//! rows as strings, byte for byte.

use std::future::Future;

/// One row of a simple query's answer: each column's text, `None` for SQL NULL.
pub type Row = Vec<Option<String>>;

/// SQLSTATE `55P03` lock_not_available: a lock wait ran past `lock_timeout`.
pub const LOCK_NOT_AVAILABLE: &str = "55P03";
/// SQLSTATE `57014` query_canceled: a statement ran past `statement_timeout`.
pub const QUERY_CANCELED: &str = "57014";
/// SQLSTATE `57P01` admin_shutdown: the session was ended by `pg_terminate_backend` (or the
/// server is shutting down).
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// SQLSTATE `25P02` in_failed_sql_transaction: an earlier error aborted the transaction; every
/// statement but `ROLLBACK`/`COMMIT` fails until it ends.
pub const IN_FAILED_TRANSACTION: &str = "25P02";
/// SQLSTATE `40P01` deadlock_detected.
pub const DEADLOCK_DETECTED: &str = "40P01";
/// SQLSTATE `25P03` idle_in_transaction_session_timeout: the session sat in an open
/// transaction past the timeout and was ended.
pub const IDLE_IN_TRANSACTION_TIMEOUT: &str = "25P03";
/// SQLSTATE `57P05` idle_session_timeout (PostgreSQL 14+): the session sat idle past the
/// timeout and was ended.
pub const IDLE_SESSION_TIMEOUT: &str = "57P05";

/// A failed statement.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PgError {
    /// The server answered with an error (`ERROR` or `FATAL`), with its SQLSTATE.
    #[error("{severity} {sqlstate}: {message}")]
    Server {
        /// `ERROR` (the statement failed, the session lives) or `FATAL` (the session ended).
        severity: String,
        /// The five-character SQLSTATE (`55P03`, `57P01`, …): the same in both worlds.
        sqlstate: String,
        /// The server's message, as PostgreSQL words it.
        message: String,
    },
    /// The connection is gone: the server closed it (a termination the client learns of only
    /// now, a crash, a pooler that dropped it) or a reset came back. Whatever the session held
    /// is gone with it, and the client learns that only here.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// No answer within the request timeout: the client hung up, but the statement may still
    /// run (a stopped or cut-off server reads it later). What it did is unknown to the client.
    #[error("no answer: {0}")]
    NoAnswer(String),
    /// The simulated server does not model this statement; it says so instead of guessing.
    #[error("outside the simulated PostgreSQL subset: {0}")]
    Unsupported(String),
}

impl PgError {
    /// A statement error (`ERROR`): the session lives on.
    pub fn error(sqlstate: &str, message: impl Into<String>) -> PgError {
        PgError::Server {
            severity: "ERROR".into(),
            sqlstate: sqlstate.into(),
            message: message.into(),
        }
    }

    /// A session-ending error (`FATAL`).
    pub fn fatal(sqlstate: &str, message: impl Into<String>) -> PgError {
        PgError::Server {
            severity: "FATAL".into(),
            sqlstate: sqlstate.into(),
            message: message.into(),
        }
    }

    /// The SQLSTATE, when the server answered.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            PgError::Server { sqlstate, .. } => Some(sqlstate),
            _ => None,
        }
    }

    /// Whether the session is gone (lost, given up on, or ended with `FATAL`): every lock it
    /// held is gone too, and the next statement opens a new session.
    pub fn session_gone(&self) -> bool {
        match self {
            PgError::Server { severity, .. } => severity == "FATAL",
            PgError::ConnectionLost(_) | PgError::NoAnswer(_) => true,
            PgError::Unsupported(_) => false,
        }
    }

    /// Whether the lock may simply try again: its wait timed out.
    pub fn is_busy(&self) -> bool {
        matches!(
            self.sqlstate(),
            Some(LOCK_NOT_AVAILABLE | QUERY_CANCELED | DEADLOCK_DETECTED)
        )
    }
}

/// One client session of PostgreSQL (or of a pooler in front of it), as a lock uses it.
///
/// Every method returns a `Send` future so a lock runs in tokio tasks and in madsim nodes.
pub trait PgClient: Send {
    /// Runs one statement through the simple query protocol and returns its rows as text (no
    /// rows for a statement that returns none). A `WARNING` the server sends along (an
    /// `pg_advisory_unlock` of a lock the session does not hold) is not an error: the answer is
    /// the row (`f`), as every driver reports it.
    fn simple_query(&mut self, sql: &str)
        -> impl Future<Output = Result<Vec<Row>, PgError>> + Send;
}
