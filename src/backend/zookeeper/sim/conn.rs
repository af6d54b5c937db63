//! A client's ZooKeeper session in simulation: the requests of the seam (`seam::ZkClient`) as
//! round trips over the simulated network to the service (`server.rs`), and the ZooKeeper client
//! library's own timers, which decide what a lock's connection-state listener hears.
//!
//! What it keeps of the ZooKeeper client (the Java client that Curator wraps; kazoo's is the
//! same design):
//! - the read timeout is two thirds of the negotiated session timeout, and the client pings
//!   once it has sent nothing for half of it (`ClientCnxn`: `readTimeout = sessionTimeout * 2 /
//!   3`; [`ping_after_idle_ms`]), so a busy client does not ping and a paused one's last touch
//!   on the server is its last request or the idle ping after it. A request with no answer within the read timeout fails with
//!   `CONNECTIONLOSS`, and once the client has heard nothing for the read timeout it reports
//!   the connection lost: Curator's `SUSPENDED`;
//! - the client learns that its session expired only from a server: when it gets through again
//!   and the server no longer knows the session (`Expired`: Curator's `LOST`). The handle is dead
//!   then; a new session is a new handle (`reconnect`);
//! - the pings are sent by the client's own task on the client's node: a paused client pings
//!   nothing and notices nothing until it runs again, and a crashed client's session simply
//!   times out on the server.

use crate::backend::zookeeper::engine::{Request, Response};
use crate::backend::zookeeper::seam::{
    ping_after_idle_ms, CreateMode, SessionState, Stat, ZkClient, ZkError, ZkEvent,
};
use crate::backend::zookeeper::sim::server::SimZk;
use crate::env::Env;
use crate::sim::SimEnv;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What the client library and its ping task share.
struct Session {
    id: i64,
    timeout_ms: u64,
    state: SessionState,
    /// The client's monotonic clock when it last heard from the service.
    last_heard_ms: u64,
    /// The client's monotonic clock when it last sent a request or a ping.
    last_sent_ms: u64,
    /// Bumped by every new session, so an old session's ping task stops.
    generation: u64,
}

/// One client's ZooKeeper handle over the simulated network.
pub struct SimZkClient {
    zk: SimZk,
    node: usize,
    /// The server it is connected to (`None`: the leader, whichever it is).
    server: Option<usize>,
    env: SimEnv,
    requested_timeout_ms: u64,
    session: Arc<Mutex<Session>>,
    events_tx: UnboundedSender<ZkEvent>,
    events: UnboundedReceiver<ZkEvent>,
}

impl SimZk {
    /// A handle for the client on node `node`, connected to `server` (`None`: the leader; see
    /// [`SimZk::server_of`]), not yet connected (its first request connects), asking for
    /// `session_timeout_ms`.
    pub(super) fn client(
        &self,
        node: usize,
        server: Option<usize>,
        env: SimEnv,
        session_timeout_ms: u64,
    ) -> SimZkClient {
        let (events_tx, events) = unbounded_channel();
        SimZkClient {
            zk: self.clone(),
            node,
            server,
            env,
            requested_timeout_ms: session_timeout_ms,
            session: Arc::new(Mutex::new(Session {
                id: 0,
                timeout_ms: 0,
                state: SessionState::Lost,
                last_heard_ms: 0,
                last_sent_ms: 0,
                generation: 0,
            })),
            events_tx,
            events,
        }
    }
}

/// One round trip: the request travels to the client's server, is answered (a write or a
/// session change applied by the leader, a read by the server the client is connected to), and
/// the reply travels back. Never returns while a link on the way is cut (the caller's read
/// timeout gives up). A follower's exchange with the leader is folded into the follower's hop.
async fn round_trip(
    zk: &SimZk,
    node: usize,
    connected: Option<usize>,
    session: i64,
    request: Request,
) -> Result<Response, ZkError> {
    let server = zk.serving(connected);
    hop(zk, node, server).await;
    if !zk.up() {
        // A crashed server's host refuses the connection; an electing ensemble drops it.
        hop(zk, server, node).await;
        return Err(ZkError::ConnectionLoss("the service is not serving".into()));
    }
    zk.running().await;
    let out = zk.request_via(connected, session, request).await;
    hop(zk, server, node).await;
    out
}

