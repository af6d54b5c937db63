//! `lockcheck model --max-depth N`: a search cut by its depth limit never says HOLDS and exits 3,
//! a code of its own, so CI can tell a bounded search from a proof (0) and from a verdict
//! against the model's expectation (1).

use crate::common::lockcheck;

#[test]
fn a_search_cut_by_max_depth_prints_no_holds_and_exits_3() {
    // The case: one state explored, it printed HOLDS and exited 0.
    let (code, out, err) = lockcheck(&["model", "zk-session", "--max-depth", "1"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(!out.contains("HOLDS"), "{out}");
    assert!(
        out.contains("NO COUNTEREXAMPLE WITHIN DEPTH 1 (bounded: not a proof)"),
        "{out}"
    );
    assert!(out.contains("not decided within the bound"), "{out}");
    // DFS and JSON say the same.
    let (code, out, err) =
        lockcheck(&["model", "zk-session", "--dfs", "--max-depth", "2", "--json"]);
    assert_eq!(code, 3, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "bounded", "{out}");
    assert_eq!(v["bounded"], true, "{out}");
    assert_eq!(v["matches_expectation"], false, "{out}");
}

#[test]
fn max_depth_zero_means_the_initial_states_only() {
    // It used to mean "no limit" and print a full search under "max depth 0".
    let states = |depth: &str| {
        let (code, out, err) = lockcheck(&["model", "lease", "--max-depth", depth, "--json"]);
        assert_eq!(code, 3, "{out}{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["depth_reached"], depth.parse::<u64>().unwrap(), "{out}");
        assert_eq!(v["max_depth"], depth.parse::<u64>().unwrap(), "{out}");
        v["outcome"]["unique_states"].as_u64().unwrap()
    };
    // The initial state and the level generated past it: fewer than one step further.
    assert!(states("0") < states("1"));
}

#[test]
fn a_limit_the_search_never_reaches_keeps_its_verdict_and_exit_code() {
    // A counterexample within the limit is a violation as before (exit 0: it is expected).
    let (code, out, err) = lockcheck(&["model", "lease", "--max-depth", "6"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("VIOLATED"), "{out}");
    // One step short of the shortest counterexample (6 steps): bounded, not a proof.
    let (code, out, err) = lockcheck(&["model", "lease", "--max-depth", "5"]);
    assert_eq!(code, 3, "{out}{err}");
    // A limit deeper than the whole space (on one thread) is a proof.
    let (code, out, err) = lockcheck(&[
        "model",
        "zk-session",
        "--param",
        "pauses=0",
        "--dfs",
        "--threads",
        "1",
        "--max-depth",
        "1000",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("HOLDS"), "{out}");
    assert!(
        out.contains("the depth limit 1000 was never reached"),
        "{out}"
    );
}

#[test]
fn a_bounded_search_writes_no_scenario_and_says_why() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lockcheck-model-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("out.toml");
    let (code, out, err) = lockcheck(&[
        "model",
        "lease",
        "--max-depth",
        "2",
        "--emit-scenario",
        out_file.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no counterexample within depth 2"), "{err}");
}

#[test]
fn a_zookeeper_counterexample_names_the_scenario_that_replays_it() {
    let (code, out, err) = lockcheck(&["model", "zk-session"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("no ZooKeeper table"), "{out}");
    assert!(
        out.contains("lockcheck run scenarios/zk-curator-206-pause.toml"),
        "{out}"
    );
}
