//! The processes real mode spawns and owns: `redis-server`s, MariaDB, etcd members, ZooKeeper
//! servers, a Sentinel deployment, the failover rig, libfaketime clocks, the admin commands sent
//! to them, and what every child
//! process shares (`child.rs`) and the cleanup that kills them on every exit path.

pub(crate) mod child;
pub(crate) mod cleanup;
pub(crate) mod faketime;
pub(crate) mod redis_server;

/// Paths that moved into `crate::backend`, kept for users' code (see `lib.rs`).
pub use crate::__moved::servers::*;
