//! What can be done to a real Redis Cluster's nodes: crash one (`SIGKILL`), restart it, ask a
//! replica to take over its master (`CLUSTER FAILOVER` and its `FORCE` and `TAKEOVER` forms), and
//! wait until a slot is served by another master.
//!
//! The promotion after a crash is the cluster's own: lockcheck only kills. As Redis documents
//! it, a master unanswered for `cluster-node-timeout` is suspected (`fail?`) by each node that
//! pings it; once a majority of masters' suspicions meet in one node's gossip it is marked
//! `fail` and that is broadcast; its replicas then wait 500 ms + a random 0–500 ms + 1000 ms per
//! rank (the replica with the most replicated data has rank 0) before asking the masters for
//! votes, and the one a majority votes for takes the slots with a new configuration epoch.
//!
//! Network partitions, which need the nodes behind link proxies, are `cluster_partition.rs`'s.

pub use crate::backend::redis::engine::cluster::topology::ManualFailover;
use crate::backend::redis::real::cluster::{ClusterRole, RedisCluster};
use crate::real::RealError;
use std::time::Duration;

impl RedisCluster {
    /// `SIGKILL`s node `node` (a crash: no shutdown, no final write). Whether it was running.
    /// A crashed master's replica is promoted by the cluster itself, not by lockcheck.
    pub fn crash(&self, node: usize) -> bool {
        let server = self.servers.lock().unwrap().remove(&node);
        server.map(|s| s.kill()).is_some()
    }

    /// Starts crashed node `node` again with its `nodes.conf` (its cluster id and last view) and
    /// no data; it rejoins as the cluster now has it. Returns its pid. Does not wait: see
    /// [`RedisCluster::wait_converged`].
    pub fn restart(&self, node: usize) -> Result<u32, RealError> {
        if self.is_running(node) {
            return Err(RealError::InvalidOption {
                what: format!("{} runs: only a crashed node restarts", self.name(node)),
            });
        }
        let server = self.spawn_node(node)?;
        let pid = server.pid();
        self.servers.lock().unwrap().insert(node, server);
        Ok(pid)
    }

    /// Sends `CLUSTER FAILOVER [FORCE|TAKEOVER]` to replica `replica`. Returns once the replica
    /// has accepted it; the switch itself is asynchronous (see
    /// [`RedisCluster::wait_slot_served_by`] and [`RedisCluster::wait_role`]).
    pub fn failover(&self, replica: usize, how: ManualFailover) -> Result<(), RealError> {
        let mut conn = self.control(replica)?;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        match how {
            ManualFailover::Coordinated => {}
            ManualFailover::Force => {
                cmd.arg("FORCE");
            }
            ManualFailover::Takeover => {
                cmd.arg("TAKEOVER");
            }
        }
        cmd.query::<()>(&mut conn).map_err(|e| {
            RealError::redis(
                format!("CLUSTER FAILOVER ({how:?}) on {}", self.name(replica)),
                e,
            )
        })
    }

    /// Waits until node `node` says it has role `role`, or errs after `timeout`.
    pub fn wait_role(
        &self,
        node: usize,
        role: ClusterRole,
        timeout: Duration,
    ) -> Result<(), RealError> {
        self.wait_until(
            timeout,
            &format!("{} to become {role:?}", self.name(node)),
            || match self.role(node) {
                Ok(r) if r == role => Ok(()),
                Ok(r) => Err(format!("it is {r:?}")),
                Err(e) => Err(e.to_string()),
            },
        )
    }

    /// Waits until `slot` is served by a running master other than `old` (in its own word: it
    /// says it is a master and owns the slot), and returns that master; errs after `timeout`
    /// naming who serves it then.
    pub fn wait_slot_served_by_new_master(
        &self,
        slot: u16,
        old: usize,
        timeout: Duration,
    ) -> Result<usize, RealError> {
        self.wait_until(
            timeout,
            &format!(
                "slot {slot} to be served by a master other than {}",
                self.name(old)
            ),
            || match self.master_of_slot(slot) {
                Ok(n) if n != old => Ok(n),
                Ok(n) => Err(format!("still served by {}", self.name(n))),
                Err(e) => Err(e.to_string()),
            },
        )
    }

    /// Waits until `slot` is served by `node` (see [`RedisCluster::master_of_slot`]).
    pub fn wait_slot_served_by(
        &self,
        slot: u16,
        node: usize,
        timeout: Duration,
    ) -> Result<(), RealError> {
        self.wait_until(
            timeout,
            &format!("slot {slot} to be served by {}", self.name(node)),
            || match self.master_of_slot(slot) {
                Ok(n) if n == node => Ok(()),
                Ok(n) => Err(format!("served by {}", self.name(n))),
                Err(e) => Err(e.to_string()),
            },
        )
    }
}
