//! The simulated PostgreSQL deployment: the primary `pg-0`, a streaming standby `pg-1` when
//! the scenario has one, on the simulated network, with what the server does by itself between
//! statements (idle timeouts, TCP keepalive giving up on a client that is gone).
//!
//! - A crash of the primary ends every session; its advisory locks are gone (they live in
//!   shared memory). It answers again after `restart_after_ms`, with no locks.
//! - A failover: the primary dies and, `failover_detect_ms` later, the standby is promoted.
//!   Advisory locks are never WAL-logged, so the promoted standby starts with none while the
//!   old holders, which learn of the loss only on their next statement, still believe they
//!   hold (prometheus-postgresql-adapter#91).
//! - TCP keepalive: a client whose socket is gone without a `FIN` reaching the server (cut off
//!   by a partition, or closed behind one) keeps its backend, and so its locks, until keepalive
//!   gives up: `keepalive_idle_s + keepalive_interval_s × keepalive_count` after the link went
//!   quiet (liquibase#872: five minutes with the cable out; two hours and more by default). A
//!   paused client's kernel still answers the probes, so a pause never ends a session.

use crate::backend::postgres::engine::{Key, SessionId, Settings};
use crate::backend::postgres::sim::session::SharedPg;
use crate::history::{EventKind, Recorder};
use crate::sim::network::Network;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::backend::postgres::table::{BOUNCER, PRIMARY, STANDBY};

/// Who a backend serves, for the server's keepalive: the node at the other end of its socket.
#[derive(Clone, Copy, Debug)]
struct Peer {
    node: usize,
    /// The client closed its socket but the server did not hear it (a `FIN` lost in a cut).
    gone: bool,
    /// Since when the peer has not answered (ms, true time): keepalive counts from here.
    quiet_since: Option<u64>,
}

struct State {
    server: SharedPg,
    /// The node index of the server now primary.
    primary: usize,
    up: bool,
    /// Bumped by each crash or promotion: a connection of an earlier one is reset.
    incarnation: u64,
    statements: u64,
    peers: BTreeMap<SessionId, Peer>,
    /// Whether the standby runs (a crash of `pg-1` stops it until it restarts).
    standby_up: bool,
    /// The server session each client's statements run on now (its own, or the connection a
    /// pooler lent it): what a `terminate` of that client ends.
    clients: BTreeMap<u32, SessionId>,
}

/// The simulated deployment, shared by its connections, pooler and nemesis.
#[derive(Clone)]
pub struct SimPg {
    state: Arc<Mutex<State>>,
    /// The network every node is on.
    pub net: Network,
    rec: Recorder,
    /// `pg-0`'s and `pg-1`'s node indexes (the standby's `None` without one).
    nodes: (usize, Option<usize>),
    keepalive_ms: u64,
}

impl SimPg {
    /// A deployment whose primary is node `primary` (and standby `standby`), with `settings`.
    pub fn new(
        settings: Settings,
        net: Network,
        rec: Recorder,
        nodes: (usize, Option<usize>),
        keepalive_ms: u64,
    ) -> SimPg {
        let clock = {
            let rec = rec.clone();
            move || rec.now_us() / 1000
        };
        SimPg {
            state: Arc::new(Mutex::new(State {
                server: SharedPg::new(settings, clock),
                primary: nodes.0,
                up: true,
                incarnation: 0,
                statements: 0,
                peers: BTreeMap::new(),
                standby_up: true,
                clients: BTreeMap::new(),
            })),
            net,
            rec,
            nodes,
            keepalive_ms,
        }
    }

    /// The server process now primary.
    pub fn server(&self) -> SharedPg {
        self.state.lock().unwrap().server.clone()
    }

    /// The node index of the server now primary.
    pub fn primary(&self) -> usize {
        self.state.lock().unwrap().primary
    }

    /// Whether the primary answers.
    pub fn up(&self) -> bool {
        self.state.lock().unwrap().up
    }

    /// The primary's incarnation (each crash or promotion bumps it).
    pub fn incarnation(&self) -> u64 {
        self.state.lock().unwrap().incarnation
    }

    /// Counts a statement the server ran.
    pub fn count_statement(&self) {
        self.state.lock().unwrap().statements += 1;
    }

    /// Statements the servers ran.
    pub fn statements(&self) -> u64 {
        self.state.lock().unwrap().statements
    }

    /// Notes that `session` serves a socket from node `node` (for keepalive).
    pub fn track(&self, session: SessionId, node: usize) {
        self.state.lock().unwrap().peers.insert(
            session,
            Peer {
                node,
                gone: false,
                quiet_since: None,
            },
        );
    }

