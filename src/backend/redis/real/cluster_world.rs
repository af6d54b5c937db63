//! Real mode on a Redis Cluster (`[redis.cluster]`, issue #43): the scenario's servers are one
//! [`RedisCluster`] lockcheck spawns (`redis-<m>` the masters, `redis-<m>-replica-<r>` their
//! replicas, the slots in equal slices), the protected resource lives on a storage
//! `redis-server` of its own, and every in-process client has one cluster-aware connection
//! (redis-rs's `cluster_async::ClusterConnection` inside a [`RoutedConnection`]), which follows
//! `MOVED` and `ASK` and retries as `[redis.cluster]` says. The run itself is the one of
//! `world.rs` ([`RealWorld`], [`drive`]).
//!
//! The faults, and what is refused before anything is spawned ([`check`]):
//! - `crash` of any node: `SIGKILL`, and after `restart_after_ms` the node again, empty (no
//!   persistence) but with its `nodes.conf`, so it rejoins as the cluster now has it. Nothing is
//!   promoted by lockcheck: the cluster elects a crashed master's replica itself, and a
//!   background thread that reads every node's `CLUSTER NODES` records what it decided
//!   ([`RoleWatch`]).
//! - `partition` between cluster nodes: the cluster is started behind link proxies
//!   (`cluster_partition.rs`) and the cut links hold gossip, votes and replication. A partition
//!   that cuts a client off is refused: the cluster client connects from 127.0.0.1, which is no
//!   node's address, so no link proxy can tell its connections apart.
//! - a client's pause, crash and clock: as on every real Redis world (`nemesis.rs`).
//! - clocks of cluster nodes are refused (the nodes run without libfaketime); `failover` is
//!   refused by the scenario already (the cluster fails over by itself).
//! - client programs are handed the cluster's seed nodes (`LOCKCHECK_REDIS_CLUSTER_NODES`) and
//!   find the slots' owners themselves, with their own library's cluster client.
//!
//! The servers' witness (`MONITOR`) is off in a cluster run: it knows a client by the name of
//! its connection, and the cluster client opens and reopens its connections to every node
//! unnamed. `foreign_release` then judges from the clients' own events, as it does whenever
//! the witness cannot follow a run; the history says so in a note.

