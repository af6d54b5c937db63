//! The Redlock clock scenarios on real `redis-server` processes: clock faults through libfaketime,
//! one-way reachability through per-client connections to a black hole.

use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;
use std::process::Command;

fn scenario(name: &str) -> Scenario {
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.toml")),
    )
    .unwrap()
}

fn run_real(name: &str) -> Outcome {
    let s = scenario(name);
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{name} could not run on real processes: {e}"));
    Outcome::judge(&s, Mode::Real, 1, history)
}

fn fault_at(o: &Outcome, what: &str) -> Option<u64> {
    o.history.events.iter().find_map(|e| match &e.kind {
        EventKind::Fault { what: w } if w.contains(what) => Some(e.at_us),
        _ => None,
    })
}

fn us(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
fn kleppmann_clock_jump_on_real_servers() {
    let o = run_real("redlock-kleppmann-clock-jump");
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    let ov = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
    // The libfaketime jump of C happened when the first client got the lock, and the second got
    // it only afterwards, well inside the first one's lease.
    let jumped = fault_at(&o, "redis-2 clock jumped by 5000 ms").expect("C's clock jumped");
    assert!(us(&ov["first"]["acquired_us"]) <= jumped);
    assert!(us(&ov["second"]["acquired_us"]) >= jumped);
    assert!(us(&ov["second"]["acquired_us"]) < us(&ov["first"]["acquired_us"]) + 1_000_000);
    assert_eq!(ov["first"]["client"], 0, "client 0 locks A, B, C first");
    assert_eq!(ov["second"]["client"], 1);
    assert!(fault_at(&o, "redis-3, redis-4 cut off from client-0").is_some());
    assert!(fault_at(&o, "redis-0, redis-1 cut off from client-1").is_some());
}

#[test]
fn drift_beyond_the_allowance_on_real_servers() {
    let o = run_real("redlock-drift-beyond-allowance");
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    let ov = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
    // Servers running 10% fast expire a PX 2000 key after ~1818 ms of true time; the holder's
    // validity (on the harness's true clock) lasts 1978 ms.
    let gap = us(&ov["second"]["acquired_us"]) - us(&ov["first"]["acquired_us"]);
    assert!((1_750_000..1_978_000).contains(&gap), "{gap} µs");
}

#[test]
fn missing_libfaketime_exits_2_naming_the_package() {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args([
            "run",
            "scenarios/redlock-kleppmann-clock-jump.toml",
            "--real",
        ])
        .env("LOCKCHECK_LIBFAKETIME", "/nonexistent/libfaketime.so.1")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install faketime"), "{err}");
}

#[test]
fn cuts_without_a_real_recipe_exit_2() {
    // Losing only the replies of one master (the request lands) needs a proxy: refused, not faked.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/redlock-kleppmann-clock-jump.toml"),
    )
    .unwrap()
        + "\n[[faults]]\nkind = \"partition\"\nnodes = [\"redis-0\"]\nfrom = [\"client-0\"]\ndirection = \"outbound\"\nat_ms = 0\nfor_ms = 10\n";
    let p = std::env::temp_dir().join(format!("lockcheck-redlock-{}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", p.to_str().unwrap(), "--real"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&p);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("redis-0 -> client-0"), "{err}");
}

#[test]
fn acquire_returns_at_a_majority_and_a_late_set_is_still_released() {
    use lockcheck::lock::{Lock, LockConfig, Redlock};
    use lockcheck::real::RealEnv;
    use lockcheck::real::{
        ConnectionTimeouts, RedisServer, Route, RoutedConnection, ServerOptions,
    };
    use std::time::{Duration, Instant};

    let servers: Vec<RedisServer> = (0..5)
        .map(|_| RedisServer::spawn(ServerOptions::default()).unwrap())
        .collect();
    let mut config = LockConfig::from_spec(&scenario("redlock-kleppmann-clock-jump").lock);
    config.redlock.node_timeout = Duration::from_millis(2000);
    let conns = servers
        .iter()
        .map(|s| RoutedConnection::new(Route::new(s.url()), ConnectionTimeouts::default()))
        .collect();
    let mut lock = Redlock::new(config.clone(), conns, RealEnv::default());
    let exists = |s: &RedisServer| -> i64 {
        redis::cmd("EXISTS")
            .arg(&config.key)
            .query(&mut s.control().unwrap())
            .unwrap()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Connect everywhere first.
    let g = rt.block_on(lock.acquire()).unwrap().unwrap();
    assert!(rt.block_on(lock.release(&g)).unwrap());

    // Master 4 stalls (SIGSTOP) for 300 ms: the others make a majority at once.
    servers[4].pause().unwrap();
    let t = Instant::now();
    let g = rt
        .block_on(lock.acquire())
        .unwrap()
        .expect("four masters answer");
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(200),
        "waited for the stalled master: {took:?}"
    );
    // It returned at the third OK, not waiting for the fourth running master either.
    let granted = lock.granted_by();
    assert_eq!(granted.len(), 3, "{granted:?}");
    assert!(!granted.contains(&4));
    std::thread::sleep(Duration::from_millis(300).saturating_sub(t.elapsed()));
    servers[4].resume().unwrap();
    // The SET that was in flight to master 4 lands after it resumes ...
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(exists(&servers[4]), 1, "the late SET landed");
    // ... and the release, which waits for that request to finish, deletes it there too.
    assert!(rt.block_on(lock.release(&g)).unwrap());
    for s in &servers {
        assert_eq!(exists(s), 0, "port {}", s.port());
    }
}

