//! Real mode: the scenario's lock and workload on `redis-server` processes lockcheck spawns.
//!
//! The lock code, the workload and the checkers are the ones the simulator uses; only the two
//! seams change (a [`RoutedConnection`] and [`RealEnv`]). Faults use the deterministic recipes of
//! DESIGN.md rather than luck:
//! - `failover`: replication to the replica is held back from the start (SIGSTOP of the replica
//!   and `CLIENT KILL TYPE replica` on the master), so the promoted replica is certain not to have
//!   the lock; on the trigger the master is SIGKILLed and, `failover_detect_ms` later, the replica
//!   is resumed, promoted with `REPLICAOF NO ONE`, and clients are routed to it.
//! - `pause`: the client stalls at its trigger point (`acquired`, or a named point) for `for_ms`,
//!   and so do its timers and background tasks (a watchdog): each real client has a
//!   [`Gate`](crate::env::Gate) that the pause closes, as a stop-the-world GC stops every thread.
//! - `crash` of a client: at its named point the client's gate closes for good and the client
//!   task stops dead there, without releasing; its watchdog stops with it.
//! - client clocks (`clock_jump`, `clock_drift`, `[clocks]` on `client-<c>`): the client's
//!   [`RealEnv`] is skewed (offset, rate, jumps); the lock reads its clock only through it.
//! - clocks (`clock_jump`, `clock_drift` at `at_ms = 0`, `[clocks]`) on masters without replicas:
//!   the server runs under libfaketime (see `faketime.rs`): a drifting server gets
//!   `FAKETIME='+0 xR'` with `R = 1 + ppm / 1e6`; a server whose clock jumps (or starts offset)
//!   reads its offset from a timestamp file that lockcheck rewrites (`FAKETIME_NO_CACHE=1`).
//!   libfaketime cannot do both to one server.
//! - `crash` of a master without replicas: `SIGKILL`, and after `restart_after_ms` a fresh
//!   `redis-server` (empty: lockcheck's servers never persist) on a new port; clients are routed
//!   to it as a Sentinel-aware or DNS-following client would be. A restarted server's clock starts
//!   true again unless it drifts (libfaketime's state dies with the process).
//! - `partition` between clients and masters (no replicas): every client has its own connection
//!   to every master, and a cut points that client's connection at a black hole (a port that
//!   accepts and never answers), so exactly that client times out on exactly that master while
//!   the others still reach it (see `blackhole.rs`). Cuts that only lose replies (a request that
//!   lands, a reply that does not) have no recipe: that needs a proxy.
//!
//! The protected resource lives on a separate `redis-server` (the storage), not on the lock's.
//!
//! Every process is killed when this returns, on error, on panic and on Ctrl-C.

use super::blackhole::BlackHole;
use super::client_process::ClientProcess;
use super::connection::{ConnectionTimeouts, Route, RoutedConnection};
use super::failover::FailoverRig;
use super::faketime::FakeTime;
use super::process::{RedisServer, ServerOptions};
use super::process_clients::{client_clocks, fake_time, start_client};
use super::proxy::RouteProxy;
use super::RealError;
use crate::env::{Gate, PointHook, RealEnv};
use crate::history::{EventKind, History, Recorder};
use crate::lock::LockConfig;
use crate::lock::{Lock, LockKind, ProcessLock};
use crate::resource::Store;
use crate::scenario::{ClientPoint, ClientRef, Fault, FaultKind, Scenario, Trigger};
use crate::workload::{record_final_state, run_client, ClientPlan, FaultPoints};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One master group on real processes.
enum Group {
    Single(RedisServer),
    Replicated(Box<FailoverRig>),
}

impl Group {
    fn route(&self) -> Arc<Route> {
        match self {
            Group::Single(s) => Route::new(s.url()),
            Group::Replicated(r) => r.route(),
        }
    }
}

/// Why a scenario cannot run on real processes (exit code 2, with the reason).
fn unsupported(what: String) -> RealError {
    RealError::Unsupported(what)
}

/// Checks that every fault of the scenario has a real-mode recipe.
/// Why `scenario` has no real-mode recipe, or `None` when `--real` can run it. A real suite asks
/// this first so it can list `SKIP <name>: <reason>` and go on instead of failing the whole run.
pub fn real_mode_unsupported(scenario: &Scenario) -> Option<String> {
    check_supported(scenario).err().map(|e| e.to_string())
}

