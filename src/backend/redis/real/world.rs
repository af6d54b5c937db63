//! Real mode: the scenario's lock and workload on `redis-server` processes lockcheck spawns.
//!
//! The lock code, the workload and the checkers are the ones the simulator uses; only the two
//! seams change (a [`RoutedConnection`] and [`RealEnv`]). This file assembles a run: it checks
//! the plan (`plan.rs`), spawns the servers, starts the clients and lets the nemesis
//! (`nemesis.rs`) fault them.
//!
//! The protected resource lives on a separate `redis-server` (the storage), not on the lock's.
//!
//! Every process is killed when this returns, on error, on panic and on Ctrl-C.

use crate::backend::redis::lock::redisson;
use crate::backend::redis::real::blackhole::BlackHole;
use crate::backend::redis::real::cluster_world;
use crate::backend::redis::real::external::{self, ExternalRedis};
use crate::backend::redis::real::failover::FailoverRig;
use crate::backend::redis::real::master_finder::MasterFinder;
use crate::backend::redis::real::nemesis::{Group, RealNemesis};
use crate::backend::redis::real::network::Network;
use crate::backend::redis::real::plan::{check_redis, server_clocks};
use crate::backend::redis::real::sentinel_deployment::{
    master_name, min_replicas_args, SentinelDeployment,
};
use crate::backend::redis::real::sentinel_events::{self, Namer};
use crate::backend::redis::table;
use crate::env::PointHook;
use crate::history::{EventKind, History, Recorder};
use crate::lock::Lock;
use crate::lock::LockConfig;
use crate::real::client_programs::client_program_launch::{
    client_clocks, vars, Launch, LaunchedPrograms,
};
use crate::real::client_tasks::{wait_for_live_clients, Clients, NoBuilder};
use crate::real::connection::{ConnectionTimeouts, Latency, Route, RoutedConnection};
use crate::real::nemesis::proxy::RouteProxy;
use crate::real::observers::connection_names::ConnectionNames;
use crate::real::observers::witness::{client_connection_name, Witness};
use crate::real::run_end::settle_by;
use crate::real::servers::faketime::FakeTime;
use crate::real::servers::redis_server::{RedisServer, ServerOptions};
use crate::real::RealEnv;
use crate::real::RealError;
use crate::resource::Store;
use crate::scenario::{RedisSpec, Scenario};
use crate::world;
use redis::cluster::ClusterClient;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[allow(deprecated)]
pub use crate::real::nemesis::plan::real_mode_unsupported;

/// Runs `scenario`'s client programs (`kind = "client-program"`), one process per client, on
/// spawned servers, or on servers lockcheck did not start when `ext` is given (as
/// [`run_external_with`] does). `seed` seeds the random clock draws of a `[clocks]` table; real
/// runs are not deterministic.
pub fn run_client_programs(
    scenario: &Scenario,
    seed: u64,
    ext: Option<&ExternalRedis>,
) -> Result<History, RealError> {
    match ext {
        Some(ext) => on_external(scenario, ext, |prefixed, urls| {
            run_inner::<_, NoBuilder<Vec<RoutedConnection>>>(
                prefixed,
                seed,
                Clients::Programs,
                Some(urls),
            )
        }),
        None => run_inner::<_, NoBuilder<Vec<RoutedConnection>>>(
            scenario,
            seed,
            Clients::Programs,
            None,
        ),
    }
}

/// Runs `scenario`'s workload against Redis servers lockcheck did not start (`--redis`), each
/// client's lock built by `make_lock` as [`run_with`] does: no server faults (a scenario with
/// some is refused, with the reason), every lock key under the run's key prefix, and afterwards
/// the keys under that prefix deleted, and only those. Client faults (pauses, crashes, client
/// clocks) apply as usual. See [`crate::backend::redis::real::external`].
pub fn run_external_with<L, F>(
    scenario: &Scenario,
    seed: u64,
    ext: &ExternalRedis,
    make_lock: F,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    on_external(scenario, ext, |prefixed, urls| {
        run_inner(prefixed, seed, Clients::InProcess(make_lock), Some(urls))
    })
}

