//! The simulated etcd's state machine: the key space with its revisions, the leases and their
//! expiry, and the deletes a watch reports. Pure: time is passed in (the leader's monotonic
//! milliseconds), so the differential test drives it directly and the simulated server node
//! decides when time moves.
//!
//! What it follows from etcd 3.4 (`mvcc/`, `lease/lessor.go`):
//! - every write transaction that changes something makes exactly one new revision, its puts
//!   and deletes all stamped with it; a transaction that changes nothing makes none;
//! - a key's create revision stays until it is deleted; a put with an unknown lease fails the
//!   whole transaction (`requested lease not found`);
//! - a lease's TTL is at least the cluster's minimum (`1.5 × election timeout`, whole seconds);
//! - an expired lease is only revoked, with its keys, when the leader's expiry loop next runs
//!   (`revokeExpiredLeases`, every 500 ms): until then a put may still attach to it, but a
//!   keep-alive or time-to-live of it already answers "not found" (`Lessor.Renew` refuses an
//!   expired lease);
//! - a new leader extends every lease (`Lessor.Promote`): its expiry becomes now + its TTL + the
//!   election timeout, so no lease expires because of the election alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::etcd::seam::{
    EtcdError, KeyValue, Lease, LeaseId, RangeRequest, RangeResponse, Revision,
};
use crate::backend::etcd::seam::{Txn, TxnOp, TxnOpResponse, TxnResponse};

/// How often etcd's leader looks for expired leases to revoke (`lessor.runLoop`'s 500 ms).
pub const EXPIRY_LOOP_MS: u64 = 500;

/// One lease: its granted TTL, when it expires on the leader's clock, its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SimLease {
    ttl_s: i64,
    expires_at_ms: u64,
    keys: BTreeSet<String>,
}

/// The key space and the leases of one simulated etcd cluster (what its raft log has applied).
#[derive(Clone, Debug)]
pub struct EtcdEngine {
    revision: Revision,
    kvs: BTreeMap<String, KeyValue>,
    leases: BTreeMap<LeaseId, SimLease>,
    next_lease: LeaseId,
    /// Every delete, `(revision, key)`, in revision order: what a watch from a revision sees
    /// (no compaction is modelled).
    deletes: Vec<(Revision, String)>,
    min_ttl_s: i64,
}

impl EtcdEngine {
    /// An empty key space at revision 1 (etcd starts there), granting leases of at least
    /// `min_ttl_s` seconds.
    pub fn new(min_ttl_s: i64) -> EtcdEngine {
        EtcdEngine {
            revision: 1,
            kvs: BTreeMap::new(),
            leases: BTreeMap::new(),
            next_lease: 1,
            deletes: Vec::new(),
            min_ttl_s: min_ttl_s.max(1),
        }
    }

    /// The key space's current revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// `LeaseGrant` at `now_ms`.
    pub fn lease_grant(&mut self, now_ms: u64, ttl_s: i64) -> Lease {
        let ttl_s = ttl_s.max(self.min_ttl_s);
        let id = self.next_lease;
        self.next_lease += 1;
        self.leases.insert(
            id,
            SimLease {
                ttl_s,
                expires_at_ms: now_ms + ttl_s as u64 * 1000,
                keys: BTreeSet::new(),
            },
        );
        Lease { id, ttl_s }
    }

    fn live_lease(&mut self, now_ms: u64, id: LeaseId) -> Result<&mut SimLease, EtcdError> {
        match self.leases.get_mut(&id) {
            Some(lease) if lease.expires_at_ms > now_ms => Ok(lease),
            _ => Err(EtcdError::LeaseNotFound),
        }
    }

    /// `LeaseKeepAlive` at `now_ms`: the lease's granted TTL, restarted.
    pub fn lease_keep_alive(&mut self, now_ms: u64, id: LeaseId) -> Result<i64, EtcdError> {
        let lease = self.live_lease(now_ms, id)?;
        lease.expires_at_ms = now_ms + lease.ttl_s as u64 * 1000;
        Ok(lease.ttl_s)
    }

    /// `LeaseTimeToLive` at `now_ms`: whole seconds left, rounded down (as etcd answers).
    pub fn lease_time_to_live(&mut self, now_ms: u64, id: LeaseId) -> Result<i64, EtcdError> {
        let lease = self.live_lease(now_ms, id)?;
        Ok(((lease.expires_at_ms - now_ms) / 1000) as i64)
    }

    /// `LeaseRevoke`: the lease and its keys go, in one revision (none if it had no key).
    pub fn lease_revoke(&mut self, id: LeaseId) -> Result<(), EtcdError> {
        let lease = self.leases.remove(&id).ok_or(EtcdError::LeaseNotFound)?;
        if !lease.keys.is_empty() {
            self.revision += 1;
            for key in lease.keys {
                self.remove_key(&key);
            }
        }
        Ok(())
    }

