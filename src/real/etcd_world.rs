//! The etcd locks on real `etcd` members that lockcheck spawns (`real::servers::etcd`: one
//! member or a 3-member cluster on free ports in a temporary directory, never a system etcd),
//! with the same lock code, workload and checkers as the simulation.
//!
//! Every client reaches each member through its own TCP forwarder ([`CutProxy`]), which is how a
//! partition is made: while a client is cut off its forwarders hold every byte, so its requests
//! and keep-alives get no answer and its lease expires on the leader.
//! - Client pause: the client stalls at its trigger point (its [`Gate`](crate::real::Gate) closes); its keep-alive
//!   task is gated too, so its lease runs out as a paused process's would.
//! - Client crash: the client's task and its keep-alive are aborted where they stand.
//! - Crash of `etcd-<i>`: `SIGKILL` of the member, and after `restart_after_ms` a start on the
//!   same ports and data directory. `etcd-0` is made the leader before the run (etcd's
//!   `MoveLeader`), so its crash is a leader failover in both worlds.
//!
//! The protected resource lives on a spawned `redis-server`, as in the Redis real mode. Every
//! process and directory is removed when this returns, on error and on panic.

use std::sync::Arc;
use std::time::Duration;

use super::client_tasks::{block_on_runtime, TaskWorld};
use super::mysql_world::CutProxy;
use super::nemesis::client_stops::ClientTasks;
use super::nemesis::etcd_nemesis::EtcdNemesis;
use super::nemesis::plan::check_supported;
use super::servers::etcd::{EtcdCluster, EtcdTiming};
use super::{RealEnv, RealError, RealEtcdConn};
use super::{RedisServer, ServerOptions};
use crate::history::{History, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::world;

/// Runs an etcd scenario on spawned etcd members and returns the history, building each
/// client's lock with `make_lock` (on the client's one connection).
pub fn run_with<L, F>(scenario: &Scenario, _seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealEtcdConn, RealEnv) -> L,
{
    check_supported(scenario)?;
    crate::real::install_signal_handlers();
    let spec = &scenario.etcd;
    let cluster = Arc::new(EtcdCluster::spawn(
        spec.servers as usize,
        EtcdTiming {
            heartbeat_ms: spec.heartbeat_ms,
            election_ms: spec.election_timeout_ms,
        },
    )?);
    cluster.make_leader(0)?;
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let history = block_on_runtime(drive(scenario, cluster.clone(), storage.url(), make_lock));
    drop(storage);
    drop(cluster);
    history
}

async fn drive<L, F>(
    scenario: &Scenario,
    cluster: Arc<EtcdCluster>,
    storage_url: String,
    make_lock: F,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealEtcdConn, RealEnv) -> L,
{
    let rec = Recorder::real();
    let timeout = scenario.etcd.request_timeout();
    let members = cluster.len();
    let ports: Vec<u16> = (0..members).map(|m| cluster.client_port(m)).collect();
    // proxies[c][m]: client c's forwarder to member m.
    let proxies = Arc::new(CutProxy::per_client(scenario.workload.clients, &ports).await?);
    let nemesis = EtcdNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        cluster: cluster.clone(),
        rec: rec.clone(),
        proxies: proxies.clone(),
        clients: ClientTasks::new(rec.clone(), scenario.workload.clients),
    };
    nemesis.start_timed();
    // Each client's etcd client over its own forwarders to every member, starting at member
    // `c mod members`.
    let connect = move |c: u32, _: &RealEnv| {
        let first = c as usize % members;
        let ports = (0..members)
            .map(|i| proxies[c as usize][(first + i) % members].port())
            .collect();
        RealEtcdConn::new(ports, timeout)
    };
    let clients = nemesis.clients.clone();
    let mut world = TaskWorld::new(rec.clone(), nemesis, clients, storage_url, connect);
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
    world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    Ok(rec.snapshot())
}
