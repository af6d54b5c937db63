//! The lock key's slot migrating between masters of the simulated Redis Cluster
//! (`migrate_slot`), in the three steps `redis-cli --cluster reshard` takes (the cluster
//! specification's "Live resharding"); the nemesis spaces them in time:
//!
//! 1. [`Cluster::begin_slot_migration`]: `SETSLOT IMPORTING` on the target, then `MIGRATING` on
//!    the source. From here every node answers by `engine::cluster::redirect`: the source serves
//!    a key it still has and answers `ASK` for one it lacks, the target serves the slot after
//!    `ASKING`.
//! 2. [`Cluster::move_slot_keys`]: `MIGRATE` of every key of the slot, each at once: the target
//!    restores it with its remaining time to live (in the target's clock, as `RESTORE` takes a
//!    relative TTL), then the source deletes it; both replicate what they did.
//! 3. [`Cluster::end_slot_migration`]: `SETSLOT NODE <target>` on the target, the source and
//!    every other running master.

use super::Cluster;
use crate::backend::redis::engine::cluster::{key_slot, ClusterRole, SetSlot};
use crate::history::EventKind;
use crate::simredis::ClientId;

/// The connection `MIGRATE`'s writes are made on: no client's (a removal it makes is nobody's
/// release).
const MIGRATE_CONN: ClientId = ClientId::MAX - 7;

/// One migration of a slot, by bus node: from `source` to `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMove {
    /// The slot (the lock key's).
    pub slot: u16,
    source: usize,
    target: usize,
}

impl Cluster {
    /// Step 1: the lock key's slot starts migrating from the master that serves it to master
    /// group `to`'s master. An error is why it cannot (Redis's own reply where it has one).
    pub fn begin_slot_migration(&self, to: usize) -> Result<SlotMove, String> {
        let (m, what) = {
            let mut st = self.st();
            let st = &mut *st;
            let key = st.lock_key.clone().ok_or("the run has no lock key")?;
            let slot = key_slot(&key);
            let target_server = st
                .groups
                .get(to)
                .map(|g| g.master)
                .ok_or_else(|| format!("master group {to} is not there"))?;
            let mode = st
                .redis_cluster
                .as_mut()
                .ok_or("the deployment is no Redis Cluster")?;
            let source = mode
                .bus
                .master_of_slot(slot)
                .ok_or_else(|| format!("no running master serves slot {slot}"))?;
            let target = mode.bus_of[target_server];
            let name = |b: usize| st.servers[mode.server_of[b]].name.clone();
            if source == target {
                return Err(format!("slot {slot} is {}'s already", name(target)));
            }
            if !st.servers[target_server].alive {
                return Err(format!("{} is not running", name(target)));
            }
            mode.bus
                .set_slot(target, slot, SetSlot::Importing(source))?;
            mode.bus
                .set_slot(source, slot, SetSlot::Migrating(target))?;
            let what = format!(
                "slot {slot} (the lock key's) migrating from {} to {}: SETSLOT IMPORTING on the \
                 target, MIGRATING on the source",
                name(source),
                name(target)
            );
            (
                SlotMove {
                    slot,
                    source,
                    target,
                },
                what,
            )
        };
        self.rec.record("nemesis", EventKind::Fault { what });
        Ok(m)
    }

    /// Step 2: `MIGRATE` of every live key of the slot from the source to the target; returns
    /// how many moved. Nothing moves if either is down (redis-cli's `MIGRATE` would fail).
    pub fn move_slot_keys(&self, m: SlotMove) -> usize {
        let moved = {
            let mut st = self.st();
            let Some(mode) = st.redis_cluster.as_ref() else {
                return 0;
            };
            let (source, target) = (mode.server_of[m.source], mode.server_of[m.target]);
            if !(st.servers[source].alive && st.servers[target].alive) {
                drop(st);
                self.note(format!(
                    "MIGRATE of slot {} not done: its source or target is down",
                    m.slot
                ));
                return 0;
            }
            let (now_s, now_t) = (self.clocks.now_ms(source), self.clocks.now_ms(target));
            let keys = st.servers[source]
                .engine
                .live_keys_where(now_s, |k| key_slot(k) == m.slot);
            for key in &keys {
                let Some(rebuild) = st.servers[source].engine.rebuild_commands(key, now_s) else {
                    continue;
                };
                // The target restores the key, then the source deletes it: never both without
                // it, and a client that asks the source in between waits (MIGRATE blocks it).
                self.write_internally(&mut st, target, now_t, &rebuild);
                self.write_internally(
                    &mut st,
                    source,
                    now_s,
                    &[vec![b"DEL".to_vec(), key.clone()]],
                );
            }
            keys.len()
        };
        self.note(format!(
            "MIGRATE of slot {}: {moved} key(s) moved to the target",
            m.slot
        ));
        moved
    }

    /// Step 3: `SETSLOT NODE <target>` on the target, the source and the other running masters.
    pub fn end_slot_migration(&self, m: SlotMove) {
        let what = {
            let mut st = self.st();
            let st = &mut *st;
            let Some(mode) = st.redis_cluster.as_mut() else {
                return;
            };
            let mut told = Vec::new();
            let others = (0..mode.server_of.len()).filter(|&b| {
                b != m.target && b != m.source && mode.bus.role(b) == ClusterRole::Master
            });
            let order: Vec<usize> = [m.target, m.source].into_iter().chain(others).collect();
            for b in order {
                if st.servers[mode.server_of[b]].alive
                    && mode
                        .bus
                        .set_slot(b, m.slot, SetSlot::Node(m.target))
                        .is_ok()
                {
                    told.push(st.servers[mode.server_of[b]].name.clone());
                }
            }
            format!(
                "slot {} handed to {}: SETSLOT NODE on {}",
                m.slot,
                st.servers[mode.server_of[m.target]].name,
                told.join(", ")
            )
        };
        self.note(what);
    }

    /// Writes `cmds` on server `idx` as the server itself does (no redirect, no client), and
    /// replicates what they changed.
    fn write_internally(
        &self,
        st: &mut super::State,
        idx: usize,
        now_ms: u64,
        cmds: &[Vec<Vec<u8>>],
    ) {
        for cmd in cmds {
            let wanted = !st.servers[idx].streams.is_empty();
            st.servers[idx].engine.set_effects_wanted(wanted);
            let out = st.servers[idx].engine.execute(now_ms, MIGRATE_CONN, cmd);
            if out.wrote {
                self.replicate(st, idx, out.effects);
            }
        }
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }
}
