//! The vocabulary both Redis Cluster worlds share: the hash slots, a master's initial share of
//! them, a node's role and the forms of a manual failover. The spawned cluster
//! (`real/cluster.rs`) and the simulated one (`bus.rs`) number and split alike, so a node index
//! means the same node in both and the differential test can compare them one to one.

/// The number of hash slots of every Redis Cluster.
pub const SLOTS: u16 = 16384;

/// An inclusive range of hash slots, `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    /// The first slot of the range.
    pub first: u16,
    /// The last slot of the range (inclusive).
    pub last: u16,
}

impl SlotRange {
    /// Whether `slot` lies in the range.
    pub fn contains(&self, slot: u16) -> bool {
        (self.first..=self.last).contains(&slot)
    }

    /// How many slots it holds.
    pub fn len(&self) -> usize {
        usize::from(self.last - self.first) + 1
    }

    /// Never true: a range holds at least its first slot (for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The slots of master `m` of `masters` when the cluster is formed: `SLOTS` split evenly in
/// order, the remainder to the last ones (as `redis-cli --cluster create` splits them).
pub fn initial_slots(m: usize, masters: usize) -> SlotRange {
    let per = f64::from(SLOTS) / masters as f64;
    let first = (m as f64 * per).round() as u16;
    let last = (((m + 1) as f64 * per).round() as u16) - 1;
    SlotRange { first, last }
}

/// A node's role, by node index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterRole {
    /// It serves slots (or could: a master may own none).
    Master,
    /// It replicates the master with this node index.
    Replica {
        /// The master's node index.
        of: usize,
    },
}

/// The forms of `CLUSTER FAILOVER`, sent to a replica (Redis documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManualFailover {
    /// `CLUSTER FAILOVER`: the replica asks its master to stop its clients, waits until it has
    /// replicated everything the master acknowledged, then is elected: no acknowledged write is
    /// lost. Needs the master reachable.
    Coordinated,
    /// `CLUSTER FAILOVER FORCE`: no handshake with the master (it may be down); the replica is
    /// still elected by a majority of masters. Writes not yet replicated are lost.
    Force,
    /// `CLUSTER FAILOVER TAKEOVER`: no handshake and no election; the replica bumps the epoch
    /// alone and claims the slots. Writes not yet replicated are lost, and with the old master
    /// alive and unaware both serve the slots until it hears of the newer epoch.
    Takeover,
}
