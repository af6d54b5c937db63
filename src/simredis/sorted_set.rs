//! The sorted-set value type ([`ZSet`]): members ordered by score, then by their bytes.
//!
//! Why it is apart from the sorted-set commands (`zsets.rs`): the keyspace stores it as one
//! of its values ([`super::keyspace::Data::ZSet`]), and the commands use the keyspace. With
//! the type here, the keyspace imports it and the commands import both, one way.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// A score with a total order (NaN is never stored: Redis refuses it).
#[derive(Clone, Copy, Debug)]
struct Score(f64);

impl PartialEq for Score {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.partial_cmp(&o.0).unwrap_or(Ordering::Equal)
    }
}

/// A sorted set: members by score then bytes (Redis's skiplist order), and each member's
/// score.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZSet {
    order: BTreeSet<(Score, Vec<u8>)>,
    scores: BTreeMap<Vec<u8>, Score>,
}

impl ZSet {
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|s| s.0)
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Sets a member's score (adding it if new).
    pub fn insert(&mut self, member: &[u8], score: f64) {
        if let Some(old) = self.scores.insert(member.to_vec(), Score(score)) {
            self.order.remove(&(old, member.to_vec()));
        }
        self.order.insert((Score(score), member.to_vec()));
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove(member) {
            Some(s) => self.order.remove(&(s, member.to_vec())),
            None => false,
        }
    }

    /// Members with their scores, lowest score first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + ExactSizeIterator {
        self.order.iter().map(|(s, m)| (m.as_slice(), s.0))
    }
}
