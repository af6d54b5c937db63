//! The processes real mode spawns and owns: `redis-server`s, MariaDB, etcd members, ZooKeeper
//! servers, a Sentinel deployment, the failover rig, libfaketime clocks, the admin commands sent
//! to them, and what every child
//! process shares (`child.rs`) and the cleanup that kills them on every exit path.

pub(in crate::real) mod admin;
pub(in crate::real) mod child;
pub(in crate::real) mod cleanup;
pub mod etcd;
pub(in crate::real) mod failover;
pub(in crate::real) mod faketime;
pub(in crate::real) mod lag_link;
pub mod mariadb;
pub(in crate::real) mod redis_server;
pub(in crate::real) mod sentinel_deployment;
pub mod zookeeper;
