//! What the etcd backend reads off its scenario table, `[etcd]`: its members' node names. The
//! table's type, `scenario::etcd::EtcdSpec` (with what its keys mean: the minimum lease TTL,
//! a request's timeout), stays in the scenario format: `Scenario::etcd`, a public field, names it.

/// The node name of member `i`.
pub fn member(i: u32) -> String {
    format!("etcd-{i}")
}
