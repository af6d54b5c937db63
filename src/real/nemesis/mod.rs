//! How real mode faults its processes: each world's nemesis (the `fault::Nemesis`
//! capabilities), the recipes decided before anything is spawned (`recipes.rs`, `plan.rs`),
//! and the network pieces a cut needs (the Sentinel network and its link proxies, the client
//! forwarders, the black hole).

pub(crate) mod client_stops;
pub mod cut_proxy;
pub(crate) mod firing;
pub(crate) mod plan;
pub(crate) mod proxy;
pub(crate) mod recipes;
