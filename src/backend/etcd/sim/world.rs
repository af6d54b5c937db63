//! The etcd locks in simulation: the simulated etcd cluster (`etcd_server.rs`) hosts the key
//! space and the leases, clients reach its members over the simulated network
//! (`etcd_conn.rs`), and the scenario's faults act on both (`etcd_nemesis.rs`).
//!
//! - Client pause: the client's node stops, its keep-alive task with it; the leader's expiry
//!   loop revokes its lease once the TTL has passed on the leader's clock, which deletes its lock
//!   key and lets the next waiter in (Jepsen's etcd 3.4.3 finding).
//! - Client crash: the same, for good.
//! - Client partition: its requests and keep-alives get no answer; its lease expires likewise.
//! - Member crash (`crash` of `etcd-<i>`): its clients' requests are refused and go to the next
//!   member; if it led, no request completes until a new leader is elected (an election timeout
//!   and a random part of another), and the new leader extends every lease by an election
//!   timeout: an election alone expires no lease. It restarts after `restart_after_ms` with its
//!   data. With a majority of the members down, nobody leads (the leader steps down, no
//!   election is won) and no request completes: no lease is granted, kept alive or revoked,
//!   no key is written, until a restart gives the cluster a majority again.
//! - Clocks: lease expiry runs on the leader's monotonic clock (jumps of the whole clock and
//!   drift move it; a wall-clock-only jump does not).

use std::time::Duration;

use madsim::runtime::Handle;

use crate::backend::etcd::sim::conn::NetEtcdConn;
use crate::backend::etcd::sim::nemesis::{EtcdDeployment, EtcdNemesis};
use crate::backend::etcd::sim::server::SimEtcd;
use crate::lock::{Lock, LockConfig};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::sim::client_faults::ClientFaults;
use crate::sim::client_nodes::ClientNodes;
use crate::sim::network::Network;
use crate::sim::service_world::ServiceWorld;
use crate::sim::storage::Storage;
use crate::sim::{SimEnv, SimRun};
use crate::world;

/// Runs an etcd scenario with `seed` in simulation, building each client's lock with
/// `make_lock` (on the client's one connection).
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, NetEtcdConn, SimEnv) -> L,
{
    crate::sim::runtime(seed).block_on(simulate(scenario, make_lock))
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, NetEtcdConn, SimEnv) -> L,
{
    let (names, nodes, clocks) = crate::sim::nodes_and_clocks(scenario);
    let spec = &scenario.etcd;
    let net = Network::new(spec.latency_ms);
    let rec = crate::sim::clock::TrueTime::recorder();
    crate::sim::clock::start_clocks(&scenario.clocks, &names, &clocks, &rec);
    let etcd = SimEtcd::new(
        spec.servers as usize,
        spec.min_ttl_s(),
        spec.election_timeout_ms,
        net.clone(),
        clocks.clone(),
        rec.clone(),
    );
    etcd.watch_lock_entries(&scenario.lock.key);
    let handle = Handle::current();
    let server = handle.create_node().name("etcd").build();
    server.spawn(etcd.clone().expiry_loop());

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = EtcdNemesis::new(
        Schedule::new(scenario.faults.clone()),
        EtcdDeployment {
            etcd: etcd.clone(),
            clocks: clocks.clone(),
        },
        ClientFaults::new(rec.clone(), net.clone(), client_nodes.ids(), nodes),
        "etcd",
    );
    nemesis.start();
    let timeout = spec.request_timeout();
    // Each client starts at member `c mod members`, as clients spread over their endpoints.
    let connect = {
        let etcd = etcd.clone();
        move |c: u32, index: usize, _env: &SimEnv| NetEtcdConn::new(etcd.clone(), index, c, timeout)
    };
    let mut world = ServiceWorld {
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage: Storage::new(net.clone()),
        client_nodes,
        first_client: spec.servers as usize,
        connect,
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: etcd.requests(),
    };
    handle.kill(server.id());
    handle.kill(nemesis.madsim_node());
    world.client_nodes.kill();
    run
}
