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

use super::client_tasks::wait_for_live_clients;
use super::mysql_world::CutProxy;
use super::nemesis::client_stops::ClientTasks;
use super::nemesis::etcd_nemesis::EtcdNemesis;
use super::nemesis::plan::check_supported;
use super::servers::etcd::{EtcdCluster, EtcdTiming};
use super::{ConnectionTimeouts, RedisServer, Route, RoutedConnection, ServerOptions};
use super::{RealEnv, RealError, RealEtcdConn};
use crate::env::PointHook;
use crate::history::{History, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::resource::Store;
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))?;
    let history = rt.block_on(drive(scenario, cluster.clone(), storage.url(), make_lock));
    rt.shutdown_timeout(Duration::from_secs(2));
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
    // proxies[c][m]: client c's forwarder to member m.
    let mut proxies = Vec::new();
    for _ in 0..scenario.workload.clients {
        let mut mine = Vec::new();
        for m in 0..members {
            mine.push(
                CutProxy::start(cluster.client_port(m))
                    .await
                    .map_err(|e| RealError::io("starting a client's forwarder", e))?,
            );
        }
        proxies.push(mine);
    }
    let nemesis = EtcdNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        cluster: cluster.clone(),
        rec: rec.clone(),
        proxies: Arc::new(proxies),
        clients: ClientTasks::new(rec.clone(), scenario.workload.clients),
    };
    nemesis.start_timed();
    let mut world = EtcdRealWorld {
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        members,
        timeout,
        storage: Route::new(storage_url),
        timeouts: ConnectionTimeouts {
            connect: Duration::from_secs(2),
            response: Duration::from_secs(2),
        },
        tasks: Vec::new(),
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
    world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    Ok(rec.snapshot())
}

/// The real etcd world's side of a run ([`world::World`]): clients are tokio tasks, each with
/// one etcd client over its own forwarders to every member (starting at member `c mod members`);
/// the protected resource lives on a spawned `redis-server`.
struct EtcdRealWorld {
    rec: Recorder,
    nemesis: EtcdNemesis,
    members: usize,
    timeout: Duration,
    storage: Arc<Route>,
    timeouts: ConnectionTimeouts,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl world::World for EtcdRealWorld {
    type Conns = RealEtcdConn;
    type Env = RealEnv;
    type StoreConn = RoutedConnection;
    type Nemesis = EtcdNemesis;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &EtcdNemesis {
        &self.nemesis
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> RealEnv {
        RealEnv::default()
            .with_gate(self.nemesis.clients.gates[c as usize].clone())
            .with_points(points)
    }

    fn connections(&mut self, c: u32, _env: &RealEnv) -> RealEtcdConn {
        let first = c as usize % self.members;
        let ports = (0..self.members)
            .map(|i| self.nemesis.proxies[c as usize][(first + i) % self.members].port())
            .collect();
        RealEtcdConn::new(ports, self.timeout)
    }

    fn store(&mut self, _id: u64) -> Store<RoutedConnection> {
        Store::new(RoutedConnection::new(self.storage.clone(), self.timeouts))
    }

    fn spawn_client(&mut self, _c: u32, run: world::ClientRun) {
        let task = tokio::spawn(run);
        self.nemesis
            .clients
            .tasks
            .lock()
            .unwrap()
            .push(task.abort_handle());
        self.tasks.push(task);
    }

    /// Crashed clients never finish: stop waiting once every live one has; then stop the rest.
    async fn wait_clients(&mut self, limit: Duration) {
        wait_for_live_clients(&self.tasks, &self.nemesis.clients.gates, limit).await;
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Lets a member restart in progress finish before the history is read.
    async fn settle(&self) {
        self.nemesis.settle().await;
    }
}
