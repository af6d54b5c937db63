//! The fault executor of a real ZooKeeper run: the capabilities spawned ZooKeeper servers and the
//! clients' forwarders give the fault families.
//!
//! The `zookeeper-client` crate pings from a task of its own, not from the lock's: a closed gate
//! alone would leave a paused client's session alive, where a paused JVM's (its `SendThread`
//! stopped with every other thread) expires. So a client's pause also holds every byte of its
//! forwarders for the pause: the server hears nothing, as from a paused process. (Unlike a paused
//! process, the crate's own timers run meanwhile: it reports a connection loss and, after 7/5 of
//! the timeout, an expiry; a paused holder looks at neither before its next step, so the
//! scenarios see the same.) A client's crash holds its forwarders for good before its task is
//! aborted: dropping the crate's client sends `closeSession`, which a dead process never does;
//! its session must end by timeout, as in simulation.
//!
//! A partition holds the forwarders between the cut clients and servers (both ways). A crash of
//! `zookeeper-<i>` is a `SIGKILL` and, after `restart_after_ms`, a start on the same data
//! directory (its sessions and znodes are in its snapshot and transaction log; a restart due
//! after the scenario's `duration_ms` is not carried out: the crash is for good); a failover kills
//! the leader and lets the other two elect one. `zookeeper-0` names the server leading when the
//! run starts (the world's `order`), as in simulation. Which faults have a recipe at all is
//! `recipes.rs`'s, decided before anything is spawned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use crate::backend::zookeeper::real::cuts::zookeeper_cuts;
use crate::backend::zookeeper::real::server::ZooKeeper;
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::history::Recorder;
use crate::real::client_tasks::Settle;
use crate::real::nemesis::client_stops::{ClientTasks, Stopping};
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::nemesis::firing::{note, restarts_in_run, start_timed};
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::points::due;

/// How long a failover asks the ensemble who leads before it is skipped.
const LEADER_WAIT: Duration = Duration::from_secs(2);

/// How long a failover waits for the ensemble to say who leads next before it gives up looking.
const ELECTION_WATCH: Duration = Duration::from_secs(30);

/// The fault executor of a real ZooKeeper run.
#[derive(Clone)]
pub(crate) struct ZkNemesis {
    pub(crate) pending: Schedule,
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) zk: Arc<ZooKeeper>,
    /// `order[i]`: the deployment's index of the server the scenario calls `zookeeper-<i>`.
    pub(crate) order: Arc<Vec<usize>>,
    pub(crate) rec: Recorder,
    /// `proxies[c][s]`: client `c`'s forwarder to the deployment's server `s`.
    pub(crate) proxies: Arc<Vec<Vec<CutProxy>>>,
    /// The clients' gates and tasks.
    pub(crate) clients: ClientTasks,
    /// How many server faults are under way (a restart to come, a pause to end, an election to
    /// see).
    pub(crate) in_flight: Arc<watch::Sender<usize>>,
    /// `resumed[c]`: set when client `c`'s pause ends; its session asks the server about itself
    /// before its next request (`RealZkClient::resumed_by`).
    pub(crate) resumed: Arc<Vec<Arc<AtomicBool>>>,
}