fn check_supported(s: &Scenario) -> Result<(), RealError> {
    if s.redis.replicas > 1 {
        return Err(unsupported(format!(
            "real mode runs at most 1 replica per master; `{}` asks for {}",
            s.name, s.redis.replicas
        )));
    }
    for f in &s.faults {
        match (&f.kind, &f.trigger) {
            (FaultKind::Failover { .. }, _) => {}
            (
                FaultKind::Pause { .. } | FaultKind::ClientCrash { .. },
                Trigger::Acquired { .. } | Trigger::BeforeWrite { .. } | Trigger::Point { .. },
            ) => {}
            // A client stopped from the start: its task starts `for_ms` late.
            (
                FaultKind::Pause {
                    client: ClientRef::Index(_),
                    ..
                },
                Trigger::At(0),
            ) => {}
            (FaultKind::ClockJump { node, .. }, Trigger::At(_) | Trigger::Acquired { .. }) => {
                if client_index(s, node).is_none() {
                    faked_master(s, node, "a clock jump")?;
                }
            }
            (FaultKind::ClockDrift { node, .. }, Trigger::At(_) | Trigger::Acquired { .. })
                if client_index(s, node).is_some() => {}
            (FaultKind::ClockDrift { node, .. }, Trigger::At(0)) => {
                faked_master(s, node, "clock drift")?;
            }
            (
                FaultKind::Partition {
                    nodes,
                    from,
                    direction,
                    ..
                },
                Trigger::At(_) | Trigger::Acquired { .. },
            ) => {
                client_cuts(s, nodes, from, *direction)?;
            }
            (FaultKind::Crash { node, .. }, Trigger::At(_) | Trigger::Acquired { .. })
                if master_index(s, node).is_some() && s.redis.replicas == 0 => {}
            (kind, trigger) => {
                return Err(unsupported(format!(
                    "fault {kind:?} with trigger {trigger:?} has no real-mode recipe yet; run it in simulation (without --real)"
                )))
            }
        }
    }
    Ok(())
}

/// A master named in a clock fault: it must be `redis-<m>` of a group without replicas.
fn faked_master(s: &Scenario, node: &str, what: &str) -> Result<usize, RealError> {
    match master_index(s, node) {
        Some(m) if s.redis.replicas == 0 => Ok(m),
        _ => Err(unsupported(format!(
            "{what} on `{node}`: real mode fakes the clocks of clients and of masters without \
             replicas only (replicated groups: run it in simulation, without --real)"
        ))),
    }
}

/// `redis-<m>` -> m, for the scenario's masters.
fn master_index(s: &Scenario, node: &str) -> Option<usize> {
    let m: u32 = node.strip_prefix("redis-")?.parse().ok()?;
    (m < s.redis.masters).then_some(m as usize)
}

/// `client-<c>` -> c.
fn client_index(s: &Scenario, node: &str) -> Option<usize> {
    let c: u32 = node.strip_prefix("client-")?.parse().ok()?;
    (c < s.workload.clients).then_some(c as usize)
}

/// The (client, master) connections a partition cuts in real mode, or why it cannot.
fn client_cuts(
    s: &Scenario,
    nodes: &[String],
    from: &[String],
    direction: crate::scenario::Direction,
) -> Result<Vec<(usize, usize)>, RealError> {
    let names = s.node_names();
    let index: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let links = crate::sim::nemesis::partition_links(&index, nodes, from, direction);
    let mut cuts = Vec::new();
    for &(a, b) in &links {
        let (na, nb) = (&names[a], &names[b]);
        match (client_index(s, na), master_index(s, nb)) {
            // A request that never arrives: the black hole.
            (Some(c), Some(m)) if s.redis.replicas == 0 => cuts.push((c, m)),
            _ => {
                let reply_only = client_index(s, nb).is_some()
                    && master_index(s, na).is_some()
                    && links.contains(&(b, a));
                let idle = (client_index(s, na).is_some() && client_index(s, nb).is_some())
                    || (s.redis.replicas == 0
                        && master_index(s, na).is_some()
                        && master_index(s, nb).is_some());
                // Clients never talk to each other, and independent masters do not either:
                // those cuts change nothing. A reply cut with its request cut is the black hole.
                if !(idle || reply_only) {
                    return Err(unsupported(format!(
                        "partition cutting {na} -> {nb}: real mode cuts client -> master \
                         connections of masters without replicas only (a lost reply to a request \
                         that landed needs a proxy); run it in simulation, without --real"
                    )));
                }
            }
        }
    }
    cuts.sort();
    cuts.dedup();
    Ok(cuts)
}

