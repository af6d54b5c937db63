//! Every bundled scenario reaches its expected verdict in simulation, for the reason it claims.

use lockcheck::history::EventKind;
use lockcheck::scenario::{Scenario, Verdict};
use lockcheck::verdict::{Mode, Outcome};
use std::path::Path;

fn scenario(name: &str) -> Scenario {
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name),
    )
    .unwrap()
}

fn judge(s: &Scenario, seed: u64) -> Outcome {
    let run = lockcheck::sim::run(s, seed);
    Outcome::judge(s, Mode::Sim, seed, run.history)
}

fn faults(o: &Outcome) -> Vec<String> {
    o.history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault { what } => Some(what.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn failover_loses_the_lock_to_the_promoted_replica() {
    let s = scenario("failover-lock-loss.toml");
    for seed in 1..=5 {
        let o = judge(&s, seed);
        assert_eq!(
            o.verdict(),
            Verdict::Violation,
            "seed {seed}\n{}",
            o.history.render()
        );
        let f = faults(&o);
        assert_eq!(f[0], "redis-0 killed", "seed {seed}: {f:?}");
        assert!(f[1].starts_with("redis-0-replica-0 promoted"), "{f:?}");
        // The second holder acquired after the promotion, while the first still held.
        let ev = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
        let second_acquired = ev["second"]["acquired_us"].as_u64().unwrap();
        let promoted_at = o
            .history
            .events
            .iter()
            .find(|e| matches!(&e.kind, EventKind::Fault { what } if what.contains("promoted")))
            .unwrap()
            .at_us;
        assert!(second_acquired >= promoted_at, "seed {seed}");
        assert!(promoted_at >= 1_000_000, "failover_detect_ms is 1000");
    }
}

#[test]
fn gc_pause_past_the_lease_gives_two_holders() {
    let s = scenario("gc-pause-lease-expiry.toml");
    for seed in 1..=5 {
        let o = judge(&s, seed);
        assert_eq!(o.verdict(), Verdict::Violation, "seed {seed}");
        let ev = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
        // The paused holder entered at about t=0 and stayed inside for the whole pause.
        let first = &ev["first"];
        let inside = first["exit_us"].as_u64().unwrap() - first["enter_us"].as_u64().unwrap();
        assert!(
            inside >= 3_000_000,
            "paused for 3 s, was inside {inside} µs"
        );
        // The other client acquired after the lease (1 s) ran out on the server.
        assert!(ev["second"]["acquired_us"].as_u64().unwrap() >= 1_000_000);
    }
}

#[test]
fn no_faults_is_safe_and_every_cycle_completes() {
    let s = scenario("set-nx-px-no-faults.toml");
    for seed in 1..=3 {
        let run = lockcheck::sim::run(&s, seed);
        let o = Outcome::judge(&s, Mode::Sim, seed, run.history.clone());
        assert_eq!(o.verdict(), Verdict::Safe, "seed {seed}");
        let sections = o.checks["mutual_exclusion"].evidence["sections"]
            .as_u64()
            .unwrap();
        assert_eq!(sections, 4 * 50, "every cycle acquired");
        // No lost update: the counter saw every write.
        assert_eq!(run.counter, (200, 200));
    }
}

#[test]
fn the_violation_scenarios_fail_without_their_fault() {
    // Guard against a vacuous scenario: remove the fault and the same workload is safe.
    for name in ["failover-lock-loss.toml", "gc-pause-lease-expiry.toml"] {
        let mut s = scenario(name);
        s.faults.clear();
        let o = judge(&s, 1);
        assert_eq!(o.verdict(), Verdict::Safe, "{name} without faults");
    }
}
