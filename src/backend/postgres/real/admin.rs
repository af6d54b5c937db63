//! The control plane's short statements (is the server up, create the database, promote) from
//! blocking code.
//!
//! Spawning a server is blocking, like MariaDB's and Redis's, and may be called from a test
//! thread, a blocking-pool thread or, by mistake, inside a tokio runtime, where `block_on`
//! would panic. So each call runs its future on a scoped thread with a current-thread runtime
//! of its own: a few hundred microseconds, once per start-up step.

use std::future::Future;
use std::time::Duration;

use super::conn::RealPgConn;
use crate::backend::postgres::seam::{PgClient, PgError, Row};

/// Runs `future` to completion on a fresh runtime on its own thread.
pub(crate) fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread tokio runtime")
                    .block_on(future)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// One statement on a fresh session (closed right after), within `timeout`.
pub(crate) async fn query_once(
    conninfo: &str,
    sql: &str,
    timeout: Duration,
) -> Result<Vec<Row>, PgError> {
    let mut conn = RealPgConn::connect(conninfo, timeout).await?;
    conn.simple_query(sql).await
}

/// The first column of the first row, as text (`""` when there is none).
pub(crate) fn first_value(rows: &[Row]) -> String {
    rows.first()
        .and_then(|r| r.first().cloned().flatten())
        .unwrap_or_default()
}
