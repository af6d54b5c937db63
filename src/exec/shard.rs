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
}