async fn hop(zk: &SimZk, from: usize, to: usize) {
    madsim::time::sleep(zk.net.latency()).await;
    if !zk.net.reachable(from, to) {
        std::future::pending::<()>().await;
    }
}

impl SimZkClient {
    fn read_timeout(&self) -> Duration {
        let timeout = self
            .session
            .lock()
            .unwrap()
            .timeout_ms
            .max(self.requested_timeout_ms);
        Duration::from_millis((timeout * 2 / 3).max(1))
    }

    /// A request of the current session, with the client's read timeout.
    async fn call(&mut self, request: Request) -> Result<Response, ZkError> {
        let (id, state) = {
            let mut s = self.session.lock().unwrap();
            s.last_sent_ms = self.env.monotonic_ms();
            (s.id, s.state)
        };
        if id == 0 || state == SessionState::Lost {
            return Err(ZkError::SessionExpired(
                "the session expired; a new one is needed".into(),
            ));
        }
        let limit = self.read_timeout();
        let trip = round_trip(&self.zk, self.node, self.server, id, request);
        match madsim::time::timeout(limit, trip).await {
            Err(_) => Err(ZkError::ConnectionLoss(format!(
                "no answer within the read timeout ({} ms)",
                limit.as_millis()
            ))),
            Ok(out) => {
                heard(&self.session, &self.events_tx, &self.env, &out);
                out
            }
        }
    }

    /// Starts the ping task of the current session on this client's node.
    fn start_pings(&self, generation: u64) {
        let zk = self.zk.clone();
        let node = self.node;
        let server = self.server;
        let env = self.env.clone();
        let session = self.session.clone();
        let events = self.events_tx.clone();
        madsim::task::spawn(async move {
            loop {
                let (id, timeout_ms, gen, state, last_sent) = {
                    let s = session.lock().unwrap();
                    (s.id, s.timeout_ms, s.generation, s.state, s.last_sent_ms)
                };
                if gen != generation || state == SessionState::Lost {
                    return;
                }
                // Wake when the idle time reaches the ping threshold, and at least every third
                // of the timeout, to notice a silence while requests are outstanding.
                let idle_ping = ping_after_idle_ms(timeout_ms);
                let now = env.monotonic_ms();
                let until_ping = (last_sent + idle_ping).saturating_sub(now);
                if until_ping > 0 {
                    env.sleep(Duration::from_millis(
                        until_ping.min((timeout_ms / 3).max(1)),
                    ))
                    .await;
                } else {
                    session.lock().unwrap().last_sent_ms = now;
                    let read_timeout = Duration::from_millis((timeout_ms * 2 / 3).max(1));
                    let ping = round_trip(&zk, node, server, id, Request::Ping);
                    if let Ok(out) = madsim::time::timeout(read_timeout, ping).await {
                        if session.lock().unwrap().generation == generation {
                            heard(&session, &events, &env, &out);
                        }
                    }
                }
                let mut s = session.lock().unwrap();
                if s.generation == generation
                    && s.state == SessionState::Connected
                    && env.monotonic_ms() >= s.last_heard_ms + timeout_ms * 2 / 3
                {
                    s.state = SessionState::Suspended;
                    let _ = events.send(ZkEvent::Session(SessionState::Suspended));
                }
            }
        });
    }
}

/// The client heard from the service: the connection is up again (`RECONNECTED`) or the
/// service says the session is gone (`LOST`).
fn heard(
    session: &Mutex<Session>,
    events: &UnboundedSender<ZkEvent>,
    env: &SimEnv,
    out: &Result<Response, ZkError>,
) {
    let mut s = session.lock().unwrap();
    if s.state == SessionState::Lost {
        return;
    }
    match out {
        Err(ZkError::SessionExpired(_)) => {
            s.state = SessionState::Lost;
            let _ = events.send(ZkEvent::Session(SessionState::Lost));
        }
        Err(ZkError::ConnectionLoss(_)) => {}
        _ => {
            s.last_heard_ms = env.monotonic_ms();
            if s.state == SessionState::Suspended {
                s.state = SessionState::Connected;
                let _ = events.send(ZkEvent::Session(SessionState::Connected));
            }
        }
    }
}

