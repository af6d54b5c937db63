//! The PostgreSQL locks in simulation: a madsim node hosts the simulated server (`pg-0`, and
//! `pg-1` once promoted), clients reach it over the simulated network, straight or through the
//! simulated PgBouncer, and the scenario's faults act on all of them (`nemesis.rs`).

use crate::backend::postgres::engine::{Key, Settings};
use crate::backend::postgres::lock::advisory_key;
use crate::backend::postgres::sim::bouncer::{BouncerSettings, SimBouncer};
use crate::backend::postgres::sim::conn::NetPgConn;
use crate::backend::postgres::sim::nemesis::{PgDeployment, PgNemesis};
use crate::backend::postgres::sim::server::{SimPg, BOUNCER, PRIMARY, STANDBY};
use crate::backend::postgres::table::of as table;
use crate::backend::postgres::world::{app_client_number, prepare, run_app_transaction};
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
use madsim::runtime::Handle;
use std::collections::BTreeMap;
use std::time::Duration;

/// Runs a PostgreSQL scenario with `seed` in simulation, building each client's lock with
/// `make_lock` (on the client's one connection).
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, NetPgConn, SimEnv) -> L,
{
    crate::sim::runtime(seed).block_on(simulate(scenario, make_lock))
}

async fn simulate<L, F>(scenario: &Scenario, make_lock: F) -> SimRun
where
    L: Lock + 'static,
    F: Fn(LockConfig, NetPgConn, SimEnv) -> L,
{
    let (_, nodes, clocks) = crate::sim::nodes_and_clocks(scenario);
    let t = table(scenario);
    let net = Network::new(t.latency_ms);
    let rec = crate::sim::clock::TrueTime::recorder();
    let primary = nodes[PRIMARY];
    let settings = Settings {
        idle_session_timeout_ms: t.idle_session_timeout_ms,
        idle_in_transaction_timeout_ms: t.idle_in_transaction_timeout_ms,
        ..Settings::default()
    };
    let pg = SimPg::new(
        settings,
        net.clone(),
        rec.clone(),
        (primary, nodes.get(STANDBY).copied()),
        t.keepalive_ms(),
    );
    let handle = Handle::current();
    let server = handle.create_node().name("postgres").build();
    {
        let mut admin = pg.server().connect(SimEnv::new(clocks.clone(), primary));
        server
            .spawn(async move {
                if let Err(e) = prepare(&mut admin).await {
                    panic!("preparing the simulated server: {e}");
                }
            })
            .await
            .expect("set-up task");
    }
    let names: BTreeMap<usize, String> = nodes.iter().map(|(n, i)| (*i, n.clone())).collect();
    server.spawn(pg.clone().housekeeping(names));
    let bouncer = t.pooler.mode().map(|mode| {
        let index = nodes[BOUNCER];
        let node = handle.create_node().name(BOUNCER).build();
        let b = SimBouncer::new(
            pg.clone(),
            index,
            SimEnv::new(clocks.clone(), index),
            BouncerSettings {
                mode,
                pool_size: t.pool_size as usize,
                server_lifetime_ms: t.server_lifetime_ms,
                reset_always: t.server_reset_query_always,
            },
            rec.clone(),
        );
        b.madsim_node.set(node.id()).expect("one pooler node");
        (b, node)
    });
    let timeout = Duration::from_millis(t.request_timeout_ms);
    if let Some((b, node)) = &bouncer {
        // The application's other transactions run beside the pooler: their own few hops are
        // not what they are for, the server connection they keep lent is.
        for (i, window) in t.app_transactions.iter().enumerate() {
            let conn = NetPgConn::pooled(b.clone(), app_client_number(i), b.node, timeout);
            let env = SimEnv::new(clocks.clone(), b.node);
            node.spawn(run_app_transaction(i, *window, conn, env, rec.clone()));
        }
    }

    let client_nodes = ClientNodes::create(scenario.workload.clients);
    let nemesis = PgNemesis::new(
        Schedule::new(scenario.faults.clone()),
        PgDeployment {
            pg: pg.clone(),
            bouncer: bouncer.as_ref().map(|(b, _)| b.clone()),
            key: Key::Big(advisory_key(&scenario.lock.key)),
            failover_detect_ms: t.failover_detect_ms,
        },
        ClientFaults::new(rec.clone(), net.clone(), client_nodes.ids(), nodes.clone()),
        "the PostgreSQL locks",
    );
    nemesis.start();
    let connect = {
        let pg = pg.clone();
        let bouncer = bouncer.as_ref().map(|(b, _)| b.clone());
        move |c: u32, index: usize, env: &SimEnv| match &bouncer {
            Some(b) => NetPgConn::pooled(b.clone(), c, index, timeout),
            None => NetPgConn::direct(pg.clone(), c, index, env.clone(), timeout),
        }
    };
    let mut world = ServiceWorld {
        clocks,
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        storage: Storage::new(net.clone()),
        client_nodes,
        first_client: nodes["client-0"],
        connect,
    };
    let grace = Duration::from_millis(world::grace_ms(scenario, t.request_timeout_ms));
    let mut store = world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    let counter = store.totals().await.unwrap_or((0, 0));
    let run = SimRun {
        history: rec.take(),
        counter,
        commands: pg.statements(),
    };
    handle.kill(server.id());
    if let Some((_, node)) = &bouncer {
        handle.kill(node.id());
    }
    handle.kill(nemesis.madsim_node());
    world.client_nodes.kill();
    run
}
