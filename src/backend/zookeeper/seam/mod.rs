//! The ZooKeeper seam: what a ZooKeeper lock recipe needs from a client session, and the nodes,
//! events and errors it sees.
//!
//! A ZooKeeper lock (Apache Curator's `InterProcessMutex`, kazoo's `Lock`: an
//! `EPHEMERAL_SEQUENTIAL` znode under the lock's path, the lowest sequence number holds, every
//! other waiter watches its immediate predecessor with `exists`) is written against [`ZkClient`]
//! only, the way a MySQL lock is written against `sql::SqlConn`. Each world supplies its side:
//! the simulated world a session on the simulated ZooKeeper (`backend/zookeeper/engine/`), real
//! mode a session on a ZooKeeper server lockcheck spawns.
//!
//! The requests and answers are here (the node types in `types.rs`); the error,
//! [`ZkError`], is `lockcheck::zookeeper`'s, below the locks, because `LockError::Zk` carries it.
//!
//! The seam keeps ZooKeeper's two kinds of trouble apart, because the recipes differ exactly
//! there: a **connection loss** ([`SessionState::Suspended`], [`ZkError::ConnectionLoss`]) says
//! only that the client has not heard from its server for a while, and the session (with its
//! ephemeral znodes) may well be alive; a **session expiry** ([`SessionState::Lost`],
//! [`ZkError::SessionExpired`]) says the server has deleted every ephemeral znode of the
//! session. A client learns of an expiry only when it reaches a server again: cut off, it sees
//! `Suspended` and nothing more while the server expires its session (the window of
//! CURATOR-206).

pub mod types;

pub use crate::zookeeper::ZkError;
pub use types::{CreateMode, SessionState, Stat, ZkEvent};

use std::future::Future;

/// One ZooKeeper client session, as a lock uses it.
///
/// Every method returns a `Send` future so a lock can run in tokio tasks and in madsim nodes.
/// A request made while the connection is lost fails with [`ZkError::ConnectionLoss`] (and may
/// or may not have been applied); one made after the session expired fails with
/// [`ZkError::SessionExpired`].
pub trait ZkClient: Send {
    /// Creates `path` (for a sequential mode, `path` followed by a ten-digit sequence number)
    /// and returns the name the server gave it, with its `Stat`.
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = Result<(String, Stat), ZkError>> + Send;

    /// Deletes `path` if its data version is `version` (`None`: any version).
    fn delete(
        &mut self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = Result<(), ZkError>> + Send;

    /// The node's `Stat`, or `None` if it does not exist; with `watch`, a one-shot watch on the
    /// path fires [`ZkEvent::NodeCreated`], `NodeDeleted` or `NodeDataChanged`.
    fn exists(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Option<Stat>, ZkError>> + Send;

    /// The node's data and `Stat`; with `watch`, a one-shot watch on its data.
    fn get_data(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat), ZkError>> + Send;

    /// The names of the node's children, sorted; with `watch`, a one-shot watch on its children.
    fn get_children(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Vec<String>, ZkError>> + Send;

    /// Waits for the next watch event or change of session state (in the order the server sent
    /// them), at most `timeout_ms`; `None` when the time is up.
    fn next_event(&mut self, timeout_ms: u64) -> impl Future<Output = Option<ZkEvent>> + Send;

    /// The session's state as the client knows it now.
    fn state(&self) -> SessionState;

    /// The session id the server gave this session (0 before the first connection).
    fn session_id(&self) -> i64;

    /// The session timeout the server granted (0 before the first connection).
    fn session_timeout_ms(&self) -> u64;

    /// The client's monotonic clock when it last heard from its server: the client reports
    /// [`SessionState::Suspended`] two thirds of the session timeout after it.
    fn last_heard_ms(&self) -> u64;

    /// After [`SessionState::Lost`]: starts a new session (what Curator does on its own with a
    /// new ZooKeeper handle). The old session's nodes may still be visible for a moment on a
    /// server that has not yet applied the expiry (CURATOR-604).
    fn reconnect(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send;

    /// Ends the session: the server deletes its ephemeral nodes at once.
    fn close(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send;
}

/// How long a ZooKeeper client waits with nothing sent before it pings, for a session of
/// `session_timeout_ms`: the Java client's `ClientCnxn` pings once the time since it last sent
/// anything reaches half its read timeout (`readTimeout = sessionTimeout * 2 / 3`), less 1 s once
/// that idle time is over 1 s. So a client busy sending requests does not ping, and the last
/// touch a server has of a session that stops is its last request or the idle ping after it.
pub fn ping_after_idle_ms(session_timeout_ms: u64) -> u64 {
    let half_read = session_timeout_ms / 3;
    if half_read <= 1000 {
        half_read.max(1)
    } else {
        half_read.saturating_sub(1000).max(1000)
    }
}

/// The sequence number at the end of a sequential node's name (its last ten digits).
pub fn sequence_of(name: &str) -> Option<u64> {
    let digits = name.get(name.len().checked_sub(10)?..)?;
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_pings_after_a_third_of_its_session_timeout_idle_less_a_second_past_one() {
        assert_eq!(ping_after_idle_ms(2000), 666);
        assert_eq!(ping_after_idle_ms(3000), 1000);
        assert_eq!(ping_after_idle_ms(4500), 1000);
        assert_eq!(ping_after_idle_ms(9000), 2000);
        assert_eq!(ping_after_idle_ms(2), 1);
    }

    #[test]
    fn the_sequence_number_is_the_last_ten_digits() {
        assert_eq!(sequence_of("lock-0000000012"), Some(12));
        assert_eq!(
            sequence_of("/lock/_c_abc-lock-2147483647"),
            Some(2_147_483_647)
        );
        assert_eq!(sequence_of("lock-12"), None);
        assert_eq!(sequence_of("lock-00000000x2"), None);
    }
}