/// Runs `run` against servers lockcheck did not start: refuses a scenario with server faults,
/// puts the lock key under the run's prefix, and deletes the keys under that prefix afterwards.
fn on_external(
    scenario: &Scenario,
    ext: &ExternalRedis,
    run: impl FnOnce(&Scenario, &[String]) -> Result<History, RealError>,
) -> Result<History, RealError> {
    if let Some(why) = external::refusal(scenario, ext) {
        return Err(RealError::External(why));
    }
    for url in &ext.urls {
        external::reach(url)?;
    }
    let prefix = ext.prefix_for_run();
    let mut prefixed = scenario.clone();
    prefixed.lock.key = format!("{prefix}{}", scenario.lock.key);
    let result = run(&prefixed, &ext.urls);
    let mut cleanup = Ok(());
    for url in &ext.urls {
        if let Err(e) = external::remove_keys(url, &prefix) {
            cleanup = Err(e);
        }
    }
    let history = result?;
    cleanup.map(|()| history)
}

/// Runs `scenario` on spawned `redis-server` processes, building each client's lock with
/// `make_lock` (one connection per master group, in group order): the real-mode counterpart of
/// [`crate::backend::redis::sim::run_with`], so that a user's own [`Lock`] runs unchanged against real servers
/// with the same faults.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    run_inner(scenario, seed, Clients::InProcess(make_lock), None)
}

