//! `lockcheck explore --real`: the search on spawned servers. From a fault-free scenario of a
//! lock whose lease a long holder pause outlives, the search finds the violation, confirms it by
//! running it again, shrinks it, writes the found file with its reproduction rate, and `lockcheck
//! run <found> --real` reproduces it; no server the search started outlives it.
//!
//! Why the finding is certain, not lucky: the space draws one pause, at the `acquired` point,
//! of 700 ms or more against a 300 ms lease, and the workload makes two clients alternate
//! strictly (a waiter retries every 5–10 ms; a client that released thinks 100–120 ms before it
//! asks again, so the waiter always gets the lock first). With two cycles each, the acquires go
//! A, B, A, B. A pause fires at the first acquire at or after `after_ms` (drawn from 0–20 ms):
//! for A that is its first or, if A acquired before 20 ms, its second (the third acquire); for B
//! or "the holder" it is B's first (the second acquire, at 20 ms or later since A holds the lock
//! for 20 ms first). Each is followed by an acquire of the other client, which waits (its
//! `wait_ms` is 2 s), gets the lock once the lease expires and holds it while the paused client
//! still believes it does: two holders, on every drawn case. Scheduling noise on a real machine
//! is milliseconds; the margins are tens to hundreds.

use std::path::PathBuf;
use std::process::Command;
use std::sync::MutexGuard;

fn serial() -> MutexGuard<'static, ()> {
    crate::common::real_servers_one_at_a_time()
}

/// A scratch directory for this test's scenario and found file.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lockcheck-explore-real-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const HOLDER_PAUSE: &str = r#"name = "explore-real-holder-pause"
about = "set-nx-px, two clients, no faults: what explore --real searches from."
expect = "safe"
seed = 1
duration_ms = 4000

[lock]
kind = "set-nx-px"
ttl_ms = 300
wait_ms = 2000
retry_ms = [5, 10]

[workload]
clients = 2
cycles = 2
hold_ms = [20, 40]
think_ms = [100, 120]

[explore]
max_faults = 1
faults = ["pause"]
points = ["acquired"]
pause_ms = [700, 1200]
after_ms = [0, 20]
cycles = [2, 2]
"#;

/// Runs the `lockcheck` binary: (exit code, stdout, stderr, its pid).
fn lockcheck(args: &[&str]) -> (i32, String, String, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lockcheck");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for lockcheck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        pid,
    )
}

/// Live processes working in a temp dir that the lockcheck process `pid` made
/// (`lockcheck-<what>-<pid>-...`): `redis-server` changes into its `--dir`, so a server it left
/// behind shows here even after the directory was removed.
fn left_behind(pid: u32) -> Vec<String> {
    let mark = format!("-{pid}-");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else {
            continue;
        };
        let cwd = cwd.to_string_lossy().into_owned();
        if cwd.contains("lockcheck-") && cwd.contains(&mark) {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with(['Z', 'X']));
            if !zombie {
                found.push(format!("{:?} in {cwd}", entry.file_name()));
            }
        }
    }
    found
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"'))
}

