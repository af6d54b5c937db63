//! Redis's declaration: the `[redis]` table (master groups, replicas, sentinels; a client
//! program's service when its scenario has no other service's table), its servers
//! (`redis-<m>` masters and `redis-<m>-replica-<r>` replicas) and sentinels, and the faults its
//! worlds carry out: every family but a server pause, a failover of a master group when it has a
//! replica and no sentinels decide.

use super::table::{self, ClusterTable};
use crate::history::Role;
use crate::lock::Service;
use crate::scenario::{BackendDecl, FailoverShape, Fault, FaultKind, Invalid, Scenario};
use std::any::Any;
use std::sync::Arc;

/// The service this backend is: what its locks' kinds and its scenarios' clients talk to.
pub const SERVICE: Service = Service::named("redis");

/// The Redis backend: one master, master groups with replicas, Sentinel, Redlock's masters.
#[derive(Debug)]
pub struct Redis;

/// Why lockcheck does not fail a master over when sentinels watch it.
const SENTINELS_FAIL_OVER: &str = "with `sentinels` the sentinels decide a failover: crash, \
    pause or partition the master instead of a `failover` fault";

/// Why lockcheck's `failover` has no place in a Redis Cluster.
const CLUSTER_FAILS_OVER: &str = "a Redis Cluster promotes a replica by itself when its masters \
    agree a master failed: crash or partition the master instead of `failover`";

/// Measured real-mode spawn costs (`BackendDecl::real_spawn_ms`), rounded up.
const REDIS_SPAWN_MS: u64 = 500;
const SENTINEL_SPAWN_MS: u64 = 3_000;
/// A Redis Cluster of 3 masters with a replica each forms in about a second (2 cores).
const CLUSTER_SPAWN_MS: u64 = 1_500;

impl BackendDecl for Redis {
    fn service(&self) -> Service {
        SERVICE
    }

    fn name(&self) -> &'static str {
        "Redis"
    }

    fn table(&self) -> &'static str {
        "redis"
    }

    fn client_programs_select_by_table(&self) -> bool {
        false
    }

    fn servers(&self, s: &Scenario) -> Vec<(String, Role)> {
        let mut v = Vec::new();
        for m in 0..s.redis.masters {
            v.push((format!("redis-{m}"), Role::Master));
            for r in 0..s.redis.replicas {
                v.push((format!("redis-{m}-replica-{r}"), Role::Replica));
            }
        }
        v
    }

    fn watchers(&self, s: &Scenario) -> Vec<String> {
        (0..s.redis.sentinels)
            .map(|i| format!("sentinel-{i}"))
            .collect()
    }

    /// `[redis]` configures Redis servers only: in a scenario whose clients talk to another
    /// service it would be ignored, so it is refused (as every other service's table is).
    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        if has_table && s.lock.service != SERVICE {
            return Err((
                Some("redis"),
                format!(
                    "`[redis]` configures the Redis servers; lock kind `{}` does not use them \
                     (its clients talk to {}): drop it",
                    s.lock.kind.name(),
                    s.backend().name()
                ),
            ));
        }
        if table::cluster(s).is_some() {
            ClusterTable::check(s)?;
        }
        Ok(())
    }

    /// Sentinel's keys and `min-replicas-to-write` (`table::check_redis_keys`).
    fn validate_written(
        &self,
        s: &Scenario,
        written: &dyn Fn(&str) -> bool,
    ) -> Result<(), Invalid> {
        table::check_redis_keys(s, written)
    }

    /// One in a Redis Cluster (the lock's key lives in one slot, on one master), except for
    /// Redlock, whose instances are the cluster's masters (`table::placed_keys`).
    fn lock_masters(&self, s: &Scenario) -> u32 {
        match table::cluster(s) {
            Some(_) if !table::lock_on_every_master(s) => 1,
            _ => s.redis.masters,
        }
    }

    /// A Redis Cluster's scenarios get rows of their own in `lockcheck table`.
    fn row_label(&self, s: &Scenario) -> Option<&'static str> {
        table::cluster(s).map(|_| "Redis Cluster")
    }

    /// With sentinels, or as a Redis Cluster.
    fn promotes_by_itself(&self, s: &Scenario) -> bool {
        s.redis.sentinels > 0 || table::cluster(s).is_some()
    }

    /// `[redis.cluster]` is read here; the older keys stay `Scenario::redis`'s.
    fn reads_own_table(&self) -> bool {
        true
    }

    fn own_table_path(&self) -> Vec<&'static str> {
        table::PATH.to_vec()
    }

    fn read_table(
        &self,
        table: Option<&toml::Value>,
    ) -> Result<Arc<dyn Any + Send + Sync>, Invalid> {
        Ok(Arc::new(ClusterTable::read(table)?))
    }

    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        s.redis.request_timeout_ms
    }

    /// A `redis-server` starts in milliseconds; sentinels agree on their masters in about a
    /// second, and so does a Redis Cluster on its slots and roles.
    fn real_spawn_ms(&self, s: &Scenario) -> u64 {
        REDIS_SPAWN_MS
            + if s.redis.sentinels > 0 {
                SENTINEL_SPAWN_MS
            } else if table::cluster(s).is_some() {
                CLUSTER_SPAWN_MS
            } else {
                0
            }
    }

    fn lease_ms(&self, _s: &Scenario) -> Option<u64> {
        None
    }

    /// Every family has a Redis recipe in simulation; the family's own keys already refused
    /// what a topology cannot have (a master that is not there). Sentinels and a Redis Cluster
    /// promote replicas themselves, so lockcheck's `failover` is refused with either.
    fn check_fault(&self, s: &Scenario, f: &Fault) -> Result<(), String> {
        let cluster = table::cluster(s).is_some();
        if matches!(f.kind, FaultKind::Failover { .. }) && cluster {
            return Err(CLUSTER_FAILS_OVER.into());
        }
        if matches!(f.kind, FaultKind::Failover { .. }) && s.redis.sentinels > 0 {
            return Err(SENTINELS_FAIL_OVER.into());
        }
        if matches!(f.kind, FaultKind::SlotMigration { .. }) && !cluster {
            return Err(
                "`migrate_slot` moves a slot between a Redis Cluster's masters: add \
                 `[redis.cluster]`"
                    .into(),
            );
        }
        if matches!(f.kind, FaultKind::ClusterFailover { .. }) && !cluster {
            return Err(format!(
                "`{}` sends CLUSTER FAILOVER to a Redis Cluster: add `[redis.cluster]`, or \
                 use `failover` on master groups",
                f.kind.name()
            ));
        }
        Ok(())
    }

    fn pauses_servers(&self) -> bool {
        false
    }

    fn failover(&self) -> FailoverShape {
        FailoverShape::MasterGroup
    }

    fn not_drawable(&self, kind: &str, s: &Scenario) -> Option<String> {
        match kind {
            "failover" if s.redis.replicas == 0 => Some(
                "`failover` needs a replica to promote: set `[redis] replicas = 1` or drop it".into(),
            ),
            "failover" if s.redis.sentinels > 0 => Some(
                "with `sentinels` the sentinels decide a failover: drop `failover` (explore's `crash`, `pause` and `partition` make them fail over)".into(),
            ),
            "failover" if table::cluster(s).is_some() => Some(CLUSTER_FAILS_OVER.into()),
            "server_pause" => Some(
                "`server_pause` is not modelled on Redis: drop it (`pause` stops a client, `partition` cuts a Redis node off)".into(),
            ),
            _ => None,
        }
    }
}
