//! Faults, one home per family: what a scenario's `[[faults]]` table says (its keys and their
//! checks), how a fault is written back as that table, its label in `lockcheck table`, how
//! explore draws it ([`draw`]), and how it fires, written against the [`Nemesis`] capabilities a
//! world offers.
//!
//! A family is one file: [`pause`] (a client's stop-the-world pause), [`server_pause`] (a server
//! process stopped), [`crash`] (a server crash and restart, a client crash), [`failover`],
//! [`partition`], [`clock`] (jumps and drift), [`cluster_failover`] (a Redis Cluster's
//! manual failover) and [`slot_migration`] (a Redis Cluster's resharding of the lock's slot). This module only dispatches: [`FaultKind`] is
//! the closed set of families' values, and each operation below hands its variant to the family.
//! A family never asks which world it is in: it calls capabilities, and a world that lacks one
//! refuses it ([`Refused`]).

pub mod clock;
pub mod cluster_failover;
pub mod crash;
pub mod draw;
pub mod failover;
mod nemesis;
pub mod partition;
pub mod pause;
pub mod server_pause;
pub mod slot_migration;
mod table;
pub mod terminate;
mod trigger;

pub use cluster_failover::ClusterFailoverForm;
pub(crate) use nemesis::forward_to_world;
pub use nemesis::{Nemesis, Occasion, Refused};
pub use partition::{Cut, Direction};
pub use pause::ClientRef;
pub use table::{quoted, FailoverShape, KeyError, RawFault, Setting, Table};
pub use trigger::Trigger;

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When it fires.
    pub trigger: Trigger,
    /// What it does.
    pub kind: FaultKind,
    /// For a fault at a named point that hits a node (`failover`, `partition`, a clock fault, a
    /// server's `crash` or `pause`): only this client's reaching the point sets it off
    /// (`client = N`). `None`: the first client to reach it. A client's own pause or crash is
    /// aimed by its `client`/`node` key instead.
    pub by_client: Option<u32>,
}

