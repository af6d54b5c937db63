//! Real-mode tests, one binary: lockcheck's own `redis-server` processes (spawning, cleanup on
//! every exit path, the failover recipe, libfaketime), every lock's scripts against real Redis,
//! the bundled scenarios on real servers, Redlock's clock faults, black-box client programs,
//! Redis Sentinel (real sentinels decide the failovers), Redis Cluster (its own promotions), a
//! request that runs while its client is stopped, and `explore --real`.
//!
//! Needs `redis-server`, `faketime` and a C compiler, and for `clients` the pinned client
//! libraries (`scripts/install-clients.sh`); `.ci/run` installs all of them. A missing one fails
//! its test with the install command; nothing here skips silently.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod cluster;
mod cluster_client;
mod cluster_partition;
mod cluster_sim;
mod differential_locks;
mod explore;
mod foreign_release;
mod interrupt;
mod locks;
mod pause_on_the_wire;
mod planted_classes;
mod processes;
mod recipe;
mod redlock;
mod scenarios;
mod sentinel;
