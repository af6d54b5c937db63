//! The simulated Redis: masters and their replicas with asynchronous replication and failover
//! (`cluster/`), Sentinel (`sentinel.rs`), the client connection and pub/sub, the nemesis and the
//! world that assembles a run. Redis Cluster's machines are `backend::redis::engine::cluster`.

pub mod cluster;
pub mod connection;
pub mod nemesis;
pub mod sentinel;
pub mod subscription;
pub mod world;

pub use connection::SimConnection;
pub use world::run_with;
