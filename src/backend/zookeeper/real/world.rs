//! The ZooKeeper locks on real ZooKeeper servers that lockcheck spawns (`super::server`:
//! one standalone server, or a three-server ensemble for `[zookeeper] servers = 3`, on free
//! ports in a temporary directory, never a machine's own ZooKeeper), with the same lock code,
//! workload and checkers as the simulation.
//!
//! The servers are started with the scenario's `tick_ms` as their `tickTime` and ZooKeeper's
//! default session bounds of 2 to 20 ticks (as the simulated service has them), so the session
//! timeout a client asks for is the one it is granted, and it expires on the first tick after it.
//!
//! Every client reaches each server through its own TCP forwarder ([`CutProxy`]), and its session
//! (`backend/zookeeper/real/conn.rs`, over the `zookeeper-client` crate) is given the list of its forwarders.
//! That is how the faults reach a session:
//! - Client partition: the forwarders between the cut clients and servers hold every byte, both
//!   ways. The server hears nothing and expires the session after its timeout; the client hears
//!   nothing and reports SUSPENDED (a connection loss) first.
//! - Client pause: the client stalls at its trigger point (its [`Gate`](crate::real::Gate)
//!   closes), and its forwarders hold every byte meanwhile: the crate pings from a task of its
//!   own, which a gate does not stop, while a paused JVM's pings stop with it. See
//!   `nemesis/zk_nemesis.rs`.
//! - Client crash: its forwarders hold for good, then its task is aborted: its session ends by
//!   timeout, never by a `closeSession`.
//! - A client that is a program (`kind = "client-program"` with `[zookeeper]`, kazoo's `Lock`
//!   for one) is given its forwarders' addresses instead of a session of lockcheck's, and makes
//!   its own session through them: its pause is a `SIGSTOP` with its forwarders held, its crash
//!   a `SIGKILL` behind held forwarders, and a partition holds its forwarders as anyone's.
//! - Crash of `zookeeper-<i>`: `SIGKILL` of the server, and after `restart_after_ms` a start on
//!   the same ports and data directory. Failover of an ensemble: `SIGKILL` of its leader; the
//!   other two elect a new one (in about half a second on one machine) and track every session
//!   afresh. `zookeeper-0` names the server that leads when the run starts, as in simulation.
//! - Followers that answer behind their leader (`[zookeeper] connect = "followers"`,
//!   `follower_lag_ms`, `local_sessions`: CURATOR-604): the ensemble is spawned with
//!   `localSessionsEnabled` and with every quorum link delaying the leader's traffic by half the
//!   lag (`ZooKeeperOptions::peer_delay`), and each client is given only its follower's
//!   forwarder (`zookeeper-1`, `zookeeper-2`, ... in turn), as the simulation connects it.
//!
//! The protected resource lives on a spawned `redis-server`, as in the Redis real mode. Every
//! process and directory is removed when this returns, on error and on panic.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use crate::backend::zookeeper::lock::lock_dir;
use crate::backend::zookeeper::real::nemesis::ZkNemesis;
use crate::backend::zookeeper::real::server::{ZooKeeper, ZooKeeperOptions};
use crate::backend::zookeeper::real::txn_log::{self, WallTie};
use crate::backend::zookeeper::real::RealZkClient;
use crate::env::Env;
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
use crate::scenario::zookeeper::ZkConnect;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::world;

/// How long the servers may take to say which of them leads, once they serve.
const LEADER_WAIT: Duration = Duration::from_secs(20);

/// Runs a ZooKeeper scenario on spawned ZooKeeper servers and returns the history, building each
/// client's lock with `make_lock` (on the client's one session).
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealZkClient, RealEnv) -> L,
{
    run_inner(scenario, seed, Clients::InProcess(make_lock))
}

