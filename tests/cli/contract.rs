//! The CLI contract: exit codes, error messages, JSON fields.

use crate::common::lockcheck;
use std::path::Path;
use std::process::Command;

fn temp_scenario(name: &str, text: &str) -> std::path::PathBuf {
    // In the build's own scratch space (target/tmp), not the machine's temp dir.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lockcheck-cli-{}", std::process::id()));
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

/// The issue's case: `expect = "safe"` beside `mutual_exclusion = "violation"` ran and printed
/// "VIOLATION (as expected: expected safe)". It is refused before anything runs, at the entry.
#[test]
fn an_expect_that_contradicts_expect_checks_exits_2_at_the_entry() {
    let good = std::fs::read_to_string("scenarios/gc-pause-lease-expiry.toml").unwrap();
    assert!(good.contains("expect = \"violation\"\n"), "{good}");
    let text = good.replacen(
        "expect = \"violation\"\n",
        "expect = \"safe\"\nexpect_checks = { mutual_exclusion = \"violation\" }\n",
        1,
    );
    let line = text
        .lines()
        .position(|l| l.starts_with("expect_checks"))
        .unwrap()
        + 1;
    let p = temp_scenario("contradiction.toml", &text);
    let (code, out, err) = lockcheck(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "nothing runs: {out}");
    assert!(
        err.contains(&format!("contradiction.toml:{line}:19: `expect_checks` says `mutual_exclusion = \"violation\"`, but `expect = \"safe\"`")),
        "{err}"
    );
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

// ---- Bad input: no panic, no hang, every error located and given its allowed range ----

/// The scenario the bad-input tests below start from: valid, small, fast.
const SMALL: &str = r#"name = "small"
# workload.clients = 9 and hold_ms = [1, 2] in a comment: positions must not come from the text
about = "clients = 7"
expect = "safe"
duration_ms = 2000
[lock]
kind = "set-nx-px"
ttl_ms = 500
[workload]
clients = 2
cycles = 2
hold_ms = [10, 20]
"#;

/// Runs lockcheck on `text` written to a file named `name`.
fn run_text(name: &str, text: &str, extra: &[&str]) -> (i32, String, String) {
    let p = temp_scenario(name, text);
    let mut args = vec!["run", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    lockcheck(&args)
}

#[test]
fn huge_seed_counts_exit_2_with_the_allowed_range() {
    let f = "scenarios/set-nx-px-no-faults.toml";
    let (code, _, err) = lockcheck(&["run", f, "--seed", "18446744073709551615"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("0..=9223372036854775807"), "{err}");
    let (code, _, err) = lockcheck(&["run", f, "--seeds", "18446744073709551615"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1..=10000000"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Zero seeds is not one seed.
    let (code, out, err) = lockcheck(&["run", f, "--seeds", "0"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("1..=10000000"), "{err}");
    let (code, _, err) = lockcheck(&["table", "--seeds", "0"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_closed_stdout_ends_quietly() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", "scenarios", "--jobs", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(
        first.starts_with("PASS") || first.starts_with("FAIL"),
        "{first}"
    );
    // `| head -1`: the reader goes away after one line.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        out.status
    );
}

/// Runs lockcheck with a time limit: a hang is a failure, not a stuck test run.
fn lockcheck_within(args: &[&str], secs: u64) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("lockcheck {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    let dir = std::env::temp_dir().join(format!("lockcheck-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("s.toml");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (code, err) = lockcheck_within(&["run", fifo.to_str().unwrap()], 20);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_of_range_numbers_are_refused_at_the_value_with_the_range() {
    for (from, to, at, range) in [
        (
            "clients = 2",
            "clients = 100000",
            "10:11",
            "between 1 and 256",
        ),
        (
            "cycles = 2",
            "cycles = 4000000000",
            "11:10",
            "between 1 and 100000",
        ),
        (
            "clients = 2",
            "clients = 2\nnested = 1000000",
            "11:10",
            "between 0 and 16",
        ),
        (
            "[10, 20]",
            "[10, 9223372036854775807]",
            "12:16",
            "between -1000000000 and 1000000000",
        ),
        (
            "duration_ms = 2000",
            "duration_ms = 9223372036854775807",
            "5:15",
            "between 1 and 1000000000",
        ),
        // A run of zero length would be a vacuous SAFE.
        (
            "duration_ms = 2000",
            "duration_ms = 0",
            "5:15",
            "between 1 and 1000000000",
        ),
    ] {
        let (code, out, err) = lockcheck_run_text_within(&SMALL.replace(from, to));
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(err.contains(&format!("range.toml:{at}: ")), "{to}: {err}");
        assert!(err.contains(range), "{to}: {err}");
    }
    // Many clients times many cycles: refused, not a machine's memory.
    let text = SMALL
        .replace("clients = 2", "clients = 256")
        .replace("cycles = 2", "cycles = 100000");
    let (code, _, err) = lockcheck_run_text_within(&text);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most 1000000"), "{err}");
    // Times near 2^63 in a fault.
    let text = format!("{SMALL}[[faults]]\nkind = \"pause\"\nclient = 0\nat_ms = 0\nfor_ms = 9223372036854775000\n");
    let (code, _, err) = lockcheck_run_text_within(&text);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("range.toml:17:10: `faults[0].for_ms` must be between"),
        "{err}"
    );
}

fn lockcheck_run_text_within(text: &str) -> (i32, String, String) {
    let p = temp_scenario("range.toml", text);
    let (code, err) = lockcheck_within(&["run", p.to_str().unwrap()], 60);
    (code, String::new(), err)
}

#[test]
fn positions_come_from_the_parser_not_from_searching_the_text() {
    // `clients=0` (no space) was reported at 1:1; `hold_ms` at its comment.
    let (code, _, err) = run_text("pos.toml", &SMALL.replace("clients = 2", "clients=0"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pos.toml:10:9: "), "{err}");
    let (code, _, err) = run_text("pos.toml", &SMALL.replace("[10, 20]", "[20, 10]"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("pos.toml:12:11: `hold_ms` is a range"),
        "{err}"
    );
    let text = SMALL.replace("ttl_ms = 500", "ttl_ms=0");
    let (code, _, err) = run_text("pos.toml", &text, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("pos.toml:8:8: `ttl_ms` must be at least 1"),
        "{err}"
    );
}

#[test]
fn invalid_utf8_is_located_and_large_files_refused() {
    let mut bytes = b"name = \"x\"\nabout = \"caf".to_vec();
    bytes.extend_from_slice(&[0xff, b'"', b'\n']);
    let p = temp_scenario("utf8.toml", "");
    std::fs::write(&p, bytes).unwrap();
    let (code, _, err) = lockcheck(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("utf8.toml:2:13: invalid UTF-8"), "{err}");
    let big = format!("{SMALL}{}", "# padding\n".repeat(200_000));
    let (code, _, err) = run_text("big.toml", &big, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than the 1024 KiB"), "{err}");
}

#[test]
fn junk_in_range_arrays_is_an_error() {
    for junk in ["[10, 20, 99]", "[10, 20, \"x\"]", "[10]"] {
        let (code, out, err) = run_text("junk.toml", &SMALL.replace("[10, 20]", junk), &[]);
        assert_eq!(code, 2, "{junk}: {out}{err}");
        assert!(err.contains("junk.toml:12:"), "{junk}: {err}");
        assert!(
            err.contains("`workload.hold_ms` is a range [low, high] of exactly two numbers"),
            "{junk}: {err}"
        );
    }
}

#[test]
fn a_fault_after_the_end_is_an_error() {
    let fault = "[[faults]]\nkind = \"pause\"\nclient = 0\nat_ms = 2000\nfor_ms = 10\n";
    let (code, _, err) = run_text("late.toml", &format!("{SMALL}{fault}"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("late.toml:16:9: `at_ms = 2000` is not before the end"),
        "{err}"
    );
    let fault = "[[faults]]\nkind = \"pause\"\non = \"acquired\"\nafter_ms = 5000\nfor_ms = 10\n";
    let (code, _, err) = run_text("late.toml", &format!("{SMALL}{fault}"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("late.toml:16:12: `after_ms = 5000`"), "{err}");
    let fault = "[[faults]]\nkind = \"pause\"\nclient = 0\nat_ms = 1999\nfor_ms = 10\n";
    let (code, out, err) = run_text("late.toml", &format!("{SMALL}{fault}"), &[]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn real_mode_warns_about_settings_it_cannot_apply() {
    let text = SMALL.replace(
        "[workload]",
        "[redis]\nreplicas = 1\nlatency_ms = [50, 80]\nreplication_lag_ms = [100, 200]\n[workload]",
    );
    let p = temp_scenario("real.toml", &text);
    // No redis-server: the run stops (exit 2) right after the warnings.
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", p.to_str().unwrap(), "--real"])
        .env("LOCKCHECK_REDIS_SERVER", "/nonexistent/redis-server")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Real mode puts the latency on each request and reply of lockcheck's own clients: no
    // warning for it (client programs, which connect themselves, get one).
    assert!(
        err.contains("warning: ") && !err.contains("latency_ms"),
        "{err}"
    );
    assert!(
        err.contains("`[redis] replication_lag_ms = [100, 200]` is simulated only"),
        "{err}"
    );
    // The simulator applies them: no warning there.
    let (code, _, err) = run_text("real.toml", &text, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn cycles_cut_short_by_the_duration_are_reported() {
    let text = SMALL
        .replace("cycles = 2", "cycles = 50")
        .replace("duration_ms = 2000", "duration_ms = 300");
    let (code, out, err) = run_text("short.toml", &text, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("warning: cycles cut short: the run ended (duration_ms = 300) before every client started its 50 cycles (client-0 "), "{out}");
    let (_, out, _) = run_text("short.toml", &text, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cycles_cut_short"]["planned"], 50, "{out}");
    assert!(
        v["cycles_cut_short"]["started"]["client-0"]
            .as_u64()
            .unwrap()
            < 50,
        "{out}"
    );
    // A run long enough for its cycles says nothing.
    let (_, out, _) = run_text("short.toml", SMALL, &[]);
    assert!(!out.contains("cut short"), "{out}");
    let (_, out, _) = run_text("short.toml", SMALL, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["cycles_cut_short"].is_null(), "{out}");
}

#[test]
fn bundled_scenarios_are_looked_up_at_run_time_not_compiled_in() {
    let elsewhere = std::env::temp_dir().join(format!("lockcheck-nowhere-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("list")
        .current_dir(&elsewhere)
        .env_remove("LOCKCHECK_SCENARIOS")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("failover-lock-loss"), "{text}");
    assert!(text.contains("LOCKCHECK_SCENARIOS"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("list")
        .current_dir(&elsewhere)
        .env(
            "LOCKCHECK_SCENARIOS",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("failover-lock-loss"), "{text}");
    // `table` without a directory, and none here: exit 2, saying where it looked.
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["table", "--seeds", "1"])
        .current_dir(&elsewhere)
        .env_remove("LOCKCHECK_SCENARIOS")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&elsewhere);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOCKCHECK_SCENARIOS"));
}

/// Every `LOCKCHECK_*` variable the code reads or sets is in the book's environment page
/// (docs/cli.md, "Environment variables"; the README links there).
#[test]
fn the_docs_document_every_lockcheck_variable() {
    fn scan(dir: &Path, found: &mut std::collections::BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                scan(&p, found);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, _) in text.match_indices("LOCKCHECK_") {
                    let name: String = text[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    if name.len() > "LOCKCHECK_".len() && !name.ends_with('_') {
                        found.insert(name);
                    }
                }
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = std::collections::BTreeSet::new();
    for d in ["src", "tests", "benches"] {
        scan(&root.join(d), &mut found);
    }
    assert!(found.contains("LOCKCHECK_REDIS_SERVER"), "{found:?}");
    let cli = std::fs::read_to_string(root.join("docs/cli.md")).unwrap();
    let env = &cli[cli
        .find("## Environment variables")
        .expect("docs/cli.md has its environment section")..];
    let missing: Vec<_> = found
        .iter()
        .filter(|v| !env.contains(&format!("`{v}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/cli.md, \"Environment variables\": {missing:?}"
    );
}

/// A run whose histories cannot fit is refused before it starts, naming the numbers and the way
/// out, instead of being killed by the kernel halfway (1,000 runs of a million cycles at once
/// need more than a terabyte, more than any machine this runs on has available).
#[test]
fn a_run_that_cannot_fit_in_memory_is_refused_before_it_starts() {
    let p = temp_scenario(
        "huge.toml",
        "name = \"huge\"\nexpect = \"safe\"\nduration_ms = 1000000000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 10000\n[workload]\nclients = 10\ncycles = 100000\nhold_ms = [0, 0]\nthink_ms = [0, 0]\n",
    );
    let started = std::time::Instant::now();
    let (code, out, err) = lockcheck(&[
        "run",
        p.to_str().unwrap(),
        "--seeds",
        "1000",
        "--jobs",
        "1000",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("8000000 events") && err.contains("memory this machine has available"),
        "{err}"
    );
    assert!(err.contains("--jobs"), "{err}");
    assert!(started.elapsed().as_secs() < 10, "refused before running");
}

/// The headline is every check: a scenario safe for mutual exclusion whose liveness failed is a
/// VIOLATION, and with a wrong expectation the headline names the check, its seed count and what
/// was expected; `--seeds` counts per check.
#[test]
fn the_headline_names_every_check_that_differs_from_its_expectation() {
    let (code, out, _) = lockcheck(&[
        "run",
        "scenarios/naive-crash-after-setnx.toml",
        "--seeds",
        "3",
    ]);
    assert_eq!(code, 0, "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("VIOLATION (as expected: liveness violated, mutual_exclusion safe)"),
        "{first}"
    );
    assert!(
        first.contains("3 of 3 seeds violated (liveness on 3)"),
        "{first}"
    );
    let text = std::fs::read_to_string("scenarios/naive-crash-after-setnx.toml")
        .unwrap()
        .replace("liveness = \"violation\"", "liveness = \"safe\"");
    let p = temp_scenario("liveness-wrong.toml", &text);
    let (code, out, _) = lockcheck(&["run", p.to_str().unwrap(), "--seeds", "3"]);
    assert_eq!(code, 1, "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "VIOLATION (NOT AS EXPECTED: liveness violated on 3 of 3 seeds, expected safe)"
        ),
        "{first}"
    );
    let (_, json, _) = lockcheck(&["run", p.to_str().unwrap(), "--seeds", "3", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["not_as_expected"][0]["check"], "liveness");
    assert_eq!(v["not_as_expected"][0]["violating"], 3);
    assert_eq!(v["any_violation"], true);
}
