//! Which connections a partition of a real ZooKeeper run cuts: a client's own forwarder to each
//! server, which holds both ways.

use crate::fault::Cut;
use crate::real::nemesis::plan::{client_index, scenario_links, unsupported};
use crate::real::RealError;
use crate::scenario::Scenario;

/// `zookeeper-<i>` -> i, for the scenario's ZooKeeper servers.
pub(crate) fn zookeeper_index(s: &Scenario, node: &str) -> Option<usize> {
    let i: u32 = node.strip_prefix("zookeeper-")?.parse().ok()?;
    (i < s.zookeeper.servers).then_some(i as usize)
}

/// The (client, `zookeeper-<i>`) connections a partition of a ZooKeeper run cuts, or why it
/// cannot. Each is a client's own forwarder to that server, which holds both ways: a one-way cut
/// would let a client's pings reach the server (its session lives) while it hears nothing, a
/// different fault, so it is refused; so is a cut between servers, whose links lockcheck does not
/// forward.
pub(crate) fn zookeeper_cuts(
    s: &Scenario,
    cut: &Cut<'_>,
) -> Result<Vec<(usize, usize)>, RealError> {
    let (names, links) = scenario_links(s, cut.nodes, cut.from, cut.direction);
    // Link x -> y as (client, server), if it is one.
    let pair =
        |x: usize, y: usize| Some((client_index(s, &names[x])?, zookeeper_index(s, &names[y])?));
    let mut held = Vec::new();
    for &(a, b) in &links {
        let (na, nb) = (&names[a], &names[b]);
        match pair(a, b).or_else(|| pair(b, a)) {
            Some(_) if !links.contains(&(b, a)) => {
                return Err(unsupported(format!(
                    "a one-way partition cutting {na} -> {nb}: a client's forwarder to a ZooKeeper \
                     server holds both ways; run it in simulation, without --real"
                )))
            }
            Some(p) => held.push(p),
            // Clients never talk to each other: that cut changes nothing.
            None if client_index(s, na).is_some() && client_index(s, nb).is_some() => {}
            None => {
                return Err(unsupported(format!(
                "partition cutting {na} -> {nb}: real mode cuts the clients' connections to the \
                     ZooKeeper servers, not the servers' links to each other; run it in \
                     simulation, without --real"
            )))
            }
        }
    }
    held.sort();
    held.dedup();
    Ok(held)
}
