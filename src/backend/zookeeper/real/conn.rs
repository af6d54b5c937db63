//! Real mode's side of the ZooKeeper seam: a session on a ZooKeeper server, over the
//! `zookeeper-client` crate (0.11, pure Rust, on tokio). It reports what the seam needs in the
//! seam's words: the client's `Disconnected` is [`SessionState::Suspended`] (a connection loss:
//! the session may live on), `Expired` is [`SessionState::Lost`]; a node's `Stat` carries its
//! `czxid`; one-shot watches arrive as [`ZkEvent`]s in the order the client delivers them.
//!
//! When the client last heard from its server ([`ZkClient::last_heard_ms`], where a listener's
//! hold ends) counts the answers to the session's pings in the Java client, which pings once it
//! has sent nothing for a third of the session timeout ([`ping_after_idle_ms`]). The crate
//! pings too, but its pings' answers are not visible to its user, so the session sends a probe
//! of its own on the Java client's rule (an `exists` of `/`, a read: it changes no zxid) and
//! counts its answers. The rule matters beyond the listener: a server touches a session on every
//! request, so a session that stops is expired a timeout after its last request or the idle
//! probe after it, as in simulation (CURATOR-604's window is as narrow as a follower's lag).

use crate::backend::zookeeper::seam::{
    ping_after_idle_ms, CreateMode, SessionState, Stat, ZkClient, ZkError, ZkEvent,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use zookeeper_client as zk;

/// The clock [`RealZkClient::last_heard_ms`] reads: the lock's environment's monotonic clock, so
/// a lock compares like with like.
pub type MonotonicClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What the session's state task and the handle share.
struct Shared {
    state: SessionState,
    last_heard_ms: u64,
    /// When a request or a probe was last sent (the clock's time).
    last_sent_ms: u64,
}

/// One client's ZooKeeper session on real servers.
pub struct RealZkClient {
    connect_string: String,
    requested_timeout: Duration,
    clock: MonotonicClock,
    client: Option<zk::Client>,
    shared: Arc<Mutex<Shared>>,
    events_tx: UnboundedSender<ZkEvent>,
    events: UnboundedReceiver<ZkEvent>,
    /// The task that probes the current session (see the module docs).
    probe: Option<tokio::task::AbortHandle>,
    /// Set by the nemesis when the client's pause ends ([`RealZkClient::resumed_by`]).
    resumed: Option<Arc<AtomicBool>>,
}

impl RealZkClient {
    /// A handle for the servers of `connect_string` (`host:port,...`), asking for
    /// `session_timeout`; not connected until its first [`ZkClient::reconnect`].
    pub fn new(connect_string: &str, session_timeout: Duration, clock: MonotonicClock) -> Self {
        let (events_tx, events) = unbounded_channel();
        RealZkClient {
            connect_string: connect_string.to_string(),
            requested_timeout: session_timeout,
            clock,
            client: None,
            shared: Arc::new(Mutex::new(Shared {
                state: SessionState::Lost,
                last_heard_ms: 0,
                last_sent_ms: 0,
            })),
            events_tx,
            events,
            probe: None,
            resumed: None,
        }
    }

    /// The crate's connector for this client's sessions. Its connection timeout (how long the
    /// crate waits, hearing nothing, before it reports `Disconnected`: SUSPENDED) is 3/5 of the
    /// session timeout, the longest the crate keeps: above that it falls back to 2/5
    /// (`reset_timeout` in its `session/mod.rs`). The Java client's read timeout, which the
    /// simulation follows, is 2/3.
    fn connector(&self) -> zk::Connector {
        zk::Client::connector()
            .with_session_timeout(self.requested_timeout)
            .with_connection_timeout(self.requested_timeout * 3 / 5)
    }

    /// A client whose pauses end by setting `flag`: the first request after one first asks the
    /// server whether the session still lives ([`RealZkClient::after_pause`]).
    pub fn resumed_by(mut self, flag: Arc<AtomicBool>) -> Self {
        self.resumed = Some(flag);
        self
    }

    /// What a paused client does when it runs again, as the simulation's does: a paused JVM's
    /// ZooKeeper client notices on its next turn that it has heard nothing for longer than its
    /// read timeout, and reconnects with its session, which the server then revalidates (on a
    /// follower, by asking the leader). The crate's timers are not paused with the client (only
    /// its forwarders hold): they declared the connection lost during the pause and keep a
    /// reconnection of their own going, on their own schedule; the connections they opened
    /// during the pause are closed unforwarded when it ends (`CutProxy::forget_new_connections`).
    /// So, once after each pause, a session that lost its connection is revalidated at once on a
    /// connection of its own, detached (dropping it never closes the session), and the client
    /// reports the session lost when either that connection or the crate's next attempt is told
    /// it expired. A follower keeps one pending revalidation per session, the latest: the first
    /// answer from the leader goes to whichever connection asked last, so both are watched.
    /// Told that the session lives, or told nothing within the read timeout, it leaves the
    /// crate's reconnection to it.
    async fn after_pause(&mut self) {
        let Some(flag) = &self.resumed else { return };
        if !flag.swap(false, Ordering::SeqCst) || self.state() != SessionState::Suspended {
            return;
        }
        let Some(session) = self.client.as_ref().map(|c| c.session().clone()) else {
            return;
        };
        let revalidate = self
            .connector()
            .with_session(session)
            .with_detached()
            .connect(&self.connect_string);
        let shared = self.shared.clone();
        let crate_told = async move {
            while shared.lock().unwrap().state == SessionState::Suspended {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        let wait = self.requested_timeout * 2 / 3;
        let expired = tokio::select! {
            out = tokio::time::timeout(wait, revalidate) => {
                matches!(out, Ok(Err(zk::Error::SessionExpired)))
            }
            _ = tokio::time::timeout(wait, crate_told) => false,
        };
        let mut s = self.shared.lock().unwrap();
        if expired && s.state != SessionState::Lost {
            s.state = SessionState::Lost;
            let _ = self.events_tx.send(ZkEvent::Session(SessionState::Lost));
        }
    }

    /// Probes `client`'s session once nothing has been sent for the Java client's idle time,
    /// recording when an answer arrives, until the session is lost or the probe is stopped
    /// ([`RealZkClient::stop_probe`]).
    fn start_probe(&mut self, client: zk::Client) {
        self.stop_probe();
        let shared = self.shared.clone();
        let clock = self.clock.clone();
        let timeout_ms = client.session_timeout().as_millis() as u64;
        let idle_ping = ping_after_idle_ms(timeout_ms);
        let task = tokio::spawn(async move {
            while shared.lock().unwrap().state != SessionState::Lost {
                let last_sent = shared.lock().unwrap().last_sent_ms;
                let until = (last_sent + idle_ping).saturating_sub(clock());
                if until > 0 {
                    tokio::time::sleep(Duration::from_millis(until)).await;
                    continue;
                }
                shared.lock().unwrap().last_sent_ms = clock();
                let wait = Duration::from_millis((timeout_ms * 2 / 3).max(1));
                if let Ok(Ok(_)) = tokio::time::timeout(wait, client.check_stat("/")).await {
                    shared.lock().unwrap().last_heard_ms = clock();
                }
            }
        });
        self.probe = Some(task.abort_handle());
    }

    /// Stops the probe, and with it its handle on the session.
    fn stop_probe(&mut self) {
        if let Some(probe) = self.probe.take() {
            probe.abort();
        }
    }

    /// The crate's client, to send a request on now (which counts as sent for the probe).
    fn client(&self) -> Result<&zk::Client, ZkError> {
        match (&self.client, self.state()) {
            (Some(c), SessionState::Connected | SessionState::Suspended) => {
                self.shared.lock().unwrap().last_sent_ms = (self.clock)();
                Ok(c)
            }
            _ => Err(ZkError::SessionExpired("no live session".into())),
        }
    }

    /// The outcome of a request: the client heard from its server unless it lost the connection.
    fn heard<T>(&self, out: Result<T, zk::Error>, path: &str) -> Result<T, ZkError> {
        let out = out.map_err(|e| error(e, path));
        if !matches!(out, Err(ZkError::ConnectionLoss(_))) {
            self.shared.lock().unwrap().last_heard_ms = (self.clock)();
        }
        out
    }

    /// Forwards the one event of `watcher` to the event queue.
    fn forward(&self, watcher: zk::OneshotWatcher) {
        let tx = self.events_tx.clone();
        tokio::spawn(async move {
            let event = watcher.changed().await;
            let path = event.path;
            let event = match event.event_type {
                zk::EventType::NodeCreated => ZkEvent::NodeCreated(path),
                zk::EventType::NodeDeleted => ZkEvent::NodeDeleted(path),
                zk::EventType::NodeDataChanged => ZkEvent::NodeDataChanged(path),
                zk::EventType::NodeChildrenChanged => ZkEvent::NodeChildrenChanged(path),
                // The session broke: its state task reports that.
                zk::EventType::Session => return,
            };
            let _ = tx.send(event);
        });
    }
}

/// The seam's error for the client's.
fn error(e: zk::Error, path: &str) -> ZkError {
    let path = path.to_string();
    match e {
        zk::Error::NoNode => ZkError::NoNode(path),
        zk::Error::NodeExists => ZkError::NodeExists(path),
        zk::Error::NotEmpty => ZkError::NotEmpty(path),
        zk::Error::BadVersion => ZkError::BadVersion(path),
        zk::Error::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals(path),
        zk::Error::BadArguments(why) => ZkError::BadArguments(format!("{path}: {why}")),
        zk::Error::ConnectionLoss | zk::Error::Timeout => {
            ZkError::ConnectionLoss(format!("{path}: {e}"))
        }
        zk::Error::SessionExpired | zk::Error::ClientClosed => {
            ZkError::SessionExpired(format!("{path}: {e}"))
        }
        other => ZkError::Other(format!("{path}: {other}")),
    }
}

/// The seam's `Stat` for the client's.
fn stat(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        pzxid: s.pzxid,
        version: s.version,
        cversion: s.cversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
    }
}

impl ZkClient for RealZkClient {
    async fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), ZkError> {
        self.after_pause().await;
        let mode = match mode {
            CreateMode::Persistent => zk::CreateMode::Persistent,
            CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
            CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
            CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        };
        let sequential = matches!(
            mode,
            zk::CreateMode::PersistentSequential | zk::CreateMode::EphemeralSequential
        );
        let options = mode.with_acls(zk::Acls::anyone_all());
        let out = self.client()?.create(path, data, &options).await;
        let (s, sequence) = self.heard(out, path)?;
        let name = if sequential {
            format!("{path}{sequence}")
        } else {
            path.to_string()
        };
        Ok((name, stat(&s)))
    }

    async fn delete(&mut self, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        self.after_pause().await;
        let out = self.client()?.delete(path, version).await;
        self.heard(out, path)
    }

    async fn exists(&mut self, path: &str, watch: bool) -> Result<Option<Stat>, ZkError> {
        self.after_pause().await;
        if watch {
            let out = self.client()?.check_and_watch_stat(path).await;
            let (s, watcher) = self.heard(out, path)?;
            self.forward(watcher);
            Ok(s.as_ref().map(stat))
        } else {
            let out = self.client()?.check_stat(path).await;
            Ok(self.heard(out, path)?.as_ref().map(stat))
        }
    }

    async fn get_data(&mut self, path: &str, watch: bool) -> Result<(Vec<u8>, Stat), ZkError> {
        self.after_pause().await;
        if watch {
            let out = self.client()?.get_and_watch_data(path).await;
            let (data, s, watcher) = self.heard(out, path)?;
            self.forward(watcher);
            Ok((data, stat(&s)))
        } else {
            let out = self.client()?.get_data(path).await;
            let (data, s) = self.heard(out, path)?;
            Ok((data, stat(&s)))
        }
    }

    async fn get_children(&mut self, path: &str, watch: bool) -> Result<Vec<String>, ZkError> {
        self.after_pause().await;
        let mut children = if watch {
            let out = self.client()?.list_and_watch_children(path).await;
            let (children, watcher) = self.heard(out, path)?;
            self.forward(watcher);
            children
        } else {
            let out = self.client()?.list_children(path).await;
            self.heard(out, path)?
        };
        children.sort();
        Ok(children)
    }

    async fn next_event(&mut self, timeout_ms: u64) -> Option<ZkEvent> {
        if let Ok(event) = self.events.try_recv() {
            return Some(event);
        }
        if timeout_ms == 0 {
            return None;
        }
        tokio::time::timeout(Duration::from_millis(timeout_ms), self.events.recv())
            .await
            .ok()
            .flatten()
    }

    fn state(&self) -> SessionState {
        self.shared.lock().unwrap().state
    }

    fn session_id(&self) -> i64 {
        self.client.as_ref().map_or(0, |c| c.session_id().0)
    }

    fn session_timeout_ms(&self) -> u64 {
        self.client
            .as_ref()
            .map_or(0, |c| c.session_timeout().as_millis() as u64)
    }

    fn last_heard_ms(&self) -> u64 {
        self.shared.lock().unwrap().last_heard_ms
    }

    /// A new session (see [`RealZkClient::connector`] for its timeouts).
    async fn reconnect(&mut self) -> Result<(), ZkError> {
        let client = self
            .connector()
            .connect(&self.connect_string)
            .await
            .map_err(|e| error(e, &self.connect_string))?;
        {
            let mut s = self.shared.lock().unwrap();
            s.state = SessionState::Connected;
            s.last_heard_ms = (self.clock)();
            s.last_sent_ms = s.last_heard_ms;
        }
        while self.events.try_recv().is_ok() {}
        let mut states = client.state_watcher();
        let shared = self.shared.clone();
        let tx = self.events_tx.clone();
        let clock = self.clock.clone();
        tokio::spawn(async move {
            loop {
                let state = match states.changed().await {
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        SessionState::Connected
                    }
                    zk::SessionState::Disconnected => SessionState::Suspended,
                    _ => SessionState::Lost,
                };
                {
                    let mut s = shared.lock().unwrap();
                    if state == SessionState::Connected {
                        s.last_heard_ms = clock();
                    }
                    s.state = state;
                }
                let _ = tx.send(ZkEvent::Session(state));
                if state == SessionState::Lost {
                    return;
                }
            }
        });
        self.start_probe(client.clone());
        self.client = Some(client);
        Ok(())
    }

    async fn close(&mut self) -> Result<(), ZkError> {
        self.client()?;
        // Dropping the last handle (the probe holds the other) closes the session on the server.
        self.stop_probe();
        self.client = None;
        self.shared.lock().unwrap().state = SessionState::Lost;
        Ok(())
    }
}

impl Drop for RealZkClient {
    fn drop(&mut self) {
        self.stop_probe();
    }
}
