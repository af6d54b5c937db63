//! The proptest [`Strategy`] whose values are explore cases: a fault schedule, the workload knobs
//! and a simulation seed.
//!
//! The value is built from proptest's own combinators (`vec`, unions, ranges, tuples) so that
//! proptest's shrinking does the minimising: the schedule loses faults first, then each fault
//! fires earlier and lasts less, then there are fewer clients and cycles, shorter critical
//! sections, and last a smaller seed. Client and node choices are drawn as slots and mapped onto
//! the case's own client count, so shrinking the clients never makes a fault invalid. Only the
//! fault kinds that apply to the cluster are drawn, from ranges `Space::of` checked non-empty.

use crate::scenario::Space;
use crate::scenario::{ClientRef, Direction, Fault, FaultKind, Scenario, Trigger};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

/// How many slots a client or node choice is drawn from (mapped modulo the real count).
const SLOTS: u32 = 64;

/// When a drawn fault fires.
#[derive(Clone, Debug, PartialEq)]
pub enum When {
    /// At a named point, at or after `after_ms`.
    Point {
        /// Index into the space's points.
        point: usize,
        /// True time before which passing the point does not fire the fault (ms).
        after_ms: u64,
    },
    /// At a true time.
    At(u64),
}

/// A drawn fault, before it is mapped onto a case's clients and nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Drawn {
    /// A stop-the-world pause of a client (a GC pause).
    Pause {
        /// `None` is the holder, else a client slot.
        client: Option<u32>,
        /// How long the client is stopped (ms).
        for_ms: u64,
    },
    /// The master of a group dies and its replica is promoted.
    Failover {
        /// The master group.
        master: u32,
    },
    /// A server crashes and later restarts (a Redis node empty, the database with its
    /// committed rows).
    Crash {
        /// A server slot.
        node: u32,
        /// How long it stays down (ms).
        restart_after_ms: u64,
    },
    /// A client dies for good, leaving whatever it holds to its lease.
    ClientCrash {
        /// A client slot.
        client: u32,
    },
    /// A Redis node loses the network.
    Partition {
        /// A node slot.
        node: u32,
        /// `None`: cut off from everyone; else the node slot on the other side.
        from: Option<u32>,
        /// Which way messages are dropped.
        direction: Direction,
        /// How long the partition lasts (ms).
        for_ms: u64,
    },
    /// With sentinels: a master and the first `clients` clients cut off from everyone else
    /// (the sentinels, the replicas, the other clients), both ways; with `clients = 0`, the
    /// master cut off from the sentinels alone. The split brain Sentinel users meet: the
    /// sentinels promote a replica while the old master keeps serving whoever is on its side.
    Split {
        /// A master group.
        master: u32,
        /// Clients on the master's side (0: none, and only the sentinels are on the other).
        clients: u32,
        /// How long the split lasts (ms).
        for_ms: u64,
    },
    /// A Redis node's clock steps (an NTP correction, an operator's `date`).
    ClockJump {
        /// A node slot.
        node: u32,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// A Redis node's clock runs at the wrong rate.
    ClockDrift {
        /// A node slot.
        node: u32,
        /// The rate error (ppm).
        ppm: i64,
    },
    /// A node's wall clock alone steps (an NTP step): a Redis node's expiry moves, a client's
    /// `currentTimeMillis` moves, monotonic clocks go on.
    WallClockJump {
        /// A node slot (Redis nodes and clients).
        node: u32,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// The MySQL locks' database server stops (`SIGSTOP`) and resumes.
    ServerPause {
        /// A server slot.
        node: u32,
        /// How long it is stopped (ms).
        for_ms: u64,
    },
}

/// One explore case: everything proptest draws and shrinks.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The fault schedule, each fault with its trigger.
    pub faults: Vec<(When, Drawn)>,
    /// Clients in the workload.
    pub clients: u32,
    /// Cycles per client.
    pub cycles: u32,
    /// Critical-section length range (ms).
    pub hold_ms: [u64; 2],
    /// The simulation seed: shrinks last, since a different seed is a different run altogether.
    pub seed: u64,
    /// Nested acquires inside each critical section. Drawn after the seed, so the cases of a
    /// space whose `nested` range is one value are the cases it had before this dimension.
    pub nested: u32,
}

