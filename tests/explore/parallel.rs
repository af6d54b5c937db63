//! Every core, and shards across machines: the same results as one thread and one job.

use super::{explore, fixture, options};
use lockcheck::exec::Shard;
use lockcheck::runner::{run_scenario, RunOptions};
use lockcheck::scenario::Scenario;

#[test]
fn one_thread_and_two_find_and_write_the_same_case() {
    let mut one = options(400, Some("liveness"));
    one.jobs = 1;
    let mut two = one.clone();
    two.jobs = 2;
    let (_, r1, f1) = explore("naive-crash-no-faults", &one);
    let (_, r2, f2) = explore("naive-crash-no-faults", &two);
    let (f1, f2) = (f1.expect("found"), f2.expect("found"));
    assert_eq!(r1.tried, r2.tried);
    assert_eq!(
        r1.found.as_ref().unwrap().index,
        r2.found.as_ref().unwrap().index
    );
    assert_eq!(f1.text, f2.text, "the same found scenario, byte for byte");
    assert_eq!(f1.outcome.shown.trace_hash, f2.outcome.shown.trace_hash);
}

#[test]
fn explore_shards_together_try_exactly_the_unsharded_cases() {
    let mut whole = options(90, None);
    whole.keep_going = true;
    let (_, all, _) = explore("gc-pause-no-faults", &whole);
    let (mut tried, mut violating, mut first) = (0, 0, u64::MAX);
    for i in 1..=3 {
        let mut o = whole.clone();
        o.shard = Shard::parse(&format!("{i}/3")).unwrap();
        let (_, r, _) = explore("gc-pause-no-faults", &o);
        tried += r.tried;
        violating += r.violating;
        if let Some(f) = r.found {
            first = first.min(f.index);
        }
    }
    assert_eq!(tried, all.tried);
    assert_eq!(violating, all.violating);
    assert!(all.violating > 0);
    assert_eq!(first, all.found.unwrap().index);
}

#[test]
fn run_seed_shards_union_to_the_unsharded_run_for_any_jobs() {
    let s = Scenario::load(&fixture("gc-pause-no-faults")).unwrap();
    let mut s = s;
    s.faults = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/gc-pause-lease-expiry.toml"
    )))
    .unwrap()
    .faults;
    let opts = |jobs, shard| RunOptions {
        seeds: Some(60),
        jobs,
        shard,
        ..RunOptions::default()
    };
    let whole = run_scenario(&s, &opts(1, None)).unwrap().unwrap();
    let parallel = run_scenario(&s, &opts(2, None)).unwrap().unwrap();
    assert_eq!(whole.violating_seeds, parallel.violating_seeds);
    assert_eq!(whole.shown.trace_hash, parallel.shown.trace_hash);
    assert_eq!(whole.distinct_traces, parallel.distinct_traces);
    let mut union: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let mut seeds_run = 0;
    for i in 1..=4 {
        let shard = Shard::parse(&format!("{i}/4")).unwrap();
        let part = run_scenario(&s, &opts(2, Some(shard))).unwrap().unwrap();
        seeds_run += part.seeds_run;
        for (check, seeds) in part.violating_seeds {
            union.entry(check).or_default().extend(seeds.iter());
        }
    }
    union.values_mut().for_each(|v| v.sort());
    assert_eq!(seeds_run, 60);
    let whole_seeds: std::collections::BTreeMap<String, Vec<u64>> = whole
        .violating_seeds
        .iter()
        .map(|(c, s)| (c.clone(), s.iter().collect()))
        .collect();
    assert_eq!(union, whole_seeds);
    assert!(!whole.violating_seeds["mutual_exclusion"].is_empty());
}
