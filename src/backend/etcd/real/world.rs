//! The etcd locks on real `etcd` members that lockcheck spawns (`super::server`: one
//! member or a 3-member cluster on free ports in a temporary directory, never a system etcd),
//! with the same lock code, workload and checkers as the simulation.
//!
//! Every client reaches each member through its own TCP forwarder ([`CutProxy`]), which is how a
//! partition is made: while a client is cut off its forwarders hold every byte, so its requests
//! and keep-alives get no answer and its lease expires on the leader.
//! - Client pause: the client stalls at its trigger point (its [`Gate`](crate::real::Gate) closes); its keep-alive
//!   task is gated too, so its lease runs out as a paused process's would.
//! - Client crash: the client's task and its keep-alive are aborted where they stand.
//! - A client that is a program (`kind = "client-program"` with `[etcd]`, npm `etcd3`'s lock for
//!   one) is given its forwarders' URLs and makes its own connections through them: its pause
//!   is a `SIGSTOP` (its library's keep-alives stop with it), its crash a `SIGKILL`, and a
//!   partition holds its forwarders as anyone's.
//! - Crash of `etcd-<i>`: `SIGKILL` of the member, and after `restart_after_ms` a start on the
//!   same ports and data directory. `etcd-0` is made the leader before the run (etcd's
//!   `MoveLeader`), so its crash is a leader failover in both worlds.
//!
//! The protected resource lives on a spawned `redis-server`, as in the Redis real mode. Every
//! process and directory is removed when this returns, on error and on panic.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::etcd::real::nemesis::EtcdNemesis;
use crate::backend::etcd::real::observer::Observer;
use crate::backend::etcd::real::server::{EtcdCluster, EtcdTiming};
use crate::backend::etcd::real::RealEtcdConn;
use crate::history::{History, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::real::client_programs::client_program_launch::{program_clocks, vars, Launch};
use crate::real::client_tasks::{block_on_runtime, run_task_clients, Clients, NoBuilder};
use crate::real::nemesis::client_stops::ClientTasks;
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::nemesis::plan::check_consensus;
use crate::real::servers::faketime::FakeTime;
use crate::real::{ClientProgramLock, RealEnv, RealError};
use crate::real::{RedisServer, ServerOptions};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::world;

/// Runs an etcd scenario on spawned etcd members and returns the history, building each
/// client's lock with `make_lock` (on the client's one connection).
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealEtcdConn, RealEnv) -> L,
{
    run_inner(scenario, seed, Clients::InProcess(make_lock))
}

/// Runs a scenario of client programs (`kind = "client-program"` with `[etcd]`) on spawned etcd
/// members: each program gets its own forwarders' URLs (`LOCKCHECK_ETCD_ENDPOINTS`) and the
/// lease TTL (`LOCKCHECK_TTL_MS`), and is stopped (`SIGSTOP`: its keep-alives stop with it) for
/// a pause, killed for a crash.
pub fn run_client_programs(scenario: &Scenario, seed: u64) -> Result<History, RealError> {
    run_inner::<ClientProgramLock<RealEnv>, NoBuilder<RealEtcdConn>>(
        scenario,
        seed,
        Clients::Programs,
    )
}

fn run_inner<L, F>(
    scenario: &Scenario,
    seed: u64,
    clients: Clients<F>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealEtcdConn, RealEnv) -> L,
{
    real_check(scenario)?;
    // Each client program's clock (libfaketime), decided before anything is spawned.
    let clocks = program_clocks(scenario, seed)?;
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
    let history = block_on_runtime(drive(
        scenario,
        cluster.clone(),
        storage.url(),
        clients,
        clocks,
    ));
    drop(storage);
    drop(cluster);
    history
}

/// What a client program on etcd is given: its forwarders' URLs, one per member, starting at
/// member `first` (`LOCKCHECK_ETCD_ENDPOINTS`, as etcd clients take a list of endpoints); the
/// lock key (`LOCKCHECK_KEY`); the lease TTL (`LOCKCHECK_TTL_MS`, whole seconds, as etcd grants
/// them); and the request timeout (`LOCKCHECK_REQUEST_TIMEOUT_MS`, `[etcd]`'s).
fn program_env(scenario: &Scenario, ports: &[u16], clock: (i64, Option<FakeTime>)) -> Launch {
    let endpoints: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    Launch::on_clock(
        vars([
            ("LOCKCHECK_ETCD_ENDPOINTS", endpoints.join(",")),
            ("LOCKCHECK_KEY", scenario.lock.key.clone()),
            ("LOCKCHECK_TTL_MS", scenario.lock.lease_ms().to_string()),
            (
                "LOCKCHECK_REQUEST_TIMEOUT_MS",
                scenario.etcd.request_timeout_ms.to_string(),
            ),
        ]),
        clock,
    )
}

async fn drive<L, F>(
    scenario: &Scenario,
    cluster: Arc<EtcdCluster>,
    storage_url: String,
    clients: Clients<F>,
    clocks: Vec<(i64, Option<FakeTime>)>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealEtcdConn, RealEnv) -> L,
{
    let timeout = scenario.etcd.request_timeout();
    let members = cluster.len();
    let ports: Vec<u16> = (0..members).map(|m| cluster.client_port(m)).collect();
    // proxies[c][m]: client c's forwarder to member m.
    let proxies = Arc::new(CutProxy::per_client(scenario.workload.clients, &ports).await?);
    // Client c's forwarders, starting at member `c mod members`.
    let ports_of = {
        let proxies = proxies.clone();
        move |c: u32| -> Vec<u16> {
            let first = c as usize % members;
            (0..members)
                .map(|i| proxies[c as usize][(first + i) % members].port())
                .collect()
        }
    };
    let clients = clients.launch(scenario, || {
        (0..scenario.workload.clients)
            .map(|c| program_env(scenario, &ports_of(c), clocks[c as usize].clone()))
            .collect()
    })?;
    // True time 0: every member is up and every client program answered.
    let rec = Recorder::real();
    let tasks =
        ClientTasks::new(rec.clone(), scenario.workload.clients).with_programs(clients.programs());
    tasks.hold_back_late_starters(scenario);
    let nemesis = EtcdNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        cluster: cluster.clone(),
        rec: rec.clone(),
        proxies: proxies.clone(),
        clients: tasks.clone(),
        duration_ms: scenario.duration_ms,
        down_for_good: Arc::new((0..cluster.len()).map(|_| AtomicBool::new(false)).collect()),
    };
    // The lock entries' removals, placed in true time (`observer.rs`): from before any fault.
    let observer = Observer::start(&scenario.lock.key, ports.clone(), rec.clone()).await;
    nemesis.start_timed();
    let connect = move |c: u32, _: &RealEnv| RealEtcdConn::new(ports_of(c), timeout);
    let grace = Duration::from_millis(world::estimate::run_grace_ms(scenario));
    let world = (rec.clone(), nemesis, tasks, storage_url);
    run_task_clients(world, scenario, grace, clients, connect).await;
    let vouched = match observer {
        Some(observer) => observer.finish().await,
        None => Err("no etcd member answered its first read".to_string()),
    };
    if let Err(why) = vouched {
        eprintln!(
            "note: release and foreign_release are judged without the servers' word (the etcd \
             observer: {why})"
        );
    }
    Ok(rec.snapshot())
}

/// Whether real mode can run `s` on spawned etcd members: every fault has a recipe (a partition
/// of clients from members cuts their forwarders, either way).
pub fn real_check(s: &Scenario) -> Result<(), RealError> {
    check_consensus(s, "etcd members", "etcd", None)
}
