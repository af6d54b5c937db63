//! What every simulated world does to its clients, whichever database they talk to: a client
//! crash kills the client's madsim node, a pause stops it (a GC pause: every task of the process
//! stands still, its timers too, while the requests it already sent arrive and run on time), a
//! partition cuts network links; follow-ups (resume, heal) run on
//! the nemesis's own node, which no fault touches. The Redis nemesis (`nemesis.rs`) and the MySQL
//! one (`mysql_nemesis.rs`) add what is particular to their servers.

use super::clock::Clocks;
use super::network::Network;
use crate::fault::partition::{describe_partition, partition_links};
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::schedule::Schedule;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The client side of a simulated nemesis: the client nodes, the network, and its own node.
#[derive(Clone)]
pub struct ClientFaults {
    /// The run's history.
    pub rec: Recorder,
    net: Network,
    /// madsim node of each client, by client index.
    clients: Vec<NodeId>,
    /// Node index (clocks, network) by node name.
    pub nodes: BTreeMap<String, usize>,
    /// The nemesis's own madsim node.
    pub node: NodeId,
    /// Whether pauses wait until a holder has written (`[explore] pause_between_check_and_write
    /// = false`), and each client's window; see [`ClientFaults::write_window`].
    spare_writes: bool,
    windows: Arc<Mutex<BTreeMap<u32, Window>>>,
}

/// One client's check-to-write window: whether it is open, and the longest pause deferred
/// until it closes (its length and why it was fired).
#[derive(Default)]
struct Window {
    open: bool,
    deferred: Option<(u64, String)>,
}

impl ClientFaults {
    /// Creates the nemesis's node; call inside the run's madsim runtime.
    pub fn new(
        rec: Recorder,
        net: Network,
        clients: Vec<NodeId>,
        nodes: BTreeMap<String, usize>,
    ) -> ClientFaults {
        let node = Handle::current().create_node().name("nemesis").build();
        ClientFaults {
            rec,
            net,
            clients,
            nodes,
            node: node.id(),
            spare_writes: false,
            windows: Arc::default(),
        }
    }

    /// With `spare` (`Scenario::pauses_spare_writes`), a pause that would stop a holder inside
    /// its check-to-write window waits until the window closes.
    pub fn sparing_writes(mut self, spare: bool) -> ClientFaults {
        self.spare_writes = spare;
        self
    }

    /// Client `c`'s check-to-write window opens (`open`) or closes: the workload's own word
    /// (`FaultPoints::write_window`). When it closes with a pause deferred, the pause starts
    /// now, from inside the client's own task; returns whether it did (the caller then yields,
    /// so that it takes effect before the client's next step).
    pub fn write_window(&self, c: u32, open: bool) -> bool {
        if !self.spare_writes {
            return false;
        }
        let deferred = {
            let mut w = self.windows.lock().unwrap();
            let w = w.entry(c).or_default();
            w.open = open;
            if open {
                None
            } else {
                w.deferred.take()
            }
        };
        match deferred {
            Some((for_ms, why)) => {
                self.pause_now(c, for_ms, &why);
                true
            }
            None => false,
        }
    }

    /// Fires every fault of `schedule` that has an absolute time through `fire`: at once when
    /// its time is now (`at_ms = 0` is the starting state, in place before any client sends a
    /// request, since a timer would fire only after madsim's 1 ms floor), later otherwise.
    pub fn start_timed<F>(&self, schedule: &Schedule, fire: F)
    where
        F: Fn(&FaultKind) + Clone + Send + 'static,
    {
        for (at_ms, kind) in schedule.take_timed() {
            let delay = Duration::from_micros((at_ms * 1000).saturating_sub(self.rec.now_us()));
            if delay.is_zero() {
                fire(&kind);
                continue;
            }
            let fire = fire.clone();
            self.later(delay, async move { fire(&kind) });
        }
    }

