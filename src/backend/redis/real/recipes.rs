//! Real mode's answers on spawned `redis-server`s, before any process is spawned, to what each
//! fault asks of it (see `real/nemesis/recipes.rs`): the recipes of a Redis scenario, the
//! refusals on servers lockcheck did not start (`--redis`), and the master groups a failover will
//! hit.

use std::cell::RefCell;

use super::plan::{client_cuts, faked_master, master_index, sentinel_links, server_index};
use crate::fault::{ClientRef, Cut, Fault, Nemesis, Occasion, Refused, Trigger};
use crate::real::nemesis::plan::client_index;
use crate::real::nemesis::recipes::{ask, refused};
use crate::scenario::Scenario;

/// What the recipes on spawned `redis-server`s can do to one fault of `s`, fired by `trigger`.
pub(crate) struct RedisRecipes<'a> {
    pub(crate) s: &'a Scenario,
    pub(crate) trigger: &'a Trigger,
}

impl RedisRecipes<'_> {
    /// At a fixed time or at the first acquire: the triggers the timed recipes take.
    fn timed_or_acquired(&self) -> bool {
        matches!(self.trigger, Trigger::At(_) | Trigger::Acquired { .. })
    }

    /// At a client's named point: where a client's own pause or crash happens.
    fn at_a_point(&self) -> bool {
        !matches!(self.trigger, Trigger::At(_))
    }
}

impl Nemesis for RedisRecipes<'_> {
    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        Ok(())
    }

    fn crash_server(&self, node: &str, _restart_after_ms: u64) -> Result<(), Refused> {
        let s = self.s;
        // With sentinels every server can crash; without, a master without replicas.
        let sentinel = s.redis.sentinels > 0 && server_index(s, node).is_some();
        let alone =
            self.timed_or_acquired() && master_index(s, node).is_some() && s.redis.replicas == 0;
        if sentinel || alone {
            Ok(())
        } else {
            Err(Refused::Lacking)
        }
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction,
            for_ms: _,
        } = *cut;
        // With sentinels every link goes through a link proxy.
        if self.s.redis.sentinels > 0 {
            return sentinel_links(self.s, nodes, from, direction)
                .map(drop)
                .map_err(refused);
        }
        if !self.timed_or_acquired() {
            return Err(Refused::Lacking);
        }
        client_cuts(self.s, nodes, from, direction)
            .map(drop)
            .map_err(refused)
    }

    /// At a point the client stops in its task; at a fixed time its gate closes from outside.
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        _victim: &ClientRef,
        _for_ms: u64,
    ) -> Result<(), Refused> {
        Ok(())
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        if self.at_a_point() {
            Ok(())
        } else {
            Err(Refused::Lacking)
        }
    }

    fn jump_clock(&self, node: &str, _by_ms: i64, _wall_only: bool) -> Result<(), Refused> {
        if !self.timed_or_acquired() {
            return Err(Refused::Lacking);
        }
        if client_index(self.s, node).is_none() {
            faked_master(self.s, node, "a clock jump").map_err(refused)?;
        }
        Ok(())
    }

    fn drift_clock(&self, node: &str, _ppm: i64) -> Result<(), Refused> {
        if self.timed_or_acquired() && client_index(self.s, node).is_some() {
            return Ok(());
        }
        if *self.trigger != Trigger::At(0) {
            return Err(Refused::Lacking);
        }
        faked_master(self.s, node, "clock drift")
            .map(drop)
            .map_err(refused)
    }
}

/// A Redis lockcheck did not start (`--redis`): it is never faulted, so every capability that
/// touches a server is refused with what the fault would have done to it. The client's own
/// faults (pauses, crashes, its clocks) are lockcheck's to carry out.
pub(crate) struct ExternalServers;

impl Nemesis for ExternalServers {
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        _victim: &ClientRef,
        _for_ms: u64,
    ) -> Result<(), Refused> {
        Ok(())
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        Ok(())
    }

    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        Err(Refused::Because(format!(
            "a failover of redis-{master} (a SIGKILL and a promotion)"
        )))
    }

    fn crash_server(&self, node: &str, _restart_after_ms: u64) -> Result<(), Refused> {
        Err(Refused::Because(format!("a crash of {node} (a SIGKILL)")))
    }

    fn cut(&self, _cut: &Cut<'_>) -> Result<(), Refused> {
        Err(Refused::Because(
            "a partition (connections to servers cut)".to_string(),
        ))
    }

    /// A server's clock is the user's machine's: lockcheck cannot move it, and Redis expires
    /// keys on its wall clock, so a wall-clock jump of a server that is let through silently
    /// would run a different scenario (one without the jump) and judge it as if it had jumped.
    fn jump_clock(&self, node: &str, _by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        if node.starts_with("client-") {
            return Ok(());
        }
        if wall_only {
            return Err(Refused::Because(format!(
                "a wall-clock jump on {node} (libfaketime in the server)"
            )));
        }
        self.drift_clock(node, 0)
    }

    fn drift_clock(&self, node: &str, _ppm: i64) -> Result<(), Refused> {
        if node.starts_with("client-") {
            return Ok(());
        }
        Err(Refused::Because(format!(
            "a clock fault on {node} (libfaketime in the server)"
        )))
    }

    fn pause_server(&self, _node: &str, _for_ms: u64) -> Result<(), Refused> {
        Ok(())
    }
}

/// The master groups a failover will hit: real mode holds their replication back from the start.
#[derive(Default)]
pub(crate) struct FailsOver(RefCell<Vec<u32>>);

impl FailsOver {
    /// The masters `faults` fail over, in their order.
    pub(crate) fn of(faults: &[Fault]) -> Vec<u32> {
        let me = FailsOver::default();
        for f in faults {
            let _ = ask(&me, f);
        }
        me.0.into_inner()
    }
}

impl Nemesis for FailsOver {
    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        self.0.borrow_mut().push(master);
        Ok(())
    }
}
