//! The CLI contract: exit codes, error messages, JSON fields.

use crate::common::lockcheck;
use std::path::Path;

fn temp_scenario(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lockcheck-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_bundled_suite_passes_in_simulation() {
    let (code, out, err) = lockcheck(&["run", "scenarios"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASS  failover-lock-loss"), "{out}");
    assert!(out.contains("all as expected"), "{out}");
}

#[test]
fn text_output_leads_with_the_verdict_and_ends_with_replay() {
    let (code, out, _) = lockcheck(&["run", "scenarios/failover-lock-loss.toml"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("VIOLATION (as expected"), "{out}");
    assert!(
        out.contains("client-0") && out.contains("client-1"),
        "{out}"
    );
    assert!(out
        .trim_end()
        .ends_with("replay: lockcheck run scenarios/failover-lock-loss.toml --seed 1"));
}

#[test]
fn json_has_the_contract_fields() {
    let (code, out, _) = lockcheck(&[
        "run",
        "scenarios/gc-pause-lease-expiry.toml",
        "--json",
        "--seed",
        "3",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in [
        "scenario",
        "mode",
        "seed",
        "verdict",
        "expected",
        "matches_expectation",
        "checks",
        "trace_hash",
        "replay",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {out}");
    }
    assert_eq!(v["mode"], "sim");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["verdict"], "violation");
    assert_eq!(v["checks"]["mutual_exclusion"]["verdict"], "violation");
    assert_eq!(
        v["replay"],
        "lockcheck run scenarios/gc-pause-lease-expiry.toml --seed 3"
    );
}

#[test]
fn a_wrong_expectation_exits_1() {
    let text = std::fs::read_to_string("scenarios/gc-pause-lease-expiry.toml")
        .unwrap()
        .replace("expect = \"violation\"", "expect = \"safe\"");
    let p = temp_scenario("wrong.toml", &text);
    let (code, out, _) = lockcheck(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NOT AS EXPECTED"), "{out}");
}

#[test]
fn seeds_aggregate_violations() {
    let (code, out, _) = lockcheck(&[
        "run",
        "scenarios/failover-lock-loss.toml",
        "--seeds",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["seeds_run"], 3);
    assert_eq!(
        v["violating_seeds"]["mutual_exclusion"],
        serde_json::json!([1, 2, 3])
    );
}

#[test]
fn malformed_scenarios_exit_2_with_location_and_choices() {
    let good = std::fs::read_to_string("scenarios/gc-pause-lease-expiry.toml").unwrap();
    let p = temp_scenario(
        "badkind.toml",
        &good.replace("kind = \"set-nx-px\"", "kind = \"setnx\""),
    );
    let (code, _, err) = lockcheck(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("badkind.toml:8:8"), "{err}");
    assert!(err.contains("set-nx-px"), "{err}");

    let p = temp_scenario("syntax.toml", "name = \"x\"\nexpect = [");
    let (code, _, err) = lockcheck(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("syntax.toml:2:"), "{err}");

    let (code, _, err) = lockcheck(&["run", "no/such/file.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("no such scenario"), "{err}");
}

#[test]
fn list_names_locks_faults_and_scenarios() {
    let (code, out, _) = lockcheck(&["list"]);
    assert_eq!(code, 0);
    for needle in ["set-nx-px", "failover", "clock_jump", "failover-lock-loss"] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .is_dir());
}

#[test]
fn history_flag_prints_every_event() {
    let (code, out, _) = lockcheck(&["run", "scenarios/gc-pause-lease-expiry.toml", "--history"]);
    assert_eq!(code, 0);
    let h = out.split("\nhistory:\n").nth(1).expect("a history section");
    assert!(
        h.lines()
            .any(|l| l.contains("client-0") && l.ends_with(" enter")),
        "{h}"
    );
    assert!(h.contains("fault client-"), "{h}");
}
