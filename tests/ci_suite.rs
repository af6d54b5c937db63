//! The CI suite contract: `--junit FILE` and `--report DIR` on `run`, `explore`, `table` and
//! `model`, `SKIP` lines for scenarios a mode cannot run, and the summary line.

use quick_junit::{NonSuccessKind, Report, TestCaseStatus};
use std::path::{Path, PathBuf};

mod common;
use common::lockcheck;

/// A fresh directory under the test target's tmp dir.
fn fresh_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ci-suite-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bundled(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name),
    )
    .unwrap()
}

fn junit(path: &Path) -> Report {
    let xml = std::fs::read_to_string(path).expect("the JUnit file was written");
    Report::deserialize_from_str(&xml).expect("valid JUnit XML")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_bundled_suite_gives_junit_and_a_report_per_scenario_in_one_command() {
    let dir = fresh_dir("bundled");
    let (j, r) = (dir.join("junit.xml"), dir.join("report"));
    let (code, out, err) = lockcheck(&["run", "scenarios", "--junit", s(&j), "--report", s(&r)]);
    assert_eq!(code, 0, "{out}{err}");
    let files = std::fs::read_dir("scenarios")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "toml")
        })
        .count();
    let report = junit(&j);
    assert_eq!(report.tests, files);
    assert_eq!(report.failures, 0);
    let suite = &report.test_suites[0];
    assert_eq!(suite.name.as_str(), "scenarios");
    let failover = suite
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "failover-lock-loss")
        .expect("a test case per scenario");
    assert_eq!(
        failover.classname.as_ref().unwrap().as_str(),
        "lockcheck.sim"
    );
    let index = std::fs::read_to_string(r.join("index.html")).unwrap();
    assert!(
        index.contains(&format!("{files} passed, 0 failed, 0 skipped")),
        "{index}"
    );
    assert_eq!(index.matches("<a href=\"").count(), files);
    let page = std::fs::read_to_string(r.join("failover-lock-loss.sim.html")).unwrap();
    assert!(
        page.contains("lockcheck run scenarios/failover-lock-loss.toml --seed 1"),
        "the page shows the replay command"
    );
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("summary: {files} passed, 0 failed, 0 skipped, ")),
        "{last}"
    );
    assert!(last.ends_with("all as expected"), "{last}");
}

