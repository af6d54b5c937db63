//! A session of a real PostgreSQL (or of a PgBouncer in front of one) over `tokio-postgres`,
//! behind the seam's [`PgClient`].
//!
//! Statements go through the simple query protocol, so the answers are the server's own text
//! (`t`/`f`, `""` for `void`), as the simulated server answers them. A `WARNING` the server
//! sends with a row (the unlock of a lock not held) is a notice, not an error: the answer is the
//! row, as every driver reports it.
//!
//! How a session's end reaches the client: when the server ends a session on its own
//! (`pg_terminate_backend`, an idle timeout) while the client is idle, it sends a `FATAL` error
//! nobody asked for and closes the socket. `tokio-postgres` hands that error to the
//! *connection* future (which then ends), not to the client, whose next statement only learns
//! "connection closed". So the task driving the connection keeps the error it ended with, and
//! the next statement reports it: `FATAL 57P01 terminating connection due to administrator
//! command`, as `psql` and libpq show it. A socket closed with no error is
//! [`PgError::ConnectionLost`].
//!
//! A statement that gets no answer within the request timeout (a paused server, a cut-off
//! network) fails with [`PgError::NoAnswer`] and the session is dropped: the socket is closed
//! at once, with no `Terminate` message (the connection future is aborted, not asked to finish
//! the request it waits for). The next statement opens a new session, as a pool would; what the
//! old one held is the server's to free when it notices. Dropping a [`RealPgConn`] closes its
//! socket the same way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use crate::backend::postgres::seam::{PgClient, PgError, Row};

/// The error the connection future ended with, kept for the client's next statement.
type EndedWith = Arc<Mutex<Option<PgError>>>;

/// One open session: the client half and the task that drives its socket.
struct Session {
    client: Client,
    driver: JoinHandle<()>,
    ended_with: EndedWith,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Dropping the connection future drops the socket: closed with no goodbye.
        self.driver.abort();
    }
}

/// One client session of a real PostgreSQL or PgBouncer. It reconnects on the statement after
/// a lost one, as a pool would.
pub struct RealPgConn {
    config: Config,
    timeout: Duration,
    session: Option<Session>,
}

impl std::fmt::Debug for RealPgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealPgConn")
            .field("timeout", &self.timeout)
            .field("connected", &self.session.is_some())
            .finish()
    }
}

/// The seam's error for a `tokio-postgres` error: the server's `ERROR`/`FATAL` with its
/// SQLSTATE as sent, anything else (I/O, a closed connection, a protocol error) a lost
/// connection.
fn convert(e: &tokio_postgres::Error) -> PgError {
    match e.as_db_error() {
        Some(db) => PgError::Server {
            severity: db.severity().to_string(),
            sqlstate: db.code().code().to_string(),
            message: db.message().to_string(),
        },
        None => PgError::ConnectionLost(e.to_string()),
    }
}

impl RealPgConn {
    /// Opens a session with `conninfo` (a libpq key/value string such as
    /// [`Postgres::conninfo`](super::Postgres::conninfo)); connecting and every statement get
    /// `timeout`. Must run inside a tokio runtime, which drives the socket.
    pub async fn connect(conninfo: &str, timeout: Duration) -> Result<RealPgConn, PgError> {
        let config: Config = conninfo
            .parse()
            .map_err(|e| PgError::ConnectionLost(format!("bad conninfo `{conninfo}`: {e}")))?;
        let mut conn = RealPgConn {
            config,
            timeout,
            session: None,
        };
        conn.ensure().await?;
        Ok(conn)
    }

    /// The server's pid for this session (`pg_backend_pid()`), to `pg_terminate_backend` it.
    /// Behind PgBouncer in transaction mode it is the server connection this statement ran on.
    pub async fn backend_pid(&mut self) -> Result<u32, PgError> {
        let rows = self.simple_query("SELECT pg_backend_pid()").await?;
        let text = rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .unwrap_or_default();
        text.parse()
            .map_err(|_| PgError::ConnectionLost(format!("pg_backend_pid() answered `{text}`")))
    }

    /// Closes the socket without a goodbye, as a crashed client does: the server sees the
    /// connection end and ends the session (freeing its locks) when it reads the EOF.
    pub fn drop_connection(&mut self) {
        self.session = None;
    }

    /// Whether a session is open (the next statement does not have to connect first).
    pub fn is_connected(&self) -> bool {
        self.session.is_some()
    }

    async fn ensure(&mut self) -> Result<&Client, PgError> {
        if self.session.is_none() {
            let connected = tokio::time::timeout(self.timeout, self.config.connect(NoTls))
                .await
                .map_err(|_| {
                    PgError::ConnectionLost(format!(
                        "connect: nothing within {} ms",
                        self.timeout.as_millis()
                    ))
                })?;
            let (client, connection) = connected.map_err(|e| convert(&e))?;
            let ended_with: EndedWith = Arc::new(Mutex::new(None));
            let slot = Arc::clone(&ended_with);
            let driver = tokio::spawn(async move {
                // Kept alive until the error is stored: the client's channel closes only when
                // the connection is dropped, so its next statement finds the error in place.
                let mut connection = Box::pin(connection);
                if let Err(e) = connection.as_mut().await {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(convert(&e));
                }
                drop(connection);
            });
            self.session = Some(Session {
                client,
                driver,
                ended_with,
            });
        }
        Ok(&self.session.as_ref().expect("just connected").client)
    }
}

/// The rows of a simple query's answer, each column's text.
fn rows_of(messages: Vec<SimpleQueryMessage>) -> Vec<Row> {
    messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

impl PgClient for RealPgConn {
    async fn simple_query(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        let timeout = self.timeout;
        let client = self.ensure().await?;
        let answer = tokio::time::timeout(timeout, client.simple_query(sql)).await;
        match answer {
            Ok(Ok(messages)) => Ok(rows_of(messages)),
            Ok(Err(e)) => {
                let mut error = convert(&e);
                if e.is_closed() || !matches!(error, PgError::Server { .. }) {
                    // The connection ended: with the server's own FATAL if it sent one.
                    let session = self.session.take().expect("a session ran the statement");
                    // The driver stores the error before it drops the connection, and the
                    // client saw the connection dropped, so a stored error is there by now.
                    let stored = session
                        .ended_with
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take();
                    if let Some(stored) = stored {
                        error = stored;
                    }
                } else if error.session_gone() {
                    // A FATAL answer to this very statement: the server closes the socket.
                    self.session = None;
                }
                Err(error)
            }
            Err(_) => {
                self.session = None;
                Err(PgError::NoAnswer(format!(
                    "nothing within {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}
