//! The ZooKeeper locks in simulation: madsim nodes host the simulated ZooKeeper service
//! (`zk_server.rs`), each client has one session to it over the simulated network
//! (`zk_conn.rs`), and the scenario's faults act on both (`zk_nemesis.rs`).
//!
//! - Each request is a round trip: the request travels for the link's latency, is applied by the
//!   service on its leader's clock, and the reply travels back; no answer within the client's
//!   read timeout (two thirds of the session timeout) fails it with `CONNECTIONLOSS`.
//! - Client pause: the client's node stops, its pings too; the service expires its session one
//!   session timeout (rounded up to a tick) after it last heard from it, and deletes its lock
//!   node. The client learns of it only when it runs again and reaches the service.
//! - Client partition: the same for the service; the client's own timers run, so it reports
//!   SUSPENDED after its read timeout, before the service expires the session.
//! - Client crash: its node dies; its session expires after the timeout (ZooKeeper ends a session
//!   only on `close` or by timeout, not when a socket closes).
//! - Server crash and restart (`crash` of `zookeeper-<i>`), leader failover of an ensemble: see
//!   `zk_nemesis.rs`.

use crate::backend::zookeeper::engine::ZkConfig;
use crate::backend::zookeeper::sim::conn::SimZkClient;
use crate::backend::zookeeper::sim::nemesis::{ZkDeployment, ZkNemesis};
use crate::backend::zookeeper::sim::server::{Reads, SimZk};
use crate::lock::{Lock, LockConfig};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::sim::client_faults::ClientFaults;
use crate::sim::client_nodes::ClientNodes;
use crate::sim::service_world::ServiceWorld;
use crate::sim::storage::Storage;
use crate::sim::SimEnv;
use crate::sim::SimRun;
use crate::world;
use madsim::runtime::Handle;
use std::time::Duration;

/// Runs a ZooKeeper scenario with `seed` in simulation, building each client's lock with
/// `make_lock` (on the client's one session).
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, SimZkClient, SimEnv) -> L,
{
    crate::sim::runtime(seed).block_on(simulate(scenario, make_lock))
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, SimZkClient, SimEnv) -> L,
{
    let (_, nodes, clocks) = crate::sim::nodes_and_clocks(scenario);
    let z = &scenario.zookeeper;
    let net = crate::sim::network::Network::new(z.latency_ms);
    let rec = crate::sim::clock::TrueTime::recorder();
    // The timeouts a spawned server accepts too (`backend/zookeeper/real/server.rs`): ZooKeeper's
    // defaults of 2 to 20 ticks.
    let config = ZkConfig::with_tick(z.tick_ms);
    let reads = Reads {
        via_followers: z.connect == crate::scenario::zookeeper::ZkConnect::Followers,
        lag: Duration::from_millis(z.follower_lag_ms),
        local_sessions: z.local_sessions,
    };
    let zk = SimZk::new(
        config,
        net.clone(),
        clocks.clone(),
        rec.clone(),
        z.servers,
        reads,
    );
    zk.watch_lock_entries(&crate::backend::zookeeper::lock::lock_dir(
        &scenario.lock.key,
    ));
    let handle = Handle::current();
    // The service's node: its session tracker and its outgoing watch events run there.
    let service = handle.create_node().name("zookeeper").build();
    zk.node.set(service.id()).expect("one service node");
    service.spawn(zk.clone().track_sessions());

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = ZkNemesis::new(
        Schedule::new(scenario.faults.clone()),
        ZkDeployment {
            zk: zk.clone(),
            clocks: clocks.clone(),
            election: Duration::from_millis(z.election_ms),
        },
        ClientFaults::new(rec.clone(), net.clone(), client_nodes.ids(), nodes),
        "the ZooKeeper locks",
    );
    nemesis.start();
    let connect = {
        let zk = zk.clone();
        let session_timeout_ms = z.session_timeout_ms;
        move |c: u32, index: usize, env: &SimEnv| {
            zk.client(index, zk.server_of(c), env.clone(), session_timeout_ms)
        }
    };
    let mut world = ServiceWorld {
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage: Storage::new(net.clone()),
        client_nodes,
        first_client: z.servers as usize,
        connect,
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, z.session_timeout_ms));
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: zk.requests(),
    };
    handle.kill(service.id());
    handle.kill(nemesis.madsim_node());
    world.client_nodes.kill();
    run
}