    /// The leader's expiry loop at `now_ms`: revokes every expired lease, in id order; returns
    /// the ids it revoked.
    pub fn expire(&mut self, now_ms: u64) -> Vec<LeaseId> {
        let expired: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, l)| l.expires_at_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            let _ = self.lease_revoke(*id);
        }
        expired
    }

    /// A new leader at `now_ms` (`Lessor.Promote`): every lease's expiry restarts from now plus
    /// `extend_ms` (the election timeout).
    pub fn promote(&mut self, now_ms: u64, extend_ms: u64) {
        for lease in self.leases.values_mut() {
            lease.expires_at_ms = now_ms + extend_ms + lease.ttl_s as u64 * 1000;
        }
    }

    /// The earliest expiry among the leases, if any (when the next expiry loop has work).
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.leases.values().map(|l| l.expires_at_ms).min()
    }

    /// The lock entries of the lock `key`: the key itself (a lock that puts its one key, npm
    /// etcd3's) and every key under `key/` (`concurrency.Mutex`'s queue), each with its create
    /// revision (a key deleted and put again is another entry), in key order.
    pub fn entries(&self, key: &str) -> Vec<(String, Revision)> {
        let under = format!("{key}/");
        let end = format!("{key}0");
        self.kvs
            .range(key.to_string()..end)
            .filter(|(k, _)| k.as_str() == key || k.starts_with(&under))
            .map(|(k, kv)| (k.clone(), kv.create_revision))
            .collect()
    }

    /// `Range`: the keys asked for, with the current revision.
    pub fn range(&self, request: &RangeRequest) -> RangeResponse {
        RangeResponse {
            revision: self.revision,
            kvs: self.read(request),
        }
    }

    fn read(&self, request: &RangeRequest) -> Vec<KeyValue> {
        let mut kvs: Vec<KeyValue> = match &request.range_end {
            None => self.kvs.get(&request.key).cloned().into_iter().collect(),
            Some(end) => self
                .kvs
                .range(request.key.clone()..)
                .take_while(|(k, _)| end == "\0" || k.as_str() < end.as_str())
                .map(|(_, kv)| kv.clone())
                .collect(),
        };
        if request.max_create_revision > 0 {
            kvs.retain(|kv| kv.create_revision <= request.max_create_revision);
        }
        match request.by_create_ascending {
            Some(true) => kvs.sort_by_key(|kv| kv.create_revision),
            Some(false) => kvs.sort_by_key(|kv| std::cmp::Reverse(kv.create_revision)),
            None => {}
        }
        if request.limit > 0 {
            kvs.truncate(request.limit as usize);
        }
        kvs
    }

    /// `Txn`: compares create revisions and runs one branch; its writes share one new revision.
    pub fn txn(&mut self, txn: &Txn) -> Result<TxnResponse, EtcdError> {
        let succeeded = txn
            .compare
            .iter()
            .all(|(key, create)| self.kvs.get(key).map_or(0, |kv| kv.create_revision) == *create);
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        // etcd checks every put's lease before it applies anything.
        for op in ops {
            if let TxnOp::Put { lease, .. } = op {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return Err(EtcdError::LeaseNotFound);
                }
            }
        }
        let next = self.revision + 1;
        let mut changed = false;
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                TxnOp::Put { key, value, lease } => {
                    self.put(next, key, value, *lease);
                    changed = true;
                    TxnOpResponse::Put
                }
                TxnOp::Range(request) => TxnOpResponse::Range(self.read(request)),
                TxnOp::Delete { key } => {
                    let gone = self.delete_at(next, key);
                    changed |= gone;
                    TxnOpResponse::Delete(i64::from(gone))
                }
            });
        }
        if changed {
            self.revision = next;
        }
        Ok(TxnResponse {
            succeeded,
            revision: self.revision,
            responses,
        })
    }

    /// `DeleteRange` of one key: `(deleted, revision after)`.
    pub fn delete(&mut self, key: &str) -> (i64, Revision) {
        let next = self.revision + 1;
        if self.delete_at(next, key) {
            self.revision = next;
            (1, next)
        } else {
            (0, self.revision)
        }
    }

    /// The revision of the first delete of `key` at or after `from`, if there was one: what a
    /// watch from `from` reports first.
    pub fn deleted_since(&self, key: &str, from: Revision) -> Option<Revision> {
        let start = self.deletes.partition_point(|(rev, _)| *rev < from);
        self.deletes[start..]
            .iter()
            .find(|(_, k)| k == key)
            .map(|(rev, _)| *rev)
    }

    fn put(&mut self, revision: Revision, key: &str, value: &str, lease: LeaseId) {
        let old_lease = self.kvs.get(key).map(|kv| kv.lease);
        if let Some(old) = old_lease.filter(|l| *l != 0 && *l != lease) {
            if let Some(l) = self.leases.get_mut(&old) {
                l.keys.remove(key);
            }
        }
        if lease != 0 {
            if let Some(l) = self.leases.get_mut(&lease) {
                l.keys.insert(key.to_string());
            }
        }
        let kv = self.kvs.entry(key.to_string()).or_insert_with(|| KeyValue {
            key: key.to_string(),
            value: String::new(),
            create_revision: revision,
            mod_revision: revision,
            version: 0,
            lease: 0,
        });
        kv.value = value.to_string();
        kv.mod_revision = revision;
        kv.version += 1;
        kv.lease = lease;
    }

    /// Deletes `key` at `revision` (within a write that the caller commits); whether it existed.
    fn delete_at(&mut self, revision: Revision, key: &str) -> bool {
        let Some(kv) = self.kvs.remove(key) else {
            return false;
        };
        if let Some(l) = self.leases.get_mut(&kv.lease) {
            l.keys.remove(key);
        }
        self.deletes.push((revision, key.to_string()));
        true
    }

    /// A lease revocation's delete of one of its keys, at the revocation's revision.
    fn remove_key(&mut self, key: &str) {
        if self.kvs.remove(key).is_some() {
            self.deletes.push((self.revision, key.to_string()));
        }
    }
}
