//! The real-mode nemesis: carries out a scenario's faults on spawned processes, when the shared
//! [`Schedule`] says they fire. Faults use deterministic recipes rather than luck:
//! - `failover`: replication to the replica is held back from the start (SIGSTOP of the replica
//!   and `CLIENT KILL TYPE replica` on the master), so the promoted replica is certain not to have
//!   the lock; on the trigger the master is SIGKILLed and, `failover_detect_ms` later, the replica
//!   is resumed, promoted with `REPLICAOF NO ONE`, and clients are routed to it.
//! - `pause`: the client stops for `for_ms`, at its named point (`acquired`, `before_write`, a
//!   lock's own) or at a fixed time wherever its task stands, and so do its timers and background
//!   tasks (a watchdog): each real client has a [`Gate`](crate::real::Gate) that its whole task
//!   and its environment pass through, and the pause closes it, as a stop-the-world GC stops
//!   every thread. Replies already on their way arrive and wait, unhandled, until it opens. A
//!   client program is `SIGSTOP`ped as well. A pause at `at_ms = 0` is a late start.
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
//! - with Redis Sentinel (`sentinel_deployment.rs`): a `crash` of any server is a `SIGKILL` (and
//!   a restart, empty, behind the same announced address); a `partition` cuts the named links in
//!   the link proxies every server and sentinel is reached through (`network.rs`). Nothing is
//!   promoted by lockcheck: the sentinels decide, and `sentinel_events.rs` records what.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::redis::real::cluster_migration;
use crate::backend::redis::real::cluster_world::{self, ClusterRun};
use crate::backend::redis::real::failover::FailoverRig;
use crate::backend::redis::real::plan::{client_cuts, master_index, sentinel_links, server_index};
use crate::backend::redis::real::recipes::FailsOver;
use crate::backend::redis::real::sentinel_deployment::SentinelDeployment;
use crate::fault::partition::describe_partition;
use crate::fault::{
    ClientRef, ClusterFailoverForm, Cut, Fault, FaultKind, Nemesis, Occasion, Refused,
};
use crate::history::{EventKind, Recorder};
use crate::real::client_programs::client_program::Programs;
use crate::real::connection::Route;
use crate::real::nemesis::client_stops::{kill_program, signal_program};
use crate::real::nemesis::firing::restarts_in_run;
use crate::real::nemesis::plan::client_index;
use crate::real::observers::witness::Witness;
use crate::real::servers::redis_server::{RedisServer, ServerOptions};
use crate::real::RealError;
use crate::real::{Gate, RealEnv};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;

/// One master group on real processes.
pub(crate) enum Group {
    /// A master alone: crashed and restarted, or clock-faked, in place.
    Single(RedisServer),
    /// A master and the replica a failover promotes.
    Replicated(Box<FailoverRig>),
    /// A server lockcheck did not start (`--redis`): used, never faulted.
    External(String),
    /// A group under Redis Sentinel (`sentinel_deployment.rs`): the URL of its first master's
    /// proxy; where the master is later, each client learns from the sentinels.
    Sentinel(String),
}

impl Group {
    /// Where the group's master is now.
    pub(crate) fn route(&self) -> Arc<Route> {
        match self {
            Group::Single(s) => Route::new(s.url()),
            Group::Replicated(r) => r.route(),
            Group::External(url) | Group::Sentinel(url) => Route::new(url.clone()),
        }
    }
}

