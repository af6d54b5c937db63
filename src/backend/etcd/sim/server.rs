//! The simulated etcd cluster of the etcd locks' runs: the members (madsim-side state: up or
//! crashed), the raft leader, and the one key space they agree on ([`EtcdEngine`]), which the
//! leader applies requests to on its own monotonic clock. What a request meets on the way
//! (latency, a partition, a crashed member) is in `etcd_conn.rs`.
//!
//! Raft itself is not simulated: every request is linearized at the leader at the instant it
//! arrives there. What the locks can see of raft is kept: no request completes while there is
//! no leader (a majority must be up); a leader crash starts an election that takes one election
//! timeout plus a random part of another (raft's randomized timeout); the new leader extends
//! every lease (`Lessor.Promote`); lease expiry runs on the leader's clock every 500 ms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::backend::etcd::engine::{EtcdEngine, EXPIRY_LOOP_MS};
use crate::history::{EventKind, Recorder};
use crate::sim::clock::Clocks;
use crate::sim::network::Network;

/// One member: whether it runs, and its incarnation (bumped by each crash, so an answer from
/// before the crash is never delivered).
#[derive(Clone, Copy, Debug, Default)]
struct Member {
    down: bool,
    incarnation: u64,
}

struct Cluster {
    engine: EtcdEngine,
    members: Vec<Member>,
    leader: Option<usize>,
    /// An election is under way (one is scheduled and not yet decided).
    electing: bool,
    requests: u64,
}

/// The simulated etcd cluster, shared by its clients and the nemesis. Members are the nodes
/// `0..members` (named `etcd-<i>`), before the clients.
#[derive(Clone)]
pub struct SimEtcd {
    cluster: Arc<Mutex<Cluster>>,
    /// Signalled after every change of the key space or of the leader: watches and requests
    /// waiting for a leader look again.
    changed: Arc<Notify>,
    pub(super) net: Network,
    clocks: Clocks,
    rec: Recorder,
    election_ms: u64,
}

/// The node name of member `i` (faults name it).
pub fn member_name(i: usize) -> String {
    format!("etcd-{i}")
}

impl SimEtcd {
    /// A cluster of `members` members whose first leader is member 0 (elected before the run
    /// starts), granting leases of at least `min_ttl_s`.
    pub(super) fn new(
        members: usize,
        min_ttl_s: i64,
        election_ms: u64,
        net: Network,
        clocks: Clocks,
        rec: Recorder,
    ) -> SimEtcd {
        SimEtcd {
            cluster: Arc::new(Mutex::new(Cluster {
                engine: EtcdEngine::new(min_ttl_s),
                members: vec![Member::default(); members],
                leader: Some(0),
                electing: false,
                requests: 0,
            })),
            changed: Arc::new(Notify::new()),
            net,
            clocks,
            rec,
            election_ms,
        }
    }

    /// How many members the cluster has.
    pub(super) fn members(&self) -> usize {
        self.cluster.lock().unwrap().members.len()
    }

    /// Requests the leader has applied.
    pub(super) fn requests(&self) -> u64 {
        self.cluster.lock().unwrap().requests
    }

    /// The current leader, if there is one.
    pub(super) fn leader(&self) -> Option<usize> {
        self.cluster.lock().unwrap().leader
    }

    /// Whether member `m` runs, and its incarnation.
    pub(super) fn member(&self, m: usize) -> (bool, u64) {
        let c = self.cluster.lock().unwrap();
        (!c.members[m].down, c.members[m].incarnation)
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// Waits until there is a leader, then runs `f` on the key space at the leader's monotonic
    /// time. Returns the leader too, so the caller knows which member answered.
    pub(super) async fn on_leader<R>(&self, f: impl Fn(&mut EtcdEngine, u64) -> R) -> R {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut c = self.cluster.lock().unwrap();
                if let Some(leader) = c.leader {
                    let now = self.clocks.monotonic_ms(leader);
                    c.requests += 1;
                    let r = f(&mut c.engine, now);
                    drop(c);
                    self.changed.notify_waiters();
                    return r;
                }
            }
            notified.await;
        }
    }

    /// Waits until `ready` finds something in the key space (a watch's event).
    pub(super) async fn watch<R>(&self, ready: impl Fn(&EtcdEngine) -> Option<R>) -> R {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = ready(&self.cluster.lock().unwrap().engine) {
                return r;
            }
            notified.await;
        }
    }

    /// The leader's expiry loop, forever: every 500 ms the leader revokes the leases that expired
    /// on its clock. Spawn it on the cluster's node.
    pub(super) async fn expiry_loop(self) {
        loop {
            madsim::time::sleep(Duration::from_millis(EXPIRY_LOOP_MS)).await;
            let revoked = {
                let mut c = self.cluster.lock().unwrap();
                match c.leader {
                    Some(leader) => {
                        let now = self.clocks.monotonic_ms(leader);
                        c.engine.expire(now)
                    }
                    None => Vec::new(),
                }
            };
            if !revoked.is_empty() {
                let ids: Vec<String> = revoked.iter().map(|id| format!("{id:x}")).collect();
                self.note(format!(
                    "etcd revoked expired lease(s) {} (their keys deleted)",
                    ids.join(", ")
                ));
                self.changed.notify_waiters();
            }
        }
    }

    /// Member `m` crashes. If it led, the cluster has no leader until an election, which
    /// `elect` (called by the nemesis after the election delay) decides.
    pub(super) fn crash(&self, m: usize) -> bool {
        let mut c = self.cluster.lock().unwrap();
        c.members[m].down = true;
        c.members[m].incarnation += 1;
        let led = c.leader == Some(m);
        if led {
            c.leader = None;
        }
        drop(c);
        self.changed.notify_waiters();
        led
    }

    /// Member `m` starts again (its data survived: raft's log and the key space are the
    /// cluster's).
    pub(super) fn restart(&self, m: usize) {
        self.cluster.lock().unwrap().members[m].down = false;
        self.changed.notify_waiters();
    }

    /// How long the next election takes: one election timeout and a random part of another.
    pub(super) fn election_delay(&self, random: u64) -> Duration {
        Duration::from_millis(self.election_ms + random % self.election_ms.max(1))
    }

    /// Whether an election should be scheduled now: no leader, none under way. Marks one as
    /// under way.
    pub(super) fn start_election(&self) -> bool {
        let mut c = self.cluster.lock().unwrap();
        if c.leader.is_some() || c.electing {
            return false;
        }
        c.electing = true;
        true
    }

    /// Decides an election: the running member `pick` (drawn by the caller) among those up
    /// becomes leader if a majority runs, and extends every lease by an election timeout. With no
    /// majority nobody leads; the next restart starts another election. Returns the new leader.
    pub(super) fn elect(&self, pick: u64) -> Option<usize> {
        let mut c = self.cluster.lock().unwrap();
        c.electing = false;
        if c.leader.is_some() {
            return c.leader;
        }
        let up: Vec<usize> = (0..c.members.len())
            .filter(|&m| !c.members[m].down)
            .collect();
        if up.len() * 2 <= c.members.len() {
            return None;
        }
        let leader = up[(pick % up.len() as u64) as usize];
        let now = self.clocks.monotonic_ms(leader);
        c.engine.promote(now, self.election_ms);
        c.leader = Some(leader);
        drop(c);
        self.changed.notify_waiters();
        Some(leader)
    }
}
