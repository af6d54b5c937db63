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
use madsim::task::NodeId;

use crate::backend::etcd::sim::server::{member_name, SimEtcd};
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::schedule::Schedule;
use crate::sim::client_faults::{take_effect, ClientFaults};
use crate::sim::clock::Clocks;
use crate::workload::FaultPoints;
use crate::world::points::due;

/// The fault executor of a simulated etcd run.
#[derive(Clone)]
pub(super) struct EtcdNemesis {
    pending: Schedule,
    etcd: SimEtcd,
    clocks: Clocks,
    faults: ClientFaults,
}

impl EtcdNemesis {
    pub(super) fn new(
        pending: Schedule,
        etcd: SimEtcd,
        clocks: Clocks,
        faults: ClientFaults,
    ) -> EtcdNemesis {
        EtcdNemesis {
            pending,
            etcd,
            clocks,
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
        self.faults.fire_through(self, kind, &at, "etcd");
    }

    fn member_index(&self, node: &str) -> Option<usize> {
        (0..self.etcd.members()).find(|&m| member_name(m) == node)
    }

    /// Starts an election if the cluster has no leader and none is under way: after the
    /// election delay a random running member wins, if a majority runs.
    fn elect_later(&self) {
        if !self.etcd.start_election() {
            return;
        }
        let delay = self.etcd.election_delay(madsim::rand::thread_rng().gen());
        let me = self.clone();
        self.faults.later(delay, async move {
            let pick = madsim::rand::thread_rng().gen();
            match me.etcd.elect(pick) {
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
impl Nemesis for EtcdNemesis {
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
        if !self.etcd.member(m).0 {
            return Err(Refused::Because(format!(
                "crash of {node} skipped: it is not running"
            )));
        }
        let led = self.etcd.crash(m);
        self.note(format!(
            "{node} crashed{}",
            if led { " (it was the leader)" } else { "" }
        ));
        if led {
            self.elect_later();
        }
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.etcd.restart(m);
                me.note(format!("{node} restarted"));
                me.elect_later();
            });
        Ok(())
    }

    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        self.faults.jump_clock(&self.clocks, node, by_ms, wall_only);
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        self.faults.drift_clock(&self.clocks, node, ppm);
        Ok(())
    }
}

impl FaultPoints for EtcdNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.faults.rec, client, point);
        for kind in &fired {
            self.fire(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }
}
