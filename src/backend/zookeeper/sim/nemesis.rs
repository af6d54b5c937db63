//! The fault executor of a simulated ZooKeeper run: the client faults every simulated world
//! shares ([`ClientFaults`]), and the service's own.
//!
//! - A server's crash (`crash` of `zookeeper-<i>`): a standalone server stops serving and comes
//!   back after `restart_after_ms` with its data and sessions (ZooKeeper logs both to disk), and
//!   tracks every session afresh from its restart; the crash of an ensemble's leader is a
//!   failover; a follower's crash changes nothing the locks see (their sessions move to another
//!   server within the timeout) while the leader keeps a quorum. An ensemble's crashed server
//!   restarts after `restart_after_ms` too, as a follower.
//! - A failover of an ensemble (`failover`): the leader dies (for good, as on real servers),
//!   the ensemble serves nobody for `[zookeeper] election_ms`, then the next server leads with a
//!   new zxid epoch and gives every session its whole timeout again (ZooKeeper's
//!   `SessionTrackerImpl` constructor tracks every session of the database anew; sessions
//!   survive an election shorter than their timeout).
//! - The quorum (ZAB): a leader leads while a strict majority of the ensemble runs and reaches
//!   it both ways, and a server is elected only with such a majority around it. A crash or a
//!   cut that leaves the leader without one makes it step down: the ensemble serves nobody
//!   (clients get `CONNECTIONLOSS`, sessions are neither renewed nor expired) until a restart or
//!   a healed link gives some server a quorum again and an election, `election_ms` long, makes
//!   it lead. A majority crashed for good, or cut off for the rest of the run, means no leader
//!   and no grant for the rest of the run, as on real servers.
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

    /// The leader dies (`why`: crashed); after the election the next server with a quorum
    /// leads.
    fn elect(&self, why: &str) {
        let old = self.service.zk.leader();
        self.service.zk.go_down();
        self.note(format!(
            "zookeeper-{old} (the leader) {why}; the ensemble elects a new leader"
        ));
        self.elect_later();
    }

    /// Decides an election after `[zookeeper] election_ms`, unless one is under way: the first
    /// server after the old leader (in turn) that runs and has a quorum around it leads, with a
    /// new epoch. With no quorum anywhere nobody leads: ZooKeeper's `FastLeaderElection` ends
    /// only when a quorum of votes agrees, so an ensemble with a majority down or cut off stays
    /// in `LOOKING`, its servers refuse every client, and every session's timeout waits for the
    /// next leader. A restart or a healed link that makes a quorum again starts another
    /// election ([`Self::check_quorum`]).
    fn elect_later(&self) {
        if !self.service.zk.start_election() {
            return;
        }
        let me = self.clone();
        self.faults.later(self.service.election, async move {
            let zk = &me.service.zk;
            zk.end_election();
            let old = zk.leader();
            let n = zk.servers as usize;
            match (1..=n).map(|i| (old + i) % n).find(|&s| zk.has_quorum(s)) {
                Some(new) => {
                    zk.come_up(Some(new));
                    me.note(format!(
                        "zookeeper-{new} leads (a new epoch; every session's timeout starts again)"
                    ));
                }
                None => me.note(format!(
                    "no ZooKeeper leader elected: at most {} of {n} servers run and reach each \
                     other, no quorum (the ensemble serves nobody)",
                    (0..n).map(|s| zk.reach_of(s)).max().unwrap_or(0)
                )),
            }
        });
    }

    /// After a server crashed or restarted, or a partition cut or healed: a leader that no
    /// longer has a quorum around it steps down and the ensemble serves nobody (ZAB's
    /// `Leader.lead` gives up leading once fewer than a quorum of followers are synced with it,
    /// and no proposal commits without a quorum's acknowledgements meanwhile, so the simulated
    /// leader stops at once); an ensemble with no leader elects one once some server has a
    /// quorum again. A standalone server has no quorum to lose.
    fn check_quorum(&self) {
        let zk = &self.service.zk;
        if zk.servers < 3 {
            return;
        }
        let n = zk.servers as usize;
        if zk.up() {
            let leader = zk.leader();
            if zk.has_quorum(leader) {
                return;
            }
            zk.go_down();
            self.note(format!(
                "zookeeper-{leader} (the leader) steps down: {} of {n} servers run and reach it, \
                 no quorum (ZAB commits nothing without a majority); the ensemble serves nobody \
                 and elects a new leader",
                zk.reach_of(leader)
            ));
            self.elect_later();
        } else if (0..n).any(|s| zk.has_quorum(s)) {
            self.elect_later();
        }
    }

    /// An ensemble's server crashed: it restarts after `restart_after_ms` with its data and
    /// rejoins as a follower (a restart past the run's end never comes: the crash is for good).
    fn restart_later(&self, node: &str, index: usize, restart_after_ms: u64) {
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.service.zk.set_server_runs(index, true);
                me.note(format!(
                    "{node} restarted (its data is on disk; it rejoins the ensemble as a follower)"
                ));
                me.check_quorum();
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

    /// A cut between an ensemble's servers may leave the leader without a quorum, and its
    /// healing may give one back ([`ServiceNemesis::check_quorum`]).
    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let me = self.clone();
        self.faults
            .partition_then(cut, "", move || me.check_quorum());
        self.check_quorum();
        Ok(())
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        if self.service.zk.servers < 3 {
            return Err(Refused::Because(
                "failover of a standalone ZooKeeper: there is no other server".into(),
            ));
        }
        let zk = &self.service.zk;
        if let Some(down) = (0..zk.servers as usize).find(|&s| !zk.server_runs(s)) {
            return Err(Refused::Because(format!(
                "failover skipped: zookeeper-{down} is down, and the ensemble would lose its quorum"
            )));
        }
        if !zk.up() {
            return Err(Refused::Because(
                "failover skipped: the ensemble is already electing".into(),
            ));
        }
        // The killed leader stays down, as on real servers (a failover restarts nobody).
        zk.set_server_runs(zk.leader(), false);
        self.elect("crashed");
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(index) = self.node_index(node) else {
            return Err(Refused::Because(format!("crash of {node}: no such server")));
        };
        let zk = &self.service.zk;
        if zk.servers >= 3 {
            if !zk.server_runs(index) {
                return Err(Refused::Because(format!("crash of {node}: it is down")));
            }
            zk.set_server_runs(index, false);
            if index == zk.leader() && zk.up() {
                self.elect("crashed");
            } else if index == zk.leader() {
                self.note(format!("{node} crashed (the ensemble has no leader)"));
            } else {
                self.note(format!(
                    "{node} crashed (a follower: its clients move to another server)"
                ));
                self.check_quorum();
            }
            self.restart_later(node, index, restart_after_ms);
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