    /// The client closed its socket behind a cut: the backend lives until keepalive.
    pub fn peer_gone(&self, session: SessionId) {
        if let Some(p) = self.state.lock().unwrap().peers.get_mut(&session) {
            p.gone = true;
        }
    }

    /// Forgets a session that ended.
    pub fn untrack(&self, session: SessionId) {
        self.state.lock().unwrap().peers.remove(&session);
    }

    /// Notes the server session client `client` runs on now (`None`: none).
    pub fn client_session(&self, client: u32, session: Option<SessionId>) {
        let mut s = self.state.lock().unwrap();
        match session {
            Some(id) => s.clients.insert(client, id),
            None => s.clients.remove(&client),
        };
    }

    /// The server session client `client` runs on now, if it has one.
    pub fn session_of(&self, client: u32) -> Option<SessionId> {
        self.state.lock().unwrap().clients.get(&client).copied()
    }

    /// The primary dies: every session and lock goes.
    pub fn crash(&self) {
        let server = {
            let mut s = self.state.lock().unwrap();
            s.up = false;
            s.incarnation += 1;
            s.peers.clear();
            s.server.clone()
        };
        server.crash();
    }

    /// The primary answers again (crash recovery: no sessions, no locks).
    pub fn restart(&self) {
        self.state.lock().unwrap().up = true;
    }

    /// Whether the deployment has a running standby to promote (and has not promoted it yet).
    pub fn has_standby(&self) -> bool {
        let s = self.state.lock().unwrap();
        s.standby_up && self.nodes.1.is_some_and(|n| n != s.primary)
    }

    /// The standby stops (`up = false`) or runs again, caught up from the primary's WAL.
    pub fn set_standby_up(&self, up: bool) {
        self.state.lock().unwrap().standby_up = up;
    }

    /// Whether `pg-1` is the primary now (it was promoted).
    pub fn promoted(&self) -> bool {
        let s = self.state.lock().unwrap();
        self.nodes.1 == Some(s.primary)
    }

    /// The standby becomes primary: the old primary's sequences as the WAL has them, no locks.
    pub fn promote(&self) {
        let mut s = self.state.lock().unwrap();
        let Some(standby) = self.nodes.1 else { return };
        s.server = s.server.promoted_standby();
        s.primary = standby;
        s.up = true;
        s.incarnation += 1;
        s.peers.clear();
    }

    /// The sessions holding advisory lock `key` on the primary.
    pub fn holders(&self, key: Key) -> Vec<SessionId> {
        self.server().read(|e| e.holders(key))
    }

    fn node_name(&self, index: usize) -> String {
        if index == self.nodes.0 {
            PRIMARY.into()
        } else if Some(index) == self.nodes.1 {
            STANDBY.into()
        } else {
            format!("node {index}")
        }
    }

    /// What the server does by itself, every 100 ms of true time: lets the engine end idle
    /// sessions (recorded), and ends the backends whose peer keepalive gave up on.
    pub async fn housekeeping(self, names: BTreeMap<usize, String>) {
        loop {
            madsim::time::sleep(Duration::from_millis(100)).await;
            if !self.up() {
                continue;
            }
            let server = self.server();
            server.wake();
            let here = self.node_name(self.primary());
            let who = |s: &SimPg, session: SessionId| {
                let node = s.state.lock().unwrap().peers.get(&session).map(|p| p.node);
                node.and_then(|n| names.get(&n).cloned())
                    .unwrap_or_else(|| format!("session {session}"))
            };
            for (session, why) in server.take_ended() {
                let peer = who(&self, session);
                self.untrack(session);
                self.rec.record(
                    "nemesis",
                    EventKind::Fault {
                        what: format!("{here} ended the session of {peer}: {why}"),
                    },
                );
            }
            let now = self.rec.now_us() / 1000;
            let primary = self.primary();
            let mut given_up = Vec::new();
            {
                let mut s = self.state.lock().unwrap();
                for (session, p) in s.peers.iter_mut() {
                    let answers = !p.gone
                        && self.net.reachable(primary, p.node)
                        && self.net.reachable(p.node, primary);
                    if answers {
                        p.quiet_since = None;
                        continue;
                    }
                    let since = *p.quiet_since.get_or_insert(now);
                    if now.saturating_sub(since) >= self.keepalive_ms {
                        given_up.push(*session);
                    }
                }
            }
            for session in given_up {
                let peer = who(&self, session);
                self.untrack(session);
                if server.read(|e| e.is_connected(session)) {
                    server.disconnect(session);
                    self.rec.record(
                        "nemesis",
                        EventKind::Fault {
                            what: format!(
                                "{here}'s TCP keepalive gave up on {peer} after {} ms: its session and its locks end",
                                self.keepalive_ms
                            ),
                        },
                    );
                }
            }
        }
    }
}
