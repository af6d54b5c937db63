//! The redlock model's state (masters, clients, ghost counters, storage),
//! its packing into bytes for hashing, and the representative DFS uses to
//! treat interchangeable clients as one.

use crate::key::Key;
use crate::properties::Storage;

/// Masters at most: Redlock is run over 3 or 5.
pub const MAX_NODES: usize = 5;
/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

/// One independent master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The lock key on this master, if set and not expired on its clock.
    pub key: Option<Key>,
    /// Clock jumps applied so far (ticks).
    pub jumped: u8,
    /// Delayed restart: refuses to grant while its clock is below this.
    pub refuse_until: u8,
}

/// Where a client is in its cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not acquiring; may start.
    Idle,
    /// Sending `SET NX PX` to the nodes in order.
    Acquiring,
    /// Got a majority in time: in its critical section.
    Holding,
    /// Checked its validity; about to write.
    Checked,
    /// Used up its cycles or its retries.
    Done,
}

/// One client of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is in its cycles.
    pub phase: Phase,
    /// Stopped (GC): it notices nothing, not even that its validity ran out.
    pub paused: bool,
    /// Acquisitions completed.
    pub cycles: u8,
    /// Failed attempts so far.
    pub attempts: u8,
    /// Client clock when it started acquiring.
    pub start: u8,
    /// Next node to try.
    pub next: u8,
    /// Nodes that granted (bits).
    pub got: u8,
    /// End of validity on the client's clock.
    pub valid_until: u8,
    /// `client_clock=lag` only: the client's clock.
    pub clock: u8,
    /// Ghost: which grant this lease is.
    pub grant: u8,
}

/// `Hash` packs the state into bytes and hashes them in one call: the
/// checker fingerprints every generated state, and field-by-field hashing
/// was a third of the run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedlockState {
    /// True time (ticks).
    pub t: u8,
    /// The masters (only the first `nodes` take part).
    pub nodes: [Node; MAX_NODES],
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// Leases granted so far (true order, ghost state).
    pub grants: u8,
    /// Pauses used so far.
    pub pauses: u8,
    /// Clock jumps used so far.
    pub jumps: u8,
    /// Crashes used so far.
    pub crashes: u8,
    /// The protected storage.
    pub storage: Storage,
}

const PACKED: usize = 7 + 5 * MAX_NODES + 10 * MAX_CLIENTS;

impl Client {
    /// Every field as a byte, in declaration order: the client's part of
    /// the packed state that is hashed, and the order in which symmetry
    /// reduction sorts clients.
    fn bytes(&self) -> [u8; 10] {
        [
            self.phase as u8,
            self.paused as u8,
            self.cycles,
            self.attempts,
            self.start,
            self.next,
            self.got,
            self.valid_until,
            self.clock,
            self.grant,
        ]
    }
}

impl RedlockState {
    fn pack(&self) -> [u8; PACKED] {
        let mut b = [0u8; PACKED];
        b[..7].copy_from_slice(&[
            self.t,
            self.grants,
            self.pauses,
            self.jumps,
            self.crashes,
            self.storage.max_grant,
            self.storage.stale as u8,
        ]);
        let mut i = 7;
        for n in &self.nodes {
            let (h, e) = match n.key {
                Some(k) => (k.holder + 1, k.expires),
                None => (0, 0),
            };
            b[i..i + 5].copy_from_slice(&[h, e, n.jumped, n.refuse_until, 0]);
            i += 5;
        }
        for c in &self.clients {
            b[i..i + 10].copy_from_slice(&c.bytes());
            i += 10;
        }
        b
    }
}

impl std::hash::Hash for RedlockState {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(&self.pack());
    }
}

/// A client that has not started: every cycle starts from it.
pub(super) const IDLE: Client = Client {
    phase: Phase::Idle,
    paused: false,
    cycles: 0,
    attempts: 0,
    start: 0,
    next: 0,
    got: 0,
    valid_until: 0,
    clock: 0,
    grant: 0,
};

/// Clients sorted by their state, key holders renamed to match: states
/// that differ only by which client is which get one representative.
pub(super) fn representative(s: &RedlockState) -> RedlockState {
    let mut order = [0u8, 1, 2];
    order.sort_by_key(|&i| s.clients[i as usize].bytes());
    let mut new_index = [0u8; MAX_CLIENTS];
    let mut r = *s;
    for (new, &old) in order.iter().enumerate() {
        r.clients[new] = s.clients[old as usize];
        new_index[old as usize] = new as u8;
    }
    for n in r.nodes.iter_mut() {
        if let Some(k) = &mut n.key {
            k.holder = new_index[k.holder as usize];
        }
    }
    r
}