#[test]
fn skewed_server_and_client_clocks() {
    use lockcheck::env::Env;
    use lockcheck::real::RealEnv;
    use lockcheck::real::{FakeTime, RedisServer, ServerOptions};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    let wall_ms = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    // A server 5 s ahead whose clock runs twice as fast (`FAKETIME='+5.000 x2'`).
    let server = RedisServer::spawn(ServerOptions {
        faketime: Some(FakeTime::Skewed {
            offset_ms: 5_000,
            rate: 2.0,
        }),
        ..ServerOptions::default()
    })
    .unwrap_or_else(|e| {
        panic!("redis-server under libfaketime (Debian package `faketime`; scripts/test installs it): {e}")
    });
    let server_ms = || -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME")
            .query(&mut server.control().unwrap())
            .unwrap();
        s * 1000 + us / 1000
    };
    let ahead = server_ms() - wall_ms();
    assert!((4_500..8_000).contains(&ahead), "{ahead} ms ahead");
    let (s0, w0) = (server_ms(), wall_ms());
    std::thread::sleep(Duration::from_millis(500));
    let (ds, dw) = (server_ms() - s0, wall_ms() - w0);
    assert!(ds > dw * 17 / 10 && ds < dw * 23 / 10, "{ds} ms in {dw} ms");

    // A client clock: 300 ms behind, then half speed; its sleeps follow it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let env = RealEnv::default();
        env.jump(-300);
        let behind = wall_ms() - env.now_ms() as i64;
        assert!((295..=305).contains(&behind), "{behind}");
        env.set_drift(-500_000);
        let t = std::time::Instant::now();
        let before = env.now_ms();
        env.sleep(Duration::from_millis(100)).await;
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(200), "{took:?}");
        let moved = env.now_ms() - before;
        assert!((100..140).contains(&moved), "{moved}");
    });
}

#[test]
fn tla_configuration_with_a_lagging_client_clock_on_real_servers() {
    let o = run_real("redlock-tla-3-instances");
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    let ov = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
    assert_eq!(ov["first"]["client"], 0);
    assert_eq!(ov["second"]["client"], 1);
    // Client 1 got the lock when the servers expired client 0's keys (3 s of true time), while
    // client 0's half-speed clock said it had half of its lease left.
    let second = us(&ov["second"]["acquired_us"]);
    assert!((2_990_000..3_300_000).contains(&second), "{second}");
    assert!(us(&ov["first"]["exit_us"]) >= 5_900_000);
}

#[test]
fn crash_restart_empty_and_delayed_restart_on_real_servers() {
    let o = run_real("redlock-crash-restart-empty");
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    let restarted = fault_at(&o, "redis-1 restarted empty").expect("B came back");
    let ov = &o.checks["mutual_exclusion"].evidence["overlaps"][0];
    assert!(us(&ov["second"]["acquired_us"]) >= restarted);
    // The witness quiesced B before its kill and followed the new process before any client
    // was routed to it: it still vouches, and sees removals on the restarted B.
    assert_ne!(
        o.checks["release"].verdict,
        Verdict::NotJudged,
        "{}",
        o.checks["release"].summary
    );
    let removed_on_new_b = o.history.events.iter().any(|e| {
        e.node == "redis-1"
            && e.at_us > restarted
            && matches!(e.kind, lockcheck::history::EventKind::EntryRemoved { .. })
    });
    assert!(removed_on_new_b, "{}", o.history.render());

    let o = run_real("redlock-crash-delayed-restart");
    assert_eq!(o.verdict(), Verdict::Safe, "{}", o.history.render());
    let killed = fault_at(&o, "redis-1 killed").unwrap();
    let restarted = fault_at(&o, "redis-1 restarted empty").unwrap();
    assert!(restarted - killed >= 3_000_000);
    // The other client did get the lock, once B was back.
    let secs = lockcheck::check::mutual_exclusion::Holdings::of(&o.history).sections;
    assert!(
        secs.len() >= 2 && secs[1].acquired_us >= restarted,
        "{secs:?}"
    );
}