/// How each master's clock runs in real mode, and what to record about it.
struct ServerClocks {
    fake: Vec<Option<FakeTime>>,
    /// Start offsets to apply (jumpable servers) right after spawning.
    offsets: Vec<i64>,
    notes: Vec<String>,
    /// Each client's start (offset ms, drift ppm).
    clients: Vec<(i64, i64)>,
}

fn server_clocks(s: &Scenario, seed: u64) -> Result<ServerClocks, RealError> {
    let masters = s.redis.masters as usize;
    let mut drift = vec![0i64; masters];
    let mut offsets = vec![0i64; masters];
    let mut jumps = vec![false; masters];
    let mut notes = Vec::new();
    let mut clients = vec![(0i64, 0i64); s.workload.clients as usize];
    if !s.clocks.is_perfect() {
        // The same ranges as the simulator, drawn from the seed (not the same numbers).
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        for name in s.clocks.applies_to(&s.node_names()) {
            let [olo, ohi] = s.clocks.offset_ms;
            let [dlo, dhi] = s.clocks.drift_ppm;
            let (offset, ppm) = (rng.gen_range(olo..=ohi), rng.gen_range(dlo..=dhi));
            if let Some(c) = client_index(s, &name) {
                clients[c] = (offset, ppm);
            } else {
                let m = faked_master(s, &name, "[clocks]")?;
                offsets[m] = offset;
                drift[m] = ppm;
            }
            notes.push(format!(
                "{name} clock starts {offset:+} ms off true time, drifting {ppm:+} ppm"
            ));
        }
    }
    for f in &s.faults {
        match &f.kind {
            // Client clocks are the client's `RealEnv`: set when the fault fires.
            FaultKind::ClockDrift { node, .. } | FaultKind::ClockJump { node, .. }
                if client_index(s, node).is_some() => {}
            FaultKind::ClockDrift { node, ppm } => {
                let m = faked_master(s, node, "clock drift")?;
                drift[m] = *ppm;
            }
            FaultKind::ClockJump { node, .. } => {
                jumps[faked_master(s, node, "a clock jump")?] = true
            }
            _ => {}
        }
    }
    let mut fake = Vec::new();
    for m in 0..masters {
        let who = format!("redis-{m}");
        fake.push(fake_time(&who, drift[m], offsets[m], jumps[m])?);
    }
    Ok(ServerClocks {
        fake,
        offsets,
        notes,
        clients,
    })
}

/// Runs `scenario` on spawned servers and returns the history. `seed` seeds the random clock
/// draws of a `[clocks]` table; real runs are not deterministic. A `kind = "process"` lock runs
/// the scenario's client program, one process per client.
pub fn run(scenario: &Scenario, seed: u64) -> Result<History, RealError> {
    if scenario.lock.kind.is_mysql() {
        return crate::sql::real_world::run(scenario, seed);
    }
    if scenario.lock.kind == LockKind::Process {
        return run_inner::<_, NoBuilder>(scenario, seed, Clients::Programs);
    }
    let kind = scenario.lock.kind;
    run_with(scenario, seed, move |config, conns, env| {
        crate::lock::AnyLock::build(kind, config, conns, env)
    })
}

/// Runs `scenario` on spawned `redis-server` processes, building each client's lock with
/// `make_lock` (one connection per master group, in group order): the real-mode counterpart of
/// [`crate::sim::run_with`], so that a user's own [`Lock`] runs unchanged against real servers
/// with the same faults.
pub fn run_with<L, F>(scenario: &Scenario, seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    run_inner(scenario, seed, Clients::InProcess(make_lock))
}