fn run_inner<L, F>(
    scenario: &Scenario,
    seed: u64,
    clients: Clients<F>,
    external: Option<&[String]>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    real_check(scenario)?;
    if table::cluster(scenario).is_some() {
        if external.is_some() {
            return Err(RealError::External(external::cluster_refusal(scenario)));
        }
        return cluster_world::run(scenario, seed, clients);
    }
    let clocks = server_clocks(scenario, seed)?;
    crate::real::servers::cleanup::install_signal_handlers();
    let rt = runtime()?;
    // Redis Sentinel: the servers and sentinels, wired through their link proxies (on `rt`).
    let sentinel = match external {
        None if scenario.redis.sentinels > 0 => {
            Some(Arc::new(SentinelDeployment::start(scenario, seed, &rt)?))
        }
        _ => None,
    };
    let mut groups = Vec::new();
    let mut server_opts = Vec::new();
    for m in 0..scenario.redis.masters as usize {
        groups.push(if let Some(urls) = external {
            Group::External(urls[m].clone())
        } else if let Some(d) = &sentinel {
            Group::Sentinel(d.initial_master_url(m))
        } else if scenario.redis.replicas == 1 {
            Group::Replicated(Box::new(FailoverRig::start_with(
                ServerOptions::default(),
                ServerOptions::default(),
            )?))
        } else {
            let mut opts = ServerOptions {
                faketime: clocks.fake[m].clone(),
                ..ServerOptions::default()
            };
            if scenario.redis.min_replicas_to_write > 0 {
                // Without replicas a master then refuses every write, in both worlds.
                opts.extra_args = min_replicas_args(scenario);
            }
            server_opts.push(opts.clone());
            let server = RedisServer::spawn(opts)?;
            if clocks.offsets[m] != 0 && clocks.fake[m] == Some(FakeTime::Jumpable) {
                server.jump_clock(clocks.offsets[m])?;
            }
            Group::Single(server)
        });
    }
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let groups: Arc<Vec<Mutex<Group>>> = Arc::new(groups.into_iter().map(Mutex::new).collect());
    // Every client has its own route to every master, so a partition can cut one client off
    // from one master. Replicated groups share the rig's route, which the failover switches.
    let routes: Vec<Vec<Arc<Route>>> = (0..scenario.workload.clients)
        .map(|_| groups.iter().map(|g| g.lock().unwrap().route()).collect())
        .collect();
    let blackhole = rt
        .block_on(BlackHole::start())
        .map_err(|e| RealError::io("starting the partition black hole", e))?;
    let client_envs = client_envs(&clocks.clients);
    // Client programs: each reaches each master group through its own route-following proxy,
    // which tells the witness the address of each connection it opens.
    let names = ConnectionNames::default();
    let mut programs = None;
    if matches!(clients, Clients::Programs) {
        let fakes = client_clocks(scenario, &clocks.clients)?;
        let sentinel_env = sentinel
            .as_deref()
            .map(SentinelDeployment::client_env)
            .unwrap_or_default();
        let mut launches = Vec::new();
        for (c, (client_routes, fake)) in routes.iter().zip(fakes).enumerate() {
            // A server lockcheck did not start is never faulted: no proxy needed, and the
            // program gets the user's URL as it is (credentials, database).
            let urls = match (external, &sentinel) {
                (Some(urls), _) => Ok(urls.to_vec()),
                // The program asks the sentinels (LOCKCHECK_SENTINELS) where the master is.
                (None, Some(_)) => Ok(client_routes.iter().map(|r| r.url()).collect()),
                (None, None) => rt.block_on(async {
                    let mut urls = Vec::new();
                    for r in client_routes {
                        let proxy = RouteProxy::start(r.clone(), c as u32, names.clone()).await?;
                        urls.push(proxy.url());
                    }
                    Ok::<_, std::io::Error>(urls)
                }),
            }
            .map_err(|e| RealError::io("starting a client program's proxy", e))?;
            let mut service = vars([
                ("LOCKCHECK_REDIS_URLS", urls.join(",")),
                ("LOCKCHECK_KEY", scenario.lock.key.clone()),
                ("LOCKCHECK_TTL_MS", scenario.lock.lease_ms().to_string()),
                (
                    "LOCKCHECK_REQUEST_TIMEOUT_MS",
                    scenario.redis.request_timeout_ms.to_string(),
                ),
            ]);
            service.extend(sentinel_env.iter().cloned());
            launches.push(Launch {
                service,
                fake,
                offset_ms: clocks.clients[c].0,
            });
        }
        // Interpreter start-up (importing a library takes a second) is not part of the run.
        programs = Some(LaunchedPrograms::start(scenario, launches)?);
    }
    let processes = programs
        .as_ref()
        .map(|p| p.programs.clone())
        .unwrap_or_default();
    // True time 0: every server is up and every client program answered.
    let rec = rt.block_on(async { Recorder::real() });
    for note in clocks.notes {
        rec.record("nemesis", EventKind::Fault { what: note });
    }
    if let Some(d) = &sentinel {
        rec.record(
            "nemesis",
            EventKind::Fault {
                what: d.describe(&scenario.node_names()),
            },
        );
        follow_sentinels(scenario, d, &rt, &rec)?;
    }
    let witness = watch_entries(scenario, external.is_some(), &groups, &rec, &names);
    let nemesis = RealNemesis {
        server_opts: Arc::new(server_opts),
        groups: groups.clone(),
        routes: Arc::new(routes),
        blackhole: blackhole.url(),
        sentinel: sentinel.clone(),
        witness: witness.clone(),
        ..RealNemesis::for_clients(scenario, rec.clone(), client_envs, processes)
    };
    nemesis.hold_back_replication()?;
    let timeouts = timeouts(scenario);
    let world = RealWorld {
        finders: sentinel
            .as_deref()
            .map(|d| finders(scenario, d, &nemesis.routes, timeouts))
            .unwrap_or_default(),
        ..RealWorld::new(scenario, &rec, &nemesis, &storage)
    };
    let history = match clients {
        Clients::InProcess(make) => rt.block_on(drive(scenario, world, |_, config, conns, env| {
            make(config, conns, env)
        })),
        Clients::Programs => {
            let mut programs = programs.expect("the programs were started above");
            let rec = rec.clone();
            rt.block_on(drive(scenario, world, move |c, config, _conns, env| {
                programs.lock(c, config, env, rec.clone())
            }))
        }
    };
    let history = match witness.map(Witness::finish) {
        // The witness vouched: add its `LockEntriesWatched` to the history.
        Some(Ok(())) => rec.snapshot(),
        Some(Err(why)) => {
            eprintln!("note: foreign_release judged without the servers' word: {why}");
            history
        }
        None => history,
    };
    LaunchedPrograms::kill_all(&nemesis.processes);
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(groups);
    drop(storage);
    Ok(history)
}

