//! etcd: the simulated etcd engine, spawned etcd members (single and 3-member), the etcd locks'
//! scenarios in simulation and on real members, a differential test of the two, and a cluster
//! without a quorum serving nobody in both worlds.

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod engine;
mod program_clocks;
mod quorum;
mod scenarios;
mod servers;
mod timeline;
