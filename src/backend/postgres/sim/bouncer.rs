//! The simulated PgBouncer: clients connect to it, and it lends each a server connection from a
//! pool of at most `pool_size` for a whole client session (`pool_mode = session`) or for one
//! transaction (`pool_mode = transaction`).
//!
//! Why a session advisory lock breaks behind it in transaction mode: the lock belongs to the
//! server connection its `pg_advisory_lock` ran on, not to the client. That statement is a
//! transaction of its own, so the connection goes back to the pool holding the lock; the
//! client's `pg_advisory_unlock` may be lent another connection, where it answers `f` (a
//! WARNING drivers ignore) and the lock stays; and since session locks stack, the next client
//! lent the first connection "acquires" at once, while another may hold. Two holders, or a lock
//! stranded until `server_lifetime` closes the connection, because the reset query
//! (`DISCARD ALL`) runs in transaction mode only with `server_reset_query_always`
//! (pgbouncer#102, #418, #617; goauthentik/authentik#23876; rails#32622).
//!
//! Kept from PgBouncer 1.18 (`pgbouncer.ini` and `server_lifetime` in its docs): idle server
//! connections are reused last-released first (`server_round_robin = 0`); clients wait first
//! come first served when every connection is lent; a connection older than
//! `server_lifetime` is closed when it comes back (the server ends its session, and its locks
//! go); `DISCARD ALL` when a session-mode client leaves, and after each transaction only with
//! `server_reset_query_always`; a client that leaves mid-transaction has its server connection
//! closed; one that vanishes behind a cut keeps its lent connection (PgBouncer's
//! `client_idle_timeout` is 0 by default). Not kept: PgBouncer's own crash, `server_check_query`,
//! and statement pooling.

use crate::backend::postgres::engine::SessionId;
use crate::backend::postgres::seam::{PgError, Row};
use crate::backend::postgres::sim::conn::hop;
use crate::backend::postgres::sim::server::SimPg;
use crate::backend::postgres::sim::session::PgSession;
pub use crate::backend::postgres::table::PoolMode;
use crate::history::{EventKind, Recorder};
use crate::sim::SimEnv;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

/// The pooler's settings.
#[derive(Clone, Copy, Debug)]
pub struct BouncerSettings {
    /// `pool_mode`.
    pub mode: PoolMode,
    /// `default_pool_size`: server connections at most.
    pub pool_size: usize,
    /// `server_lifetime` (ms): an older connection is closed when it comes back.
    pub server_lifetime_ms: u64,
    /// `server_reset_query_always`: `DISCARD ALL` after every transaction, in transaction mode
    /// too.
    pub reset_always: bool,
}

/// A server connection of the pool.
pub struct ServerConn {
    session: PgSession<SimEnv>,
    born_ms: u64,
    incarnation: u64,
}

#[derive(Default)]
struct Pool {
    idle: Vec<ServerConn>,
    /// Server connections open (idle or lent).
    open: usize,
    /// Clients waiting for a connection, by ticket, first come first served.
    queue: VecDeque<u64>,
    next_ticket: u64,
    /// Connections lent to clients that vanished behind a cut: open, never returned.
    stranded: Vec<ServerConn>,
    /// The server sessions of the connections lent out now.
    lent: BTreeSet<SessionId>,
    /// PgBouncer is down (crashed, not yet restarted).
    down: bool,
    /// Bumped by each crash: a client connection of an earlier one is gone.
    incarnation: u64,
}

/// The simulated PgBouncer.
#[derive(Clone)]
pub struct SimBouncer {
    pg: SimPg,
    /// Its node index on the network.
    pub node: usize,
    env: SimEnv,
    settings: BouncerSettings,
    pool: Arc<Mutex<Pool>>,
    freed: Arc<Notify>,
    rec: Recorder,
    /// Its madsim node, where it runs what no client waits for (a reset after a client left).
    pub madsim_node: Arc<OnceLock<NodeId>>,
}

/// Takes a ticket out of the queue when its client stops waiting (served, or gave up).
struct Ticket<'a> {
    bouncer: &'a SimBouncer,
    id: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.bouncer
            .pool
            .lock()
            .unwrap()
            .queue
            .retain(|t| *t != self.id);
        self.bouncer.freed.notify_waiters();
    }
}

