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
