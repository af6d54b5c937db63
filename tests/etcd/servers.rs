//! Spawned etcd members: a single member and a 3-member cluster start on free ports, answer, fail
//! over when the leader is killed, and leave no process and no directory behind; a missing `etcd`
//! is a clear exit 2 naming the Debian package. About 6 s of real time in all.

use lockcheck::backend::etcd::real::{EtcdCluster, EtcdTiming};
use lockcheck::real::registered_children;

use crate::common::{lockcheck, real_servers_one_at_a_time};

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_single_member_starts_answers_and_is_gone_after_drop() {
    let _turn = real_servers_one_at_a_time();
    let before = registered_children();
    let cluster = EtcdCluster::spawn(1, EtcdTiming::default()).unwrap();
    assert!(cluster.healthy(0));
    assert!(![2379, 2380].contains(&cluster.client_port(0)));
    assert_eq!(cluster.leader().unwrap(), 0);
    let pid = cluster.pid(0).unwrap();
    let dir = cluster.dir().to_path_buf();
    assert!(dir.exists());
    assert_eq!(registered_children(), before + 1);
    drop(cluster);
    assert!(!alive(pid), "etcd pid {pid} outlived its guard");
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_eq!(registered_children(), before);
}

#[test]
fn a_three_member_cluster_elects_a_new_leader_when_the_leader_dies() {
    let _turn = real_servers_one_at_a_time();
    let cluster = EtcdCluster::spawn(3, EtcdTiming::default()).unwrap();
    cluster.make_leader(0).unwrap();
    assert_eq!(cluster.leader().unwrap(), 0);
    let pids: Vec<u32> = (0..3).map(|m| cluster.pid(m).unwrap()).collect();
    cluster.kill(0);
    let next = cluster.leader().unwrap();
    assert_ne!(next, 0, "a dead member cannot lead");
    cluster.restart(0).unwrap();
    assert!(cluster.healthy(0), "the restarted member rejoined");
    drop(cluster);
    for pid in pids {
        assert!(!alive(pid), "etcd pid {pid} outlived its guard");
    }
}

#[test]
fn a_missing_etcd_exits_2_naming_the_package() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", "scenarios/etcd-lock-no-faults.toml", "--real"])
        .env("LOCKCHECK_ETCD", "/nonexistent/etcd")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("etcd-server"), "{err}");
    // And simulation needs no etcd at all.
    let (code, _, err) = lockcheck(&["run", "scenarios/etcd-lock-no-faults.toml"]);
    assert_eq!(code, 0, "{err}");
}
