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
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::sim::clock::Clocks;
use crate::sim::service_nemesis::ServiceNemesis;
use std::time::Duration;

/// What a ZooKeeper run's own faults act on: the service, every node's clock, and how long an
/// election takes.
#[derive(Clone)]
pub(super) struct ZkDeployment {
    pub(super) zk: SimZk,
    pub(super) clocks: Clocks,
    pub(super) election: Duration,
}

/// The fault executor of this simulated service: its own faults on top of the shared shell.
pub(super) type ZkNemesis = ServiceNemesis<ZkDeployment>;

impl ServiceNemesis<ZkDeployment> {
    fn node_index(&self, node: &str) -> Option<usize> {
        self.faults.nodes.get(node).copied()
    }

    /// The leader dies; after the election the next server leads.
    fn elect(&self, why: &str) {
        let old = self.service.zk.leader();
        let new = (old + 1) % self.service.zk.servers as usize;
        self.service.zk.go_down();
        self.note(format!(
            "zookeeper-{old} (the leader) {why}; the ensemble elects a new leader"
        ));
        let me = self.clone();
        self.faults.later(self.service.election, async move {
            me.service.zk.come_up(Some(new));
            me.note(format!(
                "zookeeper-{new} leads (a new epoch; every session's timeout starts again)"
            ));
        });
    }
}

/// What the simulated ZooKeeper deployment can do (see the module docs).
impl Nemesis for ServiceNemesis<ZkDeployment> {
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
        if self.service.zk.servers < 3 {
            return Err(Refused::Because(
                "failover of a standalone ZooKeeper: there is no other server".into(),
            ));
        }
        if !self.service.zk.up() {
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
        if self.service.zk.servers >= 3 {
            if index == self.service.zk.leader() && self.service.zk.up() {
                self.elect("crashed");
            } else {
                self.note(format!(
                    "{node} crashed (a follower: its clients move to another server)"
                ));
            }
            return Ok(());
        }
        if !self.service.zk.up() {
            return Err(Refused::Because(format!("crash of {node}: it is down")));
        }
        self.service.zk.go_down();
        self.note(format!(
            "{node} crashed (its data and sessions are on disk; it serves nobody until it restarts)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.service.zk.come_up(None);
                me.note(format!(
                    "{node} restarted (every session's timeout starts again)"
                ));
            });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        let index = self.node_index(node);
        if index != Some(self.service.zk.leader()) {
            return Err(Refused::Because(format!(
                "pause of {node}: only the leading server's pause is modelled"
            )));
        }
        if self.service.zk.paused() || !self.service.zk.up() {
            return Err(Refused::Because(format!(
                "pause of {node} skipped: it is not running"
            )));
        }
        self.service.zk.pause();
        self.note(format!(
            "{node} paused for {for_ms} ms (answers nothing; its session tracker stands still)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(for_ms), async move {
                if me.service.zk.paused() {
                    me.service.zk.resume();
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
        self.service.clocks.jump(index, by_ms);
        self.note(format!("{node} clock jumped by {by_ms} ms"));
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        let Some(index) = self.node_index(node) else {
            return Err(Refused::Because(format!(
                "clock drift of {node}: no such node"
            )));
        };
        self.service.clocks.set_drift(index, ppm);
        self.note(format!("{node} clock drift set to {ppm} ppm"));
        Ok(())
    }
}