use super::cluster::{ClusterOptions, ClusterRole, RedisCluster};
use super::nemesis::RealNemesis;
use super::world::{client_envs, drive, runtime, timeouts, RealWorld};
use crate::backend::redis::engine::cluster::ManualFailover;
use crate::backend::redis::real::plan::{server_clocks, server_index};
use crate::backend::redis::real::recipes::RedisRecipes;
use crate::backend::redis::table::{self, ClusterTable};
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, ClusterFailoverForm, Cut, Nemesis, Occasion, Refused, Trigger};
use crate::history::{EventKind, History, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::real::client_programs::client_program_launch::{
    client_clocks, vars, Launch, LaunchedPrograms,
};
use crate::real::client_tasks::Clients;
use crate::real::nemesis::plan::{client_index, scenario_links};
use crate::real::nemesis::recipes::ask;
use crate::real::servers::redis_server::{RedisServer, ServerOptions};
use crate::real::{cluster_client, ClusterPolicy, RealEnv, RealError, Route, RoutedConnection};
use crate::scenario::Scenario;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the role watch reads every node's view.
const WATCH_EVERY: Duration = Duration::from_millis(75);

/// The Redis Cluster of a run, as its clients and nemesis reach it.
pub(crate) struct ClusterRun {
    pub(crate) cluster: RedisCluster,
    /// Where every client's subscriptions go: a running node (moved off a node that crashes).
    subscribe_at: Arc<Route>,
}

impl ClusterRun {
    /// The cluster's node named `name` (the scenario's node names are the cluster's).
    fn node(&self, name: &str) -> Option<usize> {
        (0..self.cluster.len()).find(|&n| self.cluster.name(n) == name)
    }

    /// Where a client reaches node `n` ([`url_of`]).
    fn url(&self, n: usize) -> Option<String> {
        url_of(&self.cluster, n)
    }

    /// The scenario's directed links between nodes as cluster node pairs, or the reason a link
    /// that is not between two cluster nodes cannot be cut.
    fn cluster_links(
        &self,
        names: &[String],
        links: &[(usize, usize)],
    ) -> Result<Vec<(usize, usize)>, String> {
        links
            .iter()
            .map(
                |&(a, b)| match (self.node(&names[a]), self.node(&names[b])) {
                    (Some(x), Some(y)) => Ok((x, y)),
                    _ => Err(client_cut_refusal(&names[a], &names[b])),
                },
            )
            .collect()
    }
}

/// Why a partition that cuts a client off a cluster node is refused.
fn client_cut_refusal(from: &str, to: &str) -> String {
    format!(
        "partition cutting {from} -> {to}: on a Redis Cluster real mode cuts links between \
         cluster nodes only (its link proxies); the cluster client connects from 127.0.0.1, \
         which no proxy can tell apart from lockcheck's own connections; name cluster nodes in \
         both `nodes` and `from`, or run it in simulation (without --real)"
    )
}

/// Why lockcheck does not fail a cluster over.
const FAILS_OVER_ITSELF: &str = "a Redis Cluster promotes a replica by itself: crash or \
    partition the master instead of `failover`";

/// Checks that real mode can run `s` on a Redis Cluster: every fault has a recipe here, no node's
/// clock is faked, and the clients are lockcheck's own.
pub(crate) fn check(s: &Scenario) -> Result<(), RealError> {
    let unsupported = RealError::Unsupported;
    let names = s.node_names();
    let set = match s.clocks.is_perfect() {
        true => Vec::new(),
        false => s.clocks.applies_to(&names),
    };
    if let Some(node) = set.iter().find(|n| client_index(s, n).is_none()) {
        return Err(unsupported(format!(
            "`{}` sets [clocks] on {node}: {}",
            s.name,
            node_clock_refusal()
        )));
    }
    for f in &s.faults {
        match ask(
            &ClusterRecipes {
                s,
                trigger: &f.trigger,
            },
            f,
        ) {
            Ok(()) => {}
            Err(Refused::Because(why)) => return Err(unsupported(why)),
            Err(Refused::Lacking) => {
                let shown = crate::fault::fault_table(f).into_inline_table();
                return Err(unsupported(format!(
                    "fault {shown} has no real-mode recipe on a Redis Cluster; run it in \
                     simulation (without --real)"
                )));
            }
        }
    }
    Ok(())
}

/// Why a cluster node's clock is not moved.
fn node_clock_refusal() -> String {
    "real mode runs Redis Cluster nodes without libfaketime (a faked clock would move their \
     node timeouts and failure detection too); fault the clients' clocks, or run it in \
     simulation (without --real)"
        .into()
}

/// What real mode can do to a Redis Cluster's nodes and clients, asked before anything is
/// spawned; a client's own faults are answered as on the other Redis worlds.
struct ClusterRecipes<'a> {
    s: &'a Scenario,
    trigger: &'a Trigger,
}

impl ClusterRecipes<'_> {
    fn clients(&self) -> RedisRecipes<'_> {
        RedisRecipes {
            s: self.s,
            trigger: self.trigger,
        }
    }
}

impl Nemesis for ClusterRecipes<'_> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.clients().pause_client(at, victim, for_ms)
    }

    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.clients().crash_client(at, client)
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        Err(Refused::Because(FAILS_OVER_ITSELF.into()))
    }

    fn cluster_failover(&self, _master: u32, _form: ClusterFailoverForm) -> Result<(), Refused> {
        Ok(())
    }

    fn migrate_slot(&self, _to: u32, _for_ms: u64) -> Result<(), Refused> {
        Ok(())
    }

    fn crash_server(&self, node: &str, _restart_after_ms: u64) -> Result<(), Refused> {
        match server_index(self.s, node) {
            Some(_) => Ok(()),
            None => Err(Refused::Lacking),
        }
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let (names, links) = scenario_links(self.s, cut.nodes, cut.from, cut.direction);
        for &(a, b) in &links {
            if server_index(self.s, &names[a]).is_none()
                || server_index(self.s, &names[b]).is_none()
            {
                return Err(Refused::Because(client_cut_refusal(&names[a], &names[b])));
            }
        }
        Ok(())
    }

    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        if client_index(self.s, node).is_none() {
            return Err(Refused::Because(format!(
                "a clock jump on {node}: {}",
                node_clock_refusal()
            )));
        }
        self.clients().jump_clock(node, by_ms, wall_only)
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        if client_index(self.s, node).is_none() {
            return Err(Refused::Because(format!(
                "a clock drift on {node}: {}",
                node_clock_refusal()
            )));
        }
        self.clients().drift_clock(node, ppm)
    }
}

