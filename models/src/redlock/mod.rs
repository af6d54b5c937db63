//! # `redlock`: Redlock over N independent masters
//!
//! The algorithm the "Is the Redis lock perfect?" article summarises (and antirez's "Distributed locks with
//! Redis" specifies): a client notes its clock, tries `SET lock c NX PX ttl`
//! on each of N masters in turn, and holds the lock if it got a majority and
//! the time it spent is less than the lease; its validity is
//! `ttl - elapsed - drift allowance`. On failure it deletes its keys
//! everywhere.
//!
//! The two sides of the debate, both checked here:
//! * Kleppmann ("How to do distributed locking"): Redlock depends on timing
//!   assumptions. A server clock that jumps forward expires a key early, so
//!   a second client gets a majority while the first still holds; a client
//!   that pauses after acquiring (GC) outlives its lease; and a node that
//!   restarts without persistence forgets the keys it granted.
//! * antirez ("Is Redlock safe?"): clocks need only a bounded *rate* error,
//!   which the drift allowance absorbs; the client re-checks the elapsed
//!   time after acquiring, which catches delays during acquisition; a
//!   restarted node must refuse to grant for a TTL ("delayed restart"). A
//!   pause after the check is a problem for every lock with auto-release.
//!
//! ## The model
//! * Nodes `redis-0..redis-{N-1}`, each with a clock `t + drift + jumps`
//!   ([`crate::clock::Clock`]): the first `fast_nodes` nodes gain one tick
//!   per `drift_period` ticks; any node may jump forward by `jump` ticks
//!   (`jumps` times in all). Keys expire on their node's clock.
//! * Clients acquire node by node in index order, one [`RedlockAction::Lock`]
//!   step per node, so time passes between the steps. `client_clock`:
//!   `exact` (true time), `drift` (the first `slow_clients` clients lose a
//!   tick per `drift_period`), or `lag` (the clock only advances by explicit
//!   [`RedlockAction::ClockAdvance`] steps, never past true time: an
//!   arbitrarily slow client clock, as in the specl example below).
//! * [`RedlockAction::Finish`]: with a majority the client holds the lock
//!   until `start + ttl - allowance` on its clock; with
//!   `recheck_after_acquire` it first checks that this is still in the
//!   future (antirez's elapsed-time check), otherwise it trusts the majority
//!   alone. Failing, it deletes its keys and may try again.
//! * A running holder leaves its critical section when its validity ends on
//!   its clock (checked at every tick). With `check_validity_before_write` a
//!   holder checks its clock before each write to the storage
//!   ([`RedlockAction::Check`] then [`RedlockAction::Write`]: two steps, as
//!   in real code, so a pause can fall between them).
//! * Time passes freely between a client's steps, so a slow network or a
//!   pause during acquisition needs no fault: that is what
//!   `recheck_after_acquire` is for. A failed client may try again
//!   `retries` times.
//! * Faults: `pauses` pauses of a holder (a GC pause after acquiring, or
//!   between the validity check and the write), `jumps` server clock jumps,
//!   `crashes` node crashes that lose all keys (no persistence). A crash is
//!   one step, crash and restart: a node that stays down grants nothing
//!   while down, so the immediate restart allows every grant a later one
//!   would (and, with `restart_delay`, its refusal ends earliest), and the
//!   checker need not explore the down time. With `restart_delay` the node
//!   refuses grants until its clock has advanced a TTL.
//!
//! ## Parameters
//! `nodes` (3 or 5), `clients` (2), `ttl` (4), `time_bound` (8), `cycles`
//! (1), `allowance` (0: ticks subtracted from the validity),
//! `drift_period` (0 = no drift), `fast_nodes` (0), `slow_clients` (0),
//! `client_clock` (`exact` | `drift` | `lag`), `jump` (2), `jumps` (0),
//! `crashes` (0), `restart_delay` (false), `pauses` (0), `retries` (1),
//! `recheck_after_acquire` (true),
//! `check_validity_before_write` (false), `tick_ms` (100).
//!
//! ## Results (BFS shortest counterexamples with the defaults, N = 3, TTL 4,
//! time bound 8, unless said; `tests.rs` and `examples/figures.rs`)
//! * no faults, and drift within the allowance (`drift_period=4`, all
//!   nodes fast, both clients slow, `allowance=2`): `mutual_exclusion`
//!   holds exhaustively within the bound; with `allowance=1` it breaks (12
//!   steps). This is antirez's argument, made precise for this model.
//! * one server clock jump of 2 ticks (Kleppmann): 11 steps; N = 5: 15.
//! * a crash and restart without persistence: 9 steps; N = 5: 13. With
//!   `restart_delay`: holds.
//! * no elapsed-time re-check: 12 steps (the client is slow between its
//!   last `SET` and counting the majority); `check_validity_before_write`
//!   then keeps the storage safe.
//! * a pause of the holder: 13 steps; with `check_validity_before_write`
//!   the stale write still happens when the pause falls between the check
//!   and the write (18 steps).
//!
//! The configuration of danwt/specl's `examples/showcase/redlock.tla`
//! (N = 2 and M = 1 there, i.e. 3 instances and 2 clients, TTL 3, MaxTime 8,
//! a client clock that lags true time) is
//! `nodes=3 clients=2 ttl=3 time_bound=8 client_clock=lag`. That spec lets a
//! holder keep the lock until it releases and checks validity with its
//! lagging clock; here the holder leaves when its own clock says the lease
//! ran out, so the lagging clock is what lets it overstay. BFS finds the
//! violation (a test in `tests.rs` pins its length; specl reports 15
//! steps for its own, finer-grained actions: explicit per-node expiry, a
//! `FailLock` step per refused node).
//!
//! ## Files
//! One concept per file, so that each can be read whole: this file has the
//! configuration, its parameters and how it reads clocks; `state.rs` the
//! state, its packing for hashing and the client-symmetry representative;
//! `action.rs` the steps; `step.rs` which steps a state enables and what
//! each does (stateright's `Model`); `explain.rs` what the runner and a
//! reader see (`LockModel`: parameters parsed, expected verdicts, facts,
//! step texts, the counterexample as a scenario); `tests.rs` the tests.
//! The types are re-exported here, so their paths (`redlock::RedlockState`
//! and the rest) are those of the single file this module was.

