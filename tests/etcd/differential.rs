//! The simulated etcd engine against a real `etcd` (one spawned member): random sequences of
//! lease grants, keep-alives, time-to-live reads, revocations, the lock's create-revision
//! transaction, puts with and without a lease, prefix ranges ordered and bounded by create
//! revision, deletes and watches for a delete, each sequence in a key prefix of its own. Every
//! answer must agree, revisions counted from the sequence's start and lease ids matched by grant
//! order.
//!
//! Time is not moved here: etcd is a Go program, whose runtime reads the clock through the vDSO,
//! not through libc, so libfaketime cannot skew it; lease expiry is compared against the
//! simulation in the scenarios instead (and TTLs here are long enough that nothing expires
//! within a sequence). Cost: `LOCKCHECK_ETCD_DIFF_CASES` sequences (default 300, about 9 s on
//! 2 cores; 5,000 took 146 s here, too long for the suite's default); every write is an fsync of
//! etcd's log, which is what bounds the rate.

use std::time::{Duration, Instant};

use lockcheck::backend::etcd::engine::EtcdEngine;
use lockcheck::backend::etcd::real::{EtcdCluster, EtcdTiming, RealEtcdConn};
use lockcheck::backend::etcd::seam::{
    EtcdClient, EtcdError, KeyValue, RangeRequest, Txn, TxnOp, TxnOpResponse,
};
use proptest::prelude::*;

use crate::common::{fixed_seed_config, real_servers_one_at_a_time};

#[derive(Clone, Debug)]
enum Op {
    Grant(i64),
    KeepAlive(usize),
    TimeToLive(usize),
    Revoke(usize),
    /// `concurrency.Mutex`'s transaction for key `k` with lease `l`.
    Lock(usize, usize),
    Put(usize, usize),
    Range {
        ascending: Option<bool>,
        limit: i64,
        max_create: i64,
    },
    Delete(usize),
    /// A watch on key `k` from relative revision `r`.
    WaitDeleted(usize, i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop_oneof![Just(1i64), Just(30), Just(60)].prop_map(Op::Grant),
        1 => (0usize..4).prop_map(Op::KeepAlive),
        1 => (0usize..4).prop_map(Op::TimeToLive),
        1 => (0usize..4).prop_map(Op::Revoke),
        3 => (0usize..4, 0usize..4).prop_map(|(k, l)| Op::Lock(k, l)),
        1 => (0usize..4, 0usize..4).prop_map(|(k, l)| Op::Put(k, l)),
        2 => (prop::option::of(any::<bool>()), 0i64..3, 0i64..8)
            .prop_map(|(ascending, limit, max_create)| Op::Range { ascending, limit, max_create }),
        2 => (0usize..4).prop_map(Op::Delete),
        1 => (0usize..4, 1i64..8).prop_map(|(k, r)| Op::WaitDeleted(k, r)),
    ]
}

/// Revisions relative to the sequence's start, lease ids as grant order: what both sides say.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Granted(i64),
    Ttl(i64),
    Done,
    Kvs(i64, Vec<(String, i64, i64, i64, Option<usize>)>),
    Txn(bool, i64, Vec<String>),
    Deleted(i64, i64),
    DeletedAt(Option<i64>),
    Error(String),
}

/// One side's view: its lease ids by grant index, its revision at the start.
struct Side {
    leases: Vec<i64>,
    base: i64,
}

impl Side {
    /// The id of granted lease `i`, 0 (no lease) past the end of the list, or one nobody has.
    fn lease(&self, i: usize) -> i64 {
        match i {
            3 => 0x7fff_0000,
            i => self.leases.get(i).copied().unwrap_or(0),
        }
    }

    fn rev(&self, r: i64) -> i64 {
        r - self.base
    }

    fn kvs(&self, kvs: &[KeyValue], prefix: &str) -> Vec<(String, i64, i64, i64, Option<usize>)> {
        kvs.iter()
            .map(|kv| {
                (
                    kv.key.trim_start_matches(prefix).to_string(),
                    self.rev(kv.create_revision),
                    self.rev(kv.mod_revision),
                    kv.version,
                    (kv.lease != 0).then(|| {
                        self.leases
                            .iter()
                            .position(|l| *l == kv.lease)
                            .unwrap_or(99)
                    }),
                )
            })
            .collect()
    }
}