/// The real-mode fault executor.
#[derive(Clone)]
pub(crate) struct RealNemesis {
    /// Each client's program, for `kind = "client-program"` (pauses, crashes and clock jumps reach it).
    pub(crate) processes: Programs,
    /// The faults still to fire.
    pub(crate) schedule: Schedule,
    /// Each master group's processes; a failover or restart holds its group's lock.
    pub(crate) groups: Arc<Vec<Mutex<Group>>>,
    /// Where faults are recorded.
    pub(crate) rec: Recorder,
    /// From a master's death to its replica's promotion (`failover_detect_ms`).
    pub(crate) detect: Duration,
    /// The scenario, for node names and faults' targets.
    pub(crate) scenario: Arc<Scenario>,
    /// Each client's route to each master group: `routes[client][group]`.
    pub(crate) routes: Arc<Vec<Vec<Arc<Route>>>>,
    /// Where a cut connection leads.
    pub(crate) blackhole: String,
    /// How each master without replicas was started (for restarts after a crash).
    pub(crate) server_opts: Arc<Vec<ServerOptions>>,
    /// Each client's environment (its clock), by client index.
    pub(crate) client_envs: Arc<Vec<RealEnv>>,
    /// How many partitions currently cut each (client, group) connection.
    pub(crate) cuts: Arc<Mutex<BTreeMap<(usize, usize), u32>>>,
    /// Each client's gate: closed during its pauses, closed for good when it crashed.
    pub(crate) gates: Vec<Gate>,
    /// The servers, sentinels and link proxies of a Sentinel run: partitions cut its links and
    /// crashes kill its servers; the sentinels decide the rest.
    pub(crate) sentinel: Option<Arc<SentinelDeployment>>,
    /// The `MONITOR` witness, if it runs: a clock jump is made between two of its ties (so that
    /// it places each removal by the clock the server ran on then), a watched server is quiesced
    /// before it is killed, and a restarted one is followed before clients are routed to it.
    pub(crate) witness: Option<Witness>,
    /// The Redis Cluster of a `[redis.cluster]` run: crashes kill and restart its nodes,
    /// partitions cut its link proxies, and the cluster promotes by itself
    /// (`cluster_world.rs`).
    pub(crate) cluster: Option<Arc<ClusterRun>>,
}

impl RealNemesis {
    /// A nemesis for `scenario`'s clients (their environments, and their programs if they are
    /// programs), recording to `rec`, with no server of its own yet: a world adds its servers
    /// (master groups, sentinels, a cluster) with struct update syntax.
    pub(crate) fn for_clients(
        scenario: &Scenario,
        rec: Recorder,
        client_envs: Vec<RealEnv>,
        processes: Programs,
    ) -> RealNemesis {
        RealNemesis {
            processes,
            schedule: Schedule::new(scenario.faults.clone()),
            groups: Arc::default(),
            rec,
            detect: Duration::from_millis(scenario.redis.failover_detect_ms),
            scenario: Arc::new(scenario.clone()),
            routes: Arc::new(vec![Vec::new(); scenario.workload.clients as usize]),
            blackhole: String::new(),
            server_opts: Arc::default(),
            client_envs: Arc::new(client_envs),
            cuts: Arc::default(),
            gates: (0..scenario.workload.clients)
                .map(|_| Gate::default())
                .collect(),
            sentinel: None,
            witness: None,
            cluster: None,
        }
    }

