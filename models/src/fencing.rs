//! # `fencing`: fencing tokens from a replicated counter
//!
//! Kleppmann ("How to do distributed locking"): "every time the lock server
//! grants a lock, it also returns a fencing token, which is a number that
//! increases every time a lock is granted"; the storage remembers the
//! highest token it has processed and rejects writes with a lower one. That
//! protects the storage from a holder that paused past its lease (the
//! remaining flaw of the "Is the Redis lock perfect?" article) whatever the lock does, *provided the tokens
//! really increase*. A Redis lock that makes its token with `INCR` on the
//! same master as the `SET` breaks that proviso in a failover: the counter
//! replicates asynchronously like the key, the promoted replica's counter
//! is behind, and it hands out a token that was already used (or a lower
//! one). The storage then accepts the old holder's write after the new
//! holder's, as the measurement in docs/design.md says ("adding failover to a
//! lagging replica broke it").
//!
//! ## The model
//! * A master and one replica. The acquire script does `SET lock c NX PX
//!   ttl` and `INCR token` atomically; its effect reaches the replica as one
//!   `MULTI/EXEC`, asynchronously ([`FencingAction::Replicate`]); a
//!   replica's backlog collapses to the newest snapshot of the two keys.
//! * With `failover`, the master may die once and the replica is promoted
//!   with what it has.
//! * Holders write with their token; with `storage_check` the storage
//!   rejects a token lower than the highest it accepted (equal is accepted,
//!   as a holder writes more than once). A running holder leaves when its
//!   lease runs out on its clock (true time); up to `pauses` pauses stop a
//!   holder from noticing.
//!
//! ## Properties
//! `no_stale_write` (default), `tokens_increase` (every new lease gets a
//! token above every earlier lease's), `mutual_exclusion`, `handover`.
//!
//! ## Results (tests below)
//! * no failover: `no_stale_write` and `tokens_increase` hold exhaustively
//!   within the bound, with pauses (`mutual_exclusion` does not: fencing
//!   protects the storage, not the critical section);
//! * `failover`: `tokens_increase` breaks in 3 steps and `no_stale_write`
//!   in 5 (acquire with token 1, failover, the other client gets token 1
//!   again, it writes, the first writes: accepted, as 1 is not lower than 1);
//! * `storage_check=false`: a pause gives the stale write (9 steps).
//!
//! ## Parameters
//! `clients` (2), `ttl` (3), `time_bound` (8), `pauses` (1), `failover`
//! (false), `storage_check` (true), `tick_ms` (100).

use crate::counterexample::pause_fault;
use crate::key;
use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::{Expectation, PropertyKind};
use crate::runner::needs_writes;
use crate::scenario::{failover_lag, fault_time, Fault, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct Fencing {
    /// Clients competing for the lock, one lease each.
    pub clients: u8,
    /// The lease (`PX`), in ticks.
    pub ttl: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Stop-the-world pauses of a holder the checker may use.
    pub pauses: u8,
    /// The master may die once and its lagging replica be promoted: what sends the token counter
    /// back.
    pub failover: bool,
    /// The storage rejects a token lower than the highest it accepted (Kleppmann's check).
    pub storage_check: bool,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

pub use crate::key::Key;

/// A node's two keys: the lock and the token counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Data {
    /// The lock key, if set.
    pub key: Option<Key>,
    /// The `INCR` counter the fencing tokens come from.
    pub counter: u8,
}

/// Where a client is in its one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not holding; may acquire.
    Idle,
    /// Between a successful acquire and release (or the lease running out on its clock).
    Holding,
    /// Its lease is over.
    Done,
}

/// One client of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is in its lease.
    pub phase: Phase,
    /// Stopped (GC): it notices nothing, not even that its lease ran out.
    pub paused: bool,
    /// Lease end on the client's clock (true time).
    pub valid_until: u8,
    /// The fencing token its acquire returned; its writes carry it.
    pub token: u8,
    /// Ghost: which grant this lease is.
    pub grant: u8,
}

pub use crate::properties::Storage;

