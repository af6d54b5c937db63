//! The fault executor of a simulated etcd run: the client faults every simulated world shares
//! ([`ClientFaults`]: pause, crash, partition from the cluster), a member's crash and restart
//! (the leader's crash is a failover: the others elect a new leader, which extends every lease),
//! and the members' and clients' clocks.
//!
//! etcd measures lease expiry with Go's monotonic clock on the leader, so a wall-clock-only jump
//! of a member changes nothing, while a whole-clock jump or a drift of the leader moves its
//! leases' expiry (`schedule/clocks.rs` and `sim/clock.rs` keep the two apart).

use std::time::Duration;

use madsim::rand::Rng;

use crate::backend::etcd::sim::server::{member_name, SimEtcd};
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::sim::clock::Clocks;
use crate::sim::service_nemesis::ServiceNemesis;

/// What an etcd run's own faults act on: the cluster and every node's clock.
#[derive(Clone)]
pub(super) struct EtcdDeployment {
    pub(super) etcd: SimEtcd,
    pub(super) clocks: Clocks,
}

/// The fault executor of this simulated service: its own faults on top of the shared shell.
pub(super) type EtcdNemesis = ServiceNemesis<EtcdDeployment>;

impl ServiceNemesis<EtcdDeployment> {
    fn member_index(&self, node: &str) -> Option<usize> {
        (0..self.service.etcd.members()).find(|&m| member_name(m) == node)
    }

    /// Starts an election if the cluster has no leader and none is under way: after the
    /// election delay a random running member wins, if a majority runs.
    fn elect_later(&self) {
        if !self.service.etcd.start_election() {
            return;
        }
        let delay = self
            .service
            .etcd
            .election_delay(madsim::rand::thread_rng().gen());
        let me = self.clone();
        self.faults.later(delay, async move {
            let pick = madsim::rand::thread_rng().gen();
            match me.service.etcd.elect(pick) {
                Some(leader) => me.note(format!(
                    "{} elected leader (every lease extended by an election timeout)",
                    member_name(leader)
                )),
                None => me.note("no etcd leader: a majority of members is down".into()),
            }
        });
    }
}

/// What the simulated etcd deployment can do: its clients' pauses, crashes and partitions,
/// a member's crash and restart (a leader's starts an election), and clock jumps and drift.
impl Nemesis for ServiceNemesis<EtcdDeployment> {
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.faults.crash_client(
            client,
            at.point,
            " (its keep-alives stop; its lease expires after its TTL)",
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
            .pause_client(victim, at.by, for_ms, "its keep-alives stop too");
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.faults.partition(cut, "");
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(m) = self.member_index(node) else {
            return Err(Refused::Because(format!(
                "crash of {node}: only etcd members can crash"
            )));
        };
        if !self.service.etcd.member(m).0 {
            return Err(Refused::Because(format!(
                "crash of {node} skipped: it is not running"
            )));
        }
        let (led, stepped_down) = self.service.etcd.crash(m);
        self.note(format!(
            "{node} crashed{}",
            if led { " (it was the leader)" } else { "" }
        ));
        if let Some(leader) = stepped_down {
            self.note(format!(
                "{} (the leader) steps down: {} of {} members run, no quorum (raft commits \
                 nothing, CheckQuorum); no request completes",
                member_name(leader),
                self.service.etcd.running(),
                self.service.etcd.members()
            ));
        }
        if led || stepped_down.is_some() {
            self.elect_later();
        }
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.service.etcd.restart(m);
                me.note(format!("{node} restarted"));
                me.elect_later();
            });
        Ok(())
    }

    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        self.faults
            .jump_clock(&self.service.clocks, node, by_ms, wall_only);
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        self.faults.drift_clock(&self.service.clocks, node, ppm);
        Ok(())
    }
}
