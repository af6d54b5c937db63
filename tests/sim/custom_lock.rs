//! Testing your own lock: implement `Lock` against the two seams and hand it to the simulator
//! (`sim::run_with`, below the harness). The example's lock checks with GET, then SETs: two
//! clients can both see the key absent.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;

/// `examples/check_then_set.rs`: checks with GET, then SETs.
#[path = "../../examples/check_then_set.rs"]
mod check_then_set;

const SCENARIO: &str = r#"
name = "check-then-set"
expect = "violation"
duration_ms = 20000
[lock]
kind = "set-nx-px"   # ignored: run_with builds the lock below
ttl_ms = 5000
[workload]
clients = 3
cycles = 20
hold_ms = [5, 10]
think_ms = [0, 5]
"#;

#[test]
fn a_racy_lock_is_caught_without_any_fault() {
    let s = Scenario::parse("inline.toml", SCENARIO).unwrap();
    let mut violated = 0;
    for seed in 1..=5 {
        let run = lockcheck::sim::run_with(&s, seed, |config, conns, env| {
            let params = check_then_set::Params { poll_ms: 2 };
            check_then_set::CheckThenSet::new(config.with_params(params), conns, env)
        });
        let o = Outcome::judge(&s, Mode::Sim, seed, run.history);
        if o.verdict() == Verdict::Violation {
            violated += 1;
        }
    }
    assert!(violated >= 3, "only {violated} of 5 seeds caught the race");
}

/// `examples/own_lock_both_ways.rs`: the same custom lock, unchanged, in simulation
/// (`sim::run_with`) and on spawned `redis-server` processes (`real::redis_world::run_with`).
#[path = "../../examples/own_lock_both_ways.rs"]
mod own_lock_both_ways;

#[test]
fn a_custom_lock_runs_unchanged_in_simulation_and_on_real_servers() {
    let _one_at_a_time = crate::common::real_servers_one_at_a_time();
    for text in own_lock_both_ways::SCENARIOS {
        let s = Scenario::parse("inline.toml", text).unwrap();
        for real in [false, true] {
            let o = own_lock_both_ways::verdict(&s, real)
                .unwrap_or_else(|e| panic!("{} (real: {real}): {e}", s.name));
            assert_eq!(
                o.verdict(),
                s.expect,
                "{} (real: {real}):\n{}",
                s.name,
                o.history.render()
            );
            // The lock really ran: every cycle of the no-fault run entered its section.
            let sections = &o.checks["mutual_exclusion"].evidence["sections"];
            assert!(
                sections.as_u64().unwrap_or(0) >= 2,
                "{}: {sections}",
                s.name
            );
        }
    }
    assert_eq!(lockcheck::real::registered_children(), 0);
}
