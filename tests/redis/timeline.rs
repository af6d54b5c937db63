//! The HTML timeline's server lanes of a Redis deployment with Sentinel: a promotion and a
//! demotion on the servers' own lanes. The timeline (`report_html::timeline`) names no service;
//! this holds that it reads Sentinel's notes right.

use lockcheck::report_html::timeline::build;
use lockcheck::Scenario;

/// The sentinels promote the replica while the old master is cut off: the replica's lane
/// turns master, and the old master's stays master until it is demoted, so the page shows
/// two masters at once.
#[test]
fn sentinel_promotions_and_demotions_are_drawn() {
    let s = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/sentinel-partitioned-old-master.toml"
    )))
    .unwrap();
    let h = lockcheck::Registry::new().run_sim(&s, 1).history;
    let t = build(&s, &h);
    let spans = |lane: &str, kind: &str| -> Vec<(u64, u64)> {
        t.lanes
            .iter()
            .filter(|l| l.name == lane)
            .flat_map(|l| l.spans.iter())
            .filter(|sp| sp.kind == kind)
            .map(|sp| (sp.from_us, sp.to_us))
            .collect()
    };
    let promoted = spans("redis-0-replica-0", "master");
    assert_eq!(promoted.len(), 1, "{promoted:?}\n{}", h.render());
    let old = spans("redis-0", "master");
    assert!(
        old.iter()
            .any(|&(from, to)| from < promoted[0].0 && to > promoted[0].0),
        "two masters at once: {old:?} vs {promoted:?}"
    );
    assert!(
        spans("redis-0", "replica")
            .iter()
            .any(|&(from, _)| from > promoted[0].0),
        "the old master is demoted after the promotion: {:?}\n{}",
        spans("redis-0", "replica"),
        h.render()
    );
}
