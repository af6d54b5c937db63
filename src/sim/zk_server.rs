//! The simulated ZooKeeper service of a ZooKeeper run: the engine (`simzk/`) on a madsim node,
//! its session tracker expiring sessions on the server's own monotonic clock, watch events sent
//! to their clients over the simulated network, and the service's faults (a crash and restart,
//! a leader failover in an ensemble, a pause). A client's side is `zk_conn.rs`.
//!
//! An ensemble is simulated as the one service its leader gives: every write goes through the
//! leader, which tracks every session, so what the lock recipes see of an ensemble is its
//! leader's (ZooKeeper's followers forward writes and session pings to it). A leader failover
//! makes the service unavailable for the election, then the new leader tracks every session
//! afresh (`simzk::engine`'s module docs); a follower's crash is not visible to the recipes,
//! since a client of that follower reconnects to another within its timeout.

use super::clock::Clocks;
use super::network::Network;
use crate::history::{EventKind, Recorder};
use crate::simzk::{Request, Response, ZkConfig, ZkEngine};
use crate::zookeeper::{ZkError, ZkEvent};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// The service's node index (clocks, network): first, before the clients.
pub(super) const ZK_NODE: usize = 0;

/// A session's client: its node index and where its watch events go.
type SessionClient = (usize, UnboundedSender<ZkEvent>);

/// What the service is doing.
#[derive(Default)]
struct ServiceState {
    /// Crashed (standalone) or electing a leader (ensemble): requests are refused.
    down: bool,
    /// Requests the service answered.
    requests: u64,
}

/// The simulated ZooKeeper service, shared by its clients.
#[derive(Clone)]
pub struct SimZk {
    engine: Arc<Mutex<ZkEngine>>,
    pub(super) net: Network,
    clocks: Clocks,
    /// The server that leads (its node index): its clock is the one sessions expire on.
    leader: Arc<AtomicUsize>,
    rec: Recorder,
    state: Arc<Mutex<ServiceState>>,
    /// Each live session's client: its node and where its events go.
    clients: Arc<Mutex<BTreeMap<i64, SessionClient>>>,
    paused: Arc<watch::Sender<bool>>,
    /// The madsim node the service runs on.
    pub(super) node: Arc<OnceLock<NodeId>>,
    /// The server names faults use (`zookeeper-0` …).
    pub(super) servers: u32,
}

impl SimZk {
    /// A service of `servers` servers (nodes `0..servers`, `zookeeper-0` leading first) with
    /// `config`'s timing.
    pub(super) fn new(
        config: ZkConfig,
        net: Network,
        clocks: Clocks,
        rec: Recorder,
        servers: u32,
    ) -> SimZk {
        SimZk {
            engine: Arc::new(Mutex::new(ZkEngine::new(config))),
            net,
            clocks,
            leader: Arc::new(AtomicUsize::new(ZK_NODE)),
            rec,
            state: Arc::default(),
            clients: Arc::default(),
            paused: Arc::new(watch::channel(false).0),
            node: Arc::default(),
            servers,
        }
    }

    /// The leader's monotonic clock: ZooKeeper's session tracker reads `System.nanoTime`.
    pub(super) fn now_ms(&self) -> u64 {
        self.clocks.monotonic_ms(self.leader())
    }

    /// The node index of the server that leads now.
    pub(super) fn leader(&self) -> usize {
        self.leader.load(Ordering::SeqCst)
    }

    /// Requests the service answered.
    pub(super) fn requests(&self) -> u64 {
        self.state.lock().unwrap().requests
    }

    pub(super) fn up(&self) -> bool {
        !self.state.lock().unwrap().down
    }