/// A state of the fencing model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FencingState {
    /// True time (ticks).
    pub t: u8,
    /// The master's data (after a failover: the promoted replica's).
    pub master: Data,
    /// The replica's data, as far as replication has carried it.
    pub replica: Data,
    /// The master's newest write not yet applied on the replica.
    pub pending: Option<Data>,
    /// The one failover has happened.
    pub failed_over: bool,
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// Leases granted so far (true order, ghost state).
    pub grants: u8,
    /// Ghost: the highest token ever handed out.
    pub max_issued: u8,
    /// Ghost: a lease got a token not above an earlier lease's.
    pub token_reused: bool,
    /// Pauses used so far.
    pub pauses: u8,
    /// The protected storage.
    pub storage: Storage,
}

/// A step of the fencing model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FencingAction {
    /// True time advances one tick: keys expire, running holders whose lease ran out leave.
    Tick,
    /// `SET lock c NX PX ttl` + `INCR token`.
    Acquire(u8),
    /// The holder writes to the storage with its token.
    Write(u8),
    /// Compare-and-delete, and leave the critical section.
    Release(u8),
    /// A stop-the-world pause of the holder starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
    /// The replica applies the master's newest write (the lock key and the counter together).
    Replicate,
    /// The master dies; the replica is promoted.
    Failover,
}

const IDLE: Client = Client {
    phase: Phase::Idle,
    paused: false,
    valid_until: 0,
    token: 0,
    grant: 0,
};

impl Fencing {
    fn done(c: &mut Client) {
        *c = Client {
            phase: Phase::Done,
            ..IDLE
        };
    }

    fn wrote(&self, s: &mut FencingState) {
        if !s.failed_over {
            s.pending = Some(s.master);
        }
    }
}

impl Model for Fencing {
    type State = FencingState;
    type Action = FencingAction;

