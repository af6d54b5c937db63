//! The MySQL locks in simulation: a madsim node hosts the simulated InnoDB subset, clients reach
//! it over the simulated network, and the scenario's faults act on both.
//!
//! - Each statement is a round trip: the request travels for the link's latency, runs on the
//!   engine (a locking read may wait there for a row lock, up to `innodb_lock_wait_timeout`), and
//!   the reply travels back. No answer within the `[database]` request timeout fails the
//!   statement; the client then drops its connection, as `mysql_async` does (and reconnects on
//!   its next statement).
//! - Client pause: the client's node stops; its connection and open transaction stay, so its row
//!   locks stay held. The server closes it only if it stays idle past `wait_timeout`.
//! - Client crash: the node dies, its socket closes, the server rolls its transaction back at
//!   once. A lock row inserted in autocommit stays: it was committed.
//! - Client partition: nothing passes; the server notices nothing until `wait_timeout` closes the
//!   idle session. A client whose statement times out hangs up, but behind the cut the server
//!   does not hear that either.
//! - Server crash (`crash` of `mysql-0`): every session is gone and rolled back, clients hear a
//!   reset at once; committed rows survive (InnoDB recovery); the server answers again after
//!   `restart_after_ms`.
//! - Server pause (`pause` of `mysql-0`, a `SIGSTOP`): its host still takes connections and
//!   bytes, but the server answers nothing and its own timers (lock waits, `wait_timeout`, the
//!   cleanup job) stand still. A statement that arrives is run when the server goes on, even if
//!   its client gave up meanwhile; a client that hangs up is heard only then. On `SIGCONT` the
//!   lock waits whose deadline passed fail with 1205 at once, as on a real MariaDB
//!   (`tests/sql/server_pause.rs`).

use super::lock::prepare;
use super::lock::SqlLock;
use super::sim_conn::{SharedEngine, SimSqlConn};
use super::spec::SERVER;
use super::value::{Output, Value};
use super::world::{cleanup_pass, due, record_client_crash};
use super::{SqlConn, SqlError};
use crate::env::{PointHook, SimEnv};
use crate::faults::schedule::paused_client;
use crate::faults::schedule::Schedule;
use crate::faults::schedule::{describe_partition, partition_links};
use crate::history::{EventKind, Recorder};
use crate::resource::Store;
use crate::scenario::{FaultKind, Scenario};
use crate::sim::client_nodes::ClientNodes;
use crate::sim::clock::Clocks;
use crate::sim::network::Network;
use crate::sim::storage::{Storage, StorageConnection};
use crate::sim::SimRun;
use crate::workload::FaultPoints;
use crate::world;
use madsim::runtime::{Handle, Runtime};
use madsim::task::NodeId;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::watch;

/// The server's node index (clocks, network): first, before the clients.
const SERVER_NODE: usize = 0;

/// The simulated database server: the engine, whether it is up, and its incarnation.
#[derive(Clone)]
pub struct SimDb {
    engine: SharedEngine,
    net: Network,
    state: Arc<Mutex<DbState>>,
    /// Whether the server process is stopped (a server pause).
    paused: Arc<watch::Sender<bool>>,
    /// The madsim node the server runs on: a pause stops it, statements wait on it.
    node: Arc<OnceLock<NodeId>>,
}

#[derive(Default)]
struct DbState {
    down: bool,
    /// Bumped by each crash: connections of an earlier incarnation are reset.
    incarnation: u64,
    statements: u64,
}

impl SimDb {
    fn new(net: Network, rec: Recorder) -> SimDb {
        SimDb {
            engine: SharedEngine::new(move || rec.now_us() / 1000),
            net,
            state: Arc::default(),
            paused: Arc::new(watch::channel(false).0),
            node: Arc::default(),
        }
    }

