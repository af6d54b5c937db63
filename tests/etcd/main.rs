//! etcd: the simulated etcd engine, spawned etcd members (single and 3-member), the etcd locks'
//! scenarios in simulation and on real members, and a differential test of the two.

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod engine;
mod scenarios;
mod servers;
