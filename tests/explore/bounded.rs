//! A search that keeps its word: `--out` is checked before any case runs, a finding that still
//! cannot be written is printed whole, `--time-limit` bounds the whole command (shrinking
//! included).

use super::{fixture, lockcheck, temp_dir};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn out_is_checked_before_any_work() {
    let dir = temp_dir("out-checked");
    let input = dir.join("gc.toml");
    std::fs::copy(fixture("gc-pause-no-faults"), &input).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(&input, dir.join("link.toml")).unwrap();
    std::fs::hard_link(&input, dir.join("hard.toml")).unwrap();
    let before = std::fs::read_to_string(&input).unwrap();
    let cases = [
        (input.clone(), "the input scenario"),
        (dir.join("sub/../gc.toml"), "the input scenario"),
        (dir.join("link.toml"), "the input scenario"),
        (dir.join("hard.toml"), "the input scenario"),
        (dir.join("sub"), "is a directory"),
        (dir.join("missing/found.toml"), "does not exist"),
        ("/sys/lockcheck-found.toml".into(), "cannot be created"),
    ];
    for (out, why) in cases {
        let started = Instant::now();
        let (code, stdout, err) = lockcheck(&[
            "explore",
            input.to_str().unwrap(),
            "--cases",
            "100000",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{}: {stdout}{err}", out.display());
        assert!(err.contains(why), "{}: {err}", out.display());
        assert!(stdout.is_empty(), "refused before the search: {stdout}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "before any case"
        );
    }
    assert_eq!(std::fs::read_to_string(&input).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_finding_that_cannot_be_written_is_printed_in_full_with_its_exit_code() {
    let dir = temp_dir("out-fails");
    let out = dir.join("found.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args([
            "explore",
            fixture("gc-pause-no-faults").to_str().unwrap(),
            "--cases",
            "50",
            "--out",
            out.to_str().unwrap(),
        ])
        .env(lockcheck::explore::WRITE_FAILS_VAR, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}{err}");
    assert!(err.contains("cannot write"), "{err}");
    assert!(stdout.contains("NOT written to"), "{stdout}");
    assert!(
        stdout.contains("[[faults]]") && stdout.contains("name = \"gc-pause-no-faults-found\""),
        "the whole scenario: {stdout}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A space of 256 clients, whose cases (and shrink steps) are long.
const MANY_CLIENTS: &str = r#"name = "many-clients"
expect = "safe"
seed = 1
duration_ms = 10000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 5000
[workload]
clients = 256
cycles = 3
hold_ms = [100, 200]
think_ms = [0, 50]
[explore]
faults = ["pause"]
"#;

/// Redisson holding for 10^9 ms: each case's run lasts as long as its watchdog keeps renewing
/// (65 s of wall time whole), so only a run cut at the deadline is judged within the limit.
const LONG_HOLDS: &str = r#"name = "redisson-long-holds"
expect = "safe"
seed = 1
duration_ms = 2000
[lock]
kind = "redisson"
watchdog_timeout_ms = 600
wait_ms = 3000
[workload]
clients = 2
cycles = 3
hold_ms = [1000000000, 1000000000]
[explore]
faults = ["pause"]
"#;

#[test]
fn the_time_limit_bounds_the_whole_command_shrinking_included() {
    let dir = temp_dir("time-limit");
    for (name, text) in [("many", MANY_CLIENTS), ("long", LONG_HOLDS)] {
        let input = dir.join(format!("{name}.toml"));
        std::fs::write(&input, text).unwrap();
        let started = Instant::now();
        let (code, out, err) =
            lockcheck(&["explore", input.to_str().unwrap(), "--time-limit", "3"]);
        let took = started.elapsed();
        // A case in flight is cut at the deadline (one Redisson case takes over a minute whole):
        // the limit, the cut case's judgment and the report.
        assert!(
            took < Duration::from_secs(3 + 2),
            "{name}: took {took:?} for --time-limit 3: {out}{err}"
        );
        match code {
            1 => {
                let found = dir.join(format!("{name}.found.toml"));
                assert!(found.exists(), "{name}: the finding is written: {out}");
                if name == "long" {
                    // No run of this space ends within the limit: the finding is a cut run's,
                    // and the report says it is not shrunk.
                    assert!(out.contains("may not be minimal"), "{name}: {out}");
                }
                eprintln!("{name}: found in {took:?}");
            }
            0 => assert!(out.starts_with("NOTHING FOUND"), "{name}: {out}"),
            _ => panic!("{name}: exit {code}: {out}{err}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// In a log (standard error not a terminal), every phase prints its own progress lines: the
/// search's cases and then the shrink's steps, the part that took 694 of 724 s of a long run and
/// printed nothing.
#[test]
fn a_log_shows_the_shrink_as_its_own_phase() {
    let dir = temp_dir("phases");
    let out = dir.join("found.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args([
            "explore",
            fixture("gc-pause-no-faults").to_str().unwrap(),
            // The whole budget (a few hundred ms), so the search lasts long enough for a line.
            "--keep-going",
            "--cases",
            "400",
            "--out",
            out.to_str().unwrap(),
        ])
        .env("LOCKCHECK_PROGRESS_EVERY_MS", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    let name = "progress: explore gc-pause-no-faults";
    let search = err
        .lines()
        .find(|l| l.starts_with(&format!("{name}: search: ")))
        .unwrap_or_else(|| panic!("no search line: {err}"));
    assert!(
        search.contains("cases (") && search.contains("violations: "),
        "{search}"
    );
    let shrink = err
        .lines()
        .find(|l| l.starts_with(&format!("{name}: shrink: ")))
        .unwrap_or_else(|| panic!("no shrink line: {err}"));
    assert!(
        shrink.contains(" steps (") && shrink.contains("kept: "),
        "{shrink}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
