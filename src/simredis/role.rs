//! Who is asking and as what: a connection's [`ClientId`] and the node's [`Role`].
//!
//! Why a file of its own: the engine, the command context (which addresses pub/sub messages
//! to clients), the script host (which refuses writes on a replica), FUNCTION, CLIENT/HELLO,
//! WATCH and pub/sub all name these two types. Kept here, below all of them, every one of
//! those files imports it and none has to import the engine. The public paths are
//! `simredis::{ClientId, Role}` and `simredis::engine::{ClientId, Role}` (re-exports).

/// A connection's identity, chosen by the node layer.
pub type ClientId = u64;

/// Whether this node is a master or a replica; decides who may write and who expires keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Takes writes and expires keys on its own clock, sending the deletions to its replicas.
    Master,
    /// Refuses client writes (`READONLY`), applies its master's effects, and never expires a key
    /// itself: a read of an expired key answers nil but leaves the key for the master's DEL.
    Replica,
}