    /// Fires the faults with an absolute time: those at 0 now, the others from timer tasks.
    /// Called as the clients start, and `at_ms` counts from then, as in simulation: the set-up
    /// after true time 0 (the witness's `MONITOR` connections, holding replication back) takes
    /// from one to tens of milliseconds, and a pause meant for 7 ms into an acquire would
    /// otherwise hit a client that has not sent anything yet.
    pub(crate) fn start_timed(&self) {
        let start = tokio::time::Instant::now();
        for (at_ms, kind) in self.schedule.take_timed() {
            if at_ms == 0 {
                self.fire(&kind);
                continue;
            }
            let me = self.clone();
            let at = start + Duration::from_millis(at_ms);
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                me.fire(&kind);
            });
        }
    }

    /// Carries out a timed fault now (pauses are handled where they are triggered).
    pub(crate) fn fire(&self, kind: &FaultKind) {
        self.fire_through(kind, self, &Occasion::TIMED);
    }

    /// Carries out one fault through `n` (this nemesis, or its view from a client's point).
    /// What real mode has no recipe for was refused before anything was spawned
    /// (`recipes.rs`), so what is left to refuse here is a target this run cannot reach.
    fn fire_through<N: Nemesis>(&self, kind: &FaultKind, n: &N, at: &Occasion<'_>) {
        if let Err(Refused::Because(why)) = kind.fire(n, at) {
            self.note(why);
        }
    }

    /// Puts a freshly started (empty) server in place of crashed master `m` and routes every
    /// client that is not cut off from it there.
    fn restarted(&self, m: usize, node: &str, server: RedisServer) {
        let url = server.url();
        let port = server.port();
        // Followed before any client can reach it, so the witness misses none of its commands.
        if let Some(w) = &self.witness {
            w.attach(node, port);
        }
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
    fn cut_connections(&self, cuts: &[(usize, usize)], on: bool) {
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

    /// Restarts crashed `node` `after_ms` from now: `start` (blocking) brings up its new process,
    /// `started` puts it in place and says so; a failure is noted instead.
    pub(super) fn restart_after<T: Send + 'static>(
        &self,
        node: &str,
        after_ms: u64,
        start: impl FnOnce() -> Result<T, RealError> + Send + 'static,
        started: impl FnOnce(&RealNemesis, &str, T) + Send + 'static,
    ) {
        if !restarts_in_run(&self.rec, after_ms, self.scenario.duration_ms) {
            // As on the other backends: a restart due after the run is not carried out.
            self.note(format!(
                "{node} stays down (its restart would come after the run's end)"
            ));
            return;
        }
        let me = self.clone();
        let node = node.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after_ms)).await;
            match tokio::task::spawn_blocking(start).await {
                Ok(Ok(process)) => started(&me, &node, process),
                Ok(Err(e)) => me.note(format!("{node} restart failed: {e}")),
                Err(e) => me.note(format!("{node} restart failed: {e}")),
            }
        });
    }

    /// Heals a partition `for_ms` from now with `heal`, and says so.
    pub(super) fn heal_after(&self, for_ms: u64, heal: impl FnOnce(&RealNemesis) + Send + 'static) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            heal(&me);
            me.note("partition healed".to_string());
        });
    }

    pub(super) fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// Stops client `client` for `stall`, as a stop-the-world GC pause stops a process: its gate
    /// closes now (its task, and every task and timer of its environment, wait there), its
    /// program, if it is one, is `SIGSTOP`ped; a task of the nemesis's own resumes it, since the
    /// client can resume nothing while it stands. A crash while it stands keeps it shut.
    fn stop_client(&self, client: u32, stall: Duration) {
        let gate = self.gates[client as usize].clone();
        let program = self.processes.get(client as usize).cloned().flatten();
        gate.close();
        signal_program(&self.rec, client, program.as_deref(), true);
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(stall).await;
            signal_program(&me.rec, client, program.as_deref(), false);
            if !gate.is_dead() {
                gate.open();
                me.note(format!("client-{client} resumed"));
            }
        });
    }

    /// The first step of the failover recipe, before any client runs: nothing written from now
    /// on reaches the replica that will be promoted.
    pub(crate) fn hold_back_replication(&self) -> Result<(), RealError> {
        for master in FailsOver::of(&self.schedule.pending()) {
            let mut g = self.groups[master as usize].lock().unwrap();
            if let Group::Replicated(rig) = &mut *g {
                rig.isolate_replica()?;
                self.note(format!(
                    "replication to redis-{master}-replica-0 held back (SIGSTOP, CLIENT KILL TYPE replica)"
                ));
            }
        }
        Ok(())
    }

    /// Kills master `m`, waits `failover_detect_ms`, promotes its replica and reroutes clients.
    fn kill_and_promote(&self, m: usize) {
        let Some(g) = self.groups.get(m) else {
            self.note(format!("failover of redis-{m}: no such master group here"));
            return;
        };
        let mut g = g.lock().unwrap();
        let Group::Replicated(rig) = &mut *g else {
            self.note(format!("failover of redis-{m}: it has no replica"));
            return;
        };
        if let Some(w) = &self.witness {
            w.quiesce(&format!("redis-{m}"));
        }
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
    pub(crate) async fn settle(&self) {
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
        let at = Occasion {
            point,
            by: Some(client),
        };
        let here = AtClient {
            n: self,
            stall: Cell::new(Duration::ZERO),
            crashed: Cell::new(false),
        };
        for f in due {
            self.fire_through(&f.kind, &here, &at);
        }
        let (stall, crashed) = (here.stall.get(), here.crashed.get());
        let gate = &self.gates[client as usize];
        let program = self.processes.get(client as usize).cloned().flatten();
        if crashed {
            kill_program(&self.rec, client, program.as_deref());
            gate.kill();
            std::future::pending::<()>().await;
        }
        if !stall.is_zero() {
            self.stop_client(client, stall);
            gate.wait_open().await;
        }
    }
}

