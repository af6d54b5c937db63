//! The clients of a simulated run, one madsim node each: both simulated worlds (Redis and the
//! MySQL locks' database) create, run, wait for and free their clients this way.
//!
//! A client is a node of its own so that the nemesis can pause it (a stop-the-world GC pause
//! stops every task of the node) or kill it (a crash), exactly as madsim does to a server.

use crate::world::ClientRun;
use madsim::runtime::{Handle, NodeHandle};
use madsim::task::{JoinHandle, NodeId};
use std::time::Duration;

/// Each client's node and, once spawned, its run.
pub struct ClientNodes {
    nodes: Vec<NodeHandle>,
    runs: Vec<JoinHandle<()>>,
}

impl ClientNodes {
    /// Creates the nodes `client-0` … `client-<n-1>`. Node creation takes madsim ids in order, so
    /// a world creates them at a fixed point of its set-up (that order is part of the trace).
    pub fn create(clients: u32) -> ClientNodes {
        let handle = Handle::current();
        ClientNodes {
            nodes: (0..clients)
                .map(|c| handle.create_node().name(format!("client-{c}")).build())
                .collect(),
            runs: Vec::new(),
        }
    }

    /// The madsim node of each client, by client index: what the nemesis pauses and kills.
    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.iter().map(|n| n.id()).collect()
    }

    /// Starts client `c`'s run on its node.
    pub fn spawn(&mut self, c: u32, run: ClientRun) {
        self.runs.push(self.nodes[c as usize].spawn(run));
    }

    /// Waits for every run to finish, at most `limit` (a paused or stuck client may never).
    pub async fn wait(&mut self, limit: Duration) {
        let all = futures::future::join_all(std::mem::take(&mut self.runs));
        let _ = madsim::time::timeout(limit, all).await;
    }

    /// Kills every client node, so a finished run frees its stuck clients' tasks and timers
    /// instead of leaking them with the runtime.
    pub fn kill(&self) {
        let handle = Handle::current();
        for node in &self.nodes {
            handle.kill(node.id());
        }
    }
}