/// Whether a fault of `s` cuts links: the cluster then starts behind its link proxies.
fn partitions(s: &Scenario) -> bool {
    #[derive(Default)]
    struct Cuts(std::cell::Cell<bool>);
    impl Nemesis for Cuts {
        fn cut(&self, _cut: &Cut<'_>) -> Result<(), Refused> {
            self.0.set(true);
            Ok(())
        }
    }
    let cuts = Cuts::default();
    for f in &s.faults {
        let _ = ask(&cuts, f);
    }
    cuts.0.get()
}

/// Runs `scenario` on a Redis Cluster lockcheck spawns (`real_check` has passed), each client's
/// lock built as `clients` says, on one cluster-aware connection.
pub(super) fn run<L, F>(
    scenario: &Scenario,
    seed: u64,
    clients: Clients<F>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    let t: ClusterTable = table::cluster(scenario).cloned().unwrap_or_default();
    // Only the clients' clocks are set (`check` refused the nodes').
    let clocks = server_clocks(scenario, seed)?;
    crate::real::servers::cleanup::install_signal_handlers();
    let cluster = RedisCluster::start(ClusterOptions {
        masters: scenario.redis.masters as usize,
        replicas: scenario.redis.replicas as usize,
        node_timeout: Duration::from_millis(t.node_timeout_ms),
        partitionable: partitions(scenario) || scenario.redis.replication_lag_ms[1] > 0,
        replication_lag_ms: scenario.redis.replication_lag_ms,
        node_args: match scenario.redis.min_replicas_to_write {
            0 => Vec::new(),
            _ => super::sentinel_deployment::min_replicas_args(scenario),
        },
        ..ClusterOptions::default()
    })?;
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let d = Arc::new(ClusterRun {
        subscribe_at: Route::new(url_of(&cluster, 0).unwrap_or_default()),
        cluster,
    });
    let seeds: Vec<String> = (0..d.cluster.len()).filter_map(|n| d.url(n)).collect();
    let policy = ClusterPolicy {
        retries: t.client_retries,
        retry_wait_ms: t.client_retry_wait_ms,
    };
    let client = cluster_client(&seeds, policy, timeouts(scenario))
        .map_err(|e| RealError::redis("building the cluster client", e))?;
    let rt = runtime()?;
    // Client programs get the cluster's seed nodes and find the rest themselves, as an
    // application's cluster client does; interpreter start-up is not part of the run.
    let mut programs = match clients {
        Clients::InProcess(_) => None,
        Clients::Programs => Some(launch_programs(scenario, &seeds, &clocks.clients)?),
    };
    let processes = programs
        .as_ref()
        .map(|p| p.programs.clone())
        .unwrap_or_default();
    // True time 0: the cluster has converged and every client program answered.
    let rec = rt.block_on(async { Recorder::real() });
    for note in clocks.notes {
        rec.record("nemesis", EventKind::Fault { what: note });
    }
    let note = |what: String| rec.record("nemesis", EventKind::Fault { what });
    note(d.cluster.describe());
    note(
        "witness off: the cluster client's connections to the nodes are unnamed, so \
         foreign_release judges from the clients' own events"
            .into(),
    );
    let watch = RoleWatch::start(d.clone(), rec.clone());
    let nemesis = RealNemesis {
        cluster: Some(d.clone()),
        ..RealNemesis::for_clients(
            scenario,
            rec.clone(),
            client_envs(&clocks.clients),
            processes.clone(),
        )
    };
    let mut world = RealWorld::new(scenario, &rec, &nemesis, &storage);
    world.cluster = Some((client, d.subscribe_at.clone()));
    let history = match clients {
        Clients::InProcess(make_lock) => {
            rt.block_on(drive(scenario, world, |_, config, conns, env| {
                make_lock(config, conns, env)
            }))
        }
        Clients::Programs => {
            let mut programs = programs.take().expect("the programs were started above");
            let rec = rec.clone();
            rt.block_on(drive(scenario, world, move |c, config, _conns, env| {
                programs.lock(c, config, env, rec.clone())
            }))
        }
    };
    LaunchedPrograms::kill_all(&processes);
    watch.stop();
    rt.shutdown_timeout(Duration::from_secs(2));
    // Every node dies now, even if a restart still holds the cluster.
    for n in 0..d.cluster.len() {
        d.cluster.crash(n);
    }
    drop(nemesis);
    drop(d);
    drop(storage);
    Ok(history)
}

