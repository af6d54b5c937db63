//! `[redis.cluster]`: the scenario's Redis servers form one Redis Cluster instead of independent
//! master groups. The masters (`[redis] masters`, at least 3) share the 16384 hash slots in equal
//! slices, each master's replicas (`[redis] replicas`) follow it, and the cluster fails over by
//! itself: its masters agree a master has failed after `node_timeout_ms` and elect one of its
//! replicas (no `failover` fault, no sentinels). Every client has one cluster-aware connection,
//! which sends a command to the master of its key's slot and follows `MOVED` and `ASK`.
//!
//! ```toml
//! [redis]
//! masters = 3
//! replicas = 1
//!
//! [redis.cluster]
//! node_timeout_ms = 500          # cluster-node-timeout
//! client_retries = 3             # how often a client's request is sent again (redirects too)
//! client_retry_wait_ms = [10, 100] # the wait before resending after TRYAGAIN or CLUSTERDOWN
//! ```
//!
//! The client's policy is redis-rs's cluster client's (`ClusterClientBuilder::retries`,
//! `min_retry_wait`, `max_retry_wait`), which real mode uses and the simulated connection
//! follows: a redirect is followed at once, `TRYAGAIN` and `CLUSTERDOWN` are retried after a
//! wait, and a request with no answer in time is sent again, every one of them counting against
//! `client_retries`; after a request failed on a node the client asks another for the slot map.
//! docs/redis-cluster.md says what the simulated cluster models and what it leaves out.

use crate::scenario::{Invalid, Scenario};
use serde::Deserialize;

/// The scenario table Redis reads itself: `[redis.cluster]`.
pub const PATH: [&str; 2] = ["redis", "cluster"];

/// `[redis.cluster]`, read by the backend itself (`BackendDecl::read_table`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterTable {
    /// `cluster-node-timeout`, ms: how long a node goes unanswered before the others suspect it.
    #[serde(default = "default_node_timeout")]
    pub node_timeout_ms: u64,
    /// How many times a client's request is sent again, for a redirect, a `TRYAGAIN` or
    /// `CLUSTERDOWN`, or no answer in time.
    #[serde(default = "default_retries")]
    pub client_retries: u32,
    /// The wait before a request refused with `TRYAGAIN` or `CLUSTERDOWN` is sent again,
    /// uniform in [low, high] ms.
    #[serde(default = "default_retry_wait")]
    pub client_retry_wait_ms: [u64; 2],
}

fn default_node_timeout() -> u64 {
    500
}
fn default_retries() -> u32 {
    3
}
fn default_retry_wait() -> [u64; 2] {
    [10, 100]
}

impl Default for ClusterTable {
    fn default() -> Self {
        ClusterTable {
            node_timeout_ms: default_node_timeout(),
            client_retries: default_retries(),
            client_retry_wait_ms: default_retry_wait(),
        }
    }
}

/// What the backend keeps from its own table: the cluster, when the scenario has one.
pub type Read = Option<ClusterTable>;

/// The scenario's `[redis.cluster]`, when it has one.
pub fn cluster(s: &Scenario) -> Option<&ClusterTable> {
    s.table::<Read>(PATH[0]).and_then(Option::as_ref)
}

impl ClusterTable {
    /// Reads `[redis.cluster]` as written (`None`: the file has none).
    pub fn read(table: Option<&toml::Value>) -> Result<Read, Invalid> {
        let Some(table) = table else {
            return Ok(None);
        };
        let t: ClusterTable = table
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| (None, format!("`[redis.cluster]`: {}", e.message())))?;
        if t.node_timeout_ms < 100 {
            return Err((
                Some("node_timeout_ms"),
                "`node_timeout_ms` is at least 100 (the cluster bus pings every 100 ms)".into(),
            ));
        }
        let [lo, hi] = t.client_retry_wait_ms;
        if lo > hi || hi > 60_000 {
            return Err((
                Some("client_retry_wait_ms"),
                "`client_retry_wait_ms` is [low, high] with low <= high <= 60000".into(),
            ));
        }
        if t.client_retries > 16 {
            return Err((
                Some("client_retries"),
                "`client_retries` is at most 16 (redis-rs's default)".into(),
            ));
        }
        Ok(Some(t))
    }

    /// The `[redis]` keys a cluster cannot have, checked once the whole scenario is read.
    pub fn check(s: &Scenario) -> Result<(), Invalid> {
        if s.redis.masters < 3 {
            return Err((
                Some("masters"),
                "a Redis Cluster (`[redis.cluster]`) needs `masters` of at least 3: a failover \
                 takes the votes of a majority of masters"
                    .into(),
            ));
        }
        if s.redis.sentinels > 0 {
            return Err((
                Some("sentinels"),
                "a Redis Cluster fails over by itself: drop `sentinels` or `[redis.cluster]`"
                    .into(),
            ));
        }
        Ok(())
    }
}
