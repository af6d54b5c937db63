//! The scenario side of the etcd locks: the `[etcd]` table (the cluster they run on) and what a
//! scenario with one of them may ask for.
//!
//! The lease is `[lock] ttl_ms`, as for the Redis locks, but etcd grants leases in whole seconds
//! and never shorter than its minimum TTL (`1.5 × election timeout`, rounded up to seconds:
//! `lease/lessor.go`'s `minLeaseTTL`), so `ttl_ms` must be a whole number of seconds at least
//! that long: a shorter one would be silently raised by a real etcd.
//!
//! Its members' node names are the etcd backend's, in its folder (`backend/etcd/table.rs`).

pub use crate::__moved::scenario::etcd::*;

use serde::Deserialize;
use std::time::Duration;

/// `[etcd]`: the cluster the etcd locks talk to.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// Members: 1 or 3 (named `etcd-0`...; `etcd-0` leads when the run starts).
    #[serde(default = "default_servers")]
    pub servers: u32,
    /// One-way latency between a client and a member, uniform in this range (ms; simulation).
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// A request that gets no answer within this time fails (its outcome unknown) and the
    /// client's next request goes to the next member.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// etcd's `--election-timeout` (ms): a follower that hears no leader for this long stands
    /// for election; a new leader extends every lease by it.
    #[serde(default = "default_election_timeout_ms")]
    pub election_timeout_ms: u64,
    /// etcd's `--heartbeat-interval` (ms), at most a fifth of the election timeout.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
}

fn default_servers() -> u32 {
    1
}
fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_request_timeout_ms() -> u64 {
    1000
}
fn default_election_timeout_ms() -> u64 {
    1000
}
fn default_heartbeat_ms() -> u64 {
    100
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            servers: default_servers(),
            latency_ms: default_latency_ms(),
            request_timeout_ms: default_request_timeout_ms(),
            election_timeout_ms: default_election_timeout_ms(),
            heartbeat_ms: default_heartbeat_ms(),
        }
    }
}

impl EtcdSpec {
    /// etcd's minimum lease TTL in seconds for this election timeout.
    pub fn min_ttl_s(&self) -> i64 {
        (self.election_timeout_ms * 3 / 2).div_ceil(1000) as i64
    }

    /// A request's timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}
