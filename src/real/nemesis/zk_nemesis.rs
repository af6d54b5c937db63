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
//! directory (its sessions and znodes are in its snapshot and transaction log); a failover kills
//! the leader and lets the other two elect one. `zookeeper-0` names the server leading when the
//! run starts (the world's `order`), as in simulation. Which faults have a recipe at all is
//! `recipes.rs`'s, decided before anything is spawned.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client_stops::{ClientTasks, Stops};
use super::plan::zookeeper_cuts;
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::real::mysql_world::CutProxy;
use crate::real::servers::zookeeper::ZooKeeper;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::mysql::due;

/// How long a failover waits for the ensemble to say who leads next before it gives up looking.
const ELECTION_WATCH: Duration = Duration::from_secs(30);

/// The fault executor of a real ZooKeeper run.
#[derive(Clone)]
pub(in crate::real) struct ZkNemesis {
    pub(in crate::real) pending: Schedule,
    pub(in crate::real) scenario: Arc<Scenario>,
    pub(in crate::real) zk: Arc<ZooKeeper>,
    /// `order[i]`: the deployment's index of the server the scenario calls `zookeeper-<i>`.
    pub(in crate::real) order: Arc<Vec<usize>>,
    pub(in crate::real) rec: Recorder,
    /// `proxies[c][s]`: client `c`'s forwarder to the deployment's server `s`.
    pub(in crate::real) proxies: Arc<Vec<Vec<CutProxy>>>,
    /// The clients' gates and tasks.
    pub(in crate::real) clients: ClientTasks,
    /// Server faults still under way (a restart to come, a pause to end, an election to see).
    pub(in crate::real) in_flight: Arc<AtomicUsize>,
}

/// A server fault under way, until dropped.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ZkNemesis {
    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    fn begin(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.in_flight.clone())
    }

    pub(in crate::real) fn start_timed(&self) {
        for (at_ms, kind) in self.pending.take_timed() {
            let me = self.clone();
            tokio::spawn(async move {
                let now = Duration::from_micros(me.rec.now_us());
                tokio::time::sleep(Duration::from_millis(at_ms).saturating_sub(now)).await;
                me.fire(&kind, &me, &Occasion::TIMED);
            });
        }
    }

    /// Waits for the server faults under way: a restart, the end of a pause, an election.
    pub(in crate::real) async fn settle(&self) {
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn fire<N: Nemesis>(&self, kind: &FaultKind, n: &N, at: &Occasion<'_>) {
        match kind.fire(n, at) {
            Ok(()) => {}
            Err(Refused::Because(why)) => self.note(why),
            Err(Refused::Lacking) => self.note(format!("{kind:?}: no real-mode recipe here")),
        }
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

    /// The faults `client` triggered at `point`; returns when it may go on (never, if it crashed).
    async fn fire_at_client(&self, client: u32, point: &str, due: Vec<FaultKind>) {
        let at = Occasion {
            point,
            by: Some(client),
        };
        let here = AtClient {
            n: self,
            stops: Stops::default(),
        };
        for kind in due {
            self.fire(&kind, &here, &at);
            if here.stops.crashed() {
                // Before the task (and the crate's client with it) is dropped: no
                // `closeSession` may reach the server.
                self.hold_client(client, true);
            }
            self.clients
                .crash_if_asked(
                    here.stops.crashed(),
                    client,
                    point,
                    "task aborted; its forwarders hold every byte, so its session ends by timeout",
                )
                .await;
        }
        let stall = here.stops.stall();
        if !stall.is_zero() {
            self.hold_client(client, true);
            self.clients.stall_if_asked(stall, client).await;
            self.hold_client(client, false);
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
    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction,
            for_ms,
        } = *cut;
        let cuts = zookeeper_cuts(&self.scenario, nodes, from, direction)
            .map_err(|e| Refused::Because(e.to_string()))?;
        let held: Vec<CutProxy> = cuts
            .iter()
            .map(|&(c, z)| self.proxies[c][self.order[z]].clone())
            .collect();
        for p in &held {
            p.cut(true);
        }
        self.note(format!(
            "{} (forwarders hold every byte)",
            describe_partition(nodes, from, for_ms)
        ));
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            for p in &held {
                p.cut(false);
            }
            me.note("partition healed".into());
        });
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
        tokio::spawn(async move {
            let _busy = busy;
            let zk = me.zk.clone();
            let pid = zk.pid(s);
            let _ = tokio::task::spawn_blocking(move || zk.kill(s)).await;
            me.note(format!(
                "{node} killed (SIGKILL, pid {pid:?}); its sessions and znodes are on its disk"
            ));
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
            let Some(old) = tokio::task::spawn_blocking(move || zk.leader())
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

/// The nemesis as a client that reached a named point sees it: its own pause and crash happen in
/// its task (gathered here, carried out by [`ZkNemesis::fire_at_client`]); the rest is the
/// nemesis's.
struct AtClient<'a> {
    n: &'a ZkNemesis,
    stops: Stops,
}

impl Nemesis for AtClient<'_> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.stops.pause(
            &self.n.rec,
            at,
            victim,
            for_ms,
            "its forwarders hold every byte, so its session's pings stop too",
        )
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        self.stops.crash();
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.n.cut(cut)
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        self.n.crash_server(node, restart_after_ms)
    }

    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        self.n.fail_over(master)
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        self.n.pause_server(node, for_ms)
    }
}

impl FaultPoints for ZkNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.rec, client, point);
        if !fired.is_empty() {
            self.fire_at_client(client, point, fired).await;
        }
    }
}
