//! Real-mode tests, one binary: lockcheck's own `redis-server` processes (spawning, cleanup on
//! every exit path, the failover recipe, libfaketime), every lock's scripts against real Redis,
//! the bundled scenarios on real servers, Redlock's clock faults, Redis Sentinel (real sentinels
//! decide the failovers), Redis Cluster (its own promotions, and the simulated cluster checked
//! against it), a request that runs while its client is stopped, and `explore --real`. The
//! client-library scenarios are `tests/client_programs`, a binary of their own.
//!
//! Needs `redis-server`, `faketime` and a C compiler; `.ci/run` installs them. A missing one
//! fails its test with the install command; nothing here skips silently.

#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod cluster_client;
mod cluster_partition;
mod cluster_scenarios;
mod cluster_sim;
mod cluster_world;
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
mod sentinel_keys;
mod timeline;
