//! The simulated ZooKeeper server: sessions with a negotiated timeout that expire on the
//! server's clock, the zxid every write takes, and the requests a lock recipe sends, applied to
//! the data tree (`tree.rs`). A pure state machine: the caller passes the server's clock reading
//! with every call, so the simulated world (a madsim node) and the differential test drive it
//! the same way.
//!
//! What it keeps of ZooKeeper 3.8's server:
//! - the negotiated timeout is the requested one clamped to `[min, max]` session timeout
//!   (`ZooKeeperServer.processConnectRequest`);
//! - any request or ping from a session moves its expiry to `now + timeout` rounded up to the
//!   next tick (`ExpiryQueue.update`, `roundToNextInterval`), and the session tracker expires it
//!   at the first tick at or after that time: a session lives between its timeout and its
//!   timeout plus one tick after its client was last heard;
//! - creating and closing (or expiring) a session are transactions with a zxid of their own; an
//!   expiry deletes the session's ephemeral nodes under its close transaction's zxid;
//! - a new leader (an election in an ensemble) starts a new epoch, the high 32 bits of every
//!   zxid, and tracks every session it loaded afresh: `SessionTrackerImpl`'s constructor adds
//!   each session of the database with its timeout, which sets its expiry from the new leader's
//!   clock. So a session survives an election that is shorter than its timeout, and its client
//!   has the whole timeout again to reach the new leader.
//! - every transaction it commits can be kept for followers to replay ([`Self::record_commits`],
//!   `follower.rs`), and each session's last write is known, so a follower answers a session
//!   only once it has applied that session's writes (ZooKeeper's FIFO client order);
//! - a local session (`localSessionsEnabled`) is created without a transaction, so the server a
//!   client connects to answers at once, and becomes a global one (a `createSession`
//!   transaction) when it first creates an ephemeral node (`localSessionsUpgradingEnabled`).

use std::collections::BTreeMap;

use crate::backend::zookeeper::engine::tree::Tree;
use crate::backend::zookeeper::engine::txn::{Committed, Txn};
use crate::backend::zookeeper::seam::{CreateMode, Stat, ZkError, ZkEvent};

/// The server's timing: its tick and the session timeouts it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkConfig {
    /// `tickTime`: the session tracker's granularity.
    pub tick_ms: u64,
    /// `minSessionTimeout` (ZooKeeper's default: 2 ticks).
    pub min_session_timeout_ms: u64,
    /// `maxSessionTimeout` (ZooKeeper's default: 20 ticks).
    pub max_session_timeout_ms: u64,
}

impl ZkConfig {
    /// ZooKeeper's defaults for a tick: sessions of 2 to 20 ticks.
    pub fn with_tick(tick_ms: u64) -> ZkConfig {
        ZkConfig {
            tick_ms,
            min_session_timeout_ms: 2 * tick_ms,
            max_session_timeout_ms: 20 * tick_ms,
        }
    }
}

/// A request from a session, as a client sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `create(path, data, mode)`.
    Create {
        /// The path (a sequential node's prefix).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Ephemeral and/or sequential.
        mode: CreateMode,
    },
    /// `delete(path, version)`.
    Delete {
        /// The path.
        path: String,
        /// The expected data version; `None` for any (`-1`).
        version: Option<i32>,
    },
    /// `setData(path, data, version)`.
    SetData {
        /// The path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected data version; `None` for any.
        version: Option<i32>,
    },
    /// `exists(path, watch)`.
    Exists {
        /// The path.
        path: String,
        /// Leave a one-shot watch.
        watch: bool,
    },
    /// `getData(path, watch)`.
    GetData {
        /// The path.
        path: String,
        /// Leave a one-shot watch.
        watch: bool,
    },
    /// `getChildren(path, watch)`.
    GetChildren {
        /// The path.
        path: String,
        /// Leave a one-shot watch.
        watch: bool,
    },
    /// A heartbeat: keeps the session alive and nothing else.
    Ping,
    /// `close()`: ends the session at once.
    Close,
}

/// The server's answer to a [`Request`] that succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// The created node's name and `Stat`.
    Created(String, Stat),
    /// Deleted, or the session closed.
    Done,
    /// The node's new `Stat` after `setData`.
    Set(Stat),
    /// `exists`: the `Stat`, or none.
    Exists(Option<Stat>),
    /// `getData`: data and `Stat`.
    Data(Vec<u8>, Stat),
    /// `getChildren`: the names, sorted.
    Children(Vec<String>),
    /// A ping's answer.
    Pong,
}

#[derive(Clone, Copy, Debug)]
struct Session {
    timeout_ms: u64,
    /// The server-clock time at which the tracker expires it.
    expires_at: u64,
    /// A local session: created without a transaction, known to no follower.
    local: bool,
    /// The zxid of its last write (its `createSession` for a global session): a follower answers
    /// it only once it has applied this.
    last_write: i64,
}

