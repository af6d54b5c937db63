//! The fault executor of a simulated MySQL run: the client faults every simulated world shares
//! ([`ClientFaults`]), and the database server's crash and pause.
//!
//! A paused client keeps its connection and its open transaction, so its row locks stay held;
//! a crashed one's socket closes and the server rolls its transaction back at once. A crashed
//! server loses every session (committed rows survive, as InnoDB recovery keeps them); a paused
//! one answers nothing and its own timers stand still.

use crate::backend::mysql::sim::server::SimDb;
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::schedule::Schedule;
use crate::sim::client_faults::{take_effect, ClientFaults};
use crate::workload::FaultPoints;
use crate::world::points::due;
use madsim::task::NodeId;
use std::time::Duration;

/// The fault executor of a simulated MySQL run.
#[derive(Clone)]
pub(super) struct MysqlNemesis {
    pending: Schedule,
    db: SimDb,
    faults: ClientFaults,
}

impl MysqlNemesis {
    pub(super) fn new(pending: Schedule, db: SimDb, faults: ClientFaults) -> MysqlNemesis {
        MysqlNemesis {
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

    /// Carries out one fault now; what this world lacks, the history says.
    fn fire(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        let at = Occasion { point, by: holder };
        self.faults.fire_through(self, kind, &at, "the MySQL locks");
    }
}

/// What the simulated MySQL deployment can do: its clients' pauses, crashes and partitions, and
/// the database server's crash and pause. It has no replica to fail over to, and its clocks are
/// true.
impl Nemesis for MysqlNemesis {
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.faults
            .crash_client(client, at.point, " (its connection closes)");
        Ok(())
    }

    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.faults
            .pause_client(victim, at.by, for_ms, "its transaction stays open");
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.faults.partition(cut, "");
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        self.db.crash();
        self.note(format!(
            "{node} crashed (open transactions rolled back, committed rows kept)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.db.restart();
                me.note(format!("{node} restarted"));
            });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        if self.db.paused() || !self.db.up() {
            return Err(Refused::Because(format!(
                "pause of {node} skipped: it is not running"
            )));
        }
        self.db.pause();
        self.note(format!(
            "{node} paused for {for_ms} ms (answers nothing; its lock-wait and \
             wait_timeout timers stand still)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(for_ms), async move {
                if me.db.paused() {
                    me.db.resume();
                    me.note(format!("{node} resumed"));
                }
            });
        Ok(())
    }
}

impl FaultPoints for MysqlNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.faults.rec, client, point);
        for kind in &fired {
            self.fire(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }

    async fn write_window(&self, client: u32, open: bool) {
        if self.faults.write_window(client, open) {
            madsim::task::yield_now().await;
        }
    }
}
