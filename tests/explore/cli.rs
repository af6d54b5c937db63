//! The command line: exit codes, bad input, and output that does not depend on `--jobs`.

use super::{fixture, lockcheck, temp_dir};

#[test]
fn found_is_exit_1_and_replays_with_run_to_the_same_trace() {
    let dir = temp_dir("cli");
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
    let (code, one, err) = lockcheck(&args("1"));
    assert_eq!(code, 1, "{one}");
    // Standard error is not a terminal here: no progress bar, only the timing line.
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cases/s") && err.contains("time to first violation") && !err.contains('\r'),
        "{err}"
    );
    let written = std::fs::read_to_string(&out).unwrap();
    let (code8, eight, _) = lockcheck(&args("8"));
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
        &std::env::temp_dir()
            .join(format!(
                "lockcheck-never-written-{}.toml",
                std::process::id()
            ))
            .display()
            .to_string(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("NOTHING FOUND"), "{out}");
    assert!(out.contains("cases tried: 20"), "{out}");

    let (code, out, _) = lockcheck(&[
        "explore",
        &fixture("redlock-drift-safe").display().to_string(),
        "--cases",
        "1000000",
        "--time-limit",
        "0.5",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("no case violated before the time limit"),
        "{out}"
    );
    assert!(!out.contains("cases tried: 1000000,"), "{out}");

    for bad in [
        ["--cases", "0"],
        ["--shard", "3/2"],
        ["--jobs", "x"],
        ["--time-limit", "-1"],
        ["--time-limit", "1e300"],
    ] {
        let (code, _, err) = lockcheck(&[
            "explore",
            &fixture("redisson-short-pauses").display().to_string(),
            bad[0],
            bad[1],
        ]);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(
            err.contains(bad[0]) || err.contains(bad[1]),
            "{bad:?}: {err}"
        );
    }

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

    let dir = temp_dir("bad");
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
