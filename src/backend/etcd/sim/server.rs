//! The simulated etcd cluster of the etcd locks' runs: the members (madsim-side state: up or
//! crashed), the raft leader, and the one key space they agree on ([`EtcdEngine`]), which the
//! leader applies requests to on its own monotonic clock. What a request meets on the way
//! (latency, a partition, a crashed member) is in `etcd_conn.rs`.
//!
//! Raft itself is not simulated: every request is linearized at the leader at the instant it
//! arrives there. What the locks can see of raft is kept: no request completes while there is
//! no leader (a majority must be up: a crash that leaves a majority down makes the leader step
//! down, and no election is won until a majority runs again); a leader crash starts an election that takes one election
//! timeout plus a random part of another (raft's randomized timeout); the new leader extends
//! every lease (`Lessor.Promote`); lease expiry runs on the leader's clock every 500 ms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::backend::etcd::engine::{EtcdEngine, EXPIRY_LOOP_MS};
use crate::history::{EventKind, Recorder};
use crate::sim::clock::Clocks;
use crate::sim::entries::{Entry, EntryCreators};
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
    /// The lock whose entries the cluster watches ([`SimEtcd::watch_lock_entries`]).
    lock_key: Option<String>,
    /// Which client's request created each lock entry (key, create revision) still there.
    creators: EntryCreators,
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
                lock_key: None,
                creators: EntryCreators::default(),
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

    /// Makes the cluster compare the entries of the lock `key` ([`EtcdEngine::entries`]: the
    /// key itself and the keys under `key/`) before and after each request and each expiry
    /// loop, and record what went and why: an [`EventKind::EntryRemoved`] when a client's
    /// request removed an entry (a delete, a transaction's delete, a revocation of its lease by
    /// a client), an [`EventKind::EntryGone`] when the leader's expiry loop revoked its lease.
    /// Who removed whose entry is then what the cluster did. Clients are the nodes after the
    /// members (`Scenario::node_names`).
    pub(super) fn watch_lock_entries(&self, key: &str) {
        let mut c = self.cluster.lock().unwrap();
        c.lock_key = Some(key.to_string());
        c.creators = EntryCreators::start(&self.rec, key);
    }

    /// Records the lock entries that went between `before` and now (removed by client `by`'s
    /// request, or expired when `by` is `None`) and remembers who created the new ones.
    fn record_entry_changes(
        &self,
        c: &mut Cluster,
        leader: usize,
        by: Option<u32>,
        before: &[Entry],
    ) {
        let after = Self::entries(c);
        if after.as_slice() != before {
            c.creators
                .record_changes(&self.rec, &member_name(leader), by, before, &after);
        }
    }

    /// The lock entries now, if the cluster watches them.
    fn entries(c: &Cluster) -> Vec<Entry> {
        c.lock_key
            .as_ref()
            .map(|k| c.engine.entries(k))
            .unwrap_or_default()
    }

    /// Waits until there is a leader, then runs `f`, client `by`'s request, on the key space at
    /// the leader's monotonic time.
    pub(super) async fn on_leader<R>(&self, by: u32, f: impl Fn(&mut EtcdEngine, u64) -> R) -> R {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut c = self.cluster.lock().unwrap();
                if let Some(leader) = c.leader {
                    let now = self.clocks.monotonic_ms(leader);
                    c.requests += 1;
                    let before = Self::entries(&c);
                    let r = f(&mut c.engine, now);
                    self.record_entry_changes(&mut c, leader, Some(by), &before);
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
                        let before = Self::entries(&c);
                        let revoked = c.engine.expire(now);
                        self.record_entry_changes(&mut c, leader, None, &before);
                        revoked
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
    /// `elect` (called by the nemesis after the election delay) decides. If it leaves a
    /// majority of the members down, the leader that still runs steps down too: raft commits
    /// nothing without a quorum's acknowledgements, and etcd's leader (`CheckQuorum`) gives up
    /// leading once it has not heard from a quorum for an election timeout; the simulated one
    /// stops at once. Returns whether `m` led, and the leader that stepped down, if one did.
    pub(super) fn crash(&self, m: usize) -> (bool, Option<usize>) {
        let mut c = self.cluster.lock().unwrap();
        c.members[m].down = true;
        c.members[m].incarnation += 1;
        let led = c.leader == Some(m);
        if led {
            c.leader = None;
        }
        let stepped_down = c.leader.filter(|_| !quorum(&c.members));
        if stepped_down.is_some() {
            c.leader = None;
        }
        drop(c);
        self.changed.notify_waiters();
        (led, stepped_down)
    }

    /// How many members run.
    pub(super) fn running(&self) -> usize {
        let c = self.cluster.lock().unwrap();
        c.members.iter().filter(|m| !m.down).count()
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
        if !quorum(&c.members) {
            return None;
        }
        let up: Vec<usize> = (0..c.members.len())
            .filter(|&m| !c.members[m].down)
            .collect();
        let leader = up[(pick % up.len() as u64) as usize];
        let now = self.clocks.monotonic_ms(leader);
        c.engine.promote(now, self.election_ms);
        c.leader = Some(leader);
        drop(c);
        self.changed.notify_waiters();
        Some(leader)
    }
}

/// Whether a strict majority of `members` runs: raft's quorum, without which no entry commits
/// and no candidate wins an election.
fn quorum(members: &[Member]) -> bool {
    members.iter().filter(|m| !m.down).count() * 2 > members.len()
}