/// Who the clients are: locks built in this process, or the scenario's client programs.
enum Clients<F> {
    InProcess(F),
    Programs,
}

/// The `Clients::Programs` marker's (unused) lock builder type.
type NoBuilder = fn(
    LockConfig,
    Vec<RoutedConnection>,
    RealEnv,
) -> crate::lock::AnyLock<RoutedConnection, RealEnv>;

fn run_inner<L, F>(
    scenario: &Scenario,
    seed: u64,
    clients: Clients<F>,
) -> Result<History, RealError>
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    check_supported(scenario)?;
    let clocks = server_clocks(scenario, seed)?;
    super::cleanup::install_cleanup_handlers();
    // Spawn from this (long-lived) thread: the servers' parent-death signal is tied to it.
    let mut groups = Vec::new();
    let mut server_opts = Vec::new();
    for m in 0..scenario.redis.masters as usize {
        groups.push(if scenario.redis.replicas == 1 {
            Group::Replicated(Box::new(FailoverRig::start_with(
                ServerOptions::default(),
                ServerOptions::default(),
            )?))
        } else {
            let opts = ServerOptions {
                faketime: clocks.fake[m].clone(),
                ..ServerOptions::default()
            };
            server_opts.push(opts.clone());
            let server = RedisServer::spawn(opts)?;
            if clocks.offsets[m] != 0 && clocks.fake[m] == Some(FakeTime::Jumpable) {
                server.jump_clock(clocks.offsets[m])?;
            }
            Group::Single(server)
        });
    }
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))?;
    let rec = rt.block_on(async { Recorder::real() });
    for note in clocks.notes {
        rec.record("nemesis", EventKind::Fault { what: note });
    }
    let groups: Arc<Vec<Mutex<Group>>> = Arc::new(groups.into_iter().map(Mutex::new).collect());
    // Every client has its own route to every master, so a partition can cut one client off
    // from one master. Replicated groups share the rig's route, which the failover switches.
    let routes: Vec<Vec<Arc<Route>>> = (0..scenario.workload.clients)
        .map(|_| groups.iter().map(|g| g.lock().unwrap().route()).collect())
        .collect();
    let blackhole = rt
        .block_on(BlackHole::start())
        .map_err(|e| RealError::io("starting the partition black hole", e))?;
    let client_envs: Vec<RealEnv> = clocks
        .clients
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
        .collect();
    // Client programs: each reaches each master group through its own route-following proxy.
    let mut processes = Vec::new();
    let mut pipes = Vec::new();
    if matches!(clients, Clients::Programs) {
        let fakes = client_clocks(scenario, &clocks.clients)?;
        for (c, client_routes) in routes.iter().enumerate() {
            let urls = rt
                .block_on(async {
                    let mut urls = Vec::new();
                    for r in client_routes {
                        urls.push(RouteProxy::start(r.clone()).await?.url());
                    }
                    Ok::<_, std::io::Error>(urls)
                })
                .map_err(|e| RealError::io("starting a client program's proxy", e))?;
            let (process, stdin, stdout) = start_client(
                scenario,
                c as u32,
                &urls,
                fakes[c].as_ref(),
                clocks.clients[c].0,
            )?;
            processes.push(Some(Arc::new(process)));
            pipes.push(Some((stdin, stdout)));
        }
    }
    let nemesis = RealNemesis {
        processes: Arc::new(processes),
        server_opts: Arc::new(server_opts),
        client_envs: Arc::new(client_envs),
        pending: Arc::new(Mutex::new(scenario.faults.clone())),
        groups: groups.clone(),
        rec: rec.clone(),
        detect: Duration::from_millis(scenario.redis.failover_detect_ms),
        scenario: Arc::new(scenario.clone()),
        routes: Arc::new(routes),
        blackhole: blackhole.url(),
        cuts: Arc::default(),
        gates: (0..scenario.workload.clients)
            .map(|_| Gate::default())
            .collect(),
    };
    nemesis.hold_back_replication()?;
    let history = rt.block_on(drive(
        scenario,
        rec,
        nemesis.clone(),
        Route::new(storage.url()),
        clients,
        pipes,
    ));
    for p in nemesis.processes.iter().flatten() {
        p.kill();
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(groups);
    drop(storage);
    Ok(history)
}

