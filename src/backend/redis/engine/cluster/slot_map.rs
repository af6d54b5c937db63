//! One node's belief about the slots: who owns each of the 16384, each node's configuration
//! epoch, and the slots in migration on this node (`CLUSTER SETSLOT <slot> MIGRATING|IMPORTING`).
//!
//! Every node of a Redis Cluster keeps its own such map (`server.cluster->slots`,
//! `migrating_slots_to`, `importing_slots_from` in `cluster.c`), changed by its own commands and
//! by what other nodes claim on the bus. The cluster spec's rule for a claim ("Hash slots
//! configuration propagation"): a slot changes owner in a node's map when it is unassigned there,
//! or when the claimant's configuration epoch is greater than the current owner's. A slot this
//! node is importing is left alone (the migration decides it, with `SETSLOT NODE`). So the
//! newest epoch wins, which is why a promoted replica takes a fresh epoch.
//!
//! Deterministic: owners are a vector by slot, epochs and migrations `BTreeMap`s.

use crate::backend::redis::engine::cluster::topology::{initial_slots, SlotRange, SLOTS};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// One node's map of slot owners, epochs and migrations. Nodes are indices (as
/// [`RedisCluster`](crate::backend::redis::real::RedisCluster) numbers them).
///
/// Slot counts are kept as slots change and each owner's ranges are cached until the next
/// change: the bus reads both on every message (a claim, the cluster size), and scanning 16384
/// slots each time made a simulated second cost milliseconds.
#[derive(Clone, Debug)]
pub struct SlotMap {
    owners: Vec<Option<usize>>,
    counts: BTreeMap<usize, usize>,
    ranges: RefCell<BTreeMap<usize, Vec<SlotRange>>>,
    epochs: BTreeMap<usize, u64>,
    migrating: BTreeMap<u16, usize>,
    importing: BTreeMap<u16, usize>,
}

/// What accepting another node's claim changed (see [`SlotMap::accept_claim`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// Slots that changed owner to the claimant, by their previous owner (`None`: unassigned).
    pub taken: BTreeMap<Option<usize>, Vec<u16>>,
    /// Owners whose newer epoch beat the claim on at least one slot: the claimant's view is stale
    /// and they should tell it (the spec's `UPDATE` message).
    pub newer: BTreeSet<usize>,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            owners: vec![None; usize::from(SLOTS)],
            counts: BTreeMap::new(),
            ranges: RefCell::new(BTreeMap::new()),
            epochs: BTreeMap::new(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
        }
    }
}

impl SlotMap {
    /// The map every node has once a cluster of `masters` masters is formed as
    /// [`RedisCluster`](crate::backend::redis::real::RedisCluster) forms it: master `m` owns the
    /// `m`-th slice (`initial_slots`) with configuration epoch `m + 1`.
    pub fn formed(masters: usize) -> SlotMap {
        let mut map = SlotMap::default();
        for m in 0..masters {
            map.assign(initial_slots(m, masters), m);
            map.set_epoch(m, m as u64 + 1);
        }
        map
    }

