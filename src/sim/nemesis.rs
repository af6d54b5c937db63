//! The simulated nemesis: executes a scenario's fault schedule against the simulated world.
//!
//! Faults fire at an absolute true time, or at the first successful acquire at or after a time
//! (`on = "acquired"`): that trigger is what makes the failover and GC-pause scenarios hit their
//! window every time instead of by luck. Follow-up actions (resume, promote, heal, restart) run on
//! the nemesis's own node, which no fault touches.

use super::client_faults::{take_effect, ClientFaults};
use super::clock::Clocks;
use super::cluster::Cluster;
use super::network::Network;
use crate::history::Recorder;
use crate::scenario::{Direction, Fault, FaultKind};
use crate::schedule::Schedule;
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
    ) -> SimNemesis {
        SimNemesis {
            schedule: Schedule::new(faults),
            cluster,
            clocks,
            faults: ClientFaults::new(rec, net, clients, nodes),
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
        self.fire_at(kind, holder, "at_ms");
    }

    /// [`SimNemesis::fire`], naming the point that triggered it (for a client crash's record).
    fn fire_at(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        match kind {
            FaultKind::ClientCrash { client } => self.faults.crash_client(*client, point, ""),
            FaultKind::Failover { master } => {
                let group = *master as usize;
                let old = self.cluster.master_of(group);
                self.cluster.kill(old);
                let me = self.clone();
                self.later(self.failover_detect, async move {
                    if me.cluster.promote(group).is_none() {
                        me.note(format!("failover of group {group} found no live replica"));
                    }
                });
            }
            FaultKind::Pause { client, for_ms } => self
                .faults
                .pause_client(client, holder, *for_ms, "GC pause"),
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => {
                let how = match direction {
                    Direction::Both => "",
                    Direction::Inbound => " (inbound only: they still send)",
                    Direction::Outbound => " (outbound only: they still hear)",
                };
                self.faults.partition(nodes, from, *for_ms, *direction, how);
            }
            FaultKind::ClockJump { node, by_ms } => {
                self.clocks.jump(self.faults.nodes[node], *by_ms);
                self.note(format!("{node} clock jumped by {by_ms} ms"));
            }
            FaultKind::WallClockJump { node, by_ms } => {
                self.clocks.jump_wall(self.faults.nodes[node], *by_ms);
                self.note(format!("{node} wall clock jumped by {by_ms} ms"));
            }
            FaultKind::ClockDrift { node, ppm } => {
                self.clocks.set_drift(self.faults.nodes[node], *ppm);
                self.note(format!("{node} clock drift set to {ppm} ppm"));
            }
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => {
                let Some(idx) = self.cluster.server_index(node) else {
                    self.note(format!("crash of {node}: only Redis nodes can crash"));
                    return;
                };
                self.cluster.kill(idx);
                let me = self.clone();
                self.later(Duration::from_millis(*restart_after_ms), async move {
                    me.cluster.restart_empty(idx);
                });
            }
            // The scenario parser takes a server pause for the MySQL server only.
            FaultKind::ServerPause { node, .. } => {
                self.note(format!("pause of {node}: not modelled for Redis servers"));
            }
        }
    }
}

impl FaultPoints for SimNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let now_ms = self.faults.rec.now_us() / 1000;
        let due = self.schedule.take_at_point(now_ms, client, point);
        let fired: Vec<FaultKind> = due.into_iter().map(|f| f.kind).collect();
        for kind in &fired {
            self.fire_at(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }
}