/// Runs a scenario of client programs (`kind = "client-program"` with `[zookeeper]`) on spawned
/// ZooKeeper servers: each program gets its own forwarders' addresses (`LOCKCHECK_ZK_SERVERS`)
/// and its session timeout (`LOCKCHECK_SESSION_TIMEOUT_MS`), and is stopped (`SIGSTOP`) with its
/// forwarders held for a pause, killed for a crash.
pub fn run_client_programs(scenario: &Scenario, seed: u64) -> Result<History, RealError> {
    run_inner::<ClientProgramLock<RealEnv>, NoBuilder<RealZkClient>>(
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
    F: Fn(LockConfig, RealZkClient, RealEnv) -> L,
{
    real_check(scenario)?;
    // Each client program's clock (libfaketime), decided before anything is spawned.
    let clocks = program_clocks(scenario, seed)?;
    crate::real::install_signal_handlers();
    let spec = &scenario.zookeeper;
    let zk = Arc::new(ZooKeeper::spawn(ZooKeeperOptions {
        servers: spec.servers as usize,
        tick_ms: spec.tick_ms as u32,
        session_timeout_ms: (2 * spec.tick_ms as u32, 20 * spec.tick_ms as u32),
        local_sessions: spec.local_sessions,
        // A follower applies a commit two link delays after the leader proposed it (see
        // `ZooKeeperOptions::peer_delay`): the scenario's lag is that whole time.
        peer_delay: (spec.follower_lag_ms > 0)
            .then(|| Duration::from_millis(spec.follower_lag_ms / 2)),
        ..ZooKeeperOptions::default()
    })?);
    let order = Arc::new(leader_first(&zk)?);
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let history = block_on_runtime(drive(
        scenario,
        zk.clone(),
        order,
        storage.url(),
        clients,
        clocks,
    ));
    drop(storage);
    drop(zk);
    history
}

/// The deployment's servers in the order the scenario names them: the one leading now first
/// (`zookeeper-0`, the leader the simulation starts with), then the others.
fn leader_first(zk: &ZooKeeper) -> Result<Vec<usize>, RealError> {
    let leader = zk
        .leader_within(LEADER_WAIT)
        .ok_or_else(|| RealError::Timeout {
            what: "the spawned ZooKeeper servers to name their leader".into(),
            waited: LEADER_WAIT,
        })?;
    Ok(std::iter::once(leader)
        .chain((0..zk.len()).filter(|&s| s != leader))
        .collect())
}

/// The connect string of a client: `host:port` of its forwarder to each server it may use (one
/// client's forwarders, `proxies`, are in the deployment's order). Every server, unless the
/// scenario connects clients to followers (`[zookeeper] connect = "followers"`): then only the
/// follower the simulation gives it (client `c` to `zookeeper-1`, `zookeeper-2`, ... in turn),
/// so its reads are answered by that follower and a new session is made there.
fn hosts(scenario: &Scenario, order: &[usize], c: usize, proxies: &[CutProxy]) -> String {
    let followers = scenario.zookeeper.connect == ZkConnect::Followers && order.len() > 1;
    let servers: Vec<usize> = if followers {
        vec![order[1 + c % (order.len() - 1)]]
    } else {
        (0..proxies.len()).collect()
    };
    servers
        .iter()
        .map(|&s| format!("127.0.0.1:{}", proxies[s].port()))
        .collect::<Vec<_>>()
        .join(",")
}

/// What a client program on ZooKeeper is given: its forwarders, one per server, in the
/// deployment's order (`LOCKCHECK_ZK_SERVERS`, a ZooKeeper connect string, as every client
/// library takes one); the lock's znode path, which lockcheck's own ZooKeeper lock uses too
/// (`LOCKCHECK_KEY`); and the session timeout the scenario sets (`LOCKCHECK_SESSION_TIMEOUT_MS`:
/// the lock's lease, since its node lives as long as its session).
fn program_env(
    scenario: &Scenario,
    order: &[usize],
    c: usize,
    proxies: &[CutProxy],
    clock: (i64, Option<FakeTime>),
) -> Launch {
    Launch::on_clock(
        vars([
            ("LOCKCHECK_ZK_SERVERS", hosts(scenario, order, c, proxies)),
            ("LOCKCHECK_KEY", lock_dir(&scenario.lock.key)),
            (
                "LOCKCHECK_SESSION_TIMEOUT_MS",
                scenario.zookeeper.session_timeout_ms.to_string(),
            ),
        ]),
        clock,
    )
}

async fn drive<L, F>(
    scenario: &Scenario,
    zk: Arc<ZooKeeper>,
    order: Arc<Vec<usize>>,
    storage_url: String,
    clients: Clients<F>,
    clocks: Vec<(i64, Option<FakeTime>)>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, RealZkClient, RealEnv) -> L,
{
    let ports: Vec<u16> = (0..zk.len()).map(|s| zk.client_port(s)).collect();
    // proxies[c][s]: client c's forwarder to server s.
    let proxies = Arc::new(CutProxy::per_client(scenario.workload.clients, &ports).await?);
    let clients = clients.launch(scenario, || {
        proxies
            .iter()
            .enumerate()
            .map(|(c, p)| program_env(scenario, &order, c, p, clocks[c].clone()))
            .collect()
    })?;
    // True time 0: every server is up and every client program answered.
    let rec = Recorder::real();
    let resumed: Arc<Vec<Arc<AtomicBool>>> = Arc::new(
        (0..scenario.workload.clients)
            .map(|_| Arc::new(AtomicBool::new(false)))
            .collect(),
    );
    // The servers' transaction logs are read once the run is over (`txn_log.rs`), their stamps
    // placed by this tie of the wall clock to the run's.
    let tie = WallTie::now(&rec);
    let deployment = zk.clone();
    let tasks =
        ClientTasks::new(rec.clone(), scenario.workload.clients).with_programs(clients.programs());
    tasks.hold_back_late_starters(scenario);
    let nemesis = ZkNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        scenario: Arc::new(scenario.clone()),
        zk,
        order: order.clone(),
        rec: rec.clone(),
        proxies: proxies.clone(),
        clients: tasks.clone(),
        in_flight: Arc::new(watch::Sender::new(0)),
        resumed: resumed.clone(),
    };
    nemesis.start_timed();
    let session_timeout = Duration::from_millis(scenario.zookeeper.session_timeout_ms);
    // Each client's session lists its own forwarders (the crate picks among them and moves on to
    // another when one fails) and reads time from the client's own clock.
    let scenario2 = scenario.clone();
    let connect = move |c: u32, env: &RealEnv| {
        let env = env.clone();
        RealZkClient::new(
            &hosts(&scenario2, &order, c as usize, &proxies[c as usize]),
            session_timeout,
            Arc::new(move || env.monotonic_ms()),
        )
        .resumed_by(resumed[c as usize].clone())
    };
    let grace = Duration::from_millis(world::estimate::run_grace_ms(scenario));
    let world = (rec.clone(), nemesis, tasks, storage_url);
    run_task_clients(world, scenario, grace, clients, connect).await;
    let dir = lock_dir(&scenario.lock.key);
    if let Err(why) = txn_log::observe(&rec, deployment.dir(), deployment.len(), &dir, tie) {
        eprintln!(
            "note: release and foreign_release are judged without the servers' word (the \
             ZooKeeper transaction logs: {why})"
        );
    }
    Ok(rec.snapshot())
}

/// Whether real mode can run `s` on spawned ZooKeeper servers: every fault has a recipe, and a
/// partition cuts a client's forwarder to a server both ways (`cuts.rs`).
pub fn real_check(s: &Scenario) -> Result<(), RealError> {
    check_consensus(
        s,
        "ZooKeeper servers",
        "ZooKeeper",
        Some(|s, cut| super::cuts::zookeeper_cuts(s, cut).map(drop)),
    )
}
