//! The simulated world of a service whose clients each hold one connection to it (the MySQL,
//! etcd and ZooKeeper locks): clients are madsim nodes numbered after the service's servers,
//! the protected resource lives on the simulated storage node, and the service's own nemesis
//! fires the faults. A backend's simulated world builds its servers and nemesis and hands them
//! here with how a client connects; what every such world does alike is written once.

use std::time::Duration;

use crate::env::PointHook;
use crate::history::Recorder;
use crate::resource::Store;
use crate::sim::client_nodes::ClientNodes;
use crate::sim::clock::Clocks;
use crate::sim::storage::{Storage, StorageConnection};
use crate::sim::SimEnv;
use crate::workload::FaultPoints;
use crate::world::{ClientRun, World};

/// A one-connection service's simulated world ([`World`]); `connect` gives client `c` (at node
/// index `index`, with environment `env`) its connection.
pub struct ServiceWorld<N, F> {
    /// Every node's clock (the service's servers first, then the clients).
    pub clocks: Clocks,
    /// The run's recorder.
    pub rec: Recorder,
    /// The service's nemesis.
    pub nemesis: N,
    /// The node holding the protected resource.
    pub storage: Storage,
    /// The clients' madsim nodes.
    pub client_nodes: ClientNodes,
    /// Client 0's node index (clocks, network): the servers come first.
    pub first_client: usize,
    /// Client `c`'s connection, from its node index and its environment.
    pub connect: F,
}

impl<N, F> ServiceWorld<N, F> {
    /// Client `c`'s node index (clocks, network).
    pub fn index(&self, c: u32) -> usize {
        self.first_client + c as usize
    }
}

impl<N, F, C> World for ServiceWorld<N, F>
where
    N: FaultPoints,
    F: FnMut(u32, usize, &SimEnv) -> C,
{
    type Conns = C;
    type Env = SimEnv;
    type StoreConn = StorageConnection;
    type Nemesis = N;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &N {
        &self.nemesis
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> SimEnv {
        SimEnv::new(self.clocks.clone(), self.index(c)).with_points(points)
    }

    fn connections(&mut self, c: u32, env: &SimEnv) -> C {
        let index = self.index(c);
        (self.connect)(c, index, env)
    }

    fn store(&mut self, id: u64) -> Store<StorageConnection> {
        Store::new(self.storage.connect(id))
    }

    fn spawn_client(&mut self, c: u32, run: ClientRun) {
        self.client_nodes.spawn(c, run);
    }

    async fn wait_clients(&mut self, limit: Duration) {
        self.client_nodes.wait(limit).await;
    }
}