fn error(e: EtcdError) -> Answer {
    Answer::Error(match e {
        EtcdError::NoAnswer(_) => "no answer".into(),
        other => other.to_string(),
    })
}

fn request(op: &Op, side: &Side, prefix: &str) -> Option<Txn> {
    let key = |k: usize| format!("{prefix}k{k}");
    match *op {
        Op::Lock(k, l) => {
            let owner = TxnOp::Range(RangeRequest::prefix(prefix).first_created());
            Some(Txn {
                compare: vec![(key(k), 0)],
                success: vec![
                    TxnOp::Put {
                        key: key(k),
                        value: "v".into(),
                        lease: side.lease(l),
                    },
                    owner.clone(),
                ],
                failure: vec![TxnOp::Range(RangeRequest::key(key(k))), owner],
            })
        }
        Op::Put(k, l) => Some(Txn {
            success: vec![TxnOp::Put {
                key: key(k),
                value: format!("p{l}"),
                lease: side.lease(l),
            }],
            ..Txn::default()
        }),
        _ => None,
    }
}

fn txn_answer(
    side: &Side,
    prefix: &str,
    r: Result<lockcheck::backend::etcd::seam::TxnResponse, EtcdError>,
) -> Answer {
    match r {
        Ok(t) => Answer::Txn(
            t.succeeded,
            side.rev(t.revision),
            t.responses
                .iter()
                .map(|o| match o {
                    TxnOpResponse::Put => "put".to_string(),
                    TxnOpResponse::Range(kvs) => format!("{:?}", side.kvs(kvs, prefix)),
                    TxnOpResponse::Delete(n) => format!("deleted {n}"),
                })
                .collect(),
        ),
        Err(e) => error(e),
    }
}

fn range_request(
    prefix: &str,
    side: &Side,
    ascending: Option<bool>,
    limit: i64,
    max: i64,
) -> RangeRequest {
    let mut r = RangeRequest::prefix(prefix);
    r.by_create_ascending = ascending;
    r.limit = limit;
    r.max_create_revision = if max == 0 { 0 } else { max + side.base };
    r
}

fn on_engine(e: &mut EtcdEngine, side: &mut Side, prefix: &str, op: &Op, now: u64) -> Answer {
    match *op {
        Op::Grant(ttl) => {
            let l = e.lease_grant(now, ttl);
            side.leases.push(l.id);
            Answer::Granted(l.ttl_s)
        }
        Op::KeepAlive(l) => e
            .lease_keep_alive(now, side.lease(l))
            .map_or_else(error, Answer::Ttl),
        Op::TimeToLive(l) => e
            .lease_time_to_live(now, side.lease(l))
            .map_or_else(error, |t| Answer::Ttl((t + 5) / 10)),
        Op::Revoke(l) => e
            .lease_revoke(side.lease(l))
            .map_or_else(error, |()| Answer::Done),
        Op::Lock(..) | Op::Put(..) => {
            let txn = request(op, side, prefix).expect("a transaction");
            txn_answer(side, prefix, e.txn(&txn))
        }
        Op::Range {
            ascending,
            limit,
            max_create,
        } => {
            let r = e.range(&range_request(prefix, side, ascending, limit, max_create));
            Answer::Kvs(side.rev(r.revision), side.kvs(&r.kvs, prefix))
        }
        Op::Delete(k) => {
            let (n, rev) = e.delete(&format!("{prefix}k{k}"));
            Answer::Deleted(n, side.rev(rev))
        }
        Op::WaitDeleted(k, r) => Answer::DeletedAt(
            e.deleted_since(&format!("{prefix}k{k}"), r + side.base)
                .map(|rev| side.rev(rev)),
        ),
    }
}

