//! Every seed lock in simulation: each bundled scenario reaches every verdict it expects, for the
//! reason it claims, and the same workload without its fault (or with the fix) comes out the
//! other way, so no scenario is vacuous.

use crate::common::{bundled as scenario, judge_sim as judge};
use lockcheck::env::Env;
use lockcheck::history::{EventKind, History};
use lockcheck::judge::{Mode, Outcome};
use lockcheck::lock::{Guard, Lock, LockConfig, LockError, LockKind};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use redis::aio::ConnectionLike;
use std::path::Path;

fn verdict(o: &Outcome, check: &str) -> Verdict {
    o.checks[check].verdict
}

/// Every expectation of the scenario holds on each of `seeds`.
fn expect_all(s: &Scenario, seeds: std::ops::RangeInclusive<u64>) -> Vec<Outcome> {
    seeds
        .map(|seed| {
            let o = judge(s, seed);
            for name in lockcheck::check::CHECK_NAMES {
                let held = o.checks.get(*name).and_then(|r| s.held_to(name, r.verdict));
                if let Some(e) = held {
                    assert_eq!(
                        verdict(&o, name),
                        e,
                        "{} seed {seed}: {name}: {}\n{}",
                        s.name,
                        o.checks[*name].summary,
                        o.history.render()
                    );
                }
            }
            o
        })
        .collect()
}

fn count(h: &History, f: impl Fn(&EventKind) -> bool) -> usize {
    h.events.iter().filter(|e| f(&e.kind)).count()
}

#[test]
fn every_bundled_scenario_meets_every_expectation_on_five_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    for f in lockcheck::cli::run::scenario_files(&dir).unwrap() {
        let s = Scenario::load(&f).unwrap();
        expect_all(&s, 1..=5);
    }
}

#[test]
fn every_lock_kind_has_a_scenario() {
    // Client-process locks need real mode, so their scenarios live apart in scenarios/clients/.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let kinds: Vec<LockKind> = [root.clone(), root.join("clients")]
        .iter()
        .flat_map(|dir| lockcheck::cli::run::scenario_files(dir).unwrap())
        .map(|f| Scenario::load(&f).unwrap().lock.kind)
        .collect();
    for k in LockKind::builtins() {
        assert!(kinds.contains(k), "no scenario for {}", k.name());
    }
}

#[test]
fn naive_lock_crash_between_setnx_and_expire_blocks_the_lock_for_good() {
    let s = scenario("naive-crash-after-setnx");
    for o in expect_all(&s, 1..=3) {
        let ev = &o.checks["liveness"].evidence;
        assert_eq!(ev["crashes"][0]["point"], "after_setnx");
        assert_eq!(ev["longest"]["ended_by_grant"], false);
        // After the crash nobody ever acquired again.
        let crash_at = ev["crashes"][0]["at_us"].as_u64().unwrap();
        assert!(!o
            .history
            .events
            .iter()
            .any(|e| e.at_us > crash_at && matches!(e.kind, EventKind::Acquired { .. })));
    }
    // Without the crash the lock stays available.
    let mut s = s;
    s.faults.clear();
    let o = judge(&s, 1);
    assert_eq!(verdict(&o, "liveness"), Verdict::Safe);
}

#[test]
fn a_crash_after_expire_is_healed_by_the_lease() {
    let s = scenario("naive-crash-while-holding");
    for o in expect_all(&s, 1..=3) {
        let longest = o.checks["liveness"].evidence["longest_unavailable_us"]
            .as_u64()
            .unwrap();
        // About one lease (1 s): the key expired and a waiter got in.
        assert!((900_000..2_000_000).contains(&longest), "{longest}");
    }
}

#[test]
fn plain_del_removes_the_next_holders_lock() {
    let s = scenario("set-ex-nx-del-foreign-release");
    for o in expect_all(&s, 1..=5) {
        let r = &o.checks["foreign_release"].evidence["releases"][0];
        assert_ne!(r["client"], r["owner"]);
        // The pause was after the releaser's critical section: the overlaps that follow are
        // between two other clients, caused by the deleted entry.
        let releaser = r["client"].as_u64().unwrap();
        let released_at = r["released_us"].as_u64().unwrap();
        let overlaps = o.checks["mutual_exclusion"].evidence["overlaps"]
            .as_array()
            .unwrap();
        assert!(overlaps.iter().any(|p| {
            p["first"]["client"].as_u64() != Some(releaser)
                && p["second"]["client"].as_u64() != Some(releaser)
                && p["from_us"].as_u64().unwrap() >= released_at
        }));
    }
    // The compare-and-delete release (set-nx-px) under the same pause deletes nobody's entry.
    let mut s = s;
    s.lock.kind = LockKind::builtin("set-nx-px").unwrap();
    for seed in 1..=5 {
        let o = judge(&s, seed);
        assert_eq!(verdict(&o, "foreign_release"), Verdict::Safe, "seed {seed}");
    }
}

