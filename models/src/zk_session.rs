//! # `zk-session`: the ZooKeeper lock recipe and its session expiry
//!
//! The lock of Apache Curator's `InterProcessMutex` and kazoo's `Lock`: each client creates an
//! `EPHEMERAL_SEQUENTIAL` znode under the lock's path, the lowest sequence number holds, every
//! other waiter watches its predecessor. The node lives as long as its client's session, and the
//! server ends a session it has not heard from for the session timeout. A holder that is paused
//! (GC) or cut off from ZooKeeper past its timeout loses its node while it still believes it
//! holds the lock, and the next waiter is granted it: CURATOR-206, "2 clients acquired the same
//! InterProcessLock". A connection-state listener that gives the lock up on `SUSPENDED` (the
//! client has heard nothing for two thirds of the timeout) closes the window for a partition,
//! because the client's own timer fires before the server's; it cannot close it for a pause,
//! because a paused client's listener runs only after it resumes, and the client may act first.
//! The fix is a fencing token from ZooKeeper itself: the lock node's `czxid`, which grows with
//! every grant, checked by the storage.
//!
//! ## The model
//! * True time ticks up to `time_bound`; the server's clock and the clients' are true time.
//! * At every tick each running client that can reach the server heartbeats: its session's
//!   expiry moves to `now + timeout`. Then the server expires every session whose time has come
//!   and deletes its node.
//! * A client creates its node in one step (its `czxid` is the next zxid), and holds once its
//!   node is the lowest that exists (it saw that with `getChildren`, or its watch fired). A
//!   client whose session expired learns it when it reaches the server again: a waiter starts
//!   over with a new session; a holder of the plain recipe keeps believing it holds (the recipe
//!   does not look), with `listener` it leaves its critical section.
//! * With `listener`, a running holder that has heard nothing for `2 * timeout / 3` ticks (the
//!   ZooKeeper client's read timeout) leaves its critical section at that tick.
//! * Faults: up to `pauses` stop-the-world pauses of a holder (it neither heartbeats nor checks
//!   anything), and up to `partitions` cuts between a holder and ZooKeeper (it heartbeats into
//!   the void; its own timers run). Cuts and pauses end at any later step.
//! * The storage is reachable from every client; with `fencing` it rejects a write whose token
//!   (the writer's node's `czxid`) is lower than one it accepted.
//!
//! Not modelled: CURATOR-604 (a client that reconnects with a new session and sees its old
//! session's node), leader elections (sessions survive them, see `simzk::engine`), and the
//! tick rounding of expiry.
//!
//! ## Parameters
//! `clients` (2), `timeout` (3 ticks), `time_bound` (8 ticks), `cycles` (1), `pauses` (1),
//! `partitions` (0), `listener` (false), `fencing` (false), `tick_ms` (100).
//!
//! ## Results (tests below)
//! * pause: `mutual_exclusion` violated in 8 steps (create, acquire, pause, the other client
//!   creates its node, three ticks expire the holder's session, the other client holds); with
//!   the listener too.
//! * partition, plain recipe: violated; with the listener: holds exhaustively.
//! * `fencing`: `no_stale_write` holds exhaustively with a pause and a partition.

use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::runner::needs_writes;
use crate::scenario::Scenario;
use crate::ModelError;
use stateright::{Model, Property};

/// Clients are a fixed-size array so states stay `Copy` and cheap to hash.
pub const MAX_CLIENTS: usize = 3;

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct ZkSession {
    /// Clients competing for the lock.
    pub clients: u8,
    /// The negotiated session timeout, in ticks.
    pub timeout: u8,
    /// True time stops at this tick: the bound within which a proof holds.
    pub time_bound: u8,
    /// Acquisitions per client.
    pub cycles: u8,
    /// Stop-the-world pauses of a holder the checker may use.
    pub pauses: u8,
    /// Cuts between a holder and ZooKeeper the checker may use.
    pub partitions: u8,
    /// The holder gives the lock up on `SUSPENDED` or `LOST`.
    pub listener: bool,
    /// The storage checks the node's `czxid` as a fencing token.
    pub fencing: bool,
    /// Simulated milliseconds per tick.
    pub tick_ms: u64,
    /// The one registered property (`""`: all, for the Explorer).
    pub property: &'static str,
}

