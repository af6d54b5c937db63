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

/// The side of a split drawn without its other side: the sentinels alone if nobody joins the
/// master, else everyone else (see [`super::partition::draw_split`]).
pub(super) const SENTINELS_OR_EVERYONE: &str = "#sentinels-or-everyone";

/// What a drawn fault is placed on: a case's clients, its nodes, its sentinels.
pub struct Cast<'a> {
    /// The case's clients.
    pub clients: u32,
    /// Every node: the servers, then `client-<c>` for each client.
    pub nodes: &'a [String],
    /// Redis Sentinels in the deployment.
    pub sentinels: u32,
}

impl Cast<'_> {
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
    /// The drawn fault placed on `cast`'s clients and nodes: what the case runs.
    pub fn place(&self, cast: &Cast<'_>) -> FaultKind {
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
                let (nodes, from) = super::partition::place(nodes, from, cast);
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
