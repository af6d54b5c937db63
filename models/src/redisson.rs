//! # `redisson`: Redisson's `RLock` (hash lock, watchdog renewal, reentrancy)
//!
//! The Redisson article ("Redisson's RLock internals"): the lock is a hash whose field
//! is `uuid:threadId` and whose value is the hold count. The acquire script
//! increments the field and sets `PEXPIRE lease` if the key is absent or the
//! field is ours, else returns the `PTTL`. With no explicit lease the lease
//! is `lockWatchdogTimeout` (30 s) and a watchdog renews it every lease/3
//! with a script that checks `HEXISTS` first. Release decrements the field,
//! re-arms the expiry while the count is positive and deletes the key at
//! zero. The "Is the Redis lock perfect?" article presents the watchdog as the cure for "the lease runs out
//! while the holder still works"; Kleppmann's "How to do distributed
//! locking" explains why it is not one: a stop-the-world GC pause stops the
//! watchdog thread too, so a pause longer than the lease still lets the key
//! expire under a holder that believes it holds it.
//!
//! ## The model
//! * One Redis; its clock is true time. The key holds one field (the
//!   holder) and its count, and expires on the server's clock.
//! * A holder has no lease of its own: it holds until it releases (the
//!   watchdog is supposed to keep the key alive). Its watchdog renews at
//!   `acquire + k * (lease / 3)` on the client's clock; the renewal is urgent
//!   (time does not pass while a running holder's renewal is due), and the
//!   renewal script only re-arms a key whose field is still ours (otherwise
//!   the watchdog stops).
//! * Reentrancy: a holder may acquire again up to `max_depth` (the count
//!   goes up) and releases as many times; the client's own count and the
//!   server's may differ after the key expired and was re-created.
//! * Faults: `pauses` stop-the-world pauses of a holder (watchdog included),
//!   each at most `max_pause` ticks long (0: unbounded).
//!
//! ## Parameters
//! `clients` (2), `lease` (3 ticks: the watchdog timeout; renewal every
//! lease/3), `time_bound` (8), `cycles` (1), `pauses` (1), `max_pause` (0 =
//! unbounded), `max_depth` (2), `tick_ms` (100).
//!
//! ## Results (tests below)
//! * no pauses, or pauses shorter than `lease - lease/3`: `mutual_exclusion`
//!   holds exhaustively within the bound (the watchdog works);
//! * an unbounded pause: violated in 6 steps (acquire, pause, three ticks,
//!   the other client acquires);
//! * a pause of only `lease - lease/3` (2 of 3 ticks) suffices when it
//!   starts just as a renewal is due: the key then has only that long left.
//!   So the watchdog tolerates pauses up to two thirds of the lease, not
//!   the whole lease;
//! * `reentered` (sometimes): a holder re-enters with the server's count 2.

use crate::counterexample::pause_fault;
use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::{Expectation, PropertyKind};
use crate::runner::needs_writes;
use crate::scenario::{generated_note, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

/// Clients are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct Redisson {
    /// Clients competing for the lock.
    pub clients: u8,
    /// The lease (`lockWatchdogTimeout`), in ticks; the watchdog renews every `lease / 3`.
    pub lease: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Lock/unlock cycles per client.
    pub cycles: u8,
    /// Stop-the-world pauses of a holder the checker may use.
    pub pauses: u8,
    /// Longest pause in ticks (0: unbounded): how long a pause the watchdog survives.
    pub max_pause: u8,
    /// Deepest re-entry.
    pub max_depth: u8,
    /// Simulated milliseconds per tick in the scenario file.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

/// The lock hash: one field (the holder) and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The client whose field it is (`uuid:threadId` in Redisson).
    pub holder: u8,
    /// The hold count: re-entries add one, releases take one away.
    pub count: u8,
    /// Expiry on the server's clock.
    pub expires: u8,
}

