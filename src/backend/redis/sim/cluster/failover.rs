//! What Redis Sentinel and `min-replicas-to-write` need of the simulated deployment: a chosen
//! replica promoted while the old master keeps running (it does not know it was replaced), the
//! old master demoted when the sentinels reach it again, clients routed to the master they were
//! last told of, and a master that refuses writes when too few replicas acked recently.
//! The sentinels' decisions themselves are `backend/redis/sim/sentinel.rs`.

use crate::backend::redis::sim::cluster::{Cluster, Group, State, Stream};
use crate::history::EventKind;
use crate::simredis::Role;

impl State {
    /// `REPLICAOF NO ONE` on replica `new` of `group`, as both a nemesis failover
    /// ([`Cluster::promote`]) and the sentinels' ([`Cluster::switch_master`]) do it: `new` becomes
    /// the master, keeping what it had received, and the group's other replicas follow it from
    /// the start of its stream. What becomes of the old master is the caller's; returns it.
    pub(super) fn replicaof_no_one(&mut self, group: usize, new: usize) -> usize {
        let g = self.groups[group].clone();
        self.servers[new].engine.set_role(Role::Master);
        let rest: Vec<usize> = g.replicas.iter().copied().filter(|&r| r != new).collect();
        self.servers[new].streams = rest.iter().map(|&r| (r, Stream::default())).collect();
        self.servers[new].offset = 0;
        for &r in &rest {
            self.servers[r].applied = 0;
        }
        self.groups[group] = Group {
            master: new,
            replicas: rest,
        };
        g.master
    }
}

impl Cluster {
    /// Clients find masters through sentinels on nodes `nodes` (see [`Cluster::master_for`]).
    pub fn use_sentinels(&self, nodes: Vec<usize>) {
        self.st().sentinel_nodes = nodes;
    }

    /// `min-replicas-to-write n` with `min-replicas-max-lag lag_s` on every master.
    pub fn set_min_replicas(&self, n: u32, lag_s: u64) {
        self.st().min_replicas = (n > 0).then_some((n, lag_s));
    }

    /// Whether master `idx` has enough replicas whose last ack is recent enough (Redis counts
    /// the lag in whole seconds since the replica's last `REPLCONF ACK`).
    pub(super) fn enough_replicas(&self, st: &State, idx: usize) -> bool {
        let Some((n, lag_s)) = st.min_replicas else {
            return true;
        };
        if st.servers[idx].engine.role() != Role::Master {
            return true;
        }
        let now_ms = self.rec.now_us() / 1000;
        let good = st.servers[idx]
            .streams
            .keys()
            .filter(|&&r| {
                let s = &st.servers[r];
                s.alive && (now_ms.saturating_sub(s.last_ack_ms)) / 1000 <= lag_s
            })
            .count();
        good as u32 >= n
    }

    /// Replica `idx` acks its master, if it is alive, still a replica of a live master, and the
    /// link to it is up.
    pub(super) fn ack(&self, idx: usize) {
        let mut st = self.st();
        if st.min_replicas.is_none() || !st.servers[idx].alive {
            return;
        }
        let group = st.servers[idx].group;
        let master = st.groups[group].master;
        let following = st.servers[master].streams.contains_key(&idx);
        if following && st.servers[master].alive && self.net.reachable(idx, master) {
            st.servers[idx].last_ack_ms = self.rec.now_us() / 1000;
        }
    }

    /// The masters' and replicas' indices of `group` (the sentinels' view).
    pub fn group(&self, group: usize) -> (usize, Vec<usize>) {
        let st = self.st();
        (st.groups[group].master, st.groups[group].replicas.clone())
    }

    /// Groups in the deployment.
    pub fn groups(&self) -> usize {
        self.st().groups.len()
    }

    /// Whether server `idx` is running, and the replication offset it has applied.
    pub fn server_state(&self, idx: usize) -> (bool, u64) {
        let st = self.st();
        (st.servers[idx].alive, st.servers[idx].applied)
    }

    /// Sentinel's failover: replica `new` becomes master of `group` (`REPLICAOF NO ONE`), the
    /// other replicas follow it, and the old master is left as it is: if it is alive behind a
    /// partition it still believes it is the master and accepts writes from the clients that
    /// reach it, until [`Cluster::demote`].
    pub fn switch_master(&self, group: usize, new: usize) -> (String, String) {
        let mut st = self.st();
        let old = st.replicaof_no_one(group, new);
        // The replicas no longer follow the old master.
        st.servers[old].streams.clear();
        (st.servers[old].name.clone(), st.servers[new].name.clone())
    }

    /// The sentinels reach the old master `idx` again and turn it into a replica of its group's
    /// master: what it granted while cut off is gone (a full resync replaces its dataset; here it
    /// restarts from an empty one and follows the new master's stream from now on).
    pub fn demote(&self, idx: usize) -> String {
        let mut st = self.st();
        st.demote_to_replica(idx);
        let name = st.servers[idx].name.clone();
        drop(st);
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!(
                    "{name} demoted to a replica (+convert-to-slave): its dataset is replaced"
                ),
            },
        );
        name
    }
}
