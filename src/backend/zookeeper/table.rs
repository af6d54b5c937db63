//! What the ZooKeeper backend reads off its scenario table, `[zookeeper]`: its servers' node
//! names. The table's type, `scenario::zookeeper::ZooKeeperSpec`, stays in the scenario format:
//! `Scenario::zookeeper`, a public field, names it.

/// The name of server `i` of the deployment (faults name them).
pub fn server_name(i: u32) -> String {
    format!("zookeeper-{i}")
}
