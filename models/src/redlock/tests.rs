//! The redlock model's verdicts and shortest traces.

use crate::report::Finding;
use crate::test_util::{self, actions};
use crate::{ModelReport, Strategy};

/// Exhaustive proofs in the default (debug) test run use a smaller
/// configuration than the model's defaults; `examples/figures.rs` runs
/// the defaults in release.
const SMALL: [(&str, &str); 3] = [("ttl", "3"), ("time_bound", "5"), ("retries", "0")];

fn check(property: &str, params: &[(&str, &str)], strategy: Strategy) -> ModelReport {
    let small = if strategy == Strategy::Dfs {
        &SMALL[..]
    } else {
        &[]
    };
    let all: Vec<(&str, &str)> = small.iter().chain(params).copied().collect();
    test_util::check("redlock", property, &all, strategy)
}

fn holds(r: &ModelReport) -> usize {
    match r.outcome {
        Finding::Holds { unique_states, .. } => unique_states,
        _ => panic!("{}", r.to_text()),
    }
}

#[test]
fn no_faults_holds_and_hands_over() {
    let r = check("mutual_exclusion", &[], Strategy::Dfs);
    assert!(holds(&r) > 5_000);
    check("handover", &[], Strategy::Bfs);
}

#[test]
fn drift_within_the_allowance_holds() {
    let p = [
        ("drift_period", "4"),
        ("fast_nodes", "3"),
        ("client_clock", "drift"),
        ("slow_clients", "2"),
        ("allowance", "2"),
    ];
    let r = check("mutual_exclusion", &p, Strategy::Dfs);
    holds(&r);
}

#[test]
fn drift_beyond_the_allowance_breaks() {
    let p = [
        ("drift_period", "4"),
        ("fast_nodes", "3"),
        ("client_clock", "drift"),
        ("slow_clients", "2"),
        ("allowance", "0"),
    ];
    let r = check("mutual_exclusion", &p, Strategy::Bfs);
    assert!(r.trace().is_some());
    let toml = r.to_scenario_toml().unwrap();
    assert!(
        toml.contains("kind = \"clock_drift\"\nnode = \"redis-0\"\nat_ms = 0\nppm = 250000"),
        "{toml}"
    );
}

#[test]
fn a_clock_jump_breaks_it() {
    let r = check("mutual_exclusion", &[("jumps", "1")], Strategy::Bfs);
    // Kleppmann's example: client-0 holds redis-0 and redis-1, redis-1's
    // clock jumps, its key expires, and client-1 gets redis-1 and
    // redis-2 while client-0 (which got only a majority) still holds.
    assert_eq!(
        actions(&r),
        [
            "client-0: starts at 0 on its clock; SET lock client-0 NX PX 4 on redis-0 -> OK",
            "client-0: SET lock client-0 NX PX 4 on redis-1 -> OK",
            "client-1: starts at 0 on its clock; SET lock client-1 NX PX 4 on redis-0 -> refused",
            "redis-1's clock jumps forward by 2 ticks",
            "tick: true time 0 -> 1",
            "tick: true time 1 -> 2",
            "client-1: SET lock client-1 NX PX 4 on redis-1 -> OK",
            "client-1: SET lock client-1 NX PX 4 on redis-2 -> OK",
            "client-0: SET lock client-0 NX PX 4 on redis-2 -> refused",
            "client-0: 2 of 3 nodes, elapsed 2 of validity 4 -> acquired",
            "client-1: 2 of 3 nodes, elapsed 2 of validity 4 -> acquired",
        ]
    );
    let toml = r.to_scenario_toml().unwrap();
    assert!(toml.contains("kind = \"clock_jump\""));
}

#[test]
fn restart_without_persistence_breaks_it_and_the_delay_fixes_it() {
    let r = check("mutual_exclusion", &[("crashes", "1")], Strategy::Bfs);
    let a = actions(&r);
    assert_eq!(a.len(), 9, "{a:?}");
    assert!(a.iter().any(|a| a.contains("crashes")), "{a:?}");
    assert!(r.to_scenario_toml().unwrap().contains("kind = \"crash\""));
    let r = check(
        "mutual_exclusion",
        &[("crashes", "1"), ("restart_delay", "true")],
        Strategy::Dfs,
    );
    holds(&r);
}

#[test]
fn without_the_recheck_a_slow_acquisition_breaks_it() {
    let p = [("recheck_after_acquire", "false")];
    let r = check("mutual_exclusion", &p, Strategy::Bfs);
    let a = actions(&r);
    assert!(
        a.iter()
            .any(|a| a.starts_with("client-0: 3 of 3 nodes -> acquired")),
        "{a:?}"
    );
    assert!(r.to_scenario_toml().is_none());
    // Checking validity before writing keeps that holder from writing.
    let p = [
        ("recheck_after_acquire", "false"),
        ("check_validity_before_write", "true"),
    ];
    holds(&check("no_stale_write", &p, Strategy::Dfs));
}

#[test]
fn a_pause_between_check_and_write_still_writes_stale() {
    let p = [
        ("pauses", "1"),
        ("check_validity_before_write", "true"),
        ("ttl", "3"),
        ("time_bound", "5"),
        ("retries", "0"),
    ];
    let r = check("no_stale_write", &p, Strategy::Bfs);
    let a = actions(&r);
    let check_at = a
        .iter()
        .position(|x| x == "client-0 checks its validity before writing")
        .expect("client-0 checks");
    assert_eq!(a[check_at + 1], "client-0 pauses", "{a:?}");
    assert_eq!(a.last().unwrap(), "client-0 writes to the storage");
}

#[test]
fn specl_redlock_configuration_is_violated() {
    let p = [
        ("nodes", "3"),
        ("clients", "2"),
        ("ttl", "3"),
        ("time_bound", "8"),
        ("client_clock", "lag"),
    ];
    let r = check("mutual_exclusion", &p, Strategy::Bfs);
    // specl's TLA+ spec reports 15 steps with its finer-grained actions
    // (separate StartAcquire, ExpireLock and FailLock steps).
    let a = actions(&r);
    assert_eq!(a.len(), 11, "{a:?}");
    assert!(
        !a.iter().any(|a| a.contains("client-0's clock advances")),
        "{a:?}"
    );
    assert!(r.to_scenario_toml().is_none());
}