/// One ZooKeeper service (a standalone server, or an ensemble seen through its leader).
#[derive(Clone, Debug)]
pub struct ZkEngine {
    config: ZkConfig,
    tree: Tree,
    sessions: BTreeMap<i64, Session>,
    /// The last zxid given out: the epoch in the high 32 bits, the counter in the low ones.
    zxid: i64,
    next_session: i64,
    /// The transactions committed since the last [`Self::take_committed`], kept only once
    /// [`Self::record_commits`] asked for them (followers replay them).
    log: Option<Vec<Committed>>,
}

/// The first session id: a standalone ZooKeeper derives its ids from the server id (0) and its
/// start time; the simulation starts from a fixed one so runs repeat, and only compares ids for
/// equality.
const FIRST_SESSION: i64 = 0x0100_0000_0000_0001;

impl ZkEngine {
    /// An empty service (only `/` and `/zookeeper`), at zxid 0 of epoch 0.
    pub fn new(config: ZkConfig) -> ZkEngine {
        ZkEngine {
            config,
            tree: Tree::new(),
            sessions: BTreeMap::new(),
            zxid: 0,
            next_session: FIRST_SESSION,
            log: None,
        }
    }

    /// From now on, keep every committed transaction for [`Self::take_committed`]: a service
    /// whose followers answer reads replays them there.
    pub fn record_commits(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// The transactions committed since the last call, in zxid order.
    pub fn take_committed(&mut self) -> Vec<Committed> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn commit(&mut self, zxid: i64, txn: Txn) {
        if let Some(log) = &mut self.log {
            log.push(Committed { zxid, txn });
        }
    }

    /// The zxid of `session`'s last write (0: none, or no such session).
    pub fn last_write(&self, session: i64) -> i64 {
        self.sessions.get(&session).map_or(0, |s| s.last_write)
    }

    /// The service's timing.
    pub fn config(&self) -> ZkConfig {
        self.config
    }

    /// The last zxid given out.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.zxid
    }

    /// The first tick at or after `now + timeout` (ZooKeeper's `roundToNextInterval`: the
    /// next multiple of the tick strictly after the sum).
    fn expiry(&self, now_ms: u64, timeout_ms: u64) -> u64 {
        let tick = self.config.tick_ms.max(1);
        ((now_ms + timeout_ms) / tick + 1) * tick
    }

    /// The timeout the server grants for a requested one.
    pub fn negotiate(&self, requested_ms: u64) -> u64 {
        requested_ms.clamp(
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        )
    }

    /// A new session (a `createSession` transaction): its id and negotiated timeout.
    pub fn connect(&mut self, now_ms: u64, requested_timeout_ms: u64) -> (i64, u64) {
        self.open(now_ms, requested_timeout_ms, false)
    }

    /// A new local session (`localSessionsEnabled`): no transaction, so no follower needs to
    /// apply anything before it answers the session; its id and negotiated timeout.
    pub fn connect_local(&mut self, now_ms: u64, requested_timeout_ms: u64) -> (i64, u64) {
        self.open(now_ms, requested_timeout_ms, true)
    }

    fn open(&mut self, now_ms: u64, requested_timeout_ms: u64, local: bool) -> (i64, u64) {
        let timeout_ms = self.negotiate(requested_timeout_ms);
        let id = self.next_session;
        self.next_session += 1;
        let last_write = if local {
            0
        } else {
            let zxid = self.next_zxid();
            self.commit(zxid, Txn::CreateSession(id));
            zxid
        };
        let expires_at = self.expiry(now_ms, timeout_ms);
        self.sessions.insert(
            id,
            Session {
                timeout_ms,
                expires_at,
                local,
                last_write,
            },
        );
        (id, timeout_ms)
    }

    /// A local session about to own an ephemeral node becomes global: a `createSession`
    /// transaction, which the followers then know it by.
    fn upgrade(&mut self, session: i64) {
        if self.sessions.get(&session).is_some_and(|s| s.local) {
            let zxid = self.next_zxid();
            self.commit(zxid, Txn::CreateSession(session));
            let s = self.sessions.get_mut(&session).expect("checked above");
            s.local = false;
            s.last_write = zxid;
        }
    }

    /// A write of `session` committed as `zxid`.
    fn wrote(&mut self, session: i64, zxid: i64, txn: Txn) {
        self.zxid = zxid;
        self.commit(zxid, txn);
        if let Some(s) = self.sessions.get_mut(&session) {
            s.last_write = zxid;
        }
    }

    /// A client reconnecting with its session id (after a connection loss): the session is
    /// touched if the server still has it, else the client learns it expired.
    pub fn reconnect(&mut self, now_ms: u64, session: i64) -> Result<u64, ZkError> {
        self.touch(now_ms, session)?;
        Ok(self.sessions[&session].timeout_ms)
    }

