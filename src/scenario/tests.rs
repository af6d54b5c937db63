use super::error::line_col;
use super::*;

pub(super) const GOOD: &str = r#"
name = "t"
expect = "violation"
duration_ms = 1000
[lock]
kind = "set-nx-px"
ttl_ms = 100
[redis]
replicas = 1
[[faults]]
kind = "failover"
on = "acquired"
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 500
"#;

#[test]
fn parses_the_contract_example() {
    let s = Scenario::parse("t.toml", GOOD).unwrap();
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[0].kind, FaultKind::Failover { master: 0 });
    assert_eq!(s.faults[0].trigger, Trigger::Acquired { after_ms: 0 });
    assert_eq!(
        s.faults[1].kind,
        FaultKind::Pause {
            client: ClientRef::Holder,
            for_ms: 500
        }
    );
    assert_eq!(
        s.expected(crate::check::MUTUAL_EXCLUSION),
        Some(Verdict::Violation)
    );
}

#[test]
fn unknown_lock_kind_names_the_choices_and_position() {
    let text = GOOD.replace("set-nx-px", "sux");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert_eq!((e.line, e.file.as_str()), (6, "t.toml"));
    assert!(e.message.contains("set-nx-px"), "{e}");
}

#[test]
fn client_program_is_named_client_program_and_process_still_works() {
    let program = |kind: &str, command: &str| {
        format!(
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"{kind}\"\nttl_ms = 100\n{command}"
        )
    };
    for kind in ["client-program", "process"] {
        let s = Scenario::parse("t.toml", &program(kind, "command = [\"./client\"]")).unwrap();
        assert_eq!(s.lock.kind.name(), "client-program", "`{kind}`");
        assert!(s.lock.kind.is_client_program());
        let e = Scenario::parse("t.toml", &program(kind, "")).unwrap_err();
        assert!(
            e.message
                .contains("lock kind `client-program` needs `command = [\"program\""),
            "{e}"
        );
    }
    let e = Scenario::parse(
        "t.toml",
        &GOOD.replace("ttl_ms = 100", "ttl_ms = 100\ncommand = [\"x\"]"),
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("`command` is the client program of lock kind `client-program`; lock kind `set-nx-px` does not take it"),
        "{e}"
    );
}

#[test]
fn unknown_key_is_located() {
    let text = GOOD.replace("ttl_ms = 100", "ttl_ms = 100\nttl = 5");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("unknown field `ttl`"), "{e}");
}

#[test]
fn unknown_fault_kind_and_node() {
    let e = Scenario::parse("t.toml", &GOOD.replace("\"failover\"", "\"meteor\"")).unwrap_err();
    assert_eq!(e.line, 11, "{e}");
    assert!(e.message.contains("`clock_jump`"), "{e}");
    let text = format!("{GOOD}\n[[faults]]\nkind = \"crash\"\nnode = \"redis-7\"\nat_ms = 5\nrestart_after_ms = 1\n");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("unknown node `redis-7`"), "{e}");
    assert!(e.message.contains("`redis-0-replica-0`"), "{e}");
}

#[test]
fn key_of_another_fault_kind_is_rejected() {
    let text = GOOD.replace("for_ms = 500", "for_ms = 500\nby_ms = 3");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("has no key `by_ms`"), "{e}");
    assert_eq!(e.line, 18);
}

#[test]
fn bad_ranges_and_missing_trigger() {
    let text = GOOD.replace("replicas = 1", "replicas = 1\nreplication_lag_ms = [9, 1]");
    assert!(Scenario::parse("t.toml", &text)
        .unwrap_err()
        .message
        .contains("low <= high"));
    let text = GOOD.replace("on = \"acquired\"\n[[faults]]", "[[faults]]");
    assert!(Scenario::parse("t.toml", &text)
        .unwrap_err()
        .message
        .contains("needs a trigger"));
}

const NAIVE: &str = r#"
name = "t"
expect = "safe"
duration_ms = 1000
[lock]
kind = "naive-setnx-expire"
ttl_ms = 1000
[[faults]]
kind = "crash"
node = "client-0"
on = "after_setnx"
"#;

#[test]
fn a_client_crash_fires_at_a_named_point() {
    let s = Scenario::parse("t.toml", NAIVE).unwrap();
    assert_eq!(s.faults[0].kind, FaultKind::ClientCrash { client: 0 });
    assert_eq!(
        s.faults[0].trigger,
        Trigger::Point {
            point: "after_setnx".into(),
            after_ms: 0
        }
    );
    // A crash while holding: the `acquired` trigger.
    let s = Scenario::parse("t.toml", &NAIVE.replace("after_setnx", "acquired")).unwrap();
    assert_eq!(s.faults[0].trigger, Trigger::Acquired { after_ms: 0 });
}