/// The strategy for the cases of `space`.
pub fn cases(space: &Space) -> BoxedStrategy<Case> {
    let faults = if space.max_faults == 0 || space.faults.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        let budget = space.max_total_pause_ms;
        // On real servers every case has a fault: the fault-free run is the scenario itself,
        // which `lockcheck run --real` checks, and a real case costs a second.
        let fewest = usize::from(space.real);
        prop::collection::vec(fault(space), fewest..=space.max_faults)
            .prop_map(move |faults| super::pause_budget::within(faults, budget))
            .boxed()
    };
    let [h0, h1] = space.hold_ms;
    // On real servers the seed does not fix the run, so every case keeps the scenario's.
    let seed = if space.real {
        Just(space.seed).boxed()
    } else {
        (0..=u64::from(u32::MAX)).boxed()
    };
    (
        faults,
        space.clients[0]..=space.clients[1],
        space.cycles[0]..=space.cycles[1],
        (h0..=h1, h0..=h1),
        seed,
        space.nested[0]..=space.nested[1],
    )
        .prop_map(|(faults, clients, cycles, (a, b), seed, nested)| Case {
            faults,
            clients,
            cycles,
            hold_ms: [a.min(b), a.max(b)],
            seed,
            nested,
        })
        .boxed()
}

fn at_point(space: &Space) -> BoxedStrategy<When> {
    let n = space.points.len();
    let [low, high] = space.after_ms();
    (0..n, low..=high)
        .prop_map(|(point, after_ms)| When::Point { point, after_ms })
        .boxed()
}

fn at_time(space: &Space) -> BoxedStrategy<When> {
    (0..=space.duration_ms).prop_map(When::At).boxed()
}

/// When a server or network fault fires: at a named point or at a time in simulation; at a time
/// on real servers, where a named point is a client's own (real mode stops a process there, but
/// does not crash a server on its behalf).
fn when(space: &Space) -> BoxedStrategy<When> {
    if space.real {
        return at_time(space);
    }
    Union::new(vec![at_point(space), at_time(space)]).boxed()
}

/// When a clock starts drifting: at any time in simulation; from the start on real servers, where
/// libfaketime sets a server's rate when it starts.
fn drift_when(space: &Space) -> BoxedStrategy<When> {
    if space.real {
        return Just(When::At(0)).boxed();
    }
    when(space)
}

/// When a client pause fires: at a named point or at a time in simulation; at a named point on
/// real servers, where a pause is a `SIGSTOP` (or a stopped task) sent as the client reaches it.
fn pause_when(space: &Space) -> BoxedStrategy<When> {
    if space.real {
        return at_point(space);
    }
    when(space)
}

/// A node cut off from one other node or from everyone, one way or both.
fn partition(space: &Space) -> BoxedStrategy<(When, Drawn)> {
    (
        when(space),
        0..SLOTS,
        prop::option::of(0..SLOTS),
        prop_oneof![
            Just(Direction::Both),
            Just(Direction::Inbound),
            Just(Direction::Outbound)
        ],
        space.partition_ms[0]..=space.partition_ms[1],
    )
        .prop_map(|(w, node, from, direction, for_ms)| {
            (
                w,
                Drawn::Partition {
                    node,
                    from,
                    direction,
                    for_ms,
                },
            )
        })
        .boxed()
}

/// With sentinels, a master with some clients split from the rest ([`Drawn::Split`]). Drawn as
/// one fault, so that the split brain shrinks to one partition rather than to the several
/// single-node cuts it would otherwise take to build; the count of clients on the master's side
/// shrinks towards 0 (the master against the sentinels alone).
fn split(space: &Space) -> BoxedStrategy<(When, Drawn)> {
    (
        when(space),
        0..space.masters.max(1),
        0..=space.clients[1],
        space.partition_ms[0]..=space.partition_ms[1],
    )
        .prop_map(|(w, master, clients, for_ms)| {
            (
                w,
                Drawn::Split {
                    master,
                    clients,
                    for_ms,
                },
            )
        })
        .boxed()
}