    /// Whether the server still has `session`.
    pub fn is_alive(&self, session: i64) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The sessions the server has, with their expiry times on its clock.
    pub fn sessions(&self) -> Vec<(i64, u64)> {
        self.sessions
            .iter()
            .map(|(id, s)| (*id, s.expires_at))
            .collect()
    }

    fn touch(&mut self, now_ms: u64, session: i64) -> Result<(), ZkError> {
        let Some(s) = self.sessions.get(&session).copied() else {
            return Err(ZkError::SessionExpired(format!("session {session:#x}")));
        };
        let expires_at = self.expiry(now_ms, s.timeout_ms);
        // ExpiryQueue.update never moves an expiry earlier.
        let expires_at = expires_at.max(s.expires_at);
        self.sessions.insert(session, Session { expires_at, ..s });
        Ok(())
    }

    /// Applies one request from `session` at `now_ms` on the server's clock. A session the
    /// server no longer has gets `SESSIONEXPIRED`; any other request touches it first.
    pub fn request(
        &mut self,
        now_ms: u64,
        session: i64,
        request: Request,
    ) -> Result<Response, ZkError> {
        self.expire_due(now_ms);
        self.touch(now_ms, session)?;
        match request {
            Request::Create { path, data, mode } => {
                if mode.is_ephemeral() {
                    self.upgrade(session);
                }
                // A failed write takes no zxid: the server's prep step refuses it first.
                let zxid = self.zxid + 1;
                let (name, stat) = self.tree.create(zxid, session, &path, &data, mode)?;
                let txn = Txn::Create {
                    owner: session,
                    path,
                    name: name.clone(),
                    data,
                    mode,
                };
                self.wrote(session, zxid, txn);
                Ok(Response::Created(name, stat))
            }
            Request::Delete { path, version } => {
                let zxid = self.zxid + 1;
                self.tree.delete(zxid, &path, version)?;
                self.wrote(session, zxid, Txn::Delete { path });
                Ok(Response::Done)
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                let zxid = self.zxid + 1;
                let stat = self.tree.set_data(zxid, &path, &data, version)?;
                self.wrote(session, zxid, Txn::SetData { path, data });
                Ok(Response::Set(stat))
            }
            read @ (Request::Exists { .. }
            | Request::GetData { .. }
            | Request::GetChildren { .. }) => answer_read(&mut self.tree, session, read),
            Request::Ping => Ok(Response::Pong),
            Request::Close => {
                self.close(session);
                Ok(Response::Done)
            }
        }
    }

    /// Ends `session` (a `closeSession` transaction): its ephemeral nodes go under its zxid. A
    /// local session ends on its server alone (it owns no ephemeral node: it would have been
    /// upgraded).
    fn close(&mut self, session: i64) {
        match self.sessions.remove(&session) {
            Some(s) if s.local => self.tree.close_session(self.zxid, session),
            Some(_) => {
                let zxid = self.next_zxid();
                self.tree.close_session(zxid, session);
                self.commit(zxid, Txn::CloseSession(session));
            }
            None => {}
        }
    }

    /// Expires every session whose time has come by `now_ms` (in the order of their expiry,
    /// then of their ids, as the tracker's buckets do); returns their ids.
    pub fn expire_due(&mut self, now_ms: u64) -> Vec<i64> {
        let mut due: Vec<(u64, i64)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.expires_at <= now_ms)
            .map(|(id, s)| (s.expires_at, *id))
            .collect();
        due.sort_unstable();
        for &(_, id) in &due {
            self.close(id);
        }
        due.into_iter().map(|(_, id)| id).collect()
    }

    /// The earliest expiry time of any session: when the server's tracker next has work.
    pub fn next_expiry(&self) -> Option<u64> {
        self.sessions.values().map(|s| s.expires_at).min()
    }

    /// A new leader took over at `now_ms` on its clock (`new_epoch`: after an election; a
    /// standalone server that restarts keeps its epoch): every session is tracked afresh from
    /// now (see the module docs).
    pub fn new_leader(&mut self, now_ms: u64, new_epoch: bool) {
        if new_epoch {
            let epoch = (self.zxid >> 32) + 1;
            self.zxid = epoch << 32;
        }
        let ids: Vec<i64> = self.sessions.keys().copied().collect();
        for id in ids {
            let s = self.sessions[&id];
            let expires_at = self.expiry(now_ms, s.timeout_ms);
            self.sessions.insert(id, Session { expires_at, ..s });
        }
    }

    /// The watch notifications fired since the last call: (session, event), in the order the
    /// writes that fired them were applied.
    pub fn take_notifications(&mut self) -> Vec<(i64, ZkEvent)> {
        self.tree.take_fired()
    }

    /// The lock entries under the lock directory `dir`: its children (full paths) with the zxid
    /// that created each, in name order.
    pub fn entries(&self, dir: &str) -> Vec<(String, i64)> {
        self.tree.children_created(dir)
    }

    /// Every node's path and `Stat`, in path order.
    pub fn dump(&self) -> Vec<(String, Stat)> {
        self.tree.dump()
    }
}

