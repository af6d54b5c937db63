//! Simulation tests, one binary: the bundled scenarios and their golden trace hashes, each lock,
//! planted bugs, the simulated deployment and clocks. Nothing here needs a `redis-server`.

#[path = "../common/mod.rs"]
mod common;

mod clocks;
mod cluster;
mod custom_lock;
mod determinism;
mod fenced_write_native;
mod foreign_release_blame;
mod locks;
mod mutants;
mod no_false_alarm;
mod redlock;
mod refusal_corpus;
mod reported_cases;
mod scenarios;
mod sentinel;
