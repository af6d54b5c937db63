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
//! ## Results (BFS shortest counterexamples; tests below)
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

use crate::key;
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::runner::{needs_writes, LockModel, Path, PropInfo};
use crate::scenario::{failover_lag, fault_time, generated_note, Fault, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;
/// Replicas per master at most: `WAIT 1` with two replicas is what lets the failover promote the
/// one that did not acknowledge.
pub const MAX_REPLICAS: usize = 2;
const NODES: usize = MAX_REPLICAS + 1;

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

pub use crate::properties::Storage;

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

/// A step of the failover model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailoverAction {
    /// True time advances one tick: keys expire on each node's clock, holders whose lease ran out
    /// leave.
    Tick,
    /// `SET lock c NX PX ttl` on the current master.
    Acquire(u8),
    /// `WAIT` returns with enough acknowledgements.
    WaitOk(u8),
    /// `WAIT` returns at its timeout short of acknowledgements.
    WaitTimeout(u8),
    /// `WAIT` fails: the master it was sent to died.
    WaitError(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// Compare-and-delete on the current master, and leave the critical section.
    Release(u8),
    /// The next log entry reaches replica node `n`.
    Replicate(u8),
    /// The master dies; node `n` is promoted.
    Failover(u8),
    /// The dead old master restarts empty and rejoins as a replica of the
    /// new master (full resync), as Sentinel reconfigures it.
    Rejoin(u8),
}

const IDLE: Client = Client {
    phase: Phase::Idle,
    cycles: 0,
    acquired_at: 0,
    master: 0,
    acks: 0,
    grant: 0,
};

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

    fn drop_expired(&self, s: &mut FailoverState) {
        for n in 0..self.nodes() {
            let now = self.clock(s, n);
            key::expire(&mut s.nodes[n].key, now);
        }
    }

    /// The master writes `op`: it becomes every live replica's pending
    /// write. Collapsing a replica's backlog to its last write drops only
    /// states in which a replica briefly holds the key of a client that has
    /// already released it or given up, which can only block other clients.
    fn append(&self, s: &mut FailoverState, op: Op) {
        let m = s.master as usize;
        for n in 0..self.nodes() {
            if n != m && s.nodes[n].up {
                s.nodes[n].pending = Some(op);
            }
        }
    }

    fn finish(&self, c: &mut Client) {
        c.cycles += 1;
        *c = Client {
            phase: if c.cycles >= self.cycles {
                Phase::Done
            } else {
                Phase::Idle
            },
            cycles: c.cycles,
            ..IDLE
        };
    }

    /// After `WAIT`: hold the lock, unless the lease already ran out on the
    /// client's clock while it waited.
    fn proceed(&self, s: &mut FailoverState, i: u8) {
        if s.t >= s.clients[i as usize].acquired_at + self.ttl {
            let c = &mut s.clients[i as usize];
            *c = Client {
                cycles: c.cycles,
                ..IDLE
            };
        } else {
            s.clients[i as usize].phase = Phase::Holding;
        }
    }

    fn release_key(&self, s: &mut FailoverState, i: u8) {
        let m = s.master as usize;
        if key::release(&mut s.nodes[m].key, i) {
            self.append(s, Op::Del);
        }
    }
}

impl Model for Failover {
    type State = FailoverState;
    type Action = FailoverAction;

