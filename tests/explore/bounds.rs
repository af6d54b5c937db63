//! Input explore cannot be made to hang, panic or exhaust memory with: the same file checks as
//! `lockcheck run`, bounded `--cases`, `--jobs` (and `model --threads`), messages that quote a
//! bad value only in part, a bad `[explore]` table named by line and column, a panic in one case
//! that ends the search, and think times the grace period does not wait out.

use super::{fixture, lockcheck, temp_dir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `lockcheck args` with `envs`, killing it and failing if it has not ended within
/// `limit`: (exit code, stderr).
fn lockcheck_within(args: &[&str], envs: &[(&str, &str)], limit: Duration) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lockcheck {args:?} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_panicking_case_ends_the_search_with_its_message() {
    let input = fixture("redisson-short-pauses").display().to_string();
    for jobs in ["1", "2", "8"] {
        let (code, err) = lockcheck_within(
            &["explore", &input, "--cases", "400", "--jobs", jobs],
            &[(lockcheck::explore::search::PANIC_AT_VAR, "37")],
            Duration::from_secs(60),
        );
        assert_ne!(code, 0, "--jobs {jobs}: {err}");
        assert_ne!(code, 1, "--jobs {jobs}: a panic is not a finding: {err}");
        assert!(
            err.contains("case 37 panics on purpose"),
            "--jobs {jobs}: {err}"
        );
    }
}

#[test]
fn explore_reads_its_file_as_run_does() {
    let dir = temp_dir("bounds-read");
    let fifo = dir.join("fifo.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = dir.join("big.toml");
    std::fs::write(&big, "#".repeat((1 << 20) + 1)).unwrap();
    for (path, says) in [
        (fifo.display().to_string(), "not a regular file"),
        ("/dev/zero".to_string(), "not a regular file"),
        (big.display().to_string(), "larger than the 1024 KiB"),
    ] {
        let (code, err) = lockcheck_within(&["explore", &path], &[], Duration::from_secs(30));
        assert_eq!(code, 2, "{path}: {err}");
        assert!(err.contains(&path) && err.contains(says), "{path}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `process` lock runs only on real servers: in simulation each of its calls would fail, so a
/// search would find nothing without having run the lock. The message says to add `--real`.
#[test]
fn a_lock_that_cannot_run_in_simulation_is_refused() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/clients/redis-py-lock-no-faults.toml");
    let (code, out, err) = lockcheck(&["explore", &path.display().to_string()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("the simulator cannot run") && err.contains("add --real"),
        "{err}"
    );
}

#[test]
fn counts_on_the_command_line_are_bounded() {
    let input = fixture("gc-pause-no-faults").display().to_string();
    for (flag, value) in [
        ("--cases", "18446744073709551615"),
        ("--cases", "1000000001"),
        ("--jobs", "100000"),
    ] {
        let (code, _, err) = lockcheck(&["explore", &input, flag, value]);
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(err.contains(flag) && err.contains(value), "{err}");
    }
    // The largest budget allowed starts at once and lists its cases a chunk at a time (it used
    // to allocate 8 GB of indices first); the time limit ends it.
    let (code, err) = lockcheck_within(
        &[
            "explore",
            &fixture("redisson-short-pauses").display().to_string(),
            "--cases",
            &lockcheck::explore::MAX_CASES.to_string(),
            "--time-limit",
            "0.5",
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = lockcheck(&["model", "lease", "--threads", "100000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--threads 100000"), "{err}");
}

#[test]
fn a_huge_wrong_value_is_quoted_in_part() {
    let dir = temp_dir("bounds-quote");
    let bad = dir.join("bad.toml");
    let huge = "a".repeat(1_000_000);
    let text = std::fs::read_to_string(fixture("gc-pause-no-faults"))
        .unwrap()
        .replace("clients = 2", &format!("clients = \"{huge}\""));
    std::fs::write(&bad, text).unwrap();
    for command in ["explore", "run"] {
        let (code, _, err) = lockcheck(&[command, &bad.display().to_string()]);
        assert_eq!(code, 2, "{command}");
        assert!(err.len() < 400, "{command}: {} bytes of message", err.len());
        assert!(
            err.contains("bad.toml:13:11:") && err.contains("1000000 characters"),
            "{command}: {err}"
        );
    }
    // One argument may have at most 128 KiB (Linux's MAX_ARG_STRLEN).
    let (code, _, err) = lockcheck(&["model", "lease", "--param", &huge[..100_000]]);
    assert_eq!(code, 2);
    assert!(err.len() < 400, "{} bytes of message", err.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_explore_table_is_named_by_line_and_column() {
    let dir = temp_dir("bounds-table");
    let mysql = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/mysql-for-update-no-faults.toml"),
    )
    .unwrap();
    let lines = mysql.lines().count();
    for (table, says) in [
        (
            "faults = [\"failover\"]",
            "`failover` promotes a Redis replica",
        ),
        (
            "faults = [\"clock_drift\"]",
            "not modelled for the MySQL locks",
        ),
        ("pause_ms = [50, 10]", "needs low <= high, got [50, 10]"),
        ("clients = [3, 2]", "needs low <= high"),
        ("max_total_pause_ms = 0", "no pause could be drawn"),
        ("points = []", "give at least one point"),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, format!("{mysql}\n[explore]\n{table}\n")).unwrap();
        let (code, _, err) = lockcheck(&["explore", &path.display().to_string()]);
        assert_eq!(code, 2, "{table}: {err}");
        let at = format!("bad.toml:{}:", lines + 3);
        assert!(err.contains(&at) && err.contains(says), "{table}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A think time of 10^9 ms used to be waited out after the run (seconds of simulated timers; in
/// real mode, days): the grace period no longer includes it.
#[test]
fn the_grace_period_does_not_wait_out_think_times() {
    let dir = temp_dir("bounds-think");
    let path = dir.join("think.toml");
    let text = std::fs::read_to_string(fixture("gc-pause-no-faults"))
        .unwrap()
        .replace("duration_ms = 10000", "duration_ms = 2000")
        .replace("think_ms = [0, 50]", "think_ms = [1000000000, 1000000000]");
    std::fs::write(&path, &text).unwrap();
    let s = lockcheck::scenario::Scenario::load(&path).unwrap();
    assert_eq!(s.workload.think_ms, [1_000_000_000; 2]);
    let start = Instant::now();
    let history = lockcheck::Registry::new().run_sim(&s, 1).history;
    // The run ends one grace period (lease, wait, hold, request timeout, 5 s) after 2 s.
    let grace = lockcheck::world::grace_ms(&s, s.redis.request_timeout_ms);
    assert!(grace < 20_000, "{grace}");
    assert!(
        history.end_us() <= (2_000 + grace) * 1000 + 1000,
        "{}",
        history.end_us()
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