/// A client program's stdin and stdout.
type Pipes = (std::process::ChildStdin, std::process::ChildStdout);

async fn drive<L, F>(
    scenario: &Scenario,
    rec: Recorder,
    nemesis: RealNemesis,
    storage: Arc<Route>,
    clients: Clients<F>,
    mut pipes: Vec<Option<Pipes>>,
) -> History
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<RoutedConnection>, RealEnv) -> L,
{
    // Timed faults: those at 0 are the starting state, in place before any client runs.
    nemesis.start_timed();
    let timeouts = ConnectionTimeouts {
        connect: Duration::from_millis(scenario.redis.request_timeout_ms),
        response: Duration::from_millis(scenario.redis.request_timeout_ms),
    };
    let config = LockConfig::from_spec(&scenario.lock);
    let stop_at_us = scenario.duration_ms * 1000;
    let mut tasks = Vec::new();
    for c in 0..scenario.workload.clients {
        let conns: Vec<RoutedConnection> = nemesis.routes[c as usize]
            .iter()
            .map(|r| RoutedConnection::new(r.clone(), timeouts))
            .collect();
        let points = {
            let nemesis = nemesis.clone();
            let rec = rec.clone();
            PointHook::new(move |p| {
                let nemesis = nemesis.clone();
                let rec = rec.clone();
                async move {
                    nemesis.reached(c, p).await;
                    // A lock's own points are part of the history: they time its steps.
                    rec.record(&format!("client-{c}"), EventKind::Point { name: p.into() });
                }
            })
        };
        let env = nemesis.client_envs[c as usize]
            .clone()
            .with_gate(nemesis.gates[c as usize].clone())
            .with_points(points);
        let plan = ClientPlan {
            index: c,
            cycles: scenario.workload.cycles,
            hold_ms: scenario.workload.hold_ms,
            think_ms: scenario.workload.think_ms,
            stop_at_us,
            workload: scenario.workload.kind,
            nested: scenario.workload.nested,
            check_validity_before_write: scenario.lock.check_validity_before_write,
        };
        let store = Store::new(RoutedConnection::new(storage.clone(), timeouts));
        let late = nemesis.start_delay(c);
        let client: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            match (&clients, nemesis.processes.get(c as usize)) {
                (Clients::InProcess(make), _) => {
                    let lock = make(config.clone(), conns, env.clone());
                    Box::pin(run_client(
                        plan,
                        lock,
                        env,
                        rec.clone(),
                        nemesis.clone(),
                        store,
                    ))
                }
                (Clients::Programs, Some(Some(process))) => {
                    let (stdin, stdout) = pipes[c as usize].take().expect("one program per client");
                    let lock = ProcessLock::new(
                        process.clone(),
                        stdin,
                        stdout,
                        env.clone(),
                        config.clone(),
                    );
                    Box::pin(run_client(
                        plan,
                        lock,
                        env,
                        rec.clone(),
                        nemesis.clone(),
                        store,
                    ))
                }
                (Clients::Programs, _) => Box::pin(async {}),
            };
        let rec = rec.clone();
        tasks.push(tokio::spawn(async move {
            if !late.is_zero() {
                let ms = late.as_millis();
                rec.record(
                    "nemesis",
                    EventKind::Fault {
                        what: format!("client-{c} paused for {ms} ms (starts late)"),
                    },
                );
                tokio::time::sleep(late).await;
                rec.record(
                    "nemesis",
                    EventKind::Fault {
                        what: format!("client-{c} resumed"),
                    },
                );
            }
            client.await
        }));
    }
    let grace =
        scenario.lock.wait_ms + scenario.lock.lease_ms() + scenario.workload.hold_ms[1] + 5_000;
    // Crashed clients never finish: stop waiting once every live one has.
    let gates = nemesis.gates.clone();
    let all = async move {
        while !tasks
            .iter()
            .zip(&gates)
            .all(|(t, g)| t.is_finished() || g.is_dead())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(scenario.duration_ms + grace), all).await;
    // Let an in-flight failover finish recording before the history is read.
    nemesis.settle().await;
    let mut store = Store::new(RoutedConnection::new(storage, timeouts));
    record_final_state(scenario.workload.kind, &mut store, &rec).await;
    rec.snapshot()
}

