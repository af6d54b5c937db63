//! The PostgreSQL locks on real servers: lockcheck spawns `postgres` (and a streaming standby,
//! and `pgbouncer` in front, as the scenario says), gives each client its own forwarders, and
//! runs the clients as tokio tasks (or client programs, any language) while the nemesis acts
//! on the processes (`nemesis.rs`). The protected resource lives on a spawned `redis-server`, as
//! for every backend.

use crate::backend::postgres::lock::advisory_key;
use crate::backend::postgres::real::nemesis::PgRealNemesis;
use crate::backend::postgres::real::route::PgRoute;
use crate::backend::postgres::real::{
    BouncerSettings, PgBouncer, Postgres, RealPgConn, ServerSettings,
};
use crate::backend::postgres::table::{of as table, Pooler, BOUNCER, PRIMARY, STANDBY};
use crate::backend::postgres::world::{prepare, run_app_transaction};
use crate::fault::{ClientRef, FaultKind, Trigger};
use crate::history::{EventKind, History, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::real::client_programs::client_program_launch::{program_clocks, Launch};
use crate::real::client_tasks::{block_on_runtime, run_task_clients, Clients, NoBuilder};
use crate::real::nemesis::client_stops::ClientTasks;
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::nemesis::plan::program_clocks_only;
use crate::real::servers::faketime::FakeTime;
use crate::real::{ClientProgramLock, RealEnv, RealError, RedisServer, ServerOptions};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::world;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

/// Runs a PostgreSQL scenario on spawned servers, building each client's lock with `make_lock`.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, PgRoute, RealEnv) -> L,
{
    run_inner(scenario, seed, Clients::InProcess(make_lock))
}

/// Runs a scenario of client programs (`kind = "client-program"` with `[postgres]`): each
/// program gets the connection string of its own forwarder (`LOCKCHECK_POSTGRES_URL`).
pub fn run_client_programs(scenario: &Scenario, seed: u64) -> Result<History, RealError> {
    run_inner::<ClientProgramLock<RealEnv>, NoBuilder<PgRoute>>(scenario, seed, Clients::Programs)
}

fn run_inner<L, F>(
    scenario: &Scenario,
    seed: u64,
    clients: Clients<F>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, PgRoute, RealEnv) -> L,
{
    real_check(scenario)?;
    // Each client program's clock (libfaketime), decided before anything is spawned.
    let clocks = program_clocks(scenario, seed)?;
    crate::real::install_signal_handlers();
    let t = table(scenario);
    let settings = ServerSettings {
        idle_session_timeout_ms: t.idle_session_timeout_ms,
        idle_in_transaction_session_timeout_ms: t.idle_in_transaction_timeout_ms,
        tcp_keepalives_idle_s: t.keepalive_idle_s as u32,
        tcp_keepalives_interval_s: t.keepalive_interval_s as u32,
        tcp_keepalives_count: t.keepalive_count as u32,
        ..ServerSettings::default()
    };
    let mut servers = vec![Postgres::spawn(&settings)?];
    if t.standby {
        let standby = Postgres::spawn_standby(&servers[0])?;
        servers.push(standby);
    }
    let bouncer = match t.pooler.mode() {
        Some(pool_mode) => Some(PgBouncer::spawn(
            &servers[0],
            &BouncerSettings {
                pool_mode,
                default_pool_size: t.pool_size,
                server_lifetime_s: t.server_lifetime_ms.div_ceil(1000).max(1) as u32,
                server_reset_query_always: t.server_reset_query_always,
                ..BouncerSettings::default()
            },
        )?),
        None => None,
    };
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let servers = Arc::new(servers);
    let history = block_on_runtime(drive(
        scenario,
        servers.clone(),
        bouncer.as_ref().map(|b| b.port()),
        storage.url(),
        clients,
        clocks,
    ));
    drop(storage);
    drop(bouncer);
    drop(servers);
    history
}

/// A conninfo for a forwarder on `port`, as client `c` (its `application_name`).
fn conninfo(port: u16, c: u32) -> String {
    format!(
        "host=127.0.0.1 port={port} user=postgres dbname=lockcheck application_name=lockcheck-client-{c}"
    )
}

async fn drive<L, F>(
    scenario: &Scenario,
    servers: Arc<Vec<Postgres>>,
    bouncer_port: Option<u16>,
    storage_url: String,
    clients: Clients<F>,
    clocks: Vec<(i64, Option<FakeTime>)>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, PgRoute, RealEnv) -> L,
{
    let t = table(scenario);
    let timeout = Duration::from_millis(t.request_timeout_ms);
    {
        let mut admin = RealPgConn::connect(&servers[0].conninfo(), Duration::from_secs(10))
            .await
            .map_err(|e| {
                RealError::Unsupported(format!("connecting to the spawned postgres: {e}"))
            })?;
        prepare(&mut admin)
            .await
            .map_err(|e| RealError::Unsupported(format!("preparing the spawned postgres: {e}")))?;
    }
    // Each client's endpoints: the pooler (or the primary), then the standby.
    let mut endpoints = vec![bouncer_port.unwrap_or(servers[0].port())];
    if servers.len() > 1 {
        endpoints.push(servers[1].port());
    }
    let proxies = Arc::new(CutProxy::per_client(scenario.workload.clients, &endpoints).await?);
    let primary = Arc::new(AtomicUsize::new(0));
    let clients = clients.launch(scenario, || {
        (0..scenario.workload.clients)
            .map(|c| {
                Launch::on_clock(
                    vec![
                        (
                            "LOCKCHECK_POSTGRES_URL".to_string(),
                            conninfo(proxies[c as usize][0].port(), c),
                        ),
                        ("LOCKCHECK_KEY".to_string(), scenario.lock.key.clone()),
                        (
                            "LOCKCHECK_ADVISORY_KEY".to_string(),
                            advisory_key(&scenario.lock.key).to_string(),
                        ),
                    ],
                    clocks[c as usize].clone(),
                )
            })
            .collect()
    })?;
    let rec = Recorder::real();
    let tasks =
        ClientTasks::new(rec.clone(), scenario.workload.clients).with_programs(clients.programs());
    tasks.hold_back_late_starters(scenario);
    let nemesis = PgRealNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        rec: rec.clone(),
        servers,
        primary: primary.clone(),
        proxies: proxies.clone(),
        clients: tasks.clone(),
        key: advisory_key(&scenario.lock.key),
        failover_detect_ms: t.failover_detect_ms,
        busy: Arc::new(AtomicBool::new(false)),
        duration_ms: scenario.duration_ms,
    };
    nemesis.start_timed();
    if let Some(port) = bouncer_port {
        for (i, window) in t.app_transactions.iter().enumerate() {
            let (rec, window) = (rec.clone(), *window);
            let info = format!(
                "host=127.0.0.1 port={port} user=postgres dbname=lockcheck application_name=lockcheck-app-{}",
                i + 1
            );
            tokio::spawn(async move {
                match RealPgConn::connect(&info, timeout).await {
                    Ok(conn) => run_app_transaction(i, window, conn, RealEnv::default(), rec).await,
                    Err(e) => rec.record(
                        "nemesis",
                        EventKind::Fault {
                            what: format!(
                                "application transaction {} could not connect to pgbouncer: {e}",
                                i + 1
                            ),
                        },
                    ),
                }
            });
        }
    }
    let connect = move |c: u32, _: &RealEnv| {
        let targets = proxies[c as usize]
            .iter()
            .map(|p| conninfo(p.port(), c))
            .collect();
        PgRoute::new(targets, primary.clone(), timeout)
    };
    let grace = Duration::from_millis(world::estimate::run_grace_ms(scenario));
    let world = (rec.clone(), nemesis, tasks, storage_url);
    run_task_clients(world, scenario, grace, clients, connect).await;
    Ok(rec.snapshot())
}

