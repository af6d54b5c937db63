//! A clock fault on a client program reaches the program on etcd, ZooKeeper and PostgreSQL too,
//! not only on Redis: libfaketime moves its wall clock (`docs/client-protocol.md`, "client
//! clocks"). The test program `tests/programs/clock_lease.py` judges its lease on its own wall
//! clock, so a client whose clock jumps 5 s forward takes a lease its holder still has: two
//! holders with the jump, none without. The servers' clocks stay refused (etcd's lease expiry
//! reads Go's monotonic clock, which libfaketime does not move).
//!
//! Cost: two real runs of 3 s on one etcd member.

use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;

/// A scenario of two clients taking turns on `clock_lease.py` over `service` (its table), with
/// `faults` after it.
fn scenario(table: &str, faults: &str) -> Scenario {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let program = root.join("tests/programs/clock_lease.py");
    let dir = std::env::temp_dir().join(format!("lockcheck-clock-lease-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lease = dir.join(format!("lease-{}", table.len() + faults.len()));
    let _ = std::fs::remove_file(&lease);
    // Only etcd's programs are given a lease (`LOCKCHECK_TTL_MS`); the others' default is 1 s.
    let ttl = if table.starts_with("[etcd]") {
        "ttl_ms = 2000\n"
    } else {
        ""
    };
    let text = format!(
        "name = \"program-clock\"\nexpect = \"violation\"\nseed = 1\nduration_ms = 3000\n\n\
         [lock]\nkind = \"client-program\"\ncommand = [\"python3\", \"{}\", \"{}\"]\n\
         {ttl}wait_ms = 2500\n\n{table}\n\n[workload]\nclients = 2\ncycles = 3\n\
         hold_ms = [400, 400]\nthink_ms = [50, 50]\n\n{faults}",
        program.display(),
        lease.display()
    );
    Scenario::parse("program-clock.toml", &text).unwrap_or_else(|e| panic!("{e}"))
}

/// client-1's clock steps 5 s forward 100 ms in, while client-0 holds a 2 s lease.
const JUMP: &str =
    "[[faults]]\nkind = \"clock_jump\"\nnode = \"client-1\"\nby_ms = 5000\nat_ms = 100\n";

fn run(s: &Scenario) -> Outcome {
    let _serial = crate::common::real_servers_one_at_a_time();
    let history = lockcheck::Registry::new()
        .run_real(s, 1)
        .unwrap_or_else(|e| panic!("{} could not run: {e}", s.name));
    Outcome::judge(s, Mode::Real, 1, history)
}

#[test]
fn a_client_programs_clock_jump_reaches_it_on_etcd() {
    let jumped = run(&scenario("[etcd]\nservers = 1", JUMP));
    let noted = jumped.history.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Fault { what } if what.contains("client-1 program clock jumped by 5000 ms"))
    });
    assert!(noted, "no jump recorded:\n{}", jumped.history.render());
    assert_eq!(
        jumped.verdict(),
        Verdict::Violation,
        "client-1 ran 5 s ahead and should have taken client-0's lease:\n{}",
        jumped.history.render()
    );
    // The control: the same program and workload on true clocks keeps one holder.
    let control = run(&scenario("[etcd]\nservers = 1", ""));
    assert_eq!(
        control.verdict(),
        Verdict::Safe,
        "{}",
        control.history.render()
    );
}

/// Real mode decides before spawning anything: a client program's clock may be moved on every
/// backend whose programs it runs; a server's clock, or an in-process client's, is refused with
/// the reason (etcd and ZooKeeper read monotonic clocks libfaketime does not move).
#[test]
fn only_client_programs_clocks_are_moved_on_consensus_and_sql_servers() {
    for table in [
        "[etcd]\nservers = 1",
        "[zookeeper]\nservers = 1",
        "[postgres]",
    ] {
        let ok = scenario(table, JUMP);
        assert_eq!(ok.real_mode_unsupported(), None, "{table}");
        let drift_from_start = scenario(
            table,
            "[[faults]]\nkind = \"clock_drift\"\nnode = \"client-0\"\nppm = 500000\nat_ms = 0\n",
        );
        assert_eq!(drift_from_start.real_mode_unsupported(), None, "{table}");
        let late_drift = scenario(
            table,
            "[[faults]]\nkind = \"clock_drift\"\nnode = \"client-0\"\nppm = 500000\nat_ms = 100\n",
        );
        let why = late_drift.real_mode_unsupported().expect(table);
        assert!(why.contains("at_ms = 0"), "{table}: {why}");
        let clocks = scenario(
            table,
            "[clocks]\nnodes = [\"client-1\"]\noffset_ms = [3000, 3000]\n",
        );
        assert_eq!(clocks.real_mode_unsupported(), None, "{table}");
    }
    let server = scenario(
        "[etcd]\nservers = 1",
        "[[faults]]\nkind = \"clock_jump\"\nnode = \"etcd-0\"\nby_ms = 5000\nat_ms = 100\n",
    );
    let why = server
        .real_mode_unsupported()
        .expect("a member's clock jump");
    assert!(why.contains("client programs only"), "{why}");
}