/// The fault kinds, one variant per family value. Node names: `redis-<m>`,
/// `redis-<m>-replica-<r>`, `client-<c>`.
///
/// Non-exhaustive: a new fault family adds a variant, so a `match` outside lockcheck needs a
/// `_` arm (and gets one such change, not one per family).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// Kill the master of group `master` and promote its first replica after `failover_detect_ms`.
    Failover {
        /// The master group (from 0): `redis-<master>` dies.
        master: u32,
    },
    /// A stop-the-world pause (GC) of a client for `for_ms`.
    Pause {
        /// The paused client: a named one, or whoever holds the lock when the fault fires.
        client: ClientRef,
        /// How long the client is stopped (ms).
        for_ms: u64,
    },
    /// A server process stopped for `for_ms` (`SIGSTOP`, then `SIGCONT`: a VM freeze, a debugger,
    /// a stalled disk): it answers nothing and its own timers stand still while clients' timers
    /// run on. Written `kind = "pause"` with `node`; modelled for the MySQL locks' `mysql-0`.
    ServerPause {
        /// The stopped server.
        node: String,
        /// How long it stays stopped (ms).
        for_ms: u64,
    },
    /// Cut `nodes` off from `from` (everyone when empty) for `for_ms`, in `direction`.
    Partition {
        /// The nodes on one side of the cut.
        nodes: Vec<String>,
        /// The nodes on the other side; empty: everyone else.
        from: Vec<String>,
        /// How long the partition lasts (ms).
        for_ms: u64,
        /// Which way messages are dropped.
        direction: Direction,
    },
    /// Step a node's clocks, wall and monotonic, by `by_ms` (negative: backwards).
    ClockJump {
        /// The node whose clocks jump.
        node: String,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// Step a node's wall clock alone by `by_ms` (an NTP step, an operator): its monotonic clock
    /// goes on. Redis expires keys on its wall clock.
    WallClockJump {
        /// The node whose wall clock jumps.
        node: String,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// Set a node's clock rate error in parts per million.
    ClockDrift {
        /// The node whose clock drifts.
        node: String,
        /// The rate error (ppm; positive runs fast).
        ppm: i64,
    },
    /// Crash a Redis node; it restarts empty (no persistence) after `restart_after_ms`.
    Crash {
        /// The Redis node that crashes.
        node: String,
        /// How long it stays down (ms) before it restarts without its keys.
        restart_after_ms: u64,
    },
    /// A client process dies (at its named point): it never releases and never comes back.
    ClientCrash {
        /// The client (from 0) that dies.
        client: u32,
    },
    /// The server ends a client's session while the client lives on (`pg_terminate_backend`):
    /// whatever the session held goes at once, and the client learns it on its next request.
    Terminate {
        /// Whose session: a named client, or whoever holds the lock when the fault fires.
        client: ClientRef,
    },
    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` to the first replica of master group `master`, in a
    /// Redis Cluster.
    ClusterFailover {
        /// The master group (from 0): `redis-<master>-replica-0` takes its slots.
        master: u32,
        /// Which form of the command.
        form: ClusterFailoverForm,
    },
    /// The lock key's slot migrates to master group `to` over `for_ms` (Redis Cluster's live
    /// resharding: `SETSLOT IMPORTING`/`MIGRATING`, `MIGRATE` half-way, `SETSLOT NODE` at the
    /// end).
    SlotMigration {
        /// The master group (from 0) the slot moves to.
        to: u32,
        /// How long the migration lasts.
        for_ms: u64,
    },
}

/// One `kind = "..."` of the scenario format: its name, the keys it takes besides `kind`, `on`,
/// `after_ms` and `at_ms`, and the family's parser for them.
pub struct Written {
    /// The name scenario files use.
    pub name: &'static str,
    /// Its own keys.
    pub keys: &'static [&'static str],
    /// Its value from a checked table.
    pub parse: fn(&Table<'_>) -> Result<FaultKind, KeyError>,
}

/// Every `kind = "..."` scenario files may write, in the order errors and `lockcheck list` show.
pub const WRITTEN: &[Written] = &[
    failover::WRITTEN,
    pause::WRITTEN,
    partition::WRITTEN,
    clock::JUMP,
    clock::WALL_JUMP,
    clock::DRIFT,
    crash::WRITTEN,
    terminate::WRITTEN,
    cluster_failover::COORDINATED,
    cluster_failover::FORCE,
    cluster_failover::TAKEOVER,
    slot_migration::WRITTEN,
];

/// The fault kinds' names, as written in scenario files.
pub const FAULT_KINDS: &[&str] = &[
    failover::WRITTEN.name,
    pause::WRITTEN.name,
    partition::WRITTEN.name,
    clock::JUMP.name,
    clock::WALL_JUMP.name,
    clock::DRIFT.name,
    crash::WRITTEN.name,
    terminate::WRITTEN.name,
    cluster_failover::COORDINATED.name,
    cluster_failover::FORCE.name,
    cluster_failover::TAKEOVER.name,
    slot_migration::WRITTEN.name,
];

/// The scenario format's entry for `kind = "<name>"`.
pub fn written(name: &str) -> Option<&'static Written> {
    WRITTEN.iter().find(|w| w.name == name)
}

impl FaultKind {
    /// The `kind = "..."` this fault is written with.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::ClientCrash { .. } | FaultKind::Crash { .. } => crash::WRITTEN.name,
            FaultKind::Failover { .. } => failover::WRITTEN.name,
            FaultKind::Pause { .. } | FaultKind::ServerPause { .. } => pause::WRITTEN.name,
            FaultKind::Partition { .. } => partition::WRITTEN.name,
            FaultKind::ClockJump { .. } => clock::JUMP.name,
            FaultKind::WallClockJump { .. } => clock::WALL_JUMP.name,
            FaultKind::ClockDrift { .. } => clock::DRIFT.name,
            FaultKind::Terminate { .. } => terminate::WRITTEN.name,
            FaultKind::ClusterFailover { form, .. } => cluster_failover::name(*form),
            FaultKind::SlotMigration { .. } => slot_migration::WRITTEN.name,
        }
    }

    /// Writes the fault's own keys into its `[[faults]]` table (`kind` and the trigger are the
    /// caller's).
    pub fn write(&self, t: &mut toml_edit::Table) {
        match self {
            FaultKind::Failover { master } => failover::write(*master, t),
            FaultKind::Pause { client, for_ms } => pause::write(client, *for_ms, t),
            FaultKind::ServerPause { node, for_ms } => server_pause::write(node, *for_ms, t),
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => partition::write(nodes, from, *for_ms, *direction, t),
            FaultKind::ClockJump { node, by_ms } | FaultKind::WallClockJump { node, by_ms } => {
                clock::write_jump(node, *by_ms, t)
            }
            FaultKind::ClockDrift { node, ppm } => clock::write_drift(node, *ppm, t),
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => crash::write_server(node, *restart_after_ms, t),
            FaultKind::ClientCrash { client } => crash::write_client(*client, t),
            FaultKind::Terminate { client } => terminate::write(client, t),
            FaultKind::ClusterFailover { master, .. } => cluster_failover::write(*master, t),
            FaultKind::SlotMigration { to, for_ms } => slot_migration::write(*to, *for_ms, t),
        }
    }

    /// What happens to the lock, for `lockcheck table`'s column label: `trigger` is when the fault
    /// fires, `at` how the label says it (" at after_read", " at 10 ms", or empty), `lease_ms` the
    /// lock's lease.
    pub fn label(&self, trigger: &Trigger, at: &str, lease_ms: u64) -> String {
        match self {
            FaultKind::Failover { .. } => failover::label(),
            FaultKind::Pause { client, for_ms } => {
                pause::label(client, *for_ms, trigger, at, lease_ms)
            }
            FaultKind::ServerPause { .. } => server_pause::label(at),
            FaultKind::ClientCrash { .. } => crash::client_label(at),
            FaultKind::Terminate { .. } => terminate::label(at),
            FaultKind::Crash { node, .. } => crash::server_label(node),
            FaultKind::Partition { .. } => partition::label(),
            FaultKind::ClockJump { .. } => clock::jump_label(false),
            FaultKind::WallClockJump { .. } => clock::jump_label(true),
            FaultKind::ClockDrift { .. } => clock::drift_label(),
            FaultKind::ClusterFailover { form, .. } => cluster_failover::label(*form),
            FaultKind::SlotMigration { to, .. } => slot_migration::label(*to),
        }
    }

    /// Whether the fault hits a client of its own choosing (a client's pause or crash), rather
    /// than a node a client's named point sets off.
    pub fn aims_at_client(&self) -> bool {
        matches!(
            self,
            FaultKind::Pause { .. } | FaultKind::ClientCrash { .. } | FaultKind::Terminate { .. }
        )
    }

    /// Whether this fault, set off by `client` at a named point, is for that client: pauses and
    /// crashes that name another client wait for that one.
    pub fn is_for(&self, client: u32) -> bool {
        match self {
            FaultKind::Pause { client: c, .. } => pause::is_for(c, client),
            FaultKind::ClientCrash { client: c } => *c == client,
            FaultKind::Terminate { client: c } => pause::is_for(c, client),
            _ => true,
        }
    }

    /// Whether the fault moves a node's clock (a jump, a wall-clock jump or a drift).
    pub fn moves_a_clock(&self) -> bool {
        matches!(
            self,
            FaultKind::ClockJump { .. }
                | FaultKind::WallClockJump { .. }
                | FaultKind::ClockDrift { .. }
        )
    }

    /// Whether firing this fault kills a client (the one whose point set it off).
    pub fn crashes_a_client(&self) -> bool {
        matches!(self, FaultKind::ClientCrash { .. })
    }

    /// Whether firing this fault, set off by `client`, stops that very client.
    pub fn pauses(&self, client: u32) -> bool {
        match self {
            FaultKind::Pause { client: c, .. } => pause::stops(c, client),
            _ => false,
        }
    }

    /// Why a fault without `client` at a point of the lock's own is ambiguous (`point` is that
    /// point, `clients` how many the scenario runs), if its family can say which client it hits.
    pub fn ambiguous_at(&self, point: &str, clients: u32) -> Option<String> {
        match self {
            FaultKind::Pause { .. } => Some(pause::ambiguous_at(point, clients)),
            FaultKind::ClientCrash { .. } => None,
            FaultKind::Terminate { .. } => Some(pause::ambiguous_at(point, clients)),
            _ => Some(format!(
                "`on = \"{point}\"` with no `client`: this fault fires when the first of the {clients} clients reaches this point of the lock's own, holder or not, whichever that is in this run; add `client = N` to aim it at one client's point"
            )),
        }
    }

    /// Carries the fault out through `n`'s capabilities, now, on the occasion `at`; a world
    /// that lacks a capability the fault needs refuses, and the caller says so its own way.
    pub fn fire<N: Nemesis + ?Sized>(&self, n: &N, at: &Occasion<'_>) -> Result<(), Refused> {
        match self {
            FaultKind::Failover { master } => failover::fire(n, *master),
            FaultKind::Pause { client, for_ms } => pause::fire(n, at, client, *for_ms),
            FaultKind::ServerPause { node, for_ms } => server_pause::fire(n, node, *for_ms),
            FaultKind::Partition {
                nodes,
                from,
                for_ms,
                direction,
            } => partition::fire(n, nodes, from, *for_ms, *direction),
            FaultKind::ClockJump { node, by_ms } => clock::fire_jump(n, node, *by_ms, false),
            FaultKind::WallClockJump { node, by_ms } => clock::fire_jump(n, node, *by_ms, true),
            FaultKind::ClockDrift { node, ppm } => clock::fire_drift(n, node, *ppm),
            FaultKind::Crash {
                node,
                restart_after_ms,
            } => crash::fire_server(n, node, *restart_after_ms),
            FaultKind::ClientCrash { client } => crash::fire_client(n, at, *client),
            FaultKind::Terminate { client } => terminate::fire(n, at, client),
            FaultKind::ClusterFailover { master, form } => {
                cluster_failover::fire(n, *master, *form)
            }
            FaultKind::SlotMigration { to, for_ms } => slot_migration::fire(n, *to, *for_ms),
        }
    }
}

/// One `[[faults]]` table, with the keys the scenario parser reads back to `f`: what `explore`
/// writes into a found scenario, and how an error or a skip shows the fault it is about.
pub fn fault_table(f: &Fault) -> toml_edit::Table {
    let mut t = toml_edit::Table::new();
    t["kind"] = toml_edit::value(f.kind.name());
    f.trigger.write(&mut t);
    f.kind.write(&mut t);
    if let Some(c) = f.by_client {
        t["client"] = toml_edit::value(i64::from(c));
    }
    t
}
