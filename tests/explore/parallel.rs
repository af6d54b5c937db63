//! Every core, and shards across machines: the same results as one thread and one job.

use super::{explore, fixture, lockcheck, options, temp_dir};
use lockcheck::cli::run::{run_scenario, RunOptions};
use lockcheck::exec::Shard;
use lockcheck::scenario::Scenario;

/// A bundled scenario's path.
fn bundled(name: &str) -> String {
    format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

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
    s.faults = Scenario::load(std::path::Path::new(&bundled("gc-pause-lease-expiry")))
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

/// The same stdout (text and `--json`), exit code and found file for `--jobs 1` and `--jobs 8`:
/// `run` on one file with `--seeds`, `run` on a directory, `table` and `explore`.
#[test]
fn every_command_prints_the_same_for_one_job_and_eight() {
    let dir = temp_dir("jobs");
    let failover = bundled("failover-lock-loss");
    let fixtures = fixture("gc-pause-no-faults")
        .parent()
        .unwrap()
        .display()
        .to_string();
    let found = dir.join("found.toml").display().to_string();
    let gc = fixture("gc-pause-no-faults").display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", &failover, "--seeds", "40"],
        vec!["run", &failover, "--seeds", "40", "--json"],
        vec!["run", &fixtures, "--seeds", "3"],
        vec!["run", &fixtures, "--json"],
        vec!["table", &fixtures, "--seeds", "2"],
        vec!["explore", &gc, "--cases", "60", "--out", &found],
        vec!["explore", &gc, "--cases", "60", "--json", "--out", &found],
    ];
    for args in commands {
        let with = |jobs: &'static str| {
            let mut a = args.clone();
            a.extend(["--jobs", jobs]);
            let (code, out, err) = lockcheck(&a);
            let file = std::fs::read_to_string(&found).ok();
            let _ = std::fs::remove_file(&found);
            (code, out, err, file)
        };
        let (c1, o1, e1, f1) = with("1");
        let (c8, o8, _, f8) = with("8");
        // The suite's summary line ends with its wall-clock time, the one thing that may differ.
        let (o1, o8) = (without_elapsed(&o1), without_elapsed(&o8));
        assert!(c1 == 0 || c1 == 1, "{args:?}: exit {c1}: {e1}");
        assert!(o1.lines().count() > 1, "{args:?}: {o1}");
        assert_eq!(
            (c1, &o1),
            (c8, &o8),
            "{args:?}: --jobs 1 and --jobs 8 differ"
        );
        assert_eq!(f1, f8, "{args:?}: the found file differs");
        assert_eq!(f1.is_some(), args[0] == "explore", "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run <directory> --shard i/3`: the three shards run every file exactly once, with the results
/// of the unsharded run.
#[test]
fn run_directory_shards_union_to_the_unsharded_run() {
    let dir = fixture("gc-pause-no-faults")
        .parent()
        .unwrap()
        .display()
        .to_string();
    let results = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec!["run", dir.as_str(), "--seeds", "2", "--json"];
        args.extend(extra);
        let (code, out, err) = lockcheck(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["scenarios"].as_array().unwrap().clone()
    };
    let whole = results(&[]);
    assert!(whole.len() >= 9, "{}", whole.len());
    let mut union = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let part = results(&["--shard", &shard]);
        assert!(!part.is_empty() && part.len() < whole.len(), "{shard}");
        union.extend(part);
    }
    let key = |v: &serde_json::Value| v["scenario"].as_str().unwrap().to_string();
    union.sort_by_key(key);
    let mut whole = whole;
    whole.sort_by_key(key);
    assert_eq!(union, whole);
}

/// `out` with the elapsed time of a `summary:` line (`, 0.036 s —`) blanked out.
fn without_elapsed(out: &str) -> String {
    out.lines()
        .map(|l| match (l.starts_with("summary:"), l.rfind(" s —")) {
            (true, Some(end)) => {
                let start = l[..end].rfind(", ").map_or(0, |i| i + 2);
                format!("{}<time>{}", &l[..start], &l[end + 2..])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
