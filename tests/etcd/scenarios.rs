//! The bundled etcd scenarios reach their expected verdicts in simulation (every one, a few
//! seeds) and on spawned etcd members (one real run each: about 50 s of real time in all, most
//! of it the scenarios' own durations).

use lockcheck::judge::{Mode, Outcome};
use lockcheck::Verdict;

use crate::common::{bundled, judge_sim, real_servers_one_at_a_time};

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
    for (check, want) in &s.expect_checks {
        assert_eq!(
            o.checks[check].verdict,
            *want,
            "{name} ({:?}, seed {}): {check}\n{}",
            o.mode,
            o.seed,
            o.history.render()
        );
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
