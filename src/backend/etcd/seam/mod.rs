//! The etcd seam: what an etcd lock needs from etcd's v3 API, and the answers and errors it sees.
//!
//! An etcd lock (etcd's `concurrency.Mutex`, the v3 lock API, client libraries' `lock()`) is
//! written against [`EtcdClient`] only, the way a MySQL lock is written against `sql::SqlConn`.
//! Each world supplies its side: the simulated world a client of the simulated etcd
//! (`backend/etcd/engine/`, through `sim/conn.rs`), real mode a client of a spawned `etcd` member
//! over etcd's JSON gateway (`real/conn.rs`). The requests are the same in both.
//!
//! The requests and answers are here (`types.rs`); the error, [`EtcdError`], is
//! `lockcheck::etcd`'s, below the locks, because `LockError::Etcd` carries it.

pub mod types;

pub use crate::etcd::EtcdError;
pub use types::{KeyValue, Lease, LeaseId, RangeRequest, RangeResponse, Revision};
pub use types::{Txn, TxnOp, TxnOpResponse, TxnResponse};

use std::future::Future;

/// One client's connection to an etcd cluster, as a lock uses it.
///
/// Every method returns a `Send` future so a lock can run in tokio tasks and in madsim nodes.
pub trait EtcdClient: Send {
    /// `LeaseGrant`: a new lease that lives `ttl_s` seconds unless kept alive.
    fn lease_grant(&mut self, ttl_s: i64) -> impl Future<Output = Result<Lease, EtcdError>> + Send;

    /// One `LeaseKeepAlive`: restarts the lease's TTL; answers the TTL now left, in seconds.
    /// A lease that is gone answers [`EtcdError::LeaseNotFound`].
    fn lease_keep_alive(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send;

    /// `LeaseTimeToLive`: the seconds the lease has left, without extending it; a lease that is
    /// gone answers [`EtcdError::LeaseNotFound`].
    fn lease_time_to_live(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send;

    /// `LeaseRevoke`: ends the lease now and deletes every key attached to it.
    fn lease_revoke(&mut self, id: LeaseId) -> impl Future<Output = Result<(), EtcdError>> + Send;

    /// `Range`: reads keys with their revisions.
    fn range(
        &mut self,
        request: RangeRequest,
    ) -> impl Future<Output = Result<RangeResponse, EtcdError>> + Send;

    /// `Txn`: compares create revisions, then runs one branch atomically.
    fn txn(&mut self, txn: Txn) -> impl Future<Output = Result<TxnResponse, EtcdError>> + Send;

    /// `DeleteRange` of one key: how many keys went (0 or 1) and the revision after it.
    fn delete(
        &mut self,
        key: &str,
    ) -> impl Future<Output = Result<(i64, Revision), EtcdError>> + Send;

    /// A `Watch` on `key` from `from_revision` that ends at the key's first delete (a lease
    /// expiry's or revocation's included): returns that delete's revision. It waits as long as
    /// the key lives; the caller bounds it.
    fn wait_deleted(
        &mut self,
        key: &str,
        from_revision: Revision,
    ) -> impl Future<Output = Result<Revision, EtcdError>> + Send;
}