impl SimBouncer {
    /// A pooler at node `node` in front of `pg`.
    pub fn new(
        pg: SimPg,
        node: usize,
        env: SimEnv,
        settings: BouncerSettings,
        rec: Recorder,
    ) -> SimBouncer {
        SimBouncer {
            pg,
            node,
            env,
            settings,
            pool: Arc::default(),
            freed: Arc::new(Notify::new()),
            rec,
            madsim_node: Arc::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.rec.now_us() / 1000
    }

    /// Lends a server connection: an idle one (the last returned first), a new one while the
    /// pool has room, or the first to come back.
    async fn lend(&self) -> Result<ServerConn, PgError> {
        let id = {
            let mut p = self.pool.lock().unwrap();
            p.next_ticket += 1;
            let id = p.next_ticket;
            p.queue.push_back(id);
            id
        };
        let _ticket = Ticket { bouncer: self, id };
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let open_new = {
                let mut p = self.pool.lock().unwrap();
                if p.queue.front() == Some(&id) {
                    while let Some(c) = p.idle.pop() {
                        if c.incarnation == self.pg.incarnation() {
                            p.lent.insert(c.session.id());
                            return Ok(c);
                        }
                        // The server went away under it: PgBouncer drops it from the pool.
                        p.open -= 1;
                        c.session.detach();
                    }
                    if p.open < self.settings.pool_size {
                        p.open += 1;
                        true
                    } else {
                        false
                    }
                } else {
                    false
                }
            };
            if open_new {
                let c = self.open_server().await;
                let mut p = self.pool.lock().unwrap();
                match &c {
                    Ok(c) => {
                        p.lent.insert(c.session.id());
                    }
                    Err(_) => p.open -= 1,
                }
                return c;
            }
            freed.await;
        }
    }

    async fn open_server(&self) -> Result<ServerConn, PgError> {
        let primary = self.pg.primary();
        hop(&self.pg, self.node, primary).await?;
        let session = self.pg.server().connect(self.env.clone());
        self.pg.track(session.id(), self.node);
        let c = ServerConn {
            session,
            born_ms: self.now_ms(),
            incarnation: self.pg.incarnation(),
        };
        hop(&self.pg, primary, self.node).await?;
        Ok(c)
    }

    /// A server connection that must not be reused (its session ended, its client left
    /// mid-transaction): closed.
    fn discard(&self, c: ServerConn) {
        self.pg.untrack(c.session.id());
        {
            let mut p = self.pool.lock().unwrap();
            p.lent.remove(&c.session.id());
            p.open -= 1;
        }
        drop(c.session);
        self.freed.notify_waiters();
    }

    /// PgBouncer dies: every client and server connection closes (the server hears its
    /// sockets close, so every server session and its locks end); it answers again after
    /// [`SimBouncer::restart`].
    pub fn crash(&self) {
        let (idle, stranded, lent) = {
            let mut p = self.pool.lock().unwrap();
            p.down = true;
            p.incarnation += 1;
            p.open = 0;
            p.queue.clear();
            (
                std::mem::take(&mut p.idle),
                std::mem::take(&mut p.stranded),
                std::mem::take(&mut p.lent),
            )
        };
        let server = self.pg.server();
        for c in idle.into_iter().chain(stranded) {
            self.pg.untrack(c.session.id());
            drop(c.session);
        }
        for session in lent {
            self.pg.untrack(session);
            server.disconnect(session);
        }
        self.freed.notify_waiters();
    }

    /// PgBouncer runs again, with an empty pool.
    pub fn restart(&self) {
        self.pool.lock().unwrap().down = false;
    }

    /// Whether PgBouncer answers, and its incarnation.
    fn alive(&self) -> (bool, u64) {
        let p = self.pool.lock().unwrap();
        (!p.down, p.incarnation)
    }

    /// A connection lent to a client that vanished behind a cut: it stays open and lent.
    fn strand(&self, c: ServerConn) {
        let mut p = self.pool.lock().unwrap();
        p.lent.remove(&c.session.id());
        p.stranded.push(c);
    }

    /// A server connection comes back: closed if past `server_lifetime`, reset if the mode or
    /// `server_reset_query_always` says so, then idle.
    async fn give_back(&self, mut c: ServerConn, client_left: bool) {
        let crashed = {
            let mut p = self.pool.lock().unwrap();
            !p.lent.remove(&c.session.id())
        };
        if crashed {
            // PgBouncer crashed since it lent this one: it is closed already.
            c.session.detach();
            return;
        }
        if c.incarnation != self.pg.incarnation() {
            c.session.detach();
            self.pool.lock().unwrap().open -= 1;
            self.freed.notify_waiters();
            return;
        }
        let age = self.now_ms().saturating_sub(c.born_ms);
        if age >= self.settings.server_lifetime_ms {
            self.rec.record(
                "nemesis",
                EventKind::Fault {
                    what: format!(
                        "pgbouncer closed a server connection {age} ms old (server_lifetime {} ms): its session and its locks end",
                        self.settings.server_lifetime_ms
                    ),
                },
            );
            self.discard(c);
            return;
        }
        let reset = match self.settings.mode {
            PoolMode::Session => client_left,
            PoolMode::Transaction => self.settings.reset_always,
        };
        if reset {
            let primary = self.pg.primary();
            let ok = hop(&self.pg, self.node, primary).await.is_ok()
                && {
                    self.pg.count_statement();
                    c.session.run("DISCARD ALL").await.is_ok()
                }
                && hop(&self.pg, primary, self.node).await.is_ok();
            if !ok {
                self.pool.lock().unwrap().lent.insert(c.session.id());
                self.discard(c);
                return;
            }
        }
        self.pool.lock().unwrap().idle.push(c);
        self.freed.notify_waiters();
    }

