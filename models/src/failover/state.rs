//! The failover model's state: the master and its replicas with their
//! replication backlogs, the clients, the ghost counter and the storage.

use crate::key::Key;
use crate::properties::{self, Storage};

/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;
/// Replicas per master at most: `WAIT 1` with two replicas is what lets the failover promote the
/// one that did not acknowledge.
pub const MAX_REPLICAS: usize = 2;
/// The master and every replica it can have.
pub(super) const NODES: usize = MAX_REPLICAS + 1;

/// A replicated effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `SET` with the absolute expiry the master computed (`PXAT`).
    Set(Key),
    /// `DEL` by a release or a client that gave up.
    Del,
}

/// One Redis node: the master or a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Running (a failed master is down until it rejoins).
    pub up: bool,
    /// The lock key as this node has it.
    pub key: Option<Key>,
    /// Replicas: the master's writes not yet applied here, collapsed to
    /// their net effect (one key, so the last write decides).
    pub pending: Option<Op>,
}

/// Where a client is in its cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not holding; may acquire.
    Idle,
    /// `SET` succeeded; `WAIT` has not returned.
    Waiting,
    /// `WAIT` returned (or there is none): the client is in its critical section.
    Holding,
    /// Used up its cycles.
    Done,
}

/// One client of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is in its cycles.
    pub phase: Phase,
    /// Acquisitions completed.
    pub cycles: u8,
    /// True time of its `SET`: its lease ends `ttl` later on its clock.
    pub acquired_at: u8,
    /// The master it acquired on.
    pub master: u8,
    /// Replicas (node bits) that have applied its `SET`.
    pub acks: u8,
    /// Ghost: which grant this lease is.
    pub grant: u8,
}

/// A state of the failover model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FailoverState {
    /// True time (ticks).
    pub t: u8,
    /// The node that is master now.
    pub master: u8,
    /// The one failover has happened.
    pub failed_over: bool,
    /// The master and its replicas (only the first `replicas + 1` take part).
    pub nodes: [Node; NODES],
    /// Leases granted so far (true order, ghost state).
    pub grants: u8,
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// The protected storage.
    pub storage: Storage,
}

/// A client that has not acquired: every cycle starts from it.
pub(super) const IDLE: Client = Client {
    phase: Phase::Idle,
    cycles: 0,
    acquired_at: 0,
    master: 0,
    acks: 0,
    grant: 0,
};

properties::lock_state!(FailoverState, |c: &Client| c.phase == Phase::Holding);