/// The real-mode fault executor.
#[derive(Clone)]
struct RealNemesis {
    /// Each client's program, for `kind = "process"` (pauses, crashes and clock jumps reach it).
    processes: Arc<Vec<Option<Arc<ClientProcess>>>>,
    pending: Arc<Mutex<Vec<Fault>>>,
    groups: Arc<Vec<Mutex<Group>>>,
    rec: Recorder,
    detect: Duration,
    scenario: Arc<Scenario>,
    /// Each client's route to each master group: `routes[client][group]`.
    routes: Arc<Vec<Vec<Arc<Route>>>>,
    /// Where a cut connection leads.
    blackhole: String,
    /// How each master without replicas was started (for restarts after a crash).
    server_opts: Arc<Vec<ServerOptions>>,
    /// Each client's environment (its clock), by client index.
    client_envs: Arc<Vec<RealEnv>>,
    /// How many partitions currently cut each (client, group) connection.
    cuts: Arc<Mutex<BTreeMap<(usize, usize), u32>>>,
    /// Each client's gate: closed during its pauses, closed for good when it crashed.
    gates: Vec<Gate>,
}

impl RealNemesis {
    /// How late client `c` starts: the longest `pause` of it at `at_ms = 0`.
    fn start_delay(&self, c: u32) -> Duration {
        let ms = (self.scenario.faults.iter())
            .filter_map(|f| match (&f.kind, &f.trigger) {
                (
                    FaultKind::Pause {
                        client: ClientRef::Index(i),
                        for_ms,
                    },
                    Trigger::At(0),
                ) if *i == c => Some(*for_ms),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Duration::from_millis(ms)
    }

    /// Fires the faults with an absolute time: those at 0 now, the others from timer tasks.
    fn start_timed(&self) {
        let timed: Vec<Fault> = {
            let mut p = self.pending.lock().unwrap();
            let (timed, rest): (Vec<Fault>, Vec<Fault>) = p
                .drain(..)
                .partition(|f| matches!(f.trigger, Trigger::At(_)));
            *p = rest;
            timed
        };
        for f in timed {
            let Trigger::At(at_ms) = f.trigger else {
                continue;
            };
            if at_ms == 0 {
                self.fire(&f.kind);
                continue;
            }
            let me = self.clone();
            let at = Duration::from_millis(at_ms);
            tokio::spawn(async move {
                let now = Duration::from_micros(me.rec.now_us());
                tokio::time::sleep(at.saturating_sub(now)).await;
                me.fire(&f.kind);
            });
        }
    }

    /// Carries out a timed fault now (pauses are handled where they are triggered).
    fn fire(&self, kind: &FaultKind) {
        match kind {
            FaultKind::Failover { master } => {
                let me = self.clone();
                let m = *master as usize;
                tokio::task::spawn_blocking(move || me.fail_over(m));
            }
            FaultKind::ClockJump { node, by_ms }
                if client_index(&self.scenario, node).is_some() =>
            {
                let c = client_index(&self.scenario, node).expect("checked");
                self.client_envs[c].jump(*by_ms);
                if let Some(Some(p)) = self.processes.get(c) {
                    if let Err(e) = p.jump_clock(*by_ms) {
                        self.note(format!("{node} program clock jump failed: {e}"));
                    }
                }
                self.note(format!("{node} clock jumped by {by_ms} ms"));
            }
            FaultKind::ClockDrift { node, ppm } => {
                if let Some(c) = client_index(&self.scenario, node) {
                    self.client_envs[c].set_drift(*ppm);
                    self.note(format!("{node} clock drift set to {ppm} ppm"));
                } else {
                    // A master's drift is its libfaketime rate, set when it was started.
                    self.note(format!(
                        "{node} clock drift set to {ppm} ppm (libfaketime rate from the start)"
                    ));
                }
            }
            FaultKind::ClockJump { node, by_ms } => {
                let Some(m) = master_index(&self.scenario, node) else {
                    return;
                };
                let g = self.groups[m].lock().unwrap();
                let Group::Single(server) = &*g else { return };
                match server.jump_clock(*by_ms) {
                    Ok(()) => self.note(format!(
                        "{node} clock jumped by {by_ms} ms (libfaketime offset now {} ms)",
                        server.clock_offset_ms().unwrap_or(0)
                    )),
                    Err(e) => self.note(format!("{node} clock jump failed: {e}")),
                }
            }
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => {
                let Ok(cuts) = client_cuts(&self.scenario, nodes, from, *direction) else {
                    return;
                };
                self.cut(&cuts, true);
                let others = if from.is_empty() {
                    "everyone".to_string()
                } else {
                    from.join(", ")
                };
                self.note(format!(
                    "partition: {} cut off from {others} for {for_ms} ms (client connections to a black hole)",
                    nodes.join(", ")
                ));
                let me = self.clone();
                let for_ms = Duration::from_millis(*for_ms);
                tokio::spawn(async move {
                    tokio::time::sleep(for_ms).await;
                    me.cut(&cuts, false);
                    me.note("partition healed".to_string());
                });
            }
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => {
                let Some(m) = master_index(&self.scenario, node) else {
                    return;
                };
                if let Group::Single(server) = &*self.groups[m].lock().unwrap() {
                    server.kill();
                }
                self.note(format!("{node} killed (SIGKILL)"));
                let me = self.clone();
                let node = node.clone();
                let after = Duration::from_millis(*restart_after_ms);
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let opts = me.server_opts[m].clone();
                    match tokio::task::spawn_blocking(move || RedisServer::spawn(opts)).await {
                        Ok(Ok(server)) => me.restarted(m, &node, server),
                        Ok(Err(e)) => me.note(format!("{node} restart failed: {e}")),
                        Err(e) => me.note(format!("{node} restart failed: {e}")),
                    }
                });
            }
            _ => {}
        }
    }