/// `patience`: how long a watch may take to report a delete (long when the engine saw one, so a
/// loaded machine does not fail the test; short when it saw none, so a sequence stays fast).
async fn on_real(
    c: &mut RealEtcdConn,
    side: &mut Side,
    prefix: &str,
    op: &Op,
    patience: Duration,
) -> Answer {
    match *op {
        Op::Grant(ttl) => match c.lease_grant(ttl).await {
            Ok(l) => {
                side.leases.push(l.id);
                Answer::Granted(l.ttl_s)
            }
            Err(e) => error(e),
        },
        Op::KeepAlive(l) => c
            .lease_keep_alive(side.lease(l))
            .await
            .map_or_else(error, Answer::Ttl),
        // Seconds left, rounded to tens: the two clocks started a few ms apart.
        Op::TimeToLive(l) => c
            .lease_time_to_live(side.lease(l))
            .await
            .map_or_else(error, |t| Answer::Ttl((t + 5) / 10)),
        Op::Revoke(l) => c
            .lease_revoke(side.lease(l))
            .await
            .map_or_else(error, |()| Answer::Done),
        Op::Lock(..) | Op::Put(..) => {
            let txn = request(op, side, prefix).expect("a transaction");
            txn_answer(side, prefix, c.txn(txn).await)
        }
        Op::Range {
            ascending,
            limit,
            max_create,
        } => {
            match c
                .range(range_request(prefix, side, ascending, limit, max_create))
                .await
            {
                Ok(r) => Answer::Kvs(side.rev(r.revision), side.kvs(&r.kvs, prefix)),
                Err(e) => error(e),
            }
        }
        Op::Delete(k) => match c.delete(&format!("{prefix}k{k}")).await {
            Ok((n, rev)) => Answer::Deleted(n, side.rev(rev)),
            Err(e) => error(e),
        },
        Op::WaitDeleted(k, r) => {
            let key = format!("{prefix}k{k}");
            let watch = c.wait_deleted(&key, r + side.base);
            match tokio::time::timeout(patience, watch).await {
                Ok(Ok(rev)) => Answer::DeletedAt(Some(side.rev(rev))),
                Ok(Err(e)) => error(e),
                Err(_) => Answer::DeletedAt(None),
            }
        }
    }
}

#[test]
fn the_simulated_engine_answers_as_a_real_etcd_does() {
    let _turn = real_servers_one_at_a_time();
    let cases: u32 = std::env::var("LOCKCHECK_ETCD_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let timing = EtcdTiming::default();
    let cluster = EtcdCluster::spawn(1, timing).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = RealEtcdConn::new(vec![cluster.client_port(0)], Duration::from_secs(5));
    let case = std::sync::atomic::AtomicU32::new(0);
    let started = Instant::now();
    let mut runner = proptest::test_runner::TestRunner::new(fixed_seed_config(cases));
    runner
        .run(&prop::collection::vec(op(), 1..12), |ops| {
            let mut conn = conn.clone();
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let prefix = format!("d{n}/");
            let real_base = rt
                .block_on(conn.range(RangeRequest::key("none")))
                .expect("a range")
                .revision;
            let mut engine = EtcdEngine::new(2);
            let mut sim = Side {
                leases: Vec::new(),
                base: engine.revision(),
            };
            let mut real = Side {
                leases: Vec::new(),
                base: real_base,
            };
            let t0 = Instant::now();
            for (i, op) in ops.iter().enumerate() {
                let now = t0.elapsed().as_millis() as u64;
                let want = on_engine(&mut engine, &mut sim, &prefix, op, now);
                let patience = match want {
                    Answer::DeletedAt(Some(_)) => Duration::from_secs(2),
                    _ => Duration::from_millis(30),
                };
                let got = rt.block_on(on_real(&mut conn, &mut real, &prefix, op, patience));
                prop_assert_eq!(&got, &want, "step {} {:?} of {:?}", i, op, ops);
            }
            // Leave the shared member clean for the next sequence: its leases and keys go.
            for id in &real.leases {
                let _ = rt.block_on(conn.lease_revoke(*id));
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "etcd differential: {cases} sequences in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
