//! The bundled ZooKeeper scenarios reach their expected verdicts in simulation, on five seeds
//! each, with the evidence each is about in the history, and a run repeats byte for byte (well
//! under a second of simulation per run); and on spawned ZooKeeper servers, one real run each
//! (about 45 s of real time in all, most of it the scenarios' own durations).

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;

use crate::common::{assert_release_truth_judged, SaysReleased};
use std::path::Path;

const SCENARIOS: [&str; 7] = [
    "zk-recipe-no-faults",
    "zk-curator-206-partition",
    "zk-curator-206-pause",
    "zk-recipe-listener-partition",
    "zk-recipe-listener-pause",
    "zk-recipe-fenced-pause",
    "zk-ensemble-failover",
];

fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml"));
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn sim(name: &str, seed: u64) -> Outcome {
    let s = scenario(name);
    Outcome::judge(
        &s,
        Mode::Sim,
        seed,
        lockcheck::Registry::new().run_sim(&s, seed).history,
    )
}

fn verdicts(o: &Outcome) -> Vec<(String, Verdict)> {
    o.checks
        .iter()
        .map(|(k, c)| (k.clone(), c.verdict))
        .collect()
}

fn assert_expected(name: &str, o: &Outcome) {
    let s = scenario(name);
    for (check, want) in &s.expect_checks {
        assert_eq!(
            o.checks[check].verdict,
            *want,
            "{name} (seed {}): {check} should be {want}: {}\n{}",
            o.seed,
            o.checks[check].summary,
            o.history.render()
        );
    }
    assert_eq!(
        o.verdict(),
        s.expect,
        "{name} (seed {}): {:?}\n{}",
        o.seed,
        verdicts(o),
        o.history.render()
    );
}

fn nemesis(o: &Outcome) -> String {
    o.history
        .events
        .iter()
        .filter(|e| e.node == "nemesis")
        .map(|e| format!("{:?}", e.kind))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn zookeeper_scenarios_reach_their_verdicts_in_simulation() {
    for name in SCENARIOS {
        for seed in 1..=5 {
            assert_expected(name, &sim(name, seed));
        }
    }
}

#[test]
fn the_evidence_is_what_each_scenario_is_about() {
    // CURATOR-206: the server expired the cut-off holder's session.
    let cut = sim("zk-curator-206-partition", 1);
    assert!(
        nemesis(&cut).contains("expired session"),
        "{}",
        nemesis(&cut)
    );
    // The listener gave up before the server expired the session: the holder skipped its write.
    let listener = sim("zk-recipe-listener-partition", 1);
    assert!(
        listener
            .history
            .render()
            .contains("renewal-failed lost=true")
            || listener.history.render().contains("lease-expired"),
        "{}",
        listener.history.render()
    );
    // The fenced holder's late write was refused.
    let fenced = sim("zk-recipe-fenced-pause", 1);
    assert!(
        fenced.history.render().contains("accepted=false"),
        "{}",
        fenced.history.render()
    );
    // The failover happened, and no session expired across it.
    let failover = sim("zk-ensemble-failover", 1);
    let n = nemesis(&failover);
    assert!(
        n.contains("elects a new leader") && n.contains("leads"),
        "{n}"
    );
    assert!(!n.contains("expired session"), "{n}");
}

#[test]
fn a_zookeeper_run_repeats_byte_for_byte() {
    for name in SCENARIOS {
        let s = scenario(name);
        let a = lockcheck::Registry::new().run_sim(&s, 7).history;
        let b = lockcheck::Registry::new().run_sim(&s, 7).history;
        assert_eq!(a.trace_hash(), b.trace_hash(), "{name}");
    }
}

fn real(name: &str) -> Outcome {
    let s = scenario(name);
    let history = lockcheck::Registry::new()
        .run_real(&s, s.seed)
        .unwrap_or_else(|e| panic!("{name} on spawned ZooKeeper servers: {e}"));
    Outcome::judge(&s, Mode::Real, s.seed, history)
}

#[test]
fn every_zookeeper_scenario_holds_on_spawned_zookeeper_servers() {
    let _turn = crate::zookeeper_turn();
    let before = lockcheck::real::registered_children();
    for name in SCENARIOS {
        let o = real(name);
        assert_expected(name, &o);
        assert_ne!(o.verdict(), Verdict::NotJudged, "{name}");
        let n = nemesis(&o);
        match name {
            // The ensemble's leader was killed and another server took over.
            "zk-ensemble-failover" => assert!(
                n.contains("(the leader) killed") && n.contains("leads (elected"),
                "{n}"
            ),
            // The paused holder's pings stopped with it.
            "zk-curator-206-pause" | "zk-recipe-listener-pause" | "zk-recipe-fenced-pause" => {
                assert!(n.contains("its session's pings stop too"), "{n}")
            }
            _ => {}
        }
    }
    assert_eq!(lockcheck::real::registered_children(), before);
}

/// The simulated ZooKeeper records each removal of a lock node with its cause: a client's delete
/// or the close of its own session (`EntryRemoved`), the session tracker's expiry (`EntryGone`).
/// So the release check judges the recipe: it answers truthfully (its delete after the expiry
/// found no node and says so), and a lock that answers "released" whatever happened (kazoo's
/// `release()` ignores `NoNodeError`) is caught after the expiry, with the expiry in its
/// evidence. Before, the release check did not judge ZooKeeper runs at all.
#[test]
fn a_release_after_the_session_expired_is_judged_in_simulation() {
    use lockcheck::backend::zookeeper::lock::{Plain, ZkRecipe};
    let s = scenario("zk-curator-206-pause");
    for seed in [s.seed, 2, 3] {
        let run =
            lockcheck::backend::zookeeper::sim::world::run_with(&s, seed, |config, conn, env| {
                SaysReleased(ZkRecipe::<_, _, Plain>::new(config, vec![conn], env))
            });
        let planted = Outcome::judge(&s, Mode::Sim, seed, run.history);
        assert_release_truth_judged(&sim("zk-curator-206-pause", seed), &planted);
    }
}

/// A named client's pause at `at_ms = 0` is a late start on real ZooKeeper too.
#[test]
fn a_client_starts_late_on_spawned_zookeeper_servers() {
    let _turn = crate::zookeeper_turn();
    crate::common::assert_a_real_client_starts_late("zk-recipe-no-faults", 800);
}
