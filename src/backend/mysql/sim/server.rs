//! The simulated database server of the MySQL locks' runs: a madsim node hosting the simulated
//! InnoDB subset ([`SharedEngine`]), and a client's connection to it over the simulated network.
//! What happens to a statement on the way (latency, a pause, a crash, a partition) is told in
//! `mysql_world.rs`.

use crate::backend::mysql::sim::{SharedEngine, SimSqlConn};
use crate::history::Recorder;
use crate::sim::network::Network;
use crate::sim::SimEnv;
use crate::sql::{Output, Value};
use crate::sql::{SqlConn, SqlError};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// The server's node index (clocks, network): first, before the clients.
pub(super) const SERVER_NODE: usize = 0;

/// The simulated database server: the engine, whether it is up, and its incarnation.
#[derive(Clone)]
pub struct SimDb {
    pub(super) engine: SharedEngine,
    net: Network,
    state: Arc<Mutex<DbState>>,
    /// Whether the server process is stopped (a server pause).
    paused: Arc<watch::Sender<bool>>,
    /// The madsim node the server runs on: a pause stops it, statements wait on it.
    pub(super) node: Arc<OnceLock<NodeId>>,
}

#[derive(Default)]
struct DbState {
    down: bool,
    /// Bumped by each crash: connections of an earlier incarnation are reset.
    incarnation: u64,
    statements: u64,
}

impl SimDb {
    /// Statements the server has run.
    pub(super) fn statements(&self) -> u64 {
        self.state.lock().unwrap().statements
    }

    pub(super) fn new(net: Network, rec: Recorder) -> SimDb {
        SimDb {
            engine: SharedEngine::new(move || rec.now_us() / 1000),
            net,
            state: Arc::default(),
            paused: Arc::new(watch::channel(false).0),
            node: Arc::default(),
        }
    }

    pub(super) fn paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns once the server process runs (at once unless it is paused).
    async fn running(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|paused| !paused).await;
    }

    /// Runs `task` on the server's node: while the server is paused, only after it goes on.
    fn on_server(&self, task: impl Future<Output = ()> + Send + 'static) {
        let node = self.node.get().copied();
        if let (Ok(handle), Some(node)) = (Handle::try_current(), node) {
            if let Some(node) = handle.get_node(node) {
                node.spawn(task);
            }
        }
    }

    /// `SIGSTOP`: the server's node and the engine's lock-wait timers stop.
    pub(super) fn pause(&self) {
        self.paused.send_replace(true);
        self.engine.freeze();
        if let Some(&node) = self.node.get() {
            Handle::current().pause(node);
        }
    }

    /// `SIGCONT`: lock waits catch up first (those past their deadline fail with 1205), then
    /// the statements that arrived while it was stopped run, in arrival order.
    pub(super) fn resume(&self) {
        self.paused.send_replace(false);
        self.engine.thaw();
        if let Some(&node) = self.node.get() {
            Handle::current().resume(node);
        }
    }

    pub(super) fn up(&self) -> bool {
        !self.state.lock().unwrap().down
    }

    fn incarnation(&self) -> u64 {
        self.state.lock().unwrap().incarnation
    }

    /// The server dies: every session is rolled back and gone (a stopped one too).
    pub(super) fn crash(&self) {
        if self.paused() {
            self.resume();
        }
        {
            let mut s = self.state.lock().unwrap();
            s.down = true;
            s.incarnation += 1;
        }
        self.engine.crash();
    }

    pub(super) fn restart(&self) {
        self.state.lock().unwrap().down = false;
    }

    /// A connection from node `node`, with a response timeout.
    pub fn connect(&self, node: usize, env: SimEnv, timeout: Duration) -> NetSqlConn {
        NetSqlConn {
            db: self.clone(),
            node,
            env,
            timeout,
            conn: None,
        }
    }
}

/// A client's connection to the simulated server over the simulated network.
pub struct NetSqlConn {
    db: SimDb,
    node: usize,
    env: SimEnv,
    timeout: Duration,
    /// The open session and the server incarnation it belongs to.
    conn: Option<(SimSqlConn<SimEnv>, u64)>,
}

