//! The simulated ZooKeeper service of a ZooKeeper run: the engine (`backend/zookeeper/engine/`) on a madsim node,
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
//!
//! With `[zookeeper] connect = "followers"`, the followers answer too: each client is connected
//! to one follower ([`Reads::server_of`]), which forwards its writes and session changes to the
//! leader and answers its reads (`exists`, `getData`, `getChildren`) from its own copy of the
//! tree (`simzk::Follower`). A follower applies each committed transaction
//! `[zookeeper] follower_lag_ms` after the leader committed it, and answers a session only once
//! it has applied that session's last write (ZooKeeper's FIFO client order: a session always
//! reads its own writes, and a global session's connect is answered once its `createSession`
//! is applied). A watch left on a follower fires when the follower applies the change. With
//! `local_sessions = true` a new session is local to its follower (ZooKeeper's
//! `localSessionsEnabled`): it takes no transaction, so its first reads are answered at once,
//! from whatever the follower has applied. Sessions are tracked by the leader in both cases
//! (on its clock), and every request is checked against the leader's sessions: a client whose
//! session expired hears so before a follower answers it.

use crate::backend::zookeeper::engine::{Follower, Request, Response, ZkConfig, ZkEngine};
use crate::backend::zookeeper::seam::{ZkError, ZkEvent};
use crate::history::{EventKind, Recorder};
use crate::sim::clock::Clocks;
use crate::sim::entries::{Entry, EntryCreators};
use crate::sim::network::Network;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// The service's node index (clocks, network): first, before the clients.
pub(super) const ZK_NODE: usize = 0;

/// A session's client: its node index and where its watch events go.
type SessionClient = (usize, UnboundedSender<ZkEvent>);

/// Which server answers a client's reads, and how far behind the leader the followers are.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Reads {
    /// Clients are connected to the followers (`[zookeeper] connect = "followers"`); otherwise
    /// every request reaches the leader.
    pub(super) via_followers: bool,
    /// How long after the leader commits a transaction a follower applies it.
    pub(super) lag: Duration,
    /// New sessions are local to their server (`localSessionsEnabled`).
    pub(super) local_sessions: bool,
}

impl Reads {
    /// The server client `c` is connected to in a deployment of `servers`: with followers
    /// answering, `zookeeper-1`, `zookeeper-2`, … in turn (`zookeeper-0` leads); `None`: the
    /// leader, whichever it is.
    pub(super) fn server_of(&self, c: u32, servers: u32) -> Option<usize> {
        (self.via_followers && servers > 1).then(|| 1 + (c % (servers - 1)) as usize)
    }
}

/// What the service is doing.
#[derive(Default)]
struct ServiceState {
    /// Crashed (standalone), or without a leader (ensemble: electing, or waiting for a quorum):
    /// requests are refused.
    down: bool,
    /// An ensemble's election is under way (scheduled, not yet decided).
    electing: bool,
    /// The servers of an ensemble that crashed and have not restarted (node indices).
    crashed: BTreeSet<usize>,
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
    reads: Reads,
    /// The followers that answer reads, by node index (none unless clients connect to them).
    followers: Arc<Mutex<BTreeMap<usize, Follower>>>,
    /// When the service started: the followers' lag is counted in true time from here.
    epoch: madsim::time::Instant,
    /// The lock directory whose children (the lock entries) the service watches
    /// ([`SimZk::watch_lock_entries`]), and which client's request created each child still
    /// there (path, czxid).
    watched: Arc<Mutex<Option<Watched>>>,
}