#[test]
fn an_unknown_point_names_the_choices_of_that_lock() {
    let e = Scenario::parse("t.toml", &NAIVE.replace("after_setnx", "after-set")).unwrap_err();
    assert_eq!(e.line, 11, "{e}");
    for p in [
        "`acquired`",
        "`after_read`",
        "`before_release`",
        "`after_setnx`",
        "`before_del`",
    ] {
        assert!(e.message.contains(p), "{e}");
    }
    // Another lock has no `after_setnx`: a scenario cannot silently never fire.
    let text = NAIVE.replace("naive-setnx-expire", "set-nx-px");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(
        e.message.contains("unknown named point `after_setnx`"),
        "{e}"
    );
    assert!(e.message.contains("lock kind `set-nx-px`"), "{e}");
    // A lock of the user's own declares its points; then a fault may name them.
    const OWN: &[crate::env::NamedPoint] = &[crate::env::NamedPoint::new(
        "after_setnx",
        "the user's own point",
    )];
    let s = Scenario::parse_with_points("t.toml", &text, OWN).unwrap();
    assert_eq!(s.faults[0].trigger, Trigger::on_point("after_setnx", 0));
    assert!(s.points().contains(&"after_setnx"));
}

#[test]
fn a_crashed_client_neither_restarts_nor_crashes_at_a_time() {
    let text = NAIVE.replace(
        "on = \"after_setnx\"",
        "on = \"after_setnx\"\nrestart_after_ms = 5",
    );
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("does not restart"), "{e}");
    let text = NAIVE.replace("on = \"after_setnx\"", "at_ms = 5");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("named point"), "{e}");
    assert!(e.message.contains("`after_setnx`"), "{e}");
    // A Redis node crash still needs its restart time.
    let text = format!("{GOOD}\n[[faults]]\nkind = \"crash\"\nnode = \"redis-0\"\nat_ms = 5\n");
    let e = Scenario::parse("t.toml", &text).unwrap_err();
    assert!(e.message.contains("needs `restart_after_ms`"), "{e}");
}

#[test]
fn watchdog_timeout_is_redissons_and_a_redisson_lease_is_optional() {
    let e = Scenario::parse(
        "t.toml",
        &GOOD.replace("ttl_ms = 100", "ttl_ms = 100\nwatchdog_timeout_ms = 3000"),
    )
    .unwrap_err();
    assert!(e.message.contains("`redisson`"), "{e}");
    assert!(e.message.contains("has no watchdog"), "{e}");
    let text = GOOD
        .replace("set-nx-px", "redisson")
        .replace("ttl_ms = 100", "watchdog_timeout_ms = 3000");
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.lock.lease_ms(), 3000);
    assert_eq!(s.lock.ttl_ms, None);
    let s = Scenario::parse("t.toml", &GOOD.replace("set-nx-px", "redisson")).unwrap();
    assert_eq!(s.lock.lease_ms(), 100, "ttl_ms set: an explicit lease");
    // Without ttl_ms, a lock with no default lease is refused.
    let e = Scenario::parse("t.toml", &GOOD.replace("ttl_ms = 100", "")).unwrap_err();
    assert!(e.message.contains("needs `ttl_ms`"), "{e}");
}

#[test]
fn workload_kind_and_nesting() {
    let text = GOOD.replace(
        "[redis]",
        "[workload]\nkind = \"address-book\"\nnested = 2\n[redis]",
    );
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.workload.kind, WorkloadKind::AddressBook);
    assert_eq!(s.workload.nested, 2);
    let e = Scenario::parse("t.toml", &text.replace("address-book", "ledger")).unwrap_err();
    assert!(
        e.message.contains("`counter`") && e.message.contains("`address-book`"),
        "{e}"
    );
}

