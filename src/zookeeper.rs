//! ZooKeeper errors with ZooKeeper's own codes (`KeeperException.Code`), so the simulated and the
//! real service can be compared code for code, and a lock reacts to "no node" or "session
//! expired" the same way in both.
//!
//! [`ZkError`] sits below the locks because `lock::LockError::Zk` carries it. The rest of the
//! ZooKeeper seam (the session trait `ZkClient`, the node types, the events) is the ZooKeeper
//! backend's, in its folder (`backend::zookeeper::seam`); its old paths here still resolve.

/// Paths that moved into `crate::backend::zookeeper::seam`, kept for users' code (see `lib.rs`).
pub use crate::__moved::zookeeper::*;

/// A failed ZooKeeper request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZkError {
    /// `NONODE` (-101): the node (or, for a create, its parent) does not exist.
    #[error("no node: {0}")]
    NoNode(String),
    /// `NODEEXISTS` (-110): a node of that name exists.
    #[error("node exists: {0}")]
    NodeExists(String),
    /// `NOTEMPTY` (-111): the node has children.
    #[error("not empty: {0}")]
    NotEmpty(String),
    /// `BADVERSION` (-103): the node's version is not the one given.
    #[error("bad version: {0}")]
    BadVersion(String),
    /// `NOCHILDRENFOREPHEMERALS` (-108): ephemeral nodes have no children.
    #[error("no children for ephemerals: {0}")]
    NoChildrenForEphemerals(String),
    /// `BADARGUMENTS` (-8): an invalid path.
    #[error("bad arguments: {0}")]
    BadArguments(String),
    /// `CONNECTIONLOSS` (-4): no answer from the server; the request may or may not have been
    /// applied, and the session may still be alive.
    #[error("connection loss: {0}")]
    ConnectionLoss(String),
    /// `SESSIONEXPIRED` (-112): the session is gone, and with it its ephemeral nodes.
    #[error("session expired: {0}")]
    SessionExpired(String),
    /// Anything else the client reports (a real client's I/O or protocol error).
    #[error("{0}")]
    Other(String),
}

impl ZkError {
    /// ZooKeeper's numeric code for the error (`KeeperException.Code`); `None` for [`ZkError::Other`].
    pub fn code(&self) -> Option<i32> {
        Some(match self {
            ZkError::NoNode(_) => -101,
            ZkError::NodeExists(_) => -110,
            ZkError::NotEmpty(_) => -111,
            ZkError::BadVersion(_) => -103,
            ZkError::NoChildrenForEphemerals(_) => -108,
            ZkError::BadArguments(_) => -8,
            ZkError::ConnectionLoss(_) => -4,
            ZkError::SessionExpired(_) => -112,
            ZkError::Other(_) => return None,
        })
    }

    /// Whether the outcome of the request is unknown to the client (it may have been applied).
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, ZkError::ConnectionLoss(_))
    }
}

/// The error's path before the ZooKeeper seam moved into its backend's folder.
pub mod error {
    pub use super::ZkError;
}