/// The two-thread tokio runtime a real run's clients, nemesis and forwarders share.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, RealError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))
}

/// Each client's environment, its clock started as `clients[c]` says (offset ms, drift ppm).
pub(super) fn client_envs(clients: &[(i64, i64)]) -> Vec<RealEnv> {
    clients
        .iter()
        .map(|&(offset, ppm)| {
            let env = RealEnv::default();
            if offset != 0 {
                env.jump(offset);
            }
            if ppm != 0 {
                env.set_drift(ppm);
            }
            env
        })
        .collect()
}

/// The bounds on every client connection: the scenario's request timeout.
pub(super) fn timeouts(scenario: &Scenario) -> ConnectionTimeouts {
    ConnectionTimeouts {
        connect: Duration::from_millis(scenario.redis.request_timeout_ms),
        response: Duration::from_millis(scenario.redis.request_timeout_ms),
    }
}

/// Records what the sentinels decide (`sentinel_events.rs`) from now on.
fn follow_sentinels(
    scenario: &Scenario,
    d: &SentinelDeployment,
    rt: &tokio::runtime::Runtime,
    rec: &Recorder,
) -> Result<(), RealError> {
    let names = scenario.node_names();
    let namer = Namer {
        nodes: d
            .announced()
            .into_iter()
            .map(|(i, a)| (a, names[i].clone()))
            .collect(),
        quorum: scenario.redis.quorum(),
    };
    for (i, port) in d.sentinel_ports().into_iter().enumerate() {
        rt.block_on(sentinel_events::follow(i, port, namer.clone(), rec.clone()))
            .map_err(|e| RealError::redis(format!("subscribing to sentinel-{i}'s events"), e))?;
    }
    Ok(())
}

/// Each in-process client's [`MasterFinder`] per master group, `finders[client][group]`: it asks
/// the sentinels from the client's node address and switches the client's route.
fn finders(
    scenario: &Scenario,
    d: &SentinelDeployment,
    routes: &[Vec<Arc<Route>>],
    timeouts: ConnectionTimeouts,
) -> Vec<Vec<Arc<MasterFinder>>> {
    let names = scenario.node_names();
    routes
        .iter()
        .enumerate()
        .map(|(c, client_routes)| {
            let node = names
                .iter()
                .position(|n| *n == format!("client-{c}"))
                .expect("a client node");
            client_routes
                .iter()
                .enumerate()
                .map(|(m, route)| {
                    MasterFinder::new(
                        d.sentinel_addresses(),
                        master_name(m),
                        Network::address(node),
                        route.clone(),
                        timeouts,
                    )
                })
                .collect()
        })
        .collect()
}

