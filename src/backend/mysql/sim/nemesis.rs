//! The fault executor of a simulated MySQL run: the client faults every simulated world shares
//! ([`ClientFaults`]), and the database server's crash and pause.
//!
//! A paused client keeps its connection and its open transaction, so its row locks stay held;
//! a crashed one's socket closes and the server rolls its transaction back at once. A crashed
//! server loses every session (committed rows survive, as InnoDB recovery keeps them); a paused
//! one answers nothing and its own timers stand still.

use crate::backend::mysql::sim::server::SimDb;
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::sim::service_nemesis::ServiceNemesis;
use std::time::Duration;

/// The fault executor of a simulated MySQL run: the server's crash and pause on top of the
/// shared shell.
pub(super) type MysqlNemesis = ServiceNemesis<SimDb>;

/// What the simulated MySQL deployment can do: its clients' pauses, crashes and partitions, and
/// the database server's crash and pause. It has no replica to fail over to, and its clocks are
/// true.
impl Nemesis for ServiceNemesis<SimDb> {
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
        self.service.crash();
        self.note(format!(
            "{node} crashed (open transactions rolled back, committed rows kept)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(restart_after_ms), async move {
                me.service.restart();
                me.note(format!("{node} restarted"));
            });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        if self.service.paused() || !self.service.up() {
            return Err(Refused::Because(format!(
                "pause of {node} skipped: it is not running"
            )));
        }
        self.service.pause();
        self.note(format!(
            "{node} paused for {for_ms} ms (answers nothing; its lock-wait and \
             wait_timeout timers stand still)"
        ));
        let me = self.clone();
        let node = node.to_string();
        self.faults
            .later(Duration::from_millis(for_ms), async move {
                if me.service.paused() {
                    me.service.resume();
                    me.note(format!("{node} resumed"));
                }
            });
        Ok(())
    }
}