/// Whether real mode can run `s` on spawned servers: every fault has a recipe. Client pauses
/// and crashes fire at a client's point (`on = ...`); partitions cut clients' forwarders;
/// PgBouncer's crash and a failover behind PgBouncer have none yet (it would have to be
/// respawned on its port, or repointed at the promoted standby).
pub fn real_check(s: &Scenario) -> Result<(), RealError> {
    program_clocks_only(s, "the PostgreSQL servers")?;
    let t = table(s);
    for f in &s.faults {
        let refuse = |why: &str| {
            Err(RealError::Unsupported(format!(
                "fault {} has no real-mode recipe for the PostgreSQL locks: {why}; run it in simulation",
                crate::fault::fault_table(f).into_inline_table()
            )))
        };
        match &f.kind {
            // A named client's pause at 0 is a late start: it is held back before its task runs.
            FaultKind::Pause {
                client: ClientRef::Index(_),
                ..
            } if f.trigger == Trigger::At(0) => {}
            FaultKind::Pause { .. } | FaultKind::ClientCrash { .. }
                if matches!(f.trigger, Trigger::At(_)) =>
            {
                return refuse("a client pause or crash fires at a client's point (`on = ...`), or at `at_ms = 0` for a named client's late start")
            }
            FaultKind::Crash { node, .. } if node == BOUNCER => {
                return refuse("PgBouncer's crash is simulated only")
            }
            FaultKind::Failover { .. } if t.pooler != Pooler::None => {
                return refuse("a failover behind PgBouncer is simulated only")
            }
            FaultKind::Partition { nodes, from, .. } => {
                let servers = [PRIMARY, STANDBY, BOUNCER];
                let both_servers = nodes.iter().any(|n| servers.contains(&n.as_str()))
                    && from.iter().any(|n| servers.contains(&n.as_str()));
                if both_servers {
                    return refuse("a cut between servers is simulated only (real mode cuts clients' forwarders)");
                }
            }
            _ => {}
        }
    }
    Ok(())
}