    pub(super) fn paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns once the service's process runs (at once unless it is paused).
    pub(super) async fn running(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|paused| !paused).await;
    }

    /// A new session for the client on node `node`, whose events go to `events`.
    pub(super) fn connect(
        &self,
        node: usize,
        requested_ms: u64,
        events: UnboundedSender<ZkEvent>,
    ) -> (i64, u64) {
        let now = self.now_ms();
        let (id, timeout) = self.engine.lock().unwrap().connect(now, requested_ms);
        self.clients.lock().unwrap().insert(id, (node, events));
        self.state.lock().unwrap().requests += 1;
        (id, timeout)
    }

    /// One request of `session`, applied now on the server's clock; the watch events it fired
    /// are sent to their clients.
    pub(super) fn request(&self, session: i64, request: Request) -> Result<Response, ZkError> {
        let now = self.now_ms();
        let (out, expired, fired) = {
            let mut engine = self.engine.lock().unwrap();
            let expired = engine.expire_due(now);
            let out = engine.request(now, session, request);
            (out, expired, engine.take_notifications())
        };
        self.state.lock().unwrap().requests += 1;
        self.expired(&expired);
        if matches!(out, Ok(Response::Done)) && !self.engine.lock().unwrap().is_alive(session) {
            self.clients.lock().unwrap().remove(&session);
        }
        self.send(fired);
        out
    }

    /// The session tracker's run: every tick, expire the sessions whose time has come.
    pub(super) async fn track_sessions(self) {
        let tick = self.engine.lock().unwrap().config().tick_ms.max(1);
        loop {
            madsim::time::sleep(Duration::from_millis(tick)).await;
            if !self.up() {
                continue;
            }
            let now = self.now_ms();
            let (expired, fired) = {
                let mut engine = self.engine.lock().unwrap();
                (engine.expire_due(now), engine.take_notifications())
            };
            self.expired(&expired);
            self.send(fired);
        }
    }

    fn expired(&self, sessions: &[i64]) {
        for id in sessions {
            self.clients.lock().unwrap().remove(id);
            self.rec.record(
                "nemesis",
                EventKind::Fault {
                    what: format!(
                        "zookeeper-{} expired session {id:#x} (its ephemeral nodes are deleted)",
                        self.leader()
                    ),
                },
            );
        }
    }

    /// Sends each watch event to its session's client: after the link's latency, and, while the
    /// link is cut, once it heals (a reconnecting client re-registers its watches and hears what
    /// changed: ZooKeeper's `setWatches`). An event for a session that ended is dropped.
    fn send(&self, fired: Vec<(i64, ZkEvent)>) {
        for (session, event) in fired {
            let Some((node, to)) = self.clients.lock().unwrap().get(&session).cloned() else {
                continue;
            };
            let net = self.net.clone();
            let engine = self.engine.clone();
            let server = self.leader();
            self.on_server(async move {
                madsim::time::sleep(net.latency()).await;
                while !net.reachable(server, node) {
                    madsim::time::sleep(Duration::from_millis(10)).await;
                    if !engine.lock().unwrap().is_alive(session) {
                        return;
                    }
                }
                let _ = to.send(event);
            });
        }
    }

    /// Runs `task` on the service's node (while it is paused, only after it goes on).
    fn on_server(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let node = self.node.get().copied();
        if let (Ok(handle), Some(node)) = (Handle::try_current(), node) {
            if let Some(node) = handle.get_node(node) {
                node.spawn(task);
            }
        }
    }

    /// The service stops answering (a standalone server's crash, or the leader's in an
    /// ensemble, until the election ends).
    pub(super) fn go_down(&self) {
        self.state.lock().unwrap().down = true;
    }

    /// The service answers again: a restarted server reloads its sessions from its log, a new
    /// leader takes over the ensemble's; either way every session's expiry starts afresh from
    /// now (ZooKeeper's `SessionTrackerImpl` constructor tracks each loaded session anew).
    /// `new_leader`: an election's winner (a node index), which starts a new zxid epoch.
    pub(super) fn come_up(&self, new_leader: Option<usize>) {
        if let Some(l) = new_leader {
            self.leader.store(l, Ordering::SeqCst);
        }
        let new_epoch = new_leader.is_some();
        let now = self.now_ms();
        self.engine.lock().unwrap().new_leader(now, new_epoch);
        self.state.lock().unwrap().down = false;
    }

    /// `SIGSTOP` of the service's process: it answers nothing, its session tracker stands still.
    pub(super) fn pause(&self) {
        self.paused.send_replace(true);
        if let Some(&node) = self.node.get() {
            Handle::current().pause(node);
        }
    }

    /// `SIGCONT`.
    pub(super) fn resume(&self) {
        self.paused.send_replace(false);
        if let Some(&node) = self.node.get() {
            Handle::current().resume(node);
        }
    }
}
