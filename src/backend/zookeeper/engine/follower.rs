//! A follower of a ZooKeeper ensemble: its own copy of the data tree, which applies the leader's
//! committed transactions in zxid order some time after the leader committed them, and answers
//! the reads of the clients connected to it from what it has applied (ZooKeeper's
//! `FollowerZooKeeperServer`: writes and session changes go to the leader, reads are served
//! locally by `FinalRequestProcessor` after the `CommitProcessor`).
//!
//! So a read on a follower can be older than the leader's state — ZooKeeper promises sequential
//! consistency, not linearizable reads — but never older than the reading session's own writes:
//! the follower answers a session only once it has applied that session's last write (FIFO
//! client order; the caller waits for [`Follower::applied`] to reach the engine's
//! `last_write`). Watches left on a follower fire there, when it applies the change.
//!
//! This is the window of CURATOR-498 and CURATOR-604: a session's close (or expiry) is a
//! transaction of the leader; until a lagging follower applies it, the follower still lists the
//! closed session's ephemeral nodes to every other session.

use std::collections::VecDeque;

use crate::backend::zookeeper::engine::machine::{answer_read, Request, Response};
use crate::backend::zookeeper::engine::tree::Tree;
use crate::backend::zookeeper::engine::txn::{Committed, Txn};
use crate::backend::zookeeper::seam::{Stat, ZkError, ZkEvent};

/// One follower's applied state and the transactions on their way to it.
#[derive(Clone, Debug)]
pub struct Follower {
    tree: Tree,
    /// The zxid of the last transaction applied.
    applied: i64,
    /// Committed transactions not yet applied, each with the time (on the caller's clock) from
    /// which it is applied, in zxid order.
    pending: VecDeque<(u64, Committed)>,
}

impl Default for Follower {
    fn default() -> Self {
        Self::new()
    }
}

impl Follower {
    /// A follower of a fresh service (only `/` and `/zookeeper`, nothing applied): what every
    /// server of a new ensemble starts from.
    pub fn new() -> Follower {
        Follower {
            tree: Tree::new(),
            applied: 0,
            pending: VecDeque::new(),
        }
    }

    /// The leader committed `c`; the follower applies it from `due_ms` (its lag), never before
    /// the transactions committed earlier.
    pub fn receive(&mut self, due_ms: u64, c: Committed) {
        let due = self.pending.back().map_or(due_ms, |(d, _)| due_ms.max(*d));
        self.pending.push_back((due, c));
    }

    /// Applies every transaction due by `now_ms`, in zxid order; whether it applied any.
    pub fn apply_due(&mut self, now_ms: u64) -> bool {
        let mut any = false;
        while self.pending.front().is_some_and(|(due, _)| *due <= now_ms) {
            let (_, c) = self.pending.pop_front().expect("checked above");
            self.apply(c);
            any = true;
        }
        any
    }

    fn apply(&mut self, c: Committed) {
        let zxid = c.zxid;
        // A replay over the same tree cannot fail where the leader's write succeeded.
        match c.txn {
            Txn::CreateSession(_) => {}
            Txn::CloseSession(session) => self.tree.close_session(zxid, session),
            Txn::Create {
                owner,
                path,
                name,
                data,
                mode,
            } => {
                let made = self.tree.create(zxid, owner, &path, &data, mode);
                debug_assert_eq!(made.map(|(n, _)| n).as_ref(), Ok(&name));
            }
            Txn::Delete { path } => {
                let done = self.tree.delete(zxid, &path, None);
                debug_assert!(done.is_ok(), "{done:?}");
            }
            Txn::SetData { path, data } => {
                let done = self.tree.set_data(zxid, &path, &data, None);
                debug_assert!(done.is_ok(), "{done:?}");
            }
        }
        self.applied = zxid;
    }

    /// The zxid of the last transaction this follower applied.
    pub fn applied(&self) -> i64 {
        self.applied
    }

