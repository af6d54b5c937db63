//! How explore draws a fault: each family draws its own values ([`FaultKind`]), with the
//! clients and nodes it hits drawn as slots, then placed on a case's own clients and nodes
//! ([`FaultKind::place`]). Drawing a slot rather than a name keeps every fault valid while
//! proptest shrinks the case's client count: a slot lands on whichever clients the case has.

use super::FaultKind;

/// How many slots a client or node choice is drawn from (placed modulo the real count).
pub const SLOTS: u32 = 64;

/// A drawn node slot, as a node name no scenario can write (`#<slot>`), until it is placed.
pub fn slot(n: u32) -> String {
    format!("#{n}")
}

/// The side of a split drawn without its other side: the deployment's watchers alone if nobody
/// joins the master, else everyone else (see [`super::partition::draw_split`]).
pub(super) const WATCHERS_OR_EVERYONE: &str = "#watchers-or-everyone";

/// A master group's node, drawn as its group (`#master-<g>`) until it is placed on the
/// deployment's own names ([`Deployment::masters`]): a split is drawn before explore knows what
/// the backend calls its nodes.
pub fn master_slot(group: u32) -> String {
    format!("#master-{group}")
}

/// What a drawn fault is placed on: a case's clients and its nodes.
pub struct Cast<'a> {
    /// The case's clients.
    pub clients: u32,
    /// Every node: the servers, then `client-<c>` for each client.
    pub nodes: &'a [String],
    /// How many watchers of the deployment were the legacy `sentinel-<i>` nodes: read only by
    /// [`FaultKind::place`]. Explore places faults with [`FaultKind::place_in`], which takes
    /// the watchers from the backend's declaration.
    #[deprecated(
        since = "0.1.0",
        note = "build with `Cast::new` and place with `FaultKind::place_in`, which takes the \
                deployment's watchers from its backend's declaration"
    )]
    pub sentinels: u32,
}

/// The parts of a case's deployment a split is placed against, as its backend declares them
/// (`BackendDecl::servers` and `BackendDecl::watchers`), so that no fault family needs to know
/// what any service calls its nodes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Deployment<'a> {
    /// The master of each group, in group order (`#master-<g>` lands on the `g`-th).
    pub masters: &'a [String],
    /// The nodes that watch the servers and decide a failover, holding no data: a split with
    /// no client on the master's side cuts the master off from these alone.
    pub watchers: &'a [String],
}

impl Deployment<'_> {
    /// The node a master slot lands on; any other name stays itself.
    pub fn node(&self, name: &str) -> String {
        match name
            .strip_prefix("#master-")
            .and_then(|g| g.parse::<usize>().ok())
            .and_then(|g| self.masters.get(g))
        {
            Some(master) => master.clone(),
            None => name.to_string(),
        }
    }
}

impl<'a> Cast<'a> {
    /// A cast of `clients` clients over `nodes` (the servers, then `client-<c>` for each client).
    pub fn new(clients: u32, nodes: &'a [String]) -> Self {
        #[allow(deprecated)]
        Cast {
            clients,
            nodes,
            sentinels: 0,
        }
    }
    /// The node a slot lands on; a name that is no slot stays itself.
    pub fn node(&self, name: &str) -> String {
        match name.strip_prefix('#').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => self.nodes[n % self.nodes.len()].clone(),
            None => name.to_string(),
        }
    }

    /// The client a client slot lands on.
    pub fn client(&self, slot: u32) -> u32 {
        slot % self.clients
    }
}

impl FaultKind {
    /// The drawn fault placed on `cast`'s clients and nodes, with a Redis deployment's names
    /// for its masters (`redis-<g>`) and `cast.sentinels` sentinels (`sentinel-<i>`) as its
    /// watchers: what explore did before the backends declared their watchers.
    #[deprecated(
        since = "0.1.0",
        note = "use `FaultKind::place_in` with the deployment's masters and watchers"
    )]
    pub fn place(&self, cast: &Cast<'_>) -> FaultKind {
        let masters: Vec<String> = (0..SLOTS).map(|g| format!("redis-{g}")).collect();
        #[allow(deprecated)]
        let watchers: Vec<String> = (0..cast.sentinels)
            .map(|i| format!("sentinel-{i}"))
            .collect();
        self.place_in(
            cast,
            &Deployment {
                masters: &masters,
                watchers: &watchers,
            },
        )
    }

    /// The drawn fault placed on `cast`'s clients and nodes, and a split on `deployment`'s
    /// masters and watchers: what the case runs.
    pub fn place_in(&self, cast: &Cast<'_>, deployment: &Deployment<'_>) -> FaultKind {
        match self {
            FaultKind::Pause { client, for_ms } => FaultKind::Pause {
                client: super::pause::place(client, cast),
                for_ms: *for_ms,
            },
            FaultKind::ClientCrash { client } => FaultKind::ClientCrash {
                client: cast.client(*client),
            },
            FaultKind::Terminate { client } => FaultKind::Terminate {
                client: super::terminate::place(client, cast),
            },
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => {
                let (nodes, from) = super::partition::place(nodes, from, cast, deployment);
                FaultKind::Partition {
                    nodes,
                    from,
                    for_ms: *for_ms,
                    direction: *direction,
                }
            }
            FaultKind::ClockJump { node, by_ms } => FaultKind::ClockJump {
                node: cast.node(node),
                by_ms: *by_ms,
            },
            FaultKind::WallClockJump { node, by_ms } => FaultKind::WallClockJump {
                node: cast.node(node),
                by_ms: *by_ms,
            },
            FaultKind::ClockDrift { node, ppm } => FaultKind::ClockDrift {
                node: cast.node(node),
                ppm: *ppm,
            },
            FaultKind::Failover { .. }
            | FaultKind::ClusterFailover { .. }
            | FaultKind::SlotMigration { .. }
            | FaultKind::Crash { .. }
            | FaultKind::ServerPause { .. } => self.clone(),
        }
    }

    /// How long a pause (a client's or a server's) lasts, to cut it to a budget; `None` for
    /// faults that are no pause.
    pub fn pause_ms_mut(&mut self) -> Option<&mut u64> {
        match self {
            FaultKind::Pause { for_ms, .. } | FaultKind::ServerPause { for_ms, .. } => Some(for_ms),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::partition::Direction;

    /// The deprecated `place` still gives a Redis deployment's names, as explore did before the
    /// backends declared their masters and watchers: `redis-<g>` and `sentinel-<i>`.
    #[test]
    #[allow(deprecated)]
    fn the_deprecated_place_keeps_the_names_it_gave() {
        let nodes: Vec<String> = ["redis-0", "redis-1", "client-0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cast = Cast {
            clients: 1,
            nodes: &nodes,
            sentinels: 2,
        };
        let split = FaultKind::Partition {
            nodes: vec![master_slot(1)],
            from: vec![WATCHERS_OR_EVERYONE.to_string()],
            for_ms: 100,
            direction: Direction::Both,
        };
        let FaultKind::Partition { nodes, from, .. } = split.place(&cast) else {
            unreachable!()
        };
        assert_eq!(nodes, ["redis-1"]);
        assert_eq!(from, ["sentinel-0", "sentinel-1"]);
    }
}