#[test]
fn partition_direction_is_strict_and_defaults_to_both() {
    let base = format!(
            "{GOOD}\n[[faults]]\nkind = \"partition\"\nnodes = [\"redis-0\"]\nfrom = [\"client-0\"]\nat_ms = 0\nfor_ms = 5\n"
        );
    let s = Scenario::parse("t.toml", &base).unwrap();
    let FaultKind::Partition { direction, .. } = &s.faults[2].kind else {
        panic!("{:?}", s.faults[2]);
    };
    assert_eq!(*direction, Direction::Both);
    let s = Scenario::parse("t.toml", &format!("{base}direction = \"outbound\"\n")).unwrap();
    assert!(matches!(
        s.faults[2].kind,
        FaultKind::Partition {
            direction: Direction::Outbound,
            ..
        }
    ));
    let e = Scenario::parse("t.toml", &format!("{base}direction = \"sideways\"\n")).unwrap_err();
    assert!(e.message.contains("unknown direction `sideways`"), "{e}");
    assert!(e.message.contains("`inbound`"), "{e}");
    // A direction on another kind of fault is rejected like any foreign key.
    let e = Scenario::parse(
        "t.toml",
        &GOOD.replace("for_ms = 500", "for_ms = 500\ndirection = \"both\""),
    )
    .unwrap_err();
    assert!(e.message.contains("has no key `direction`"), "{e}");
    let e =
        Scenario::parse("t.toml", &base.replace("[\"client-0\"]", "[\"redis-0\"]")).unwrap_err();
    assert!(e.message.contains("cannot be cut off from itself"), "{e}");
}

#[test]
fn redlock_keys_belong_to_redlock_and_before_write_is_a_trigger() {
    let e = Scenario::parse(
        "t.toml",
        &GOOD.replace("ttl_ms = 100", "ttl_ms = 100\ndrift_factor = 0.02"),
    )
    .unwrap_err();
    assert!(
        e.message.contains("`drift_factor` is a Redlock parameter"),
        "{e}"
    );
    assert_eq!(e.line, 8);
    let redlock = GOOD
            .replace("set-nx-px", "redlock")
            .replace("ttl_ms = 100", "ttl_ms = 100\ndrift_factor = 0.02\nrecheck_after_acquire = false\ncheck_validity_before_write = true")
            .replace("on = \"acquired\"\nfor_ms", "on = \"before_write\"\nfor_ms");
    let s = Scenario::parse("t.toml", &redlock).unwrap();
    let c = crate::lock::LockConfig::from_spec(&s.lock);
    assert_eq!(c.redlock.drift_factor, 0.02);
    assert!(!c.redlock.recheck_after_acquire);
    assert!(s.lock.check_validity_before_write);
    assert_eq!(s.faults[1].trigger, Trigger::BeforeWrite { after_ms: 0 });
    let e = Scenario::parse("t.toml", &redlock.replace("0.02", "1.5")).unwrap_err();
    assert!(e.message.contains("[0, 1)"), "{e}");
    let e = Scenario::parse(
        "t.toml",
        &GOOD.replace("on = \"acquired\"\nfor_ms", "on = \"released\"\nfor_ms"),
    )
    .unwrap_err();
    assert!(e.message.contains("`before_write`"), "{e}");
}

#[test]
fn line_col_counts_from_one() {
    assert_eq!(line_col("ab\ncd", 0), (1, 1));
    assert_eq!(line_col("ab\ncd", 4), (2, 2));
}

/// A node fault at a named point may name whose point sets it off; without `client` the first
/// client to reach the point does. `client` needs a point, and a client index.
#[test]
fn a_node_fault_at_a_point_can_be_aimed_at_one_client() {
    let text = GOOD.replace(
        "kind = \"failover\"\non = \"acquired\"",
        "kind = \"failover\"\non = \"acquired\"\nclient = 1",
    );
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.faults[0].by_client, Some(1));
    assert_eq!(
        s.faults[1].by_client, None,
        "a pause's client is its victim"
    );
    // Written back as TOML, the aim survives.
    assert_eq!(fault_table(&s.faults[0])["client"].as_integer(), Some(1));

    let at = GOOD.replace(
        "kind = \"failover\"\non = \"acquired\"",
        "kind = \"failover\"\nat_ms = 5\nclient = 1",
    );
    let e = Scenario::parse("t.toml", &at).unwrap_err();
    assert!(e.message.contains("needs `on ="), "{e}");
    let holder = GOOD.replace(
        "kind = \"failover\"\non = \"acquired\"",
        "kind = \"failover\"\non = \"acquired\"\nclient = \"holder\"",
    );
    let e = Scenario::parse("t.toml", &holder).unwrap_err();
    assert!(e.message.contains("client index"), "{e}");
}

