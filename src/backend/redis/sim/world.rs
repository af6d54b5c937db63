//! The simulated Redis world: a scenario's Redis deployment (masters, replicas, sentinels), its
//! clients and its faults inside one madsim runtime.
//!
//! Everything runs on madsim's single-threaded, seeded executor: the same scenario and seed give
//! the same interleaving, the same latencies, the same owner tokens and so the same history, byte
//! for byte. Node layout (clock and network indices) follows `Scenario::node_names`: the Redis
//! servers first, then the clients.

use super::cluster::{Cluster, ClusterConfig};
use super::connection::{ClusterClient, SimConnection};
use super::nemesis::SimNemesis;
use super::sentinel;
use crate::env::PointHook;
use crate::history::Recorder;
use crate::lock::{Lock, LockConfig};
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::sim::client_nodes::ClientNodes;
use crate::sim::clock::{self, Clocks};
use crate::sim::network::Network;
use crate::sim::{nodes_and_clocks, runtime, storage, wire, SimEnv, SimRun};
use crate::world;
use madsim::runtime::Handle;
use std::time::Duration;

/// Runs `scenario` with `seed`, building each client's lock with `make_lock` (one connection per
/// master group, in group order). This is how a user tests their own [`Lock`] implementation.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<SimConnection>, SimEnv) -> L,
{
    let rt = runtime(seed);
    wire::reset();
    let run = rt.block_on(simulate(scenario, make_lock));
    wire::reset();
    run
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<SimConnection>, SimEnv) -> L,
{
    let (names, nodes, clocks) = nodes_and_clocks(scenario);
    let net = Network::new(scenario.redis.latency_ms);
    let rec = crate::sim::clock::TrueTime::recorder();
    clock::start_clocks(&scenario.clocks, &names, &clocks, &rec);
    let cluster = Cluster::new(
        &ClusterConfig {
            masters: scenario.redis.masters,
            replicas: scenario.redis.replicas,
            replication_lag_ms: scenario.redis.replication_lag_ms,
        },
        clocks.clone(),
        net.clone(),
        rec.clone(),
    );
    let cluster_table = crate::backend::redis::table::cluster(scenario).cloned();
    if let Some(t) = &cluster_table {
        cluster.enable_redis_cluster(
            scenario.redis.masters as usize,
            scenario.redis.replicas as usize,
            t.node_timeout_ms,
        );
    }
    cluster.start();
    cluster.watch_lock_key(&scenario.lock.key);
    if let Some((_, placed)) = crate::backend::redis::table::placed_keys(scenario) {
        cluster.watch_placed_keys(&placed);
    }
    cluster.set_min_replicas(
        scenario.redis.min_replicas_to_write,
        scenario.redis.min_replicas_max_lag_s,
    );
    let sentinels = (scenario.redis.sentinels > 0).then(|| {
        sentinel::Sentinels::start(
            sentinel::SentinelConfig {
                nodes: (0..scenario.redis.sentinels)
                    .map(|i| nodes[&format!("sentinel-{i}")])
                    .collect(),
                down_after_ms: scenario.redis.down_after_ms,
                quorum: scenario.redis.quorum(),
                failover_timeout_ms: scenario.redis.failover_timeout_ms,
            },
            cluster.clone(),
            net.clone(),
            rec.clone(),
        )
    });
    let servers = cluster.server_count();
    // A cluster client has one connection to the whole cluster (Redlock one per master, its
    // key placed on it); otherwise one per group.
    let groups = match cluster_table {
        Some(_) => crate::backend::redis::table::placed_keys(scenario).map_or(1, |(_, p)| p.len()),
        None => scenario.redis.masters as usize,
    };
    let timeout = Duration::from_millis(scenario.redis.request_timeout_ms);
    let storage = storage::Storage::new(net.clone());

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = SimNemesis::new(
        scenario.faults.clone(),
        cluster.clone(),
        clocks.clone(),
        net.clone(),
        rec.clone(),
        client_nodes.ids(),
        nodes,
        Duration::from_millis(scenario.redis.failover_detect_ms),
        scenario.pauses_spare_writes(),
    );
    nemesis.start();

    let mut world = SimWorld {
        cluster: cluster.clone(),
        net,
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage,
        client_nodes,
        groups,
        servers,
        timeout,
        cluster_client: cluster_table.map(|t| (t.client_retries, t.client_retry_wait_ms)),
        placed: crate::backend::redis::table::placed_keys(scenario),
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, scenario.redis.request_timeout_ms));
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conns, env| {
        make_lock(config, conns, env)
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: cluster.commands(),
    };
    // Expiry sweeps, clock loops and stuck clients are still pending; kill their nodes so the
    // finished run frees them instead of leaking them with the runtime.
    let handle = Handle::current();
    for id in cluster.madsim_nodes() {
        handle.kill(id);
    }
    handle.kill(nemesis.madsim_node());
    if let Some(id) = sentinels {
        handle.kill(id);
    }
    world.client_nodes.kill();
    run
}

/// The simulated Redis world's side of a run ([`world::World`]): clients are madsim nodes, their
/// connections go over the simulated network to the cluster, the protected resource lives on the
/// simulated storage node.
struct SimWorld {
    cluster: Cluster,
    net: Network,
    clocks: Clocks,
    rec: Recorder,
    nemesis: SimNemesis,
    storage: storage::Storage,
    client_nodes: ClientNodes,
    /// Master groups: one connection per group per client.
    groups: usize,
    /// Redis servers come first in the node layout, then the clients.
    servers: usize,
    timeout: Duration,
    /// In a Redis Cluster: each client's retries and retry wait (`[redis.cluster]`).
    cluster_client: Option<(u32, [u64; 2])>,
    /// On a Redis Cluster with a lock of several masters (Redlock): the lock key as each
    /// group's connection sends it, placed on that group's master.
    placed: Option<(String, Vec<String>)>,
}

impl world::World for SimWorld {
    type Conns = Vec<SimConnection>;
    type Env = SimEnv;
    type StoreConn = storage::StorageConnection;
    type Nemesis = SimNemesis;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &SimNemesis {
        &self.nemesis
    }

    fn connections(&mut self, c: u32, _env: &SimEnv) -> Vec<SimConnection> {
        // A client's connections share what it learned of the slots.
        let client = self
            .cluster_client
            .map(|(retries, wait)| ClusterClient::new(retries, wait));
        (0..self.groups)
            .map(|g| {
                let conn = SimConnection::new(
                    self.cluster.clone(),
                    self.net.clone(),
                    self.servers + c as usize,
                    g,
                    c as u64 + 1,
                    self.timeout,
                );
                let conn = match &client {
                    Some(client) => conn.in_cluster(client.clone()),
                    None => conn,
                };
                match &self.placed {
                    Some((key, placed)) => conn.placing_key(key, placed[g].clone()),
                    None => conn,
                }
            })
            .collect()
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> SimEnv {
        SimEnv::new(self.clocks.clone(), self.servers + c as usize).with_points(points)
    }

    fn store(&mut self, id: u64) -> Store<storage::StorageConnection> {
        Store::new(self.storage.connect(id))
    }

    fn spawn_client(&mut self, c: u32, run: world::ClientRun) {
        self.client_nodes.spawn(c, run);
    }

    async fn wait_clients(&mut self, limit: Duration) {
        self.client_nodes.wait(limit).await;
    }
}
