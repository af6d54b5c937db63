//! A client's connection in a real PostgreSQL run: through its own forwarders (so a partition
//! can cut it) to whichever server is primary now, reconnecting on the statement after a lost
//! one, as a pool with a failover-aware address (a DNS name, a VIP, `target_session_attrs`)
//! does.

use crate::backend::postgres::real::RealPgConn;
use crate::backend::postgres::seam::{PgClient, PgError, Row};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One client's connection: `targets[i]` is its forwarder's conninfo to server `i` (the primary
/// first, then the standby), and `primary` says which one is primary now.
pub struct PgRoute {
    targets: Vec<String>,
    primary: Arc<AtomicUsize>,
    timeout: Duration,
    /// The open session and the server it is on.
    conn: Option<(RealPgConn, usize)>,
}

impl PgRoute {
    /// A connection to `targets` (connected on its first statement).
    pub fn new(targets: Vec<String>, primary: Arc<AtomicUsize>, timeout: Duration) -> PgRoute {
        PgRoute {
            targets,
            primary,
            timeout,
            conn: None,
        }
    }
}

impl PgClient for PgRoute {
    async fn simple_query(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        let now = self.primary.load(Ordering::SeqCst);
        if self.conn.as_ref().is_some_and(|(_, on)| *on != now) {
            // A failover since the last statement: the old session died with its server.
            self.conn = None;
        }
        if self.conn.is_none() {
            let c = RealPgConn::connect(&self.targets[now], self.timeout).await?;
            self.conn = Some((c, now));
        }
        let (c, _) = self.conn.as_mut().expect("connected above");
        c.simple_query(sql).await
    }
}