/// A fault at a point of the lock's own that names no client fires at whichever client gets
/// there first, holder or not: legal, but warned about at its `on` key. Naming the client (or
/// "holder" for a pause), a workload point (reached only by the holder) or a one-client scenario
/// is not ambiguous.
#[test]
fn an_ambiguous_trigger_is_warned_about_at_its_on_key() {
    let scenario = |clients: u32, fault: &str| {
        format!(
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n\n[lock]\nkind = \"naive-setnx-expire\"\nttl_ms = 500\n\n\
             [redis]\nreplicas = 1\n\n[workload]\nclients = {clients}\n\n[[faults]]\n{fault}\n"
        )
    };
    let warnings = |clients: u32, fault: &str| {
        Scenario::parse("t.toml", &scenario(clients, fault))
            .unwrap_or_else(|e| panic!("{e}"))
            .warnings
    };
    let node = warnings(2, "kind = \"failover\"\non = \"after_setnx\"");
    assert_eq!(node.len(), 1, "{node:?}");
    assert!(
        node[0].starts_with("t.toml:17:6: `on = \"after_setnx\"` with no `client`"),
        "{node:?}"
    );
    assert!(node[0].contains("add `client = N`"), "{node:?}");
    let pause = warnings(3, "kind = \"pause\"\non = \"after_setnx\"\nfor_ms = 100");
    assert_eq!(pause.len(), 1, "{pause:?}");
    assert!(
        pause[0].contains("which may not hold the lock"),
        "{pause:?}"
    );
    for quiet in [
        (2, "kind = \"failover\"\non = \"after_setnx\"\nclient = 1"),
        (
            2,
            "kind = \"pause\"\non = \"after_setnx\"\nclient = \"holder\"\nfor_ms = 100",
        ),
        (2, "kind = \"failover\"\non = \"acquired\""),
        (1, "kind = \"failover\"\non = \"after_setnx\""),
        (2, "kind = \"failover\"\nat_ms = 100"),
    ] {
        assert!(warnings(quiet.0, quiet.1).is_empty(), "{quiet:?}");
    }
}

/// `wait_replicas` belongs to set-nx-px, needs replicas to acknowledge, and `wait_timeout_ms`
/// needs it; each mistake is named at its key.
#[test]
fn wait_replicas_is_checked_at_its_key() {
    let text = |kind: &str, replicas: u32, lock_keys: &str| {
        format!(
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n\n[lock]\nkind = \"{kind}\"\nttl_ms = 1000\n{lock_keys}\n\n\
             [redis]\nreplicas = {replicas}\n"
        )
    };
    let ok = Scenario::parse("t.toml", &text("set-nx-px", 1, "wait_replicas = 1")).unwrap();
    let w = crate::lock::LockConfig::from_spec(&ok.lock)
        .wait_replicas
        .unwrap();
    assert_eq!((w.replicas, w.timeout.as_millis()), (1, 100));
    // Redisson takes it as its `checkLockSyncedSlaves`, undoing an unsynced attempt unless told.
    let redisson = |keys: &str| {
        let s = Scenario::parse("t.toml", &text("redisson", 1, keys)).unwrap();
        crate::lock::LockConfig::from_spec(&s.lock).wait_replicas
    };
    assert_eq!(
        redisson("wait_replicas = 1").map(|w| w.unsynced),
        Some(crate::lock::UnsyncedAttempt::Undo)
    );
    assert_eq!(
        redisson("wait_replicas = 1\nunsynced_attempt = \"keep\"").map(|w| w.unsynced),
        Some(crate::lock::UnsyncedAttempt::Keep)
    );
    for (kind, replicas, keys, says) in [
        (
            "set-nx-px",
            1,
            "wait_replicas = 2",
            "t.toml:8:17: `wait_replicas = 2`: give 1 to",
        ),
        (
            "set-nx-px",
            1,
            "wait_replicas = 0",
            "give 1 to `[redis] replicas` (1)",
        ),
        (
            "redlock",
            1,
            "wait_replicas = 1",
            "an option of lock kinds `set-nx-px` and `redisson`",
        ),
        (
            "set-nx-px",
            1,
            "wait_replicas = 1\nunsynced_attempt = \"keep\"",
            "t.toml:9:20: `unsynced_attempt` is what a Redisson lock attempt",
        ),
        (
            "redisson",
            1,
            "unsynced_attempt = \"keep\"",
            "t.toml:8:20: `unsynced_attempt` is about the `WAIT` after each lock write: set `wait_replicas` too",
        ),
        (
            "redisson",
            1,
            "wait_replicas = 1\nunsynced_attempt = \"kept\"",
            "unknown variant `kept`, expected `undo` or `keep`",
        ),
        (
            "set-nx-px",
            1,
            "wait_timeout_ms = 50",
            "set `wait_replicas` too",
        ),
        (
            "set-nx-px",
            1,
            "wait_replicas = 1\nwait_timeout_ms = 0",
            "block forever",
        ),
    ] {
        let e = Scenario::parse("t.toml", &text(kind, replicas, keys))
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{keys}: {e}");
    }
}
