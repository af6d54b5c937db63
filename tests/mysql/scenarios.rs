//! The six bundled MySQL scenarios reach their expected verdicts in simulation and on a real
//! MariaDB that lockcheck spawns; after the real runs no `mariadbd` of ours and no data directory
//! is left.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;

const SCENARIOS: [&str; 6] = [
    "mysql-for-update-no-faults",
    "mysql-for-update-client-pause",
    "mysql-insert-unique-crash-no-cleanup",
    "mysql-insert-unique-cleanup-long-hold",
    "mysql-insert-unique-fenced",
    "mysql-insert-unique-server-pause",
];

fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.toml"));
    Scenario::load(&path).unwrap()
}

fn sim(name: &str) -> Outcome {
    sim_seed(name, scenario(name).seed)
}

fn sim_seed(name: &str, seed: u64) -> Outcome {
    let s = scenario(name);
    Outcome::judge(
        &s,
        Mode::Sim,
        seed,
        lockcheck::Registry::new().run_sim(&s, seed).history,
    )
}

/// `name` on a spawned MariaDB. The real-mode tests take turns ([`crate::mariadb_turn`]): three
/// MariaDBs recovering at once on two cores miss the timings the crash and partition tests rely on.
fn real(name: &str) -> Outcome {
    let s = scenario(name);
    let history = lockcheck::Registry::new().run_real(&s, s.seed).unwrap();
    Outcome::judge(&s, Mode::Real, s.seed, history)
}

fn verdicts(o: &Outcome) -> Vec<(String, Verdict)> {
    o.checks
        .iter()
        .map(|(k, c)| (k.clone(), c.verdict))
        .collect()
}

fn assert_expected(name: &str, o: &Outcome) {
    let s = scenario(name);
    for (check, want) in &s.expect_checks {
        assert_eq!(
            o.checks[check].verdict,
            *want,
            "{name} ({:?}, seed {}): {check} should be {want}: {}\n{}",
            o.mode,
            o.seed,
            o.checks[check].summary,
            o.history.render()
        );
    }
    assert_eq!(o.verdict(), s.expect, "{name}: {:?}", verdicts(o));
}

fn faults(o: &Outcome) -> String {
    o.history
        .events
        .iter()
        .filter(|e| e.node == "nemesis")
        .map(|e| format!("{:?}", e.kind))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mysql_scenarios_reach_their_verdicts_in_simulation() {
    for name in SCENARIOS {
        for seed in 1..=5 {
            assert_expected(name, &sim_seed(name, seed));
        }
    }
    // The evidence is the one each scenario is about.
    let pause = sim("mysql-for-update-client-pause");
    assert!(faults(&pause).contains("client-0 paused for 3000 ms"));
    let waits: Vec<_> = pause
        .history
        .events
        .iter()
        .filter(|e| format!("{:?}", e.kind).contains("AcquireFailed"))
        .collect();
    assert!(
        waits.is_empty(),
        "the waiter keeps retrying through 1205s: {waits:?}"
    );
    let cleanup = sim("mysql-insert-unique-cleanup-long-hold");
    assert!(faults(&cleanup).contains("cleanup job deleted 1 lock row(s)"));
}

#[test]
fn mysql_scenarios_are_deterministic() {
    for name in SCENARIOS {
        let s = scenario(name);
        let a = lockcheck::Registry::new().run_sim(&s, 7).history;
        let b = lockcheck::Registry::new().run_sim(&s, 7).history;
        assert_eq!(a.render(), b.render(), "{name}");
    }
}

/// Our `mariadbd` processes (their command line names a lockcheck datadir) and our datadirs.
fn leftovers() -> (usize, usize) {
    let procs = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains("lockcheck-mariadb-"))
        .count();
    let me = format!("lockcheck-mariadb-{}-", std::process::id());
    let dirs = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&me))
        .count();
    (procs, dirs)
}

#[test]
fn mysql_scenarios_reach_their_verdicts_on_real_mariadb() {
    let _turn = crate::mariadb_turn();
    for name in SCENARIOS {
        let o = real(name);
        assert_expected(name, &o);
    }
    assert_eq!(
        leftovers().1,
        0,
        "a data directory of this test was left behind"
    );
}

#[test]
fn a_partition_is_noticed_by_the_server_only_at_wait_timeout() {
    let _turn = crate::mariadb_turn();
    // A FOR UPDATE holder is cut off from the server for 4 s; wait_timeout is 1 s: the server
    // closes its idle session at ~1 s and rolls back, the other client gets the row while the
    // partitioned one still believes it holds: two holders, in both worlds.
    let text = r#"
name = "mysql-for-update-partition"
expect = "violation"
duration_ms = 3000
[lock]
kind = "mysql-for-update"
lock_wait_timeout_s = 1
wait_ms = 8000
[database]
wait_timeout_s = 1
request_timeout_ms = 1500
[workload]
clients = 2
cycles = 2
hold_ms = [3000, 3000]
think_ms = [0, 10]
[[faults]]
kind = "partition"
nodes = ["client-0"]
from = ["mysql-0"]
on = "acquired"
for_ms = 2500
"#;
    let s = Scenario::parse("partition.toml", text).unwrap();
    let o = Outcome::judge(
        &s,
        Mode::Sim,
        1,
        lockcheck::Registry::new().run_sim(&s, 1).history,
    );
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    assert!(faults(&o).contains("closed 1 idle connection(s) (wait_timeout)"));
    let history = lockcheck::Registry::new().run_real(&s, 1).unwrap();
    let o = Outcome::judge(&s, Mode::Real, 1, history);
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
}

#[test]
fn a_server_crash_rolls_back_the_holder_and_frees_the_row() {
    let _turn = crate::mariadb_turn();
    // The server dies under a FOR UPDATE holder and comes back 500 ms later (real MariaDB: up to
    // ~2 s with crash recovery on a loaded machine, within the 3 s hold): the transaction is
    // gone (rolled back), the holder's COMMIT fails, and the lock row is free again. The holder
    // still worked believing it held: two holders.
    let text = r#"
name = "mysql-for-update-server-crash"
expect = "violation"
duration_ms = 4000
[lock]
kind = "mysql-for-update"
lock_wait_timeout_s = 1
wait_ms = 8000
[workload]
clients = 2
cycles = 1
hold_ms = [3000, 3000]
think_ms = [0, 10]
[[faults]]
kind = "crash"
node = "mysql-0"
on = "acquired"
restart_after_ms = 500
"#;
    let s = Scenario::parse("crash.toml", text).unwrap();
    let o = Outcome::judge(
        &s,
        Mode::Sim,
        1,
        lockcheck::Registry::new().run_sim(&s, 1).history,
    );
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
    assert!(faults(&o).contains("mysql-0 restarted"));
    let history = lockcheck::Registry::new().run_real(&s, 1).unwrap();
    let o = Outcome::judge(&s, Mode::Real, 1, history);
    assert!(
        faults(&o).contains("mysql-0 restarted"),
        "{}",
        o.history.render()
    );
    assert_eq!(o.verdict(), Verdict::Violation, "{}", o.history.render());
}