mod action;
mod explain;
mod state;
mod step;
#[cfg(test)]
mod tests;

pub use action::RedlockAction;
pub use state::{Client, Node, Phase, RedlockState, MAX_CLIENTS, MAX_NODES};

use crate::clock::Clock;
use crate::params::{self, ParamSpec};
use crate::properties;

/// How clients read time (`client_clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClock {
    /// True time.
    Exact,
    /// The first `slow_clients` clients lose a tick per `drift_period`: a bounded rate error, the
    /// case antirez's drift allowance is for.
    Drift,
    /// The clock advances only by explicit steps, never past true time: an arbitrarily slow clock,
    /// as in specl's Redlock example.
    Lag,
}

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct Redlock {
    /// Independent masters (3 or 5).
    pub nodes: u8,
    /// Clients competing for the lock.
    pub clients: u8,
    /// The lease (`PX`), in ticks.
    pub ttl: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Successful acquisitions per client.
    pub cycles: u8,
    /// Clock drift allowance in ticks, subtracted from the validity time.
    pub allowance: u8,
    /// Drifting clocks gain or lose one tick per this many ticks (0: no drift).
    pub drift_period: u8,
    /// How many nodes (from `redis-0`) have a fast clock.
    pub fast_nodes: u8,
    /// With `client_clock = drift`: how many clients (from `client-0`) have a slow clock.
    pub slow_clients: u8,
    /// How clients read time.
    pub client_clock: ClientClock,
    /// Size of a server clock jump, in ticks.
    pub jump: u8,
    /// How many forward server clock jumps the checker may use (Kleppmann's first scenario).
    pub jumps: u8,
    /// How many node crashes (keys lost: no persistence) the checker may use.
    pub crashes: u8,
    /// A restarted node refuses to grant for a TTL on its clock (antirez's delayed restart).
    pub restart_delay: bool,
    /// Stop-the-world pauses of a holder the checker may use.
    pub pauses: u8,
    /// Failed attempts a client may follow with another.
    pub retries: u8,
    /// After counting the majority, check that the elapsed time left some validity (antirez's
    /// answer to slow acquisitions).
    pub recheck_after_acquire: bool,
    /// Check the lease on the client's clock before each write: narrows the stale-write window, but
    /// a pause can still fall between check and write.
    pub check_validity_before_write: bool,
    /// DFS treats interchangeable clients as one (see `LockModel::symmetry`).
    pub symmetry: bool,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

pub use crate::key::Key;

pub use crate::properties::Storage;

impl Redlock {
    fn node_clock_shape(&self, n: usize) -> Clock {
        if (n as u8) < self.fast_nodes {
            Clock::drifting(1, self.drift_period)
        } else {
            Clock::EXACT
        }
    }

    fn client_clock_shape(&self, c: usize) -> Clock {
        if self.client_clock == ClientClock::Drift && (c as u8) < self.slow_clients {
            Clock::drifting(-1, self.drift_period)
        } else {
            Clock::EXACT
        }
    }

    fn node_clock(&self, s: &RedlockState, n: usize) -> u8 {
        self.node_clock_shape(n)
            .at(s.t, s.nodes[n].jumped as i16)
            .max(0) as u8
    }

    fn client_clock(&self, s: &RedlockState, c: usize) -> u8 {
        match self.client_clock {
            ClientClock::Lag => s.clients[c].clock,
            _ => self.client_clock_shape(c).at(s.t, 0).max(0) as u8,
        }
    }

    fn holding(c: &Client) -> bool {
        matches!(c.phase, Phase::Holding | Phase::Checked)
    }
}

properties::lock_state!(RedlockState, Redlock::holding);

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "nodes",
        default: "3",
        help: "independent masters: 3 or 5",
    },
    params::CLIENTS,
    ParamSpec {
        name: "ttl",
        default: "4",
        help: "lease length (PX) in ticks",
    },
    params::TIME_BOUND,
    ParamSpec {
        name: "cycles",
        default: "1",
        help: "successful acquisitions per client",
    },
    ParamSpec {
        name: "allowance",
        default: "0",
        help: "clock drift allowance in ticks, subtracted from the validity",
    },
    ParamSpec {
        name: "drift_period",
        default: "0",
        help: "drifting clocks gain/lose one tick per this many ticks (0 = no drift)",
    },
    ParamSpec {
        name: "fast_nodes",
        default: "0",
        help: "how many nodes (from redis-0) have a fast clock",
    },
    ParamSpec {
        name: "slow_clients",
        default: "0",
        help: "with client_clock=drift: how many clients (from client-0) have a slow clock",
    },
    ParamSpec {
        name: "client_clock",
        default: "exact",
        help: "exact | drift | lag (lag: advances only by explicit steps, never past true time)",
    },
    ParamSpec {
        name: "jump",
        default: "2",
        help: "size of a server clock jump in ticks",
    },
    ParamSpec {
        name: "jumps",
        default: "0",
        help: "how many forward server clock jumps may happen",
    },
    ParamSpec {
        name: "crashes",
        default: "0",
        help: "how many node crashes (keys lost: no persistence) may happen",
    },
    ParamSpec {
        name: "restart_delay",
        default: "false",
        help: "a restarted node refuses to grant for a TTL on its clock",
    },
    ParamSpec {
        name: "pauses",
        default: "0",
        help: "how many client pauses may happen",
    },
    ParamSpec {
        name: "retries",
        default: "1",
        help: "how many times a client may try again after a failed attempt",
    },
    ParamSpec {
        name: "recheck_after_acquire",
        default: "true",
        help: "after the majority, check that the elapsed time left some validity",
    },
    ParamSpec {
        name: "check_validity_before_write",
        default: "false",
        help: "check the lease on the client's clock before each write",
    },
    ParamSpec {
        name: "symmetry",
        default: "true",
        help: "DFS: treat clients with the same clock as interchangeable",
    },
    params::TICK_MS,
];
