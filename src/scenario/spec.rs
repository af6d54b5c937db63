//! The scenario file format: the serde types that `[lock]`, `[redis]`, `[workload]`, `[clocks]`
//! and `[[faults]]` deserialize into, with the defaults a missing key takes. Keys the later checks
//! must point at keep their spans (`toml::Spanned`).

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

use crate::check::Verdict;
use crate::env::NamedPoint;
pub use crate::lock::config::{LockSpec, DEFAULT_WAIT_TIMEOUT_MS, DEFAULT_WATCHDOG_TIMEOUT_MS};

/// `[redis]`: the topology the lock runs against.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSpec {
    /// Independent masters (Redlock takes a majority of them; other locks use the first).
    #[serde(default = "one")]
    pub masters: u32,
    /// Replicas per master.
    #[serde(default)]
    pub replicas: u32,
    /// Asynchronous replication delay, uniform in this range.
    #[serde(default = "default_lag")]
    pub replication_lag_ms: [u64; 2],
    /// From the master's death until a replica is promoted (what Sentinel's down-after gives).
    #[serde(default = "default_failover_detect")]
    pub failover_detect_ms: u64,
    /// One-way network latency between any two nodes, uniform in this range (ms). madsim's
    /// timers never fire sooner than 1 ms after they are set, so 1 ms is the floor.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// A request that gets no answer within this time fails, as a real client's response timeout.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
    /// Redis Sentinel: this many sentinels watch the masters (nodes `sentinel-<i>`), decide a
    /// failover by quorum and tell clients where the master is. 0 (the default): lockcheck's own
    /// `failover` fault promotes the replica, as before. See `docs/sentinel.md`.
    #[serde(default)]
    pub sentinels: u32,
    /// Sentinel's `down-after-milliseconds`: a master that has not answered a sentinel's pings
    /// for this long is subjectively down to it.
    #[serde(default = "default_down_after")]
    pub down_after_ms: u64,
    /// Sentinel's `failover-timeout` (ms).
    #[serde(default = "default_failover_timeout")]
    pub failover_timeout_ms: u64,
    /// Sentinels that must agree a master is down before one of them fails it over (default: a
    /// majority of `sentinels`).
    pub quorum: Option<u32>,
    /// `min-replicas-to-write`: a master refuses writes (`NOREPLICAS`) unless at least this many
    /// replicas acknowledged replication within `min_replicas_max_lag_s`. 0: off (Redis's default).
    #[serde(default)]
    pub min_replicas_to_write: u32,
    /// `min-replicas-max-lag` (seconds, as Redis counts it).
    #[serde(default = "default_min_replicas_max_lag")]
    pub min_replicas_max_lag_s: u64,
}

impl RedisSpec {
    /// The sentinels' quorum: as set, or a majority of them.
    pub fn quorum(&self) -> u32 {
        self.quorum.unwrap_or(self.sentinels / 2 + 1)
    }
}

fn one() -> u32 {
    1
}
fn default_lag() -> [u64; 2] {
    [5, 20]
}
fn default_failover_detect() -> u64 {
    1000
}
fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_request_timeout() -> u64 {
    500
}
fn default_down_after() -> u64 {
    1000
}
fn default_failover_timeout() -> u64 {
    10_000
}
fn default_min_replicas_max_lag() -> u64 {
    10
}

impl Default for RedisSpec {
    fn default() -> Self {
        RedisSpec {
            masters: 1,
            replicas: 0,
            replication_lag_ms: default_lag(),
            failover_detect_ms: default_failover_detect(),
            latency_ms: default_latency_ms(),
            request_timeout_ms: default_request_timeout(),
            sentinels: 0,
            down_after_ms: default_down_after(),
            failover_timeout_ms: default_failover_timeout(),
            quorum: None,
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: default_min_replicas_max_lag(),
        }
    }
}

/// `[workload]`: what every client does: acquire, critical section, release, think.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// How many clients contend for the lock.
    #[serde(default = "two")]
    pub clients: u32,
    /// Acquire/hold/release cycles per client.
    #[serde(default = "ten")]
    pub cycles: u32,
    /// Critical-section length, uniform in this range.
    #[serde(default = "default_hold")]
    pub hold_ms: [u64; 2],
    /// Pause between a release and the next acquire, uniform in this range.
    #[serde(default = "default_think")]
    pub think_ms: [u64; 2],
    /// What the critical section does to the protected resource.
    #[serde(default)]
    pub kind: WorkloadKind,
    /// Nested acquires of the same lock inside each critical section (reentrancy), each released
    /// before the holder finishes its work.
    #[serde(default)]
    pub nested: u32,
    /// While it holds (during `hold_ms`), the holder renews its lease every this many ms of its
    /// own clock with `Lock::renew`, and believes the lease the renewal returns (0: never). A lock
    /// with a watchdog (Redisson) renews on its own as well.
    #[serde(default)]
    pub renew_every_ms: u64,
}

