//! The simulated nemesis: executes a scenario's fault schedule against the simulated world.
//!
//! Faults fire at an absolute true time, or at the first successful acquire at or after a time
//! (`on = "acquired"`): that trigger is what makes the failover and GC-pause scenarios hit their
//! window every time instead of by luck. Follow-up actions (resume, promote, heal, restart) run on
//! the nemesis's own node, which no fault touches.

use crate::backend::redis::sim::cluster::Cluster;
use crate::fault::{
    ClientRef, ClusterFailoverForm, Cut, Direction, Fault, FaultKind, Nemesis, Occasion, Refused,
};
use crate::history::Recorder;
use crate::schedule::Schedule;
use crate::sim::client_faults::{take_effect, ClientFaults};
use crate::sim::clock::Clocks;
use crate::sim::network::Network;
use crate::workload::FaultPoints;
use madsim::task::NodeId;
use std::collections::BTreeMap;
use std::time::Duration;

/// The fault executor of one simulation.
#[derive(Clone)]
pub struct SimNemesis {
    schedule: Schedule,
    cluster: Cluster,
    clocks: Clocks,
    /// Clients, network, and the nemesis's own node.
    faults: ClientFaults,
    failover_detect: Duration,
}

impl SimNemesis {
    /// The nemesis's own madsim node, so a finished run can kill it and free its tasks.
    pub fn madsim_node(&self) -> NodeId {
        self.faults.node
    }

    /// The nemesis of one run: the scenario's faults and every part of the deployment they can
    /// hit (servers, clocks, links, client nodes).
    /// With `spare_writes`, pauses keep out of holders' check-to-write windows
    /// (`Scenario::pauses_spare_writes`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        faults: Vec<Fault>,
        cluster: Cluster,
        clocks: Clocks,
        net: Network,
        rec: Recorder,
        clients: Vec<NodeId>,
        nodes: BTreeMap<String, usize>,
        failover_detect: Duration,
        spare_writes: bool,
    ) -> SimNemesis {
        SimNemesis {
            schedule: Schedule::new(faults),
            cluster,
            clocks,
            faults: ClientFaults::new(rec, net, clients, nodes).sparing_writes(spare_writes),
            failover_detect,
        }
    }

    /// Schedules the faults with an absolute time.
    pub fn start(&self) {
        let me = self.clone();
        self.faults
            .start_timed(&self.schedule, move |kind| me.fire(kind, None));
    }

    fn later<F: std::future::Future<Output = ()> + Send + 'static>(
        &self,
        delay: Duration,
        task: F,
    ) {
        self.faults.later(delay, task)
    }

    fn note(&self, what: String) {
        self.faults.note(what)
    }

    /// Carries out one fault now; `holder` is the client whose acquire triggered it.
    fn fire(&self, kind: &FaultKind, holder: Option<u32>) {
        self.fire_at(kind, holder, Occasion::TIMED.point);
    }

    /// [`SimNemesis::fire`], naming the point that triggered it (for a client crash's record).
    /// Every capability but a server pause is this world's; what it refuses, the history says.
    fn fire_at(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        let at = Occasion { point, by: holder };
        match kind.fire(self, &at) {
            Ok(()) => {}
            Err(Refused::Because(why)) => self.note(why),
            Err(Refused::Lacking) => self.note(format!("{kind:?}: not modelled here")),
        }
    }
}

/// What the simulated Redis deployment can do: every capability but stopping a server (the
/// scenario parser takes a server pause for the MySQL server only).
impl Nemesis for SimNemesis {
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.faults.crash_client(client, at.point, "");
        Ok(())
    }

    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.faults.pause_client(victim, at.by, for_ms, "GC pause");
        Ok(())
    }

    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        let group = master as usize;
        let old = self.cluster.master_of(group);
        self.cluster.kill(old);
        let me = self.clone();
        self.later(self.failover_detect, async move {
            if me.cluster.promote(group).is_none() {
                me.note(format!("failover of group {group} found no live replica"));
            }
        });
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let how = match cut.direction {
            Direction::Both => "",
            Direction::Inbound => " (inbound only: they still send)",
            Direction::Outbound => " (outbound only: they still hear)",
        };
        self.faults.partition(cut, how);
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

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(idx) = self.cluster.server_index(node) else {
            return Err(Refused::Because(format!(
                "crash of {node}: only Redis nodes can crash"
            )));
        };
        self.cluster.kill(idx);
        let me = self.clone();
        self.later(Duration::from_millis(restart_after_ms), async move {
            me.cluster.restart_empty(idx);
        });
        Ok(())
    }

    fn cluster_failover(&self, master: u32, form: ClusterFailoverForm) -> Result<(), Refused> {
        self.cluster
            .manual_failover(master as usize, form)
            .map_err(Refused::Because)
    }

    fn migrate_slot(&self, to: u32, for_ms: u64) -> Result<(), Refused> {
        let m = self
            .cluster
            .begin_slot_migration(to as usize)
            .map_err(Refused::Because)?;
        let me = self.clone();
        self.later(Duration::from_millis(for_ms / 2), async move {
            me.cluster.move_slot_keys(m);
            let rest = Duration::from_millis(for_ms - for_ms / 2);
            madsim::time::sleep(rest).await;
            me.cluster.end_slot_migration(m);
        });
        Ok(())
    }

    fn pause_server(&self, node: &str, _for_ms: u64) -> Result<(), Refused> {
        Err(Refused::Because(format!(
            "pause of {node}: not modelled for Redis servers"
        )))
    }
}

impl FaultPoints for SimNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.schedule.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let now_ms = self.faults.rec.now_us() / 1000;
        let due = self.schedule.take_at_point(now_ms, client, point);
        let fired: Vec<FaultKind> = due.into_iter().map(|f| f.kind).collect();
        for kind in &fired {
            self.fire_at(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }

    async fn write_window(&self, client: u32, open: bool) {
        if self.faults.write_window(client, open) {
            madsim::task::yield_now().await;
        }
    }
}
