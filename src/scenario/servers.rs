//! The servers of a scenario's deployment and the role each starts the run in: what a report
//! draws a lane for, before any note says a role changed (`history::ServerNote`).

use super::{database, etcd, zookeeper, Scenario};
use crate::history::Role;

impl Scenario {
    /// Every server of the deployment, in [`Scenario::node_names`]'s order, with the role it
    /// starts in. Both worlds start them alike: `etcd-0` and `zookeeper-0` lead (the real worlds
    /// make them), a lone ZooKeeper or MySQL server serves alone, Redis masters and replicas
    /// are what their names say. Sentinels are not listed: they watch the servers and hold no
    /// data.
    pub fn servers(&self) -> Vec<(String, Role)> {
        let elected = |i: u32| if i == 0 { Role::Leader } else { Role::Follower };
        let mut v = Vec::new();
        if self.lock.kind.is_mysql() {
            v.push((database::SERVER.to_string(), Role::Standalone));
        }
        if self.lock.on_etcd() {
            // A lone etcd member is a raft of one: it elects itself and leads.
            v.extend((0..self.etcd.servers).map(|i| (etcd::member(i), elected(i))));
        }
        let zookeeper = self.lock.on_zookeeper();
        if zookeeper {
            // A lone ZooKeeper server runs standalone: no election, no leader.
            let n = self.zookeeper.servers;
            let role = |i| if n == 1 { Role::Standalone } else { elected(i) };
            v.extend((0..n).map(|i| (zookeeper::server_name(i), role(i))));
        }
        let redis = !self.lock.kind.is_mysql() && !self.lock.on_etcd() && !zookeeper;
        for m in 0..self.redis.masters * u32::from(redis) {
            v.push((format!("redis-{m}"), Role::Master));
            for r in 0..self.redis.replicas {
                v.push((format!("redis-{m}-replica-{r}"), Role::Replica));
            }
        }
        v
    }
}
