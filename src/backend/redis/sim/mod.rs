//! The simulated Redis: masters and their replicas with asynchronous replication and failover
//! (`cluster/`), Redis Cluster's slots, redirects and bus (`cluster_mode/`, not in a world yet),
//! Sentinel (`sentinel.rs`), the client connection and pub/sub, the nemesis and the world that
//! assembles a run.

pub mod cluster;
pub mod cluster_mode;
pub mod connection;
pub mod nemesis;
pub mod sentinel;
pub mod subscription;
pub mod world;

pub use connection::SimConnection;
pub use world::run_with;
