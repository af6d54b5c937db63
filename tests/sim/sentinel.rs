//! Redis Sentinel in simulation: when the sentinels decide, whom clients follow, and what
//! `min-replicas-to-write` refuses.

use lockcheck::backend::redis::sim::sentinel::PROMOTION_MS;
use lockcheck::history::{EventKind, History};
use lockcheck::{Scenario, Verdict};

fn scenario(extra_redis: &str, faults: &str) -> Scenario {
    Scenario::parse(
        "sentinel.toml",
        &format!(
            "name = \"s\"\nexpect = \"violation\"\nduration_ms = 8000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 10000\nwait_ms = 6000\n[redis]\nreplicas = 1\nsentinels = 3\n{extra_redis}\n[workload]\nclients = 2\ncycles = 1\nhold_ms = [4000, 4000]\n{faults}"
        ),
    )
    .unwrap()
}

/// The true time (ms) of the first nemesis note containing `what`.
fn noted(h: &History, what: &str) -> Option<u64> {
    h.events.iter().find_map(|e| match &e.kind {
        EventKind::Fault { what: w } if w.contains(what) => Some(e.at_us / 1000),
        _ => None,
    })
}

/// The sentinels see a crashed master down after `down_after_ms` (on their 100 ms tick), agree,
/// and promote the replica `PROMOTION_MS` later; the waiting client follows them.
#[test]
fn sentinels_fail_a_crashed_master_over_after_down_after_ms() {
    for down_after in [500u64, 1000, 2000] {
        let s = scenario(
            &format!("down_after_ms = {down_after}"),
            "[[faults]]\nkind = \"crash\"\nnode = \"redis-0\"\nat_ms = 1000\nrestart_after_ms = 60000\n",
        );
        let run = lockcheck::Registry::new().run_sim(&s, 1);
        let sdown = noted(&run.history, "+sdown master redis-0").expect("sdown");
        let switch =
            noted(&run.history, "+switch-master redis-0 -> redis-0-replica-0").expect("switch");
        assert!(
            (1000 + down_after..=1000 + down_after + 100).contains(&sdown),
            "down_after {down_after}: +sdown at {sdown} ms"
        );
        assert!(
            (sdown + PROMOTION_MS..=sdown + PROMOTION_MS + 100).contains(&switch),
            "+switch-master at {switch} ms, +sdown at {sdown} ms"
        );
    }
}

/// One sentinel seeing the master down is not a quorum: no failover.
#[test]
fn one_sentinel_cut_off_is_not_a_quorum() {
    let s = scenario(
        "down_after_ms = 500",
        "[[faults]]\nkind = \"partition\"\nnodes = [\"sentinel-0\"]\nat_ms = 100\nfor_ms = 5000\n",
    );
    let run = lockcheck::Registry::new().run_sim(&s, 1);
    assert!(noted(&run.history, "+sdown").is_some());
    assert_eq!(noted(&run.history, "+odown"), None);
    assert_eq!(noted(&run.history, "+switch-master"), None);
}

/// A master cut off from its replica for longer than `min_replicas_max_lag_s` refuses writes
/// (`NOREPLICAS`), as `redis-server` does; without the setting it keeps accepting them.
#[test]
fn min_replicas_to_write_refuses_writes_once_the_replica_is_stale() {
    let text = |min: &str| {
        format!(
            "name = \"m\"\nexpect = \"safe\"\nduration_ms = 6000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 200\nwait_ms = 300\n[redis]\nreplicas = 1\n{min}\n[workload]\nclients = 1\ncycles = 200\nhold_ms = [10, 10]\nthink_ms = [10, 10]\n[[faults]]\nkind = \"partition\"\nnodes = [\"redis-0-replica-0\"]\nat_ms = 1000\nfor_ms = 10000\n"
        )
    };
    let refused = |h: &History| {
        h.events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::AcquireFailed { reason } if reason.contains("NOREPLICAS")))
            .map(|e| e.at_us / 1000)
            .collect::<Vec<_>>()
    };
    let with = Scenario::parse(
        "m.toml",
        &text("min_replicas_to_write = 1\nmin_replicas_max_lag_s = 1"),
    )
    .unwrap();
    let run = lockcheck::Registry::new().run_sim(&with, 1);
    let r = refused(&run.history);
    // The last ack before the cut is at 1 s at the latest; Redis counts whole seconds of lag, so
    // writes are refused from 2-3 s on, and never before the cut.
    let first = *r.first().expect("writes refused");
    assert!(
        (2000..=3100).contains(&first),
        "first NOREPLICAS at {first} ms"
    );
    let without = Scenario::parse("m.toml", &text("")).unwrap();
    assert!(refused(&lockcheck::Registry::new().run_sim(&without, 1).history).is_empty());
}

/// The bundled split-brain scenario: the cut-off old master keeps granting while the promoted
/// replica grants too, and it is demoted when the partition heals.
#[test]
fn the_partitioned_old_master_is_demoted_when_the_partition_heals() {
    let s = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/sentinel-partitioned-old-master.toml"
    )))
    .unwrap();
    let run = lockcheck::Registry::new().run_sim(&s, 1);
    let healed = noted(&run.history, "partition healed").expect("healed");
    let demoted = noted(&run.history, "redis-0 demoted").expect("demoted");
    assert!(
        demoted >= healed && demoted <= healed + 100,
        "healed {healed}, demoted {demoted}"
    );
    let o = lockcheck::Outcome::judge(&s, lockcheck::Mode::Sim, 1, run.history);
    assert_eq!(o.checks["mutual_exclusion"].verdict, Verdict::Violation);
}