/// Starts one client program per client, each handed the cluster's seed nodes
/// (`LOCKCHECK_REDIS_CLUSTER_NODES`, `host:port` each; `LOCKCHECK_REDIS_URLS` the same as URLs)
/// and its clock as `[clocks]` says.
fn launch_programs(
    s: &Scenario,
    seeds: &[String],
    clocks: &[(i64, i64)],
) -> Result<LaunchedPrograms, RealError> {
    let nodes: Vec<&str> = seeds
        .iter()
        .map(|u| u.trim_start_matches("redis://").trim_end_matches('/'))
        .collect();
    let fakes = client_clocks(s, clocks)?;
    let launches = fakes
        .into_iter()
        .enumerate()
        .map(|(c, fake)| Launch {
            service: vars([
                ("LOCKCHECK_REDIS_CLUSTER_NODES", nodes.join(",")),
                ("LOCKCHECK_REDIS_URLS", seeds.join(",")),
                ("LOCKCHECK_KEY", s.lock.key.clone()),
                ("LOCKCHECK_TTL_MS", s.lock.lease_ms().to_string()),
                (
                    "LOCKCHECK_REQUEST_TIMEOUT_MS",
                    s.redis.request_timeout_ms.to_string(),
                ),
            ]),
            fake,
            offset_ms: clocks[c].0,
        })
        .collect();
    LaunchedPrograms::start(s, launches)
}

/// Where a client reaches node `n`: its client link proxy in a partitionable cluster (the
/// address it announces, which stays across its restarts), else its own port while it runs.
fn url_of(cluster: &RedisCluster, n: usize) -> Option<String> {
    match &cluster.links {
        Some(links) => {
            let (ip, port, _) = links.announced(n);
            Some(format!("redis://{ip}:{port}/"))
        }
        None => cluster.url(n),
    }
}

/// `crash` of cluster node `node`: `SIGKILL`, then after `restart_after_ms` the node again,
/// empty; the cluster decides the rest.
pub(super) fn crash(
    n: &RealNemesis,
    d: Arc<ClusterRun>,
    node: &str,
    restart_after_ms: u64,
) -> Result<(), Refused> {
    let Some(idx) = d.node(node) else {
        return Err(Refused::Lacking);
    };
    let at = d.url(idx);
    if d.cluster.crash(idx) {
        n.note(format!("{node} killed"));
    }
    // Subscriptions made from now on go to a node that runs.
    if at.is_some_and(|at| d.subscribe_at.url() == at) {
        if let Some(other) = d.cluster.live_nodes().into_iter().find_map(|o| d.url(o)) {
            d.subscribe_at.switch_to(other);
        }
    }
    let restart = d.clone();
    n.restart_after(
        node,
        restart_after_ms,
        move || restart.cluster.restart(idx),
        |me, node, pid| me.note(format!("{node} restarted empty (pid {pid})")),
    );
    Ok(())
}

