//! Redis Cluster, simulated (issue #43): hash slots, the redirects a node answers before it
//! executes a command, and the cluster bus that detects failures and promotes replicas, each a
//! pure deterministic machine with time passed in.
//!
//! - `topology.rs`: the slots, a master's initial share, a node's role, the manual failovers:
//!   the vocabulary the spawned cluster (`real/cluster.rs`) shares.
//! - `slot.rs`: a key's hash slot (CRC16 with hash tags), as `CLUSTER KEYSLOT`.
//! - `slot_map.rs`: one node's map of slot owners, configuration epochs and migrations.
//! - `redirect.rs`: serve, `MOVED`, `ASK`, `CROSSSLOT`, `TRYAGAIN` or `CLUSTERDOWN`.
//! - `reach.rs`: which nodes run and which links are cut (the bus's input from the world).
//! - `bus.rs`: the bus's inputs, outputs and queries; its rules are `gossip.rs` (heartbeats,
//!   `PFAIL`/`FAIL`, configuration propagation, the cluster state) and `election.rs` (replica
//!   elections, votes, manual failovers).
//!
//! The real counterpart is `backend::redis::real::RedisCluster`; docs/redis-cluster.md ("The
//! simulated cluster") says what is modelled and compares the timing with real servers. The
//! simulated world drives the bus and asks `decide` before every command
//! (`backend::redis::sim::cluster::cluster_mode`).

pub mod bus;
mod election;
mod gossip;
pub mod reach;
pub mod redirect;
pub mod slot;
pub mod slot_map;
pub mod topology;

pub use bus::{Bus, BusConfig, BusEvent, BusRecord, SetSlot};
pub use reach::Reach;
pub use redirect::{command_keys, decide, ClientFlags, Decision, NodeView};
pub use slot::{key_slot, placed_on_master};
pub use slot_map::SlotMap;
pub use topology::{initial_slots, ClusterRole, ManualFailover, SlotRange, SLOTS};
