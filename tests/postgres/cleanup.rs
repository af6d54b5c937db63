//! What lockcheck's PostgreSQL servers leave behind: nothing. A dropped server takes its
//! postmaster, every backend it forked (they lead process groups of their own, so only the
//! server's own kill reaches them) and its directory; a test process that panics with its
//! guards leaked, or is `SIGKILL`ed, leaves no `postgres` or `pgbouncer` running. Each child
//! process is this test binary again (only `child_process_helper`, selected by
//! `LOCKCHECK_TEST_CHILD`, with a `TMPDIR` of its own), as `tests/redis/processes.rs` does, so
//! the panic hook never touches another test's servers.

use crate::{connect, fails, one, q};
use lockcheck::backend::postgres::real::{
    BouncerSettings, PgBouncer, PoolMode, Postgres, RealPgConn, ServerSettings,
};
use lockcheck::backend::postgres::seam::PgError;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `pid` has exited: gone, or a zombie waiting for whoever inherited it.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let after = &stat[stat.rfind(')').unwrap() + 1..];
            matches!(after.trim_start().chars().next(), Some('Z' | 'X'))
        }
    }
}

/// The pids of `pids` still running after `timeout`.
fn still_running(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| !exited(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server of its own: paused, a statement gets no answer and drops its session; resumed, the
/// next statement reconnects. Restarted (a crash), committed rows survive and advisory locks do
/// not. Dropped with a standby and a pgbouncer, nothing of theirs is left.
#[test]
fn own_servers_pause_restart_and_leave_nothing_behind() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let primary = Postgres::spawn(&ServerSettings::default()).unwrap_or_else(|e| panic!("{e}"));
    let primary_took = started.elapsed();
    let started = Instant::now();
    let standby = Postgres::spawn_standby(&primary).unwrap_or_else(|e| panic!("{e}"));
    let standby_took = started.elapsed();
    let started = Instant::now();
    let settings = BouncerSettings {
        pool_mode: PoolMode::Session,
        ..BouncerSettings::default()
    };
    let bouncer = PgBouncer::spawn(&primary, &settings).unwrap_or_else(|e| panic!("{e}"));
    let bouncer_took = started.elapsed();
    eprintln!(
        "spawned: primary {primary_took:?}, standby {standby_took:?}, pgbouncer {bouncer_took:?}"
    );
    assert_ne!(primary.port(), 5432);
    assert_ne!(bouncer.port(), 6432);

    rt.block_on(async {
        // A session whose statements get 300 ms.
        let mut a = RealPgConn::connect(&primary.conninfo(), Duration::from_millis(300))
            .await
            .unwrap();
        let mut through_bouncer = connect(&bouncer.conninfo()).await;
        q(
            &mut a,
            "CREATE TABLE survives (id int); INSERT INTO survives VALUES (1)",
        )
        .await;
        q(&mut a, "SELECT pg_advisory_lock(1)").await;
        q(&mut through_bouncer, "SELECT pg_advisory_lock(2)").await;

        // A pause: every process stopped, a statement unanswered past the timeout.
        primary.pause().unwrap();
        let at = Instant::now();
        let err = fails(&mut a, "SELECT 1").await;
        let waited = at.elapsed();
        eprintln!("paused: {err:?} after {waited:?}");
        primary.resume().unwrap();
        assert!(matches!(err, PgError::NoAnswer(_)), "{err:?}");
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(3));
        assert!(err.session_gone() && !a.is_connected());
        // The dropped session's lock is freed when the resumed server reads the closed socket.
        let mut b = connect(&primary.conninfo()).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        while one(&mut b, "SELECT pg_try_advisory_lock(1)").await != Some("t".into()) {
            assert!(
                Instant::now() < deadline,
                "the dropped session kept its lock"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            one(&mut a, "SELECT 1").await,
            Some("1".into()),
            "reconnected"
        );
        // The pooled session was stopped too, and goes on after the resume.
        assert_eq!(
            one(&mut through_bouncer, "SELECT 1").await,
            Some("1".into())
        );
    });

    // A crash and restart on the same port: committed rows survive, advisory locks do not.
    let port = primary.port();
    let before = primary.processes();
    let started = Instant::now();
    primary.restart().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("restart (kill + crash recovery): {:?}", started.elapsed());
    assert_eq!(primary.port(), port);
    assert_eq!(
        still_running(&before, Duration::ZERO),
        Vec::<u32>::new(),
        "the crash took them all"
    );
    rt.block_on(async {
        let mut c = connect(&primary.conninfo()).await;
        assert_eq!(
            one(&mut c, "SELECT count(*) FROM survives").await,
            Some("1".into())
        );
        assert_eq!(
            one(
                &mut c,
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            )
            .await,
            Some("0".into())
        );
        let mut s = connect(&standby.conninfo()).await;
        assert_eq!(
            one(&mut s, "SELECT count(*) FROM survives").await,
            Some("1".into())
        );
    });

    let mut pids = primary.processes();
    pids.extend(standby.processes());
    pids.extend(bouncer.pid());
    let dirs: Vec<PathBuf> = [primary.dir(), standby.dir(), bouncer.dir()]
        .iter()
        .map(|d| d.to_path_buf())
        .collect();
    assert!(
        pids.len() >= 8,
        "postmasters, their children and pgbouncer: {pids:?}"
    );
    drop(rt);
    drop(bouncer);
    drop(standby);
    drop(primary);
    assert_eq!(still_running(&pids, Duration::ZERO), Vec::<u32>::new());
    for d in dirs {
        assert!(!d.exists(), "{} is left", d.display());
    }
}

/// A missing PostgreSQL says which package to install.
#[test]
fn missing_binaries_name_the_package() {
    let (mut child, rx, tmp) = start_child("missing");
    let message = wait_for_line(&rx, "ERROR=");
    assert!(message.contains("apt-get install postgresql"), "{message}");
    let message = wait_for_line(&rx, "BOUNCER_ERROR=");
    assert!(message.contains("apt-get install pgbouncer"), "{message}");
    assert!(child.wait().unwrap().success());
    assert_eq!(scratch_left(&tmp), Vec::<String>::new());
}

const CHILD_ENV: &str = "LOCKCHECK_TEST_CHILD";

/// Not a test of its own: the body of the child processes started below. Without
/// `LOCKCHECK_TEST_CHILD` it does nothing.
#[test]
fn child_process_helper() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    if mode == "missing" {
        // SAFETY (edition 2021: safe): this child runs only this test.
        std::env::set_var("LOCKCHECK_PG_BIN", "/nonexistent");
        std::env::set_var("LOCKCHECK_PGBOUNCER", "/nonexistent/pgbouncer");
        let err = Postgres::spawn(&ServerSettings::default()).unwrap_err();
        println!("ERROR={err}");
        std::env::remove_var("LOCKCHECK_PG_BIN");
        let server = Postgres::spawn(&ServerSettings::default()).unwrap();
        let err = PgBouncer::spawn(&server, &BouncerSettings::default()).unwrap_err();
        println!("BOUNCER_ERROR={err}");
        return;
    }
    lockcheck::real::install_cleanup_handlers();
    let server = Postgres::spawn(&ServerSettings::default()).unwrap();
    let bouncer = PgBouncer::spawn(&server, &BouncerSettings::default()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Sessions, so backends run: one direct, one through the pooler.
    let sessions = rt.block_on(async {
        let mut a = connect(&server.conninfo()).await;
        q(&mut a, "SELECT pg_advisory_lock(1)").await;
        let mut b = connect(&bouncer.conninfo()).await;
        q(&mut b, "SELECT 1").await;
        (a, b)
    });
    if mode == "paused-panic" {
        server.pause().unwrap();
    }
    let mut pids = server.processes();
    pids.extend(bouncer.pid());
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    println!("PIDS={}", pids.join(","));
    // Leak the guards: only the cleanup can kill them now.
    std::mem::forget(server);
    std::mem::forget(bouncer);
    std::mem::forget(sessions);
    match mode.as_str() {
        "panic" | "paused-panic" => {
            let result = std::thread::spawn(|| panic!("deliberate panic in a child thread")).join();
            assert!(result.is_err());
            println!("PANICKED=yes");
        }
        "wait" => {
            // Bounded, so a broken parent cannot leave us behind.
            std::thread::sleep(Duration::from_secs(30));
            println!("NOT_SIGNALLED");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// A child test process, killed if the test fails before waiting for it.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl ChildGuard {
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

fn start_child(mode: &str) -> (ChildGuard, std::sync::mpsc::Receiver<String>, PathBuf) {
    let tmp = std::env::temp_dir().join(format!("lockcheck-pgtest-{}-{mode}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("TMPDIR", &tmp)
        .env(CHILD_ENV, mode)
        .args([
            "--exact",
            "cleanup::child_process_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (ChildGuard(child), rx, tmp)
}

fn wait_for_line(rx: &std::sync::mpsc::Receiver<String>, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            // libtest prints "test name ... " without a newline first: the marker can be
            // mid-line.
            Ok(line) => {
                if let Some(at) = line.find(prefix) {
                    return line[at + prefix.len()..].to_string();
                }
            }
            Err(e) => panic!("the child never printed {prefix}: {e}"),
        }
    }
}

/// What is left in a child's temp dir, which is then removed.
fn scratch_left(dir: &Path) -> Vec<String> {
    let left = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(dir);
    left
}

fn pids_of(line: &str) -> Vec<u32> {
    line.split(',').map(|p| p.parse().unwrap()).collect()
}

fn a_panicking_child_leaves_nothing(mode: &str) {
    let (mut child, rx, tmp) = start_child(mode);
    let pids = pids_of(&wait_for_line(&rx, "PIDS="));
    assert!(
        pids.len() >= 5,
        "postmaster, its children, pgbouncer: {pids:?}"
    );
    assert_eq!(wait_for_line(&rx, "PANICKED="), "yes");
    assert!(child.wait().unwrap().success());
    assert_eq!(
        still_running(&pids, Duration::from_secs(5)),
        Vec::<u32>::new()
    );
    assert_eq!(
        scratch_left(&tmp),
        Vec::<String>::new(),
        "the panic hook left these"
    );
}

/// The panic hook kills the postmaster and pgbouncer; the backends exit on the postmaster's
/// death by themselves.
#[test]
fn a_panic_leaves_no_postgres_or_pgbouncer() {
    a_panicking_child_leaves_nothing("panic");
}

/// A paused server's backends are stopped and would never notice the postmaster's death: the
/// pause registered them, so the panic hook kills them too.
#[test]
fn a_panic_during_a_pause_leaves_no_stopped_backend() {
    a_panicking_child_leaves_nothing("paused-panic");
}

/// `SIGKILL` runs no handler: `PR_SET_PDEATHSIG` kills the postmaster and pgbouncer, the
/// backends follow the postmaster. (The directories stay, as for every `SIGKILL`ed run.)
#[test]
fn a_sigkilled_test_process_leaves_no_postgres_or_pgbouncer() {
    let (mut child, rx, tmp) = start_child("wait");
    let pids = pids_of(&wait_for_line(&rx, "PIDS="));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGKILL) };
    let _ = child.wait();
    assert_eq!(
        still_running(&pids, Duration::from_secs(5)),
        Vec::<u32>::new()
    );
    let _ = scratch_left(&tmp);
}
