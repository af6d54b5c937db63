//! # `failover`: a master, lagging replicas, a failover, and `WAIT`
//!
//! The failover split brain of the Redis Lua-lock article and the "Is the
//! Redis lock perfect?" article ("one master and replicas"): a client acquires `SET lock c NX PX ttl` on the master, the
//! master dies before its asynchronous replication has carried the key to
//! the replica, the replica is promoted without the key, and a second client
//! acquires the same lock from it. Kleppmann ("How to do distributed
//! locking") names the same flaw: "Redis replication is asynchronous".
//!
//! The usual mitigation is `WAIT numreplicas timeout` after the `SET`. The
//! model shows that it narrows the window but does not close it, for three
//! reasons it finds on its own:
//! 1. `WAIT` returns after its timeout with fewer acknowledgements than
//!    asked for, and a client that ignores its reply proceeds
//!    (`on_wait_timeout=proceed`): the failover then loses the key exactly
//!    as without `WAIT`.
//! 2. With more replicas than `WAIT` asks for (`WAIT 1` with 2 replicas),
//!    one replica acknowledges and the failover promotes the other: Sentinel
//!    prefers the replica with the largest replication offset, but only
//!    among the replicas it can reach, so the model lets the failover pick
//!    any live replica.
//! 3. Even when every replica acknowledged, replication carries the expiry
//!    as an absolute time (`SET ... PXAT`, docs/design.md), so a promoted replica
//!    whose clock runs ahead (`replica_skew`) expires the key early by its
//!    own clock while the holder's lease is still valid on the holder's.
//!
//! With a strict client (`on_wait_timeout=give-up`: no acknowledgements, no
//! lock), `WAIT` on every replica and no clock skew, the model finds no
//! counterexample within its bound. That configuration is outside what
//! `WAIT` promises (Redis documents that acknowledged writes can be lost in
//! a failover), and the model does not include replicas that restart empty,
//! partitions between Sentinel and replicas, or a failover that promotes a
//! replica which missed acknowledged writes for any other reason.
//!
//! ## The model
//! * Node 0 (`redis-0`) starts as master; nodes 1.. are its replicas
//!   (`redis-0-replica-<r>`, node `r + 1`). The master sends each write's
//!   effect (`SET` with an absolute expiry, `DEL`) to every replica
//!   asynchronously; a [`FailoverAction::Replicate`] step applies a
//!   replica's backlog. A replica hides a key whose expiry has passed on its
//!   own clock.
//! * [`FailoverAction::Failover`] kills the master and promotes one live
//!   replica with whatever it has applied; the other replicas resync from
//!   it. One failover per run. The dead master may later restart empty and
//!   rejoin as a replica ([`FailoverAction::Rejoin`]), as Sentinel does.
//! * A client acquires on the current master. With `wait > 0` it then waits
//!   for `wait` replicas to acknowledge its write; `WAIT` returns when they
//!   have or after `wait_timeout` ticks, and fails if the master died. The
//!   holder's lease is valid until `acquire time + ttl` on its clock (true
//!   time); it leaves its critical section then, or earlier by releasing.
//!
//! ## Results (BFS shortest counterexamples; `tests.rs`)
//! * no `WAIT`: 3 steps (acquire, failover, the other client acquires);
//! * `wait=1`, proceeding on timeout: 7 steps;
//! * `replicas=2 wait=1 on_wait_timeout=give-up`: 7 steps (one replica
//!   acknowledges, the other is promoted);
//! * `wait=1 on_wait_timeout=give-up replica_skew=2`: 9 steps;
//! * `wait=1 on_wait_timeout=give-up` (every replica, no skew): holds
//!   exhaustively within the bound.
//!
//! ## Parameters
//! `clients` (2), `ttl` (3), `time_bound` (6), `cycles` (1), `replicas`
//! (1, up to 2), `wait` (0 = no `WAIT`), `wait_timeout` (1 tick),
//! `on_wait_timeout` (`proceed` | `give-up`), `replica_skew` (0 ticks ahead),
//! `tick_ms` (100).
//!
//! ## Files
//! One concept per file, so that each can be read whole: this file has the
//! configuration, its parameters and the node clocks; `state.rs` the state;
//! `action.rs` the steps; `step.rs` which steps a state enables and what
//! each does (stateright's `Model`); `explain.rs` what the runner and a
//! reader see (`LockModel`: parameters parsed, expected verdicts, facts,
//! step texts, the counterexample as a scenario); `tests.rs` the tests.
//! The types are re-exported here, so their paths
//! (`failover::FailoverState` and the rest) are those of the single file
//! this module was.

mod action;
mod explain;
mod state;
mod step;
#[cfg(test)]
mod tests;

pub use action::FailoverAction;
pub use state::{Client, FailoverState, Node, Op, Phase, MAX_CLIENTS, MAX_REPLICAS};

use crate::params::{self, ParamSpec};

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct Failover {
    /// Clients competing for the lock.
    pub clients: u8,
    /// The lease (`PX`), in ticks.
    pub ttl: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Acquisitions per client.
    pub cycles: u8,
    /// Replicas of the master.
    pub replicas: u8,
    /// `WAIT <wait> <timeout>` after acquiring; 0: no `WAIT`.
    pub wait: u8,
    /// `WAIT`'s timeout, in ticks.
    pub wait_timeout: u8,
    /// A client whose `WAIT` timed out short of `wait` acks proceeds anyway.
    pub proceed_on_timeout: bool,
    /// Replicas' clocks run this many ticks ahead of true time.
    pub replica_skew: u8,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

/// The lock key; its expiry is absolute (`PXAT`), compared with each
/// node's own clock.
pub use crate::key::Key;

pub use crate::properties::Storage;

impl Failover {
    fn clock(&self, s: &FailoverState, node: usize) -> u8 {
        if node == 0 {
            s.t
        } else {
            s.t + self.replica_skew
        }
    }

    fn nodes(&self) -> usize {
        self.replicas as usize + 1
    }
}

const PARAMS: &[ParamSpec] = &[
    params::CLIENTS,
    params::TTL,
    ParamSpec {
        name: "time_bound",
        default: "6",
        help: "true time stops at this tick",
    },
    params::CYCLES,
    ParamSpec {
        name: "replicas",
        default: "1",
        help: "replicas of the master (1-2)",
    },
    ParamSpec {
        name: "wait",
        default: "0",
        help: "WAIT for this many replica acknowledgements after SET (0 = no WAIT)",
    },
    ParamSpec {
        name: "wait_timeout",
        default: "1",
        help: "WAIT's timeout in ticks",
    },
    ParamSpec {
        name: "on_wait_timeout",
        default: "proceed",
        help: "proceed | give-up: what the client does when WAIT returns short of acks",
    },
    ParamSpec {
        name: "replica_skew",
        default: "0",
        help: "replica clocks run this many ticks ahead",
    },
    params::TICK_MS,
];
