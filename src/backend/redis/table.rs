//! `[redis.cluster]`: the scenario's Redis servers form one Redis Cluster instead of independent
//! master groups. The masters (`[redis] masters`, at least 3) share the 16384 hash slots in equal
//! slices, each master's replicas (`[redis] replicas`) follow it, and the cluster fails over by
//! itself: its masters agree a master has failed after `node_timeout_ms` and elect one of its
//! replicas (no `failover` fault, no sentinels). Every client has one cluster-aware connection,
//! which sends a command to the master of its key's slot and follows `MOVED` and `ASK`.
//!
//! ```toml
//! [redis]
//! masters = 3
//! replicas = 1
//!
//! [redis.cluster]
//! node_timeout_ms = 500          # cluster-node-timeout
//! client_retries = 3             # how often a client's request is sent again (redirects too)
//! client_retry_wait_ms = [10, 100] # the wait before resending after TRYAGAIN or CLUSTERDOWN
//! ```
//!
//! The client's policy is redis-rs's cluster client's (`ClusterClientBuilder::retries`,
//! `min_retry_wait`, `max_retry_wait`), which real mode uses and the simulated connection
//! follows: a redirect is followed at once, `TRYAGAIN` and `CLUSTERDOWN` are retried after a
//! wait, and a request with no answer in time is sent again, every one of them counting against
//! `client_retries`; after a request failed on a node the client asks another for the slot map.
//! docs/redis-cluster.md says what the simulated cluster models and what it leaves out.

use crate::scenario::{Invalid, Scenario};

/// The scenario table Redis reads itself: `[redis.cluster]`.
pub const PATH: [&str; 2] = ["redis", "cluster"];

/// The keys `[redis.cluster]` takes.
pub const KEYS: &[&str] = &["node_timeout_ms", "client_retries", "client_retry_wait_ms"];

/// `[redis.cluster]`, read by the backend itself (`BackendDecl::read_table`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterTable {
    /// `cluster-node-timeout`, ms: how long a node goes unanswered before the others suspect it.
    pub node_timeout_ms: u64,
    /// How many times a client's request is sent again, for a redirect, a `TRYAGAIN` or
    /// `CLUSTERDOWN`, or no answer in time.
    pub client_retries: u32,
    /// The wait before a request refused with `TRYAGAIN` or `CLUSTERDOWN` is sent again,
    /// uniform in [low, high] ms.
    pub client_retry_wait_ms: [u64; 2],
}

fn default_node_timeout() -> u64 {
    500
}
fn default_retries() -> u32 {
    3
}
fn default_retry_wait() -> [u64; 2] {
    [10, 100]
}

impl Default for ClusterTable {
    fn default() -> Self {
        ClusterTable {
            node_timeout_ms: default_node_timeout(),
            client_retries: default_retries(),
            client_retry_wait_ms: default_retry_wait(),
        }
    }
}

/// What the backend keeps from its own table: the cluster, when the scenario has one.
pub type Read = Option<ClusterTable>;

/// The scenario's `[redis.cluster]`, when it has one.
pub fn cluster(s: &Scenario) -> Option<&ClusterTable> {
    s.table::<Read>(PATH[0]).and_then(Option::as_ref)
}

/// Whether the scenario's lock takes one instance per master (Redlock), not the one master of
/// its key's slot.
pub fn lock_on_every_master(s: &Scenario) -> bool {
    s.lock.kind.name() == crate::lock::redis_options::REDLOCK
}

/// On a Redis Cluster, for a lock that takes one instance per master (Redlock): the lock key and
/// the key each master group's connection sends instead, hash-tagged onto that group's master
/// (`{<n>}key`, `engine::cluster::placed_on_master`). `None` elsewhere.
pub fn placed_keys(s: &Scenario) -> Option<(String, Vec<String>)> {
    cluster(s)?;
    if !lock_on_every_master(s) {
        return None;
    }
    let masters = s.redis.masters as usize;
    let key = s.lock.key.clone();
    let placed = (0..masters)
        .map(|m| crate::backend::redis::engine::cluster::placed_on_master(&key, m, masters))
        .collect();
    Some((key, placed))
}

impl ClusterTable {
    /// Reads `[redis.cluster]` as written (`None`: the file has none); an error names the key
    /// and says in plain words what it takes.
    pub fn read(table: Option<&toml::Value>) -> Result<Read, Invalid> {
        let Some(table) = table else {
            return Ok(None);
        };
        let Some(entries) = table.as_table() else {
            return Err((None, "`[redis.cluster]` must be a table of keys".into()));
        };
        let mut t = ClusterTable::default();
        for (key, value) in entries {
            let Some(&known) = KEYS.iter().find(|k| **k == key.as_str()) else {
                return Err((
                    None,
                    format!(
                        "unknown key `{}` in `[redis.cluster]`, expected one of {}",
                        crate::scenario::input::excerpt(key, 40),
                        KEYS.join(", ")
                    ),
                ));
            };
            t.set(known, value).map_err(|m| (Some(known), m))?;
        }
        t.check_ranges().map_err(|(k, m)| (Some(k), m))?;
        Ok(Some(t))
    }