    /// When the next pending transaction is due, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.pending.front().map(|(due, _)| *due)
    }

    /// When the transaction `zxid` (or the first after it) is due, if it is still pending.
    pub fn due_of(&self, zxid: i64) -> Option<u64> {
        self.pending
            .iter()
            .find(|(_, c)| c.zxid >= zxid)
            .map(|(due, _)| *due)
    }

    /// Answers a read of `session` from the applied state (a watch is left here, and fires when
    /// this follower applies the change). The caller has checked the session and waited for
    /// its writes (see the module docs).
    pub fn read(&mut self, session: i64, request: Request) -> Result<Response, ZkError> {
        answer_read(&mut self.tree, session, request)
    }

    /// The watch notifications fired by the transactions applied since the last call.
    pub fn take_notifications(&mut self) -> Vec<(i64, ZkEvent)> {
        self.tree.take_fired()
    }

    /// Every node's path and `Stat` as this follower has them, in path order.
    pub fn dump(&self) -> Vec<(String, Stat)> {
        self.tree.dump()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::zookeeper::engine::machine::tests::create;
    use crate::backend::zookeeper::engine::{ZkConfig, ZkEngine};
    use crate::backend::zookeeper::seam::CreateMode;

    fn children(path: &str) -> Request {
        Request::GetChildren {
            path: path.into(),
            watch: false,
        }
    }

    /// Feeds the engine's commits to `f`, due `lag` after `now`.
    fn ship(zk: &mut ZkEngine, f: &mut Follower, now: u64, lag: u64) {
        for c in zk.take_committed() {
            f.receive(now + lag, c);
        }
    }

    /// A leader that keeps its commits for a follower, and a fresh follower.
    fn leader_and_follower() -> (ZkEngine, Follower) {
        let mut zk = ZkEngine::new(ZkConfig::with_tick(100));
        zk.record_commits();
        (zk, Follower::new())
    }

    #[test]
    fn a_lagging_follower_lists_an_expired_sessions_node_until_it_applies_the_close() {
        let (mut zk, mut f) = leader_and_follower();
        let (a, _) = zk.connect(0, 1_000);
        zk.request(0, a, create("/lock", CreateMode::Persistent))
            .unwrap();
        zk.request(0, a, create("/lock/n-", CreateMode::EphemeralSequential))
            .unwrap();
        ship(&mut zk, &mut f, 0, 300);
        assert!(!f.apply_due(299));
        assert!(f.apply_due(300));
        assert_eq!(f.applied(), zk.last_write(a));
        // The leader expires `a` at 1 100; the follower hears of it 300 ms later.
        assert_eq!(zk.expire_due(1_100), vec![a]);
        ship(&mut zk, &mut f, 1_100, 300);
        let (b, _) = zk.connect_local(1_150, 1_000);
        assert_eq!(zk.last_write(b), 0, "a local session has no transaction");
        assert!(!f.apply_due(1_150) && f.applied() < zk.zxid());
        assert_eq!(
            f.read(b, children("/lock")).unwrap(),
            Response::Children(vec!["n-0000000000".into()])
        );
        assert_eq!(
            zk.request(1_150, b, children("/lock")).unwrap(),
            Response::Children(vec![])
        );
        assert!(f.apply_due(1_400));
        assert_eq!(f.applied(), zk.zxid());
        assert_eq!(
            f.read(b, children("/lock")).unwrap(),
            Response::Children(vec![])
        );
        assert_eq!(f.dump(), zk.dump());
    }

    #[test]
    fn a_local_session_becomes_global_with_its_first_ephemeral_node_and_watches_fire_on_apply() {
        let (mut zk, mut f) = leader_and_follower();
        let (a, _) = zk.connect_local(0, 1_000);
        let before = zk.zxid();
        zk.request(0, a, create("/lock", CreateMode::Persistent))
            .unwrap();
        assert_eq!(zk.zxid(), before + 1, "a persistent node needs no upgrade");
        let Response::Created(mine, stat) = zk
            .request(0, a, create("/lock/n-", CreateMode::EphemeralSequential))
            .unwrap()
        else {
            panic!("not created")
        };
        // The upgrade's createSession came first, then the create.
        assert_eq!(stat.czxid, before + 3);
        assert_eq!(zk.last_write(a), before + 3);
        let (w, _) = zk.connect(0, 1_000);
        ship(&mut zk, &mut f, 0, 100);
        f.apply_due(100);
        assert!(
            f.read(
                w,
                Request::Exists {
                    path: mine.clone(),
                    watch: true
                }
            )
            .unwrap()
                != Response::Exists(None)
        );
        zk.request(200, a, Request::Close).unwrap();
        ship(&mut zk, &mut f, 200, 100);
        f.apply_due(299);
        assert!(f.take_notifications().is_empty());
        f.apply_due(300);
        assert_eq!(
            f.take_notifications(),
            vec![(w, ZkEvent::NodeDeleted(mine))]
        );
    }

    #[test]
    fn transactions_apply_in_zxid_order_even_when_a_later_one_is_due_sooner() {
        let (mut zk, mut f) = leader_and_follower();
        let (a, _) = zk.connect(0, 1_000);
        zk.request(0, a, create("/x", CreateMode::Persistent))
            .unwrap();
        ship(&mut zk, &mut f, 0, 500);
        zk.request(10, a, create("/x/y", CreateMode::Persistent))
            .unwrap();
        ship(&mut zk, &mut f, 10, 0);
        assert!(!f.apply_due(10), "the child cannot come before its parent");
        assert_eq!(f.due_of(zk.zxid()), Some(500));
        f.apply_due(500);
        assert_eq!(f.applied(), zk.zxid());
    }
}