    /// Who owns `slot` in this map.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        self.owners[usize::from(slot)]
    }

    /// Sets the owner of `slot`, keeping the counts and dropping the cached ranges.
    fn set_owner(&mut self, slot: u16, owner: Option<usize>) {
        let old = std::mem::replace(&mut self.owners[usize::from(slot)], owner);
        if old == owner {
            return;
        }
        if let Some(o) = old {
            let count = self.counts.get_mut(&o).expect("an owner is counted");
            *count -= 1;
            if *count == 0 {
                self.counts.remove(&o);
            }
        }
        if let Some(o) = owner {
            *self.counts.entry(o).or_default() += 1;
        }
        self.ranges.get_mut().clear();
    }

    /// Gives every slot of `range` to `node`.
    pub fn assign(&mut self, range: SlotRange, node: usize) {
        for slot in range.first..=range.last {
            self.set_owner(slot, Some(node));
        }
    }

    /// Leaves `slot` unassigned (`CLUSTER DELSLOTS`).
    pub fn unassign(&mut self, slot: u16) {
        self.set_owner(slot, None);
    }

    /// Takes every slot away from `node` (it turned replica: `clusterDelNodeSlots`). Returns how
    /// many it had.
    pub fn unassign_node(&mut self, node: usize) -> usize {
        let ranges = self.ranges_of(node);
        for r in &ranges {
            for slot in r.first..=r.last {
                self.set_owner(slot, None);
            }
        }
        ranges.iter().map(SlotRange::len).sum()
    }

    /// `node`'s slots as contiguous ranges, in order.
    pub fn ranges_of(&self, node: usize) -> Vec<SlotRange> {
        if let Some(r) = self.ranges.borrow().get(&node) {
            return r.clone();
        }
        let mut out: Vec<SlotRange> = Vec::new();
        if self.counts.contains_key(&node) {
            for slot in 0..SLOTS {
                if self.owner(slot) != Some(node) {
                    continue;
                }
                match out.last_mut() {
                    Some(r) if r.last + 1 == slot => r.last = slot,
                    _ => out.push(SlotRange {
                        first: slot,
                        last: slot,
                    }),
                }
            }
        }
        self.ranges.borrow_mut().insert(node, out.clone());
        out
    }

    /// How many slots `node` owns.
    pub fn count_of(&self, node: usize) -> usize {
        self.counts.get(&node).copied().unwrap_or(0)
    }

    /// Whether every slot has an owner.
    pub fn covered(&self) -> bool {
        self.counts.values().sum::<usize>() == usize::from(SLOTS)
    }

    /// The nodes that own at least one slot, in order.
    pub fn owners(&self) -> BTreeSet<usize> {
        self.counts.keys().copied().collect()
    }

    /// `node`'s configuration epoch in this map (0 if never heard).
    pub fn epoch(&self, node: usize) -> u64 {
        self.epochs.get(&node).copied().unwrap_or(0)
    }

    /// Records `node`'s configuration epoch.
    pub fn set_epoch(&mut self, node: usize, epoch: u64) {
        self.epochs.insert(node, epoch);
    }

    /// The greatest configuration epoch in this map.
    pub fn max_epoch(&self) -> u64 {
        self.epochs.values().copied().max().unwrap_or(0)
    }

    /// Where `slot` is migrating to, if this node is moving it out.
    pub fn migrating_to(&self, slot: u16) -> Option<usize> {
        self.migrating.get(&slot).copied()
    }

    /// Where `slot` is imported from, if this node is taking it in.
    pub fn importing_from(&self, slot: u16) -> Option<usize> {
        self.importing.get(&slot).copied()
    }

    /// `CLUSTER SETSLOT <slot> MIGRATING <to>` (only the owner may: Redis answers "I'm not the
    /// owner of hash slot" otherwise, which the caller checks).
    pub fn set_migrating(&mut self, slot: u16, to: usize) {
        self.migrating.insert(slot, to);
    }

    /// `CLUSTER SETSLOT <slot> IMPORTING <from>`.
    pub fn set_importing(&mut self, slot: u16, from: usize) {
        self.importing.insert(slot, from);
    }

    /// `CLUSTER SETSLOT <slot> STABLE`: neither migrating nor importing.
    pub fn set_stable(&mut self, slot: u16) {
        self.migrating.remove(&slot);
        self.importing.remove(&slot);
    }

    /// Another node's claim, as a ping or pong carries it (`clusterUpdateSlotsConfigWith`):
    /// `claimant` says it owns `claimed` with configuration epoch `epoch`. Each claimed slot goes
    /// to it if unassigned here or owned here by a node with a smaller epoch; a slot this node
    /// imports is left alone; an owner with a greater epoch makes the claim stale.
    pub fn accept_claim(
        &mut self,
        claimant: usize,
        epoch: u64,
        claimed: &[SlotRange],
    ) -> ClaimOutcome {
        let mut out = ClaimOutcome::default();
        self.set_epoch(claimant, epoch.max(self.epoch(claimant)));
        for range in claimed {
            for slot in range.first..=range.last {
                let current = self.owner(slot);
                if current == Some(claimant) || self.importing.contains_key(&slot) {
                    continue;
                }
                match current {
                    Some(owner) if self.epoch(owner) >= epoch => {
                        if self.epoch(owner) > epoch {
                            out.newer.insert(owner);
                        }
                    }
                    _ => {
                        self.set_owner(slot, Some(claimant));
                        out.taken.entry(current).or_default().push(slot);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u16, last: u16) -> SlotRange {
        SlotRange { first, last }
    }

    #[test]
    fn a_formed_map_covers_every_slot_in_three_ranges() {
        let map = SlotMap::formed(3);
        assert!(map.covered());
        assert_eq!(map.ranges_of(0), vec![range(0, 5460)]);
        assert_eq!(map.ranges_of(2), vec![range(10923, 16383)]);
        assert_eq!(map.count_of(1), 10923 - 5461);
        assert_eq!((map.epoch(0), map.epoch(2), map.max_epoch()), (1, 3, 3));
        assert_eq!(map.owners(), BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn ranges_split_where_ownership_breaks() {
        let mut map = SlotMap::formed(3);
        map.assign(range(100, 100), 1);
        map.unassign(200);
        assert_eq!(
            map.ranges_of(0),
            vec![range(0, 99), range(101, 199), range(201, 5460)]
        );
        assert!(!map.covered());
        assert_eq!(map.unassign_node(1), 10923 - 5461 + 1);
        assert_eq!(map.owner(100), None);
    }

    #[test]
    fn a_claim_with_a_greater_epoch_takes_the_slots_and_a_smaller_one_is_stale() {
        let mut map = SlotMap::formed(3);
        // Replica 3 of master 0 won an election for epoch 4.
        let out = map.accept_claim(3, 4, &[range(0, 5460)]);
        assert_eq!(out.taken.get(&Some(0)).map(Vec::len), Some(5461));
        assert!(out.newer.is_empty());
        assert_eq!(map.owner(17), Some(3));
        // The old master, back with its old view, still claims them with epoch 1.
        let out = map.accept_claim(0, 1, &[range(0, 5460)]);
        assert!(out.taken.is_empty());
        assert_eq!(out.newer, BTreeSet::from([3]));
        assert_eq!(map.owner(17), Some(3));
        // An equal epoch does not take a slot either (the spec resolves collisions apart).
        let out = map.accept_claim(1, 4, &[range(0, 0)]);
        assert!(out.taken.is_empty() && out.newer.is_empty());
    }

    #[test]
    fn an_unassigned_slot_goes_to_any_claimant_and_an_importing_one_to_none() {
        let mut map = SlotMap::formed(3);
        map.unassign(5);
        map.set_importing(6, 2);
        let out = map.accept_claim(2, 0, &[range(5, 6)]);
        assert_eq!(out.taken, BTreeMap::from([(None, vec![5])]));
        assert_eq!(
            map.owner(6),
            Some(0),
            "an importing slot waits for SETSLOT NODE"
        );
        assert_eq!(map.importing_from(6), Some(2));
        map.set_migrating(7, 1);
        assert_eq!(map.migrating_to(7), Some(1));
        map.set_stable(6);
        map.set_stable(7);
        assert_eq!((map.importing_from(6), map.migrating_to(7)), (None, None));
    }
}