/// The lock entries a [`SimZk`] watches: the lock directory, and each entry's creator.
struct Watched {
    dir: String,
    creators: EntryCreators,
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
        reads: Reads,
    ) -> SimZk {
        let mut engine = ZkEngine::new(config);
        let mut followers = BTreeMap::new();
        if reads.via_followers {
            engine.record_commits();
            for f in 1..servers as usize {
                followers.insert(f, Follower::new());
            }
        }
        SimZk {
            engine: Arc::new(Mutex::new(engine)),
            net,
            clocks,
            leader: Arc::new(AtomicUsize::new(ZK_NODE)),
            rec,
            state: Arc::default(),
            clients: Arc::default(),
            paused: Arc::new(watch::channel(false).0),
            node: Arc::default(),
            servers,
            reads,
            followers: Arc::new(Mutex::new(followers)),
            epoch: madsim::time::Instant::now(),
            watched: Arc::default(),
        }
    }

    /// Makes the service compare the children of the lock directory `dir` (the lock entries:
    /// one ephemeral sequential node per contender) before and after each request and each
    /// expiry of sessions, and record what went and why: an [`EventKind::EntryRemoved`] when a
    /// client's request removed an entry (a `delete`, or the close of its own session), an
    /// [`EventKind::EntryGone`] when the session tracker expired the session that owned it.
    /// Clients are the nodes after the servers (`Scenario::node_names`).
    pub(super) fn watch_lock_entries(&self, dir: &str) {
        *self.watched.lock().unwrap() = Some(Watched {
            dir: dir.to_string(),
            creators: EntryCreators::start(&self.rec, dir),
        });
    }

    /// The lock entries now (none unless the service watches them).
    fn entries(&self, engine: &ZkEngine) -> Vec<Entry> {
        match &*self.watched.lock().unwrap() {
            Some(w) => engine.entries(&w.dir),
            None => Vec::new(),
        }
    }

    /// Records the lock entries that went between `before` and now (removed by client `by`'s
    /// request, or with their expired session when `by` is `None`) and remembers who created
    /// the new ones.
    fn record_entry_changes(&self, engine: &ZkEngine, by: Option<u32>, before: &[Entry]) {
        let mut watched = self.watched.lock().unwrap();
        let Some(w) = watched.as_mut() else { return };
        let after = engine.entries(&w.dir);
        if after.as_slice() != before {
            let server = format!("zookeeper-{}", self.leader());
            w.creators
                .record_changes(&self.rec, &server, by, before, &after);
        }
    }

    /// The client whose session `session` is (`client-<c>` is the node after the servers').
    fn client_of(&self, session: i64) -> Option<u32> {
        let node = self
            .clients
            .lock()
            .unwrap()
            .get(&session)
            .map(|(n, _)| *n)?;
        node.checked_sub(self.servers as usize).map(|c| c as u32)
    }

    /// The server client `c` is connected to (`None`: the leader, whichever it is).
    pub(super) fn server_of(&self, c: u32) -> Option<usize> {
        self.reads.server_of(c, self.servers)
    }

    /// The node index of the server that answers a client connected to `server` now.
    pub(super) fn serving(&self, server: Option<usize>) -> usize {
        server.unwrap_or_else(|| self.leader())
    }

    /// The follower that answers a client connected to `server`, unless that server leads.
    fn follower_of(&self, server: Option<usize>) -> Option<usize> {
        server.filter(|&s| s != self.leader() && self.followers.lock().unwrap().contains_key(&s))
    }

    fn true_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Hands what the leader committed to every follower, due after the lag; each applies it
    /// then, on the service's node, and sends the watch events it fired.
    fn replicate(&self) {
        let committed = self.engine.lock().unwrap().take_committed();
        if committed.is_empty() {
            return;
        }
        let due = self.true_ms() + self.reads.lag.as_millis() as u64;
        for follower in self.followers.lock().unwrap().values_mut() {
            for c in &committed {
                follower.receive(due, c.clone());
            }
        }
        if self.reads.lag.is_zero() {
            self.apply_followers();
        } else {
            let me = self.clone();
            let lag = self.reads.lag;
            self.on_server(async move {
                madsim::time::sleep(lag).await;
                me.apply_followers();
            });
        }
    }

    /// Every follower applies what is due by now and sends the watch events that fired.
    fn apply_followers(&self) {
        let now = self.true_ms();
        let fired: Vec<(usize, Vec<(i64, ZkEvent)>)> = self
            .followers
            .lock()
            .unwrap()
            .iter_mut()
            .filter_map(|(&s, f)| f.apply_due(now).then(|| (s, f.take_notifications())))
            .collect();
        for (server, events) in fired {
            self.send(server, events);
        }
    }

    /// Returns once follower `f` has applied transaction `zxid` (FIFO client order).
    async fn caught_up(&self, f: usize, zxid: i64) {
        loop {
            self.apply_followers();
            let due = {
                let followers = self.followers.lock().unwrap();
                let follower = &followers[&f];
                if follower.applied() >= zxid {
                    return;
                }
                follower.due_of(zxid)
            };
            let wait = due.map_or(1, |d| d.saturating_sub(self.true_ms()).max(1));
            madsim::time::sleep(Duration::from_millis(wait)).await;
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

    /// Whether server `s` of an ensemble runs (has not crashed, or has restarted).
    pub(super) fn server_runs(&self, s: usize) -> bool {
        !self.state.lock().unwrap().crashed.contains(&s)
    }

    /// Server `s` of an ensemble crashes (`false`) or runs again (`true`).
    pub(super) fn set_server_runs(&self, s: usize, runs: bool) {
        let mut state = self.state.lock().unwrap();
        if runs {
            state.crashed.remove(&s);
        } else {
            state.crashed.insert(s);
        }
    }

    /// How many servers of the ensemble run and reach server `s` both ways, `s` included (none
    /// if `s` is down): the followers it could lead. ZAB's leader counts the followers synced
    /// with it (`Leader.lead`: a quorum of the ensemble's votes) and a follower talks only to
    /// its leader, so a quorum is a majority around one server, over links that work both ways
    /// (a TCP connection needs both).
    pub(super) fn reach_of(&self, s: usize) -> usize {
        if !self.server_runs(s) {
            return 0;
        }
        (0..self.servers as usize)
            .filter(|&o| {
                o == s
                    || (self.server_runs(o) && self.net.reachable(s, o) && self.net.reachable(o, s))
            })
            .count()
    }

    /// Whether server `s` has a quorum around it: a strict majority of the ensemble's servers
    /// (ZooKeeper's `QuorumMaj`: more than half of the voting members). Without one, ZAB
    /// commits no proposal (a write, a session's creation or close) and elects no leader.
    pub(super) fn has_quorum(&self, s: usize) -> bool {
        self.reach_of(s) * 2 > self.servers as usize
    }

    /// Marks an election as under way, unless one is: `false` if one already is.
    pub(super) fn start_election(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        !std::mem::replace(&mut state.electing, true)
    }

    /// An election is decided (a leader, or none for want of a quorum).
    pub(super) fn end_election(&self) {
        self.state.lock().unwrap().electing = false;
    }

    pub(super) fn paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns once the service's process runs (at once unless it is paused).
    pub(super) async fn running(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|paused| !paused).await;
    }

    /// A new session for the client on node `node`, connected to `server`, whose events go to
    /// `events`: a global session is answered once the client's server has applied its
    /// `createSession`, a local one at once.
    pub(super) async fn connect(
        &self,
        node: usize,
        server: Option<usize>,
        requested_ms: u64,
        events: UnboundedSender<ZkEvent>,
    ) -> (i64, u64) {
        let now = self.now_ms();
        let follower = self.follower_of(server);
        let (id, timeout) = {
            let mut engine = self.engine.lock().unwrap();
            if follower.is_some() && self.reads.local_sessions {
                engine.connect_local(now, requested_ms)
            } else {
                engine.connect(now, requested_ms)
            }
        };
        self.clients.lock().unwrap().insert(id, (node, events));
        self.state.lock().unwrap().requests += 1;
        self.replicate();
        if let Some(f) = follower {
            let created = self.engine.lock().unwrap().last_write(id);
            self.caught_up(f, created).await;
        }
        (id, timeout)
    }

    /// One request of `session` from a client connected to `server`: the leader checks and
    /// touches the session and applies a write; a follower answers a read from its own state,
    /// and any request once it has applied the session's writes.
    pub(super) async fn request_via(
        &self,
        server: Option<usize>,
        session: i64,
        request: Request,
    ) -> Result<Response, ZkError> {
        let Some(f) = self.follower_of(server) else {
            return self.request(session, request);
        };
        if !request.is_read() {
            let closes = request == Request::Close;
            let out = self.request(session, request);
            match &out {
                Ok(_) if !closes => {
                    let wrote = self.engine.lock().unwrap().last_write(session);
                    self.caught_up(f, wrote).await;
                }
                // A refused write is still a transaction of the leader (ZooKeeper commits an
                // `ErrorTxn` in its place, to keep the session's order): the follower answers
                // it once it has applied it, as late as a write that succeeded.
                Err(
                    ZkError::NoNode(_)
                    | ZkError::NodeExists(_)
                    | ZkError::NotEmpty(_)
                    | ZkError::BadVersion(_)
                    | ZkError::NoChildrenForEphemerals(_),
                ) => madsim::time::sleep(self.reads.lag).await,
                _ => {}
            }
            return out;
        }
        // The follower forwards the session's liveness to the leader; a session the leader
        // no longer has is refused before any read.
        self.request(session, Request::Ping)?;
        let wrote = self.engine.lock().unwrap().last_write(session);
        self.caught_up(f, wrote).await;
        self.followers
            .lock()
            .unwrap()
            .get_mut(&f)
            .expect("a follower")
            .read(session, request)
    }

    /// One request of `session`, applied now on the server's clock; the watch events it fired
    /// are sent to their clients.
    pub(super) fn request(&self, session: i64, request: Request) -> Result<Response, ZkError> {
        let now = self.now_ms();
        let by = self.client_of(session);
        let (out, expired, fired) = {
            let mut engine = self.engine.lock().unwrap();
            let before = self.entries(&engine);
            let expired = engine.expire_due(now);
            self.record_entry_changes(&engine, None, &before);
            let before = self.entries(&engine);
            let out = engine.request(now, session, request);
            // A session the server does not know (expired) changed nothing.
            if let Some(by) = by {
                self.record_entry_changes(&engine, Some(by), &before);
            }
            (out, expired, engine.take_notifications())
        };
        self.state.lock().unwrap().requests += 1;
        self.expired(&expired);
        if matches!(out, Ok(Response::Done)) && !self.engine.lock().unwrap().is_alive(session) {
            self.clients.lock().unwrap().remove(&session);
        }
        self.send(self.leader(), fired);
        self.replicate();
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
                let before = self.entries(&engine);
                let expired = engine.expire_due(now);
                self.record_entry_changes(&engine, None, &before);
                (expired, engine.take_notifications())
            };
            self.expired(&expired);
            self.send(self.leader(), fired);
            self.replicate();
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

    /// Sends each watch event, fired on `server`, to its session's client: after the link's
    /// latency, and, while the link is cut, once it heals (a reconnecting client re-registers
    /// its watches and hears what changed: ZooKeeper's `setWatches`). An event for a session
    /// that ended is dropped.
    fn send(&self, server: usize, fired: Vec<(i64, ZkEvent)>) {
        for (session, event) in fired {
            let Some((node, to)) = self.clients.lock().unwrap().get(&session).cloned() else {
                continue;
            };
            let net = self.net.clone();
            let engine = self.engine.clone();
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