#[test]
fn seed_004_release_deletes_an_entry_granted_between_its_get_and_its_del() {
    for o in expect_all(&scenario("naive-release-race"), 1..=5) {
        let r = &o.checks["foreign_release"].evidence["releases"][0];
        // The victim was granted after the releaser left its section (so after its GET was
        // sent), and before the DEL went out.
        let owner_granted = r["owner_granted_us"].as_u64().unwrap();
        assert!(owner_granted > r["release_started_us"].as_u64().unwrap());
        assert!(owner_granted < r["deleting_command_sent_us"].as_u64().unwrap());
    }
}

#[test]
fn lettuce_nested_acquires_only_count_on_the_client() {
    let s = scenario("lettuce-reentrant-nested");
    for o in expect_all(&s, 1..=3) {
        let ev = &o.checks["reentrancy"].evidence;
        assert_eq!(ev["nested_acquires"], 3 * 10 * 2);
        assert_eq!(ev["inner_releases"], 3 * 10 * 2);
        assert_eq!(
            count(&o.history, |k| matches!(
                k,
                EventKind::InnerReleased { deleted: true, .. }
            )),
            0
        );
    }
    // A non-reentrant lock deadlocks on itself at the nested acquire.
    let mut s = s;
    s.lock.kind = LockKind::builtin("set-nx-px").unwrap();
    s.lock.wait_ms = 200;
    s.workload.cycles = 2;
    let o = judge(&s, 1);
    assert_eq!(verdict(&o, "reentrancy"), Verdict::Violation);
    assert_eq!(
        o.checks["reentrancy"].evidence["failures"][0]["what"],
        "nested acquire failed"
    );
}

#[test]
fn lettuce_reenters_a_lock_it_no_longer_holds() {
    let s = scenario("lettuce-reentrant-gc-pause");
    for o in expect_all(&s, 1..=3) {
        // The paused holder's nested acquire succeeded after another client had been granted
        // the lock: the count lives on the client only.
        let gs = lockcheck::check::grants(&o.history);
        let first = &gs[0];
        let other = gs
            .iter()
            .find(|g| g.client != first.client)
            .expect("another grant");
        let reentered_late = o.history.events.iter().any(|e| {
            e.client() == Some(first.client)
                && matches!(e.kind, EventKind::Reentered { .. })
                && e.at_us > other.acquired_us
                && e.at_us < first.end_us.unwrap_or(u64::MAX)
        });
        assert!(reentered_late, "{}", o.history.render());
    }
}

#[test]
fn lettuce_after_a_failover_meets_noscript_because_script_load_is_not_replicated() {
    for o in expect_all(&scenario("lettuce-reentrant-failover"), 1..=3) {
        let noscript = count(
            &o.history,
            |k| matches!(k, EventKind::AcquireFailed { reason } if reason.contains("NoScript")),
        );
        assert!(noscript > 5, "{}", o.history.render());
    }
}

/// A reentrant lock whose inner release frees the lock: it counts nested acquires but runs the
/// compare-and-delete on every release.
struct LeakyReentrant<C, E> {
    inner: lockcheck::lock::SetNxPx<C, E>,
    conn: C,
    key: String,
    held: Option<Guard>,
}

impl<C, E> Lock for LeakyReentrant<C, E>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        if let Some(g) = &self.held {
            return Ok(Some(g.clone()));
        }
        let g = self.inner.acquire().await?;
        self.held = g.clone();
        Ok(g)
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deleted: i64 = lockcheck::lock::lease::COMPARE_AND_DELETE
            .key(&self.key)
            .arg(&guard.owner)
            .invoke_async(&mut self.conn)
            .await?;
        if deleted == 1 || self.held.as_ref() != Some(guard) {
            self.held = None;
        }
        Ok(deleted == 1)
    }
}

#[test]
fn the_reentrancy_check_catches_an_inner_release_that_frees_the_lock() {
    let s = scenario("lettuce-reentrant-nested");
    let mut caught = 0;
    for seed in 1..=3 {
        let run = lockcheck::sim::run_with(&s, seed, |config: LockConfig, mut conns, env| {
            let conn = conns.remove(0);
            LeakyReentrant {
                inner: lockcheck::lock::SetNxPx::new(config.clone(), vec![conn.clone()], env),
                conn,
                key: config.key,
                held: None,
            }
        });
        let o = Outcome::judge(&s, Mode::Sim, seed, run.history);
        if verdict(&o, "reentrancy") == Verdict::Violation {
            caught += 1;
            assert!(o.checks["reentrancy"].summary.contains("failure"));
        }
    }
    assert_eq!(caught, 3);
}

