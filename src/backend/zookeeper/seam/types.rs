//! What a ZooKeeper session hands a lock: how a znode is created, what the server reports about
//! it, the session's state and the watch events, shaped like ZooKeeper's own (`CreateMode`,
//! `Stat`, `EventType`) so that both worlds read them the same way.

/// How a znode is created (ZooKeeper's `CreateMode`, the four a lock may use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Lives until deleted; the server appends the parent's next sequence number to the name.
    PersistentSequential,
    /// Deleted by the server when the creating session ends (closed or expired).
    Ephemeral,
    /// Ephemeral, with the parent's next sequence number appended: the lock recipes' node.
    EphemeralSequential,
}

impl CreateMode {
    /// Whether the server deletes the node when its session ends.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// Whether the server appends a sequence number to the name.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// What the server reports about a znode (the fields of ZooKeeper's `Stat` a lock can use; the
/// creation and modification times are left out because they are read from a server's clock,
/// which differs between the worlds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stat {
    /// The zxid of the transaction that created the node: increases with every write of the
    /// ensemble, so a later holder's node always has a larger one (a fencing token).
    pub czxid: i64,
    /// The zxid of the last change of the node's data.
    pub mzxid: i64,
    /// The zxid of the last change of the node's children.
    pub pzxid: i64,
    /// How many times the data changed.
    pub version: i32,
    /// How many times the children changed (the next sequence number a child gets).
    pub cversion: i32,
    /// The session that owns an ephemeral node; 0 for a persistent one.
    pub ephemeral_owner: i64,
    /// The length of the node's data.
    pub data_length: i32,
    /// How many children it has.
    pub num_children: i32,
}

/// The client's view of its session, as a connection-state listener hears it (Curator's names:
/// `CONNECTED`/`RECONNECTED`, `SUSPENDED`, `LOST`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// Connected to a server that knows the session.
    Connected,
    /// Connection loss: nothing heard from the server for two thirds of the session timeout (the
    /// ZooKeeper client's read timeout). The session may still be alive on the servers.
    Suspended,
    /// The session expired (the client learns it when it reconnects): its ephemeral nodes are
    /// gone. The handle is dead; [`ZkClient::reconnect`](super::ZkClient::reconnect) starts a new
    /// session.
    Lost,
}

/// What a one-shot watch reports (ZooKeeper's `EventType`), or a change of the session's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ZkEvent {
    /// A node that an `exists` watch was set on was created.
    NodeCreated(String),
    /// A watched node was deleted.
    NodeDeleted(String),
    /// A watched node's data changed.
    NodeDataChanged(String),
    /// A node whose children were watched gained or lost one.
    NodeChildrenChanged(String),
    /// The session's state changed.
    Session(SessionState),
}
