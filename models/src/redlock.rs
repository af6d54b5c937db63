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
//! time bound 8, unless said; tests below and `examples/figures.rs`)
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
//! violation (the test below pins its length; specl reports 15 steps for its
//! own, finer-grained actions: explicit per-node expiry, a `FailLock` step
//! per refused node).

use crate::clock::Clock;
use crate::key;
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::runner::{needs_writes, LockModel, Path, PropInfo};
use crate::scenario::{fault_time, generated_note, pause_fault, Fault, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

/// Masters at most: Redlock is run over 3 or 5.
pub const MAX_NODES: usize = 5;
/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

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
    /// DFS treats interchangeable clients as one (see [`LockModel::symmetry`]).
    pub symmetry: bool,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

pub use crate::key::Key;

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

pub use crate::properties::Storage;

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

/// A step of the redlock model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedlockAction {
    /// True time advances one tick: keys expire on each node's clock, holders whose validity ran
    /// out on their clock leave.
    Tick,
    /// `SET lock c NX PX ttl` on the client's next node; from idle, note
    /// the clock first (start acquiring). Noting the clock and sending the
    /// first `SET` are one step: a delay between them only moves the start
    /// earlier, which shortens the validity, so every violation with such
    /// a delay also happens without it.
    Lock(u8),
    /// Count the majority (and re-check the elapsed time).
    Finish(u8),
    /// Check validity before a write.
    Check(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// Compare-and-delete on every node, and leave the critical section.
    Release(u8),
    /// A stop-the-world pause of the holder starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
    /// `client_clock=lag`: the client's clock advances one tick.
    ClockAdvance(u8),
    /// The node's clock jumps forward by `jump` ticks.
    ClockJump(u8),
    /// The node crashes and restarts at once, without its keys (no
    /// persistence); with `restart_delay` it then refuses grants for a TTL.
    Crash(u8),
}

const IDLE: Client = Client {
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

impl Redlock {
    fn majority(&self) -> u32 {
        self.nodes as u32 / 2 + 1
    }

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

    fn drop_expired(&self, s: &mut RedlockState) {
        for n in 0..self.nodes as usize {
            let now = self.node_clock(s, n);
            key::expire(&mut s.nodes[n].key, now);
            if s.nodes[n].refuse_until != 0 && now >= s.nodes[n].refuse_until {
                s.nodes[n].refuse_until = 0;
            }
        }
    }

    fn unlock_all(&self, s: &mut RedlockState, i: u8) {
        for n in 0..self.nodes as usize {
            key::release(&mut s.nodes[n].key, i);
        }
    }

    fn finish(&self, c: &mut Client) {
        let cycles = c.cycles + 1;
        *c = Client {
            phase: if cycles >= self.cycles {
                Phase::Done
            } else {
                Phase::Idle
            },
            cycles,
            clock: c.clock,
            ..IDLE
        };
    }

    fn holding(c: &Client) -> bool {
        matches!(c.phase, Phase::Holding | Phase::Checked)
    }
}

impl Model for Redlock {
    type State = RedlockState;
    type Action = RedlockAction;

    fn init_states(&self) -> Vec<RedlockState> {
        let node = Node {
            key: None,
            jumped: 0,
            refuse_until: 0,
        };
        vec![RedlockState {
            t: 0,
            nodes: [node; MAX_NODES],
            clients: [IDLE; MAX_CLIENTS],
            grants: 0,
            pauses: 0,
            jumps: 0,
            crashes: 0,
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &RedlockState, out: &mut Vec<RedlockAction>) {
        use RedlockAction::*;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            if self.client_clock == ClientClock::Lag && c.clock < s.t {
                out.push(ClockAdvance(i));
            }
            if c.paused {
                out.push(Resume(i));
                continue;
            }
            // Only holders pause: time already passes freely between the
            // steps of an acquisition (a slow network or a pause there
            // needs no fault), and a pause before acquiring only delays.
            let can_pause = s.pauses < self.pauses && Self::holding(c);
            match c.phase {
                Phase::Idle => out.push(Lock(i)),
                Phase::Acquiring if c.next < self.nodes => out.push(Lock(i)),
                Phase::Acquiring => out.push(Finish(i)),
                // A validity check only ends a holding early, and a write
                // only changes the storage: runs that do not look at the
                // storage leave both out.
                Phase::Holding => {
                    if needs_writes(self.property) {
                        if self.check_validity_before_write {
                            out.push(Check(i));
                        } else {
                            out.push(Write(i));
                        }
                    }
                    out.push(Release(i));
                }
                Phase::Checked => {
                    out.push(Write(i));
                    out.push(Release(i));
                }
                Phase::Done => {}
            }
            if can_pause {
                out.push(Pause(i));
            }
        }
        for n in 0..self.nodes {
            let node = &s.nodes[n as usize];
            // A jump matters only to a key or a refusal it shortens: keys set
            // later expire relative to the jumped clock. Jumping an idle
            // node changes nothing but the clock's reading, so skip it.
            if s.jumps < self.jumps && (node.key.is_some() || node.refuse_until > 0) {
                out.push(ClockJump(n));
            }
            // Crashing a node that holds no key only makes it refuse grants
            // (or changes nothing): it cannot break safety, so skip it.
            if s.crashes < self.crashes && node.key.is_some() {
                out.push(Crash(n));
            }
        }
        if s.t < self.time_bound {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &RedlockState, action: RedlockAction) -> Option<RedlockState> {
        use RedlockAction::*;
        let mut s = *last;
        match action {
            Tick => {
                s.t += 1;
                self.drop_expired(&mut s);
                for i in 0..self.clients as usize {
                    let now = self.client_clock(&s, i);
                    let c = &mut s.clients[i];
                    if Self::holding(c) && !c.paused && now >= c.valid_until {
                        self.finish(c); // validity ran out on its clock
                    }
                }
            }
            Lock(i) => {
                if s.clients[i as usize].phase == Phase::Idle {
                    let now = self.client_clock(&s, i as usize);
                    let c = &mut s.clients[i as usize];
                    c.phase = Phase::Acquiring;
                    c.start = now;
                    c.next = 0;
                    c.got = 0;
                }
                let n = s.clients[i as usize].next as usize;
                let now = self.node_clock(&s, n);
                let node = &mut s.nodes[n];
                if node.key.is_none() && node.refuse_until == 0 {
                    node.key = Some(Key {
                        holder: i,
                        expires: now + self.ttl,
                    });
                    s.clients[i as usize].got |= 1 << n;
                }
                s.clients[i as usize].next += 1;
            }
            Finish(i) => {
                let now = self.client_clock(&s, i as usize);
                let c = s.clients[i as usize];
                let valid_until = (c.start + self.ttl).saturating_sub(self.allowance);
                let majority = c.got.count_ones() >= self.majority();
                let in_time = !self.recheck_after_acquire || now < valid_until;
                if majority && in_time {
                    s.grants += 1;
                    let c = &mut s.clients[i as usize];
                    c.phase = Phase::Holding;
                    c.valid_until = valid_until;
                    c.grant = s.grants;
                } else {
                    self.unlock_all(&mut s, i);
                    let c = &mut s.clients[i as usize];
                    let attempts = c.attempts + 1;
                    *c = Client {
                        phase: if attempts > self.retries {
                            Phase::Done
                        } else {
                            Phase::Idle
                        },
                        cycles: c.cycles,
                        attempts,
                        clock: c.clock,
                        ..IDLE
                    };
                }
            }
            Check(i) => {
                let now = self.client_clock(&s, i as usize);
                let c = &mut s.clients[i as usize];
                if now < c.valid_until {
                    c.phase = Phase::Checked;
                } else {
                    self.finish(c);
                }
            }
            Write(i) => {
                let c = &mut s.clients[i as usize];
                if c.phase == Phase::Checked {
                    c.phase = Phase::Holding;
                }
                let g = c.grant;
                s.storage.accept(g, 0);
            }
            Release(i) => {
                self.unlock_all(&mut s, i);
                self.finish(&mut s.clients[i as usize]);
            }
            Pause(i) => {
                s.clients[i as usize].paused = true;
                s.pauses += 1;
            }
            Resume(i) => s.clients[i as usize].paused = false,
            ClockAdvance(i) => s.clients[i as usize].clock += 1,
            ClockJump(n) => {
                s.nodes[n as usize].jumped += self.jump;
                s.jumps += 1;
                self.drop_expired(&mut s);
            }
            Crash(n) => {
                let now = self.node_clock(&s, n as usize);
                let node = &mut s.nodes[n as usize];
                node.key = None;
                if self.restart_delay {
                    node.refuse_until = now + self.ttl;
                }
                s.crashes += 1;
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
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

/// Clients sorted by their state, key holders renamed to match: states
/// that differ only by which client is which get one representative.
fn representative(s: &RedlockState) -> RedlockState {
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

impl LockModel for Redlock {
    const NAME: &'static str = "redlock";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        let nodes = p.int("nodes", 3, MAX_NODES as u8)?;
        if nodes != 3 && nodes != 5 {
            return Err(ModelError::BadParam {
                model: "redlock".into(),
                name: "nodes".into(),
                value: nodes.to_string(),
                expected: "3 or 5".into(),
            });
        }
        let clients = p.clients(MAX_CLIENTS)?;
        Ok(Redlock {
            nodes,
            clients,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 3)?,
            allowance: p.int("allowance", 0, 50)?,
            drift_period: p.int("drift_period", 0, 100)?,
            fast_nodes: p.int("fast_nodes", 0, nodes)?,
            slow_clients: p.int("slow_clients", 0, clients)?,
            client_clock: [ClientClock::Exact, ClientClock::Drift, ClientClock::Lag]
                [p.choice("client_clock", &["exact", "drift", "lag"])?],
            jump: p.int("jump", 1, 50)?,
            jumps: p.int("jumps", 0, 3)?,
            crashes: p.int("crashes", 0, 3)?,
            restart_delay: p.bool("restart_delay")?,
            pauses: p.int("pauses", 0, 3)?,
            retries: p.int("retries", 0, 5)?,
            recheck_after_acquire: p.bool("recheck_after_acquire")?,
            check_validity_before_write: p.bool("check_validity_before_write")?,
            symmetry: p.bool("symmetry")?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT_PAUSED)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        use Expectation::*;
        if property == "handover" {
            return properties::handover_expected(self.clients, self.cycles);
        }
        if self.clients < 2 {
            return Holds;
        }
        let clock_breaks = self.drift_breaks()
            || (self.jumps > 0
                && self.jump > self.allowance
                && self.time_bound + self.jump >= self.ttl)
            || (self.crashes > 0 && !self.restart_delay)
            || (self.client_clock == ClientClock::Lag && self.time_bound >= self.ttl);
        let long_enough = self.time_bound >= self.ttl;
        let pause_holding = self.pauses > 0 && long_enough;
        // Without the re-check, a client slow between its last SET and
        // counting the majority holds keys that have already expired.
        let slow_acquire = !self.recheck_after_acquire && long_enough;
        let violated = match property {
            "mutual_exclusion" => clock_breaks || pause_holding || slow_acquire,
            _ => {
                clock_breaks || pause_holding || (slow_acquire && !self.check_validity_before_write)
            }
        };
        Expectation::violated_if(violated)
    }

    fn symmetry(&self) -> Option<fn(&RedlockState) -> RedlockState> {
        let same_clocks = self.client_clock != ClientClock::Drift
            || self.drift_period == 0
            || self.slow_clients == 0
            || self.slow_clients == self.clients;
        (self.symmetry && same_clocks)
            .then_some(representative as fn(&RedlockState) -> RedlockState)
    }

    fn facts(&self, s: &RedlockState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        for n in 0..self.nodes as usize {
            let node = &s.nodes[n];
            let v = {
                let key = key::fact(node.key);
                let refuse = if node.refuse_until > 0 {
                    format!(", refuses grants until {}", node.refuse_until)
                } else {
                    String::new()
                };
                format!("clock {}, {key}{refuse}", self.node_clock(s, n))
            };
            f.push((format!("redis-{n}"), v));
        }
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let clock = self.client_clock(s, i);
            let got: Vec<String> = (0..self.nodes)
                .filter(|n| c.got & (1 << n) != 0)
                .map(|n| n.to_string())
                .collect();
            let v = match c.phase {
                Phase::Idle => format!("idle, clock {clock}"),
                Phase::Done => format!("done, clock {clock}"),
                Phase::Acquiring => format!(
                    "acquiring since {} (own clock), next redis-{}, granted by [{}], clock {clock}",
                    c.start,
                    c.next,
                    got.join(",")
                ),
                Phase::Holding | Phase::Checked => format!(
                    "HOLDS lease #{} valid until {} on its clock{}, clock {clock}",
                    c.grant,
                    c.valid_until,
                    if c.phase == Phase::Checked {
                        " (checked, about to write)"
                    } else {
                        ""
                    }
                ),
            };
            let v = if c.paused { format!("{v}, PAUSED") } else { v };
            f.push((format!("client-{i}"), v));
        }
        f.extend(s.storage.fact());
        f
    }

    fn action_text(&self, s: &RedlockState, a: &RedlockAction) -> String {
        use RedlockAction::*;
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Lock(i) => {
                let idle = s.clients[i as usize].phase == Phase::Idle;
                let n = if idle { 0 } else { s.clients[i as usize].next };
                let ok = self
                    .next_state(s, *a)
                    .map(|s2| s2.clients[i as usize].got & (1 << n) != 0)
                    .unwrap_or(false);
                format!(
                    "client-{i}: {}SET lock client-{i} NX PX {} on redis-{n} -> {}",
                    if idle {
                        format!(
                            "starts at {} on its clock; ",
                            self.client_clock(s, i as usize)
                        )
                    } else {
                        String::new()
                    },
                    self.ttl,
                    if ok { "OK" } else { "refused" }
                )
            }
            Finish(i) => {
                let ok = self
                    .next_state(s, *a)
                    .map(|s2| Redlock::holding(&s2.clients[i as usize]))
                    .unwrap_or(false);
                let c = &s.clients[i as usize];
                format!(
                    "client-{i}: {} of {} nodes{} -> {}",
                    c.got.count_ones(),
                    self.nodes,
                    if self.recheck_after_acquire {
                        format!(
                            ", elapsed {} of validity {}",
                            self.client_clock(s, i as usize).saturating_sub(c.start),
                            self.ttl.saturating_sub(self.allowance)
                        )
                    } else {
                        String::new()
                    },
                    if ok {
                        "acquired"
                    } else {
                        "failed, unlocks its nodes"
                    }
                )
            }
            Check(i) => format!("client-{i} checks its validity before writing"),
            Write(i) => format!("client-{i} writes to the storage"),
            Release(i) => format!("client-{i} releases (compare-and-delete on every node)"),
            Pause(i) => format!("client-{i} pauses"),
            Resume(i) => format!("client-{i} resumes"),
            ClockAdvance(i) => format!("client-{i}'s clock advances one tick"),
            ClockJump(n) => format!("redis-{n}'s clock jumps forward by {} ticks", self.jump),
            Crash(n) => format!(
                "redis-{n} crashes and restarts without its keys (no persistence){}",
                if self.restart_delay {
                    format!(", refusing grants for {} ticks", self.ttl)
                } else {
                    String::new()
                }
            ),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        use RedlockAction::*;
        if self.client_clock == ClientClock::Lag {
            return Err("a client clock that stops has no scenario fault (a clock_drift of -1,000,000 ppm would freeze the client)".to_string());
        }
        if self.restart_delay {
            return Err(
                "the scenario contract has no setting for the delayed-restart rule".to_string(),
            );
        }
        if !self.recheck_after_acquire {
            return Err("the redlock lock kind re-checks the elapsed time after acquiring; the trace needs a client that does not".to_string());
        }
        let tick = self.tick_ms;
        let base =
            Scenario::counterexample(self, property, path, "redlock", self.ttl, self.clients);
        let mut faults = Vec::new();
        for n in 0..self.fast_nodes.min(self.nodes) {
            faults.push(Fault::ClockDrift {
                node: format!("redis-{n}"),
                at_ms: 0,
                ppm: self.node_clock_shape(n as usize).ppm(),
            });
        }
        if self.client_clock == ClientClock::Drift {
            for c in 0..self.slow_clients.min(self.clients) {
                faults.push(Fault::ClockDrift {
                    node: format!("client-{c}"),
                    at_ms: 0,
                    ppm: self.client_clock_shape(c as usize).ppm(),
                });
            }
        }
        for (i, (s, a)) in path.iter().enumerate() {
            match *a {
                Some(ClockJump(n)) => faults.push(Fault::ClockJump {
                    node: format!("redis-{n}"),
                    at_ms: fault_time(s.t as u32, tick),
                    by_ms: self.jump as i64 * tick as i64,
                }),
                Some(Crash(n)) => faults.push(Fault::Crash {
                    node: format!("redis-{n}"),
                    at_ms: fault_time(s.t as u32, tick),
                    // The model restarts at once; the simulator takes a moment.
                    restart_after_ms: tick / 10,
                }),
                Some(Pause(c)) => faults.push(pause_fault(self, &path[i..], Resume(c))),
                _ => {}
            }
        }
        let hold = (self.ttl.saturating_sub(self.allowance) as u64 * tick)
            .saturating_sub(tick / 2)
            .max(1);
        let mut notes = vec![generated_note(
            tick,
            &format!(
                " The lock's drift allowance in the model was {} ms; hold_ms stays inside the validity.",
                self.allowance as u64 * tick
            ),
        )];
        let split = path.iter().any(|(s, a)| {
            matches!(a, Some(Lock(i)) if {
                let c = &s.clients[*i as usize];
                let n = if c.phase == Phase::Idle { 0 } else { c.next as usize };
                matches!(s.nodes[n].key, Some(k) if k.holder != *i)
            })
        });
        if split {
            notes.push("The trace needs the two clients' first acquisitions to interleave (one client gets some nodes first, the other gets a bare majority): the simulator reaches that ordering on some seeds only, so run it with --seeds.".to_string());
        }
        Ok(Scenario {
            name: format!("model-redlock-{}-{}", self.nodes, property.replace('_', "-")),
            about: format!(
                "From the redlock model ({} steps): Redlock over {} masters with a {} ms lease; two clients hold a majority at once.",
                path.len() - 1,
                self.nodes,
                base.ttl_ms
            ),
            notes,
            masters: self.nodes as u32,
            cycles: self.cycles as u32,
            hold_ms: (hold, hold),
            faults,
            ..base
        })
    }
}

impl Redlock {
    /// Whether the configured drift beats the allowance: some lease whose
    /// key on a fast node expires (true time) before the holder's validity
    /// ends on its (possibly slow) clock, within the time bound. A second
    /// client then gets the majority: the nodes the first did not get plus
    /// the expired one (the first can end up with exactly a majority).
    fn drift_breaks(&self) -> bool {
        if self.drift_period == 0 || (self.fast_nodes == 0 && self.slow_clients == 0) {
            return false;
        }
        let node = if self.fast_nodes > 0 {
            self.node_clock_shape(0)
        } else {
            Clock::EXACT
        };
        let client = if self.client_clock == ClientClock::Drift && self.slow_clients > 0 {
            self.client_clock_shape(0)
        } else {
            Clock::EXACT
        };
        let first = |f: &dyn Fn(u8) -> bool| (0..=u8::MAX).find(|&t| f(t)).unwrap_or(u8::MAX);
        (0..=self.time_bound).any(|s0| {
            let expiry = first(&|t| node.at(t, 0) >= node.at(s0, 0) + self.ttl as i16);
            let exit = first(&|t| {
                client.at(t, 0) >= client.at(s0, 0) + self.ttl as i16 - self.allowance as i16
            });
            expiry < exit && expiry <= self.time_bound
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Finding;
    use crate::test_util::{self, actions};
    use crate::{ModelReport, Strategy};

    /// Exhaustive proofs in the default (debug) test run use a smaller
    /// configuration than the model's defaults; `examples/figures.rs` runs
    /// the defaults in release.
    const SMALL: [(&str, &str); 3] = [("ttl", "3"), ("time_bound", "5"), ("retries", "0")];

    fn check(property: &str, params: &[(&str, &str)], strategy: Strategy) -> ModelReport {
        let small = if strategy == Strategy::Dfs {
            &SMALL[..]
        } else {
            &[]
        };
        let all: Vec<(&str, &str)> = small.iter().chain(params).copied().collect();
        test_util::check("redlock", property, &all, strategy)
    }

    fn holds(r: &ModelReport) -> usize {
        match r.outcome {
            Finding::Holds { unique_states, .. } => unique_states,
            _ => panic!("{}", r.to_text()),
        }
    }

    #[test]
    fn no_faults_holds_and_hands_over() {
        let r = check("mutual_exclusion", &[], Strategy::Dfs);
        assert!(holds(&r) > 5_000);
        check("handover", &[], Strategy::Bfs);
    }

    #[test]
    fn drift_within_the_allowance_holds() {
        let p = [
            ("drift_period", "4"),
            ("fast_nodes", "3"),
            ("client_clock", "drift"),
            ("slow_clients", "2"),
            ("allowance", "2"),
        ];
        let r = check("mutual_exclusion", &p, Strategy::Dfs);
        holds(&r);
    }

    #[test]
    fn drift_beyond_the_allowance_breaks() {
        let p = [
            ("drift_period", "4"),
            ("fast_nodes", "3"),
            ("client_clock", "drift"),
            ("slow_clients", "2"),
            ("allowance", "0"),
        ];
        let r = check("mutual_exclusion", &p, Strategy::Bfs);
        assert!(r.trace().is_some());
        let toml = r.to_scenario_toml().unwrap();
        assert!(
            toml.contains("kind = \"clock_drift\"\nnode = \"redis-0\"\nat_ms = 0\nppm = 250000"),
            "{toml}"
        );
    }

    #[test]
    fn a_clock_jump_breaks_it() {
        let r = check("mutual_exclusion", &[("jumps", "1")], Strategy::Bfs);
        // Kleppmann's example: client-0 holds redis-0 and redis-1, redis-1's
        // clock jumps, its key expires, and client-1 gets redis-1 and
        // redis-2 while client-0 (which got only a majority) still holds.
        assert_eq!(
            actions(&r),
            [
                "client-0: starts at 0 on its clock; SET lock client-0 NX PX 4 on redis-0 -> OK",
                "client-0: SET lock client-0 NX PX 4 on redis-1 -> OK",
                "client-1: starts at 0 on its clock; SET lock client-1 NX PX 4 on redis-0 -> refused",
                "redis-1's clock jumps forward by 2 ticks",
                "tick: true time 0 -> 1",
                "tick: true time 1 -> 2",
                "client-1: SET lock client-1 NX PX 4 on redis-1 -> OK",
                "client-1: SET lock client-1 NX PX 4 on redis-2 -> OK",
                "client-0: SET lock client-0 NX PX 4 on redis-2 -> refused",
                "client-0: 2 of 3 nodes, elapsed 2 of validity 4 -> acquired",
                "client-1: 2 of 3 nodes, elapsed 2 of validity 4 -> acquired",
            ]
        );
        let toml = r.to_scenario_toml().unwrap();
        assert!(toml.contains("kind = \"clock_jump\""));
    }

    #[test]
    fn restart_without_persistence_breaks_it_and_the_delay_fixes_it() {
        let r = check("mutual_exclusion", &[("crashes", "1")], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a.len(), 9, "{a:?}");
        assert!(a.iter().any(|a| a.contains("crashes")), "{a:?}");
        assert!(r.to_scenario_toml().unwrap().contains("kind = \"crash\""));
        let r = check(
            "mutual_exclusion",
            &[("crashes", "1"), ("restart_delay", "true")],
            Strategy::Dfs,
        );
        holds(&r);
    }

    #[test]
    fn without_the_recheck_a_slow_acquisition_breaks_it() {
        let p = [("recheck_after_acquire", "false")];
        let r = check("mutual_exclusion", &p, Strategy::Bfs);
        let a = actions(&r);
        assert!(
            a.iter()
                .any(|a| a.starts_with("client-0: 3 of 3 nodes -> acquired")),
            "{a:?}"
        );
        assert!(r.to_scenario_toml().is_none());
        // Checking validity before writing keeps that holder from writing.
        let p = [
            ("recheck_after_acquire", "false"),
            ("check_validity_before_write", "true"),
        ];
        holds(&check("no_stale_write", &p, Strategy::Dfs));
    }

    #[test]
    fn a_pause_between_check_and_write_still_writes_stale() {
        let p = [
            ("pauses", "1"),
            ("check_validity_before_write", "true"),
            ("ttl", "3"),
            ("time_bound", "5"),
            ("retries", "0"),
        ];
        let r = check("no_stale_write", &p, Strategy::Bfs);
        let a = actions(&r);
        let check_at = a
            .iter()
            .position(|x| x == "client-0 checks its validity before writing")
            .expect("client-0 checks");
        assert_eq!(a[check_at + 1], "client-0 pauses", "{a:?}");
        assert_eq!(a.last().unwrap(), "client-0 writes to the storage");
    }

    #[test]
    fn specl_redlock_configuration_is_violated() {
        let p = [
            ("nodes", "3"),
            ("clients", "2"),
            ("ttl", "3"),
            ("time_bound", "8"),
            ("client_clock", "lag"),
        ];
        let r = check("mutual_exclusion", &p, Strategy::Bfs);
        // specl's TLA+ spec reports 15 steps with its finer-grained actions
        // (separate StartAcquire, ExpireLock and FailLock steps).
        let a = actions(&r);
        assert_eq!(a.len(), 11, "{a:?}");
        assert!(
            !a.iter().any(|a| a.contains("client-0's clock advances")),
            "{a:?}"
        );
        assert!(r.to_scenario_toml().is_none());
    }
}
