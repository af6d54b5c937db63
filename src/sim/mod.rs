//! What every simulated world shares: one madsim runtime per run, seeded; the clients as madsim
//! nodes and what the nemesis does to them; per-node clocks; the simulated network and the wire;
//! the storage node that holds the protected resource. Each service's simulated world is in
//! `src/backend/<service>/sim/`.
//!
//! Everything runs on madsim's single-threaded, seeded executor: the same scenario and seed give
//! the same interleaving, the same latencies, the same owner tokens and so the same history, byte
//! for byte.

pub mod client_faults;
pub mod client_nodes;
pub mod clock;
pub mod draw;
pub mod entries;
mod env;
pub mod network;
pub mod service_nemesis;
pub mod service_world;
pub mod storage;
pub mod wire;

/// Paths that moved into `crate::backend`, kept for users' code (see `lib.rs`).
pub use crate::__moved::sim::*;
use crate::history::History;
use crate::scenario::Scenario;
use clock::Clocks;
pub use env::SimEnv;
use madsim::runtime::Runtime;
use std::collections::BTreeMap;

/// A registered lock kind's run in simulation, with a seed.
pub type SimRunner = dyn Fn(&crate::scenario::Scenario, u64) -> SimRun + Send + Sync;

/// What a simulated run produced.
#[derive(Clone, Debug)]
pub struct SimRun {
    /// Every event of the run, in true time: what the checkers judge.
    pub history: History,
    /// The protected counter's final value and the number of writes the storage accepted.
    pub counter: (u64, u64),
    /// Redis commands the servers executed.
    pub commands: u64,
}

/// The madsim runtime a simulated world runs in, seeded: lockcheck carries requests itself, so
/// madsim's own network stays unused and loses nothing.
pub(crate) fn runtime(seed: u64) -> Runtime {
    let mut config = madsim::Config::default();
    config.net.packet_loss_rate = 0.0;
    Runtime::with_seed_and_config(seed, config)
}

/// The scenario's nodes by name, each with its index, and a clock for each: how both simulated
/// worlds name their nodes and start their clocks.
pub(crate) fn nodes_and_clocks(
    scenario: &Scenario,
) -> (Vec<String>, BTreeMap<String, usize>, Clocks) {
    let names = scenario.node_names();
    let nodes: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    let clocks = Clocks::new(names.len());
    (names, nodes, clocks)
}