    /// Runs `give_back` on the pooler's node, for a client that is gone.
    fn give_back_later(&self, c: ServerConn) {
        let me = self.clone();
        let node = self.madsim_node.get().copied();
        match (Handle::try_current(), node) {
            (Ok(handle), Some(node)) => {
                if let Some(node) = handle.get_node(node) {
                    node.spawn(async move { me.give_back(c, true).await });
                }
            }
            _ => self.discard(c),
        }
    }
}

/// A client's connection to the pooler.
pub struct PooledConn {
    bouncer: SimBouncer,
    client: u32,
    node: usize,
    timeout: Duration,
    lent: Option<ServerConn>,
    /// The pooler's incarnation this client connection was opened in (`None`: not connected).
    connected: Option<u64>,
    /// A statement is under way on the lent connection (a client that leaves now leaves it
    /// dirty, so PgBouncer closes it).
    busy: bool,
}

impl PooledConn {
    pub(super) fn new(
        bouncer: SimBouncer,
        client: u32,
        node: usize,
        timeout: Duration,
    ) -> PooledConn {
        PooledConn {
            bouncer,
            client,
            node,
            timeout,
            lent: None,
            connected: None,
            busy: false,
        }
    }

    async fn to_bouncer(&self, from: usize, to: usize) {
        madsim::time::sleep(self.bouncer.pg.net.latency()).await;
        if !self.bouncer.pg.net.reachable(from, to) {
            std::future::pending::<()>().await;
        }
    }

    async fn attempt(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        let b = self.bouncer.clone();
        let (up, incarnation) = b.alive();
        if self.connected.is_some_and(|i| i != incarnation) {
            // PgBouncer crashed under this connection: the client hears the reset.
            self.connected = None;
            if let Some(c) = self.lent.take() {
                c.session.detach();
            }
            return Err(PgError::ConnectionLost(
                "server closed the connection unexpectedly (pgbouncer restarted)".into(),
            ));
        }
        self.to_bouncer(self.node, b.node).await;
        if !up {
            madsim::time::sleep(b.pg.net.latency()).await;
            return Err(PgError::ConnectionLost(
                "connection refused (pgbouncer down)".into(),
            ));
        }
        self.connected = Some(incarnation);
        let out = self.on_server(sql).await;
        self.to_bouncer(b.node, self.node).await;
        out
    }

    async fn on_server(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
        let b = self.bouncer.clone();
        if self.lent.is_none() {
            let c = b.lend().await?;
            b.pg.client_session(self.client, Some(c.session.id()));
            self.lent = Some(c);
        }
        if self
            .lent
            .as_ref()
            .is_some_and(|c| c.incarnation != b.pg.incarnation())
        {
            // The server went away under the lent connection: PgBouncer closes it, and the
            // client's connection with it.
            let c = self.lent.take().expect("checked");
            b.discard(c);
            return Err(PgError::ConnectionLost("server conn crashed?".into()));
        }
        self.busy = true;
        let primary = b.pg.primary();
        let mut out = hop(&b.pg, b.node, primary).await;
        let answer = match out {
            Ok(()) => {
                b.pg.count_statement();
                let c = self.lent.as_mut().expect("lent above");
                let answer = c.session.run(sql).await;
                out = hop(&b.pg, primary, b.node).await;
                answer
            }
            Err(ref e) => Err(e.clone()),
        };
        self.busy = false;
        let gone = out.is_err() || answer.as_ref().is_err_and(|e| e.session_gone());
        if gone {
            // PgBouncer closes a server connection that failed, and the client's with it.
            if let Some(c) = self.lent.take() {
                b.discard(c);
            }
            b.pg.client_session(self.client, None);
            return answer.and(out.map(|_| Vec::new()));
        }
        let in_tx = {
            let c = self.lent.as_ref().expect("lent above");
            c.session
                .server()
                .read(|e| e.in_transaction(c.session.id()))
        };
        if b.settings.mode == PoolMode::Transaction && !in_tx {
            let c = self.lent.take().expect("lent above");
            b.pg.client_session(self.client, None);
            b.give_back(c, false).await;
        }
        answer
    }

    /// The client closes its connection to the pooler: a clean connection goes back to the
    /// pool, a dirty one (mid-statement or mid-transaction) is closed, and one whose client
    /// vanished behind a cut stays lent.
    fn hang_up(&mut self) {
        let connected = self.connected.take();
        let Some(c) = self.lent.take() else { return };
        self.bouncer.pg.client_session(self.client, None);
        let b = &self.bouncer;
        if connected != Some(b.alive().1) {
            c.session.detach();
            return;
        }
        if !b.pg.net.reachable(self.node, b.node) {
            b.strand(c);
            return;
        }
        let in_tx = c
            .session
            .server()
            .read(|e| e.in_transaction(c.session.id()));
        if self.busy || in_tx {
            b.discard(c);
        } else {
            b.give_back_later(c);
        }
    }

    pub(super) async fn statement(&mut self, sql: &str) -> Result<Vec<Row>, PgError> {
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

impl Drop for PooledConn {
    fn drop(&mut self) {
        self.hang_up();
    }
}
