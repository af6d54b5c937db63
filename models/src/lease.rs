//! # `lease`: one Redis, a `SET NX PX` lease
//!
//! The lock of the "Is the Redis lock perfect?" article: `SET lock <random>
//! NX PX <ttl>` to acquire, a Lua compare-and-delete to release, on a single
//! Redis server. Its remaining flaw, which the article names and Kleppmann's
//! "How to do distributed locking" works out, is that a lease can run out
//! while its holder still works: a stop-the-world GC pause after the client
//! acquired (or a server clock that jumps forward) lets the key expire, a
//! second client acquires it, and the first resumes believing it still holds
//! the lock. Kleppmann's fix is a fencing token: the lock service hands out
//! a number that grows with every grant (here an `INCR` in the acquire
//! script) and the storage rejects a write whose token is lower than one it
//! has already accepted.
//!
//! ## The model
//! * True time ticks up to `time_bound`. The server's clock is true time
//!   plus a jump of `jump` ticks that the model may apply once
//!   ([`LeaseAction::ClockJump`]); the key expires when the server's clock
//!   reaches `set time + ttl`. Clients' clocks are true time.
//! * A client acquires with one atomic step (the `SET` and, with
//!   `fencing`, the `INCR` run in one script). Its lease is valid until
//!   `acquire time + ttl` on its own clock. A running holder leaves its
//!   critical section when its lease runs out (checked at every tick), or
//!   earlier by releasing. A paused holder checks nothing: it is still in
//!   its critical section, as docs/design.md defines a holder.
//! * Holders write to a storage ([`Storage`]). With `fencing`, the storage
//!   rejects a token lower than the highest it accepted.
//! * Faults: up to `pauses` pauses (only a holder pauses: pausing a client
//!   that holds nothing cannot break safety, it only delays it), and one
//!   server clock jump of `jump` ticks when `jump > 0`.
//!
//! ## Parameters
//! `clients` (2), `ttl` (3 ticks), `time_bound` (8 ticks), `cycles` (1
//! acquisition per client), `pauses` (1), `jump` (0 = no jump), `fencing`
//! (false), `tick_ms` (100).
//!
//! ## Results (tests below)
//! * pause: `mutual_exclusion` violated in 6 steps (acquire, pause, three
//!   ticks, the other client acquires); `no_stale_write` violated in 9.
//! * server clock jump of 3 ticks, no pause: violated in 3 steps.
//! * `fencing`: `no_stale_write` holds exhaustively within the bound, even
//!   with a pause and a clock jump (`mutual_exclusion` is still violated:
//!   fencing protects the storage, not the critical section).

use crate::counterexample::pause_fault;
use crate::key;
use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::runner::needs_writes;
use crate::scenario::{fault_time, generated_note, Fault, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct Lease {
    /// Clients competing for the lock.
    pub clients: u8,
    /// The lease (`PX`), in ticks.
    pub ttl: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Acquisitions per client.
    pub cycles: u8,
    /// Stop-the-world pauses of a holder the checker may use.
    pub pauses: u8,
    /// How far the server's clock may jump forward, once (0: never).
    pub jump: u8,
    /// `INCR` a fencing token on acquire; the storage rejects lower tokens.
    pub fencing: bool,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            clients: 2,
            ttl: 3,
            time_bound: 8,
            cycles: 1,
            pauses: 1,
            jump: 0,
            fencing: false,
            tick_ms: 100,
            property: "mutual_exclusion",
        }
    }
}

/// Where a client is in its cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not holding; may acquire if it has cycles left.
    Idle,
    /// Between a successful acquire and release (or the lease running out).
    Holding,
    /// Used up its cycles.
    Done,
}

/// One client of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is in its cycles.
    pub phase: Phase,
    /// Stopped (GC): it notices nothing, not even that its lease ran out.
    pub paused: bool,
    /// Acquisitions completed.
    pub cycles: u8,
    /// Lease end on the client's clock.
    pub valid_until: u8,
    /// Fencing token of the current lease (0 without fencing).
    pub token: u8,
    /// Which grant (1st, 2nd, ...) the current lease is: ghost state, the
    /// true order of leases, used only by `no_stale_write`.
    pub grant: u8,
}