    /// Puts a freshly started (empty) server in place of crashed master `m` and routes every
    /// client that is not cut off from it there.
    fn restarted(&self, m: usize, node: &str, server: RedisServer) {
        let url = server.url();
        let port = server.port();
        *self.groups[m].lock().unwrap() = Group::Single(server);
        let cuts = self.cuts.lock().unwrap();
        for (c, routes) in self.routes.iter().enumerate() {
            if cuts.get(&(c, m)).copied().unwrap_or(0) == 0 {
                routes[m].switch_to(url.clone());
            }
        }
        drop(cuts);
        self.note(format!("{node} restarted empty (new process, port {port})"));
    }

    /// Points each (client, group) connection of `cuts` at the black hole, or back.
    fn cut(&self, cuts: &[(usize, usize)], on: bool) {
        let mut counts = self.cuts.lock().unwrap();
        for &(c, g) in cuts {
            let n = counts.entry((c, g)).or_insert(0);
            let before = *n;
            *n = if on {
                before + 1
            } else {
                before.saturating_sub(1)
            };
            let route = &self.routes[c][g];
            if before == 0 && *n == 1 {
                route.switch_to(self.blackhole.clone());
            } else if before == 1 && *n == 0 {
                let url = self.groups[g].lock().unwrap().route().url();
                route.switch_to(url);
            }
        }
    }

