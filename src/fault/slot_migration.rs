//! A Redis Cluster's resharding of the lock key's slot (`kind = "migrate_slot"`): the slot that
//! holds the lock key moves from the master that owns it to master group `master`, the way
//! `redis-cli --cluster reshard` moves a slot (the cluster specification's "Live resharding"):
//!
//! 1. `CLUSTER SETSLOT <slot> IMPORTING <source>` on the target, then `MIGRATING <target>` on
//!    the source. From now on the source serves a key of the slot only while it still has it;
//!    for a key it lacks it answers `ASK <target>`, and the target serves a request for the slot
//!    only after `ASKING`. So a `SET NX` for a key that is not there is created on the target.
//! 2. Half-way through `for_ms`: every key of the slot moves with `MIGRATE`, which is atomic per
//!    key (the source blocks until the target has restored it, then deletes its copy) and carries
//!    the key's remaining time to live.
//! 3. At `for_ms`: `CLUSTER SETSLOT <slot> NODE <target>` on the target, the source and every
//!    other master; clients that still ask the source get `MOVED`.
//!
//! Whether a lock survives this is the question the fault asks: at no point may two nodes both
//! grant the same key, as long as each step is carried out in this order.

use super::{FaultKind, KeyError, Nemesis, Refused, Table, Written};

/// How long a migration lasts when the table does not say (`for_ms`).
pub const DEFAULT_FOR_MS: u64 = 1000;

/// `kind = "migrate_slot"`.
pub const WRITTEN: Written = Written {
    name: "migrate_slot",
    keys: &["master", "for_ms"],
    parse,
};

fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let f = t.raw;
    super::failover::needs_master_groups(t, "a Redis Cluster's resharding")?;
    let to = *t.required("master", &f.master)?;
    super::failover::group_there(t, to)?;
    let for_ms = f.for_ms.as_ref().map_or(DEFAULT_FOR_MS, |v| *v.get_ref());
    if for_ms < 2 {
        let span = f.for_ms.as_ref().map_or(t.span.clone(), |v| v.span());
        return Err(t.err(
            span,
            "`for_ms` of a slot migration must be at least 2 (its keys move half-way through)",
        ));
    }
    Ok(FaultKind::SlotMigration { to, for_ms })
}

pub(super) fn write(to: u32, for_ms: u64, t: &mut toml_edit::Table) {
    t["master"] = toml_edit::value(i64::from(to));
    t["for_ms"] = toml_edit::value(for_ms as i64);
}

pub(super) fn label(to: u32) -> String {
    format!("lock key's slot migrated to master group {to}")
}

pub(super) fn fire<N: Nemesis + ?Sized>(n: &N, to: u32, for_ms: u64) -> Result<(), Refused> {
    n.migrate_slot(to, for_ms)
}