#[test]
fn a_verdict_that_differs_is_a_junit_failure_with_the_replay_command() {
    let dir = fresh_dir("failure");
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    // The failover scenario violates mutual exclusion; claiming it is safe must fail.
    let text = bundled("failover-lock-loss.toml")
        .replace("name = \"failover-lock-loss\"", "name = \"claims-safe\"")
        .replace("expect = \"violation\"", "expect = \"safe\"");
    std::fs::write(suite.join("claims-safe.toml"), text).unwrap();
    std::fs::write(
        suite.join("no-faults.toml"),
        bundled("set-ex-nx-del-no-faults.toml"),
    )
    .unwrap();
    let j = dir.join("out/junit.xml");
    let (code, out, err) = lockcheck(&["run", s(&suite), "--junit", s(&j)]);
    assert_eq!(code, 1, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("summary: 1 passed, 1 failed, 0 skipped, ")
            && last.ends_with("SOME NOT AS EXPECTED"),
        "{last}"
    );
    let report = junit(&j);
    assert_eq!((report.tests, report.failures), (2, 1));
    let case = &report.test_suites[0].test_cases[0];
    assert_eq!(case.name.as_str(), "claims-safe");
    match &case.status {
        TestCaseStatus::NonSuccess {
            kind,
            message,
            description,
            ..
        } => {
            assert_eq!(*kind, NonSuccessKind::Failure);
            let message = message.as_ref().unwrap().as_str();
            assert!(
                message
                    .starts_with("mutual_exclusion: violation, expected safe (1 overlapping pair"),
                "{message}"
            );
            let replay = format!(
                "replay: lockcheck run {} --seed 1",
                suite.join("claims-safe.toml").display()
            );
            assert!(
                description.as_ref().unwrap().as_str().contains(&replay),
                "{description:?}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn real_suite_skips_scenarios_without_a_recipe_and_runs_the_rest() {
    let dir = fresh_dir("real-skip");
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    // Real-capable and quick: two clients, a few cycles, no faults.
    let quick = bundled("set-nx-px-no-faults.toml")
        .replace("clients = 4", "clients = 2")
        .replace("cycles = 50", "cycles = 3");
    std::fs::write(suite.join("a-quick.toml"), quick).unwrap();
    // Two replicas per master: real mode has no recipe for it.
    let two = bundled("set-nx-px-no-faults.toml")
        .replace("name = \"set-nx-px-no-faults\"", "name = \"two-replicas\"")
        .replace("replicas = 1", "replicas = 2");
    std::fs::write(suite.join("b-two-replicas.toml"), two).unwrap();
    let j = dir.join("junit.xml");
    let (code, out, err) = lockcheck(&["run", s(&suite), "--real", "--junit", s(&j)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("SKIP two-replicas: real mode runs at most 1 replica per master"),
        "{out}"
    );
    assert!(out.contains("PASS  set-nx-px-no-faults"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("summary: 1 passed, 0 failed, 1 skipped, "),
        "{last}"
    );
    let report = junit(&j);
    assert_eq!(report.tests, 2);
    let skipped = report.test_suites[0]
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "two-replicas")
        .unwrap();
    assert_eq!(
        skipped.classname.as_ref().unwrap().as_str(),
        "lockcheck.real"
    );
    match &skipped.status {
        TestCaseStatus::Skipped { message, .. } => assert!(
            message
                .as_ref()
                .unwrap()
                .as_str()
                .contains("at most 1 replica"),
            "{message:?}"
        ),
        other => panic!("expected a skip, got {other:?}"),
    }
}

#[test]
fn a_bad_file_in_a_suite_is_exit_2_naming_it() {
    let dir = fresh_dir("bad");
    std::fs::write(dir.join("ok.toml"), bundled("set-nx-px-no-faults.toml")).unwrap();
    std::fs::write(dir.join("typo.toml"), "name = \"x\"\nexpect = \"maybe\"\n").unwrap();
    let (code, out, err) = lockcheck(&["run", s(&dir), "--real"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("typo.toml:2:"), "{err}");
    assert!(
        out.is_empty(),
        "nothing runs before the input is checked: {out}"
    );
}

#[test]
fn explore_junit_is_one_failed_case_when_it_finds_a_violation() {
    let dir = fresh_dir("explore");
    let (j, r) = (dir.join("junit.xml"), dir.join("report"));
    let found = dir.join("found.toml");
    let (code, out, err) = lockcheck(&[
        "explore",
        "tests/explore/scenarios/gc-pause-no-faults.toml",
        "--cases",
        "200",
        "--out",
        s(&found),
        "--junit",
        s(&j),
        "--report",
        s(&r),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let report = junit(&j);
    assert_eq!((report.tests, report.failures), (1, 1));
    let case = &report.test_suites[0].test_cases[0];
    assert_eq!(
        case.classname.as_ref().unwrap().as_str(),
        "lockcheck.explore"
    );
    let TestCaseStatus::NonSuccess {
        message,
        description,
        ..
    } = &case.status
    else {
        panic!("{:?}", case.status);
    };
    assert!(
        message
            .as_ref()
            .unwrap()
            .as_str()
            .starts_with("explore found a "),
        "{message:?}"
    );
    assert!(description
        .as_ref()
        .unwrap()
        .as_str()
        .contains(&format!("replay: lockcheck run {}", found.display())));
    let index = std::fs::read_to_string(r.join("index.html")).unwrap();
    assert!(index.contains("0 passed, 1 failed, 0 skipped"), "{index}");
}

#[test]
fn model_report_is_the_counterexample_step_by_step() {
    let dir = fresh_dir("model");
    let (code, out, err) = lockcheck(&["model", "failover", "--report", s(&dir)]);
    assert_eq!(code, 0, "{out}{err}");
    let page = std::fs::read_to_string(dir.join("model-failover-mutual_exclusion.html")).unwrap();
    let steps = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("counterexample ("))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .expect("the text names the counterexample's length");
    let table = page.split("<table id=\"steps\">").nth(1).unwrap();
    let table = table.split("</table>").next().unwrap();
    assert_eq!(table.matches("<tr").count(), steps + 1, "{table}");
    assert!(
        page.contains("VIOLATED (expected violated: matches)"),
        "{page}"
    );
}
