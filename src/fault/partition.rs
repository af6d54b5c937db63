//! A partition (`kind = "partition"`): the links between `nodes` and `from` (everyone else when
//! `from` is empty) are cut for `for_ms`, both ways or one (`direction`), then healed. What
//! crosses a cut is lost (a simulated link) or held (a link proxy, a black hole), per world.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use std::collections::BTreeMap;

use super::draw::{master_slot, slot, Cast, Deployment, SLOTS, WATCHERS_OR_EVERYONE};

use super::table::quoted;
use super::{FaultKind, KeyError, Nemesis, Refused, Table, Written};

/// Which way a partition cuts the links between `nodes` and the others (`from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Nothing passes either way (the default).
    #[default]
    Both,
    /// `nodes` hear nothing from the others; what they send still arrives.
    Inbound,
    /// What `nodes` send to the others is lost; they still hear them.
    Outbound,
}

impl Direction {
    /// The names scenario files use.
    pub const NAMES: &'static [&'static str] = &["both", "inbound", "outbound"];

    /// The name scenario files use for this direction.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Both => "both",
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }

    fn parse(s: &str) -> Option<Direction> {
        match s {
            "both" => Some(Direction::Both),
            "inbound" => Some(Direction::Inbound),
            "outbound" => Some(Direction::Outbound),
            _ => None,
        }
    }
}

/// A partition as a world cuts it: one side, the other (everyone else when empty), which way,
/// and how long until it heals.
#[derive(Clone, Copy, Debug)]
pub struct Cut<'a> {
    /// The nodes on one side.
    pub nodes: &'a [String],
    /// The nodes on the other side; empty: everyone else.
    pub from: &'a [String],
    /// Which way messages are dropped.
    pub direction: Direction,
    /// How long until the links heal (ms).
    pub for_ms: u64,
}

/// `kind = "partition"`.
pub const WRITTEN: Written = Written {
    name: "partition",
    keys: &["nodes", "from", "for_ms", "direction", "client"],
    parse,
};

fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let f = t.raw;
    let nodes = t.node_list(f.nodes.as_ref().ok_or_else(|| t.need("nodes"))?)?;
    let from = match &f.from {
        Some(fr) => t.node_list(fr)?,
        None => Vec::new(),
    };
    if let Some(both) = nodes.iter().find(|n| from.contains(n)) {
        let span = f.from.as_ref().map(|s| s.span()).unwrap_or(t.span.clone());
        return Err(t.err(
            span,
            format!("`{both}` is in both `nodes` and `from`: a node cannot be cut off from itself"),
        ));
    }
    let direction = match &f.direction {
        None => Direction::Both,
        Some(d) => Direction::parse(d.get_ref()).ok_or_else(|| {
            t.err(
                d.span(),
                format!(
                    "unknown direction `{}`, expected one of {}",
                    d.get_ref(),
                    quoted(Direction::NAMES)
                ),
            )
        })?,
    };
    Ok(FaultKind::Partition {
        nodes,
        from,
        for_ms: *t.required("for_ms", &f.for_ms)?,
        direction,
    })
}

pub(super) fn write(
    nodes: &[String],
    from: &[String],
    for_ms: u64,
    direction: Direction,
    t: &mut toml_edit::Table,
) {
    let names = |v: &[String]| v.iter().map(String::as_str).collect::<toml_edit::Array>();
    t["nodes"] = toml_edit::value(names(nodes));
    if !from.is_empty() {
        t["from"] = toml_edit::value(names(from));
    }
    if direction != Direction::Both {
        t["direction"] = toml_edit::value(direction.name());
    }
    t["for_ms"] = toml_edit::value(for_ms as i64);
}

pub(super) fn label() -> String {
    "partition".to_string()
}

pub(super) fn fire<N: Nemesis + ?Sized>(
    n: &N,
    nodes: &[String],
    from: &[String],
    for_ms: u64,
    direction: Direction,
) -> Result<(), Refused> {
    n.cut(&Cut {
        nodes,
        from,
        direction,
        for_ms,
    })
}

/// How explore draws a partition: a node slot cut off from another node slot or from everyone,
/// one way or both, for `ms`.
pub fn draw(ms: [u64; 2]) -> BoxedStrategy<FaultKind> {
    (
        0..SLOTS,
        prop::option::of(0..SLOTS),
        prop_oneof![
            Just(Direction::Both),
            Just(Direction::Inbound),
            Just(Direction::Outbound)
        ],
        ms[0]..=ms[1],
    )
        .prop_map(|(node, from, direction, for_ms)| FaultKind::Partition {
            nodes: vec![slot(node)],
            from: from.map(slot).into_iter().collect(),
            for_ms,
            direction,
        })
        .boxed()
}

/// How explore draws a split in a deployment that promotes a replica by itself: a master of
/// `masters` groups and the first `clients` clients (at most `max_clients`; those the case lacks
/// drop out) cut off from everyone else, both ways; with no client on its side, the master cut
/// off from the deployment's watchers alone (Redis's sentinels; with none, from everyone). The
/// split brain Sentinel and Redis Cluster users meet: the others promote a replica while the old
/// master keeps serving whoever is on its side. Drawn as one fault, so that it shrinks to one partition rather than to
/// the several single-node cuts it would otherwise take to build; the count of clients on the
/// master's side shrinks towards 0.
pub fn draw_split(masters: u32, max_clients: u32, ms: [u64; 2]) -> BoxedStrategy<FaultKind> {
    (0..masters.max(1), 0..=max_clients, ms[0]..=ms[1])
        .prop_map(|(master, clients, for_ms)| {
            let mut nodes = vec![master_slot(master)];
            nodes.extend((0..clients).map(|c| format!("client-{c}")));
            FaultKind::Partition {
                nodes,
                from: vec![WATCHERS_OR_EVERYONE.to_string()],
                for_ms,
                direction: Direction::Both,
            }
        })
        .boxed()
}

