//! Which simulated cluster nodes run and which pairs of them can talk: the bus's view of the
//! world's crashes and partitions, passed in at every step (the bus owns no network).

use std::collections::BTreeSet;

/// Which nodes run and which pairs of nodes can talk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reach {
    alive: Vec<bool>,
    /// Cut links, each as (smaller node, larger node): cut both ways.
    cut: BTreeSet<(usize, usize)>,
}

impl Reach {
    /// `nodes` nodes, all running, every link up.
    pub fn all(nodes: usize) -> Reach {
        Reach {
            alive: vec![true; nodes],
            cut: BTreeSet::new(),
        }
    }

    /// Node `node` crashes (or stays down).
    pub fn crash(&mut self, node: usize) {
        self.alive[node] = false;
    }

    /// Node `node` runs again.
    pub fn restart(&mut self, node: usize) {
        self.alive[node] = true;
    }

    /// Cuts every link between `side` and the other nodes, both ways.
    pub fn partition(&mut self, side: &[usize]) {
        for &a in side {
            for b in (0..self.alive.len()).filter(|b| !side.contains(b)) {
                self.cut.insert((a.min(b), a.max(b)));
            }
        }
    }

    /// Cuts the link between `a` and `b`, both ways.
    pub fn cut(&mut self, a: usize, b: usize) {
        self.cut.insert((a.min(b), a.max(b)));
    }

    /// Every link up again.
    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// How many nodes there are.
    pub fn nodes(&self) -> usize {
        self.alive.len()
    }

    /// Whether node `node` runs.
    pub fn alive(&self, node: usize) -> bool {
        self.alive[node]
    }

    /// Whether a message from `a` reaches `b` now: both run and the link is not cut.
    pub fn can_talk(&self, a: usize, b: usize) -> bool {
        self.alive[a] && self.alive[b] && !self.cut.contains(&(a.min(b), a.max(b)))
    }
}