    fn paused(&self) -> bool {
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
    fn pause(&self) {
        self.paused.send_replace(true);
        self.engine.freeze();
        if let Some(&node) = self.node.get() {
            Handle::current().pause(node);
        }
    }

    /// `SIGCONT`: lock waits catch up first (those past their deadline fail with 1205), then
    /// the statements that arrived while it was stopped run, in arrival order.
    fn resume(&self) {
        self.paused.send_replace(false);
        self.engine.thaw();
        if let Some(&node) = self.node.get() {
            Handle::current().resume(node);
        }
    }

    fn up(&self) -> bool {
        !self.state.lock().unwrap().down
    }

    fn incarnation(&self) -> u64 {
        self.state.lock().unwrap().incarnation
    }

    /// The server dies: every session is rolled back and gone (a stopped one too).
    fn crash(&self) {
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

    fn restart(&self) {
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

/// Runs a MySQL scenario with `seed` in simulation.
pub fn run(scenario: &Scenario, seed: u64) -> SimRun {
    let mut config = madsim::Config::default();
    config.net.packet_loss_rate = 0.0;
    let rt = Runtime::with_seed_and_config(seed, config);
    rt.block_on(simulate(scenario))
}

async fn simulate(scenario: &Scenario) -> SimRun {
    let names = scenario.node_names();
    let nodes: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let clocks = Clocks::new(names.len());
    let net = Network::new(scenario.database.latency_ms);
    let rec = Recorder::simulated();
    let db = SimDb::new(net.clone(), rec.clone());
    let timeout = super::spec::request_timeout(scenario);
    let options = super::spec::options(&scenario.lock);
    let handle = Handle::current();
    // The server's node: its background jobs (wait_timeout, the cleanup job) run there.
    let server_env = SimEnv::new(clocks.clone(), SERVER_NODE);
    let server = handle.create_node().name(SERVER).build();
    db.node.set(server.id()).expect("one server node");
    {
        let mut admin = db.connect(SERVER_NODE, server_env.clone(), timeout);
        let s = scenario.clone();
        server
            .spawn(async move {
                if let Err(e) = prepare(&mut admin, &s).await {
                    panic!("creating the lock table on the simulated server: {e}");
                }
            })
            .await
            .expect("set-up task");
    }
    {
        let db = db.clone();
        let rec = rec.clone();
        let wait_timeout_ms = scenario.database.wait_timeout_s * 1000;
        server.spawn(async move {
            loop {
                madsim::time::sleep(Duration::from_millis(100)).await;
                if db.up() {
                    let n = db.engine.reap_idle(wait_timeout_ms);
                    if n > 0 {
                        rec.record(
                            "nemesis",
                            EventKind::Fault {
                                what: format!(
                                    "{SERVER} closed {n} idle connection(s) (wait_timeout)"
                                ),
                            },
                        );
                    }
                }
            }
        });
    }
    if let Some(cleanup) = options.cleanup {
        let mut conn = db.connect(SERVER_NODE, server_env.clone(), timeout);
        let env = server_env.clone();
        let options = options.clone();
        let rec = rec.clone();
        server.spawn(async move {
            loop {
                madsim::time::sleep(Duration::from_millis(cleanup.interval_ms)).await;
                let now = crate::env::Env::now_ms(&env);
                cleanup_pass(&mut conn, &options, cleanup, now, &rec).await;
            }
        });
    }

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = Nemesis {
        pending: Schedule::new(scenario.faults.clone()),
        db: db.clone(),
        net: net.clone(),
        rec: rec.clone(),
        clients: client_nodes.ids(),
        nodes,
        node: handle.create_node().name("nemesis").build().id(),
    };
    nemesis.start();
    let mut world = SqlSimWorld {
        db: db.clone(),
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage: Storage::new(net.clone()),
        client_nodes,
        timeout,
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
    let options = super::spec::options(&scenario.lock);
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        SqlLock::build(scenario.lock.kind, conn, env, config, options.clone())
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let statements = db.state.lock().unwrap().statements;
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: statements,
    };
    handle.kill(server.id());
    handle.kill(nemesis.node);
    world.client_nodes.kill();
    run
}

/// The simulated database world's side of a run ([`world::World`]): clients are madsim nodes,
/// each with one connection to the simulated server over the simulated network; the protected
/// resource lives on the simulated storage node, as for the Redis locks.
struct SqlSimWorld {
    db: SimDb,
    clocks: Clocks,
    rec: Recorder,
    nemesis: Nemesis,
    storage: Storage,
    client_nodes: ClientNodes,
    timeout: Duration,
}

impl SqlSimWorld {
    /// Client `c`'s node index (clocks, network): the server comes first.
    fn index(c: u32) -> usize {
        SERVER_NODE + 1 + c as usize
    }
}

impl world::World for SqlSimWorld {
    type Conns = NetSqlConn;
    type Env = SimEnv;
    type StoreConn = StorageConnection;
    type Nemesis = Nemesis;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &Nemesis {
        &self.nemesis
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> SimEnv {
        SimEnv::new(self.clocks.clone(), Self::index(c)).with_points(points)
    }

    fn connections(&mut self, c: u32, env: &SimEnv) -> NetSqlConn {
        self.db.connect(Self::index(c), env.clone(), self.timeout)
    }

    fn store(&mut self, id: u64) -> Store<StorageConnection> {
        Store::new(self.storage.connect(id))
    }

    fn spawn_client(&mut self, c: u32, run: world::ClientRun) {
        self.client_nodes.spawn(c, run);
    }

    async fn wait_clients(&mut self, limit: Duration) {
        self.client_nodes.wait(limit).await;
    }
}

/// The fault executor of a simulated MySQL run.
#[derive(Clone)]
struct Nemesis {
    pending: Schedule,
    db: SimDb,
    net: Network,
    rec: Recorder,
    clients: Vec<NodeId>,
    nodes: BTreeMap<String, usize>,
    node: NodeId,
}

impl Nemesis {
    fn start(&self) {
        for (at_ms, kind) in self.pending.take_timed() {
            let delay = Duration::from_micros((at_ms * 1000).saturating_sub(self.rec.now_us()));
            if delay.is_zero() {
                self.fire(&kind, None, "at_ms");
                continue;
            }
            let me = self.clone();
            self.later(delay, async move { me.fire(&kind, None, "at_ms") });
        }
    }

    fn later<F: Future<Output = ()> + Send + 'static>(&self, delay: Duration, task: F) {
        let node = Handle::current().get_node(self.node).expect("nemesis node");
        node.spawn(async move {
            madsim::time::sleep(delay).await;
            task.await
        });
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    fn fire(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        match kind {
            FaultKind::ClientCrash { client } => {
                let c = *client;
                record_client_crash(&self.rec, c, point, "its connection closes");
                let me = self.clone();
                self.later(Duration::ZERO, async move {
                    Handle::current().kill(me.clients[c as usize]);
                });
            }
            FaultKind::Pause { client, for_ms } => {
                let Some(c) = paused_client(client, holder, &self.rec) else {
                    self.note("pause of the holder skipped: nobody holds the lock".into());
                    return;
                };
                Handle::current().pause(self.clients[c as usize]);
                self.note(format!(
                    "client-{c} paused for {for_ms} ms (its transaction stays open)"
                ));
                let me = self.clone();
                self.later(Duration::from_millis(*for_ms), async move {
                    Handle::current().resume(me.clients[c as usize]);
                    me.note(format!("client-{c} resumed"));
                });
            }
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => {
                let links = partition_links(&self.nodes, nodes, from, *direction);
                for &(a, b) in &links {
                    self.net.cut(a, b);
                }
                self.note(describe_partition(nodes, from, *for_ms));
                let me = self.clone();
                self.later(Duration::from_millis(*for_ms), async move {
                    for &(a, b) in &links {
                        me.net.heal(a, b);
                    }
                    me.note("partition healed".into());
                });
            }
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => {
                self.db.crash();
                self.note(format!(
                    "{node} crashed (open transactions rolled back, committed rows kept)"
                ));
                let me = self.clone();
                let node = node.clone();
                self.later(Duration::from_millis(*restart_after_ms), async move {
                    me.db.restart();
                    me.note(format!("{node} restarted"));
                });
            }
            FaultKind::ServerPause { node, for_ms } => {
                if self.db.paused() || !self.db.up() {
                    self.note(format!("pause of {node} skipped: it is not running"));
                    return;
                }
                self.db.pause();
                self.note(format!(
                    "{node} paused for {for_ms} ms (answers nothing; its lock-wait and \
                     wait_timeout timers stand still)"
                ));
                let me = self.clone();
                let node = node.clone();
                self.later(Duration::from_millis(*for_ms), async move {
                    if me.db.paused() {
                        me.db.resume();
                        me.note(format!("{node} resumed"));
                    }
                });
            }
            other => self.note(format!("{other:?}: not modelled for the MySQL locks")),
        }
    }

    async fn fire_due(&self, due: Vec<FaultKind>, client: u32, point: &str) {
        let mut crashed = false;
        let mut paused = false;
        for kind in due {
            crashed |= matches!(kind, FaultKind::ClientCrash { .. });
            paused |= matches!(&kind, FaultKind::Pause { client: r, .. }
                if paused_client(r, Some(client), &self.rec) == Some(client));
            self.fire(&kind, Some(client), point);
        }
        if crashed {
            std::future::pending::<()>().await;
        }
        if paused {
            madsim::task::yield_now().await;
        }
    }
}

impl FaultPoints for Nemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let due = due(&self.pending, &self.rec, client, point);
        self.fire_due(due, client, point).await;
    }
}