    /// Takes the pending faults that `client` reaching `point` now triggers.
    fn take_due(&self, client: u32, point: ClientPoint) -> Vec<Fault> {
        let now_ms = self.rec.now_us() / 1000;
        let mut p = self.pending.lock().unwrap();
        let (due, rest): (Vec<Fault>, Vec<Fault>) = p.drain(..).partition(|f| {
            let Some(after_ms) = f.trigger.point_after_ms(point) else {
                return false;
            };
            now_ms >= after_ms && whose(&f.kind, client)
        });
        *p = rest;
        due
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// The first step of the failover recipe, before any client runs: nothing written from now
    /// on reaches the replica that will be promoted.
    fn hold_back_replication(&self) -> Result<(), RealError> {
        let pending = self.pending.lock().unwrap().clone();
        for f in pending {
            if let FaultKind::Failover { master } = f.kind {
                let mut g = self.groups[master as usize].lock().unwrap();
                if let Group::Replicated(rig) = &mut *g {
                    rig.isolate_replica()?;
                    self.note(format!(
                        "replication to redis-{master}-replica-0 held back (SIGSTOP, CLIENT KILL TYPE replica)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Kills master `m`, waits `failover_detect_ms`, promotes its replica and reroutes clients.
    fn fail_over(&self, m: usize) {
        let mut g = self.groups[m].lock().unwrap();
        let Group::Replicated(rig) = &mut *g else {
            self.note(format!("failover of redis-{m}: it has no replica"));
            return;
        };
        rig.original_master().kill();
        self.note(format!("redis-{m} killed (SIGKILL)"));
        std::thread::sleep(self.detect);
        match rig.fail_over() {
            Ok(_) => self.note(format!(
                "redis-{m}-replica-0 promoted to master of group {m}"
            )),
            Err(e) => self.note(format!("failover of redis-{m} failed: {e}")),
        }
    }

    /// Waits until no failover is in progress (each holds its group's lock).
    async fn settle(&self) {
        let groups = self.groups.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for g in groups.iter() {
                drop(g.lock().unwrap());
            }
        })
        .await;
    }
}

impl RealNemesis {
    /// Carries out the faults that `client` triggered at `point`; returns when the client may go
    /// on (never, if it crashed).
    async fn fire_at_client(&self, client: u32, point: &str, due: Vec<Fault>) {
        let mut stall = Duration::ZERO;
        let mut crashed = false;
        for f in due {
            match f.kind {
                FaultKind::Failover { master } => {
                    let me = self.clone();
                    tokio::task::spawn_blocking(move || me.fail_over(master as usize));
                }
                FaultKind::Pause { for_ms, .. } => {
                    self.note(format!(
                        "client-{client} paused for {for_ms} ms at {point} (timers and background tasks stopped)"
                    ));
                    stall = stall.max(Duration::from_millis(for_ms));
                }
                FaultKind::ClientCrash { .. } => {
                    self.rec.record(
                        &format!("client-{client}"),
                        EventKind::Crashed {
                            point: point.to_string(),
                        },
                    );
                    self.note(format!("client-{client} crashed at {point}"));
                    crashed = true;
                }
                other => self.fire(&other),
            }
        }
        let gate = &self.gates[client as usize];
        let program = self.processes.get(client as usize).cloned().flatten();
        if crashed {
            if let Some(p) = &program {
                p.kill();
                self.note(format!(
                    "client-{client} program pid {} killed (SIGKILL)",
                    p.pid()
                ));
            }
            gate.kill();
            std::future::pending::<()>().await;
        }
        if !stall.is_zero() {
            gate.close();
            if let Some(p) = &program {
                if let Err(e) = p.pause() {
                    self.note(format!("client-{client} program SIGSTOP failed: {e}"));
                }
            }
            tokio::time::sleep(stall).await;
            if let Some(p) = &program {
                if let Err(e) = p.resume() {
                    self.note(format!("client-{client} program SIGCONT failed: {e}"));
                }
            }
            gate.open();
            self.note(format!("client-{client} resumed"));
        }
    }
}

/// Whether fault `kind` (triggered by `client`) is for that client.
fn whose(kind: &FaultKind, client: u32) -> bool {
    match kind {
        FaultKind::Pause {
            client: ClientRef::Index(i),
            ..
        } => *i == client,
        FaultKind::ClientCrash { client: c } => *c == client,
        _ => true,
    }
}

impl FaultPoints for RealNemesis {
    async fn acquired(&self, client: u32) {
        let now_ms = self.rec.now_us() / 1000;
        let due: Vec<Fault> = {
            let mut p = self.pending.lock().unwrap();
            let (due, rest): (Vec<Fault>, Vec<Fault>) = p.drain(..).partition(|f| {
                let Trigger::Acquired { after_ms } = f.trigger else {
                    return false;
                };
                now_ms >= after_ms && whose(&f.kind, client)
            });
            *p = rest;
            due
        };
        self.fire_at_client(client, "acquired", due).await;
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let now_ms = self.rec.now_us() / 1000;
        let due =
            crate::sim::nemesis::SimNemesis::due_at_point(&self.pending, now_ms, client, point);
        self.fire_at_client(client, point, due).await;
    }

    async fn before_write(&self, client: u32) {
        let due = self.take_due(client, ClientPoint::BeforeWrite);
        self.fire_at_client(client, "before_write", due).await;
    }
}