/// The protected resource and what a holder does to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A read-modify-write of a counter in the storage node: read, work, write read + 1.
    #[default]
    Counter,
    /// The address-book article's race: count the user's addresses, work, insert one that is the default when the count
    /// was 0. Invariant: each user has exactly one default address.
    AddressBook,
}

impl WorkloadKind {
    /// The name scenario files and reports use.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Counter => "counter",
            WorkloadKind::AddressBook => "address-book",
        }
    }
}

/// Named points in the workload's critical section where a fault can fire (`on = "<point>"`).
pub const WORKLOAD_POINTS: &[NamedPoint] = &[
    NamedPoint::new(
        "acquired",
        "the acquire succeeded: the holder just entered its critical section",
    ),
    NamedPoint::new(
        "after_read",
        "the holder read the resource and has not written it yet",
    ),
    NamedPoint::new(
        "before_write",
        "the holder worked (and checked its validity, if it does) and writes next",
    ),
    NamedPoint::new(
        "before_release",
        "the holder left its critical section; its release goes next",
    ),
];

/// `[checks]`: how strict the checkers are. Every key is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksSpec {
    /// The longest the lock may stay unavailable while clients wait and no live client holds it
    /// (ms). Default: three leases.
    pub liveness_bound_ms: Option<u64>,
    /// The least share of the cycles the workload could complete that must complete (0..=1):
    /// enables the `throughput` check. See [`crate::check::throughput`].
    pub min_throughput: Option<f64>,
    /// The largest share (0..=1) of writes the protected resource may refuse before the
    /// `resource` check calls it a violation. A refused write came from a client that believed
    /// it held a valid lease: a fence doing its job now and then is expected, most writes
    /// refused means the tokens do not follow the grants (tokens from client clocks). Unset:
    /// refusals are reported, never a violation.
    pub max_refused_writes: Option<f64>,
}

impl ChecksSpec {
    /// The liveness bound for a lock whose lease is `lease_ms`.
    pub fn liveness_bound_ms(&self, lease_ms: u64) -> u64 {
        self.liveness_bound_ms
            .unwrap_or_else(|| lease_ms.saturating_mul(3))
    }
}

fn two() -> u32 {
    2
}
fn ten() -> u32 {
    10
}
fn default_hold() -> [u64; 2] {
    [10, 50]
}
fn default_think() -> [u64; 2] {
    [0, 50]
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            clients: 2,
            cycles: 10,
            hold_ms: default_hold(),
            think_ms: default_think(),
            kind: WorkloadKind::Counter,
            nested: 0,
            renew_every_ms: 0,
        }
    }
}

/// `[clocks]`: every node's clock at the start of a run. Each node (or each node of `nodes`)
/// draws its own start offset and rate error, uniformly in these ranges, from the run's seed, so
/// `--seeds N` explores N different clock configurations. The defaults are perfect clocks.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClocksSpec {
    /// How far a node's clock starts from true time (ms; negative: behind).
    #[serde(default)]
    pub offset_ms: [i64; 2],
    /// A node's rate error in parts per million (+1000: 0.1% fast; -1000: 0.1% slow).
    #[serde(default)]
    pub drift_ppm: [i64; 2],
    /// The nodes these clocks apply to; every node when absent.
    #[serde(default)]
    pub nodes: Option<Spanned<Vec<String>>>,
}

impl ClocksSpec {
    /// Whether every clock starts true (no random draws are made then, so adding an empty
    /// `[clocks]` table changes no history).
    pub fn is_perfect(&self) -> bool {
        self.offset_ms == [0, 0] && self.drift_ppm == [0, 0]
    }

    /// The node names the table applies to, out of `all`.
    pub fn applies_to(&self, all: &[String]) -> Vec<String> {
        match &self.nodes {
            None => all.to_vec(),
            Some(n) => all
                .iter()
                .filter(|x| n.get_ref().contains(x))
                .cloned()
                .collect(),
        }
    }
}

/// The whole file as written, before `validate` and `fault` check what serde cannot.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: String,
    #[serde(default)]
    pub(super) about: String,
    pub(super) expect: Verdict,
    #[serde(default)]
    pub(super) expect_checks: BTreeMap<Spanned<String>, Verdict>,
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    pub(super) duration_ms: u64,
    pub(super) lock: LockSpec,
    #[serde(default)]
    pub(super) redis: RedisSpec,
    #[serde(default)]
    pub(super) workload: WorkloadSpec,
    #[serde(default)]
    pub(super) clocks: ClocksSpec,
    pub(super) database: Option<super::database::DatabaseSpec>,
    pub(super) etcd: Option<super::etcd::EtcdSpec>,
    pub(super) zookeeper: Option<super::zookeeper::ZooKeeperSpec>,
    #[serde(default)]
    pub(super) faults: Vec<Spanned<crate::fault::RawFault>>,
    #[serde(default)]
    pub(super) checks: ChecksSpec,
    pub(super) explore: Option<Spanned<super::ExploreSpec>>,
}

fn default_seed() -> u64 {
    1
}