#[test]
fn redisson_watchdog_lease_runs_out_during_a_long_pause() {
    let s = scenario("redisson-watchdog-pause-40s");
    for o in expect_all(&s, 1..=3) {
        let ev = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
        // The other client got in once the 30 s lease (renewed at most 10 s before the pause)
        // ran out: between 20 s and 30 s into the 40 s pause.
        let second = ev["second"]["acquired_us"].as_u64().unwrap();
        assert!(
            (20_000_000..=30_100_000).contains(&second),
            "second holder at {second}"
        );
    }
    // A pause shorter than the renewal slack (lease - lease/3) is survived.
    let mut s = s;
    if let lockcheck::scenario::FaultKind::Pause { for_ms, .. } = &mut s.faults[0].kind {
        *for_ms = 15_000;
    }
    for seed in 1..=3 {
        assert_eq!(verdict(&judge(&s, seed), "mutual_exclusion"), Verdict::Safe);
    }
}

#[test]
fn redisson_scaled_pause_scenarios() {
    expect_all(&scenario("redisson-watchdog-pause"), 1..=3);
    expect_all(&scenario("redisson-watchdog-short-pause"), 1..=3);
}

#[test]
fn redisson_watchdog_keeps_a_long_section_safe_and_waiters_wake_on_pub_sub() {
    let s = scenario("redisson-watchdog-long-hold");
    for o in expect_all(&s, 1..=3) {
        let gs = lockcheck::check::grants(&o.history);
        for w in gs.windows(2) {
            let held = w[0].exit_us.unwrap() - w[0].acquired_us;
            assert!(held > 3 * 1_000_000, "sections outlive three leases");
            // The waiter was woken by the unlock message, within a few ms of the release, not
            // after its PTTL (up to a whole lease).
            let gap = w[1].acquired_us - w[0].end_us.unwrap();
            assert!(gap < 20_000, "woken {gap} µs after the release");
        }
        // Every section re-entered once (Redisson's lock is not fair: a releaser may take it
        // again before the woken waiter's attempt arrives).
        assert_eq!(
            o.checks["reentrancy"].evidence["nested_acquires"],
            o.checks["mutual_exclusion"].evidence["sections"]
        );
    }
    // Without pub/sub the same waiter would have slept up to the returned PTTL: with an
    // explicit lease the section loses the lock.
    let o = expect_all(&scenario("redisson-fixed-lease-long-hold"), 1..=3);
    assert!(o
        .iter()
        .all(|o| verdict(o, "mutual_exclusion") == Verdict::Violation));
}

#[test]
fn redisson_loses_its_lock_in_a_failover() {
    for o in expect_all(&scenario("redisson-failover"), 1..=5) {
        let faults = crate::common::fault_lines(&o.history);
        assert!(faults.iter().any(|f| f.contains("promoted")), "{faults:?}");
    }
}

#[test]
fn fencing_refuses_the_paused_holders_write() {
    let s = scenario("fenced-kleppmann-pause");
    for o in expect_all(&s, 1..=5) {
        let ev = &o.checks["resource"].evidence;
        assert!(ev["writes_refused"].as_u64().unwrap() >= 1, "{ev}");
        // The refused write carried an older token than one the storage had seen.
        let refused = o
            .history
            .events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::ResourceWrite {
                    accepted: false,
                    fencing_token,
                    ..
                } => fencing_token,
                _ => None,
            })
            .unwrap();
        let newer = o
            .history
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::ResourceWrite {
                    accepted: true,
                    fencing_token: Some(t),
                    ..
                } => Some(t),
                _ => None,
            })
            .max()
            .unwrap();
        assert!(refused < newer);
    }
    // Without tokens the same pause corrupts the counter.
    for o in expect_all(&scenario("unfenced-kleppmann-pause"), 1..=5) {
        let ev = &o.checks["resource"].evidence;
        assert!(ev["stale_writes_accepted"].as_u64().unwrap() >= 1);
        assert!(ev["lost_updates"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn a_failover_to_a_lagging_replica_reuses_a_token() {
    for o in expect_all(&scenario("fenced-failover-token-reuse"), 1..=5) {
        let ev = &o.checks["resource"].evidence;
        let reused = &ev["fencing_tokens_reused"][0];
        assert_eq!(reused["clients"].as_array().unwrap().len(), 2, "{ev}");
        assert_eq!(
            ev["stale_writes"][0]["fencing_token"],
            ev["stale_writes"][0]["newer_fencing_token"]
        );
    }
}

#[test]
fn address_book_gets_two_defaults_under_a_gc_pause_and_one_without() {
    for o in expect_all(&scenario("address-book-gc-pause"), 1..=5) {
        let state = o
            .history
            .events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::AddressBookState { defaults, .. } => Some(defaults),
                _ => None,
            })
            .unwrap();
        assert_eq!(state, 2);
    }
    for o in expect_all(&scenario("address-book-no-faults"), 1..=3) {
        let (addresses, defaults) = o
            .history
            .events
            .iter()
            .find_map(|e| match e.kind {
                EventKind::AddressBookState {
                    addresses,
                    defaults,
                    ..
                } => Some((addresses, defaults)),
                _ => None,
            })
            .unwrap();
        assert_eq!((addresses, defaults), (20, 1));
    }
}
