//! The bundled etcd scenarios reach their expected verdicts in simulation (every one, a few
//! seeds) and on spawned etcd members (one real run each: about 50 s of real time in all, most
//! of it the scenarios' own durations).

use lockcheck::backend::etcd::lock::{EtcdMutex, PLAIN};
use lockcheck::backend::etcd::seam::{
    EtcdClient, EtcdError, Lease, LeaseId, RangeRequest, RangeResponse,
};
use lockcheck::backend::etcd::seam::{Revision, Txn, TxnResponse};
use lockcheck::backend::etcd::sim::NetEtcdConn;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::Verdict;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::SaysReleased;
use crate::common::{assert_release_truth_judged, bundled, judge_sim, real_servers_one_at_a_time};

const SCENARIOS: [&str; 6] = [
    "etcd-lock-no-faults",
    "etcd-lock-jepsen-pause",
    "etcd-lock-fenced-pause",
    "etcd-lock-leader-failover",
    "etcd-lock-pause-while-waiting",
    "etcd-lock-lease-check-pause-while-waiting",
];

fn assert_expected(name: &str, o: &Outcome) {
    let s = bundled(name);
    assert_eq!(
        o.verdict(),
        s.expect,
        "{name} ({:?}, seed {}): {}",
        o.mode,
        o.seed,
        o.history.render()
    );
    // Every check the scenario states or implies (`expect = "safe"` states them all safe).
    for (check, result) in &o.checks {
        let Some(want) = s.held_to(check, result.verdict) else {
            continue;
        };
        assert_eq!(
            result.verdict,
            want,
            "{name} ({:?}, seed {}): {check}\n{}",
            o.mode,
            o.seed,
            o.history.render()
        );
    }
}

/// A connection whose first transaction (anyone's) is applied by the server and answered with a
/// refusal, as a real etcd answers `etcdserver: ...` to a request it may already have applied.
#[derive(Clone)]
struct RefusedOnce {
    inner: NetEtcdConn,
    refuse: Arc<AtomicBool>,
}

impl EtcdClient for RefusedOnce {
    async fn lease_grant(&mut self, ttl_s: i64) -> Result<Lease, EtcdError> {
        self.inner.lease_grant(ttl_s).await
    }
    async fn lease_keep_alive(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        self.inner.lease_keep_alive(id).await
    }
    async fn lease_time_to_live(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        self.inner.lease_time_to_live(id).await
    }
    async fn lease_revoke(&mut self, id: LeaseId) -> Result<(), EtcdError> {
        self.inner.lease_revoke(id).await
    }
    async fn range(&mut self, r: RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.inner.range(r).await
    }
    async fn txn(&mut self, txn: Txn) -> Result<TxnResponse, EtcdError> {
        let answer = self.inner.txn(txn).await;
        if self.refuse.swap(false, Ordering::SeqCst) {
            return Err(EtcdError::Rejected("refused by the test".into()));
        }
        answer
    }
    async fn delete(&mut self, key: &str) -> Result<(i64, Revision), EtcdError> {
        self.inner.delete(key).await
    }
    async fn wait_deleted(&mut self, key: &str, from: Revision) -> Result<Revision, EtcdError> {
        self.inner.wait_deleted(key, from).await
    }
}

