//! Every bundled scenario on real `redis-server` processes: the same lock code, the same workload,
//! the same checkers, and the same expected verdicts as in simulation. (The 40 s Redisson pause is
//! simulation-only; `redisson-watchdog-pause` is its scaled copy.)

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use std::path::Path;

fn run_real(name: &str) -> Outcome {
    let s = Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.toml")),
    )
    .unwrap();
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{name} could not run on real processes: {e}"));
    let o = Outcome::judge(&s, Mode::Real, 1, history);
    for check in lockcheck::check::CHECK_NAMES {
        // A check that did not run (`throughput` without its bound) has no verdict to hold.
        let held = o
            .checks
            .get(*check)
            .and_then(|r| s.held_to(check, r.verdict));
        if let Some(e) = held {
            assert_eq!(
                o.checks[*check].verdict,
                e,
                "{name} --real: {check}: {}\n{}",
                o.checks[*check].summary,
                o.history.render()
            );
        }
    }
    o
}

macro_rules! real {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_real($name);
            }
        )*
        /// Every bundled scenario but the simulation-only one has a test here.
        #[test]
        fn every_bundled_scenario_has_a_real_test() {
            let covered = [$($name,)* "failover-lock-loss", "gc-pause-lease-expiry", "set-nx-px-no-faults", "redisson-watchdog-pause-40s"];
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
            for f in lockcheck::cli::run::scenario_files(&dir).unwrap() {
                // Redlock's scenarios have their own real-mode tests (redlock.rs).
                let s = Scenario::load(&f).unwrap();
                // Every other service's real runs are in its own test folder (tests/mysql,
                // tests/etcd, tests/zookeeper, tests/postgres: each `scenarios.rs`).
                if s.lock.kind.name() == "redlock"
                    || s.lock.service != lockcheck::lock::Service::Redis
                {
                    continue;
                }
                // The Sentinel scenarios' real runs are in tests/redis/sentinel.rs, the Redis
                // Cluster's in tests/redis/cluster_scenarios.rs.
                if s.redis.sentinels > 0 || lockcheck::backend::redis::table::cluster(&s).is_some() {
                    continue;
                }
                let stem = f.file_stem().unwrap().to_str().unwrap().to_string();
                assert!(covered.contains(&stem.as_str()), "{stem} has no real-mode test");
            }
        }
    };
}

real! {
    naive_crash_after_setnx => "naive-crash-after-setnx",
    naive_crash_while_holding => "naive-crash-while-holding",
    naive_release_race => "naive-release-race",
    set_ex_nx_del_foreign_release => "set-ex-nx-del-foreign-release",
    set_ex_nx_del_no_faults => "set-ex-nx-del-no-faults",
    lettuce_reentrant_nested => "lettuce-reentrant-nested",
    lettuce_reentrant_gc_pause => "lettuce-reentrant-gc-pause",
    lettuce_reentrant_failover => "lettuce-reentrant-failover",
    redisson_watchdog_pause => "redisson-watchdog-pause",
    redisson_watchdog_short_pause => "redisson-watchdog-short-pause",
    redisson_watchdog_long_hold => "redisson-watchdog-long-hold",
    redisson_fixed_lease_long_hold => "redisson-fixed-lease-long-hold",
    redisson_failover => "redisson-failover",
    fenced_kleppmann_pause => "fenced-kleppmann-pause",
    unfenced_kleppmann_pause => "unfenced-kleppmann-pause",
    fenced_failover_token_reuse => "fenced-failover-token-reuse",
    address_book_gc_pause => "address-book-gc-pause",
    address_book_no_faults => "address-book-no-faults",
}

#[test]
fn a_real_gc_pause_stops_the_watchdog_too() {
    // If the watchdog kept renewing during the 4 s pause, the 3 s lease would never run out and
    // the other client could not get in.
    let o = run_real("redisson-watchdog-pause");
    let ev = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
    assert!(ev["second"]["acquired_us"].as_u64().unwrap() >= 2_000_000);
}

#[test]
fn real_redis_does_not_replicate_script_load() {
    let o = run_real("lettuce-reentrant-failover");
    assert!(o.history.events.iter().any(|e| matches!(&e.kind,
        lockcheck::history::EventKind::AcquireFailed { reason } if reason.contains("NoScript"))));
}

#[test]
fn a_real_client_crash_leaves_the_setnx_key_without_expiry() {
    let o = run_real("naive-crash-after-setnx");
    let ev = &o.checks["liveness"].evidence;
    assert_eq!(ev["crashes"][0]["point"], "after_setnx");
    assert!(ev["longest_unavailable_us"].as_u64().unwrap() > 3_000_000);
}