const IDLE: Client = Client {
    phase: Phase::Idle,
    paused: false,
    cycles: 0,
    valid_until: 0,
    token: 0,
    grant: 0,
};

pub use crate::key::Key;
pub use crate::properties::Storage;

/// A state of the lease model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseState {
    /// True time.
    pub t: u8,
    /// Server clock jump applied so far.
    pub jumped: u8,
    /// The lock key on `redis-0`, if set and not expired.
    pub key: Option<Key>,
    /// The `INCR` counter that makes fencing tokens.
    pub counter: u8,
    /// Leases granted so far.
    pub grants: u8,
    /// Pauses used so far.
    pub pauses: u8,
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// The protected storage.
    pub storage: Storage,
}

/// A step of the lease model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseAction {
    /// True time advances one tick; running holders whose lease ran out on
    /// their clock leave the critical section.
    Tick,
    /// `SET lock c NX PX ttl` (+ `INCR` with fencing).
    Acquire(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// Compare-and-delete, and leave the critical section.
    Release(u8),
    /// A stop-the-world pause starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
    /// The server's clock jumps forward by `jump` ticks.
    ClockJump,
}

impl Lease {
    fn server_clock(&self, s: &LeaseState) -> u8 {
        s.t + s.jumped
    }

    fn drop_expired(&self, s: &mut LeaseState) {
        let now = self.server_clock(s);
        key::expire(&mut s.key, now);
    }

    fn finish(&self, c: &mut Client) {
        c.cycles += 1;
        c.phase = if c.cycles >= self.cycles {
            Phase::Done
        } else {
            Phase::Idle
        };
        c.paused = false;
        c.valid_until = 0;
        c.token = 0;
        c.grant = 0;
    }
}

impl Model for Lease {
    type State = LeaseState;
    type Action = LeaseAction;

