//! The fault schedule both worlds execute: which faults are still to come, and which of them a
//! client reaching a named point, or the clock reaching a time, sets off.
//!
//! The simulator and real mode differ in how a fault is carried out (a madsim node paused, or a
//! process SIGSTOPped: `sim::nemesis`, `real::nemesis`), never in when it fires: that is decided
//! here, once, as are the clocks nodes start with ([`clocks`]). What a fault is, and what it
//! does when it fires, is its family's file in `fault/`.

pub mod clocks;

use std::sync::{Arc, Mutex};

use crate::fault::{Fault, FaultKind, Trigger};

/// The faults of a run that have not fired yet. Cloning shares the schedule, so every client
/// task and timer sees a fault fire once.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pending: Arc<Mutex<Vec<Fault>>>,
}

impl Schedule {
    /// A schedule of `faults`, none fired yet.
    pub fn new(faults: Vec<Fault>) -> Schedule {
        Schedule {
            pending: Arc::new(Mutex::new(faults)),
        }
    }

    /// The faults still to come, in file order (a world prepares for some before the run starts,
    /// such as real mode holding replication back ahead of a failover).
    pub fn pending(&self) -> Vec<Fault> {
        self.pending.lock().unwrap().clone()
    }

    /// Takes every fault with a fixed time (`at_ms`), with that time, in file order: the world
    /// fires each from a timer.
    pub fn take_timed(&self) -> Vec<(u64, FaultKind)> {
        self.take(|f| matches!(f.trigger, Trigger::At(_)))
            .into_iter()
            .map(|f| match f.trigger {
                Trigger::At(at_ms) => (at_ms, f.kind),
                _ => unreachable!("only timed faults were taken"),
            })
            .collect()
    }

    /// Takes the faults that `client` reaching the named point `point` at true time `now_ms`
    /// sets off: those `on` that point whose `after_ms` has passed, except pauses and crashes
    /// that name another client (they wait for that one).
    pub fn take_at_point(&self, now_ms: u64, client: u32, point: &str) -> Vec<Fault> {
        self.take(|f| {
            f.trigger
                .point()
                .is_some_and(|(at, after_ms)| at == point && now_ms >= after_ms)
                && f.kind.is_for(client)
                && f.by_client.is_none_or(|c| c == client)
        })
    }

    /// Removes and returns the pending faults `due` selects, keeping the others in order.
    fn take(&self, due: impl Fn(&Fault) -> bool) -> Vec<Fault> {
        let mut p = self.pending.lock().unwrap();
        // Every client asks at every point of every cycle; most of the time nothing is due.
        if !p.iter().any(&due) {
            return Vec::new();
        }
        let (taken, rest): (Vec<Fault>, Vec<Fault>) = p.drain(..).partition(due);
        *p = rest;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::ClientRef;

    /// A node fault aimed at one client (`client = N`) fires at that client's point only.
    #[test]
    fn an_aimed_node_fault_waits_for_its_client() {
        let failover = Fault {
            trigger: Trigger::Acquired { after_ms: 0 },
            kind: FaultKind::Failover { master: 0 },
            by_client: Some(1),
        };
        let schedule = Schedule::new(vec![failover]);
        assert!(schedule.take_at_point(0, 0, "acquired").is_empty());
        assert_eq!(schedule.take_at_point(0, 1, "acquired").len(), 1);
    }

    fn fault(trigger: Trigger, kind: FaultKind) -> Fault {
        Fault {
            trigger,
            kind,
            by_client: None,
        }
    }

    #[test]
    fn a_point_sets_off_its_own_faults_once_and_for_the_named_client_only() {
        let pause = |c| FaultKind::Pause {
            client: ClientRef::Index(c),
            for_ms: 5,
        };
        let s = Schedule::new(vec![
            fault(Trigger::At(10), FaultKind::Failover { master: 0 }),
            fault(Trigger::Acquired { after_ms: 0 }, pause(1)),
            fault(Trigger::BeforeWrite { after_ms: 50 }, pause(0)),
            fault(Trigger::on_point("after_read", 0), pause(0)),
        ]);
        // Client 0 acquiring does not set off client 1's pause.
        assert!(s.take_at_point(0, 0, "acquired").is_empty());
        assert_eq!(s.take_at_point(0, 1, "acquired").len(), 1);
        assert!(s.take_at_point(0, 1, "acquired").is_empty(), "fired once");
        // Not before `after_ms`.
        assert!(s.take_at_point(49, 0, "before_write").is_empty());
        assert_eq!(s.take_at_point(50, 0, "before_write").len(), 1);
        assert_eq!(
            s.take_timed(),
            vec![(10, FaultKind::Failover { master: 0 })]
        );
        assert_eq!(s.pending().len(), 1);
        assert_eq!(s.take_at_point(0, 0, "after_read").len(), 1);
        assert!(s.pending().is_empty());
    }
}