    fn init_states(&self) -> Vec<FailoverState> {
        let node = Node {
            up: true,
            key: None,
            pending: None,
        };
        let mut nodes = [node; NODES];
        for n in nodes.iter_mut().skip(self.nodes()) {
            n.up = false;
        }
        vec![FailoverState {
            t: 0,
            master: 0,
            failed_over: false,
            nodes,
            grants: 0,
            clients: [IDLE; MAX_CLIENTS],
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &FailoverState, out: &mut Vec<FailoverAction>) {
        use FailoverAction::*;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            match c.phase {
                Phase::Idle => out.push(Acquire(i)),
                Phase::Waiting => {
                    if c.master != s.master {
                        // The master it wrote to died (it may have rejoined
                        // since, as a replica): the connection is gone.
                        out.push(WaitError(i));
                    } else if c.acks.count_ones() >= self.wait as u32 {
                        out.push(WaitOk(i));
                    } else if s.t >= c.acquired_at + self.wait_timeout {
                        out.push(WaitTimeout(i));
                    }
                }
                Phase::Holding => {
                    if needs_writes(self.property) {
                        out.push(Write(i));
                    }
                    out.push(Release(i));
                }
                Phase::Done => {}
            }
        }
        let m = s.master as usize;
        for n in 0..self.nodes() {
            if n != m && s.nodes[n].up && s.nodes[n].pending.is_some() {
                out.push(Replicate(n as u8));
            }
        }
        if !s.failed_over {
            for n in 0..self.nodes() {
                if n != m && s.nodes[n].up {
                    out.push(Failover(n as u8));
                }
            }
        }
        for n in 0..self.nodes() {
            if s.failed_over && !s.nodes[n].up {
                out.push(Rejoin(n as u8));
            }
        }
        // WAIT returns by its timeout: time cannot pass a waiting client's deadline.
        let wait_due = s.clients[..self.clients as usize]
            .iter()
            .any(|c| c.phase == Phase::Waiting && s.t >= c.acquired_at + self.wait_timeout);
        if s.t < self.time_bound && !wait_due {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &FailoverState, action: FailoverAction) -> Option<FailoverState> {
        use FailoverAction::*;
        let mut s = *last;
        let m = s.master as usize;
        match action {
            Tick => {
                s.t += 1;
                self.drop_expired(&mut s);
                for c in s.clients.iter_mut().take(self.clients as usize) {
                    if c.phase == Phase::Holding && s.t >= c.acquired_at + self.ttl {
                        self.finish(c); // the lease ran out on the client's clock
                    }
                }
            }
            Acquire(i) => {
                if s.nodes[m].key.is_some() {
                    return None;
                }
                let key = Key {
                    holder: i,
                    expires: self.clock(&s, m) + self.ttl,
                };
                s.nodes[m].key = Some(key);
                self.append(&mut s, Op::Set(key));
                s.grants += 1;
                let c = &mut s.clients[i as usize];
                c.acquired_at = s.t;
                c.master = m as u8;
                c.acks = 0;
                c.grant = s.grants;
                c.phase = if self.wait > 0 {
                    Phase::Waiting
                } else {
                    Phase::Holding
                };
            }
            WaitOk(i) => self.proceed(&mut s, i),
            WaitTimeout(i) => {
                if self.proceed_on_timeout {
                    self.proceed(&mut s, i);
                } else {
                    // Give up: release, and try again later.
                    self.release_key(&mut s, i);
                    let c = &mut s.clients[i as usize];
                    *c = Client {
                        cycles: c.cycles,
                        ..IDLE
                    };
                }
            }
            WaitError(i) => {
                let c = &mut s.clients[i as usize];
                *c = Client {
                    cycles: c.cycles,
                    ..IDLE
                };
            }
            Write(i) => {
                let g = s.clients[i as usize].grant;
                s.storage.accept(g, 0);
            }
            Release(i) => {
                self.release_key(&mut s, i);
                self.finish(&mut s.clients[i as usize]);
            }
            Replicate(n) => {
                let n = n as usize;
                let op = s.nodes[n].pending.take().expect("pending write");
                match op {
                    Op::Set(k) => {
                        s.nodes[n].key = Some(k);
                        let c = &mut s.clients[k.holder as usize];
                        if c.phase == Phase::Waiting && c.master as usize == m {
                            c.acks |= 1 << n;
                        }
                    }
                    Op::Del => s.nodes[n].key = None,
                }
                self.drop_expired(&mut s);
            }
            Failover(n) => {
                let n = n as usize;
                s.failed_over = true;
                s.nodes[m] = Node {
                    up: false,
                    key: None,
                    pending: None,
                };
                s.master = n as u8;
                s.nodes[n].pending = None; // what had not arrived is lost
                let key = s.nodes[n].key;
                for r in 0..self.nodes() {
                    if r != n && s.nodes[r].up {
                        // The other replicas resync from the new master.
                        s.nodes[r].key = key;
                        s.nodes[r].pending = None;
                    }
                }
                self.drop_expired(&mut s);
            }
            Rejoin(n) => {
                let key = s.nodes[m].key;
                s.nodes[n as usize] = Node {
                    up: true,
                    key,
                    pending: None,
                };
                self.drop_expired(&mut s);
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
}

properties::lock_state!(FailoverState, |c: &Client| c.phase == Phase::Holding);

fn node_name(n: usize) -> String {
    if n == 0 {
        "redis-0".to_string()
    } else {
        format!("redis-0-replica-{}", n - 1)
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

impl LockModel for Failover {
    const NAME: &'static str = "failover";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        let replicas = p.int("replicas", 1, MAX_REPLICAS as u8)?;
        Ok(Failover {
            clients: p.clients(MAX_CLIENTS)?,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 2)?,
            replicas,
            wait: p.int("wait", 0, replicas)?,
            wait_timeout: p.int("wait_timeout", 1, 50)?,
            proceed_on_timeout: p.choice("on_wait_timeout", &["proceed", "give-up"])? == 0,
            replica_skew: p.int("replica_skew", 0, 50)?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        if property == "handover" {
            return properties::handover_expected(self.clients, self.cycles);
        }
        if self.clients < 2 {
            return Expectation::Holds;
        }
        let breaks = if self.wait == 0 {
            true
        } else {
            let timeout = self.proceed_on_timeout && self.wait_timeout < self.ttl;
            let other_replica = self.wait < self.replicas;
            let skew = self.replica_skew > 0 && self.time_bound + self.replica_skew >= self.ttl;
            timeout || other_replica || skew
        };
        Expectation::violated_if(breaks)
    }

    fn facts(&self, s: &FailoverState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        for n in 0..self.nodes() {
            let node = &s.nodes[n];
            let role = if !node.up {
                "DOWN".to_string()
            } else if n == s.master as usize {
                "master".to_string()
            } else {
                match node.pending {
                    None => "replica, up to date".to_string(),
                    Some(Op::Del) => "replica, DEL not yet applied".to_string(),
                    Some(Op::Set(k)) => format!("replica, SET client-{} not yet applied", k.holder),
                }
            };
            let key = key::fact(node.key);
            f.push((
                node_name(n),
                if node.up {
                    format!("{role}, clock {}, {key}", self.clock(s, n))
                } else {
                    role
                },
            ));
        }
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let v = match c.phase {
                Phase::Idle => "idle".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Waiting => format!(
                    "in WAIT on {} ({} acks)",
                    node_name(c.master as usize),
                    c.acks.count_ones()
                ),
                Phase::Holding => format!(
                    "HOLDS lease #{} valid until {}",
                    c.grant,
                    c.acquired_at + self.ttl
                ),
            };
            f.push((format!("client-{i}"), v));
        }
        f.extend(s.storage.fact());
        f
    }

    fn action_text(&self, s: &FailoverState, a: &FailoverAction) -> String {
        use FailoverAction::*;
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Acquire(i) => format!(
                "client-{i}: SET lock client-{i} NX PX {} on {} (master) -> OK",
                self.ttl,
                node_name(s.master as usize)
            ),
            WaitOk(i) => format!("client-{i}: WAIT {} -> enough acks, proceeds", self.wait),
            WaitTimeout(i) => format!(
                "client-{i}: WAIT {} {} times out with {} acks -> {}",
                self.wait,
                self.wait_timeout,
                s.clients[i as usize].acks.count_ones(),
                if self.proceed_on_timeout {
                    "proceeds anyway"
                } else {
                    "gives up and releases"
                }
            ),
            WaitError(i) => format!("client-{i}: WAIT fails (connection to the dead master)"),
            Write(i) => format!("client-{i} writes to the storage"),
            Release(i) => format!("client-{i} releases (compare-and-delete)"),
            Replicate(n) => format!(
                "replication: {} applies the next write from the master",
                node_name(n as usize)
            ),
            Failover(n) => format!(
                "failover: {} dies, {} is promoted",
                node_name(s.master as usize),
                node_name(n as usize)
            ),
            Rejoin(n) => format!(
                "{} restarts empty and resyncs as a replica of {}",
                node_name(n as usize),
                node_name(s.master as usize)
            ),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let tick = self.tick_ms;
        let base =
            Scenario::counterexample(self, property, path, "set-nx-px", self.ttl, self.clients);
        let mut faults = Vec::new();
        let mut replicated = false;
        let mut lag = base.replication_lag_ms;
        for (s, a) in path {
            match a {
                Some(FailoverAction::Replicate(_)) => replicated = true,
                Some(FailoverAction::Failover(n)) => {
                    if *n != 1 {
                        return Err(format!(
                            "the trace promotes {}; the scenario's failover promotes the master's replica without a choice",
                            node_name(*n as usize)
                        ));
                    }
                    let at = fault_time(s.t as u32, tick);
                    let caught_up = (0..self.nodes())
                        .filter(|&r| r != s.master as usize && s.nodes[r].up)
                        .all(|r| s.nodes[r].pending.is_none());
                    lag = failover_lag(lag, replicated, caught_up, at, tick)?;
                    faults.push(Fault::Failover { at_ms: at });
                }
                _ => {}
            }
        }
        let mut notes = vec![generated_note(
            tick,
            " hold_ms is shorter than the lease so only the failover breaks the lock.",
        )];
        if self.wait > 0 {
            notes.push(format!(
                "The model's client ran WAIT {} {} ms after SET ({}); the set-nx-px lock kind does not WAIT. The trace does not depend on it: {}.",
                self.wait,
                self.wait_timeout as u64 * tick,
                if self.proceed_on_timeout { "proceeding on timeout" } else { "giving up on timeout" },
                if self.proceed_on_timeout && !replicated { "WAIT timed out with no acks and the client went on" } else { "the replica had the key, and its clock ran ahead" }
            ));
        }
        if self.replica_skew > 0 {
            for r in 0..self.replicas as usize {
                faults.push(Fault::ClockJump {
                    node: node_name(r + 1),
                    at_ms: 0,
                    by_ms: self.replica_skew as i64 * tick as i64,
                });
            }
        }
        Ok(Scenario {
            about: format!(
                "From the failover model ({} steps): the master grants a {} ms lease and dies; the promoted replica {} and a second client acquires while the first still holds.",
                path.len() - 1,
                base.ttl_ms,
                if self.replica_skew > 0 && replicated {
                    "has the key but its clock runs ahead, so the key expires early,"
                } else {
                    "never received the key,"
                }
            ),
            notes,
            replicas: self.replicas as u32,
            replication_lag_ms: lag,
            failover_detect_ms: tick / 5,
            cycles: self.cycles as u32,
            faults,
            ..base
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Finding;
    use crate::test_util::{self, actions};
    use crate::{ModelReport, Strategy};

    fn check(property: &str, params: &[(&str, &str)], strategy: Strategy) -> ModelReport {
        test_util::check("failover", property, params, strategy)
    }

    #[test]
    fn failover_before_replication_loses_the_lock() {
        let r = check("mutual_exclusion", &[], Strategy::Bfs);
        assert_eq!(
            actions(&r),
            [
                "client-0: SET lock client-0 NX PX 3 on redis-0 (master) -> OK",
                "failover: redis-0 dies, redis-0-replica-0 is promoted",
                "client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK",
            ]
        );
        let v: toml::Value = toml::from_str(&r.to_scenario_toml().unwrap()).unwrap();
        assert_eq!(v["redis"]["replicas"].as_integer(), Some(1));
        assert_eq!(v["faults"][0]["kind"].as_str(), Some("failover"));
        assert_eq!(v["faults"][0]["at_ms"].as_integer(), Some(50));
        // The write must not reach the replica before the failover.
        assert_eq!(v["redis"]["replication_lag_ms"][0].as_integer(), Some(150));
    }

    #[test]
    fn wait_that_times_out_and_proceeds_does_not_help() {
        let r = check("mutual_exclusion", &[("wait", "1")], Strategy::Bfs);
        assert_eq!(
            actions(&r),
            [
                "client-0: SET lock client-0 NX PX 3 on redis-0 (master) -> OK",
                "tick: true time 0 -> 1",
                "client-0: WAIT 1 1 times out with 0 acks -> proceeds anyway",
                "failover: redis-0 dies, redis-0-replica-0 is promoted",
                "client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK",
                "tick: true time 1 -> 2",
                "client-1: WAIT 1 1 times out with 0 acks -> proceeds anyway",
            ]
        );
        assert!(r.to_scenario_toml().is_some());
    }

    #[test]
    fn wait_for_one_of_two_replicas_promotes_the_other() {
        let p = [
            ("wait", "1"),
            ("replicas", "2"),
            ("on_wait_timeout", "give-up"),
        ];
        let r = check("mutual_exclusion", &p, Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a.len(), 7, "{a:?}");
        assert!(a[1].starts_with("replication: redis-0-replica-"), "{a:?}");
        assert_eq!(a[2], "client-0: WAIT 1 -> enough acks, proceeds");
        assert!(a[3].starts_with("failover: redis-0 dies"));
        let acked = a[1].split_whitespace().nth(1).unwrap();
        let promoted = a[3].split_whitespace().nth(4).unwrap();
        assert_ne!(
            acked, promoted,
            "the promoted replica is not the one that acked: {a:?}"
        );
    }

    #[test]
    fn skewed_replica_clock_expires_an_acknowledged_key_early() {
        let p = [
            ("wait", "1"),
            ("on_wait_timeout", "give-up"),
            ("replica_skew", "2"),
        ];
        let r = check("mutual_exclusion", &p, Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(
            a[1],
            "replication: redis-0-replica-0 applies the next write from the master"
        );
        assert!(
            a.contains(
                &"client-1: SET lock client-1 NX PX 3 on redis-0-replica-0 (master) -> OK"
                    .to_string()
            ),
            "{a:?}"
        );
        let toml = r.to_scenario_toml().unwrap();
        assert!(
            toml.contains(
                "kind = \"clock_jump\"\nnode = \"redis-0-replica-0\"\nat_ms = 0\nby_ms = 200"
            ),
            "{toml}"
        );
    }

    #[test]
    fn strict_wait_on_every_replica_holds_within_the_bound() {
        let p = [("wait", "1"), ("on_wait_timeout", "give-up")];
        let r = check("mutual_exclusion", &p, Strategy::Dfs);
        assert!(matches!(r.outcome, Finding::Holds { .. }));
        let r = check("no_stale_write", &p, Strategy::Dfs);
        assert!(matches!(r.outcome, Finding::Holds { .. }));
        check("handover", &p, Strategy::Bfs);
    }

    #[test]
    fn stale_write_after_failover() {
        let r = check("no_stale_write", &[], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a.len(), 5, "{a:?}");
        assert_eq!(a[3], "client-1 writes to the storage");
        assert_eq!(a[4], "client-0 writes to the storage");
    }
}
