//! Runs that keep their word: exit 0 only when something was judged, a run over its budget is
//! refused up front with its numbers, long work shows progress in a log, and refusals of a whole
//! file or of its last line point somewhere real.

use std::process::Command;

/// A scenario file in a directory of its test's own, which goes with it when the test ends
/// (passing or panicking), so the suite leaves nothing in the temp dir.
struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh scenario file `name` with `text`, in a directory of this test's own.
fn scenario(test: &str, name: &str, text: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("lockcheck-bounded-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    Scratch(p)
}

/// Runs `lockcheck` with `env` set: (exit code, stdout, stderr).
fn lockcheck_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockcheck"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SMALL: &str = r#"name = "small"
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

#[test]
fn min_replicas_above_the_replicas_is_refused_at_its_key() {
    let text = SMALL.replace(
        "[workload]",
        "[redis]\nreplicas = 2\nmin_replicas_to_write = 16\nmin_replicas_max_lag_s = 1\n[workload]",
    );
    let p = scenario("min-replicas", "m.toml", &text);
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("m.toml:9:25: `min_replicas_to_write = 16`"),
        "{err}"
    );
    assert!(err.contains("no client could ever take the lock"), "{err}");
    // As many as the replicas is a setting Redis runs with.
    let ok = text.replace("min_replicas_to_write = 16", "min_replicas_to_write = 2");
    let p = scenario("min-replicas-ok", "m.toml", &ok);
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Redlock counts an acquire only while its validity time (`ttl - elapsed - drift`) is positive:
/// a drift allowance of the whole lease makes every acquire fail from the start, refused at the
/// key that set it; a lease longer than the allowance runs.
#[test]
fn a_redlock_drift_allowance_of_the_whole_lease_is_refused_at_its_key() {
    let text = r#"name = "redlock-drift"
expect = "safe"
duration_ms = 2000
[lock]
kind = "redlock"
ttl_ms = 52
drift_ms = 52
[redis]
masters = 3
[workload]
clients = 2
cycles = 2
hold_ms = [1, 2]
"#;
    let p = scenario("redlock-drift", "r.toml", text);
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("r.toml:7:12: Redlock's drift allowance"),
        "{err}"
    );
    assert!(err.contains("= 52 ms) is the whole lease"), "{err}");
    assert!(err.contains("no client could ever take the lock"), "{err}");
    // The default drift (1 % of the lease and 2 ms) over a 2 ms lease: refused at `ttl_ms`.
    let tiny = text.replace("ttl_ms = 52\ndrift_ms = 52\n", "ttl_ms = 2\n");
    let p = scenario("redlock-drift-default", "r.toml", &tiny);
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("r.toml:6:10: Redlock's drift allowance"),
        "{err}"
    );
    // A lease longer than the allowance can be taken.
    let ok = text.replace("ttl_ms = 52", "ttl_ms = 500");
    let p = scenario("redlock-drift-ok", "r.toml", &ok);
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn table_real_without_redis_server_exits_2_with_the_reason() {
    let p = scenario("table-real", "small.toml", SMALL);
    let dir = p.parent().unwrap().to_str().unwrap();
    let (code, out, err) = lockcheck_env(
        &["table", dir, "--real", "--seeds", "1"],
        &[("LOCKCHECK_REDIS_SERVER", "/nonexistent/redis-server")],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("small: --real: ") && err.contains("not found"),
        "{err}"
    );
    assert!(out.is_empty(), "no table is printed: {out}");
}

#[test]
fn a_run_over_its_budget_is_refused_up_front_with_the_numbers_and_the_flag() {
    // Two seconds, but the first holder keeps the lock for 10^9 ms and renews it every 1 ms: a
    // billion renewals, which the estimate counted as nothing before.
    let text = SMALL
        .replace(
            "hold_ms = [10, 20]",
            "hold_ms = [1000000000, 1000000000]\nrenew_every_ms = 1",
        )
        .replace("ttl_ms = 500", "ttl_ms = 50");
    let p = scenario("budget", "renew.toml", &text);
    let started = std::time::Instant::now();
    let (code, out, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(started.elapsed().as_secs() < 10, "refused up front");
    assert!(err.contains("renewals"), "{err}");
    assert!(err.contains("GB"), "{err}");
    assert!(
        err.contains("--no-budget") || err.contains("memory this machine has available"),
        "{err}"
    );
}

#[test]
fn long_work_prints_plain_progress_lines_in_a_log() {
    let p = scenario("progress", "small.toml", SMALL);
    let every = [("LOCKCHECK_PROGRESS_EVERY_MS", "1")];
    let (code, _, err) = lockcheck_env(
        &["run", p.to_str().unwrap(), "--seeds", "200", "--jobs", "1"],
        &every,
    );
    assert_eq!(code, 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("progress: small: "))
        .unwrap_or_else(|| panic!("no progress line: {err}"));
    assert!(
        line.contains("/200 seeds (") && line.contains("violations: 0"),
        "{line}"
    );
    // One run of about a second: its own time goes by.
    let long = SMALL
        .replace("duration_ms = 2000", "duration_ms = 200000")
        .replace("cycles = 2", "cycles = 40000")
        .replace("hold_ms = [10, 20]", "hold_ms = [1, 2]");
    let one = scenario("progress-one", "long.toml", &long);
    let (code, _, err) = lockcheck_env(&["run", one.to_str().unwrap()], &every);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("/200000 ms of the run"), "{err}");
    // Without the variable, work this short prints nothing extra in a log.
    let (code, _, err) = lockcheck_env(&["run", p.to_str().unwrap(), "--seeds", "20"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("progress:"), "{err}");
}

#[test]
fn refusals_of_a_whole_file_and_of_its_last_line_point_somewhere_real() {
    let (code, _, err) = lockcheck_env(&["run", "/dev/null"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/dev/null: not a regular file"), "{err}");
    assert!(!err.contains(":0:0:"), "{err}");
    let p = scenario("eof", "eof.toml", &format!("{SMALL}x ="));
    let (code, _, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{err}");
    let lines = SMALL.lines().count() + 1;
    assert!(
        err.contains(&format!("eof.toml:{lines}:4: the file breaks off here")),
        "{err}"
    );
    let p = scenario("nul", "nul.toml", &format!("# a\0b\n{SMALL}"));
    let (code, _, err) = lockcheck_env(&["run", p.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{err}");
    let message = err.split("nul.toml:1:").nth(1).unwrap_or("");
    assert!(
        message.trim().len() > 3,
        "a message after the position: {err}"
    );
}