/// Starts the servers' witness of the lock entry ([`Witness`]) on every master, when it can
/// follow them: masters lockcheck started without replicas (no failover moves the entry, and a
/// user's own server is not watched) and a lock whose entry is a string (not Redisson's hash);
/// and unless `LOCKCHECK_WITNESS=off` turns it off ([`witness_wanted`]). In-process clients name
/// their connections; a client program's are named by its forwarders (`names`), so its
/// releases, too, are judged by what the servers did rather than by what the program answered.
fn watch_entries(
    scenario: &Scenario,
    external: bool,
    groups: &[Mutex<Group>],
    rec: &Recorder,
    names: &ConnectionNames,
) -> Option<Witness> {
    if !witness_wanted() || external || scenario.lock.kind.name() == redisson::NAME {
        return None;
    }
    // Each master, and each replica a failover may promote: a replica's stream shows what its
    // master sent it, so its entries are known when clients come to it.
    let mut servers: Vec<(String, u16)> = Vec::new();
    for (m, g) in groups.iter().enumerate() {
        match &*g.lock().unwrap() {
            Group::Single(server) => servers.push((format!("redis-{m}"), server.port())),
            Group::Replicated(rig) => {
                servers.push((format!("redis-{m}"), rig.original_master().port()));
                servers.push((format!("redis-{m}-replica-0"), rig.replica().port()));
            }
            // A group the witness cannot follow would leave its removals unseen: no word at
            // all then.
            Group::External(_) | Group::Sentinel(_) => return None,
        }
    }
    match Witness::start(&servers, &scenario.lock.key, rec, names) {
        Ok(w) => Some(w),
        Err(why) => {
            eprintln!("note: foreign_release judged without the servers' word: {why}");
            None
        }
    }
}

/// Whether real runs start the `MONITOR` witness: yes unless `LOCKCHECK_WITNESS` is `off` (or
/// `0`, `false`, `no`). Why anyone would turn it off: `MONITOR` makes the lock server format
/// every command it runs for the follower, which costs the server up to a fifth of its
/// throughput when many clients retry at once (`cargo bench --bench real`). Without the
/// witness, `foreign_release` judges from the clients' own events, as it does whenever the
/// witness cannot follow a run.
pub fn witness_wanted() -> bool {
    witness_setting(std::env::var("LOCKCHECK_WITNESS").ok().as_deref())
}

/// [`witness_wanted`] for a value of `LOCKCHECK_WITNESS` (`None`: unset).
fn witness_setting(value: Option<&str>) -> bool {
    !matches!(
        value
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
            .as_str(),
        "off" | "0" | "false" | "no"
    )
}

/// The latency real mode puts on the clients' connections: the scenario's `[redis] latency_ms`
/// when it sets one. Left at its default it adds nothing, so a scenario that does not ask for a
/// slow network runs at loopback speed, as it always has.
fn set_latency(scenario: &Scenario) -> Option<Latency> {
    let [lo, hi] = scenario.redis.latency_ms;
    (scenario.redis.latency_ms != RedisSpec::default().latency_ms).then_some(Latency { lo, hi })
}

/// The real Redis world's side of a run ([`world::World`]): clients are tokio tasks on routed
/// TCP connections (one route per client per master, which a partition or failover redirects;
/// in a Redis Cluster one cluster-aware connection each), the protected resource lives on the
/// storage `redis-server`.
pub(super) struct RealWorld {
    rec: Recorder,
    nemesis: RealNemesis,
    storage: Arc<Route>,
    timeouts: ConnectionTimeouts,
    /// The one-way latency on every in-process client's connection to a master, when the
    /// scenario sets `[redis] latency_ms` (left at its default, loopback alone).
    latency: Option<Latency>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// In a Sentinel run, `finders[client][group]`: whom each client asks where the master is
    /// (empty otherwise).
    finders: Vec<Vec<Arc<MasterFinder>>>,
    /// In a Redis Cluster run, the cluster client each client's one connection is made by, and
    /// where their subscriptions go.
    pub(super) cluster: Option<(ClusterClient, Arc<Route>)>,
}

impl RealWorld {
    /// The world of a run of `scenario` faulted by `nemesis`, its resource on `storage`: routed
    /// connections to the nemesis's routes, no sentinels, no cluster.
    pub(super) fn new(
        scenario: &Scenario,
        rec: &Recorder,
        nemesis: &RealNemesis,
        storage: &RedisServer,
    ) -> RealWorld {
        RealWorld {
            rec: rec.clone(),
            nemesis: nemesis.clone(),
            storage: Route::new(storage.url()),
            timeouts: timeouts(scenario),
            latency: set_latency(scenario),
            tasks: Vec::new(),
            finders: Vec::new(),
            cluster: None,
        }
    }
}

