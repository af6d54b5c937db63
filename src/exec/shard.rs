//! `--shard i/n`: one CI job's slice of seeds, scenarios or explore cases.
//!
//! Slices are disjoint and together cover every index, so a matrix of `n` jobs does exactly the
//! work of one unsharded run. Index `k` belongs to shard `k % n + 1`, which keeps every shard's
//! share of slow and fast items even.

use std::fmt;

/// One slice `index/count` of the work (1-based, as written on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 1 to `count`.
    pub index: u32,
    /// How many slices the work is cut into.
    pub count: u32,
}

/// Why a `--shard` value was refused; shown to the user as a one-line message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--shard {given:?}: {reason} (write i/n with 1 <= i <= n, e.g. --shard 2/4)")]
pub struct ShardError {
    given: String,
    reason: &'static str,
}

impl Shard {
    /// The whole work as a single shard.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Parses `i/n` from the command line.
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let fail = |reason| ShardError {
            given: text.to_string(),
            reason,
        };
        let (i, n) = text.split_once('/').ok_or_else(|| fail("missing '/'"))?;
        let index: u32 = i.trim().parse().map_err(|_| fail("i is not a number"))?;
        let count: u32 = n.trim().parse().map_err(|_| fail("n is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(fail("i must be between 1 and n"));
        }
        Ok(Shard { index, count })
    }

    /// Whether item `k` (0-based) belongs to this shard.
    pub fn owns(&self, k: u64) -> bool {
        k % u64::from(self.count) == u64::from(self.index - 1)
    }

    /// The indices below `total` that this shard runs, in increasing order.
    pub fn indices(&self, total: u64) -> Vec<u64> {
        (u64::from(self.index - 1)..total)
            .step_by(self.count as usize)
            .collect()
    }

    /// How many indices below `total` this shard runs (the length of [`Shard::indices`],
    /// without listing them).
    pub fn len(&self, total: u64) -> u64 {
        let first = u64::from(self.index - 1);
        if total <= first {
            return 0;
        }
        (total - first).div_ceil(u64::from(self.count))
    }

    /// [`Shard::indices`] in lists of at most `chunk`, each built only when it is reached: a
    /// budget of 10^9 explore cases, most of them never run once a violation stops the search,
    /// holds one chunk in memory instead of 8 GB of indices.
    pub fn chunks(&self, total: u64, chunk: u64) -> impl Iterator<Item = Vec<u64>> {
        let (first, step) = (u64::from(self.index - 1), u64::from(self.count));
        let len = self.len(total);
        let chunk = chunk.max(1);
        (0..len.div_ceil(chunk)).map(move |c| {
            let from = c * chunk;
            (from..len.min(from + chunk))
                .map(|k| first + k * step)
                .collect()
        })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shards_are_refused_with_a_hint() {
        for bad in ["", "3", "0/2", "3/2", "a/2", "1/0"] {
            let err = Shard::parse(bad).unwrap_err().to_string();
            assert!(err.contains("write i/n"), "{bad}: {err}");
        }
        assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
    }

    #[test]
    fn shards_are_disjoint_and_cover() {
        let n = 5;
        for k in 0..100u64 {
            let owners = (1..=n)
                .filter(|&i| Shard { index: i, count: n }.owns(k))
                .count();
            assert_eq!(owners, 1, "item {k}");
        }
        let s = Shard { index: 3, count: 5 };
        assert!(s.indices(100).iter().all(|&k| s.owns(k)));
        assert_eq!(s.indices(100).len(), 20);
    }

    #[test]
    fn chunks_list_the_same_indices_lazily() {
        for (index, count) in [(1, 1), (3, 5), (5, 5), (2, 7)] {
            let s = Shard { index, count };
            for total in [0, 1, 4, 5, 99, 100, 101] {
                let listed: Vec<u64> = s.chunks(total, 7).flatten().collect();
                assert_eq!(listed, s.indices(total), "{s} of {total}");
                assert_eq!(s.len(total), listed.len() as u64, "{s} of {total}");
            }
        }
        // The largest budget: counted, and its first chunk built, without listing the rest.
        let s = Shard { index: 2, count: 3 };
        assert_eq!(s.len(u64::MAX), u64::MAX / 3);
        assert_eq!(s.chunks(u64::MAX, 4).next(), Some(vec![1, 4, 7, 10]));
    }
}
