//! Control-plane faults: Redis commands that lockcheck sends to its own servers.
//!
//! Each function takes a [`RedisServer`], not a URL, so these commands can only
//! ever reach a server lockcheck started (never the machine's own Redis). All use
//! a synchronous connection with one-second timeouts.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::real::servers::child::info_field;
use crate::real::{RealError, RedisServer};

/// `CLIENT KILL TYPE replica` on `master`: closes the master's side of every
/// replication link and returns how many it closed.
///
/// Why this is part of isolating a replica: `SIGSTOP` alone does not cut the link.
/// The master keeps writing the replication stream into the stopped replica's
/// socket buffer, and the replica applies it after `SIGCONT`, so the "lost" write
/// is not lost. Killing the link on the master side means nothing written after
/// this call reaches the replica (it cannot reconnect while stopped).
pub fn client_kill_replicas(master: &RedisServer) -> Result<u64, RealError> {
    let mut conn = master.control()?;
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut conn)
        .map_err(|e| {
            RealError::redis(
                format!("CLIENT KILL TYPE replica on port {}", master.port()),
                e,
            )
        })
}

/// `REPLICAOF NO ONE` on `replica`: it stops replicating and accepts writes, with
/// whatever data it had received. This is the promotion step of a failover (what
/// Sentinel does after it agrees the master is down).
pub fn promote(replica: &RedisServer) -> Result<(), RealError> {
    let mut conn = replica.control()?;
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query::<()>(&mut conn)
        .map_err(|e| RealError::redis(format!("REPLICAOF NO ONE on port {}", replica.port()), e))
}

/// Waits until `server` reports `role:master` in `INFO replication`.
pub fn wait_role_master(server: &RedisServer, timeout: Duration) -> Result<(), RealError> {
    server.wait_for_info(
        timeout,
        &format!(
            "redis-server on port {} to report role:master",
            server.port()
        ),
        |info| info_field(info, "role") == Some("master"),
    )
}

/// `INFO replication` of `server` as ordered `field -> value` pairs.
pub fn info_replication(server: &RedisServer) -> Result<BTreeMap<String, String>, RealError> {
    let mut conn = server.control()?;
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .map_err(|e| RealError::redis(format!("INFO replication on port {}", server.port()), e))?;
    Ok(info
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}
