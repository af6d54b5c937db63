//! How real mode faults its processes, in what every real world shares: the recipes decided
//! before anything is spawned (`recipes.rs`, `plan.rs`: the consensus services' and the shared
//! checks; a backend's own are in its folder, `backend/<service>/real/`), a client's stops and
//! the firing of faults, and the network pieces a cut needs (the client forwarders, the
//! per-client cut proxy).

pub(crate) mod client_stops;
pub mod cut_proxy;
pub(crate) mod firing;
pub(crate) mod plan;
pub(crate) mod proxy;
pub(crate) mod recipes;
