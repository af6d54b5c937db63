//! The simulated nemesis: executes a scenario's fault schedule against the simulated world.
//!
//! Faults fire at an absolute true time, or at the first successful acquire at or after a time
//! (`on = "acquired"`): that trigger is what makes the failover and GC-pause scenarios hit their
//! window every time instead of by luck. Follow-up actions (resume, promote, heal, restart) run on
//! the nemesis's own node, which no fault touches.

use super::clock::Clocks;
use super::cluster::Cluster;
use super::network::Network;
use crate::faults::schedule::{describe_partition, paused_client};
use crate::faults::{partition_links, Schedule};
use crate::history::{EventKind, Recorder};
use crate::scenario::{ClientRef, Direction, Fault, FaultKind};
use crate::workload::FaultPoints;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// The fault executor of one simulation.
#[derive(Clone)]
pub struct SimNemesis {
    schedule: Schedule,
    cluster: Cluster,
    clocks: Clocks,
    net: Network,
    rec: Recorder,
    /// madsim node of each client, by client index.
    clients: Vec<NodeId>,
    /// Node index (clocks, network) by node name.
    nodes: BTreeMap<String, usize>,
    node: NodeId,
    failover_detect: Duration,
}

impl SimNemesis {
    /// The nemesis's own madsim node, so a finished run can kill it and free its tasks.
    pub fn madsim_node(&self) -> NodeId {
        self.node
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
        let node = Handle::current().create_node().name("nemesis").build();
        SimNemesis {
            schedule: Schedule::new(faults),
            cluster,
            clocks,
            net,
            rec,
            clients,
            nodes,
            node: node.id(),
            failover_detect,
        }
    }

    /// Schedules the faults with an absolute time.
    pub fn start(&self) {
        for (at_ms, kind) in self.schedule.take_timed() {
            let me = self.clone();
            let delay = Duration::from_micros((at_ms * 1000).saturating_sub(self.rec.now_us()));
            if delay.is_zero() {
                // `at_ms = 0` is the starting state: in place before any client sends a request
                // (a timer would fire only after madsim's 1 ms floor).
                self.fire(&kind, None);
                continue;
            }
            self.later(delay, async move { me.fire(&kind, None) });
        }
    }

    /// Runs `task` after `delay` on the nemesis's node.
    fn later<F: Future<Output = ()> + Send + 'static>(&self, delay: Duration, task: F) {
        let node = Handle::current()
            .get_node(self.node)
            .expect("nemesis node exists");
        node.spawn(async move {
            madsim::time::sleep(delay).await;
            task.await
        });
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// Carries out one fault now; `holder` is the client whose acquire triggered it.
    fn fire(&self, kind: &FaultKind, holder: Option<u32>) {
        self.fire_at(kind, holder, "at_ms");
    }

    /// [`SimNemesis::fire`], naming the point that triggered it (for a client crash's record).
    fn fire_at(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        match kind {
            FaultKind::ClientCrash { client } => {
                // The process dies: madsim kills the client's node, its tasks (the watchdog too)
                // are dropped, it never releases. Killed from the nemesis's node, not from inside
                // the dying task.
                let c = *client;
                self.rec.record(
                    &format!("client-{c}"),
                    EventKind::Crashed {
                        point: point.to_string(),
                    },
                );
                self.note(format!("client-{c} crashed at {point}"));
                let me = self.clone();
                self.later(Duration::ZERO, async move {
                    Handle::current().kill(me.clients[c as usize]);
                });
            }
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
            FaultKind::Pause { client, for_ms } => {
                let Some(c) = paused_client(client, holder, &self.rec) else {
                    self.note("pause of the holder skipped: nobody holds the lock".into());
                    return;
                };
                Handle::current().pause(self.clients[c as usize]);
                self.note(format!("client-{c} paused for {for_ms} ms (GC pause)"));
                let me = self.clone();
                self.later(Duration::from_millis(*for_ms), async move {
                    Handle::current().resume(me.clients[c as usize]);
                    me.note(format!("client-{c} resumed"));
                });
            }
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => {
                let links = partition_links(&self.nodes, nodes, from, *direction);
                for &(a, b) in &links {
                    self.net.cut(a, b);
                }
                let how = match direction {
                    Direction::Both => "",
                    Direction::Inbound => " (inbound only: they still send)",
                    Direction::Outbound => " (outbound only: they still hear)",
                };
                self.note(format!("{}{how}", describe_partition(nodes, from, *for_ms)));
                let me = self.clone();
                self.later(Duration::from_millis(*for_ms), async move {
                    for &(a, b) in &links {
                        me.net.heal(a, b);
                    }
                    me.note("partition healed".to_string());
                });
            }
            FaultKind::ClockJump { node, by_ms } => {
                self.clocks.jump(self.nodes[node], *by_ms);
                self.note(format!("{node} clock jumped by {by_ms} ms"));
            }
            FaultKind::WallClockJump { node, by_ms } => {
                self.clocks.jump_wall(self.nodes[node], *by_ms);
                self.note(format!("{node} wall clock jumped by {by_ms} ms"));
            }
            FaultKind::ClockDrift { node, ppm } => {
                self.clocks.set_drift(self.nodes[node], *ppm);
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

impl SimNemesis {
    /// Fires the faults `client` triggered at `point`, from inside the client's own task, and
    /// makes them take effect right here: a pause of this client stops it before its next step
    /// (madsim pauses a node at its tasks' next await, so this task yields once), and a crash
    /// never returns.
    async fn fire_due(&self, due: Vec<Fault>, client: u32, point: &str) {
        let mut crashed = false;
        let mut paused_self = false;
        for f in due {
            crashed |= matches!(f.kind, FaultKind::ClientCrash { .. });
            paused_self |= matches!(
                f.kind,
                FaultKind::Pause {
                    client: ClientRef::Holder,
                    ..
                }
            ) || matches!(f.kind, FaultKind::Pause { client: ClientRef::Index(i), .. } if i == client);
            self.fire_at(&f.kind, Some(client), point);
        }
        if crashed {
            // Stop dead here; the kill drops this task.
            std::future::pending::<()>().await;
        }
        if paused_self {
            madsim::task::yield_now().await;
        }
    }
}

impl FaultPoints for SimNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let now_ms = self.rec.now_us() / 1000;
        let due = self.schedule.take_at_point(now_ms, client, point);
        self.fire_due(due, client, point).await;
    }
}