#[test]
fn explore_real_finds_confirms_shrinks_and_states_the_rate() {
    let _turn = serial();
    let dir = scratch("holder-pause");
    let input = dir.join("holder-pause.toml");
    std::fs::write(&input, HOLDER_PAUSE).unwrap();
    let found = dir.join("found.toml");
    let (code, stdout, stderr, pid) = lockcheck(&[
        "explore",
        input.to_str().unwrap(),
        "--real",
        "--cases",
        "4",
        "--jobs",
        "2",
        "--shrink-steps",
        "6",
        "--out",
        found.to_str().unwrap(),
    ]);
    assert_eq!(
        code, 1,
        "explore --real finds the pause\n{stdout}\n{stderr}"
    );
    assert!(left_behind(pid).is_empty(), "{:?}", left_behind(pid));
    assert!(stdout.contains("on real servers:"), "{stdout}");
    assert!(
        stderr.contains("s per case"),
        "cases/s and time per case: {stderr}"
    );

    let text = std::fs::read_to_string(&found).unwrap();
    let about = field(&text, "about").expect("about");
    assert!(
        about.starts_with("Found by lockcheck explore --real"),
        "{about}"
    );
    // What the space makes certain is two holders. Before the witness timed removals by the
    // server's clock, an honest release read as a lie came first (`release`, at case 0).
    assert!(about.contains("mutual_exclusion violated"), "{about}");
    let rate = about
        .split("this file violated in ")
        .nth(1)
        .unwrap_or_else(|| panic!("the rate is stated: {about}"));
    let (violated, runs) = parse_rate(rate);
    assert_eq!(
        runs,
        lockcheck::explore::MIN_FILE_RUNS,
        "a found file is run at least 5 times (--runs, 3 by default, confirms): {about}"
    );
    assert!(
        violated * 2 >= runs,
        "a finding reproduces in at least half its runs: {about}"
    );
    // The finding is the space's one fault on the case's two clients.
    assert_eq!(text.matches("[[faults]]").count(), 1, "{text}");
    assert_eq!(field(&text, "clients"), Some("2"), "{text}");
    assert_eq!(field(&text, "expect"), Some("violation"), "{text}");

    // Replayed from the file on fresh servers, it violates again and exits 0 (as it expects).
    let (code, stdout, stderr, pid) = lockcheck(&["run", found.to_str().unwrap(), "--real"]);
    assert_eq!(
        code, 0,
        "run --real reproduces the finding\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("VIOLATION"), "{stdout}");
    assert!(left_behind(pid).is_empty(), "{:?}", left_behind(pid));
    let _ = std::fs::remove_dir_all(&dir);
}

/// "3 of 3 runs ..." → (3, 3).
fn parse_rate(text: &str) -> (u32, u32) {
    let mut words = text.split_whitespace();
    let violated = words.next().and_then(|w| w.parse().ok());
    let runs = words.nth(1).and_then(|w| w.parse().ok());
    match (violated, runs) {
        (Some(v), Some(r)) => (v, r),
        _ => panic!("not a rate: {text}"),
    }
}

#[test]
fn explore_real_refuses_a_run_count_out_of_range() {
    let dir = scratch("bad-input");
    let input = dir.join("s.toml");
    std::fs::write(&input, HOLDER_PAUSE).unwrap();
    let (code, _, stderr, _) =
        lockcheck(&["explore", input.to_str().unwrap(), "--real", "--runs", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--runs 0: give 1 to 100"), "{stderr}");

    let _ = std::fs::remove_dir_all(&dir);
}

/// `--time-limit` binds a real run too: a run still going at the deadline is cut there and judged
/// up to the cut (`world::cut`), not run to its end. The scenario would run for a minute; the
/// deadline is 3 s away, so the run must come back as cut well before its own end, with the
/// critical sections made before the cut judged, and its servers gone.
#[test]
fn a_real_run_is_cut_at_the_deadline() {
    use lockcheck::explore::real::{run_once, RealRun};
    use std::time::{Duration, Instant};
    let _serial = serial();
    // A 3 s lease, not the search's 300 ms: with no fault the run must judge safe, and a 300 ms
    // lease lapses under a scheduling stall of the machine alone (a 202 ms one was seen while
    // this binary's other tests spawned servers), which is a real violation, not this test's.
    let text = HOLDER_PAUSE
        .replace("duration_ms = 4000", "duration_ms = 60000")
        .replace("cycles = 2", "cycles = 100000")
        .replace("ttl_ms = 300", "ttl_ms = 3000");
    let scenario = lockcheck::scenario::Scenario::parse("long.toml", &text).unwrap();
    let start = Instant::now();
    let run = run_once(
        &lockcheck::Registry::default(),
        &scenario,
        Some(start + Duration::from_secs(3)),
    );
    let took = start.elapsed();
    let RealRun::Cut(outcome) = run else {
        panic!("a minute-long run with a 3 s deadline was not cut ({took:?})")
    };
    assert!(took < Duration::from_secs(20), "cut only after {took:?}");
    let sections = outcome
        .history
        .events
        .iter()
        .filter(|e| matches!(e.kind, lockcheck::history::EventKind::Enter));
    assert!(sections.count() > 2, "the run before the cut is judged");
    let violated: Vec<String> = outcome
        .checks
        .iter()
        .filter(|(_, c)| c.verdict == lockcheck::Verdict::Violation)
        .map(|(name, c)| format!("{name}: {}", c.summary))
        .collect();
    assert!(
        violated.is_empty(),
        "{violated:?}\n{}",
        outcome.history.render()
    );
}
