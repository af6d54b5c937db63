//! Moving a slot between masters of a real Redis Cluster, with the commands
//! `redis-cli --cluster reshard` sends (the cluster specification's "Live resharding"):
//! `CLUSTER SETSLOT <slot> IMPORTING <source-id>` on the target and `MIGRATING <target-id>` on the
//! source; `CLUSTER GETKEYSINSLOT` and `MIGRATE` (atomic per key: the source blocks until the
//! target has restored the key, with its remaining time to live, then deletes its own); and
//! `CLUSTER SETSLOT <slot> NODE <target-id>` on the target, the source and every other master.
//!
//! `MIGRATE` opens its own connection from the source to the target's client port, so it does
//! not pass the link proxies a partition cuts: a migration across a cut still moves the keys.

use crate::backend::redis::real::cluster::{ClusterRole, RedisCluster};
use crate::backend::redis::real::cluster_world::ClusterRun;
use crate::backend::redis::real::nemesis::RealNemesis;
use crate::fault::Refused;
use crate::real::RealError;
use std::sync::Arc;
use std::time::Duration;

/// One `CLUSTER SETSLOT` form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlotTo {
    /// `IMPORTING <node>`, on the target.
    Importing(usize),
    /// `MIGRATING <node>`, on the source.
    Migrating(usize),
    /// `NODE <node>`: the migration's end.
    Node(usize),
}

/// How many keys one `CLUSTER GETKEYSINSLOT` asks for (redis-cli's `--cluster-pipeline`
/// default is 10; a lock's slot holds a key or two).
const KEYS_AT_ONCE: u32 = 100;

/// How long `MIGRATE` may take per batch, in ms (redis-cli's default `--cluster-timeout`).
const MIGRATE_TIMEOUT_MS: u64 = 60_000;

impl RedisCluster {
    /// `CLUSTER SETSLOT <slot> ...` on node `node`.
    pub fn set_slot(&self, node: usize, slot: u16, to: SetSlotTo) -> Result<(), RealError> {
        let (word, other) = match to {
            SetSlotTo::Importing(n) => ("IMPORTING", n),
            SetSlotTo::Migrating(n) => ("MIGRATING", n),
            SetSlotTo::Node(n) => ("NODE", n),
        };
        let mut conn = self.control(node)?;
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(word)
            .arg(self.id(other))
            .query::<()>(&mut conn)
            .map_err(|e| {
                RealError::redis(
                    format!(
                        "CLUSTER SETSLOT {slot} {word} {} on {}",
                        self.name(other),
                        self.name(node)
                    ),
                    e,
                )
            })
    }

    /// `MIGRATE`s every key of `slot` from `source` to `target`, a batch at a time, and returns
    /// how many moved.
    pub fn migrate_slot_keys(
        &self,
        source: usize,
        target: usize,
        slot: u16,
    ) -> Result<usize, RealError> {
        let port = self.port(target).ok_or_else(|| RealError::InvalidOption {
            what: format!(
                "{} is not running: nothing to MIGRATE to",
                self.name(target)
            ),
        })?;
        let mut conn = self.control(source)?;
        let what = |e| {
            RealError::redis(
                format!("MIGRATE of slot {slot} from {}", self.name(source)),
                e,
            )
        };
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(KEYS_AT_ONCE)
                .query(&mut conn)
                .map_err(what)?;
            if keys.is_empty() {
                return Ok(moved);
            }
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys)
                .query::<()>(&mut conn)
                .map_err(what)?;
            moved += keys.len();
        }
    }
}

/// `migrate_slot`: the lock key's slot moves from the master that serves it to master group
/// `to`'s master over `for_ms`, as the simulated cluster moves it (`sim/cluster/migration.rs`):
/// `SETSLOT IMPORTING`/`MIGRATING` now, `MIGRATE` of its keys half-way, `SETSLOT NODE` at the end.
pub(super) fn migrate(
    n: &RealNemesis,
    d: Arc<ClusterRun>,
    to: u32,
    for_ms: u64,
) -> Result<(), Refused> {
    let c = &d.cluster;
    let refused = |e: RealError| Refused::Because(format!("migrate_slot: {e}"));
    let slot = c.key_slot(&n.scenario.lock.key).map_err(refused)?;
    let source = c.master_of_slot(slot).map_err(refused)?;
    // Master group `to`'s master now: its first node, or the replica that took over from it.
    let first = to as usize;
    let target = match c.role(first) {
        Ok(ClusterRole::Master) => first,
        _ => c
            .initial_replicas(first)
            .into_iter()
            .find(|&r| c.role(r).is_ok_and(|role| role == ClusterRole::Master))
            .ok_or_else(|| {
                Refused::Because(format!(
                    "migrate_slot: master group {to} has no running master"
                ))
            })?,
    };
    if source == target {
        return Err(Refused::Because(format!(
            "migrate_slot: slot {slot} is {}'s already",
            c.name(target)
        )));
    }
    c.set_slot(target, slot, SetSlotTo::Importing(source))
        .and_then(|()| c.set_slot(source, slot, SetSlotTo::Migrating(target)))
        .map_err(refused)?;
    n.note(format!(
        "slot {slot} (the lock key's) migrating from {} to {}: SETSLOT IMPORTING on the \
         target, MIGRATING on the source",
        c.name(source),
        c.name(target)
    ));
    let me = n.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(for_ms / 2)).await;
        let run = d.clone();
        let moved = tokio::task::spawn_blocking(move || {
            run.cluster.migrate_slot_keys(source, target, slot)
        })
        .await;
        me.note(match moved {
            Ok(Ok(k)) => format!("MIGRATE of slot {slot}: {k} key(s) moved to the target"),
            Ok(Err(e)) => format!("MIGRATE of slot {slot} not done: {e}"),
            Err(e) => format!("MIGRATE of slot {slot} not done: {e}"),
        });
        tokio::time::sleep(Duration::from_millis(for_ms - for_ms / 2)).await;
        let told = tokio::task::spawn_blocking(move || hand_over(&d.cluster, slot, source, target))
            .await
            .unwrap_or_default();
        me.note(format!(
            "slot {slot} handed to {}: SETSLOT NODE on {}",
            told.0,
            told.1.join(", ")
        ));
    });
    Ok(())
}

/// `SETSLOT NODE <target>` on the target, the source and every other running master, in that
/// order (redis-cli's); returns the target's name and the nodes that took it.
fn hand_over(c: &RedisCluster, slot: u16, source: usize, target: usize) -> (String, Vec<String>) {
    let others = c
        .masters()
        .unwrap_or_default()
        .into_iter()
        .filter(|&m| m != source && m != target);
    let told = [target, source]
        .into_iter()
        .chain(others)
        .filter(|&m| c.is_running(m) && c.set_slot(m, slot, SetSlotTo::Node(target)).is_ok())
        .map(|m| c.name(m).to_string())
        .collect();
    (c.name(target).to_string(), told)
}
