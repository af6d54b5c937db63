//! Ctrl-C on a real run: `lockcheck run --real` interrupted while its servers and client programs
//! run exits 130 and leaves no scratch directory (`lockcheck-redis-*`, `lockcheck-client-*`) in
//! the temp dir, as it leaves no process. Each run gets its own `TMPDIR`, so what is left there
//! is that run's alone.
//!
//! Cost: about 2 s per run (spawn, wait for the directories, interrupt), two runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A scenario that runs for 20 s: a master with a replica (two server directories) and
/// `clients` clients of `lock`.
fn long_run(lock: &str) -> String {
    format!(
        r#"name = "interrupted"
about = "A long real run that the test interrupts."
expect = "safe"
seed = 1
duration_ms = 20000

[lock]
{lock}
ttl_ms = 2000
wait_ms = 3000
retry_ms = [10, 20]

[redis]
masters = 1
replicas = 1

[workload]
clients = 2
cycles = 100000
hold_ms = [10, 30]
think_ms = [0, 20]
"#
    )
}

/// The entries of `dir` named `lockcheck-*`, but for the persistent libfaketime build cache.
fn scratch_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("lockcheck-") && n != "lockcheck-cache")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Runs `lockcheck run <scenario> --real` with its own `TMPDIR`, waits until it has made
/// `wanted` scratch directories of each prefix, sends SIGINT and checks what is left.
fn interrupt(tag: &str, lock: &str, wanted: &[(&str, usize)]) {
    let _turn = crate::common::real_servers_one_at_a_time();
    let root = std::env::temp_dir().join(format!(
        "lockcheck-interrupt-test-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let scenario: PathBuf = root.join("interrupted.toml");
    std::fs::write(&scenario, long_run(lock)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", scenario.to_str().unwrap(), "--real"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lockcheck");
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = |names: &[String]| {
        wanted
            .iter()
            .all(|(prefix, n)| names.iter().filter(|x| x.starts_with(prefix)).count() >= *n)
    };
    loop {
        if ready(&scratch_in(&tmp)) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let _ = std::fs::remove_dir_all(&root);
            panic!("{tag}: lockcheck ended ({status}) before its scratch directories appeared");
        }
        assert!(
            Instant::now() < deadline,
            "{tag}: no {wanted:?} in {} after 30 s: {:?}",
            tmp.display(),
            scratch_in(&tmp)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the run: its clients are working.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let left = scratch_in(&tmp);
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{tag}: Ctrl-C exits 130: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        left.is_empty(),
        "{tag}: scratch directories left after Ctrl-C: {left:?}"
    );
}

#[test]
fn ctrl_c_removes_the_servers_scratch_directories() {
    interrupt(
        "servers",
        r#"kind = "set-nx-px""#,
        &[("lockcheck-redis-", 2)],
    );
}

#[test]
fn ctrl_c_removes_the_client_programs_scratch_directories() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv-clients/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-clients.sh",
        python.display()
    );
    let program = root.join("clients/python/redis_py_lock.py");
    let lock = format!(
        "kind = \"client-program\"\ncommand = [\"{}\", \"{}\"]",
        python.display(),
        program.display()
    );
    interrupt(
        "clients",
        &lock,
        &[("lockcheck-redis-", 2), ("lockcheck-client-", 2)],
    );
}

/// A short real run: one master, two clients of `lock`, half a second.
fn short_run(lock: &str) -> String {
    format!(
        r#"name = "short"
about = "A short real run, to start after a killed one."
expect = "safe"
seed = 1
duration_ms = 500

[lock]
{lock}
ttl_ms = 2000
wait_ms = 500

[workload]
clients = 2
cycles = 2
hold_ms = [5, 10]
"#
    )
}

/// The pid of a process that has just ended (and been reaped): a pid no live process has.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().expect("spawn true");
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// `SIGKILL` runs no handler: a killed run's scratch stays behind, and the next real run removes
/// it, knowing it by the dead owner's pid in its name, in the temp dir and in `/dev/shm` (where
/// etcd's members keep their WALs; a fake one stands in for them, etcd is not needed). A live
/// owner's directory is kept.
#[test]
fn the_next_real_run_sweeps_the_scratch_of_a_sigkilled_one() {
    let _turn = crate::common::real_servers_one_at_a_time();
    let root = std::env::temp_dir().join(format!("lockcheck-sigkill-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let long = root.join("long.toml");
    std::fs::write(&long, long_run(r#"kind = "set-nx-px""#)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", long.to_str().unwrap(), "--real"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run lockcheck");
    let killed = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while scratch_in(&tmp).len() < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        assert!(Instant::now() < deadline, "no scratch after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = scratch_in(&tmp);
    assert!(
        left.len() >= 2
            && left
                .iter()
                .all(|n| n.starts_with(&format!("lockcheck-redis-{killed}-"))),
        "a SIGKILLed run leaves its scratch (no handler runs): {left:?}"
    );
    // A dead run's directory in /dev/shm, and a live process's (this test's) in the temp dir.
    let shm = Path::new("/dev/shm");
    let dead_shm = shm.join(format!("lockcheck-etcd-{}-0-1", dead_pid()));
    let shm_usable = std::fs::create_dir(&dead_shm).is_ok();
    let live = tmp.join(format!("lockcheck-redis-{}-0-1", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let short = root.join("short.toml");
    std::fs::write(&short, short_run(r#"kind = "set-nx-px""#)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", short.to_str().unwrap(), "--real"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let after = scratch_in(&tmp);
    let shm_left = dead_shm.exists();
    let _ = std::fs::remove_dir_all(&dead_shm);
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        after,
        vec![format!("lockcheck-redis-{}-0-1", std::process::id())],
        "the killed run's scratch is gone, the live owner's kept"
    );
    if shm_usable {
        assert!(!shm_left, "{} was not swept", dead_shm.display());
    }
}

/// A refusal with exit 2 after the run had begun making its scratch (the Redis server's, the
/// client program's directory made before its start failed) leaves none of it: `command = [""]`
/// used to leave a `lockcheck-client-*` directory.
#[test]
fn an_exit_2_refusal_leaves_no_scratch() {
    let _turn = crate::common::real_servers_one_at_a_time();
    let root = std::env::temp_dir().join(format!("lockcheck-refusal-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut results = Vec::new();
    for (tag, lock) in [
        ("empty", "kind = \"client-program\"\ncommand = [\"\"]"),
        (
            "missing",
            "kind = \"client-program\"\ncommand = [\"/nonexistent/lockcheck-test-client\"]",
        ),
    ] {
        let file = root.join(format!("{tag}.toml"));
        std::fs::write(&file, short_run(lock)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
            .args(["run", file.to_str().unwrap(), "--real"])
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        results.push((
            tag,
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            scratch_in(&tmp),
        ));
    }
    let _ = std::fs::remove_dir_all(&root);
    for (tag, code, err, left) in results {
        assert_eq!(code, Some(2), "{tag}: {err}");
        assert!(
            left.is_empty(),
            "{tag}: scratch left after exit 2: {left:?}"
        );
    }
}
