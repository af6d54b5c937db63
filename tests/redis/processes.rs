//! Real `redis-server` processes: spawning, cleanup on every exit path, the
//! deterministic failover recipe, the routed client connection, and libfaketime.
//!
//! These tests need the Debian packages `redis-server` and `faketime` (and a C
//! compiler). A missing one fails the test with the install command; nothing here
//! skips silently. Durations are printed with `--nocapture`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockcheck::real::{
    client_kill_replicas, info_replication, ConnectionTimeouts, FailoverPhase, FailoverRig,
    FakeTime, RealError, RedisServer, Route, RoutedConnection, ServerOptions,
};

/// Spawns a server or fails the test with the reason (including "install the
/// Debian package" when redis-server is missing).
fn spawn(opts: ServerOptions) -> RedisServer {
    RedisServer::spawn(opts).unwrap_or_else(|e| panic!("cannot start redis-server: {e}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// True once `pid` no longer names a live process: it does not exist, or it is a
/// zombie (killed; reaped later by whoever is its parent now).
fn process_gone(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if rc != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    process_gone(pid)
}

fn ping(server: &RedisServer) -> String {
    let mut conn = server.control().expect("control connection");
    redis::cmd("PING").query(&mut conn).expect("PING")
}

#[test]
fn spawn_answers_ping_and_drop_kills_the_process() {
    let server = spawn(ServerOptions::default());
    assert_ne!(server.port(), 6379);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert_eq!(ping(&server), "PONG");
    assert!(server.is_running());
    // It runs with lockcheck's flags: no persistence, no diskless-sync delay.
    let mut conn = server.control().unwrap();
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut conn)
        .unwrap();
    assert_eq!(save, vec!["save".to_string(), String::new()]);
    let delay: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("repl-diskless-sync-delay")
        .query(&mut conn)
        .unwrap();
    assert_eq!(delay[1], "0");
    eprintln!("spawn time: {:?}", server.startup_time());

    let (pid, dir) = (server.pid(), server.dir().to_path_buf());
    drop(server);
    assert!(
        process_gone(pid),
        "redis-server {pid} still alive after drop"
    );
    assert!(!dir.exists(), "temp dir {} not removed", dir.display());
}

#[test]
fn kill_is_idempotent_and_signals_after_kill_are_errors() {
    let server = spawn(ServerOptions::default());
    server.kill();
    server.kill();
    assert!(process_gone(server.pid()));
    assert!(!server.is_running());
    assert!(matches!(server.pause(), Err(RealError::ServerGone { .. })));
    assert!(matches!(server.resume(), Err(RealError::ServerGone { .. })));
}

#[test]
fn pause_stops_every_thread_and_resume_restarts_them() {
    let server = spawn(ServerOptions::default());
    server.pause().unwrap();
    assert!(server.is_paused());
    assert!(server.is_running(), "a paused server is still alive");
    server.resume().unwrap();
    assert!(!server.is_paused());
    assert_eq!(ping(&server), "PONG");
    // SIGKILL also works on a stopped process: dropping a paused server kills it.
    server.pause().unwrap();
    let pid = server.pid();
    drop(server);
    assert!(
        process_gone(pid),
        "paused redis-server {pid} survived its drop"
    );
}

#[test]
fn real_mode_types_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RealError>();
    assert_send_sync::<RedisServer>();
    assert_send_sync::<FailoverRig>();
    assert_send_sync::<Route>();
    fn assert_send<T: Send>() {}
    assert_send::<RoutedConnection>();
}

/// PR_SET_PDEATHSIG fires when the forking *thread* exits. Servers are forked by
/// a dedicated long-lived thread, so one started from a short-lived thread must
/// outlive that thread.
#[test]
fn server_started_from_a_short_lived_thread_outlives_it() {
    let server = std::thread::spawn(|| spawn(ServerOptions::default()))
        .join()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.is_running());
    assert_eq!(ping(&server), "PONG");
}

