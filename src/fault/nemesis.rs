//! The capabilities a world offers its faults: the one seam between a fault family and a world.
//!
//! A family fires by calling these (a failover is [`Nemesis::fail_over`], a clock jump
//! [`Nemesis::jump_clock`]), never by asking which world it is in; a world implements the
//! capabilities it has and refuses the others ([`Refused`]). Each capability carries its own
//! follow-up (the heal of a cut, the restart after a crash, the resume after a pause) because
//! only the world knows how to wait: a timer on the simulated nemesis's node, a tokio task, a
//! failover rig that holds its group from the kill to the promotion.

use super::{ClientRef, Cut};

/// Why a world did not carry a fault out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The world has no such capability at all; its caller words the refusal.
    Lacking,
    /// The world has the capability but not for this target: what the history records.
    Because(String),
}

/// When a fault fires: the named point that set it off (`"at_ms"` for a fixed time) and the
/// client whose step reached it.
#[derive(Debug, Clone, Copy)]
pub struct Occasion<'a> {
    /// The named point, or `"at_ms"`.
    pub point: &'a str,
    /// The client that reached it; `None` for a fixed time.
    pub by: Option<u32>,
}

impl Occasion<'static> {
    /// A fault with a fixed time (`at_ms`).
    pub const TIMED: Occasion<'static> = Occasion {
        point: "at_ms",
        by: None,
    };
}

/// What a world can do to its nodes. Every capability is refused unless the world implements
/// it, so a new world starts with none and gains them one by one.
pub trait Nemesis {
    /// Stops `victim` (a named client, or the holder: the client that set the fault off, else
    /// whoever holds the lock now) for `for_ms`, as a stop-the-world GC pause stops every thread.
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        let _ = (at, victim, for_ms);
        Err(Refused::Lacking)
    }

    /// Kills client `client` where it stands (`at.point`): it never releases, never comes back.
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        let _ = (at, client);
        Err(Refused::Lacking)
    }

    /// Kills the master of group `master` and promotes its replica once the failure is detected.
    fn fail_over(&self, master: u32) -> Result<(), Refused> {
        let _ = master;
        Err(Refused::Lacking)
    }

    /// Kills server `node`; `restart_after_ms` later it restarts empty (nothing persisted).
    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let _ = (node, restart_after_ms);
        Err(Refused::Lacking)
    }

    /// Cuts the links between `cut.nodes` and `cut.from` (everyone else when empty) in
    /// `cut.direction`, and heals them `cut.for_ms` later.
    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let _ = cut;
        Err(Refused::Lacking)
    }

    /// Steps `node`'s clocks by `by_ms`: both, or its wall clock alone (`wall_only`).
    fn jump_clock(&self, node: &str, by_ms: i64, wall_only: bool) -> Result<(), Refused> {
        let _ = (node, by_ms, wall_only);
        Err(Refused::Lacking)
    }

    /// Sets `node`'s clock rate error to `ppm` parts per million.
    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        let _ = (node, ppm);
        Err(Refused::Lacking)
    }

    /// Stops server `node` (`SIGSTOP`: it answers nothing, its timers stand still) for `for_ms`.
    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        let _ = (node, for_ms);
        Err(Refused::Lacking)
    }

    /// Sends `CLUSTER FAILOVER` in `form` to the first replica of master group `master`, in a
    /// Redis Cluster; the cluster does the rest.
    fn cluster_failover(
        &self,
        master: u32,
        form: super::ClusterFailoverForm,
    ) -> Result<(), Refused> {
        let _ = (master, form);
        Err(Refused::Lacking)
    }

    /// Migrates the lock key's slot to master group `to` over `for_ms`, in a Redis Cluster
    /// (`SETSLOT IMPORTING`/`MIGRATING` now, `MIGRATE` of its keys half-way, `SETSLOT NODE` at
    /// the end).
    fn migrate_slot(&self, to: u32, for_ms: u64) -> Result<(), Refused> {
        let _ = (to, for_ms);
        Err(Refused::Lacking)
    }

    /// Ends `victim`'s server session while the client lives on (`pg_terminate_backend`): what
    /// the session held goes now; the client learns it on its next request.
    fn end_session(&self, at: &Occasion<'_>, victim: &ClientRef) -> Result<(), Refused> {
        let _ = (at, victim);
        Err(Refused::Lacking)
    }
}

