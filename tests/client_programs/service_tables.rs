//! Which service a client program's scenario speaks to: the service table its scenario has, and
//! what contradicts it, refused at the key (no program or server needed).

use lockcheck::Scenario;

/// A client program's scenario with `tables` (and `ttl`, its `[lock]` lease line, if any).
fn program_on(ttl: &str, tables: &str) -> String {
    format!(
        "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"client-program\"\n\
         command = [\"./client\"]\n{ttl}\n{tables}"
    )
}

#[test]
fn a_client_program_speaks_to_the_service_whose_table_its_scenario_has() {
    let s = Scenario::parse("t.toml", &program_on("ttl_ms = 100", "")).unwrap();
    assert_eq!(s.lock.service, lockcheck::lock::Service::Redis);
    assert!(s.node_names().contains(&"redis-0".to_string()));

    let zk = program_on("", "[zookeeper]\nsession_timeout_ms = 400\ntick_ms = 100\n");
    let s = Scenario::parse("t.toml", &zk).unwrap();
    assert_eq!(s.lock.service, lockcheck::lock::Service::ZooKeeper);
    // Its lease is its session, as for the ZooKeeper locks.
    assert_eq!(s.lock.lease_ms(), 400);
    assert_eq!(
        s.node_names(),
        ["zookeeper-0", "client-0", "client-1"].map(String::from)
    );
    // A ZooKeeper scenario's faults: a pause of server `zookeeper-0` is one.
    let paused = format!(
        "{zk}[[faults]]\nkind = \"pause\"\nnode = \"zookeeper-0\"\nat_ms = 10\nfor_ms = 100\n"
    );
    let s = Scenario::parse("t.toml", &paused).unwrap();
    assert_eq!(s.faults.len(), 1);

    let etcd = program_on("ttl_ms = 2000", "[etcd]\nservers = 3\n");
    let s = Scenario::parse("t.toml", &etcd).unwrap();
    assert_eq!(s.lock.service, lockcheck::lock::Service::Etcd);
    assert_eq!(s.lock.lease_ms(), 2000);
    assert_eq!(
        &s.node_names()[..3],
        ["etcd-0", "etcd-1", "etcd-2"].map(String::from)
    );
}

#[test]
fn a_client_program_refuses_what_contradicts_its_service_at_the_key() {
    let refused = |text: String, line: usize, says: &str| {
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert_eq!(e.line, line, "{e}");
        assert!(e.message.contains(says), "{says:?} in {e}");
    };
    // Two services: the table written second is the one pointed at.
    refused(
        program_on(
            "ttl_ms = 2000",
            "[zookeeper]\ntick_ms = 100\n[etcd]\nservers = 1\n",
        ),
        10,
        "`[etcd]` after `[zookeeper]`: a `client-program` lock speaks to one service",
    );
    refused(
        program_on(
            "ttl_ms = 2000",
            "[etcd]\nservers = 1\n[zookeeper]\ntick_ms = 100\n",
        ),
        10,
        "`[zookeeper]` after `[etcd]`",
    );
    // Redis's table beside another service's.
    refused(
        program_on("", "[redis]\nmasters = 1\n[zookeeper]\ntick_ms = 100\n"),
        8,
        "`[redis]` configures the Redis servers, but this `client-program` lock speaks to ZooKeeper",
    );
    // On ZooKeeper the lease is the session; on etcd a whole number of seconds.
    refused(
        program_on("ttl_ms = 100", "[zookeeper]\ntick_ms = 100\n"),
        7,
        "on ZooKeeper has no lease",
    );
    refused(
        program_on("ttl_ms = 1500", "[etcd]\nservers = 1\n"),
        7,
        "etcd grants leases in whole seconds",
    );
    // A server of another service is no node of this scenario.
    refused(
        program_on(
            "ttl_ms = 2000",
            "[etcd]\nservers = 1\n[[faults]]\nkind = \"crash\"\nnode = \"zookeeper-0\"\nat_ms = 10\n",
        ),
        12,
        "zookeeper-0",
    );
}