/// One client of the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The client's own hold count (0: not holding).
    pub depth: u8,
    /// Stopped (GC), its watchdog thread with it.
    pub paused: bool,
    /// When the pause started, to end it by `max_pause`.
    pub paused_since: u8,
    /// The watchdog runs.
    pub watchdog: bool,
    /// Next renewal on the client's clock.
    pub next_renew: u8,
    /// Lock/unlock cycles completed.
    pub cycles: u8,
    /// Acquire-script calls so far (at most `cycles * max_depth`: keeps
    /// the space finite when a key that expired is re-created by re-entry).
    pub calls: u8,
    /// Ghost: the lease (key creation) this client's writes belong to.
    pub grant: u8,
}

pub use crate::properties::Storage;

/// A state of the redisson model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RedissonState {
    /// True time (ticks); the server's clock.
    pub t: u8,
    /// The lock hash, if it exists.
    pub key: Option<Key>,
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// Key creations so far.
    pub grants: u8,
    /// Pauses used so far.
    pub pauses: u8,
    /// Some client re-entered with the server's count at 2 or more.
    pub reentered: bool,
    /// The protected storage.
    pub storage: Storage,
}

/// A step of the redisson model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedissonAction {
    /// True time advances one tick; an expired key is gone.
    Tick,
    /// The acquire script (first acquisition or re-entry).
    Acquire(u8),
    /// The watchdog's renewal script.
    Renew(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// The release script (one level).
    Release(u8),
    /// A stop-the-world pause of the holder (and its watchdog) starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
}

const IDLE: Client = Client {
    depth: 0,
    paused: false,
    paused_since: 0,
    watchdog: false,
    next_renew: 0,
    cycles: 0,
    calls: 0,
    grant: 0,
};

impl Redisson {
    fn period(&self) -> u8 {
        (self.lease / 3).max(1)
    }

    fn renew_due(&self, s: &RedissonState, c: &Client) -> bool {
        c.depth > 0 && c.watchdog && !c.paused && s.t >= c.next_renew
    }
}

impl Model for Redisson {
    type State = RedissonState;
    type Action = RedissonAction;

