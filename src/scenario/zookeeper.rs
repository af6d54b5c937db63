//! The scenario side of the ZooKeeper locks: the `[zookeeper]` table, its keys and their
//! defaults. Its checks and the faults a ZooKeeper scenario may have are the ZooKeeper backend's
//! declaration's; its servers' names are in its folder (`backend/zookeeper/table.rs`).

use serde::Deserialize;

pub use crate::__moved::scenario::zookeeper::*;

/// Which server a client of an ensemble is connected to (`[zookeeper] connect`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ZkConnect {
    /// Every request reaches the leader, which answers it (what the simulation always did: the
    /// ensemble seen through its leader).
    #[default]
    Leader,
    /// Client `c` is connected to follower `zookeeper-(1 + c mod 2)` of a three-server
    /// ensemble: the follower forwards writes and session changes to the leader and answers
    /// reads from what it has applied, `follower_lag_ms` behind the leader. On real servers each
    /// client is given only its follower's address.
    Followers,
}

/// `[zookeeper]`: the service the ZooKeeper locks talk to.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperSpec {
    /// 1 (a standalone server) or 3 (an ensemble, which survives a leader failover).
    #[serde(default = "default_servers")]
    pub servers: u32,
    /// The session timeout a client asks for: a client not heard from for this long loses its
    /// session and its ephemeral nodes. ZooKeeper grants it within 2 to 20 ticks.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// ZooKeeper's `tickTime`: sessions expire on the first tick after their timeout.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// One-way latency between a client and the service, uniform in this range (ms; simulation).
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// How long an ensemble has no leader after its leader fails (ms; simulation: a ZooKeeper
    /// 3.8 ensemble on one machine elected a new leader about 0.5 s after its leader was killed).
    #[serde(default = "default_election_ms")]
    pub election_ms: u64,
    /// Which server a client is connected to: `"leader"` (the default) or `"followers"`.
    #[serde(default)]
    pub connect: ZkConnect,
    /// How long after the leader commits a transaction a follower applies it (ms; with
    /// `connect = "followers"`): how far behind the leader the reads a follower answers are. On
    /// real servers the leader's traffic to each follower is delayed by half of it, so a write
    /// commits after one half (a follower's acknowledgement of the late proposal) and reaches
    /// the followers after the other; a write through a follower is answered this long after
    /// it was sent, in both worlds.
    #[serde(default)]
    pub follower_lag_ms: u64,
    /// New sessions are local to their follower (ZooKeeper's `localSessionsEnabled`, with
    /// upgrading): no transaction, so the follower answers them at once; a session becomes global
    /// when it first creates an ephemeral node. Needs `connect = "followers"`.
    #[serde(default)]
    pub local_sessions: bool,
}

fn default_servers() -> u32 {
    1
}
fn default_session_timeout_ms() -> u64 {
    1_000
}
fn default_tick_ms() -> u64 {
    100
}
fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_election_ms() -> u64 {
    500
}

impl Default for ZooKeeperSpec {
    fn default() -> Self {
        ZooKeeperSpec {
            servers: default_servers(),
            session_timeout_ms: default_session_timeout_ms(),
            tick_ms: default_tick_ms(),
            latency_ms: default_latency_ms(),
            election_ms: default_election_ms(),
            connect: ZkConnect::default(),
            follower_lag_ms: 0,
            local_sessions: false,
        }
    }
}
