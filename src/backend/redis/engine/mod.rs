//! The Redis backend's pure machines that both worlds share: Redis Cluster's slots, redirects and
//! bus (`cluster/`), with time passed in. (The simulated Redis server itself is the older
//! `crate::simredis`.)

pub mod cluster;
