//! The MySQL locks in simulation: a madsim node hosts the simulated InnoDB subset, clients reach
//! it over the simulated network, and the scenario's faults act on both.
//!
//! - Each statement is a round trip: the request travels for the link's latency, runs on the
//!   engine (a locking read may wait there for a row lock, up to `innodb_lock_wait_timeout`), and
//!   the reply travels back. No answer within the `[database]` request timeout fails the
//!   statement; the client then drops its connection, as `mysql_async` does (and reconnects on
//!   its next statement).
//! - Client pause: the client's node stops; its connection and open transaction stay, so its row
//!   locks stay held. The server closes it only if it stays idle past `wait_timeout`.
//! - Client crash: the node dies, its socket closes, the server rolls its transaction back at
//!   once. A lock row inserted in autocommit stays: it was committed.
//! - Client partition: nothing passes; the server notices nothing until `wait_timeout` closes the
//!   idle session. A client whose statement times out hangs up, but behind the cut the server
//!   does not hear that either.
//! - Server crash (`crash` of `mysql-0`): every session is gone and rolled back, clients hear a
//!   reset at once; committed rows survive (InnoDB recovery); the server answers again after
//!   `restart_after_ms`.
//! - Server pause (`pause` of `mysql-0`, a `SIGSTOP`): its host still takes connections and
//!   bytes, but the server answers nothing and its own timers (lock waits, `wait_timeout`, the
//!   cleanup job) stand still. A statement that arrives is run when the server goes on, even if
//!   its client gave up meanwhile; a client that hangs up is heard only then. On `SIGCONT` the
//!   lock waits whose deadline passed fail with 1205 at once, as on a real MariaDB
//!   (`tests/mysql/server_pause.rs`).

use crate::backend::mysql::lock::DatabaseLock;
use crate::backend::mysql::sim::nemesis::MysqlNemesis;
use crate::backend::mysql::sim::server::{NetSqlConn, SimDb, SERVER_NODE};
use crate::backend::mysql::table::{request_timeout, SERVER};
use crate::backend::mysql::world::{cleanup_pass, prepare};
use crate::history::EventKind;
use crate::lock::LockConfig;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::sim::client_faults::ClientFaults;
use crate::sim::client_nodes::ClientNodes;
use crate::sim::network::Network;
use crate::sim::service_world::ServiceWorld;
use crate::sim::storage::Storage;
use crate::sim::SimEnv;
use crate::sim::SimRun;
use crate::world;
use madsim::runtime::Handle;
use std::time::Duration;

/// Runs a MySQL scenario with `seed` in simulation, building each client's lock with
/// `make_lock` (on the client's one connection); the lock type `L` creates its table first.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, NetSqlConn, SimEnv) -> L,
{
    crate::sim::runtime(seed).block_on(simulate(scenario, make_lock))
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, NetSqlConn, SimEnv) -> L,
{
    let (_, nodes, clocks) = crate::sim::nodes_and_clocks(scenario);
    let net = Network::new(scenario.database.latency_ms);
    let rec = crate::sim::clock::TrueTime::recorder();
    let db = SimDb::new(net.clone(), rec.clone());
    let timeout = request_timeout(scenario);
    let options = scenario.lock.mysql_options();
    let handle = Handle::current();
    // The server's node: its background jobs (wait_timeout, the cleanup job) run there.
    let server_env = SimEnv::new(clocks.clone(), SERVER_NODE);
    let server = handle.create_node().name(SERVER).build();
    db.node.set(server.id()).expect("one server node");
    {
        let mut admin = db.connect(SERVER_NODE, server_env.clone(), timeout);
        let s = scenario.clone();
        server
            .spawn(async move {
                if let Err(e) = prepare::<L, _>(&mut admin, &s).await {
                    panic!("creating the lock table on the simulated server: {e}");
                }
            })
            .await
            .expect("set-up task");
    }
    {
        let db = db.clone();
        let rec = rec.clone();
        let wait_timeout_ms = scenario.database.wait_timeout_s * 1000;
        server.spawn(async move {
            loop {
                madsim::time::sleep(Duration::from_millis(100)).await;
                if db.up() {
                    let n = db.engine.reap_idle(wait_timeout_ms);
                    if n > 0 {
                        rec.record(
                            "nemesis",
                            EventKind::Fault {
                                what: format!(
                                    "{SERVER} closed {n} idle connection(s) (wait_timeout)"
                                ),
                            },
                        );
                    }
                }
            }
        });
    }
    if let Some(cleanup) = options.cleanup {
        let mut conn = db.connect(SERVER_NODE, server_env.clone(), timeout);
        let env = server_env.clone();
        let options = options.clone();
        let rec = rec.clone();
        server.spawn(async move {
            loop {
                madsim::time::sleep(Duration::from_millis(cleanup.interval_ms)).await;
                let now = crate::env::Env::now_ms(&env);
                cleanup_pass(&mut conn, &options, cleanup, now, &rec).await;
            }
        });
    }

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = MysqlNemesis::new(
        Schedule::new(scenario.faults.clone()),
        db.clone(),
        ClientFaults::new(rec.clone(), net.clone(), client_nodes.ids(), nodes)
            .sparing_writes(scenario.pauses_spare_writes()),
        "the MySQL locks",
    );
    nemesis.start();
    let connect = {
        let db = db.clone();
        move |_c: u32, index: usize, env: &SimEnv| db.connect(index, env.clone(), timeout)
    };
    let mut world = ServiceWorld {
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage: Storage::new(net.clone()),
        client_nodes,
        // The server comes first.
        first_client: SERVER_NODE + 1,
        connect,
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let statements = db.statements();
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: statements,
    };
    handle.kill(server.id());
    handle.kill(nemesis.madsim_node());
    world.client_nodes.kill();
    run
}
