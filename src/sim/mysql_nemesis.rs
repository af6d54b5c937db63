//! The fault executor of a simulated MySQL run: the client faults every simulated world shares
//! ([`ClientFaults`]), and the database server's crash and pause.
//!
//! A paused client keeps its connection and its open transaction, so its row locks stay held;
//! a crashed one's socket closes and the server rolls its transaction back at once. A crashed
//! server loses every session (committed rows survive, as InnoDB recovery keeps them); a paused
//! one answers nothing and its own timers stand still.

use super::client_faults::{take_effect, ClientFaults};
use super::mysql_server::SimDb;
use crate::scenario::FaultKind;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::mysql::due;
use madsim::task::NodeId;
use std::time::Duration;

/// The fault executor of a simulated MySQL run.
#[derive(Clone)]
pub(super) struct Nemesis {
    pending: Schedule,
    db: SimDb,
    faults: ClientFaults,
}

impl Nemesis {
    pub(super) fn new(pending: Schedule, db: SimDb, faults: ClientFaults) -> Nemesis {
        Nemesis {
            pending,
            db,
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
        match kind {
            FaultKind::ClientCrash { client } => {
                self.faults
                    .crash_client(*client, point, " (its connection closes)")
            }
            FaultKind::Pause { client, for_ms } => {
                self.faults
                    .pause_client(client, holder, *for_ms, "its transaction stays open")
            }
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => self.faults.partition(nodes, from, *for_ms, *direction, ""),
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => {
                self.db.crash();
                self.note(format!(
                    "{node} crashed (open transactions rolled back, committed rows kept)"
                ));
                let me = self.clone();
                let node = node.clone();
                self.faults
                    .later(Duration::from_millis(*restart_after_ms), async move {
                        me.db.restart();
                        me.note(format!("{node} restarted"));
                    });
            }
            FaultKind::ServerPause { node, for_ms } => {
                if self.db.paused() || !self.db.up() {
                    self.note(format!("pause of {node} skipped: it is not running"));
                    return;
                }
                self.db.pause();
                self.note(format!(
                    "{node} paused for {for_ms} ms (answers nothing; its lock-wait and \
                     wait_timeout timers stand still)"
                ));
                let me = self.clone();
                let node = node.clone();
                self.faults
                    .later(Duration::from_millis(*for_ms), async move {
                        if me.db.paused() {
                            me.db.resume();
                            me.note(format!("{node} resumed"));
                        }
                    });
            }
            other => self.note(format!("{other:?}: not modelled for the MySQL locks")),
        }
    }
}

impl FaultPoints for Nemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.faults.rec, client, point);
        for kind in &fired {
            self.fire(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }
}
