//! The `[redis]` table's Sentinel keys, as a scenario file states them: checked at the key, in
//! simulation's parser (no server needed).

use lockcheck::Scenario;

/// `[redis]` Sentinel keys: sentinels are nodes (last in the node list), need a replica, a quorum
/// they have, and decide failovers themselves.
#[test]
fn sentinel_keys_are_checked() {
    let base = "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 100\n[redis]\n";
    let s = Scenario::parse("t.toml", &format!("{base}replicas = 1\nsentinels = 3\n")).unwrap();
    assert_eq!(s.redis.quorum(), 2);
    let names = s.node_names();
    assert_eq!(names.last().map(String::as_str), Some("sentinel-2"));
    assert_eq!(names[0], "redis-0");
    let e = Scenario::parse("t.toml", &format!("{base}sentinels = 3\n")).unwrap_err();
    assert!(e.message.contains("replicas"), "{e}");
    let e = Scenario::parse(
        "t.toml",
        &format!("{base}replicas = 1\nsentinels = 3\nquorum = 4\n"),
    )
    .unwrap_err();
    assert!(e.message.contains("quorum"), "{e}");
    let e = Scenario::parse("t.toml", &format!("{base}replicas = 1\nquorum = 2\n")).unwrap_err();
    assert!(e.message.contains("set `sentinels`"), "{e}");
    let e = Scenario::parse(
        "t.toml",
        &format!(
            "{base}replicas = 1\nsentinels = 3\n[[faults]]\nkind = \"failover\"\nat_ms = 10\n"
        ),
    )
    .unwrap_err();
    assert!(e.message.contains("sentinels decide"), "{e}");
}