impl world::World for RealWorld {
    type Conns = Vec<RoutedConnection>;
    type Env = RealEnv;
    type StoreConn = RoutedConnection;
    type Nemesis = RealNemesis;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &RealNemesis {
        &self.nemesis
    }

    fn connections(&mut self, c: u32, _env: &RealEnv) -> Vec<RoutedConnection> {
        if let Some((client, subscribe_at)) = &self.cluster {
            let conn = || {
                let conn =
                    RoutedConnection::cluster(client.clone(), self.timeouts, subscribe_at.clone());
                match self.latency {
                    Some(latency) => conn.with_latency(latency),
                    None => conn,
                }
            };
            // Redlock: one cluster connection per master, each with the key placed on it.
            return match table::placed_keys(&self.nemesis.scenario) {
                Some((key, placed)) => placed
                    .into_iter()
                    .map(|p| conn().placing_key(&key, p))
                    .collect(),
                None => vec![conn()],
            };
        }
        let finders = self.finders.get(c as usize);
        self.nemesis.routes[c as usize]
            .iter()
            .enumerate()
            .map(|(m, r)| {
                let mut conn = RoutedConnection::new(r.clone(), self.timeouts)
                    .named(client_connection_name(c));
                if let Some(latency) = self.latency {
                    conn = conn.with_latency(latency);
                }
                match finders {
                    Some(f) => conn.following(f[m].source(), f[m].clone()),
                    None => conn,
                }
            })
            .collect()
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> RealEnv {
        self.nemesis.client_envs[c as usize]
            .clone()
            .with_gate(self.nemesis.gates[c as usize].clone())
            .with_points(points)
    }

    fn store(&mut self, _id: u64) -> Store<RoutedConnection> {
        Store::new(RoutedConnection::new(self.storage.clone(), self.timeouts))
    }

    /// The client's whole task passes its gate: while the nemesis holds the gate closed (a pause,
    /// timed or at a named point) nothing the client does progresses, as in a stopped process.
    fn spawn_client(&mut self, c: u32, run: world::ClientRun) {
        let gate = self.nemesis.gates[c as usize].clone();
        self.tasks.push(tokio::spawn(gate.gated(run)));
    }

    /// Crashed clients never finish: stop waiting once every live one has.
    async fn wait_clients(&mut self, end: Duration) {
        wait_for_live_clients(&self.rec, &self.tasks, &self.nemesis.gates, end).await;
    }

    /// Lets an in-flight failover finish recording before the history is read, by the run's
    /// end.
    async fn settle(&self, end: Duration) {
        let what = "a failover";
        settle_by(&self.rec, end, self.nemesis.settle(), what).await;
    }
}

/// Runs the clients in the real world: timed faults first (those at 0 are the starting state, in
/// place before any client runs), then the one assembly of [`world::run_clients`].
pub(super) async fn drive<L, F>(scenario: &Scenario, mut world: RealWorld, make_lock: F) -> History
where
    L: Lock + 'static,
    F: FnMut(u32, LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    world.nemesis.start_timed();
    let grace = world::estimate::run_grace_ms(scenario);
    world::run_clients(
        &mut world,
        scenario,
        Duration::from_millis(grace),
        make_lock,
    )
    .await;
    world.rec.snapshot()
}

/// Whether real mode can run `s` on spawned `redis-server`s: every fault has a recipe (on a
/// Redis Cluster, `cluster_world.rs`'s).
pub fn real_check(s: &Scenario) -> Result<(), RealError> {
    match table::cluster(s) {
        Some(_) => cluster_world::check(s),
        None => check_redis(s),
    }
}

#[cfg(test)]
mod tests {
    use super::witness_setting;

    #[test]
    fn the_witness_runs_unless_turned_off() {
        for on in [None, Some(""), Some("on"), Some("1"), Some("yes")] {
            assert!(witness_setting(on), "{on:?}");
        }
        for off in ["off", "OFF", "0", "false", "no", " off "] {
            assert!(!witness_setting(Some(off)), "{off:?}");
        }
    }
}