#[test]
fn a_thread_panicking_while_holding_a_server_takes_it_down() {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let server = spawn(ServerOptions::default());
        tx.send(server.pid()).unwrap();
        panic!(
            "deliberate panic while holding redis-server {}",
            server.pid()
        );
    });
    let pid = rx.recv().unwrap();
    assert!(handle.join().is_err(), "the thread should have panicked");
    assert!(process_gone(pid), "redis-server {pid} survived the panic");
}

#[test]
fn replica_links_up_and_receives_writes() {
    let master = spawn(ServerOptions::default());
    let replica = spawn(ServerOptions {
        replica_of: Some(master.port()),
        ..Default::default()
    });
    let started = Instant::now();
    replica
        .wait_replication_up(Duration::from_secs(10))
        .unwrap();
    eprintln!("replication link-up: {:?}", started.elapsed());
    let info = info_replication(&replica).unwrap();
    assert_eq!(info.get("role").map(String::as_str), Some("slave"));

    let mut m = master.control().unwrap();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut m)
        .unwrap();
    // The replica may report its link up before the master has its first ACK and counts it as
    // online (diskless sync), so one WAIT can time out with 0; each stays under the control
    // connection's 1 s read timeout.
    let acked = (0..6)
        .map(|_| {
            redis::cmd("WAIT")
                .arg(1)
                .arg(500)
                .query::<i64>(&mut m)
                .unwrap()
        })
        .find(|&n| n == 1)
        .unwrap_or(0);
    assert_eq!(acked, 1);
    let mut r = replica.control().unwrap();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    // A replica refuses writes.
    let err = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut r)
        .unwrap_err();
    assert!(err.to_string().contains("read only replica"), "{err}");
}

/// The whole recipe, as a lock client sees it: the lock is granted twice.
#[test]
fn failover_recipe_loses_the_lock() {
    let mut rig = FailoverRig::start().unwrap_or_else(|e| panic!("cannot start the rig: {e}"));
    let rt = runtime();
    let route = rig.route();
    let mut client_a = RoutedConnection::new(route.clone(), ConnectionTimeouts::default());
    let mut client_b = RoutedConnection::new(route.clone(), ConnectionTimeouts::default());
    let original = rig.master_url();

    // Warm both clients up on the master, as long-running clients would be.
    rt.block_on(async {
        let _: String = redis::cmd("PING").query_async(&mut client_a).await.unwrap();
        let _: String = redis::cmd("PING").query_async(&mut client_b).await.unwrap();
    });

    rig.isolate_replica().unwrap();
    assert_eq!(rig.phase(), FailoverPhase::Isolated);
    assert!(rig.replica().is_paused());

    // Client A acquires on the master; the replica can no longer receive it.
    let granted: Option<String> = rt.block_on(async {
        redis::cmd("SET")
            .arg("lock")
            .arg("client-a")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query_async(&mut client_a)
            .await
            .unwrap()
    });
    assert_eq!(granted.as_deref(), Some("OK"));

    rig.fail_over().unwrap();
    assert_eq!(rig.phase(), FailoverPhase::FailedOver);
    assert!(process_gone(rig.original_master().pid()));
    assert_ne!(rig.master_url(), original);
    assert_eq!(rig.master_url(), rig.replica().url());
    assert_eq!(route.generation(), 1);
    let info = info_replication(rig.current_master()).unwrap();
    assert_eq!(info.get("role").map(String::as_str), Some("master"));

    // Client B follows the route to the promoted replica: the key never got there,
    // so B is granted the lock A still holds (A's lease has ~10 s left).
    rt.block_on(async {
        let seen: Option<String> = redis::cmd("GET")
            .arg("lock")
            .query_async(&mut client_b)
            .await
            .unwrap();
        assert_eq!(
            seen, None,
            "the promoted replica must not have the lock key"
        );
        let granted: Option<String> = redis::cmd("SET")
            .arg("lock")
            .arg("client-b")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query_async(&mut client_b)
            .await
            .unwrap();
        assert_eq!(
            granted.as_deref(),
            Some("OK"),
            "second holder: the lock was lost"
        );
    });
    assert_eq!(client_b.connected_to(), Some(rig.replica().url().as_str()));

    let t = rig.timings();
    eprintln!(
        "failover rig: master spawn {:?}, replica spawn {:?}, link-up {:?}, isolate {:?}, fail over {:?}, recipe {:?}",
        t.master_spawn,
        t.replica_spawn,
        t.link_up,
        t.isolate.unwrap(),
        t.fail_over.unwrap(),
        t.recipe().unwrap()
    );
    assert!(t.recipe().unwrap() < Duration::from_secs(2));

    // Steps out of order are refused.
    assert!(matches!(
        rig.fail_over(),
        Err(RealError::InvalidStep {
            step: "fail_over",
            ..
        })
    ));
    assert!(matches!(
        rig.isolate_replica(),
        Err(RealError::InvalidStep { .. })
    ));
}