/// A server fault under way, until dropped.
struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl ZkNemesis {
    fn note(&self, what: String) {
        note(&self.rec, what);
    }

    fn begin(&self) -> InFlight {
        self.in_flight.send_modify(|n| *n += 1);
        InFlight(self.in_flight.clone())
    }

    pub(crate) fn start_timed(&self) {
        start_timed(&self.pending, &self.rec, self);
    }

    /// The deployment's index of the server the scenario calls `node`.
    fn server(&self, node: &str) -> Option<usize> {
        let i: usize = node.strip_prefix("zookeeper-")?.parse().ok()?;
        self.order.get(i).copied()
    }

    /// The scenario's name for the deployment's server `index`.
    fn name(&self, index: usize) -> String {
        let i = self.order.iter().position(|&s| s == index).unwrap_or(index);
        format!("zookeeper-{i}")
    }

    /// Holds (`true`) or lets go (`false`) every forwarder of `client`.
    fn hold_client(&self, client: u32, on: bool) {
        for p in &self.proxies[client as usize] {
            p.cut(on);
        }
    }

    /// Watches the ensemble elect a leader other than the killed `old` and records who it is.
    async fn watch_election(&self, old: usize, killed_at: Instant) {
        let _busy = self.begin();
        while killed_at.elapsed() < ELECTION_WATCH {
            let zk = self.zk.clone();
            let leader = tokio::task::spawn_blocking(move || zk.leader())
                .await
                .ok()
                .flatten();
            if let Some(new) = leader.filter(|&l| l != old) {
                self.note(format!(
                    "{} leads (elected {} ms after the kill)",
                    self.name(new),
                    killed_at.elapsed().as_millis()
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.note(format!(
            "no new leader {} s after the kill",
            ELECTION_WATCH.as_secs()
        ));
    }
}

/// What spawned ZooKeeper servers and the clients' forwarders can do at any time.
impl Nemesis for ZkNemesis {
    /// A named client held back from its start (`at_ms = 0`); a pause at a client's point is
    /// [`FaultPoints::reached`]'s.
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.clients.start_late(victim, for_ms)
    }

    /// A client program's clock: its libfaketime clock ([`ClientTasks::program_clock`]).
    fn jump_clock(&self, node: &str, by_ms: i64, _wall_only: bool) -> Result<(), Refused> {
        self.clients.program_clock(node, Some(by_ms), 0)
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        self.clients.program_clock(node, None, ppm)
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let cuts =
            zookeeper_cuts(&self.scenario, cut).map_err(|e| Refused::Because(e.to_string()))?;
        let held = cuts
            .iter()
            .map(|&(c, z)| self.proxies[c][self.order[z]].clone())
            .collect();
        let me = self.clone();
        CutProxy::hold_for(held, cut.for_ms, move || me.note("partition healed".into()));
        self.note(format!(
            "{} (forwarders hold every byte)",
            describe_partition(cut.nodes, cut.from, cut.for_ms)
        ));
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(s) = self.server(node) else {
            return Err(Refused::Because(format!("crash of {node}: no such server")));
        };
        if self.zk.pid(s).is_none() {
            return Err(Refused::Because(format!("crash of {node}: it is down")));
        }
        let busy = self.begin();
        let me = self.clone();
        let node = node.to_string();
        let after = Duration::from_millis(restart_after_ms);
        let restarts = restarts_in_run(&self.rec, restart_after_ms, self.scenario.duration_ms);
        tokio::spawn(async move {
            let _busy = busy;
            let zk = me.zk.clone();
            let pid = zk.pid(s);
            let _ = tokio::task::spawn_blocking(move || zk.kill(s)).await;
            me.note(format!(
                "{node} killed (SIGKILL, pid {pid:?}); its sessions and znodes are on its disk{}",
                if restarts {
                    ""
                } else {
                    "; it stays down (its restart would come after the run's end)"
                }
            ));
            if !restarts {
                return;
            }
            tokio::time::sleep(after).await;
            let zk = me.zk.clone();
            match tokio::task::spawn_blocking(move || zk.restart(s)).await {
                Ok(Ok(())) => me.note(format!("{node} restarted (its data directory kept)")),
                other => me.note(format!("{node} restart failed: {other:?}")),
            }
        });
        Ok(())
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        if self.zk.len() < 3 {
            return Err(Refused::Because(
                "failover of a standalone ZooKeeper: there is no other server".into(),
            ));
        }
        if let Some(down) = (0..self.zk.len()).find(|&s| self.zk.pid(s).is_none()) {
            return Err(Refused::Because(format!(
                "failover skipped: {} is down, and the ensemble would lose its quorum",
                self.name(down)
            )));
        }
        let busy = self.begin();
        let me = self.clone();
        tokio::spawn(async move {
            let _busy = busy;
            let zk = me.zk.clone();
            let Some(old) = tokio::task::spawn_blocking(move || zk.leader_within(LEADER_WAIT))
                .await
                .ok()
                .flatten()
            else {
                me.note(
                    "failover skipped: no server says it leads (the ensemble is electing)".into(),
                );
                return;
            };
            let zk = me.zk.clone();
            let pid = zk.pid(old);
            let _ = tokio::task::spawn_blocking(move || zk.kill(old)).await;
            let killed_at = Instant::now();
            me.note(format!(
                "{} (the leader) killed (SIGKILL, pid {pid:?}); the ensemble elects a new leader",
                me.name(old)
            ));
            me.watch_election(old, killed_at).await;
        });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        let Some(s) = self.server(node) else {
            return Err(Refused::Because(format!("pause of {node}: no such server")));
        };
        if self.zk.pid(s).is_none() {
            return Err(Refused::Because(format!(
                "pause of {node} skipped: it is not running"
            )));
        }
        let busy = self.begin();
        let me = self.clone();
        let node = node.to_string();
        tokio::spawn(async move {
            let _busy = busy;
            let zk = me.zk.clone();
            match tokio::task::spawn_blocking(move || zk.pause(s)).await {
                Ok(Ok(())) => me.note(format!(
                    "{node} paused for {for_ms} ms (SIGSTOP: it answers nothing, its session \
                     tracker stands still)"
                )),
                other => {
                    me.note(format!("pause of {node} failed: {other:?}"));
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            let zk = me.zk.clone();
            match tokio::task::spawn_blocking(move || zk.resume(s)).await {
                Ok(Ok(())) => me.note(format!("{node} resumed")),
                other => me.note(format!("resume of {node} failed: {other:?}")),
            }
        });
        Ok(())
    }
}

impl Settle for ZkNemesis {
    /// Waits for the server faults under way: a restart, the end of a pause, an election.
    async fn settle(&self) {
        let _ = self.in_flight.subscribe().wait_for(|&n| n == 0).await;
    }
}

impl FaultPoints for ZkNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.pending.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.rec, client, point);
        if fired.is_empty() {
            return;
        }
        // A crash holds the forwarders before the task (and the crate's client with it) is
        // dropped, so no `closeSession` reaches the server; a pause holds them for the pause.
        let how = Stopping {
            paused: "its forwarders hold every byte, so its session's pings stop too",
            crashed: "task aborted; its forwarders hold every byte, so its session ends by timeout",
            hold: &|on| {
                if !on {
                    // A pause ends (a crash never lets go): the client runs again. What its
                    // library's timers did meanwhile (a paused JVM's would not have run) is
                    // dropped: the connections it opened during the pause are closed unforwarded.
                    for p in &self.proxies[client as usize] {
                        p.forget_new_connections();
                    }
                    self.resumed[client as usize].store(true, Ordering::SeqCst);
                }
                self.hold_client(client, on);
            },
        };
        self.clients
            .fire_at_client(self, client, point, fired, &how)
            .await;
    }
}