/// What spawned processes give the fault families: a failover rig, kills and restarts, black
/// holes or link proxies for cuts, libfaketime and each client's skewed environment for clocks.
/// A client's pause or crash at a named point happens in its task ([`AtClient`]); a timed pause
/// closes its gate from outside, wherever its task stands. A server pause has no recipe on Redis.
impl Nemesis for RealNemesis {
    /// A pause at a fixed time: the client's gate closes wherever its task stands.
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        let Some(c) = victim.victim(at.by, &self.rec) else {
            self.note("pause of the holder skipped: nobody holds the lock".into());
            return Ok(());
        };
        self.note(format!(
            "client-{c} paused for {for_ms} ms (timed: its task, timers, background tasks and \
             the handling of its replies stopped)"
        ));
        self.stop_client(c, Duration::from_millis(for_ms));
        Ok(())
    }

    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.kill_and_promote(master as usize));
        Ok(())
    }

    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        if let Some(c) = client_index(&self.scenario, node) {
            if wall_only {
                self.client_envs[c].jump_wall(by_ms);
            } else {
                self.client_envs[c].jump(by_ms);
            }
            if let Some(Some(p)) = self.processes.get(c) {
                // A client program's clocks are one libfaketime clock: both move.
                if let Err(e) = p.jump_clock(by_ms) {
                    self.note(format!("{node} program clock jump failed: {e}"));
                }
            }
            let which = if wall_only { "wall clock" } else { "clock" };
            self.note(format!("{node} {which} jumped by {by_ms} ms"));
            return Ok(());
        }
        let Some(g) = master_index(&self.scenario, node).and_then(|m| self.groups.get(m)) else {
            return Err(Refused::Lacking);
        };
        let g = g.lock().unwrap();
        let Group::Single(server) = &*g else {
            return Err(Refused::Lacking);
        };
        let jumped = match &self.witness {
            Some(w) => w.clock_ties().around(node, || server.jump_clock(by_ms)),
            None => server.jump_clock(by_ms),
        };
        match jumped {
            Ok(()) => self.note(format!(
                "{node} clock jumped by {by_ms} ms (libfaketime offset now {} ms)",
                server.clock_offset_ms().unwrap_or(0)
            )),
            Err(e) => self.note(format!("{node} clock jump failed: {e}")),
        }
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        if let Some(c) = client_index(&self.scenario, node) {
            self.client_envs[c].set_drift(ppm);
            self.note(format!("{node} clock drift set to {ppm} ppm"));
        } else {
            // A master's drift is its libfaketime rate, set when it was started.
            self.note(format!(
                "{node} clock drift set to {ppm} ppm (libfaketime rate from the start)"
            ));
        }
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction,
            for_ms,
        } = *cut;
        if let Some(d) = self.cluster.clone() {
            return cluster_world::cut(self, d, cut);
        }
        if let Some(d) = self.sentinel.clone() {
            let Ok(links) = sentinel_links(&self.scenario, nodes, from, direction) else {
                return Err(Refused::Lacking);
            };
            d.net.cut(&links, true);
            self.note(format!(
                "{} (the link proxies hold what crosses the cut)",
                describe_partition(nodes, from, for_ms)
            ));
            self.heal_after(for_ms, move |_| d.net.cut(&links, false));
            return Ok(());
        }
        let Ok(cuts) = client_cuts(&self.scenario, nodes, from, direction) else {
            return Err(Refused::Lacking);
        };
        self.cut_connections(&cuts, true);
        self.note(format!(
            "{} (client connections to a black hole)",
            describe_partition(nodes, from, for_ms)
        ));
        self.heal_after(for_ms, move |me| me.cut_connections(&cuts, false));
        Ok(())
    }

    fn cluster_failover(&self, master: u32, form: ClusterFailoverForm) -> Result<(), Refused> {
        match self.cluster.clone() {
            Some(d) => cluster_world::manual_failover(self, d, master, form),
            None => Err(Refused::Lacking),
        }
    }

    fn migrate_slot(&self, to: u32, for_ms: u64) -> Result<(), Refused> {
        match self.cluster.clone() {
            Some(d) => cluster_migration::migrate(self, d, to, for_ms),
            None => Err(Refused::Lacking),
        }
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        if let Some(d) = self.cluster.clone() {
            return cluster_world::crash(self, d, node, restart_after_ms);
        }
        if let Some(d) = self.sentinel.clone() {
            let Some(idx) = server_index(&self.scenario, node) else {
                return Err(Refused::Lacking);
            };
            if d.crash(idx) {
                self.note(format!("{node} killed (SIGKILL)"));
            }
            self.restart_after(
                node,
                restart_after_ms,
                move || d.restart(idx),
                |me, node, pid| {
                    me.note(format!(
                        "{node} restarted empty (new process, pid {pid}, same announced address)"
                    ))
                },
            );
            return Ok(());
        }
        let Some(m) = master_index(&self.scenario, node).filter(|&m| m < self.groups.len()) else {
            return Err(Refused::Lacking);
        };
        if let Group::Single(server) = &*self.groups[m].lock().unwrap() {
            if let Some(w) = &self.witness {
                w.quiesce(node);
            }
            server.kill();
        }
        self.note(format!("{node} killed (SIGKILL)"));
        let opts = self.server_opts[m].clone();
        self.restart_after(
            node,
            restart_after_ms,
            move || RedisServer::spawn(opts),
            move |me, node, server| me.restarted(m, node, server),
        );
        Ok(())
    }
}