/// Stopping the replica without cutting its link is not enough: the write waits in
/// its socket buffer and arrives after SIGCONT. This is why the recipe kills the
/// replication link.
#[test]
fn sigstop_alone_does_not_lose_the_write() {
    let master = spawn(ServerOptions::default());
    let replica = spawn(ServerOptions {
        replica_of: Some(master.port()),
        ..Default::default()
    });
    replica
        .wait_replication_up(Duration::from_secs(10))
        .unwrap();
    replica.pause().unwrap();
    let mut m = master.control().unwrap();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut m)
        .unwrap();
    replica.resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut r = replica.control().unwrap();
    loop {
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
        if v.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the buffered write never arrived"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // And cutting the link is what the fault step does: it reports the closed link.
    assert_eq!(client_kill_replicas(&master).unwrap(), 1);
}

#[test]
fn routed_connection_times_out_against_a_paused_server_and_recovers() {
    let server = spawn(ServerOptions::default());
    let rt = runtime();
    let timeouts = ConnectionTimeouts {
        connect: Duration::from_millis(300),
        response: Duration::from_millis(300),
    };
    let mut conn = RoutedConnection::new(Route::new(server.url()), timeouts);
    rt.block_on(async {
        let _: () = redis::cmd("SET")
            .arg("a")
            .arg("1")
            .query_async(&mut conn)
            .await
            .unwrap();
    });

    server.pause().unwrap();
    let started = Instant::now();
    let err = rt
        .block_on(async {
            redis::cmd("GET")
                .arg("a")
                .query_async::<Option<String>>(&mut conn)
                .await
        })
        .unwrap_err();
    let took = started.elapsed();
    eprintln!("request to a paused server failed after {took:?}: {err}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert!(
        conn.connected_to().is_none(),
        "an I/O error must drop the connection"
    );

    // A fresh connection to a paused server is bounded by the connect timeout
    // (the kernel accepts the TCP connection; the handshake never completes).
    let started = Instant::now();
    let err = rt
        .block_on(async { redis::cmd("PING").query_async::<String>(&mut conn).await })
        .unwrap_err();
    let took = started.elapsed();
    eprintln!("connecting to a paused server failed after {took:?}: {err}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    server.resume().unwrap();
    let value: Option<String> = rt.block_on(async {
        redis::cmd("GET")
            .arg("a")
            .query_async(&mut conn)
            .await
            .unwrap()
    });
    assert_eq!(value.as_deref(), Some("1"));
}

#[test]
fn routed_connection_fails_fast_against_a_killed_server() {
    let server = spawn(ServerOptions::default());
    let rt = runtime();
    let mut conn = RoutedConnection::new(Route::new(server.url()), ConnectionTimeouts::default());
    rt.block_on(async {
        let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    });
    server.kill();
    let started = Instant::now();
    for _ in 0..2 {
        let result =
            rt.block_on(async { redis::cmd("PING").query_async::<String>(&mut conn).await });
        assert!(result.is_err());
    }
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn routed_connection_follows_a_route_switch() {
    let a = spawn(ServerOptions::default());
    let b = spawn(ServerOptions::default());
    let rt = runtime();
    let route = Route::new(a.url());
    let mut conn = RoutedConnection::new(route.clone(), ConnectionTimeouts::default());
    // Usable from tokio tasks.
    fn assert_send<T: Send + 'static>(_: &T) {}
    assert_send(&conn);

    rt.block_on(async {
        let _: () = redis::cmd("SET")
            .arg("where")
            .arg("a")
            .query_async(&mut conn)
            .await
            .unwrap();
    });
    assert_eq!(conn.connected_to(), Some(a.url().as_str()));
    assert_eq!(route.switch_to(b.url()), 1);
    let seen: Option<String> = rt.block_on(async {
        redis::cmd("GET")
            .arg("where")
            .query_async(&mut conn)
            .await
            .unwrap()
    });
    assert_eq!(seen, None, "after the switch the connection must talk to b");
    assert_eq!(conn.connected_to(), Some(b.url().as_str()));

    // Pipelines and scripts go through the same route.
    let (x, y): (i64, i64) = rt.block_on(async {
        redis::pipe()
            .cmd("INCR")
            .arg("n")
            .cmd("INCR")
            .arg("n")
            .query_async(&mut conn)
            .await
            .unwrap()
    });
    assert_eq!((x, y), (1, 2));
    let n: i64 = rt.block_on(async {
        redis::Script::new("return redis.call('INCR', KEYS[1])")
            .key("n")
            .invoke_async(&mut conn)
            .await
            .unwrap()
    });
    assert_eq!(n, 3);
}

#[test]
fn faketime_rate_expires_keys_ten_times_faster() {
    let server = spawn(ServerOptions {
        faketime: Some(FakeTime::Rate(10.0)),
        ..Default::default()
    });
    eprintln!(
        "spawn time under libfaketime (x10): {:?}",
        server.startup_time()
    );
    let mut conn = server.control().unwrap();
    let started = Instant::now();
    redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query::<()>(&mut conn)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pttl: i64 = redis::cmd("PTTL").arg("k").query(&mut conn).unwrap();
    // ~300 ms real = ~3 s of server time.
    assert!(
        (4_000..=8_500).contains(&pttl),
        "PTTL after 300 ms real: {pttl}"
    );
    let mut expired_after = None;
    while started.elapsed() < Duration::from_secs(3) {
        let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut conn).unwrap();
        if exists == 0 {
            expired_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let expired_after = expired_after.expect("a PX 10000 key at x10 must expire within 3 s");
    eprintln!("PX 10000 at x10 expired after {expired_after:?} of real time");
    assert!(
        expired_after >= Duration::from_millis(800)
            && expired_after <= Duration::from_millis(1_500),
        "{expired_after:?}"
    );
}

/// A server with a clock fault runs under libfaketime, which keeps two objects in `/dev/shm`
/// per process and unlinks them only on a normal exit: a killed server's are removed by
/// lockcheck once it is reaped (one test suite left 426 behind before).
#[test]
fn a_killed_faketime_server_leaves_nothing_in_dev_shm() {
    let server = spawn(ServerOptions {
        faketime: Some(FakeTime::Jumpable),
        ..Default::default()
    });
    let pid = server.pid();
    let shm = format!("/dev/shm/faketime_shm_{pid}");
    let sem = format!("/dev/shm/sem.faketime_sem_{pid}");
    assert!(
        std::path::Path::new(&shm).exists(),
        "libfaketime keeps {shm} while the server lives (else this test proves nothing)"
    );
    drop(server);
    assert!(!std::path::Path::new(&shm).exists(), "{shm} left behind");
    assert!(!std::path::Path::new(&sem).exists(), "{sem} left behind");
}

#[test]
fn faketime_jump_expires_keys_at_once() {
    let server = spawn(ServerOptions {
        faketime: Some(FakeTime::Jumpable),
        ..Default::default()
    });
    let mut conn = server.control().unwrap();
    let server_time = |conn: &mut redis::Connection| -> i64 {
        let (secs, _micros): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
        secs
    };
    let before = server_time(&mut conn);
    redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("EX")
        .arg(30)
        .query::<()>(&mut conn)
        .unwrap();
    redis::cmd("SET")
        .arg("long")
        .arg("v")
        .arg("EX")
        .arg(60)
        .query::<()>(&mut conn)
        .unwrap();

    server.jump_clock(45_000).unwrap();
    assert_eq!(server.clock_offset_ms(), Some(45_000));
    let short: Option<String> = redis::cmd("GET").arg("short").query(&mut conn).unwrap();
    assert_eq!(short, None, "EX 30 must be gone after a +45 s jump");
    let ttl: i64 = redis::cmd("TTL").arg("long").query(&mut conn).unwrap();
    assert!((13..=15).contains(&ttl), "TTL of EX 60 after +45 s: {ttl}");
    let after = server_time(&mut conn);
    assert!(
        (44..=47).contains(&(after - before)),
        "TIME moved {}",
        after - before
    );

    // Jumps accumulate, backwards too, with millisecond precision.
    server.jump_clock(-10_500).unwrap();
    assert_eq!(server.clock_offset_ms(), Some(34_500));
    let ttl: i64 = redis::cmd("PTTL").arg("long").query(&mut conn).unwrap();
    assert!(
        (25_000..=25_600).contains(&ttl),
        "PTTL after net +34.5 s: {ttl}"
    );
}

#[test]
fn jump_clock_needs_a_jumpable_server_and_rates_must_be_positive() {
    let server = spawn(ServerOptions::default());
    assert!(matches!(
        server.jump_clock(1_000),
        Err(RealError::NotJumpable { .. })
    ));
    let err = RedisServer::spawn(ServerOptions {
        faketime: Some(FakeTime::Rate(0.0)),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, RealError::InvalidOption { .. }), "{err}");
}

// ---------------------------------------------------------------------------
// Exit paths that end the process. Each runs this test binary again as a child
// process (only `child_process_helper`, selected by LOCKCHECK_TEST_CHILD), so the
// panic hook and signal handlers never touch the other tests' servers.

const CHILD_ENV: &str = "LOCKCHECK_TEST_CHILD";

/// Not a test of its own: the body of the child processes started below. Without
/// LOCKCHECK_TEST_CHILD it does nothing.
#[test]
fn child_process_helper() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    if mode == "missing-redis" {
        // SAFETY (edition 2021: safe): this child runs only this test.
        std::env::set_var("LOCKCHECK_REDIS_SERVER", "/nonexistent/redis-server");
        let err = RedisServer::spawn(ServerOptions::default()).unwrap_err();
        assert!(matches!(err, RealError::MissingDependency { .. }));
        println!("ERROR={err}");
        return;
    }
    lockcheck::real::install_cleanup_handlers();
    let server = spawn(ServerOptions::default());
    println!("SERVER_PID={}", server.pid());
    match mode.as_str() {
        "panic-hook" => {
            let pid = server.pid();
            // Leak the guard: only the panic hook can kill the server now.
            std::mem::forget(server);
            let result = std::thread::spawn(|| panic!("deliberate panic in a child thread")).join();
            assert!(result.is_err());
            println!(
                "GONE_AFTER_PANIC={}",
                wait_gone(pid, Duration::from_secs(2))
            );
        }
        "wait" | "wait-stopped" => {
            if mode == "wait-stopped" {
                // A server pause in progress (a MariaDB or Redis `SIGSTOP`): a stopped process
                // ignores SIGTERM until continued, so only a SIGKILL can take it down.
                server.pause().unwrap();
                println!("STOPPED");
            }
            // Wait to be signalled; bounded so a broken parent cannot leave us behind.
            std::thread::sleep(Duration::from_secs(30));
            println!("NOT_SIGNALLED");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// A child test process that is killed if the test fails before waiting for it
/// (its own server then dies through PR_SET_PDEATHSIG).
struct ChildGuard(std::process::Child);

impl ChildGuard {
    fn id(&self) -> u32 {
        self.0.id()
    }

    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `child_process_helper` in `mode`; returns the child and its stdout lines.
/// The child's own temp dir (its `TMPDIR`), so the scratch directories its servers leave, if
/// any, are its alone: see [`scratch_left`].
fn child_tmp(mode: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lockcheck-test-child-{}-{mode}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

fn start_child(mode: &str) -> (ChildGuard, std::sync::mpsc::Receiver<String>, PathBuf) {
    let tmp = child_tmp(mode);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("TMPDIR", &tmp)
        .args([
            "--exact",
            "processes::child_process_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
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
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                // libtest prints "test name ... " without a newline before the
                // test's own output, so the marker can be mid-line.
                if let Some(at) = line.find(prefix) {
                    return line[at + prefix.len()..].to_string();
                }
            }
            Err(e) => panic!("child never printed {prefix}: {e}"),
        }
    }
}

fn signal_child_and_check(signal: libc::c_int, expected_code: Option<i32>) {
    signal_child_in_mode_and_check("wait", signal, expected_code);
}

fn signal_child_in_mode_and_check(mode: &str, signal: libc::c_int, expected_code: Option<i32>) {
    let (mut child, rx, tmp) = start_child(mode);
    let server_pid: u32 = wait_for_line(&rx, "SERVER_PID=").parse().unwrap();
    if mode == "wait-stopped" {
        wait_for_line(&rx, "STOPPED");
    }
    assert!(!process_gone(server_pid));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), expected_code, "child exit status {status}");
    if expected_code.is_some() {
        // The handler killed *and reaped* the server before lockcheck exited: no
        // zombie is left for init, and its port is free.
        // SAFETY: kill with signal 0 only checks for existence.
        let rc = unsafe { libc::kill(server_pid as libc::pid_t, 0) };
        assert!(
            rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH),
            "redis-server {server_pid} still exists (maybe as a zombie) after lockcheck exited"
        );
    }
    assert!(
        wait_gone(server_pid, Duration::from_secs(3)),
        "redis-server {server_pid} survived signal {signal} to lockcheck"
    );
    // A handled signal removes the servers' scratch directories; a SIGKILL cannot (the
    // directories a SIGKILLed run leaves are its own temp dir's, removed here).
    let left = scratch_left(&tmp);
    if expected_code.is_some() {
        assert!(left.is_empty(), "signal {signal} left {left:?}");
    }
}

#[test]
fn sigterm_kills_the_servers_and_exits_143() {
    signal_child_and_check(libc::SIGTERM, Some(143));
}

#[test]
fn sigint_kills_the_servers_and_exits_130() {
    signal_child_and_check(libc::SIGINT, Some(130));
}

/// Ctrl-C while a server pause holds a server stopped still takes it down (the handler's
/// SIGKILL needs no SIGCONT).
#[test]
fn sigint_kills_a_stopped_server_too() {
    signal_child_in_mode_and_check("wait-stopped", libc::SIGINT, Some(130));
}

/// SIGKILL runs no handler at all: PR_SET_PDEATHSIG is what kills the server.
#[test]
fn sigkill_of_lockcheck_still_kills_the_servers() {
    signal_child_and_check(libc::SIGKILL, None);
}

#[test]
fn panic_hook_kills_servers_whose_guard_never_drops() {
    let (mut child, rx, tmp) = start_child("panic-hook");
    let _server_pid = wait_for_line(&rx, "SERVER_PID=");
    assert_eq!(wait_for_line(&rx, "GONE_AFTER_PANIC="), "true");
    assert!(child.wait().unwrap().success());
    assert_eq!(
        scratch_left(&tmp),
        Vec::<String>::new(),
        "the panic hook left these"
    );
}

#[test]
fn missing_redis_server_names_the_package_and_the_install_command() {
    let (mut child, rx, tmp) = start_child("missing-redis");
    let message = wait_for_line(&rx, "ERROR=");
    assert!(
        message.contains("apt-get install redis-server"),
        "{message}"
    );
    assert!(child.wait().unwrap().success());
    assert_eq!(scratch_left(&tmp), Vec::<String>::new());
}