impl Default for ZkSession {
    fn default() -> Self {
        ZkSession {
            clients: 2,
            timeout: 3,
            time_bound: 8,
            cycles: 1,
            pauses: 1,
            partitions: 0,
            listener: false,
            fencing: false,
            tick_ms: 100,
            property: "mutual_exclusion",
        }
    }
}

/// Where a client is in its cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No node; may create one if it has cycles left.
    Idle,
    /// Its node exists (as far as it knows) and is not the lowest yet.
    Waiting,
    /// Between acquiring and releasing (or giving up).
    Holding,
    /// Used up its cycles.
    Done,
}

/// One client, and what the server keeps for its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it is in its cycles.
    pub phase: Phase,
    /// Stopped (GC): no heartbeat, no check.
    pub paused: bool,
    /// Cut off from ZooKeeper (not from the storage).
    pub cut: bool,
    /// Acquisitions completed.
    pub cycles: u8,
    /// The `czxid` of its node: its place in the queue and its fencing token.
    pub token: u8,
    /// Which grant the current hold is (ghost state: the true order of grants).
    pub grant: u8,
    /// The last tick it heard from the server (its read timeout counts from here).
    pub last_heard: u8,
    /// Server side: its session exists.
    pub session: bool,
    /// Server side: the tick at which the session expires.
    pub expires: u8,
    /// Server side: its node exists.
    pub node: bool,
}

const IDLE: Client = Client {
    phase: Phase::Idle,
    paused: false,
    cut: false,
    cycles: 0,
    token: 0,
    grant: 0,
    last_heard: 0,
    session: false,
    expires: 0,
    node: false,
};

pub use crate::properties::Storage;

/// A state of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZkState {
    /// True time.
    pub t: u8,
    /// The last zxid given to a lock node.
    pub zxid: u8,
    /// Grants so far.
    pub grants: u8,
    /// Pauses used.
    pub pauses: u8,
    /// Partitions used.
    pub partitions: u8,
    /// The clients (only the first `clients` take part).
    pub clients: [Client; MAX_CLIENTS],
    /// The protected storage.
    pub storage: Storage,
}

/// A step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZkAction {
    /// True time advances: heartbeats, then the server's expiries, then each running client's
    /// own checks.
    Tick,
    /// `create /lock/lock- EPHEMERAL_SEQUENTIAL` (with a new session if it has none).
    Create(u8),
    /// Its node is the lowest: it holds.
    Acquire(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// `delete` its node and leave the critical section.
    Release(u8),
    /// A stop-the-world pause starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
    /// The client is cut off from ZooKeeper.
    Cut(u8),
    /// The cut heals.
    Heal(u8),
}

impl ZkSession {
    /// Ticks of silence after which the client reports `SUSPENDED` (two thirds of the timeout,
    /// at least one tick).
    fn suspend_after(&self) -> u8 {
        (2 * self.timeout / 3).max(1)
    }

    fn reaches_server(c: &Client) -> bool {
        !c.paused && !c.cut
    }

    fn lowest(s: &ZkState, n: usize) -> Option<u8> {
        s.clients[..n]
            .iter()
            .filter(|c| c.node)
            .map(|c| c.token)
            .min()
    }

    fn finish(&self, c: &mut Client) {
        c.cycles += 1;
        c.phase = if c.cycles >= self.cycles {
            Phase::Done
        } else {
            Phase::Idle
        };
        c.paused = false;
        c.grant = 0;
    }

