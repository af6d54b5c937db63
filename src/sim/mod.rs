//! The simulator: a scenario's Redis deployment, clients and faults inside one madsim runtime.
//!
//! Everything runs on madsim's single-threaded, seeded executor: the same scenario and seed give
//! the same interleaving, the same latencies, the same owner tokens and so the same history, byte
//! for byte. Node layout (clock and network indices) follows `Scenario::node_names`: the Redis
//! servers first, then the clients.

pub mod clock;
pub mod cluster;
pub mod connection;
pub mod nemesis;
pub mod network;
pub mod storage;
pub mod subscription;

use crate::env::{PointHook, SimEnv};
use crate::history::{History, Recorder};
use crate::lock::{AnyLock, Lock, LockConfig};
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::workload::{record_final_state, run_client, ClientPlan, FaultPoints};
use clock::Clocks;
use cluster::{Cluster, ClusterConfig};
pub use connection::SimConnection;
use madsim::runtime::{Handle, Runtime};
use nemesis::SimNemesis;
use network::Network;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a simulated run produced.
#[derive(Clone, Debug)]
pub struct SimRun {
    pub history: History,
    /// The protected counter's final value and the number of writes the storage accepted.
    pub counter: (u64, u64),
    /// Redis commands the servers executed.
    pub commands: u64,
}

/// Runs `scenario` with `seed` using the lock kind the scenario names.
pub fn run(scenario: &Scenario, seed: u64) -> SimRun {
    let kind = scenario.lock.kind;
    if kind.is_mysql() {
        return crate::sql::sim_world::run(scenario, seed);
    }
    run_with(scenario, seed, move |config, conns, env| {
        AnyLock::build(kind, config, conns, env)
    })
}

/// Runs `scenario` with `seed`, building each client's lock with `make_lock` (one connection per
/// master group, in group order). This is how a user tests their own [`Lock`] implementation.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<SimConnection>, SimEnv) -> L,
{
    let mut config = madsim::Config::default();
    // lockcheck carries requests itself; madsim's own network stays unused.
    config.net.packet_loss_rate = 0.0;
    let rt = Runtime::with_seed_and_config(seed, config);
    rt.block_on(simulate(scenario, make_lock))
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<SimConnection>, SimEnv) -> L,
{
    let names = scenario.node_names();
    let nodes: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let clocks = Clocks::new(names.len());
    let net = Network::new(scenario.redis.latency_ms);
    let rec = Recorder::simulated();
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
    cluster.start();
    cluster.watch_lock_key(&scenario.lock.key);
    let servers = cluster.server_count();
    let groups = scenario.redis.masters as usize;
    let timeout = Duration::from_millis(scenario.redis.request_timeout_ms);
    let storage = storage::Storage::new(net.clone());
    let lock_config = LockConfig::from_spec(&scenario.lock);

    let client_nodes: Vec<_> = (0..scenario.workload.clients)
        .map(|c| {
            Handle::current()
                .create_node()
                .name(format!("client-{c}"))
                .build()
        })
        .collect();
    let nemesis = SimNemesis::new(
        scenario.faults.clone(),
        cluster.clone(),
        clocks.clone(),
        net.clone(),
        rec.clone(),
        client_nodes.iter().map(|n| n.id()).collect(),
        nodes,
        Duration::from_millis(scenario.redis.failover_detect_ms),
    );
    nemesis.start();

    let stop_at_us = scenario.duration_ms * 1000;
    let mut handles = Vec::new();
    for (c, node) in client_nodes.iter().enumerate() {
        let index = servers + c;
        let conns = (0..groups)
            .map(|g| {
                SimConnection::new(
                    cluster.clone(),
                    net.clone(),
                    index,
                    g,
                    c as u64 + 1,
                    timeout,
                )
            })
            .collect();
        let points = {
            let nemesis = nemesis.clone();
            let rec = rec.clone();
            let client = c as u32;
            PointHook::new(move |p| {
                let nemesis = nemesis.clone();
                let rec = rec.clone();
                async move {
                    nemesis.reached(client, p).await;
                    // A lock's own points are part of the history: they time its steps.
                    rec.record(
                        &format!("client-{client}"),
                        crate::history::EventKind::Point { name: p.into() },
                    );
                }
            })
        };
        let env = SimEnv::new(clocks.clone(), index).with_points(points);
        let lock = make_lock(lock_config.clone(), conns, env.clone());
        let plan = ClientPlan::for_scenario(scenario, c as u32, stop_at_us);
        handles.push(node.spawn(run_client(
            plan,
            lock,
            env,
            rec.clone(),
            nemesis.clone(),
            Store::new(storage.connect(c as u64 + 1)),
        )));
    }
    // Clients stop starting cycles at `duration_ms`; one that is stuck (paused, waiting) is cut
    // off after a grace period so every run ends.
    let grace = scenario.lock.wait_ms
        + scenario.lock.lease_ms()
        + scenario.workload.hold_ms[1]
        + scenario.workload.think_ms[1]
        + 5_000;
    let all = futures::future::join_all(handles);
    let _ = madsim::time::timeout(Duration::from_millis(scenario.duration_ms + grace), all).await;
    let mut store = Store::new(storage.connect(0));
    record_final_state(scenario.workload.kind, &mut store, &rec).await;
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
    for node in &client_nodes {
        handle.kill(node.id());
    }
    run
}
