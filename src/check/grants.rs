//! Grants: every successful (outermost) acquire of a history and how its holding ended, and an
//! index that answers the checkers' two questions about them in logarithmic time.
//!
//! Several checkers ask, for every event, "which grant does this client's event belong to?" and
//! "was anyone else granted the lock between these two times?". Answered by scanning, each question
//! costs O(n) and a check O(n^2): 16k critical sections took seconds, 32k a minute. The index sorts
//! the grants once, so a whole check stays O(n log n) in the history's length.

use crate::history::{EventKind, History};
use std::collections::BTreeMap;

/// One grant: a client's successful (outermost) acquire, and how its holding ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// The client that was granted the lock.
    pub client: u32,
    /// True time the acquire returned (µs).
    pub acquired_us: u64,
    /// The token the grant carried, for locks that issue one.
    pub fencing_token: Option<u64>,
    /// True time it left its critical section, if it did.
    pub exit_us: Option<u64>,
    /// True time its release completed (or failed), or it crashed; `None` if it held to the end.
    pub end_us: Option<u64>,
    /// What the outermost release reported (`Some(true)`: it deleted an entry).
    pub released_deleted: Option<bool>,
    /// The client crashed while holding.
    pub crashed: bool,
}

/// Every grant of a history, in true-time order of acquisition.
pub fn grants(history: &History) -> Vec<Grant> {
    // A hint, not a bound: a grant takes at least an acquire-start, an acquire and an end event
    // (reserved address space costs nothing until it is written; growing by doubling copies).
    let mut out: Vec<Grant> = Vec::with_capacity(history.events.len() / 4);
    let mut open: BTreeMap<u32, usize> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match &e.kind {
            EventKind::Acquired { fencing_token, .. } => {
                open.insert(c, out.len());
                out.push(Grant {
                    client: c,
                    acquired_us: e.at_us,
                    fencing_token: *fencing_token,
                    exit_us: None,
                    end_us: None,
                    released_deleted: None,
                    crashed: false,
                });
            }
            EventKind::Exit => {
                if let Some(&i) = open.get(&c) {
                    out[i].exit_us = Some(e.at_us);
                }
            }
            EventKind::Released { deleted } => {
                if let Some(i) = open.remove(&c) {
                    out[i].end_us = Some(e.at_us);
                    out[i].released_deleted = Some(*deleted);
                }
            }
            EventKind::ReleaseFailed { .. } => {
                // An inner release's failure does not end the holding; an outer one's does.
                if let Some(&i) = open.get(&c) {
                    if out[i].exit_us.is_some() {
                        open.remove(&c);
                        out[i].end_us = Some(e.at_us);
                    }
                }
            }
            EventKind::Crashed { .. } => {
                if let Some(i) = open.remove(&c) {
                    out[i].end_us = Some(e.at_us);
                    out[i].crashed = true;
                }
            }
            _ => {}
        }
    }
    out
}

/// The grants of a history, sorted by acquisition time, for logarithmic look-ups.
pub struct GrantIndex<'a> {
    grants: &'a [Grant],
    /// Indices into `grants`, by acquisition time (ties keep history order).
    by_time: Vec<usize>,
    /// For each position in `by_time`: the latest earlier position whose grant went to a different
    /// client, so that skipping one client's run of grants takes one step.
    prev_other: Vec<Option<usize>>,
    /// Each client's grants, by acquisition time (indices into `grants`).
    by_client: BTreeMap<u32, Vec<usize>>,
}

impl<'a> GrantIndex<'a> {
    /// Indexes `grants` (as returned by [`grants`]).
    pub fn new(grants: &'a [Grant]) -> GrantIndex<'a> {
        let mut by_time: Vec<usize> = (0..grants.len()).collect();
        by_time.sort_by_key(|&i| grants[i].acquired_us);
        let mut prev_other = Vec::with_capacity(by_time.len());
        for p in 0..by_time.len() {
            let prev = match p.checked_sub(1) {
                None => None,
                Some(q) if grants[by_time[q]].client != grants[by_time[p]].client => Some(q),
                Some(q) => prev_other[q],
            };
            prev_other.push(prev);
        }
        let mut by_client: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &i in &by_time {
            by_client.entry(grants[i].client).or_default().push(i);
        }
        GrantIndex {
            grants,
            by_time,
            prev_other,
            by_client,
        }
    }

    /// The latest grant to a client other than `except` strictly between `since_us` and
    /// `until_us`.
    pub fn other_granted_between(
        &self,
        except: u32,
        since_us: u64,
        until_us: u64,
    ) -> Option<&'a Grant> {
        let end = self
            .by_time
            .partition_point(|&i| self.grants[i].acquired_us < until_us);
        let mut p = end.checked_sub(1)?;
        if self.grants[self.by_time[p]].client == except {
            p = self.prev_other[p]?;
        }
        let g = &self.grants[self.by_time[p]];
        (g.acquired_us > since_us).then_some(g)
    }

    /// The grant a client's event at `at_us` belongs to: the client's latest at or before it.
    pub fn of_client_at(&self, client: u32, at_us: u64) -> Option<&'a Grant> {
        let own = self.by_client.get(&client)?;
        let n = own.partition_point(|&i| self.grants[i].acquired_us <= at_us);
        n.checked_sub(1).map(|k| &self.grants[own[k]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn grant(client: u32, acquired_us: u64) -> Grant {
        Grant {
            client,
            acquired_us,
            fencing_token: None,
            exit_us: None,
            end_us: None,
            released_deleted: None,
            crashed: false,
        }
    }

    proptest! {
        /// The index answers exactly what a scan of every grant answers.
        #[test]
        fn the_index_agrees_with_a_scan(
            raw in proptest::collection::vec((0u32..4, 0u64..50), 0..40),
            queries in proptest::collection::vec((0u32..4, 0u64..60, 0u64..60), 1..20),
        ) {
            let mut raw = raw;
            raw.sort_by_key(|&(_, t)| t);
            let gs: Vec<Grant> = raw.iter().map(|&(c, t)| grant(c, t)).collect();
            let index = GrantIndex::new(&gs);
            for (c, a, b) in queries {
                let scan = gs.iter().rfind(|g| g.client != c && g.acquired_us > a && g.acquired_us < b);
                prop_assert_eq!(index.other_granted_between(c, a, b), scan);
                let scan = gs.iter().rfind(|g| g.client == c && g.acquired_us <= a);
                prop_assert_eq!(index.of_client_at(c, a), scan);
            }
        }
    }
}
