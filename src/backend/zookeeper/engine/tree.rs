//! The simulated ZooKeeper's data tree: znodes with their `Stat`, the ephemeral nodes of each
//! session, and the one-shot watches, as ZooKeeper's `DataTree` and `WatchManager` keep them.
//!
//! What it keeps of ZooKeeper's bookkeeping, checked against ZooKeeper 3.8 by hand (and by the
//! differential test): a sequential child is named after the number of children its parent has
//! ever had created (a deleted child's number is never reused), while the parent's `cversion`
//! counts creations and deletions both; `pzxid` is the zxid of the last change of the children;
//! a delete leaves the parent's data `version` alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::zookeeper::seam::{CreateMode, Stat, ZkError, ZkEvent};

/// One znode.
#[derive(Clone, Debug)]
struct Znode {
    data: Vec<u8>,
    stat: Stat,
    /// How many children were ever created under it: the next sequential child's number.
    sequence: u64,
    children: BTreeSet<String>,
}

/// What a one-shot watch was set by: `exists`/`getData` watch the node, `getChildren` its
/// children.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WatchKind {
    /// Set by `exists` or `getData`.
    Data,
    /// Set by `getChildren`.
    Children,
}

/// The tree: every znode by path, and the watches.
#[derive(Clone, Debug)]
pub struct Tree {
    nodes: BTreeMap<String, Znode>,
    /// (path, kind) → the sessions watching it. A `BTreeMap`, so events come out in one order.
    watches: BTreeMap<(String, WatchKind), BTreeSet<i64>>,
    /// Notifications not yet taken by the server loop: (session, event), in zxid order.
    fired: Vec<(i64, ZkEvent)>,
}

fn parent_of(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    let at = path.rfind('/')?;
    Some(if at == 0 { "/" } else { &path[..at] })
}

