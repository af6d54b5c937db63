//! A committed transaction, as the leader sends it to its followers: what a follower replays, in
//! zxid order, to reach the leader's state (ZooKeeper's `TxnHeader` and the txn records of
//! `CreateTxn`, `DeleteTxn`, `SetDataTxn`, `CreateSessionTxn`, and a `closeSession` header).
//!
//! Only writes that succeeded are transactions: a refused write takes no zxid and changes no
//! follower, and a read is answered by the server the client is connected to, from what that
//! server has applied.

use crate::backend::zookeeper::seam::CreateMode;

/// What one transaction does to the data tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Txn {
    /// A session was created (or a local session upgraded to a global one): nothing changes in
    /// the tree, but a follower answers that session only after it applied this.
    CreateSession(i64),
    /// A session ended (closed, or expired by the leader's session tracker): its ephemeral
    /// nodes go.
    CloseSession(i64),
    /// `create`, as the leader applied it.
    Create {
        /// The creating session (the owner of an ephemeral node).
        owner: i64,
        /// The path as requested (a sequential node's prefix).
        path: String,
        /// The name the leader gave it: a follower replaying the same creation over the same
        /// tree gives the same name.
        name: String,
        /// Its data.
        data: Vec<u8>,
        /// Its mode.
        mode: CreateMode,
    },
    /// `delete`.
    Delete {
        /// The deleted node.
        path: String,
    },
    /// `setData`.
    SetData {
        /// The node.
        path: String,
        /// Its new data.
        data: Vec<u8>,
    },
}

/// A transaction with the zxid the leader gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Its zxid: the order every server applies it in.
    pub zxid: i64,
    /// What it does.
    pub txn: Txn,
}
