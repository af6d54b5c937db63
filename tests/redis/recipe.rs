//! `real_mode_unsupported` tells a real suite which scenarios to list as SKIP, with the reason.

use lockcheck::scenario::Scenario;
use std::path::Path;

#[test]
fn failover_scenario_has_a_real_recipe() {
    let s = Scenario::load(Path::new("scenarios/failover-lock-loss.toml")).unwrap();
    assert_eq!(s.real_mode_unsupported(), None);
}

#[test]
fn two_replicas_have_no_real_recipe_and_say_why() {
    let text = std::fs::read_to_string("scenarios/failover-lock-loss.toml").unwrap();
    let text = text.replacen("replicas = 1", "replicas = 2", 1);
    let s = Scenario::parse("two-replicas.toml", &text).unwrap();
    let reason = s
        .real_mode_unsupported()
        .expect("two replicas are not supported in real mode");
    assert!(reason.contains("at most 1 replica"), "{reason}");
}
