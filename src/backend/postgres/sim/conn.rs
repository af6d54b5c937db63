//! A client's connection to the simulated PostgreSQL over the simulated network: straight to
//! the primary, or through the simulated PgBouncer (`bouncer.rs`).
//!
//! Each statement is a round trip: the request travels for the link's latency, runs on the
//! server (an advisory lock may wait there), and the answer travels back. No answer within the
//! request timeout fails the statement with [`PgError::NoAnswer`]; the client then drops its
//! connection, as a driver's pool does, and reconnects on its next statement. A session the
//! server ended while the client was idle (a termination, an idle timeout, a crash) is heard of
//! only on the client's next statement.
//!
//! A client that hangs up while its statement waits for a lock ends its backend here at once;
//! a real backend blocked on a lock notices the closed socket only when the wait ends (unless
//! `client_connection_check_interval` is set), so it may hold the lock for a moment before it
//! exits. Not modelled: it changes how long a dead waiter delays the others, not who holds.

use crate::backend::postgres::seam::{PgClient, PgError, Row};
use crate::backend::postgres::sim::bouncer::{PooledConn, SimBouncer};
use crate::backend::postgres::sim::server::SimPg;
use crate::backend::postgres::sim::session::PgSession;
use crate::sim::SimEnv;
use std::time::Duration;

/// A client's connection to the simulated deployment.
pub struct NetPgConn {
    route: Route,
}

enum Route {
    Direct(DirectConn),
    Pooled(PooledConn),
}

impl NetPgConn {
    /// Client `client`'s connection from node `node` straight to the primary.
    pub fn direct(
        pg: SimPg,
        client: u32,
        node: usize,
        env: SimEnv,
        timeout: Duration,
    ) -> NetPgConn {
        NetPgConn {
            route: Route::Direct(DirectConn {
                pg,
                client,
                node,
                env,
                timeout,
                conn: None,
            }),
        }
    }

    /// Client `client`'s connection from node `node` to the pooler.
    pub fn pooled(bouncer: SimBouncer, client: u32, node: usize, timeout: Duration) -> NetPgConn {
        NetPgConn {
            route: Route::Pooled(PooledConn::new(bouncer, client, node, timeout)),
        }
    }
}

impl PgClient for NetPgConn {
    async fn simple_query(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        match &mut self.route {
            Route::Direct(d) => d.statement(sql).await,
            Route::Pooled(p) => p.statement(sql).await,
        }
    }
}

/// A connection straight to the primary.
struct DirectConn {
    pg: SimPg,
    client: u32,
    node: usize,
    env: SimEnv,
    timeout: Duration,
    /// The open session and the primary's incarnation it belongs to.
    conn: Option<(PgSession<SimEnv>, u64)>,
}

/// One hop of a message between nodes `from` and `to`: the link's latency; a cut link never
/// delivers it; a primary that is down refuses (a reset comes back at once).
pub(super) async fn hop(pg: &SimPg, from: usize, to: usize) -> Result<(), PgError> {
    madsim::time::sleep(pg.net.latency()).await;
    if !pg.net.reachable(from, to) {
        std::future::pending::<()>().await;
    }
    if !pg.up() {
        madsim::time::sleep(pg.net.latency()).await;
        return Err(PgError::ConnectionLost(
            "connection refused (server down)".into(),
        ));
    }
    Ok(())
}

impl DirectConn {
    async fn attempt(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        if let Some((_, inc)) = &self.conn {
            if *inc != self.pg.incarnation() {
                // The server crashed or was replaced under this connection.
                if let Some((s, _)) = self.conn.take() {
                    s.detach();
                }
                self.pg.client_session(self.client, None);
                return Err(PgError::ConnectionLost(
                    "server closed the connection unexpectedly".into(),
                ));
            }
        }
        let primary = self.pg.primary();
        if self.conn.is_none() {
            hop(&self.pg, self.node, primary).await?;
            let session = self.pg.server().connect(self.env.clone());
            self.pg.track(session.id(), self.node);
            self.pg.client_session(self.client, Some(session.id()));
            self.conn = Some((session, self.pg.incarnation()));
            hop(&self.pg, primary, self.node).await?;
        }
        hop(&self.pg, self.node, primary).await?;
        self.pg.count_statement();
        let (session, _) = self.conn.as_mut().expect("connected above");
        let out = session.run(sql).await;
        if let Err(e) = &out {
            if e.session_gone() {
                // The backend is gone: its FATAL (or the closed socket) is the last word.
                if let Some((s, _)) = self.conn.take() {
                    self.pg.untrack(s.id());
                    s.detach();
                }
                self.pg.client_session(self.client, None);
                if matches!(e, PgError::ConnectionLost(_)) {
                    return out;
                }
            }
        }
        hop(&self.pg, primary, self.node).await?;
        out
    }

    /// The client closes its socket: the server hears it unless the link or the server is
    /// down; otherwise its backend lives on until keepalive gives up.
    fn hang_up(&mut self) {
        if let Some((s, inc)) = self.conn.take() {
            self.pg.client_session(self.client, None);
            let primary = self.pg.primary();
            let heard = self.pg.net.reachable(self.node, primary)
                && self.pg.up()
                && inc == self.pg.incarnation();
            if heard {
                self.pg.untrack(s.id());
                drop(s);
            } else {
                self.pg.peer_gone(s.id());
                s.detach();
            }
        }
    }

    async fn statement(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        match madsim::time::timeout(self.timeout, self.attempt(sql)).await {
            Ok(r) => r,
            Err(_) => {
                self.hang_up();
                Err(PgError::NoAnswer(format!(
                    "nothing within {} ms",
                    self.timeout.as_millis()
                )))
            }
        }
    }
}

impl Drop for DirectConn {
    /// A crashed client's socket closes with its process.
    fn drop(&mut self) {
        self.hang_up();
    }
}