    /// Sets key `key` from `value`, or says in plain words what it takes.
    fn set(&mut self, key: &'static str, value: &toml::Value) -> Result<(), String> {
        let number = |v: &toml::Value| -> Result<u64, String> {
            v.as_integer()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| format!("`{key}` takes a whole number of 0 or more, got {value}"))
        };
        match key {
            "node_timeout_ms" => self.node_timeout_ms = number(value)?,
            "client_retries" => {
                self.client_retries = u32::try_from(number(value)?)
                    .map_err(|_| format!("`{key}` is at most 16, got {value}"))?
            }
            _ => {
                let pair = value
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| format!("`{key}` takes [low, high] in ms, got {value}"))?;
                self.client_retry_wait_ms = [number(&pair[0])?, number(&pair[1])?];
            }
        }
        Ok(())
    }

    /// The ranges the keys must keep to.
    fn check_ranges(&self) -> Result<(), (&'static str, String)> {
        if self.node_timeout_ms < 100 || self.node_timeout_ms > 60_000 {
            return Err((
                "node_timeout_ms",
                "`node_timeout_ms` is from 100 (the cluster bus pings every 100 ms) to 60000"
                    .into(),
            ));
        }
        let [lo, hi] = self.client_retry_wait_ms;
        if lo > hi || hi > 60_000 {
            return Err((
                "client_retry_wait_ms",
                "`client_retry_wait_ms` is [low, high] with low <= high <= 60000".into(),
            ));
        }
        if self.client_retries > 16 {
            return Err((
                "client_retries",
                "`client_retries` is at most 16 (redis-rs's default)".into(),
            ));
        }
        Ok(())
    }

    /// The `[redis]` keys a cluster cannot have, checked once the whole scenario is read.
    pub fn check(s: &Scenario) -> Result<(), Invalid> {
        if s.redis.masters < 3 {
            return Err((
                Some("masters"),
                "a Redis Cluster (`[redis.cluster]`) needs `masters` of at least 3: a failover \
                 takes the votes of a majority of masters"
                    .into(),
            ));
        }
        if s.redis.sentinels > 0 {
            return Err((
                Some("sentinels"),
                "a Redis Cluster fails over by itself: drop `sentinels` or `[redis.cluster]`"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The `[redis]` keys of Redis Sentinel and of `min-replicas-to-write`, checked once the scenario
/// is read: sentinels need a replica to promote and a quorum they can reach (that they decide
/// failovers themselves, the declaration's fault check holds: a `failover` fault is lockcheck's
/// own act), and a master must be able to meet `min-replicas-to-write`, or it refuses every
/// write, the lock's included. Checks the keys; `written` says whether the file sets a `[redis]` key (a key left out takes
/// its default, so only a written one can be a mistake to point at).
pub fn check_redis_keys(s: &Scenario, written: &dyn Fn(&str) -> bool) -> Result<(), Invalid> {
    let r = &s.redis;
    if r.sentinels == 0 {
        if let Some(key) = ["quorum", "down_after_ms", "failover_timeout_ms"]
            .into_iter()
            .find(|k| written(k))
        {
            return Err((
                Some(key),
                format!(
                    "`{key}` configures Redis Sentinel: set `sentinels` (for example `sentinels = 3`)"
                ),
            ));
        }
    } else {
        if r.sentinels > 9 {
            return Err((Some("sentinels"), "`sentinels` is at most 9".into()));
        }
        if r.replicas == 0 {
            return Err((
                Some("sentinels"),
                "sentinels fail a master over to a replica: set `replicas` to at least 1".into(),
            ));
        }
        if !(1..=r.sentinels).contains(&r.quorum()) {
            return Err((
                Some("quorum"),
                format!("`quorum` must be 1..={} (the sentinels)", r.sentinels),
            ));
        }
        if r.down_after_ms == 0 {
            return Err((
                Some("down_after_ms"),
                "`down_after_ms` must be at least 1".into(),
            ));
        }
    }
    if r.min_replicas_to_write > r.replicas {
        // A master then refuses every write, the lock's included: no client ever holds it, and
        // a run would judge an empty history safe.
        return Err((
            Some("min_replicas_to_write"),
            format!(
                "`min_replicas_to_write = {}` is more than the {} replica(s) a master has \
                 (`replicas`): every write, the lock's included, would be refused and no client \
                 could ever take the lock; give 0 to {}",
                r.min_replicas_to_write, r.replicas, r.replicas
            ),
        ));
    }
    if r.min_replicas_max_lag_s == 0 && r.min_replicas_to_write > 0 {
        return Err((
            Some("min_replicas_max_lag_s"),
            "`min_replicas_max_lag_s` must be at least 1".into(),
        ));
    }
    Ok(())
}
