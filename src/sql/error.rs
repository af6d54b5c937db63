//! SQL errors with MySQL error codes, so the simulated and the real database can be compared code
//! for code, and a lock can react to "duplicate key" or "lock wait timeout" the same way in both.

/// `ER_DUP_ENTRY`: a unique or primary key already holds this value.
pub const ER_DUP_ENTRY: u16 = 1062;
/// `ER_LOCK_WAIT_TIMEOUT`: a row lock was not granted within `innodb_lock_wait_timeout`
/// (MariaDB also answers `NOWAIT` with it).
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// `ER_LOCK_DEADLOCK`: the statement closed a cycle of lock waits; its transaction was rolled back.
pub const ER_LOCK_DEADLOCK: u16 = 1213;

/// A failed SQL call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// The server answered with an error code (the same codes in both worlds).
    #[error("ERROR {code}: {message}")]
    Server {
        /// MySQL's error number (1205 lock wait timeout, 1062 duplicate key, 1213 deadlock).
        code: u16,
        /// The server's message, as MariaDB words it.
        message: String,
    },
    /// The connection is gone under the statement: the server closed or reset it (a crash, a
    /// restart, `wait_timeout`), so whatever the session had open was rolled back.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// No answer within the response timeout: the client hung up, but the statement may still
    /// run (a partitioned or stopped server reads it later; a `COMMIT` then commits). What it did
    /// is unknown to the client.
    #[error("no answer: {0}")]
    NoAnswer(String),
    /// The simulated engine does not model this statement; it says so instead of guessing.
    #[error("outside the simulated InnoDB subset: {0}")]
    Unsupported(String),
}

impl SqlError {
    /// A server error with `code`.
    pub fn server(code: u16, message: impl Into<String>) -> SqlError {
        SqlError::Server {
            code,
            message: message.into(),
        }
    }

    /// The MySQL error code, when the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            SqlError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the connection is gone (lost or given up on): the next statement reconnects.
    pub fn connection_gone(&self) -> bool {
        matches!(self, SqlError::ConnectionLost(_) | SqlError::NoAnswer(_))
    }

    /// Whether the lock may simply try again (the row was busy or the wait timed out).
    pub fn is_busy(&self) -> bool {
        matches!(
            self.code(),
            Some(ER_DUP_ENTRY | ER_LOCK_WAIT_TIMEOUT | ER_LOCK_DEADLOCK)
        )
    }
}
