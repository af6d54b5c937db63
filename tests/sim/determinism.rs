//! Same scenario and seed, same history, byte for byte.

use lockcheck::scenario::Scenario;
use std::path::Path;

#[test]
fn every_bundled_scenario_is_deterministic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let files = lockcheck::cli::run::scenario_files(&dir).unwrap();
    assert!(files.len() >= 3);
    for f in files {
        let s = Scenario::load(&f).unwrap();
        let mut hashes = Vec::new();
        for seed in 1..=4 {
            let a = lockcheck::Registry::new().run_sim(&s, seed).history;
            let b = lockcheck::Registry::new().run_sim(&s, seed).history;
            assert_eq!(a.render(), b.render(), "{} seed {seed}", s.name);
            assert_eq!(a.trace_hash(), b.trace_hash());
            hashes.push(a.trace_hash());
        }
        // Different seeds explore different interleavings.
        hashes.sort();
        hashes.dedup();
        assert!(
            hashes.len() > 1,
            "{}: all seeds gave the same history",
            s.name
        );
    }
}