/// `CLUSTER FAILOVER [FORCE|TAKEOVER]` to `redis-<master>-replica-0`; the cluster does the
/// rest, and the role watch records the promotion when it happens.
pub(super) fn manual_failover(
    n: &RealNemesis,
    d: Arc<ClusterRun>,
    master: u32,
    form: ClusterFailoverForm,
) -> Result<(), Refused> {
    let name = format!("redis-{master}-replica-0");
    let Some(idx) = d.node(&name) else {
        return Err(Refused::Lacking);
    };
    let how = match form {
        ClusterFailoverForm::Coordinated => ManualFailover::Coordinated,
        ClusterFailoverForm::Force => ManualFailover::Force,
        ClusterFailoverForm::Takeover => ManualFailover::Takeover,
    };
    match d.cluster.failover(idx, how) {
        Ok(()) => {
            n.note(format!("CLUSTER FAILOVER{} sent to {name}", form.option()));
            Ok(())
        }
        Err(e) => Err(Refused::Because(format!(
            "CLUSTER FAILOVER{} to {name} refused: {e}",
            form.option()
        ))),
    }
}

/// `partition` of cluster nodes: the cut links' proxies hold what crosses them until it heals.
pub(super) fn cut(n: &RealNemesis, d: Arc<ClusterRun>, cut: &Cut<'_>) -> Result<(), Refused> {
    let (names, links) = scenario_links(&n.scenario, cut.nodes, cut.from, cut.direction);
    let links = d.cluster_links(&names, &links).map_err(Refused::Because)?;
    if let Err(e) = d.cluster.cut_links(&links, true) {
        return Err(Refused::Because(e.to_string()));
    }
    n.note(format!(
        "{} (the cluster's link proxies hold what crosses the cut)",
        describe_partition(cut.nodes, cut.from, cut.for_ms)
    ));
    n.heal_after(cut.for_ms, move |_| {
        let _ = d.cluster.cut_links(&links, false);
    });
    Ok(())
}

/// The group a node belongs to by its name: `m` of `redis-<m>` and `redis-<m>-replica-<r>`.
fn group_of(name: &str) -> Option<usize> {
    name.strip_prefix("redis-")?.split('-').next()?.parse().ok()
}

/// A background thread that reads every running node's own line of its `CLUSTER NODES` every
/// [`WATCH_EVERY`] and records each change of role the cluster made: a replica promoted by its
/// election, a master that came back as a replica. The notes are those the simulated cluster
/// records, so the report's server lanes read both worlds alike.
struct RoleWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RoleWatch {
    fn start(d: Arc<ClusterRun>, rec: Recorder) -> RoleWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lockcheck-cluster-roles".into())
            .spawn(move || {
                let c = &d.cluster;
                let masters = c.options().masters;
                // The roles the cluster was formed with.
                let mut last: Vec<ClusterRole> = (0..c.len())
                    .map(|n| match n < masters {
                        true => ClusterRole::Master,
                        false => ClusterRole::Replica {
                            of: (0..masters)
                                .find(|&m| c.initial_replicas(m).contains(&n))
                                .unwrap_or(0),
                        },
                    })
                    .collect();
                while !stopping.load(Ordering::Relaxed) {
                    for n in c.live_nodes() {
                        let Ok(view) = c.view(n) else { continue };
                        let Some(me) = view.iter().find(|l| l.is_myself()) else {
                            continue;
                        };
                        let now = match me.master.as_deref().and_then(|id| c.node_of_id(id)) {
                            Some(of) if me.is_replica() => ClusterRole::Replica { of },
                            _ => ClusterRole::Master,
                        };
                        let name = c.name(n);
                        let what = match (last[n], now) {
                            (ClusterRole::Replica { .. }, ClusterRole::Master) => Some(format!(
                                "{name} promoted to master of group {} (cluster election, epoch {})",
                                group_of(name).unwrap_or(0),
                                me.config_epoch
                            )),
                            (ClusterRole::Master, ClusterRole::Replica { of }) => Some(format!(
                                "{name} demoted to a replica (follows {})",
                                c.name(of)
                            )),
                            _ => None,
                        };
                        if let Some(what) = what {
                            rec.record("nemesis", EventKind::Fault { what });
                        }
                        last[n] = now;
                    }
                    std::thread::sleep(WATCH_EVERY);
                }
            })
            .expect("spawning the cluster's role watch");
        RoleWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the watch and waits for its thread.
    fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RoleWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::group_of;

    #[test]
    fn a_node_belongs_to_the_group_its_name_says() {
        assert_eq!(group_of("redis-0"), Some(0));
        assert_eq!(group_of("redis-2-replica-1"), Some(2));
        assert_eq!(group_of("client-0"), None);
    }
}