    fn init_states(&self) -> Vec<FencingState> {
        vec![FencingState {
            t: 0,
            master: Data::default(),
            replica: Data::default(),
            pending: None,
            failed_over: false,
            clients: [IDLE; MAX_CLIENTS],
            grants: 0,
            max_issued: 0,
            token_reused: false,
            pauses: 0,
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &FencingState, out: &mut Vec<FencingAction>) {
        use FencingAction::*;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            match c.phase {
                Phase::Idle => out.push(Acquire(i)),
                Phase::Holding if c.paused => out.push(Resume(i)),
                Phase::Holding => {
                    if needs_writes(self.property) {
                        out.push(Write(i));
                    }
                    out.push(Release(i));
                    if s.pauses < self.pauses {
                        out.push(Pause(i));
                    }
                }
                Phase::Done => {}
            }
        }
        if s.pending.is_some() {
            out.push(Replicate);
        }
        if self.failover && !s.failed_over {
            out.push(Failover);
        }
        if s.t < self.time_bound {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &FencingState, action: FencingAction) -> Option<FencingState> {
        use FencingAction::*;
        let mut s = *last;
        match action {
            Tick => {
                s.t += 1;
                key::expire(&mut s.master.key, s.t);
                key::expire(&mut s.replica.key, s.t);
                if let Some(p) = &mut s.pending {
                    key::expire(&mut p.key, s.t);
                }
                for c in s.clients.iter_mut().take(self.clients as usize) {
                    if c.phase == Phase::Holding && !c.paused && s.t >= c.valid_until {
                        Self::done(c);
                    }
                }
            }
            Acquire(i) => {
                if s.master.key.is_some() {
                    return None;
                }
                s.master.key = Some(Key {
                    holder: i,
                    expires: s.t + self.ttl,
                });
                s.master.counter += 1;
                let token = s.master.counter;
                s.grants += 1;
                s.token_reused |= token <= s.max_issued;
                s.max_issued = s.max_issued.max(token);
                s.clients[i as usize] = Client {
                    phase: Phase::Holding,
                    paused: false,
                    valid_until: s.t + self.ttl,
                    token,
                    grant: s.grants,
                };
                self.wrote(&mut s);
            }
            Write(i) => {
                let c = s.clients[i as usize];
                if self.storage_check && c.token < s.storage.max_token {
                    return None; // rejected: lower than a token already seen
                }
                s.storage.accept(c.grant, c.token);
            }
            Release(i) => {
                if key::release(&mut s.master.key, i) {
                    self.wrote(&mut s);
                }
                Self::done(&mut s.clients[i as usize]);
            }
            Pause(i) => {
                s.clients[i as usize].paused = true;
                s.pauses += 1;
            }
            Resume(i) => s.clients[i as usize].paused = false,
            Replicate => s.replica = s.pending.take().expect("pending write"),
            Failover => {
                s.failed_over = true;
                s.master = s.replica;
                s.replica = Data::default();
                s.pending = None;
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
}

properties::lock_state!(FencingState, |c: &Client| c.phase == Phase::Holding);

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "clients",
        default: "2",
        help: "number of clients (1-3), one lease each",
    },
    params::TTL,
    params::TIME_BOUND,
    params::PAUSES,
    ParamSpec {
        name: "failover",
        default: "false",
        help: "the master may die and its lagging replica be promoted",
    },
    ParamSpec {
        name: "storage_check",
        default: "true",
        help: "the storage rejects tokens lower than the highest it accepted",
    },
    params::TICK_MS,
];

impl LockModel for Fencing {
    const NAME: &'static str = "fencing";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "no_stale_write";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        Ok(Fencing {
            clients: p.clients(MAX_CLIENTS)?,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            pauses: p.int("pauses", 0, 3)?,
            failover: p.bool("failover")?,
            storage_check: p.bool("storage_check")?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        // Listed storage first: the storage is what fencing protects.
        let mut all = properties::standard(properties::MUTEX_ABOUT_PAUSED);
        let mutex = all.remove(0);
        all.insert(
            1,
            (
                PropInfo {
                    name: "tokens_increase",
                    kind: PropertyKind::Always,
                    about: "every new lease gets a fencing token above every earlier lease's",
                },
                Property::always("tokens_increase", |_, s: &FencingState| !s.token_reused),
            ),
        );
        all.insert(2, mutex);
        all
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        let two = self.clients >= 2;
        let pause = self.pauses > 0 && self.time_bound >= self.ttl;
        let violated = match property {
            "no_stale_write" => two && (self.failover || (pause && !self.storage_check)),
            "tokens_increase" => two && self.failover,
            "mutual_exclusion" => two && (self.failover || pause),
            _ => return properties::handover_expected(self.clients, 1),
        };
        Expectation::violated_if(violated)
    }

    fn facts(&self, s: &FencingState) -> Vec<(String, String)> {
        let data = |d: &Data| format!("{}, token counter {}", key::fact(d.key), d.counter);
        let mut f = vec![("clock".to_string(), s.t.to_string())];
        if s.failed_over {
            f.push(("redis-0".to_string(), "DOWN".to_string()));
            f.push((
                "redis-0-replica-0".to_string(),
                format!("master, {}", data(&s.master)),
            ));
        } else {
            f.push((
                "redis-0".to_string(),
                format!("master, {}", data(&s.master)),
            ));
            f.push((
                "redis-0-replica-0".to_string(),
                format!(
                    "replica, {}{}",
                    data(&s.replica),
                    if s.pending.is_some() {
                        " (behind the master)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let v = match c.phase {
                Phase::Idle => "idle".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Holding => format!(
                    "HOLDS lease #{} with token {}, valid until {}{}",
                    c.grant,
                    c.token,
                    c.valid_until,
                    if c.paused { ", PAUSED" } else { "" }
                ),
            };
            f.push((format!("client-{i}"), v));
        }
        f.push((
            "storage".to_string(),
            if s.storage.max_grant == 0 {
                "no writes".to_string()
            } else {
                format!(
                    "highest token {} (newest write from lease #{}){}",
                    s.storage.max_token,
                    s.storage.max_grant,
                    s.storage.stale_note()
                )
            },
        ));
        f
    }

    fn action_text(&self, s: &FencingState, a: &FencingAction) -> String {
        use FencingAction::*;
        let master = if s.failed_over {
            "redis-0-replica-0"
        } else {
            "redis-0"
        };
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Acquire(i) => format!(
                "client-{i}: SET lock NX PX {} + INCR token on {master} -> token {}",
                self.ttl,
                s.master.counter + 1
            ),
            Write(i) => format!(
                "client-{i} writes with token {} -> accepted",
                s.clients[i as usize].token
            ),
            Release(i) => format!("client-{i} releases (compare-and-delete)"),
            Pause(i) => format!("client-{i} pauses (stop-the-world GC)"),
            Resume(i) => format!("client-{i} resumes"),
            Replicate => "replication: redis-0-replica-0 applies the master's writes".to_string(),
            Failover => "failover: redis-0 dies, redis-0-replica-0 is promoted".to_string(),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let tick = self.tick_ms;
        let base = Scenario::counterexample(self, property, path, "fenced", self.ttl, self.clients);
        let mut faults = Vec::new();
        let mut lag = base.replication_lag_ms;
        let mut replicated = false;
        for (i, (s, a)) in path.iter().enumerate() {
            match a {
                Some(FencingAction::Replicate) => replicated = true,
                Some(FencingAction::Failover) => {
                    let at = fault_time(s.t as u32, tick);
                    lag = failover_lag(lag, replicated, s.pending.is_none(), at, tick)?;
                    faults.push(Fault::Failover { at_ms: at });
                }
                Some(FencingAction::Pause(c)) => {
                    faults.push(pause_fault(self, &path[i..], FencingAction::Resume(*c)))
                }
                _ => {}
            }
        }
        Ok(Scenario {
            about: format!(
                "From the fencing model ({} steps): a fenced lock (SET NX PX + INCR token) on a master with a lagging replica; {}",
                path.len() - 1,
                if self.failover {
                    "the failover promotes a replica whose token counter is behind, a second client gets a token already used, and the storage accepts the first holder's write after the second's."
                } else {
                    "the holder pauses past its lease and a second client acquires."
                }
            ),
            replicas: 1,
            replication_lag_ms: lag,
            failover_detect_ms: tick / 5,
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
        test_util::check("fencing", property, params, strategy)
    }

    #[test]
    fn fencing_holds_with_pauses_and_no_failover() {
        let r = check("no_stale_write", &[("pauses", "2")], Strategy::Dfs);
        assert!(matches!(r.outcome, Finding::Holds { unique_states, .. } if unique_states > 1000));
        check("tokens_increase", &[("pauses", "2")], Strategy::Dfs);
        check("handover", &[], Strategy::Bfs);
    }

    #[test]
    fn failover_reuses_a_token_and_the_storage_takes_a_stale_write() {
        let r = check("no_stale_write", &[("failover", "true")], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(
            a,
            [
                "client-0: SET lock NX PX 3 + INCR token on redis-0 -> token 1",
                "failover: redis-0 dies, redis-0-replica-0 is promoted",
                "client-1: SET lock NX PX 3 + INCR token on redis-0-replica-0 -> token 1",
                "client-1 writes with token 1 -> accepted",
                "client-0 writes with token 1 -> accepted",
            ]
        );
        let toml = r.to_scenario_toml().unwrap();
        let v: toml::Value = toml::from_str(&toml).unwrap();
        assert_eq!(v["lock"]["kind"].as_str(), Some("fenced"));
        assert_eq!(v["expect_checks"]["resource"].as_str(), Some("violation"));
        let r = check("tokens_increase", &[("failover", "true")], Strategy::Bfs);
        assert_eq!(r.trace().unwrap().len(), 3);
    }

    #[test]
    fn without_the_storage_check_a_pause_writes_stale() {
        let r = check(
            "no_stale_write",
            &[("storage_check", "false")],
            Strategy::Bfs,
        );
        assert_eq!(r.trace().unwrap().len(), 9);
    }
}