    fn init_states(&self) -> Vec<LeaseState> {
        vec![LeaseState {
            t: 0,
            jumped: 0,
            key: None,
            counter: 0,
            grants: 0,
            pauses: 0,
            clients: [IDLE; MAX_CLIENTS],
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &LeaseState, out: &mut Vec<LeaseAction>) {
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            match c.phase {
                Phase::Idle => out.push(LeaseAction::Acquire(i)),
                Phase::Holding if c.paused => out.push(LeaseAction::Resume(i)),
                Phase::Holding => {
                    if needs_writes(self.property) {
                        out.push(LeaseAction::Write(i));
                    }
                    out.push(LeaseAction::Release(i));
                    if s.pauses < self.pauses {
                        out.push(LeaseAction::Pause(i));
                    }
                }
                Phase::Done => {}
            }
        }
        if self.jump > 0 && s.jumped == 0 {
            out.push(LeaseAction::ClockJump);
        }
        if s.t < self.time_bound {
            out.push(LeaseAction::Tick);
        }
    }

    fn next_state(&self, last: &LeaseState, action: LeaseAction) -> Option<LeaseState> {
        let mut s = *last;
        match action {
            LeaseAction::Tick => {
                s.t += 1;
                self.drop_expired(&mut s);
                for c in s.clients.iter_mut().take(self.clients as usize) {
                    if c.phase == Phase::Holding && !c.paused && s.t >= c.valid_until {
                        self.finish(c);
                    }
                }
            }
            LeaseAction::Acquire(i) => {
                if s.key.is_some() {
                    return None; // SET NX fails: nothing changes, the client retries later
                }
                s.key = Some(Key {
                    holder: i,
                    expires: self.server_clock(&s) + self.ttl,
                });
                s.grants += 1;
                if self.fencing {
                    s.counter += 1;
                }
                let c = &mut s.clients[i as usize];
                c.phase = Phase::Holding;
                c.valid_until = s.t + self.ttl;
                c.token = s.counter;
                c.grant = s.grants;
            }
            LeaseAction::Write(i) => {
                let c = s.clients[i as usize];
                if self.fencing && c.token < s.storage.max_token {
                    return None; // rejected by the fencing check
                }
                s.storage.accept(c.grant, c.token);
            }
            LeaseAction::Release(i) => {
                key::release(&mut s.key, i);
                self.finish(&mut s.clients[i as usize]);
            }
            LeaseAction::Pause(i) => {
                s.clients[i as usize].paused = true;
                s.pauses += 1;
            }
            LeaseAction::Resume(i) => s.clients[i as usize].paused = false,
            LeaseAction::ClockJump => {
                s.jumped = self.jump;
                self.drop_expired(&mut s);
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();

    fn within_boundary(&self, _: &LeaseState) -> bool {
        true
    }
}

properties::lock_state!(LeaseState, |c: &Client| c.phase == Phase::Holding);

const PARAMS: &[ParamSpec] = &[
    params::CLIENTS,
    params::TTL,
    params::TIME_BOUND,
    params::CYCLES,
    ParamSpec {
        name: "pauses",
        default: "1",
        help: "how many stop-the-world pauses of a holder may happen (0 = none)",
    },
    ParamSpec {
        name: "jump",
        default: "0",
        help: "the server clock may jump forward once by this many ticks (0 = never)",
    },
    ParamSpec {
        name: "fencing",
        default: "false",
        help: "INCR a fencing token on acquire; the storage rejects lower tokens",
    },
    params::TICK_MS,
];

impl LockModel for Lease {
    const NAME: &'static str = "lease";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        Ok(Lease {
            clients: p.clients(MAX_CLIENTS)?,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 5)?,
            pauses: p.int("pauses", 0, 5)?,
            jump: p.int("jump", 0, 50)?,
            fencing: p.bool("fencing")?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT_PAUSED)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        let two = self.clients >= 2;
        let pause_breaks = self.pauses > 0 && self.time_bound >= self.ttl;
        let jump_breaks =
            self.jump > 0 && self.time_bound as u16 + self.jump as u16 >= self.ttl as u16;
        let unsafe_ = two && (pause_breaks || jump_breaks);
        match property {
            "mutual_exclusion" if unsafe_ => Expectation::Violated,
            "no_stale_write" if unsafe_ && !self.fencing => Expectation::Violated,
            "handover" => properties::handover_expected(self.clients, self.cycles),
            _ => Expectation::Holds,
        }
    }

    fn facts(&self, s: &LeaseState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        let key = match s.key {
            Some(k) => format!("key held by client-{} until {}", k.holder, k.expires),
            None => "no key".to_string(),
        };
        let counter = if self.fencing {
            format!(", counter {}", s.counter)
        } else {
            String::new()
        };
        f.push((
            "redis-0 clock".to_string(),
            self.server_clock(s).to_string(),
        ));
        f.push(("redis-0".to_string(), format!("{key}{counter}")));
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let v = match c.phase {
                Phase::Idle => "idle".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Holding => format!(
                    "HOLDS lease #{} valid until {}{}{}",
                    c.grant,
                    c.valid_until,
                    if self.fencing {
                        format!(", token {}", c.token)
                    } else {
                        String::new()
                    },
                    if c.paused { ", PAUSED" } else { "" }
                ),
            };
            f.push((format!("client-{i}"), v));
        }
        let st = &s.storage;
        let storage = if st.max_grant == 0 {
            "no writes".to_string()
        } else {
            format!(
                "newest accepted write from lease #{}{}{}",
                st.max_grant,
                if self.fencing {
                    format!(" (token {})", st.max_token)
                } else {
                    String::new()
                },
                st.stale_note()
            )
        };
        f.push(("storage".to_string(), storage));
        f
    }

