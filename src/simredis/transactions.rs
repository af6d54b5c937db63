//! Optimistic transactions: `WATCH` / `UNWATCH` and the check `EXEC` makes.
//!
//! Why it exists: check-and-set lock releases (`WATCH lock; GET lock; MULTI; DEL lock; EXEC`)
//! depend on `EXEC` answering nil when someone touched a watched key in between. Redis marks a
//! watch dirty on any write to the key (even one writing the same value back), on `FLUSHALL`,
//! and treats a watched key that expired since `WATCH` as touched (7.0's
//! `isWatchedKeyExpired`). Here a write is recognised by the replication effects it recorded:
//! every effect names the keys it wrote, so no per-command bookkeeping is added to the hot
//! path, and nothing at all runs while nobody watches.

use super::keyspace::Keyspace;
use super::role::ClientId;
use std::collections::BTreeMap;

/// One connection's watched keys.
#[derive(Debug, Default)]
struct Watch {
    /// Each key, with whether it was already logically expired when watched.
    keys: Vec<(Vec<u8>, bool)>,
    dirty: bool,
}

/// Every connection's watched keys.
#[derive(Debug, Default)]
pub struct Watches {
    by_client: BTreeMap<ClientId, Watch>,
}

impl Watches {
    /// `WATCH key...`: adds keys to the connection's watch list.
    pub fn watch(&mut self, client: ClientId, ks: &Keyspace, now: i64, keys: &[Vec<u8>]) {
        let w = self.by_client.entry(client).or_default();
        for k in keys {
            if !w.keys.iter().any(|(have, _)| have == k) {
                w.keys.push((k.clone(), ks.is_expired(k, now)));
            }
        }
    }

    /// `UNWATCH`, `DISCARD`, disconnect.
    pub fn unwatch(&mut self, client: ClientId) {
        self.by_client.remove(&client);
    }

    /// Whether any connection watches anything (the fast path skips [`Watches::touch`]).
    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    /// Marks dirty the watches of every key the effects `ops` wrote (`FLUSHALL`: all of them).
    pub fn touch(&mut self, ops: &[Vec<Vec<u8>>]) {
        for op in ops {
            let flush = op.first().is_some_and(|n| {
                n.eq_ignore_ascii_case(b"flushall") || n.eq_ignore_ascii_case(b"flushdb")
            });
            for w in self.by_client.values_mut() {
                if flush || w.keys.iter().any(|(k, _)| op[1..].contains(k)) {
                    w.dirty = true;
                }
            }
        }
    }

    /// Ends the connection's watch at `EXEC`: true if the transaction may run.
    pub fn exec_allowed(&mut self, client: ClientId, ks: &Keyspace, now: i64) -> bool {
        match self.by_client.remove(&client) {
            None => true,
            Some(w) => {
                !w.dirty
                    && w.keys
                        .iter()
                        .all(|(k, was_expired)| *was_expired || !ks.is_expired(k, now))
            }
        }
    }
}