    fn init_states(&self) -> Vec<RedissonState> {
        vec![RedissonState {
            t: 0,
            key: None,
            clients: [IDLE; MAX_CLIENTS],
            grants: 0,
            pauses: 0,
            reentered: false,
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &RedissonState, out: &mut Vec<RedissonAction>) {
        use RedissonAction::*;
        let mut urgent = false;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            if c.paused {
                out.push(Resume(i));
                if self.max_pause > 0 && s.t >= c.paused_since + self.max_pause {
                    urgent = true; // the pause ends by max_pause
                }
                continue;
            }
            if self.renew_due(s, c) {
                out.push(Renew(i));
                urgent = true;
            }
            let may_call = c.calls < self.cycles * self.max_depth;
            if may_call
                && ((c.depth == 0 && c.cycles < self.cycles)
                    || (c.depth > 0 && c.depth < self.max_depth))
            {
                out.push(Acquire(i));
            }
            if c.depth > 0 {
                if needs_writes(self.property) {
                    out.push(Write(i));
                }
                out.push(Release(i));
                if s.pauses < self.pauses {
                    out.push(Pause(i));
                }
            }
        }
        if s.t < self.time_bound && !urgent {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &RedissonState, action: RedissonAction) -> Option<RedissonState> {
        use RedissonAction::*;
        let mut s = *last;
        match action {
            Tick => {
                s.t += 1;
                if matches!(s.key, Some(k) if s.t >= k.expires) {
                    s.key = None;
                }
            }
            Acquire(i) => {
                let expires = s.t + self.lease;
                match s.key {
                    None => {
                        s.grants += 1;
                        s.key = Some(Key {
                            holder: i,
                            count: 1,
                            expires,
                        });
                        s.clients[i as usize].grant = s.grants;
                    }
                    Some(k) if k.holder == i => {
                        s.key = Some(Key {
                            holder: i,
                            count: k.count + 1,
                            expires,
                        });
                        s.reentered = true;
                    }
                    Some(_) => return None, // returns the PTTL: not acquired
                }
                let c = &mut s.clients[i as usize];
                c.calls += 1;
                if c.depth == 0 {
                    c.watchdog = true;
                    c.next_renew = s.t + self.period();
                }
                c.depth += 1;
            }
            Renew(i) => {
                let period = self.period();
                let c = &mut s.clients[i as usize];
                match &mut s.key {
                    Some(k) if k.holder == i => {
                        k.expires = s.t + self.lease;
                        c.next_renew = s.t + period;
                    }
                    _ => c.watchdog = false, // HEXISTS failed: the watchdog stops
                }
            }
            Write(i) => {
                let g = s.clients[i as usize].grant;
                s.storage.accept(g, 0);
            }
            Release(i) => {
                if let Some(k) = s.key {
                    if k.holder == i {
                        s.key = if k.count > 1 {
                            Some(Key {
                                holder: i,
                                count: k.count - 1,
                                expires: s.t + self.lease,
                            })
                        } else {
                            None
                        };
                    }
                }
                let c = &mut s.clients[i as usize];
                c.depth -= 1;
                if c.depth == 0 {
                    *c = Client {
                        cycles: c.cycles + 1,
                        calls: c.calls,
                        ..IDLE
                    };
                }
            }
            Pause(i) => {
                let c = &mut s.clients[i as usize];
                c.paused = true;
                c.paused_since = s.t;
                s.pauses += 1;
            }
            Resume(i) => {
                let c = &mut s.clients[i as usize];
                c.paused = false;
                c.paused_since = 0;
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
}

properties::lock_state!(RedissonState, |c: &Client| c.depth > 0);

const PARAMS: &[ParamSpec] = &[
    params::CLIENTS,
    ParamSpec {
        name: "lease",
        default: "3",
        help: "lease (lockWatchdogTimeout) in ticks; the watchdog renews every lease/3",
    },
    params::TIME_BOUND,
    ParamSpec {
        name: "cycles",
        default: "1",
        help: "lock/unlock cycles per client",
    },
    params::PAUSES,
    ParamSpec {
        name: "max_pause",
        default: "0",
        help: "longest pause in ticks (0 = unbounded)",
    },
    ParamSpec {
        name: "max_depth",
        default: "2",
        help: "deepest re-entry",
    },
    params::TICK_MS,
];

impl LockModel for Redisson {
    const NAME: &'static str = "redisson";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        Ok(Redisson {
            clients: p.clients(MAX_CLIENTS)?,
            lease: p.int("lease", 1, 60)?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 3)?,
            pauses: p.int("pauses", 0, 3)?,
            max_pause: p.int("max_pause", 0, 100)?,
            max_depth: p.int("max_depth", 1, 4)?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        let mut all = properties::standard(properties::MUTEX_ABOUT_PAUSED);
        all.push((
            PropInfo {
                name: "reentered",
                kind: PropertyKind::Sometimes,
                about: "a holder re-enters the lock (the hash count reaches 2)",
            },
            Property::sometimes("reentered", |_, s: &RedissonState| s.reentered),
        ));
        all
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        use Expectation::*;
        // A pause that starts just before a renewal is due must last until
        // the key expires: lease - period after the last renewal.
        let long_pause = self.pauses > 0
            && (self.max_pause == 0
                || self.max_pause >= self.lease - self.period().min(self.lease))
            && self.time_bound >= self.lease
            && self.clients >= 2;
        match property {
            "mutual_exclusion" | "no_stale_write" if long_pause => Violated,
            "handover" => properties::handover_expected(self.clients, self.cycles),
            "reentered" if self.max_depth < 2 => Violated,
            _ => Holds,
        }
    }

    fn facts(&self, s: &RedissonState) -> Vec<(String, String)> {
        let mut f = vec![
            ("redis-0 clock".to_string(), s.t.to_string()),
            (
                "redis-0".to_string(),
                match s.key {
                    Some(k) => format!(
                        "lock {{client-{}: {}}} until {}",
                        k.holder, k.count, k.expires
                    ),
                    None => "no lock key".to_string(),
                },
            ),
        ];
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let v = if c.depth == 0 {
                "not holding".to_string()
            } else {
                format!(
                    "HOLDS (count {} on its side, lease #{}), watchdog {}{}",
                    c.depth,
                    c.grant,
                    if c.watchdog {
                        format!("renews at {}", c.next_renew)
                    } else {
                        "stopped".to_string()
                    },
                    if c.paused { ", PAUSED" } else { "" }
                )
            };
            f.push((format!("client-{i}"), v));
        }
        f.extend(s.storage.fact());
        f
    }

    fn action_text(&self, s: &RedissonState, a: &RedissonAction) -> String {
        use RedissonAction::*;
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Acquire(i) => format!(
                "client-{i}: lock script (HINCRBY lock client-{i} 1, PEXPIRE {}){}",
                self.lease,
                if s.clients[i as usize].depth > 0 {
                    " again: re-entry"
                } else {
                    ""
                }
            ),
            Renew(i) => format!(
                "client-{i}'s watchdog: HEXISTS then PEXPIRE {}{}",
                self.lease,
                if matches!(s.key, Some(k) if k.holder == i) {
                    ""
                } else {
                    " -> field gone, watchdog stops"
                }
            ),
            Write(i) => format!("client-{i} writes to the storage"),
            Release(i) => format!("client-{i}: unlock script (HINCRBY -1, DEL at 0)"),
            Pause(i) => format!("client-{i} pauses (stop-the-world GC: the watchdog stops too)"),
            Resume(i) => format!("client-{i} resumes"),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let tick = self.tick_ms;
        let base =
            Scenario::counterexample(self, property, path, "redisson", self.lease, self.clients);
        let mut faults = Vec::new();
        for (i, (_, a)) in path.iter().enumerate() {
            if let Some(RedissonAction::Pause(c)) = a {
                faults.push(pause_fault(self, &path[i..], RedissonAction::Resume(*c)));
            }
        }
        Ok(Scenario {
            about: format!(
                "From the redisson model ({} steps): the holder of a Redisson lock (lease {} ms, watchdog every {} ms) pauses longer than the lease; the watchdog pauses with it, the key expires and a second client acquires.",
                path.len() - 1,
                base.ttl_ms,
                self.period() as u64 * tick
            ),
            notes: vec![generated_note(
                tick,
                " Without the pause the watchdog keeps a critical section of hold_ms safe.",
            )],
            cycles: self.cycles as u32,
            // The watchdog keeps the key alive: a holder may hold a whole lease.
            hold_ms: (base.ttl_ms, base.ttl_ms),
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
        test_util::check("redisson", property, params, strategy)
    }

    #[test]
    fn a_pause_as_long_as_the_lease_breaks_it() {
        let r = check("mutual_exclusion", &[], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(
            a,
            [
                "client-0: lock script (HINCRBY lock client-0 1, PEXPIRE 3)",
                "client-0 pauses (stop-the-world GC: the watchdog stops too)",
                "tick: true time 0 -> 1",
                "tick: true time 1 -> 2",
                "tick: true time 2 -> 3",
                "client-1: lock script (HINCRBY lock client-1 1, PEXPIRE 3)",
            ]
        );
        let v: toml::Value = toml::from_str(&r.to_scenario_toml().unwrap()).unwrap();
        assert_eq!(v["lock"]["kind"].as_str(), Some("redisson"));
        assert_eq!(v["faults"][0]["for_ms"].as_integer(), Some(400));
        check("no_stale_write", &[], Strategy::Bfs);
    }

    #[test]
    fn a_pause_just_before_a_renewal_needs_only_two_thirds_of_the_lease() {
        let r = check("mutual_exclusion", &[("max_pause", "2")], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a[1], "tick: true time 0 -> 1");
        assert_eq!(
            a[2],
            "client-0 pauses (stop-the-world GC: the watchdog stops too)"
        );
        assert_eq!(a.len(), 6);
    }

    #[test]
    fn the_watchdog_covers_shorter_pauses() {
        let p = [("max_pause", "1")];
        let r = check("mutual_exclusion", &p, Strategy::Dfs);
        assert!(matches!(r.outcome, Finding::Holds { .. }));
        let r = check("mutual_exclusion", &[("pauses", "0")], Strategy::Dfs);
        assert!(matches!(r.outcome, Finding::Holds { .. }));
        check("handover", &p, Strategy::Bfs);
    }

    #[test]
    fn reentry_is_reachable() {
        let r = check("reentered", &[], Strategy::Bfs);
        let w = r.witness.unwrap();
        assert_eq!(w.len(), 2);
        assert!(w[1].action.ends_with("again: re-entry"));
    }
}
