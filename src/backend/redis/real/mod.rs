//! Real Redis: the spawned `redis-server` deployments (a master with replicas, the failover rig,
//! Sentinel with its link proxies, Redis Cluster with its faults), their admin commands and
//! nemesis, which faults real mode has a recipe for (`plan.rs`, `recipes.rs`), servers lockcheck
//! did not start (`--redis`), what the sentinels decide in the history (`sentinel_events.rs`) and
//! how a client asks them for the master (`master_finder.rs`), and the world that assembles a run.

pub mod admin;
pub mod blackhole;
pub mod cluster;
pub mod cluster_faults;
pub mod cluster_migration;
pub mod cluster_nodes;
pub mod cluster_partition;
pub mod cluster_world;
pub mod external;
pub mod failover;
pub mod link_proxy;
pub(crate) mod master_finder;
pub mod nemesis;
pub mod network;
pub(crate) mod plan;
pub(crate) mod recipes;
pub mod sentinel_deployment;
pub(crate) mod sentinel_events;
pub mod subscription;
pub mod world;

pub use admin::{client_kill_replicas, info_replication, promote, wait_role_master};
pub use blackhole::BlackHole;
pub use cluster::{ClusterOptions, ClusterRole, RedisCluster};
pub use cluster_faults::ManualFailover;
pub use cluster_nodes::{NodeLine, SlotRange};
pub use failover::{FailoverPhase, FailoverRig, FailoverTimings};