/// A refused acquire ends its session with it: the refused client's key (put, then answered with
/// a refusal) is deleted and its lease revoked, so nobody waits behind it. Before, the session
/// lived on with its keep-alive, its key first in the queue, and every later acquire, the refused
/// client's own too, waited for it until its wait bound (CI's real leader failover: etcd answered
/// `leader changed`). Every seed and client count, since whichever client sends the first
/// transaction is the one refused.
#[test]
fn a_refused_acquire_leaves_no_key_in_the_queue() {
    let base = bundled("etcd-lock-no-faults");
    for clients in [2, 3, 5] {
        let mut s = base.clone();
        s.workload.clients = clients;
        for seed in 1..=5 {
            let refuse = Arc::new(AtomicBool::new(true));
            let run =
                lockcheck::backend::etcd::sim::world::run_with(&s, seed, |config, conn, env| {
                    let conn = RefusedOnce {
                        inner: conn,
                        refuse: refuse.clone(),
                    };
                    EtcdMutex::<_, _, PLAIN>::new(config, vec![conn], env)
                });
            assert!(!refuse.load(Ordering::SeqCst), "no transaction was refused");
            let o = Outcome::judge(&s, Mode::Sim, seed, run.history);
            let text = o.history.render();
            assert!(text.contains("refused by the test"), "{text}");
            for check in ["mutual_exclusion", "liveness"] {
                assert_eq!(
                    o.checks[check].verdict,
                    Verdict::Safe,
                    "{clients} clients, seed {seed}: {check}\n{text}"
                );
            }
        }
    }
}

#[test]
fn every_etcd_scenario_holds_in_simulation_for_several_seeds() {
    for name in SCENARIOS {
        let s = bundled(name);
        for seed in [s.seed, 2, 3, 4, 5] {
            assert_expected(name, &judge_sim(&s, seed));
        }
    }
}

#[test]
fn a_simulated_etcd_run_is_deterministic() {
    let s = bundled("etcd-lock-leader-failover");
    let a = judge_sim(&s, 7);
    let b = judge_sim(&s, 7);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.history.render(), b.history.render());
}

/// The fenced variant is not safe by luck: the stale write is offered and refused.
#[test]
fn the_fenced_holder_offers_its_stale_write_and_the_resource_refuses_it() {
    let o = judge_sim(&bundled("etcd-lock-fenced-pause"), 1);
    let text = o.history.render();
    assert!(text.contains("accepted=false"), "{text}");
}

fn real(name: &str) -> Outcome {
    let s = bundled(name);
    let history = lockcheck::Registry::new()
        .run_real(&s, s.seed)
        .unwrap_or_else(|e| panic!("{name} on real etcd: {e}"));
    Outcome::judge(&s, Mode::Real, s.seed, history)
}

#[test]
fn every_etcd_scenario_holds_on_spawned_etcd_members() {
    let _turn = real_servers_one_at_a_time();
    let before = lockcheck::real::registered_children();
    for name in SCENARIOS {
        let o = real(name);
        assert_expected(name, &o);
        assert_ne!(o.verdict(), Verdict::NotJudged, "{name}");
    }
    assert_eq!(lockcheck::real::registered_children(), before);
}

/// The simulated cluster records each removal of a lock entry with its cause: a client's delete
/// or revocation (`EntryRemoved`), the leader's expiry loop (`EntryGone`). So the release check
/// judges the etcd locks: the built-in mutex answers truthfully (a release after its lease expired
/// deleted nothing and says so), and a lock that answers "released" whatever happened (npm
/// etcd3's) is caught after the expiry, with the expiry in its evidence. Before, the release
/// check did not judge etcd runs at all.
#[test]
fn a_release_after_the_lease_expired_is_judged_in_simulation() {
    let s = bundled("etcd-lock-jepsen-pause");
    for seed in [s.seed, 2, 3] {
        let run = lockcheck::backend::etcd::sim::world::run_with(&s, seed, |config, conn, env| {
            SaysReleased(EtcdMutex::<_, _, PLAIN>::new(config, vec![conn], env))
        });
        let planted = Outcome::judge(&s, Mode::Sim, seed, run.history);
        assert_release_truth_judged(&judge_sim(&s, seed), &planted);
    }
}

/// A named client's pause at `at_ms = 0` is a late start on real etcd too.
#[test]
fn a_client_starts_late_on_spawned_etcd_members() {
    let _turn = real_servers_one_at_a_time();
    crate::common::assert_a_real_client_starts_late("etcd-lock-no-faults", 800);
}