fn unexpected(r: Response) -> ZkError {
    ZkError::Other(format!("unexpected answer {r:?}"))
}

impl ZkClient for SimZkClient {
    async fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), ZkError> {
        let request = Request::Create {
            path: path.into(),
            data: data.to_vec(),
            mode,
        };
        match self.call(request).await? {
            Response::Created(name, stat) => Ok((name, stat)),
            r => Err(unexpected(r)),
        }
    }

    async fn delete(&mut self, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        let request = Request::Delete {
            path: path.into(),
            version,
        };
        match self.call(request).await? {
            Response::Done => Ok(()),
            r => Err(unexpected(r)),
        }
    }

    async fn exists(&mut self, path: &str, watch: bool) -> Result<Option<Stat>, ZkError> {
        let request = Request::Exists {
            path: path.into(),
            watch,
        };
        match self.call(request).await? {
            Response::Exists(stat) => Ok(stat),
            r => Err(unexpected(r)),
        }
    }

    async fn get_data(&mut self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat), ZkError> {
        let request = Request::GetData {
            path: path.into(),
            watch,
        };
        match self.call(request).await? {
            Response::Data(data, stat) => Ok((data, stat)),
            r => Err(unexpected(r)),
        }
    }

    async fn get_children(&mut self, path: &str, watch: bool) -> Result<Vec<String>, ZkError> {
        let request = Request::GetChildren {
            path: path.into(),
            watch,
        };
        match self.call(request).await? {
            Response::Children(children) => Ok(children),
            r => Err(unexpected(r)),
        }
    }

    async fn next_event(&mut self, timeout_ms: u64) -> Option<ZkEvent> {
        if let Ok(event) = self.events.try_recv() {
            return Some(event);
        }
        if timeout_ms == 0 {
            return None;
        }
        madsim::time::timeout(Duration::from_millis(timeout_ms), self.events.recv())
            .await
            .ok()
            .flatten()
    }

    fn state(&self) -> SessionState {
        self.session.lock().unwrap().state
    }

    fn session_id(&self) -> i64 {
        self.session.lock().unwrap().id
    }

    fn session_timeout_ms(&self) -> u64 {
        self.session.lock().unwrap().timeout_ms
    }

    fn last_heard_ms(&self) -> u64 {
        self.session.lock().unwrap().last_heard_ms
    }

    async fn reconnect(&mut self) -> Result<(), ZkError> {
        let limit = self.read_timeout();
        let zk = self.zk.clone();
        let node = self.node;
        let connected = self.server;
        let requested = self.requested_timeout_ms;
        let tx = self.events_tx.clone();
        let connect = async move {
            let server = zk.serving(connected);
            hop(&zk, node, server).await;
            if !zk.up() {
                hop(&zk, server, node).await;
                return None;
            }
            zk.running().await;
            let granted = zk.connect(node, connected, requested, tx).await;
            hop(&zk, server, node).await;
            Some(granted)
        };
        match madsim::time::timeout(limit, connect).await {
            Ok(Some((id, timeout_ms))) => {
                let generation = {
                    let mut s = self.session.lock().unwrap();
                    s.id = id;
                    s.timeout_ms = timeout_ms;
                    s.state = SessionState::Connected;
                    s.last_heard_ms = self.env.monotonic_ms();
                    s.last_sent_ms = s.last_heard_ms;
                    s.generation += 1;
                    s.generation
                };
                // What the old session's watches would have said is moot now.
                while self.events.try_recv().is_ok() {}
                self.start_pings(generation);
                Ok(())
            }
            _ => Err(ZkError::ConnectionLoss(
                "no session established within the read timeout".into(),
            )),
        }
    }

    async fn close(&mut self) -> Result<(), ZkError> {
        self.call(Request::Close).await?;
        let mut s = self.session.lock().unwrap();
        s.state = SessionState::Lost;
        s.generation += 1;
        Ok(())
    }
}