    fn action_text(&self, s: &LeaseState, a: &LeaseAction) -> String {
        match *a {
            LeaseAction::Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            LeaseAction::Acquire(i) => format!(
                "client-{i}: SET lock client-{i} NX PX {}{} on redis-0 -> OK",
                self.ttl,
                if self.fencing { " + INCR token" } else { "" }
            ),
            LeaseAction::Write(i) => format!(
                "client-{i} writes to the storage{}",
                if self.fencing {
                    format!(" with token {}", s.clients[i as usize].token)
                } else {
                    String::new()
                }
            ),
            LeaseAction::Release(i) => {
                format!("client-{i} releases (compare-and-delete) and leaves its critical section")
            }
            LeaseAction::Pause(i) => format!("client-{i} pauses (stop-the-world GC)"),
            LeaseAction::Resume(i) => format!("client-{i} resumes"),
            LeaseAction::ClockJump => {
                format!("redis-0's clock jumps forward by {} ticks", self.jump)
            }
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let tick = self.tick_ms;
        let lock_kind = if self.fencing { "fenced" } else { "set-nx-px" };
        let base =
            Scenario::counterexample(self, property, path, lock_kind, self.ttl, self.clients);
        let mut faults = Vec::new();
        for (i, (s, a)) in path.iter().enumerate() {
            match a {
                // The pause lasts until the trace resumes the client, or
                // one tick past the end of the trace.
                Some(LeaseAction::Pause(c)) => {
                    faults.push(pause_fault(self, &path[i..], LeaseAction::Resume(*c)))
                }
                Some(LeaseAction::ClockJump) => faults.push(Fault::ClockJump {
                    node: "redis-0".to_string(),
                    at_ms: fault_time(s.t as u32, tick),
                    by_ms: self.jump as i64 * tick as i64,
                }),
                _ => {}
            }
        }
        Ok(Scenario {
            name: format!(
                "model-lease-{}{}",
                if self.fencing { "fenced-" } else { "" },
                property.replace('_', "-")
            ),
            about: format!(
                "From the lease model ({} steps): a SET NX PX lease of {} ms on one Redis; {}",
                path.len() - 1,
                base.ttl_ms,
                if self.jump > 0 && self.pauses == 0 {
                    "the server clock jumps forward, the key expires early and a second client acquires while the first still holds."
                } else {
                    "the holder pauses longer than its lease, the key expires and a second client acquires while the first still believes it holds."
                }
            ),
            notes: vec![generated_note(
                tick,
                " hold_ms is shorter than the lease so only the fault breaks the lock.",
            )],
            cycles: self.cycles as u32,
            faults,
            ..base
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Finding;
    use crate::test_util::{actions, opts};
    use crate::{run, Strategy};

    #[test]
    fn pause_breaks_mutual_exclusion_in_six_steps() {
        let r = run("lease", &opts("mutual_exclusion", &[], Strategy::Bfs)).unwrap();
        assert!(r.matches_expectation());
        assert_eq!(
            actions(&r),
            [
                "client-0: SET lock client-0 NX PX 3 on redis-0 -> OK",
                "client-0 pauses (stop-the-world GC)",
                "tick: true time 0 -> 1",
                "tick: true time 1 -> 2",
                "tick: true time 2 -> 3",
                "client-1: SET lock client-1 NX PX 3 on redis-0 -> OK",
            ]
        );
        let toml = r.to_scenario_toml().unwrap();
        let v: toml::Value = toml::from_str(&toml).unwrap();
        assert_eq!(v["lock"]["kind"].as_str(), Some("set-nx-px"));
        assert_eq!(v["lock"]["ttl_ms"].as_integer(), Some(300));
        let f = &v["faults"][0];
        assert_eq!(f["kind"].as_str(), Some("pause"));
        assert_eq!(f["client"].as_str(), Some("holder"));
        assert_eq!(f["at_ms"].as_integer(), Some(50));
        assert_eq!(f["for_ms"].as_integer(), Some(400));
    }

    #[test]
    fn text_and_json_reports() {
        let r = run("lease", &opts("mutual_exclusion", &[], Strategy::Bfs)).unwrap();
        let text = r.to_text();
        assert!(
            text.starts_with("lease mutual_exclusion: VIOLATED"),
            "{text}"
        );
        assert!(
            text.contains("counterexample (6 steps, shortest)"),
            "{text}"
        );
        assert!(
            text.contains("redis-0: key held by client-0 until 3 -> no key"),
            "{text}"
        );
        let j = r.to_json();
        assert_eq!(j["verdict"], "violated");
        assert_eq!(j["expected"], "violated");
        assert_eq!(j["matches_expectation"], true);
        assert_eq!(j["outcome"]["trace_len"], 6);
        assert_eq!(j["params"]["ttl"], "3");
        assert_eq!(
            j["outcome"]["trace"][0]["changes"][0],
            "redis-0: no key -> key held by client-0 until 3"
        );
        assert!(j["scenario"].as_str().unwrap().contains("kind = \"pause\""));
        let r = run(
            "lease",
            &opts("mutual_exclusion", &[("pauses", "0")], Strategy::Dfs),
        )
        .unwrap();
        assert!(
            r.to_text()
                .contains("no counterexample in 132 unique states"),
            "{}",
            r.to_text()
        );
        assert_eq!(r.to_json()["verdict"], "holds");
        assert!(r.to_scenario_toml().is_none());
    }

    #[test]
    fn pause_gives_a_stale_write_without_fencing() {
        let r = run("lease", &opts("no_stale_write", &[], Strategy::Bfs)).unwrap();
        assert!(r.matches_expectation());
        let a = actions(&r);
        assert_eq!(a.len(), 9, "{a:?}");
        assert!(a.contains(&"client-0 resumes".to_string()));
        assert_eq!(a[7], "client-1 writes to the storage");
        assert_eq!(a[8], "client-0 writes to the storage");
    }

    #[test]
    fn server_clock_jump_breaks_it_without_a_pause() {
        let r = run(
            "lease",
            &opts(
                "mutual_exclusion",
                &[("pauses", "0"), ("jump", "3")],
                Strategy::Bfs,
            ),
        )
        .unwrap();
        assert!(r.matches_expectation());
        assert_eq!(
            actions(&r),
            [
                "client-0: SET lock client-0 NX PX 3 on redis-0 -> OK",
                "redis-0's clock jumps forward by 3 ticks",
                "client-1: SET lock client-1 NX PX 3 on redis-0 -> OK",
            ]
        );
        let toml = r.to_scenario_toml().unwrap();
        assert!(toml.contains("kind = \"clock_jump\"\nnode = \"redis-0\"\nat_ms = 50\nby_ms = 300"));
    }

    #[test]
    fn no_faults_is_safe_and_not_vacuous() {
        let p = [("pauses", "0")];
        let r = run("lease", &opts("mutual_exclusion", &p, Strategy::Dfs)).unwrap();
        assert!(
            matches!(r.outcome, Finding::Holds { .. }),
            "{}",
            r.to_text()
        );
        assert!(r.matches_expectation());
        let r = run("lease", &opts("handover", &p, Strategy::Bfs)).unwrap();
        assert!(r.matches_expectation());
        assert_eq!(r.witness.as_ref().unwrap().len(), 3); // acquire, release, acquire
    }

    #[test]
    fn fencing_keeps_the_storage_safe_exhaustively() {
        let p = [("fencing", "true"), ("jump", "2"), ("pauses", "2")];
        let r = run("lease", &opts("no_stale_write", &p, Strategy::Dfs)).unwrap();
        assert!(r.matches_expectation(), "{}", r.to_text());
        let Finding::Holds { unique_states, .. } = r.outcome else {
            panic!("{}", r.to_text())
        };
        assert!(unique_states > 1000, "{unique_states}");
        // Fencing protects the storage, not the critical section.
        let r = run("lease", &opts("mutual_exclusion", &p, Strategy::Bfs)).unwrap();
        assert!(r.matches_expectation());
        assert!(r.trace().is_some());
    }
}
