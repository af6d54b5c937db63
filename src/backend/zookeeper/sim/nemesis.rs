//! The fault executor of a simulated ZooKeeper run: the client faults every simulated world
//! shares ([`ClientFaults`]), and the service's own.
//!
//! - A server's crash (`crash` of `zookeeper-<i>`): a standalone server stops serving and comes
//!   back after `restart_after_ms` with its data and sessions (ZooKeeper logs both to disk), and
//!   tracks every session afresh from its restart; the crash of an ensemble's leader is a
//!   failover; a follower's crash changes nothing the locks see (their sessions move to another
//!   server within the timeout).
//! - A failover of an ensemble (`failover`): the leader dies, the ensemble serves nobody for
//!   `[zookeeper] election_ms`, then the next server leads with a new zxid epoch and gives every
//!   session its whole timeout again (ZooKeeper's `SessionTrackerImpl` constructor tracks every
//!   session of the database anew; sessions survive an election shorter than their timeout).
//! - A server pause (`pause` of `zookeeper-<i>`, a `SIGSTOP`): the service answers nothing and
//!   its session tracker stands still; once it goes on, the sessions not heard from for their
//!   timeout expire at its next tick, unless their pings, queued meanwhile, arrive first.
//! - A clock jump or drift of the leading server moves the clock its sessions expire on.

use crate::backend::zookeeper::sim::server::SimZk;
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::schedule::Schedule;
use crate::sim::client_faults::{take_effect, ClientFaults};
use crate::sim::clock::Clocks;
use crate::workload::FaultPoints;
use crate::world::points::due;
use madsim::task::NodeId;
use std::time::Duration;

/// The fault executor of a simulated ZooKeeper run.
#[derive(Clone)]
pub(super) struct ZkNemesis {
    pending: Schedule,
    zk: SimZk,
    clocks: Clocks,
    election: Duration,
    faults: ClientFaults,
}

impl ZkNemesis {
    pub(super) fn new(
        pending: Schedule,
        zk: SimZk,
        clocks: Clocks,
        election: Duration,
        faults: ClientFaults,
    ) -> ZkNemesis {
        ZkNemesis {
            pending,
            zk,
            clocks,
            election,
            faults,
        }
    }

    /// The nemesis's own madsim node, so a finished run can kill it.
    pub(super) fn madsim_node(&self) -> NodeId {
        self.faults.node
    }

    /// Schedules the faults with an absolute time.
    pub(super) fn start(&self) {
        let me = self.clone();
        self.faults
            .start_timed(&self.pending, move |kind| me.fire(kind, None, "at_ms"));
    }

    fn note(&self, what: String) {
        self.faults.note(what)
    }

    fn fire(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        let at = Occasion { point, by: holder };
        self.faults
            .fire_through(self, kind, &at, "the ZooKeeper locks");
    }

    fn node_index(&self, node: &str) -> Option<usize> {
        self.faults.nodes.get(node).copied()
    }

    /// The leader dies; after the election the next server leads.
    fn elect(&self, why: &str) {
        let old = self.zk.leader();
        let new = (old + 1) % self.zk.servers as usize;
        self.zk.go_down();
        self.note(format!(
            "zookeeper-{old} (the leader) {why}; the ensemble elects a new leader"
        ));
        let me = self.clone();
        self.faults.later(self.election, async move {
            me.zk.come_up(Some(new));
            me.note(format!(
                "zookeeper-{new} leads (a new epoch; every session's timeout starts again)"
            ));
        });
    }
}

/// What the simulated ZooKeeper deployment can do (see the module docs).
impl Nemesis for ZkNemesis {
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.faults.crash_client(
            client,
            at.point,
            " (its session lives until its timeout runs out)",
        );
        Ok(())
    }

    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.faults
            .pause_client(victim, at.by, for_ms, "it sends no ping");
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.faults.partition(cut, "");
        Ok(())
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        if self.zk.servers < 3 {
            return Err(Refused::Because(
                "failover of a standalone ZooKeeper: there is no other server".into(),
            ));
        }
        if !self.zk.up() {
            return Err(Refused::Because(
                "failover skipped: the ensemble is already electing".into(),
            ));
        }
        self.elect("crashed");
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(index) = self.node_index(node) else {
            return Err(Refused::Because(format!("crash of {node}: no such server")));
        };
        if self.zk.servers >= 3 {
            if index == self.zk.leader() && self.zk.up() {
                self.elect("crashed");
            } else {
                self.note(format!(
                    "{node} crashed (a follower: its clients move to another server)"
                ));
            }
            return Ok(());
        }
        if !self.zk.up() {
            return Err(Refused::Because(format!("crash of {node}: it is down")));
        }
        self.zk.go_down();
        self.note(format!(
            "{node} crashed (its data and sessions are on disk; it serves nobody until it restarts)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.zk.come_up(None);
                me.note(format!(
                    "{node} restarted (every session's timeout starts again)"
                ));
            });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        let index = self.node_index(node);
        if index != Some(self.zk.leader()) {
            return Err(Refused::Because(format!(
                "pause of {node}: only the leading server's pause is modelled"
            )));
        }
        if self.zk.paused() || !self.zk.up() {
            return Err(Refused::Because(format!(
                "pause of {node} skipped: it is not running"
            )));
        }
        self.zk.pause();
        self.note(format!(
            "{node} paused for {for_ms} ms (answers nothing; its session tracker stands still)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(for_ms), async move {
                if me.zk.paused() {
                    me.zk.resume();
                    me.note(format!("{node} resumed"));
                }
            });
        Ok(())
    }

    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        let Some(index) = self.node_index(node) else {
            return Err(Refused::Because(format!(
                "clock jump of {node}: no such node"
            )));
        };
        if wall_only {
            return Err(Refused::Because(format!(
                "wall clock jump of {node}: ZooKeeper expires sessions on its monotonic clock"
            )));
        }
        self.clocks.jump(index, by_ms);
        self.note(format!("{node} clock jumped by {by_ms} ms"));
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        let Some(index) = self.node_index(node) else {
            return Err(Refused::Because(format!(
                "clock drift of {node}: no such node"
            )));
        };
        self.clocks.set_drift(index, ppm);
        self.note(format!("{node} clock drift set to {ppm} ppm"));
        Ok(())
    }
}

impl FaultPoints for ZkNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.faults.rec, client, point);
        for kind in &fired {
            self.fire(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }
}