/// Answers a read (`exists`, `getData`, `getChildren`) from `tree`, as the server the session is
/// connected to does from what it has applied; any other request is refused as a bad argument.
pub(super) fn answer_read(
    tree: &mut Tree,
    session: i64,
    request: Request,
) -> Result<Response, ZkError> {
    match request {
        Request::Exists { path, watch } => {
            Ok(Response::Exists(tree.exists(session, &path, watch)?))
        }
        Request::GetData { path, watch } => {
            let (data, stat) = tree.get_data(session, &path, watch)?;
            Ok(Response::Data(data, stat))
        }
        Request::GetChildren { path, watch } => Ok(Response::Children(
            tree.get_children(session, &path, watch)?,
        )),
        other => Err(ZkError::BadArguments(format!("{other:?} is not a read"))),
    }
}

impl Request {
    /// Whether a server answers it from its own applied state (`exists`, `getData`,
    /// `getChildren`) rather than forwarding it to the leader as a write or a session change.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            Request::Exists { .. } | Request::GetData { .. } | Request::GetChildren { .. }
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `create` with no data (the followers' tests use it too).
    pub(crate) fn create(path: &str, mode: CreateMode) -> Request {
        Request::Create {
            path: path.into(),
            data: Vec::new(),
            mode,
        }
    }

    #[test]
    fn a_session_expires_on_the_first_tick_after_its_timeout_and_takes_its_ephemeral_node() {
        let mut zk = ZkEngine::new(ZkConfig::with_tick(100));
        let (a, timeout) = zk.connect(0, 1_000);
        assert_eq!(timeout, 1_000);
        let (b, _) = zk.connect(0, 1_000);
        zk.request(0, a, create("/lock", CreateMode::Persistent))
            .unwrap();
        let Response::Created(node, stat) = zk
            .request(50, a, create("/lock/n-", CreateMode::EphemeralSequential))
            .unwrap()
        else {
            panic!("not created")
        };
        assert_eq!(stat.ephemeral_owner, a);
        zk.request(
            60,
            b,
            Request::Exists {
                path: node.clone(),
                watch: true,
            },
        )
        .unwrap();
        // Last heard at 50: expires at the tick after 1 050, that is 1 100.
        assert!(zk.expire_due(1_099).is_empty());
        zk.request(1_000, b, Request::Ping).unwrap();
        assert_eq!(zk.expire_due(1_100), vec![a]);
        assert_eq!(
            zk.take_notifications(),
            vec![(b, ZkEvent::NodeDeleted(node.clone()))]
        );
        assert!(matches!(
            zk.request(1_100, a, Request::Ping),
            Err(ZkError::SessionExpired(_))
        ));
        assert!(matches!(
            zk.reconnect(1_100, a),
            Err(ZkError::SessionExpired(_))
        ));
        assert_eq!(zk.reconnect(1_100, b), Ok(1_000));
    }

    #[test]
    fn zxids_count_sessions_and_writes_but_not_reads_or_refusals() {
        let mut zk = ZkEngine::new(ZkConfig::with_tick(100));
        let (a, _) = zk.connect(0, 1_000);
        assert_eq!(zk.zxid(), 1);
        zk.request(0, a, create("/x", CreateMode::Persistent))
            .unwrap();
        assert!(zk
            .request(0, a, create("/x", CreateMode::Persistent))
            .is_err());
        zk.request(
            0,
            a,
            Request::GetChildren {
                path: "/".into(),
                watch: false,
            },
        )
        .unwrap();
        assert_eq!(zk.zxid(), 2);
        zk.request(0, a, Request::Close).unwrap();
        assert_eq!(zk.zxid(), 3);
    }

    #[test]
    fn timeouts_are_clamped_and_a_new_leader_gives_every_session_its_whole_timeout_again() {
        let mut zk = ZkEngine::new(ZkConfig::with_tick(100));
        assert_eq!(zk.negotiate(50), 200);
        assert_eq!(zk.negotiate(60_000), 2_000);
        let (a, _) = zk.connect(0, 1_000);
        zk.new_leader(900, true);
        assert_eq!(zk.zxid(), 1 << 32);
        // Without the election it would have expired at 1 100.
        assert!(zk.expire_due(1_500).is_empty());
        assert_eq!(zk.expire_due(2_000), vec![a]);
        assert_eq!(zk.zxid(), (1 << 32) + 1);
    }
}
