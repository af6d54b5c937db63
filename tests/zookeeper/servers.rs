//! The ZooKeeper servers lockcheck spawns: a standalone server and a three-server ensemble serve
//! as what they are, an ensemble elects a new leader after its leader crashes, a crashed server
//! restarts on its data, and every JVM goes with its guard, with lockcheck on a signal, or with
//! lockcheck's death. Cost: about 1 s per standalone server and 2 to 3 s per ensemble on 2 cores.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockcheck::backend::zookeeper::real::server::{Mode, ZooKeeper, ZooKeeperOptions};
use lockcheck::real::RealError;

fn process_gone(pid: u32) -> bool {
    // A zombie still has a /proc entry whose state is Z: not gone until reaped.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('X')),
    }
}

fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    process_gone(pid)
}

#[test]
fn a_standalone_server_serves_and_goes_with_its_guard() {
    let _turn = crate::zookeeper_turn();
    let zk = ZooKeeper::spawn(ZooKeeperOptions::default()).unwrap();
    assert_eq!(zk.len(), 1);
    assert_eq!(zk.mode(0), Some(Mode::Standalone));
    assert_eq!(zk.leader(), Some(0));
    assert_ne!(
        zk.client_port(0),
        2181,
        "never a machine's own ZooKeeper's port"
    );
    assert_eq!(
        zk.connect_string(),
        format!("127.0.0.1:{}", zk.client_port(0))
    );
    let pid = zk.pid(0).unwrap();
    let dir = zk.dir().to_path_buf();
    assert!(dir.is_dir());
    // A server pause: it stops answering, and answers again once continued.
    zk.pause(0).unwrap();
    assert_eq!(zk.mode(0), None, "a paused server answered srvr");
    zk.resume(0).unwrap();
    assert_eq!(zk.mode(0), Some(Mode::Standalone));
    drop(zk);
    assert!(
        wait_gone(pid, Duration::from_secs(2)),
        "the JVM {pid} survived its guard"
    );
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn an_ensemble_elects_a_new_leader_after_its_leader_crashes() {
    let _turn = crate::zookeeper_turn();
    let zk = ZooKeeper::spawn(ZooKeeperOptions {
        servers: 3,
        ..Default::default()
    })
    .unwrap();
    let modes: Vec<_> = (0..3).map(|i| zk.mode(i)).collect();
    let leaders = modes.iter().filter(|m| **m == Some(Mode::Leader)).count();
    let followers = modes.iter().filter(|m| **m == Some(Mode::Follower)).count();
    assert_eq!((leaders, followers), (1, 2), "modes {modes:?}");
    assert_eq!(zk.connect_string().split(',').count(), 3);
    let old = zk.leader().unwrap();
    let pids: Vec<u32> = (0..3).map(|i| zk.pid(i).unwrap()).collect();
    zk.kill(old);
    assert!(wait_gone(pids[old], Duration::from_secs(2)));
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        if let Some(l) = zk.leader() {
            break l;
        }
        assert!(Instant::now() < deadline, "no new leader within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(new, old);
    // The crashed server comes back on its data and rejoins as a follower.
    zk.restart(old).unwrap();
    assert_eq!(zk.mode(old), Some(Mode::Follower));
    assert_eq!(zk.leader(), Some(new));
    let pids: Vec<u32> = (0..3).map(|i| zk.pid(i).unwrap()).collect();
    let dir = zk.dir().to_path_buf();
    drop(zk);
    for pid in pids {
        assert!(
            wait_gone(pid, Duration::from_secs(2)),
            "the JVM {pid} survived its guard"
        );
    }
    assert!(!dir.exists());
}

#[test]
fn missing_java_or_zookeeper_names_the_package_to_install() {
    let err = ZooKeeper::spawn(ZooKeeperOptions {
        java: Some("/nonexistent/java".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, RealError::MissingDependency { .. }), "{err}");
    assert!(err.to_string().contains("default-jre-headless"), "{err}");
    let err = ZooKeeper::spawn(ZooKeeperOptions {
        jar_dir: Some("/nonexistent".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, RealError::MissingDependency { .. }), "{err}");
    assert!(
        err.to_string().contains("apt-get install zookeeper"),
        "{err}"
    );
}

#[test]
fn a_deployment_has_one_or_three_servers() {
    let err = ZooKeeper::spawn(ZooKeeperOptions {
        servers: 2,
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("1 or 3 servers"), "{err}");
}

const CHILD_ENV: &str = "LOCKCHECK_ZK_TEST_CHILD";

/// Not a test of its own: the body of the child process below (lockcheck with an ensemble
/// running). Without LOCKCHECK_ZK_TEST_CHILD it does nothing.
#[test]
fn child_process_helper() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    lockcheck::real::install_cleanup_handlers();
    let zk = ZooKeeper::spawn(ZooKeeperOptions {
        servers: 3,
        ..Default::default()
    })
    .unwrap();
    let pids: Vec<String> = (0..3).map(|i| zk.pid(i).unwrap().to_string()).collect();
    println!("PIDS={}", pids.join(","));
    // Wait to be signalled; bounded so a broken parent cannot leave us behind.
    std::thread::sleep(Duration::from_secs(60));
    println!("NOT_SIGNALLED");
}

/// Runs the helper, waits for its ensemble, signals it and returns its exit code, its pid and
/// the JVMs' pids.
fn signal_child(signal: libc::c_int) -> (Option<i32>, u32, Vec<u32>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "servers::child_process_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut pids = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        // libtest prints "test name ... " without a newline before the test's own output.
        if let Some(at) = line.find("PIDS=") {
            pids = line[at + 5..]
                .split(',')
                .map(|p| p.parse().unwrap())
                .collect();
            break;
        }
    }
    assert_eq!(pids.len(), 3, "the child never started its ensemble");
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let status = child.wait().unwrap();
    (status.code(), child.id(), pids)
}

/// Removes the temporary directory of the helper `pid`: a process that dies by a signal runs no
/// destructor (its handler kills and reaps the servers and may do nothing that is not
/// async-signal-safe), so once its servers are gone the directory is this test's to clear.
fn remove_dirs_of(pid: u32) {
    let prefix = format!("lockcheck-zookeeper-{pid}-");
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[test]
fn ctrl_c_or_sigkill_of_lockcheck_takes_every_server_with_it() {
    let _turn = crate::zookeeper_turn();
    for (signal, code) in [(libc::SIGINT, Some(130)), (libc::SIGKILL, None)] {
        let (status, helper, pids) = signal_child(signal);
        assert_eq!(status, code, "exit status after signal {signal}");
        for pid in pids {
            assert!(
                wait_gone(pid, Duration::from_secs(3)),
                "the ZooKeeper JVM {pid} survived signal {signal} to lockcheck"
            );
        }
        remove_dirs_of(helper);
    }
}

/// How long after `start` server `index` first lists `/probe`, asked every 10 ms.
async fn seen_after(zk: &ZooKeeper, index: usize, start: Instant) -> Duration {
    let reader = zookeeper_client::Client::connect(&format!("127.0.0.1:{}", zk.client_port(index)))
        .await
        .unwrap();
    loop {
        if reader.check_stat("/probe").await.unwrap().is_some() {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never seen");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// CURATOR-604's ensemble: with a follower lag every follower hears the leader late, so a write
/// is committed only once a follower's acknowledgement of the lagged proposal is back (about one
/// lag) and a follower applies it about one lag later still; the leader's own tree has it first.
/// Local sessions are created by the server a client connects to, so connecting to a follower
/// takes no round trip to the leader.
#[test]
fn with_a_follower_lag_followers_apply_the_leaders_writes_late() {
    let _turn = crate::zookeeper_turn();
    let lag = Duration::from_millis(400);
    let zk = ZooKeeper::spawn(ZooKeeperOptions {
        servers: 3,
        local_sessions: true,
        peer_delay: Some(lag),
        ..Default::default()
    })
    .unwrap();
    let leader = zk.leader().unwrap();
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    assert_eq!(followers.len(), 2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let connect = Instant::now();
        let local = zookeeper_client::Client::connect(&format!(
            "127.0.0.1:{}",
            zk.client_port(followers[0])
        ))
        .await
        .unwrap();
        let connected_in = connect.elapsed();
        assert!(connected_in < lag, "a local session took {connected_in:?}");
        drop(local);
        let writer =
            zookeeper_client::Client::connect(&format!("127.0.0.1:{}", zk.client_port(leader)))
                .await
                .unwrap();
        let start = Instant::now();
        let options = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        writer.create("/probe", b"", &options).await.unwrap();
        let committed = start.elapsed();
        let on_follower = seen_after(&zk, followers[1], start).await;
        eprintln!(
            "lag {lag:?}: committed after {committed:?}, on a follower after {on_follower:?}"
        );
        assert!(committed >= lag, "committed after {committed:?}");
        assert!(
            on_follower >= lag * 2,
            "applied by a follower after {on_follower:?}"
        );
    });
}
