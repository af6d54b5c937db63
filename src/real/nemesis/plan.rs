//! Real-mode plans every service's real world shares: whether a consensus service's scenario has
//! a real-mode recipe for every fault, which clocks real mode can fake, and the links a partition
//! cuts. Everything here is decided before a process is spawned, so an unsupported scenario fails
//! fast with the reason. Each backend's own plan is in its real world (Redis's in
//! `backend/redis/real/plan.rs`, MySQL's in `backend/mysql/real/recipes.rs`).

use std::collections::BTreeMap;

use super::recipes::{ask, ConsensusRecipes};
use crate::fault::partition::partition_links;
use crate::fault::{Cut, Direction, Refused};
use crate::real::RealError;
use crate::scenario::Scenario;

/// Which partitions a service's real nemesis can cut, or why not.
pub(crate) type CutCheck = fn(&Scenario, &Cut<'_>) -> Result<(), RealError>;

/// Why a scenario cannot run on real processes (exit code 2, with the reason).
pub(crate) fn unsupported(what: String) -> RealError {
    RealError::Unsupported(what)
}

/// Why `scenario` has no real-mode recipe, or `None` when `--real` can run it.
#[deprecated(note = "use `Scenario::real_mode_unsupported`, which asks the scenario's backend")]
pub fn real_mode_unsupported(scenario: &Scenario) -> Option<String> {
    scenario.real_mode_unsupported()
}

/// Checks that every fault of a consensus service's scenario (a lock on `service`, built in or
/// a client program) has a recipe on the spawned `servers`; `cut_check` says which partitions
/// its real nemesis can cut (`None`: every partition of clients from servers).
pub(crate) fn check_consensus(
    s: &Scenario,
    servers: &str,
    service: &str,
    cut_check: Option<CutCheck>,
) -> Result<(), RealError> {
    program_clocks_only(s, servers)?;
    for f in &s.faults {
        let recipes = ConsensusRecipes {
            s,
            trigger: &f.trigger,
            cut_check,
        };
        match ask(&recipes, f) {
            Ok(()) => {}
            Err(Refused::Because(why)) => return Err(unsupported(why)),
            Err(Refused::Lacking) => {
                return Err(unsupported(format!(
                    "fault {} has no real-mode recipe for a lock on {service} (client pauses and crashes fire \
                     at a client's point, `on = ...`, or at `at_ms = 0` for a named client's late \
                     start; clock faults have none); run it in \
                     simulation",
                    crate::fault::fault_table(f).into_inline_table()
                )))
            }
        }
    }
    Ok(())
}

/// Where real mode fakes the clocks of client programs only (etcd, ZooKeeper, PostgreSQL): a
/// client program's clock runs under libfaketime, so `[clocks]` may set clients' clocks when
/// every client is a program, and a clock fault may move a program's clock (a drift from the
/// start only). `servers` names the service's servers in the message.
pub(crate) fn program_clocks_only(s: &Scenario, servers: &str) -> Result<(), RealError> {
    let programs_only = s.lock.kind.is_client_program()
        && s.clocks
            .applies_to(&s.node_names())
            .iter()
            .all(|n| client_index(s, n).is_some());
    if !s.clocks.is_perfect() && !programs_only {
        return Err(unsupported(format!(
            "`{}` sets [clocks] on {servers} or on lockcheck's own clients: real mode fakes the \
             clocks of client programs only (`nodes = [\"client-0\", ...]` with \
             `kind = \"client-program\"`); run it in simulation (without --real)",
            s.name
        )));
    }
    for f in s.faults.iter().filter(|f| f.kind.moves_a_clock()) {
        let recipes = ConsensusRecipes {
            s,
            trigger: &f.trigger,
            cut_check: None,
        };
        match ask(&recipes, f) {
            Ok(()) => {}
            Err(Refused::Because(why)) => return Err(unsupported(why)),
            Err(Refused::Lacking) => {
                return Err(unsupported(format!(
                    "fault {} has no real-mode recipe: real mode moves the clocks of client \
                     programs only (libfaketime), not of {servers} or of lockcheck's own \
                     clients; run it in simulation",
                    crate::fault::fault_table(f).into_inline_table()
                )))
            }
        }
    }
    Ok(())
}

/// The scenario's node names and the directed links (node indices) a partition cuts.
pub(crate) fn scenario_links(
    s: &Scenario,
    nodes: &[String],
    from: &[String],
    direction: Direction,
) -> (Vec<String>, Vec<(usize, usize)>) {
    let names = s.node_names();
    let index: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let links = partition_links(&index, nodes, from, direction);
    (names, links)
}

/// `client-<c>` -> c.
pub(crate) fn client_index(s: &Scenario, node: &str) -> Option<usize> {
    let c: u32 = node.strip_prefix("client-")?.parse().ok()?;
    (c < s.workload.clients).then_some(c as usize)
}