impl NetSqlConn {
    /// One hop of a message: the link's latency; a cut link never delivers it. A crashed server's
    /// host is still up: it refuses (a reset comes back at once).
    async fn hop(&mut self, from: usize, to: usize) -> Result<(), SqlError> {
        madsim::time::sleep(self.db.net.latency()).await;
        if !self.db.net.reachable(from, to) {
            std::future::pending::<()>().await;
        }
        if !self.db.up() {
            madsim::time::sleep(self.db.net.latency()).await;
            self.conn = None;
            return Err(SqlError::ConnectionLost(
                "connection refused (server down)".into(),
            ));
        }
        Ok(())
    }

    async fn attempt(&mut self, sql: &str) -> Result<Output, SqlError> {
        if let Some((_, inc)) = &self.conn {
            if *inc != self.db.incarnation() {
                // The server restarted under this connection: the client hears a reset.
                self.conn = None;
                return Err(SqlError::ConnectionLost(
                    "connection reset (server restarted)".into(),
                ));
            }
        }
        if self.conn.is_none() {
            self.hop(self.node, SERVER_NODE).await?;
            // A stopped server completes no handshake; a client that gives up loses nothing.
            self.db.running().await;
            let c = self.db.engine.connect(self.env.clone());
            let inc = self.db.incarnation();
            self.conn = Some((c, inc));
            self.hop(SERVER_NODE, self.node).await?;
        }
        self.hop(self.node, SERVER_NODE).await?;
        let out = if self.db.paused() {
            self.run_when_resumed(sql).await
        } else {
            self.db.state.lock().unwrap().statements += 1;
            let (conn, _) = self.conn.as_mut().expect("connected above");
            conn.run(sql).await
        };
        if let Err(SqlError::ConnectionLost(_)) = &out {
            // Killed by the server (wait_timeout, crash): the socket closes, the client hears it.
            if let Some((c, _)) = self.conn.take() {
                c.detach();
            }
            return out;
        }
        self.hop(SERVER_NODE, self.node).await?;
        out
    }

    /// A statement that reached a stopped server: it waits in the socket and runs when the
    /// server goes on, whether or not this client still waits for the answer. If it gave up
    /// (and so hung up), the server reads the closed socket right after the statement.
    async fn run_when_resumed(&mut self, sql: &str) -> Result<Output, SqlError> {
        let (mut conn, inc) = self.conn.take().expect("connected before a statement");
        let (reply, answer) = futures::channel::oneshot::channel();
        let db = self.db.clone();
        let sql = sql.to_string();
        self.db.on_server(async move {
            if inc != db.incarnation() {
                // The server crashed while stopped: the session went with it.
                return;
            }
            db.state.lock().unwrap().statements += 1;
            let out = conn.run(&sql).await;
            // A client that hung up drops the session here (the server rolls it back).
            let _ = reply.send((conn, out));
        });
        match answer.await {
            Ok((conn, out)) => {
                self.conn = Some((conn, inc));
                out
            }
            Err(_) => Err(SqlError::ConnectionLost(
                "connection reset (server restarted)".into(),
            )),
        }
    }

    /// The client closes its socket: the server hears it unless the link (or the server) is down;
    /// a stopped server hears it when it goes on.
    fn hang_up(&mut self) {
        if let Some((c, inc)) = self.conn.take() {
            let heard = self.db.net.reachable(self.node, SERVER_NODE)
                && self.db.up()
                && inc == self.db.incarnation();
            if !heard {
                c.detach();
            } else if self.db.paused() {
                self.db.on_server(async move { drop(c) });
            }
        }
    }

    async fn statement(&mut self, sql: &str) -> Result<Output, SqlError> {
        let timeout = self.timeout;
        match madsim::time::timeout(timeout, self.attempt(sql)).await {
            Ok(r) => r,
            Err(_) => {
                self.hang_up();
                Err(SqlError::NoAnswer(format!(
                    "nothing within {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}

impl Drop for NetSqlConn {
    /// A crashed client's socket closes with its process.
    fn drop(&mut self) {
        self.hang_up();
    }
}

impl SqlConn for NetSqlConn {
    async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Value>>, SqlError> {
        match self.statement(sql).await? {
            Output::Rows(rows) => Ok(rows),
            Output::Affected(_) => Ok(Vec::new()),
        }
    }

    async fn execute(&mut self, sql: &str) -> Result<u64, SqlError> {
        match self.statement(sql).await? {
            Output::Rows(_) => Ok(0),
            Output::Affected(n) => Ok(n),
        }
    }
}