/// A drawn partition's sides on the case's nodes: slots placed, clients the case lacks dropped,
/// a node never cut off from itself, and a split's other side decided.
pub(super) fn place(
    nodes: &[String],
    from: &[String],
    cast: &Cast<'_>,
    deployment: &Deployment<'_>,
) -> (Vec<String>, Vec<String>) {
    let nodes: Vec<String> = nodes
        .iter()
        .map(|n| cast.node(&deployment.node(n)))
        .filter(|n| {
            n.strip_prefix("client-")
                .and_then(|c| c.parse::<u32>().ok())
                .is_none_or(|c| c < cast.clients)
        })
        .collect();
    if from == [WATCHERS_OR_EVERYONE] {
        let from = if nodes.len() == 1 {
            deployment.watchers.to_vec()
        } else {
            Vec::new()
        };
        return (nodes, from);
    }
    let from = from
        .iter()
        .map(|n| cast.node(n))
        .filter(|f| !nodes.contains(f))
        .collect();
    (nodes, from)
}

/// The directed links (`(sender, receiver)` node indices) a partition cuts between `nodes` and
/// `from` (everyone else when `from` is empty), in `direction`. The simulator cuts exactly these;
/// real mode maps each to a client connection it can point at a black hole.
pub fn partition_links(
    index: &BTreeMap<String, usize>,
    nodes: &[String],
    from: &[String],
    direction: Direction,
) -> Vec<(usize, usize)> {
    let cut: Vec<usize> = nodes.iter().map(|n| index[n]).collect();
    let others: Vec<usize> = if from.is_empty() {
        index
            .values()
            .copied()
            .filter(|i| !cut.contains(i))
            .collect()
    } else {
        from.iter().map(|n| index[n]).collect()
    };
    let mut links = Vec::new();
    for &a in &cut {
        for &b in &others {
            if direction != Direction::Inbound {
                links.push((a, b));
            }
            if direction != Direction::Outbound {
                links.push((b, a));
            }
        }
    }
    links
}

/// How a partition reads in the history: who is cut off from whom, for how long.
pub fn describe_partition(nodes: &[String], from: &[String], for_ms: u64) -> String {
    let others = if from.is_empty() {
        "everyone".to_string()
    } else {
        from.join(", ")
    };
    format!(
        "partition: {} cut off from {others} for {for_ms} ms",
        nodes.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drawn split lands on the deployment as its backend names it: the group's master from
    /// the declared masters, the clients the case has, and, with no client on the master's
    /// side, the declared watchers as the other side (none: everyone else).
    #[test]
    fn a_split_lands_on_the_declared_masters_and_watchers() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let nodes = strings(&["a-0", "a-0-copy", "a-1", "a-1-copy", "client-0", "client-1"]);
        let masters = strings(&["a-0", "a-1"]);
        let watchers = strings(&["w-0", "w-1", "w-2"]);
        let deployment = Deployment {
            masters: &masters,
            watchers: &watchers,
        };
        let cast = Cast::new(2, &nodes);
        let split = |master: u32, clients: u32| FaultKind::Partition {
            nodes: std::iter::once(master_slot(master))
                .chain((0..clients).map(|c| format!("client-{c}")))
                .collect(),
            from: vec![WATCHERS_OR_EVERYONE.to_string()],
            for_ms: 100,
            direction: Direction::Both,
        };
        let sides = |f: FaultKind| match f {
            FaultKind::Partition { nodes, from, .. } => (nodes, from),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            sides(split(1, 0).place_in(&cast, &deployment)),
            (strings(&["a-1"]), watchers.clone())
        );
        // A third client the case lacks drops out; with a client on its side, everyone else.
        assert_eq!(
            sides(split(0, 3).place_in(&cast, &deployment)),
            (strings(&["a-0", "client-0", "client-1"]), vec![])
        );
        let none = Deployment {
            masters: &masters,
            watchers: &[],
        };
        assert_eq!(
            sides(split(1, 0).place_in(&cast, &none)),
            (strings(&["a-1"]), vec![])
        );
    }

    #[test]
    fn partition_directions_cut_the_right_links() {
        let index: BTreeMap<String, usize> = ["redis-0", "redis-1", "client-0"]
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), i))
            .collect();
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cut = |nodes: &[&str], from: &[&str], d| {
            let mut l = partition_links(&index, &n(nodes), &n(from), d);
            l.sort();
            l
        };
        // redis-0 = 0, redis-1 = 1, client-0 = 2.
        assert_eq!(
            cut(&["redis-0"], &["client-0"], Direction::Both),
            [(0, 2), (2, 0)]
        );
        // Inbound: redis-0 hears nothing from client-0, its replies still go out.
        assert_eq!(
            cut(&["redis-0"], &["client-0"], Direction::Inbound),
            [(2, 0)]
        );
        // Outbound: what redis-0 sends to client-0 is lost.
        assert_eq!(
            cut(&["redis-0"], &["client-0"], Direction::Outbound),
            [(0, 2)]
        );
        // No `from`: everyone else.
        assert_eq!(
            cut(&["redis-0"], &[], Direction::Outbound),
            [(0, 1), (0, 2)]
        );
    }
}