    /// Runs `task` after `delay` on the nemesis's node.
    pub fn later<F: Future<Output = ()> + Send + 'static>(&self, delay: Duration, task: F) {
        let node = Handle::current()
            .get_node(self.node)
            .expect("nemesis node exists");
        node.spawn(async move {
            madsim::time::sleep(delay).await;
            task.await
        });
    }

    /// Records what the nemesis did.
    pub fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// Fires `kind` through the world's nemesis `n` now; what the world refuses, the history
    /// says (`lacking` names the locks of a world that has no such capability).
    pub fn fire_through<N: Nemesis>(
        &self,
        n: &N,
        kind: &FaultKind,
        at: &Occasion<'_>,
        lacking: &str,
    ) {
        match kind.fire(n, at) {
            Ok(()) => {}
            Err(Refused::Because(why)) => self.note(why),
            Err(Refused::Lacking) => self.note(format!("{kind:?}: not modelled for {lacking}")),
        }
    }

    /// Steps `node`'s clocks by `by_ms` (its wall clock alone when `wall_only`).
    pub fn jump_clock(&self, clocks: &Clocks, node: &str, by_ms: i64, wall_only: bool) {
        if wall_only {
            clocks.jump_wall(self.nodes[node], by_ms);
            self.note(format!("{node} wall clock jumped by {by_ms} ms"));
        } else {
            clocks.jump(self.nodes[node], by_ms);
            self.note(format!("{node} clock jumped by {by_ms} ms"));
        }
    }

    /// Sets `node`'s clock rate error.
    pub fn drift_clock(&self, clocks: &Clocks, node: &str, ppm: i64) {
        clocks.set_drift(self.nodes[node], ppm);
        self.note(format!("{node} clock drift set to {ppm} ppm"));
    }

    /// Client `c` crashes at `point`: the process dies, its tasks (a watchdog too) are dropped and
    /// it never releases. `how` completes the nemesis's note. The node is killed from the
    /// nemesis's node, not from inside the dying task.
    pub fn crash_client(&self, c: u32, point: &str, how: &str) {
        self.rec.record(
            &format!("client-{c}"),
            EventKind::Crashed {
                point: point.to_string(),
            },
        );
        self.note(format!("client-{c} crashed at {point}{how}"));
        let me = self.clone();
        self.later(Duration::ZERO, async move {
            Handle::current().kill(me.clients[c as usize]);
        });
    }

    /// Pauses `client` (the holder: the one that triggered it, else whoever holds the lock now)
    /// for `for_ms`; `why` completes the note.
    pub fn pause_client(&self, client: &ClientRef, holder: Option<u32>, for_ms: u64, why: &str) {
        let Some(c) = client.victim(holder, &self.rec) else {
            self.note("pause of the holder skipped: nobody holds the lock".into());
            return;
        };
        if self.spare_writes {
            let mut windows = self.windows.lock().unwrap();
            let w = windows.entry(c).or_default();
            if w.open {
                // Between its last look at its lease and its write no lease lock survives a
                // pause: that is the workload's window, not the lock's, and this search keeps
                // out of it. The pause starts when the holder has written (or given up).
                let longest = w.deferred.as_ref().map_or(0, |d| d.0).max(for_ms);
                w.deferred = Some((longest, why.to_string()));
                drop(windows);
                self.note(format!(
                    "client-{c} pause of {for_ms} ms deferred until it has written: it is between \
                     its last look at its lease and its write ([explore] \
                     pause_between_check_and_write = false)"
                ));
                return;
            }
        }
        self.pause_now(c, for_ms, why);
    }

    /// Pauses client `c` now for `for_ms`; `why` completes the note.
    fn pause_now(&self, c: u32, for_ms: u64, why: &str) {
        Handle::current().pause(self.clients[c as usize]);
        self.note(format!("client-{c} paused for {for_ms} ms ({why})"));
        // What it already sent still arrives and runs on time; only its reading waits.
        if let Some(&node) = self.nodes.get(&format!("client-{c}")) {
            let now = madsim::time::Instant::now();
            for (arrival, deliver) in self.net.claim_in_flight(node) {
                match arrival.checked_duration_since(now) {
                    Some(d) if !d.is_zero() => self.later(d, async move { deliver() }),
                    _ => deliver(),
                }
            }
        }
        let me = self.clone();
        self.later(Duration::from_millis(for_ms), async move {
            Handle::current().resume(me.clients[c as usize]);
            me.note(format!("client-{c} resumed"));
        });
    }

    /// Cuts the links between `nodes` and `from` (everyone else when empty) in `direction` for
    /// `for_ms`; `how` completes the note.
    pub fn partition(&self, cut: &Cut<'_>, how: &str) {
        self.partition_then(cut, how, || {});
    }

    /// [`Self::partition`], then `healed` once the links are healed (in the same task, so a
    /// service that looks at its links then sees them whole: an ensemble's quorum).
    pub fn partition_then(&self, cut: &Cut<'_>, how: &str, healed: impl FnOnce() + Send + 'static) {
        let Cut {
            nodes,
            from,
            direction,
            for_ms,
        } = *cut;
        let links = partition_links(&self.nodes, nodes, from, direction);
        for &(a, b) in &links {
            self.net.cut(a, b);
        }
        self.note(format!("{}{how}", describe_partition(nodes, from, for_ms)));
        let me = self.clone();
        self.later(Duration::from_millis(for_ms), async move {
            for &(a, b) in &links {
                me.net.heal(a, b);
            }
            me.note("partition healed".to_string());
            healed();
        });
    }
}

/// After firing the faults `client` triggered at a named point from inside its own task, makes
/// them take effect right there: a crash of anyone in `fired` never returns (the kill drops this
/// task), and a pause of this client stops it before its next step (madsim pauses a node at its
/// tasks' next await, so this task yields once).
pub async fn take_effect(fired: &[FaultKind], client: u32) {
    let crashed = fired.iter().any(FaultKind::crashes_a_client);
    let paused_self = fired.iter().any(|k| k.pauses(client));
    if crashed {
        std::future::pending::<()>().await;
    }
    if paused_self {
        madsim::task::yield_now().await;
    }
}
