//! How real mode faults its processes: each world's nemesis (the `fault::Nemesis`
//! capabilities), the recipes decided before anything is spawned (`recipes.rs`, `plan.rs`),
//! and the network pieces a cut needs (the Sentinel network and its link proxies, the client
//! forwarders, the black hole).

pub(in crate::real) mod blackhole;
pub(in crate::real) mod client_stops;
pub(in crate::real) mod etcd_nemesis;
pub(in crate::real) mod firing;
pub(in crate::real) mod link_proxy;
pub(in crate::real) mod mysql_nemesis;
pub(in crate::real) mod network;
pub(in crate::real) mod plan;
pub(in crate::real) mod proxy;
pub(in crate::real) mod recipes;
pub(in crate::real) mod redis_nemesis;
pub(in crate::real) mod zk_nemesis;
