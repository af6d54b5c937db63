//! The simulated etcd engine on its own: revisions, create-revision transactions, prefix ranges
//! by create revision, leases and their expiry, promotion and watches.

use lockcheck::backend::etcd::engine::EtcdEngine;
use lockcheck::backend::etcd::seam::{EtcdError, RangeRequest, Txn, TxnOp, TxnOpResponse};

fn put(key: &str, lease: i64) -> TxnOp {
    TxnOp::Put {
        key: key.into(),
        value: String::new(),
        lease,
    }
}

/// `concurrency.Mutex`'s transaction for `key` under prefix `p/`.
fn lock_txn(key: &str, lease: i64) -> Txn {
    let owner = TxnOp::Range(RangeRequest::prefix("p/").first_created());
    Txn {
        compare: vec![(key.into(), 0)],
        success: vec![put(key, lease), owner.clone()],
        failure: vec![TxnOp::Range(RangeRequest::key(key)), owner],
    }
}

#[test]
fn each_write_makes_one_revision_and_keeps_the_create_revision() {
    let mut e = EtcdEngine::new(1);
    assert_eq!(e.revision(), 1);
    let r = e.txn(&lock_txn("p/a", 0)).unwrap();
    assert!(r.succeeded);
    assert_eq!(r.revision, 2);
    // The success branch's range sees the transaction's own put.
    let TxnOpResponse::Range(owner) = &r.responses[1] else {
        panic!("{r:?}")
    };
    assert_eq!(owner[0].create_revision, 2);
    // Again: the comparison fails, nothing changes, the failure branch reads the key.
    let again = e.txn(&lock_txn("p/a", 0)).unwrap();
    assert!(!again.succeeded);
    assert_eq!(again.revision, 2);
    // A second put keeps the create revision and bumps the version.
    e.txn(&Txn {
        success: vec![put("p/a", 0)],
        ..Txn::default()
    })
    .unwrap();
    let kv = &e.range(&RangeRequest::key("p/a")).kvs[0];
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
    assert_eq!(e.delete("p/a"), (1, 4));
    assert_eq!(
        e.delete("p/a"),
        (0, 4),
        "deleting nothing makes no revision"
    );
}

#[test]
fn waiters_ahead_are_found_by_create_revision() {
    let mut e = EtcdEngine::new(1);
    for key in ["p/c", "p/a", "p/b"] {
        e.txn(&lock_txn(key, 0)).unwrap();
    }
    // Created in the order c (2), a (3), b (4): the first created is c, whatever the key order.
    let first = e.range(&RangeRequest::prefix("p/").first_created());
    assert_eq!(first.kvs[0].key, "p/c");
    // b waits for the last key created before it: a.
    let ahead = e.range(&RangeRequest::prefix("p/").last_created_up_to(3));
    assert_eq!(ahead.kvs[0].key, "p/a");
    assert!(e
        .range(&RangeRequest::prefix("p/").last_created_up_to(1))
        .kvs
        .is_empty());
    // Keys outside the prefix are not read.
    e.txn(&lock_txn("q", 0)).unwrap();
    assert_eq!(e.range(&RangeRequest::prefix("p/")).kvs.len(), 3);
}

#[test]
fn a_lease_expires_on_the_leaders_clock_only_when_the_expiry_loop_runs() {
    let mut e = EtcdEngine::new(2);
    let lease = e.lease_grant(0, 1);
    assert_eq!(lease.ttl_s, 2, "raised to the minimum TTL");
    e.txn(&lock_txn("p/a", lease.id)).unwrap();
    assert_eq!(e.lease_keep_alive(1500, lease.id), Ok(2));
    assert_eq!(e.lease_time_to_live(2000, lease.id), Ok(1));
    // Expired at 3500 on the leader's clock, but not yet revoked: keep-alive refuses it, the
    // key is still there until the expiry loop runs.
    assert_eq!(
        e.lease_keep_alive(3500, lease.id),
        Err(EtcdError::LeaseNotFound)
    );
    assert_eq!(e.range(&RangeRequest::key("p/a")).kvs.len(), 1);
    assert_eq!(e.expire(3500), vec![lease.id]);
    assert!(e.range(&RangeRequest::key("p/a")).kvs.is_empty());
    assert_eq!(e.deleted_since("p/a", 1), Some(3));
    assert_eq!(e.deleted_since("p/a", 4), None);
    // A put with the revoked lease fails the whole transaction.
    assert_eq!(
        e.txn(&lock_txn("p/b", lease.id)),
        Err(EtcdError::LeaseNotFound)
    );
    assert_eq!(e.revision(), 3);
}

#[test]
fn revoking_a_lease_deletes_its_keys_in_one_revision() {
    let mut e = EtcdEngine::new(1);
    let lease = e.lease_grant(0, 5);
    e.txn(&Txn {
        success: vec![put("x", lease.id), put("y", lease.id)],
        ..Txn::default()
    })
    .unwrap();
    assert_eq!(e.revision(), 2);
    e.lease_revoke(lease.id).unwrap();
    assert_eq!(e.revision(), 3);
    assert_eq!(e.deleted_since("x", 3), Some(3));
    assert_eq!(e.deleted_since("y", 3), Some(3));
    assert_eq!(e.lease_revoke(lease.id), Err(EtcdError::LeaseNotFound));
    // A lease without keys goes without a revision.
    let empty = e.lease_grant(0, 5);
    e.lease_revoke(empty.id).unwrap();
    assert_eq!(e.revision(), 3);
}

#[test]
fn a_new_leader_extends_every_lease_by_the_election_timeout() {
    let mut e = EtcdEngine::new(1);
    let lease = e.lease_grant(0, 2);
    // The old leader died at 1000; the new one is elected at 2500, past the old expiry (2000).
    e.promote(2500, 1000);
    assert!(
        e.expire(4999).is_empty(),
        "expiry is now 2500 + 1000 + 2000"
    );
    assert_eq!(e.expire(5500), vec![lease.id]);
}