    fn tick(&self, s: &mut ZkState) {
        s.t += 1;
        let t = s.t;
        let n = self.clients as usize;
        for c in s.clients[..n].iter_mut() {
            if c.session && Self::reaches_server(c) {
                c.expires = t + self.timeout;
                c.last_heard = t;
            }
        }
        for c in s.clients[..n].iter_mut() {
            if c.session && t >= c.expires {
                c.session = false;
                c.node = false;
            }
        }
        for i in 0..n {
            let c = s.clients[i];
            if c.paused {
                continue;
            }
            let lost = !c.session && !c.cut && c.phase != Phase::Idle && c.phase != Phase::Done;
            let suspended = self.listener && t - c.last_heard >= self.suspend_after();
            let c = &mut s.clients[i];
            match c.phase {
                Phase::Waiting if lost => c.phase = Phase::Idle,
                Phase::Holding if self.listener && (lost || suspended) => self.finish(c),
                _ => {}
            }
        }
    }
}

impl Model for ZkSession {
    type State = ZkState;
    type Action = ZkAction;

    fn init_states(&self) -> Vec<ZkState> {
        vec![ZkState {
            t: 0,
            zxid: 0,
            grants: 0,
            pauses: 0,
            partitions: 0,
            clients: [IDLE; MAX_CLIENTS],
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &ZkState, out: &mut Vec<ZkAction>) {
        let n = self.clients as usize;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            if c.paused {
                out.push(ZkAction::Resume(i));
                continue;
            }
            if c.cut {
                out.push(ZkAction::Heal(i));
            }
            match c.phase {
                Phase::Idle if !c.cut => out.push(ZkAction::Create(i)),
                Phase::Waiting if !c.cut && c.node && Self::lowest(s, n) == Some(c.token) => {
                    out.push(ZkAction::Acquire(i))
                }
                Phase::Holding => {
                    if needs_writes(self.property) {
                        out.push(ZkAction::Write(i));
                    }
                    out.push(ZkAction::Release(i));
                    if s.pauses < self.pauses {
                        out.push(ZkAction::Pause(i));
                    }
                    if s.partitions < self.partitions && !c.cut {
                        out.push(ZkAction::Cut(i));
                    }
                }
                _ => {}
            }
        }
        if s.t < self.time_bound {
            out.push(ZkAction::Tick);
        }
    }

    fn next_state(&self, last: &ZkState, action: ZkAction) -> Option<ZkState> {
        let mut s = *last;
        match action {
            ZkAction::Tick => self.tick(&mut s),
            ZkAction::Create(i) => {
                let t = s.t;
                s.zxid += 1;
                let zxid = s.zxid;
                let c = &mut s.clients[i as usize];
                if !c.session {
                    c.session = true;
                    c.expires = t + self.timeout;
                }
                c.last_heard = t;
                c.node = true;
                c.token = zxid;
                c.phase = Phase::Waiting;
            }
            ZkAction::Acquire(i) => {
                s.grants += 1;
                let grants = s.grants;
                let c = &mut s.clients[i as usize];
                c.phase = Phase::Holding;
                c.grant = grants;
            }
            ZkAction::Write(i) => {
                let c = s.clients[i as usize];
                if self.fencing && c.token < s.storage.max_token {
                    return None; // rejected by the fencing check
                }
                s.storage
                    .accept(c.grant, if self.fencing { c.token } else { 0 });
            }
            ZkAction::Release(i) => {
                let c = &mut s.clients[i as usize];
                if !c.cut {
                    // A delete from a cut client does not arrive: the node stays until expiry.
                    c.node = false;
                }
                self.finish(c);
            }
            ZkAction::Pause(i) => {
                s.clients[i as usize].paused = true;
                s.pauses += 1;
            }
            ZkAction::Resume(i) => s.clients[i as usize].paused = false,
            ZkAction::Cut(i) => {
                s.clients[i as usize].cut = true;
                s.partitions += 1;
            }
            ZkAction::Heal(i) => s.clients[i as usize].cut = false,
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();

    fn within_boundary(&self, _: &ZkState) -> bool {
        true
    }
}

properties::lock_state!(ZkState, |c: &Client| c.phase == Phase::Holding);

const PARAMS: &[ParamSpec] = &[
    params::CLIENTS,
    ParamSpec {
        name: "timeout",
        default: "3",
        help: "the negotiated session timeout, in ticks",
    },
    params::TIME_BOUND,
    params::CYCLES,
    ParamSpec {
        name: "pauses",
        default: "1",
        help: "how many stop-the-world pauses of a holder may happen (0 = none)",
    },
    ParamSpec {
        name: "partitions",
        default: "0",
        help: "how many cuts between a holder and ZooKeeper may happen (0 = none)",
    },
    ParamSpec {
        name: "listener",
        default: "false",
        help: "the holder gives the lock up on SUSPENDED (2/3 of the timeout unheard) or LOST",
    },
    ParamSpec {
        name: "fencing",
        default: "false",
        help: "the storage rejects a write whose node czxid is lower than one it accepted",
    },
    params::TICK_MS,
];

impl LockModel for ZkSession {
    const NAME: &'static str = "zk-session";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        Ok(ZkSession {
            clients: p.clients(MAX_CLIENTS)?,
            timeout: p.int("timeout", 2, 20)?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 5)?,
            pauses: p.int("pauses", 0, 5)?,
            partitions: p.int("partitions", 0, 5)?,
            listener: p.bool("listener")?,
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
        // The holder's session must be able to expire within the bound, and the next client
        // must then act: a tick after the timeout.
        let room = self.time_bound > self.timeout;
        let pause_breaks = self.pauses > 0;
        let cut_breaks = self.partitions > 0 && !self.listener;
        let unsafe_ = two && room && (pause_breaks || cut_breaks);
        match property {
            "mutual_exclusion" if unsafe_ => Expectation::Violated,
            "no_stale_write" if unsafe_ && !self.fencing => Expectation::Violated,
            "handover" => properties::handover_expected(self.clients, self.cycles),
            _ => Expectation::Holds,
        }
    }

    fn facts(&self, s: &ZkState) -> Vec<(String, String)> {
        let n = self.clients as usize;
        let mut f = vec![("zookeeper clock".to_string(), s.t.to_string())];
        let mut nodes: Vec<(u8, usize)> = s.clients[..n]
            .iter()
            .enumerate()
            .filter(|(_, c)| c.node)
            .map(|(i, c)| (c.token, i))
            .collect();
        nodes.sort_unstable();
        let nodes = if nodes.is_empty() {
            "no lock node".to_string()
        } else {
            nodes
                .iter()
                .map(|(z, i)| format!("lock-{z} of client-{i}'s session"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        f.push(("zookeeper".to_string(), nodes));
        for (i, c) in s.clients[..n].iter().enumerate() {
            let phase = match c.phase {
                Phase::Idle => "idle".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Waiting => format!("waits behind lock-{}", c.token),
                Phase::Holding => format!("HOLDS lock #{} (node czxid {})", c.grant, c.token),
            };
            let session = if c.session {
                format!("session expires at {}", c.expires)
            } else {
                "no session".to_string()
            };
            f.push((
                format!("client-{i}"),
                format!(
                    "{phase}; {session}{}{}",
                    if c.paused { ", PAUSED" } else { "" },
                    if c.cut { ", CUT OFF" } else { "" }
                ),
            ));
        }
        let st = &s.storage;
        let storage = if st.max_grant == 0 {
            "no writes".to_string()
        } else {
            format!(
                "newest accepted write from lock #{}{}{}",
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

    fn action_text(&self, s: &ZkState, a: &ZkAction) -> String {
        match *a {
            ZkAction::Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            ZkAction::Create(i) => format!(
                "client-{i}: create /lock/lock- EPHEMERAL_SEQUENTIAL -> lock-{}",
                s.zxid + 1
            ),
            ZkAction::Acquire(i) => format!(
                "client-{i}: getChildren /lock: lock-{} is the lowest, it holds",
                s.clients[i as usize].token
            ),
            ZkAction::Write(i) => format!(
                "client-{i} writes to the storage{}",
                if self.fencing {
                    format!(" with token {}", s.clients[i as usize].token)
                } else {
                    String::new()
                }
            ),
            ZkAction::Release(i) => {
                format!("client-{i} deletes its node and leaves its critical section")
            }
            ZkAction::Pause(i) => format!("client-{i} pauses (stop-the-world GC)"),
            ZkAction::Resume(i) => format!("client-{i} resumes"),
            ZkAction::Cut(i) => format!("client-{i} is cut off from ZooKeeper"),
            ZkAction::Heal(i) => format!("client-{i} reaches ZooKeeper again"),
        }
    }

    /// Not written: [`Scenario`] is Redis-shaped, with no `[zookeeper]` table; the note names
    /// the bundled scenario that replays this trace's fault ([`crate::zk_replay`]).
    fn scenario(&self, _property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let paused = path
            .iter()
            .any(|(_, a)| matches!(a, Some(ZkAction::Pause(_))));
        Err(crate::zk_replay::note(paused, self.listener, self.fencing))
    }
}

pub use crate::zk_replay::bundled_scenario;

#[cfg(test)]
mod tests {
    use crate::report::Finding;
    use crate::test_util::{actions, check};
    use crate::Strategy;

    #[test]
    fn a_paused_holder_loses_its_node_and_the_next_waiter_holds_in_eight_steps() {
        let r = check("zk-session", "mutual_exclusion", &[], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a.len(), 8, "{a:?}");
        assert_eq!(
            a[1],
            "client-0: getChildren /lock: lock-1 is the lowest, it holds"
        );
        assert_eq!(a[2], "client-0 pauses (stop-the-world GC)");
        assert_eq!(
            a[3],
            "client-1: create /lock/lock- EPHEMERAL_SEQUENTIAL -> lock-2"
        );
        assert!(a[4..7].iter().all(|s| s.starts_with("tick")), "{a:?}");
        assert_eq!(
            a[7],
            "client-1: getChildren /lock: lock-2 is the lowest, it holds"
        );
        assert!(r.to_scenario_toml().is_none());
        let text = r.to_text();
        assert!(text.contains("PAUSED"), "{text}");
        // The listener does not help a paused client: it runs only after the client resumes.
        let r = check(
            "zk-session",
            "mutual_exclusion",
            &[("listener", "true")],
            Strategy::Bfs,
        );
        assert_eq!(actions(&r).len(), 8);
        check(
            "zk-session",
            "no_stale_write",
            &[("listener", "true")],
            Strategy::Bfs,
        );
    }

    #[test]
    fn a_partition_breaks_the_plain_recipe_and_the_listener_closes_that_window() {
        let cut = [("pauses", "0"), ("partitions", "1")];
        let r = check("zk-session", "mutual_exclusion", &cut, Strategy::Bfs);
        assert!(actions(&r).contains(&"client-0 is cut off from ZooKeeper".to_string()));
        let cut = [("pauses", "0"), ("partitions", "2"), ("listener", "true")];
        let r = check("zk-session", "mutual_exclusion", &cut, Strategy::Dfs);
        let Finding::Holds { unique_states, .. } = r.outcome else {
            panic!("{}", r.to_text())
        };
        assert!(unique_states > 100, "{unique_states}");
        check("zk-session", "no_stale_write", &cut, Strategy::Dfs);
    }

    #[test]
    fn the_node_czxid_as_a_fencing_token_keeps_the_storage_safe_exhaustively() {
        let p = [("fencing", "true"), ("pauses", "2"), ("partitions", "1")];
        let r = check("zk-session", "no_stale_write", &p, Strategy::Dfs);
        let Finding::Holds { unique_states, .. } = r.outcome else {
            panic!("{}", r.to_text())
        };
        assert!(unique_states > 1000, "{unique_states}");
        // Fencing protects the storage, not the critical section.
        let r = check("zk-session", "mutual_exclusion", &p, Strategy::Bfs);
        assert!(r.trace().is_some());
    }

    #[test]
    fn without_faults_it_is_safe_and_the_lock_changes_hands() {
        let p = [("pauses", "0")];
        let r = check("zk-session", "mutual_exclusion", &p, Strategy::Dfs);
        assert!(
            matches!(r.outcome, Finding::Holds { .. }),
            "{}",
            r.to_text()
        );
        let r = check("zk-session", "handover", &p, Strategy::Bfs);
        assert!(r.witness.is_some());
    }
}