/// ZooKeeper's path rules that a lock can meet: absolute, no trailing or doubled slash.
fn check_path(path: &str, sequential: bool) -> Result<(), ZkError> {
    let bad = !path.starts_with('/')
        || path.contains("//")
        || (path.len() > 1 && path.ends_with('/') && !sequential)
        || path.split('/').any(|part| part == "." || part == "..");
    if bad {
        return Err(ZkError::BadArguments(format!("invalid path {path:?}")));
    }
    Ok(())
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// A tree with the root `/` and ZooKeeper's own `/zookeeper` (so the root's counters match
    /// a fresh server's).
    pub fn new() -> Tree {
        let mut tree = Tree {
            nodes: BTreeMap::new(),
            watches: BTreeMap::new(),
            fired: Vec::new(),
        };
        let empty = Znode {
            data: Vec::new(),
            stat: Stat {
                czxid: 0,
                mzxid: 0,
                pzxid: 0,
                version: 0,
                cversion: 0,
                ephemeral_owner: 0,
                data_length: 0,
                num_children: 0,
            },
            sequence: 0,
            children: BTreeSet::new(),
        };
        // ZooKeeper's root holds its own /zookeeper from the start, made without a transaction.
        let mut root = empty.clone();
        root.stat.num_children = 1;
        root.children.insert("zookeeper".into());
        tree.nodes.insert("/".into(), root);
        tree.nodes.insert("/zookeeper".into(), empty);
        tree
    }

    /// Creates a node at `zxid`; returns its name (with the sequence number for a sequential
    /// mode) and its `Stat`. `owner` is the creating session (kept for an ephemeral node).
    pub fn create(
        &mut self,
        zxid: i64,
        owner: i64,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), ZkError> {
        check_path(path, mode.is_sequential())?;
        let parent_path = parent_of(path)
            .ok_or_else(|| ZkError::NodeExists(path.to_string()))?
            .to_string();
        let parent = self
            .nodes
            .get(&parent_path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if parent.stat.ephemeral_owner != 0 {
            return Err(ZkError::NoChildrenForEphemerals(path.to_string()));
        }
        let name = if mode.is_sequential() {
            format!("{path}{:010}", parent.sequence)
        } else {
            path.to_string()
        };
        if self.nodes.contains_key(&name) {
            return Err(ZkError::NodeExists(name));
        }
        let stat = Stat {
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            version: 0,
            cversion: 0,
            ephemeral_owner: if mode.is_ephemeral() { owner } else { 0 },
            data_length: data.len() as i32,
            num_children: 0,
        };
        let child = name[parent_path.len()..]
            .trim_start_matches('/')
            .to_string();
        let parent = self.nodes.get_mut(&parent_path).expect("checked above");
        parent.sequence += 1;
        parent.stat.cversion += 1;
        parent.stat.pzxid = zxid;
        parent.stat.num_children += 1;
        parent.children.insert(child);
        self.nodes.insert(
            name.clone(),
            Znode {
                data: data.to_vec(),
                stat,
                sequence: 0,
                children: BTreeSet::new(),
            },
        );
        self.fire(&name, WatchKind::Data, ZkEvent::NodeCreated(name.clone()));
        self.fire(
            &parent_path,
            WatchKind::Children,
            ZkEvent::NodeChildrenChanged(parent_path.clone()),
        );
        Ok((name, stat))
    }

    /// Deletes a node at `zxid` if its version is `version` (`None`: any).
    pub fn delete(&mut self, zxid: i64, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        check_path(path, false)?;
        let Some(parent_path) = parent_of(path).map(str::to_string) else {
            return Err(ZkError::BadArguments("the root cannot be deleted".into()));
        };
        let node = self
            .nodes
            .get(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if version.is_some_and(|v| v != node.stat.version) {
            return Err(ZkError::BadVersion(path.to_string()));
        }
        if !node.children.is_empty() {
            return Err(ZkError::NotEmpty(path.to_string()));
        }
        self.nodes.remove(path);
        let child = path[parent_path.len()..].trim_start_matches('/');
        if let Some(parent) = self.nodes.get_mut(&parent_path) {
            parent.children.remove(child);
            parent.stat.cversion += 1;
            parent.stat.num_children -= 1;
            if zxid > parent.stat.pzxid {
                parent.stat.pzxid = zxid;
            }
        }
        self.fire(
            path,
            WatchKind::Data,
            ZkEvent::NodeDeleted(path.to_string()),
        );
        self.fire(
            path,
            WatchKind::Children,
            ZkEvent::NodeDeleted(path.to_string()),
        );
        self.fire(
            &parent_path,
            WatchKind::Children,
            ZkEvent::NodeChildrenChanged(parent_path.clone()),
        );
        Ok(())
    }

    /// Replaces a node's data at `zxid` if its version is `version` (`None`: any).
    pub fn set_data(
        &mut self,
        zxid: i64,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Stat, ZkError> {
        let node = self
            .nodes
            .get_mut(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if version.is_some_and(|v| v != node.stat.version) {
            return Err(ZkError::BadVersion(path.to_string()));
        }
        node.data = data.to_vec();
        node.stat.version += 1;
        node.stat.mzxid = zxid;
        node.stat.data_length = data.len() as i32;
        let stat = node.stat;
        self.fire(
            path,
            WatchKind::Data,
            ZkEvent::NodeDataChanged(path.to_string()),
        );
        Ok(stat)
    }

    /// The node's `Stat`, if it exists; with `watch`, `session` watches the path (a watch is
    /// left on a missing path too, to hear of its creation).
    pub fn exists(
        &mut self,
        session: i64,
        path: &str,
        watch: bool,
    ) -> Result<Option<Stat>, ZkError> {
        check_path(path, false)?;
        if watch {
            self.watch(session, path, WatchKind::Data);
        }
        Ok(self.nodes.get(path).map(|n| n.stat))
    }

    /// The node's data and `Stat`; with `watch`, a data watch (only on an existing node).
    pub fn get_data(
        &mut self,
        session: i64,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), ZkError> {
        check_path(path, false)?;
        let node = self
            .nodes
            .get(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        let found = (node.data.clone(), node.stat);
        if watch {
            self.watch(session, path, WatchKind::Data);
        }
        Ok(found)
    }

    /// The names of the node's children, sorted; with `watch`, a child watch.
    pub fn get_children(
        &mut self,
        session: i64,
        path: &str,
        watch: bool,
    ) -> Result<Vec<String>, ZkError> {
        check_path(path, false)?;
        let node = self
            .nodes
            .get(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        let children = node.children.iter().cloned().collect();
        if watch {
            self.watch(session, path, WatchKind::Children);
        }
        Ok(children)
    }

    /// The children of `dir` (full paths) with the zxid that created each, in name order;
    /// none if `dir` does not exist.
    pub fn children_created(&self, dir: &str) -> Vec<(String, i64)> {
        let Some(node) = self.nodes.get(dir) else {
            return Vec::new();
        };
        node.children
            .iter()
            .filter_map(|c| {
                let path = format!("{dir}/{c}");
                let czxid = self.nodes.get(&path)?.stat.czxid;
                Some((path, czxid))
            })
            .collect()
    }

    /// The ephemeral nodes `session` owns, deepest first (the order a close deletes them in).
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        let mut owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == session)
            .map(|(p, _)| p.clone())
            .collect();
        owned.reverse();
        owned
    }

    /// Ends `session` at `zxid`: deletes its ephemeral nodes (firing their watches) and drops
    /// the watches it had set.
    pub fn close_session(&mut self, zxid: i64, session: i64) {
        for path in self.ephemerals_of(session) {
            // An ephemeral node has no children, so its delete cannot fail.
            let _ = self.delete(zxid, &path, None);
        }
        for watchers in self.watches.values_mut() {
            watchers.remove(&session);
        }
        self.watches.retain(|_, watchers| !watchers.is_empty());
    }

    fn watch(&mut self, session: i64, path: &str, kind: WatchKind) {
        self.watches
            .entry((path.to_string(), kind))
            .or_default()
            .insert(session);
    }

    fn fire(&mut self, path: &str, kind: WatchKind, event: ZkEvent) {
        if let Some(watchers) = self.watches.remove(&(path.to_string(), kind)) {
            for session in watchers {
                // A session that watched a node both ways hears of its deletion once, as
                // ZooKeeper delivers one event per watcher object.
                if !self.fired.contains(&(session, event.clone())) {
                    self.fired.push((session, event.clone()));
                }
            }
        }
    }

    /// The notifications fired since the last call, in the order their writes were applied.
    pub fn take_fired(&mut self) -> Vec<(i64, ZkEvent)> {
        std::mem::take(&mut self.fired)
    }

    /// Every node's path and `Stat`, in path order (for the differential test and the history).
    pub fn dump(&self) -> Vec<(String, Stat)> {
        self.nodes
            .iter()
            .map(|(p, n)| (p.clone(), n.stat))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_child_is_numbered_by_creations_and_cversion_counts_deletions_too() {
        // What ZooKeeper 3.8 answered: x0, x1; delete x1; the next is x2, cversion 4.
        let mut t = Tree::new();
        t.create(2, 1, "/a", b"", CreateMode::Persistent).unwrap();
        let (x0, _) = t
            .create(4, 1, "/a/x", b"", CreateMode::PersistentSequential)
            .unwrap();
        let (x1, _) = t
            .create(5, 1, "/a/x", b"", CreateMode::PersistentSequential)
            .unwrap();
        assert_eq!(
            (x0.as_str(), x1.as_str()),
            ("/a/x0000000000", "/a/x0000000001")
        );
        t.delete(7, &x1, None).unwrap();
        let (x2, _) = t
            .create(9, 1, "/a/x", b"", CreateMode::PersistentSequential)
            .unwrap();
        assert_eq!(x2, "/a/x0000000002");
        let a = t.exists(1, "/a", false).unwrap().unwrap();
        assert_eq!((a.cversion, a.num_children, a.pzxid), (4, 2, 9));
    }

    #[test]
    fn a_watch_fires_once_and_a_closed_session_takes_its_ephemerals_and_watches() {
        let mut t = Tree::new();
        t.create(1, 7, "/lock", b"", CreateMode::Persistent)
            .unwrap();
        let (mine, _) = t
            .create(2, 7, "/lock/n-", b"", CreateMode::EphemeralSequential)
            .unwrap();
        assert!(t.exists(8, &mine, true).unwrap().is_some());
        assert_eq!(
            t.get_children(9, "/lock", true).unwrap(),
            vec!["n-0000000000"]
        );
        t.close_session(3, 7);
        assert!(t.exists(8, &mine, false).unwrap().is_none());
        assert_eq!(
            t.take_fired(),
            vec![
                (8, ZkEvent::NodeDeleted(mine.clone())),
                (9, ZkEvent::NodeChildrenChanged("/lock".into())),
            ]
        );
        // One-shot: a second change fires nothing.
        t.create(4, 7, "/lock/n-", b"", CreateMode::Ephemeral)
            .unwrap();
        assert!(t.take_fired().is_empty());
    }

    #[test]
    fn ephemeral_nodes_have_no_children_and_paths_are_checked() {
        let mut t = Tree::new();
        t.create(1, 7, "/e", b"", CreateMode::Ephemeral).unwrap();
        assert!(matches!(
            t.create(2, 7, "/e/c", b"", CreateMode::Persistent),
            Err(ZkError::NoChildrenForEphemerals(_))
        ));
        assert!(matches!(
            t.create(2, 7, "/x/y", b"", CreateMode::Persistent),
            Err(ZkError::NoNode(_))
        ));
        assert!(matches!(
            t.create(2, 7, "relative", b"", CreateMode::Persistent),
            Err(ZkError::BadArguments(_))
        ));
        assert!(matches!(
            t.create(2, 7, "/e", b"", CreateMode::Persistent),
            Err(ZkError::NodeExists(_))
        ));
        assert!(matches!(
            t.delete(3, "/", None),
            Err(ZkError::BadArguments(_))
        ));
        t.create(2, 7, "/p", b"", CreateMode::Persistent).unwrap();
        t.create(3, 7, "/p/c", b"", CreateMode::Persistent).unwrap();
        assert!(matches!(t.delete(4, "/p", None), Err(ZkError::NotEmpty(_))));
        assert!(matches!(
            t.delete(4, "/p/c", Some(3)),
            Err(ZkError::BadVersion(_))
        ));
    }
}
