//! A set of seeds (or case indices) kept as runs of consecutive numbers.
//!
//! `--seeds 100000` on a scenario that violates on every seed would otherwise hold 100,000 seeds
//! per check; as runs it holds one pair, so the aggregate's memory stays flat however many seeds
//! are folded.

use serde::ser::{Serialize, SerializeSeq, Serializer};

/// Seeds added in increasing order, stored as inclusive runs `(first, last)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedSet {
    runs: Vec<(u64, u64)>,
    len: u64,
}

impl SeedSet {
    /// Adds `seed`, which must be larger than every seed already in the set.
    pub fn push(&mut self, seed: u64) {
        match self.runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(seed) => *last = seed,
            _ => self.runs.push((seed, seed)),
        }
        self.len += 1;
    }

    /// How many seeds the set holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the set holds no seed (an empty shard, say).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The smallest seed.
    pub fn first(&self) -> Option<u64> {
        self.runs.first().map(|r| r.0)
    }

    /// Every seed, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|&(a, b)| a..=b)
    }
}

/// Serialised as the plain list of seeds (the JSON report's `violating_seeds` contract).
impl Serialize for SeedSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len as usize))?;
        for seed in self.iter() {
            seq.serialize_element(&seed)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_seeds_share_a_run() {
        let mut s = SeedSet::default();
        for seed in [1, 2, 3, 7, 8, 10] {
            s.push(seed);
        }
        assert_eq!(s.runs, vec![(1, 3), (7, 8), (10, 10)]);
        assert_eq!(s.len(), 6);
        assert_eq!(s.first(), Some(1));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 2, 3, 7, 8, 10]);
        assert_eq!(serde_json::to_string(&s).unwrap(), "[1,2,3,7,8,10]");
    }
}
