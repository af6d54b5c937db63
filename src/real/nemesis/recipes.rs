//! Real mode's answers, before any process is spawned, to what each fault asks of it: a fault
//! family fires against these as against any [`Nemesis`], and each capability says whether real
//! mode has a recipe for it on this scenario and this trigger, or why not. So an unsupported
//! scenario fails fast with its reason (`SKIP <name>: <reason>` in a suite), worded as the
//! family's capability needs it, and a new family needs no entry here to be refused. Here are
//! the answers every service's real world shares (the consensus services' recipes, the clocks a
//! process starts with); a backend's own are in its real world (`backend/redis/real/recipes.rs`,
//! `backend/mysql/real/recipes.rs`).

use std::cell::RefCell;

use crate::fault::{ClientRef, Cut, Fault, Nemesis, Occasion, Refused, Trigger};
use crate::real::RealError;
use crate::scenario::{FailoverShape, Scenario};

/// A planning error as a refusal: its reason, as `RealError::Unsupported` words it.
pub(crate) fn refused(e: RealError) -> Refused {
    match e {
        RealError::Unsupported(why) => Refused::Because(why),
        other => Refused::Because(other.to_string()),
    }
}

/// Asks `fault` of `n` without carrying anything out: the answer is whether `n` can.
pub(crate) fn ask<N: Nemesis>(n: &N, fault: &Fault) -> Result<(), Refused> {
    fault.kind.fire(n, &Occasion::TIMED)
}

/// Whether a client's pause or crash fired by `trigger` has a recipe: a client stops (or dies) in
/// its own task, so only at a point it reaches.
pub(crate) fn at_a_point(trigger: &Trigger) -> Result<(), Refused> {
    match trigger {
        Trigger::At(_) => Err(Refused::Lacking),
        _ => Ok(()),
    }
}

/// What the recipes on spawned etcd members or ZooKeeper servers can do: a client's pause or
/// crash at its named point, a server's crash and restart, and a partition of clients from the
/// servers, at any time; for ZooKeeper also a server's pause (`SIGSTOP`) and an ensemble leader's
/// failover, and its partitions must cut both ways (its `cut_check`). A client program's clock
/// runs under libfaketime (as on Redis): a jump at any time, a drift as its rate from the start.
/// Servers' clocks and lockcheck's own clients' have no recipe: etcd's lease expiry reads Go's
/// monotonic clock and ZooKeeper's session expiry the JVM's `System.nanoTime`, which libfaketime
/// does not move by default, and an in-process client's lock reads no clock the service trusts.
pub(crate) struct ConsensusRecipes<'a> {
    pub(crate) s: &'a Scenario,
    pub(crate) trigger: &'a Trigger,
    /// Which partitions the service's real nemesis can cut (`None`: any of clients from
    /// servers).
    pub(crate) cut_check: Option<super::plan::CutCheck>,
}
impl ConsensusRecipes<'_> {
    /// What a service's declaration says its worlds can do, as a recipe's answer.
    fn declared(&self, can: bool) -> Result<(), Refused> {
        if can {
            Ok(())
        } else {
            Err(Refused::Lacking)
        }
    }

    /// Whether `node` is a client that is a program, whose clock libfaketime runs.
    fn program_clock(&self, node: &str) -> Result<(), Refused> {
        self.declared(
            self.s.lock.kind.is_client_program()
                && super::plan::client_index(self.s, node).is_some(),
        )
    }
}

impl Nemesis for ConsensusRecipes<'_> {
    /// At a client's point, or a named client's late start (`at_ms = 0`: its task is held
    /// before its first step, `ClientTasks::start_late`).
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        victim: &ClientRef,
        _for_ms: u64,
    ) -> Result<(), Refused> {
        if *self.trigger == Trigger::At(0) && matches!(victim, ClientRef::Index(_)) {
            return Ok(());
        }
        at_a_point(self.trigger)
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        at_a_point(self.trigger)
    }

    /// The scenario allows a crash of its own servers only.
    fn crash_server(&self, _node: &str, _restart_after_ms: u64) -> Result<(), Refused> {
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        match self.cut_check {
            Some(check) => check(self.s, cut).map_err(refused),
            None => Ok(()),
        }
    }

    fn pause_server(&self, _node: &str, _for_ms: u64) -> Result<(), Refused> {
        self.declared(self.s.backend().pauses_servers())
    }

    /// The scenario allows a failover of an ensemble only.
    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        self.declared(self.s.backend().failover() == FailoverShape::Leader)
    }

    /// A client program's libfaketime clock reads its offset from a file: it jumps whenever.
    fn jump_clock(&self, node: &str, _by_ms: i64, _wall_only: bool) -> Result<(), Refused> {
        self.program_clock(node)
    }

    /// A client program's libfaketime rate is fixed when it starts, so only a drift from the
    /// start is what the file says.
    fn drift_clock(&self, node: &str, _ppm: i64) -> Result<(), Refused> {
        self.program_clock(node)?;
        if *self.trigger != Trigger::At(0) {
            return Err(Refused::Because(format!(
                "a clock drift of {node} after the start: a client program's libfaketime rate \
                 is fixed when it starts; fire it with `at_ms = 0`"
            )));
        }
        Ok(())
    }
}

/// A clock fault as real mode sets it up before spawning: libfaketime's rate is fixed per
/// process, and a clock that will jump reads its offset from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClockSetting {
    /// The node's clock drifts at this rate (ppm) from the start.
    Drift(i64),
    /// The node's clock will jump (wall clock alone, or both: one libfaketime clock either way).
    Jumps,
}

/// The clock faults of a scenario, in file order, gathered by firing every fault against a
/// nemesis whose only capabilities are the clock's.
#[derive(Default)]
pub(crate) struct ClockSettings(RefCell<Vec<(String, ClockSetting)>>);

impl ClockSettings {
    /// Every clock fault of `s`: the node and what it does to its clock.
    pub(crate) fn of(s: &Scenario) -> Vec<(String, ClockSetting)> {
        let me = ClockSettings::default();
        for f in &s.faults {
            let _ = ask(&me, f);
        }
        me.0.into_inner()
    }
}

impl Nemesis for ClockSettings {
    fn jump_clock(&self, node: &str, _by_ms: i64, _wall_only: bool) -> Result<(), Refused> {
        self.0
            .borrow_mut()
            .push((node.to_string(), ClockSetting::Jumps));
        Ok(())
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        self.0
            .borrow_mut()
            .push((node.to_string(), ClockSetting::Drift(ppm)));
        Ok(())
    }
}
