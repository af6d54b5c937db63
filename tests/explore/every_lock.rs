//! Explore on every lock kind: the default space of every bundled scenario draws only faults its
//! cluster has, and `lockcheck explore` runs every bundled MySQL and Sentinel scenario to an
//! answer (exit 0 or 1), never a panic.

use super::{explore_kind, lockcheck, temp_dir};
use lockcheck::explore::strategy::cases;
use lockcheck::lock::Backend;
use lockcheck::scenario::{FaultKind, Scenario, Space};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::path::PathBuf;

/// The bundled scenarios (`scenarios/*.toml`; the external client programs' ones run in real
/// mode only), sorted.
fn bundled() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

/// Why `kind` cannot happen to `s`'s cluster, if it cannot.
fn foreign(s: &Scenario, space: &Space, kind: &FaultKind) -> Option<String> {
    let mysql = s.lock.kind.backend() == Backend::Database;
    let (etcd, zookeeper) = (
        s.lock.kind.backend() == Backend::Etcd,
        s.lock.kind.backend() == Backend::ZooKeeper,
    );
    let redis = s.lock.service == lockcheck::lock::Service::Redis;
    // A PostgreSQL deployment fails over when it has a standby to promote.
    let postgres = s.lock.service == lockcheck::backend::postgres::SERVICE;
    let standby = postgres && lockcheck::backend::postgres::table::of(s).standby;
    // An etcd cluster or ZooKeeper ensemble fails over when it has more than one member.
    let members = if etcd {
        s.etcd.servers
    } else {
        s.zookeeper.servers
    };
    match kind {
        FaultKind::Failover { .. }
            if mysql
                || (redis && (s.redis.replicas == 0 || s.redis.sentinels > 0))
                || ((etcd || zookeeper) && members < 3)
                || (postgres && !standby) =>
        {
            Some("a failover".into())
        }
        FaultKind::ClockJump { .. } | FaultKind::ClockDrift { .. } if mysql || postgres => {
            Some("a clock fault on a MySQL or PostgreSQL lock".into())
        }
        FaultKind::Terminate { .. } if !postgres => {
            Some("a session termination on a service without sessions to end".into())
        }
        FaultKind::ServerPause { .. } if redis => Some("a server pause on Redis".into()),
        FaultKind::Crash { node, .. } if !space.servers.contains(node) => {
            Some(format!("a crash of {node}, not a server"))
        }
        _ => None,
    }
}

#[test]
fn every_bundled_scenario_draws_only_the_faults_its_cluster_has() {
    let mut kinds_seen = std::collections::BTreeSet::new();
    for path in bundled() {
        let s = Scenario::load(&path).unwrap();
        let space = Space::of(&s).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if s.lock.kind.backend() == Backend::Database {
            assert_eq!(space.servers, ["mysql-0"], "{}", path.display());
            assert!(space.faults.contains(&"server_pause"), "{}", path.display());
        }
        let mut runner = TestRunner::deterministic();
        for _ in 0..300 {
            let case = cases(&space).new_tree(&mut runner).unwrap().current();
            let run = case.scenario(&s, &space);
            for f in &run.faults {
                kinds_seen.insert(explore_kind(&f.kind));
                if let Some(why) = foreign(&s, &space, &f.kind) {
                    panic!("{}: drew {why}: {:?}", path.display(), f.kind);
                }
            }
        }
    }
    // Over every lock kind, every fault kind explore draws by default was drawn somewhere (the
    // opt-in kinds are drawn only where a scenario lists them, which no bundled one does).
    for k in lockcheck::scenario::explore::EXPLORE_FAULTS
        .iter()
        .filter(|k| !lockcheck::scenario::explore::OPT_IN_FAULTS.contains(k))
    {
        assert!(kinds_seen.contains(k), "{k} never drawn: {kinds_seen:?}");
    }
}

/// `explore` on every bundled scenario answers (found or not, never a refusal or a panic), and
/// every file it writes is one `lockcheck run` accepts and judges as the file says (exit 0: the
/// found verdict is the file's `expect`). A finding whose file would not parse, or that draws a
/// fault the scenario's world does not model, fails here, whichever scenario it came from.
#[test]
fn explore_on_every_bundled_scenario_writes_only_files_run_accepts() {
    let dir = temp_dir("every-lock");
    let mut ran = 0;
    let mut found = 0;
    for path in bundled() {
        let out = dir.join(format!("found-{ran}.toml"));
        let (code, stdout, stderr) = lockcheck(&[
            "explore",
            &path.display().to_string(),
            "--cases",
            "20",
            "--out",
            &out.display().to_string(),
        ]);
        assert!(
            code == 0 || code == 1,
            "{}: exit {code}\n{stdout}\n{stderr}",
            path.display()
        );
        assert!(
            stdout.starts_with("NOTHING FOUND") || stdout.starts_with("FOUND"),
            "{}: {stdout}",
            path.display()
        );
        if code == 1 {
            assert!(
                out.exists(),
                "{}: FOUND but no file\n{stdout}",
                path.display()
            );
            let (code, stdout, stderr) = lockcheck(&["run", &out.display().to_string()]);
            assert_eq!(
                code,
                0,
                "{}: its finding {} does not run as written\n{stdout}\n{stderr}",
                path.display(),
                out.display()
            );
            found += 1;
        }
        ran += 1;
    }
    assert!(ran >= 67, "67 scenarios are bundled, ran {ran}");
    assert!(found > 0, "no bundled scenario gave a finding in 20 cases");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The default space keeps the scenario's workload as its upper bound: explore never runs more
/// clients or cycles than the scenario has, so a one-client scenario is explored with one client.
#[test]
fn the_default_space_never_grows_the_workload() {
    let one = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/mysql-insert-unique-server-pause.toml"),
    )
    .unwrap();
    assert_eq!(one.workload.clients, 1);
    let space = Space::of(&one).unwrap();
    assert_eq!(space.clients, [1, 1]);
    assert_eq!(space.cycles, [1, one.workload.cycles]);
    assert_eq!(space.hold_ms, one.workload.hold_ms);
    let three = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/mysql-for-update-no-faults.toml"),
    )
    .unwrap();
    assert_eq!(Space::of(&three).unwrap().clients, [2, 3]);
}