/// The capabilities a wrapper that stands in for the world's nemesis at a client's point hands on
/// unchanged: every one but the client's own pause and crash, which the wrapper carries out in
/// the client's task. Written once beside the trait, so a capability added above reaches every
/// such wrapper (the Redis world's and `real::nemesis::client_stops`'s `AtClient`) by one more
/// line here, instead of by hand in each, where a missed one would be refused silently at a
/// client's point only.
///
/// `forward_to_world!(n)` inside an `impl Nemesis for ...` forwards to `self.n`.
macro_rules! forward_to_world {
    ($n:ident) => {
        fn fail_over(&self, master: u32) -> Result<(), $crate::fault::Refused> {
            self.$n.fail_over(master)
        }

        fn crash_server(
            &self,
            node: &str,
            restart_after_ms: u64,
        ) -> Result<(), $crate::fault::Refused> {
            self.$n.crash_server(node, restart_after_ms)
        }

        fn cut(&self, cut: &$crate::fault::Cut<'_>) -> Result<(), $crate::fault::Refused> {
            self.$n.cut(cut)
        }

        fn jump_clock(
            &self,
            node: &str,
            by_ms: i64,
            wall_only: bool,
        ) -> Result<(), $crate::fault::Refused> {
            self.$n.jump_clock(node, by_ms, wall_only)
        }

        fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), $crate::fault::Refused> {
            self.$n.drift_clock(node, ppm)
        }

        fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), $crate::fault::Refused> {
            self.$n.pause_server(node, for_ms)
        }

        fn cluster_failover(
            &self,
            master: u32,
            form: $crate::fault::ClusterFailoverForm,
        ) -> Result<(), $crate::fault::Refused> {
            self.$n.cluster_failover(master, form)
        }

        fn migrate_slot(&self, to: u32, for_ms: u64) -> Result<(), $crate::fault::Refused> {
            self.$n.migrate_slot(to, for_ms)
        }

        fn end_session(
            &self,
            at: &$crate::fault::Occasion<'_>,
            victim: &$crate::fault::ClientRef,
        ) -> Result<(), $crate::fault::Refused> {
            self.$n.end_session(at, victim)
        }
    };
}
pub(crate) use forward_to_world;

#[cfg(test)]
mod tests {
    /// The names of the `fn`s in `text`, in order.
    fn fns(text: &str) -> Vec<&str> {
        text.split("fn ")
            .skip(1)
            .filter_map(|rest| rest.split(['(', '<']).next())
            .collect()
    }

    /// `forward_to_world!` hands on every capability of the trait but a client's own pause and
    /// crash: a capability added to the trait and not to the macro would be refused at a
    /// client's point only, silently.
    #[test]
    fn the_forwarding_list_is_the_trait_without_the_clients_own_stops() {
        let source = include_str!("nemesis.rs");
        let trait_body = &source[source.find("pub trait Nemesis").unwrap()..];
        let trait_body = &trait_body[..trait_body.find("\n}\n").unwrap()];
        let macro_body = &source[source.find("macro_rules! forward_to_world").unwrap()..];
        let macro_body = &macro_body[..macro_body.find("\n}\n").unwrap()];
        let mut expected: Vec<&str> = fns(trait_body)
            .into_iter()
            .filter(|f| !["pause_client", "crash_client"].contains(f))
            .collect();
        let mut forwarded = fns(macro_body);
        expected.sort();
        forwarded.sort();
        assert_eq!(forwarded, expected);
    }
}
