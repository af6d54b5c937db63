//! The command line: exit codes, bad input, and output that does not depend on `--jobs`.

use super::fixture;
use std::process::Command;

fn lockcheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn found_is_exit_1_and_replays_with_run_to_the_same_trace() {
    let dir = std::env::temp_dir().join(format!("lockcheck-explore-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("found.toml");
    let input = fixture("gc-pause-no-faults");
    let args = |jobs: &'static str| {
        vec![
            "explore".to_string(),
            input.display().to_string(),
            "--cases".into(),
            "50".into(),
            "--jobs".into(),
            jobs.into(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let run = |a: Vec<String>| lockcheck(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, one, _) = run(args("1"));
    assert_eq!(code, 1, "{one}");
    let written = std::fs::read_to_string(&out).unwrap();
    let (code8, eight, _) = run(args("8"));
    assert_eq!(code8, 1);
    assert_eq!(one, eight, "--jobs 1 and --jobs 8 print the same");
    assert_eq!(written, std::fs::read_to_string(&out).unwrap());
    let trace = one
        .lines()
        .find_map(|l| l.split("trace ").nth(1))
        .expect("the report names the trace")
        .to_string();
    for _ in 0..2 {
        let (code, replay, _) = lockcheck(&["run", &out.display().to_string()]);
        assert_eq!(code, 0, "the found file expects what it does: {replay}");
        assert!(replay.contains(&format!("trace {trace}")), "{replay}");
        assert!(replay.starts_with("VIOLATION"), "{replay}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_found_is_exit_0_and_bad_input_is_exit_2() {
    let (code, out, _) = lockcheck(&[
        "explore",
        &fixture("redisson-short-pauses").display().to_string(),
        "--cases",
        "20",
        "--out",
        "/nonexistent/never-written.toml",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("NOTHING FOUND"), "{out}");
    assert!(out.contains("cases tried: 20"), "{out}");

    let (code, _, err) = lockcheck(&["explore", "nope.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("nope.toml"), "{err}");
    let (code, _, err) = lockcheck(&[
        "explore",
        &fixture("gc-pause-no-faults").display().to_string(),
        "--check",
        "fairness",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown checker") && err.contains("liveness"),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("lockcheck-explore-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    let text = std::fs::read_to_string(fixture("gc-pause-no-faults"))
        .unwrap()
        .replace("faults = [\"pause\"]", "faults = [\"meteor\"]");
    std::fs::write(&bad, text).unwrap();
    let (code, _, err) = lockcheck(&["explore", &bad.display().to_string()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml:") && err.contains("unknown fault kind `meteor`"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