fn fault(space: &Space) -> BoxedStrategy<(When, Drawn)> {
    let servers = space.servers.len() as u32;
    let arms: Vec<BoxedStrategy<(When, Drawn)>> = space
        .faults
        .iter()
        .map(|kind| match *kind {
            "pause" => (
                pause_when(space),
                prop::option::of(0..SLOTS),
                space.pause_ms[0]..=space.pause_ms[1],
            )
                .prop_map(|(w, client, for_ms)| (w, Drawn::Pause { client, for_ms }))
                .boxed(),
            "failover" => (when(space), 0..space.masters)
                .prop_map(|(w, master)| (w, Drawn::Failover { master }))
                .boxed(),
            "crash" => (
                when(space),
                0..servers,
                space.restart_ms[0]..=space.restart_ms[1],
            )
                .prop_map(|(w, node, restart_after_ms)| {
                    (
                        w,
                        Drawn::Crash {
                            node,
                            restart_after_ms,
                        },
                    )
                })
                .boxed(),
            "client_crash" => (at_point(space), 0..SLOTS)
                .prop_map(|(w, client)| (w, Drawn::ClientCrash { client }))
                .boxed(),
            "partition" if space.sentinels > 0 => {
                Union::new(vec![partition(space), split(space)]).boxed()
            }
            "partition" => partition(space),
            "clock_jump" => (
                when(space),
                0..SLOTS,
                space.clock_jump_ms[0]..=space.clock_jump_ms[1],
            )
                .prop_map(|(w, node, by_ms)| (w, Drawn::ClockJump { node, by_ms }))
                .boxed(),
            "clock_drift" => (
                drift_when(space),
                0..SLOTS,
                space.clock_drift_ppm[0]..=space.clock_drift_ppm[1],
            )
                .prop_map(|(w, node, ppm)| (w, Drawn::ClockDrift { node, ppm }))
                .boxed(),
            "wall_clock_jump" => (
                when(space),
                0..SLOTS,
                space.wall_clock_jump_ms[0]..=space.wall_clock_jump_ms[1],
            )
                .prop_map(|(w, node, by_ms)| (w, Drawn::WallClockJump { node, by_ms }))
                .boxed(),
            "server_pause" => (
                when(space),
                0..servers,
                space.pause_ms[0]..=space.pause_ms[1],
            )
                .prop_map(|(w, node, for_ms)| (w, Drawn::ServerPause { node, for_ms }))
                .boxed(),
            other => unreachable!("Space::of only admits known kinds, got {other}"),
        })
        .collect();
    Union::new(arms).boxed()
}

impl Case {
    /// The scenario this case runs: `base` with the case's workload, seed and schedule.
    pub fn scenario(&self, base: &Scenario, space: &Space) -> Scenario {
        let mut s = base.clone();
        s.seed = self.seed;
        s.workload.clients = self.clients;
        s.workload.cycles = self.cycles;
        s.workload.hold_ms = self.hold_ms;
        s.workload.nested = self.nested;
        let nodes: Vec<String> = space
            .servers
            .iter()
            .cloned()
            .chain((0..self.clients).map(|c| format!("client-{c}")))
            .collect();
        let node = |slot: u32| nodes[slot as usize % nodes.len()].clone();
        let client = |slot: u32| slot % self.clients;
        s.faults = self
            .faults
            .iter()
            .map(|(w, d)| {
                let trigger = match w {
                    When::Point { point, after_ms } => {
                        Trigger::on_point(&space.points[*point], *after_ms)
                    }
                    When::At(ms) => Trigger::At(*ms),
                };
                let kind = match d {
                    Drawn::Pause { client: c, for_ms } => FaultKind::Pause {
                        client: c.map_or(ClientRef::Holder, |c| ClientRef::Index(client(c))),
                        for_ms: *for_ms,
                    },
                    Drawn::Failover { master } => FaultKind::Failover { master: *master },
                    Drawn::Crash {
                        node: n,
                        restart_after_ms,
                    } => FaultKind::Crash {
                        node: space.servers[*n as usize].clone(),
                        restart_after_ms: *restart_after_ms,
                    },
                    Drawn::ClientCrash { client: c } => {
                        FaultKind::ClientCrash { client: client(*c) }
                    }
                    Drawn::Partition {
                        node: n,
                        from,
                        direction,
                        for_ms,
                    } => {
                        let cut = node(*n);
                        let from: Vec<String> =
                            from.map(node).filter(|f| *f != cut).into_iter().collect();
                        FaultKind::Partition {
                            nodes: vec![cut],
                            from,
                            for_ms: *for_ms,
                            direction: *direction,
                        }
                    }
                    Drawn::Split {
                        master,
                        clients,
                        for_ms,
                    } => {
                        let mut side = vec![format!("redis-{master}")];
                        side.extend(
                            (0..(*clients).min(self.clients)).map(|c| format!("client-{c}")),
                        );
                        let from = if side.len() == 1 {
                            (0..space.sentinels)
                                .map(|i| format!("sentinel-{i}"))
                                .collect()
                        } else {
                            Vec::new()
                        };
                        FaultKind::Partition {
                            nodes: side,
                            from,
                            for_ms: *for_ms,
                            direction: Direction::Both,
                        }
                    }
                    Drawn::ClockJump { node: n, by_ms } => FaultKind::ClockJump {
                        node: node(*n),
                        by_ms: *by_ms,
                    },
                    Drawn::ClockDrift { node: n, ppm } => FaultKind::ClockDrift {
                        node: node(*n),
                        ppm: *ppm,
                    },
                    Drawn::WallClockJump { node: n, by_ms } => FaultKind::WallClockJump {
                        node: node(*n),
                        by_ms: *by_ms,
                    },
                    Drawn::ServerPause { node: n, for_ms } => FaultKind::ServerPause {
                        node: space.servers[*n as usize].clone(),
                        for_ms: *for_ms,
                    },
                };
                Fault {
                    trigger,
                    kind,
                    by_client: None,
                }
            })
            .collect();
        s
    }
}