/// The nemesis as a client that reached a named point sees it: its own pause and crash happen in
/// its task (gathered here, carried out by [`RealNemesis::fire_at_client`]); the rest is the
/// nemesis's.
struct AtClient<'a> {
    n: &'a RealNemesis,
    stall: Cell<Duration>,
    crashed: Cell<bool>,
}

impl Nemesis for AtClient<'_> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        _victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        // The schedule hands a client only the pauses that are its own.
        let client = at.by.expect("a client's point");
        self.n.note(format!(
            "client-{client} paused for {for_ms} ms at {} (timers and background tasks stopped)",
            at.point
        ));
        self.stall
            .set(self.stall.get().max(Duration::from_millis(for_ms)));
        Ok(())
    }

    fn crash_client(&self, at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        let client = at.by.expect("a client's point");
        self.n.rec.record(
            &format!("client-{client}"),
            EventKind::Crashed {
                point: at.point.to_string(),
            },
        );
        self.n
            .note(format!("client-{client} crashed at {}", at.point));
        self.crashed.set(true);
        Ok(())
    }

    crate::fault::forward_to_world!(n);
}

impl FaultPoints for RealNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.schedule.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let now_ms = self.rec.now_us() / 1000;
        let due = self.schedule.take_at_point(now_ms, client, point);
        self.fire_at_client(client, point, due).await;
    }
}
