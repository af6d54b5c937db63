//! Redis Sentinel in simulation: sentinels that watch each master, agree it is down, elect a
//! leader, promote the replica with the best replication offset, and tell clients the new master
//! (`Cluster::master_for`), as Redis Sentinel does (https://redis.io/docs/latest/operate/oss_and_stack/management/sentinel/).
//!
//! What is modelled, on the true-time grid of a 100 ms tick (Sentinel's own timer runs at 10 Hz):
//! - a sentinel that has not reached a master for `down_after_ms` sees it subjectively down
//!   (`+sdown`); reaching it again clears that;
//! - when `quorum` sentinels that can talk to each other see it down, it is objectively down
//!   (`+odown`); a failover needs a leader voted by a majority of all sentinels: the lowest-index
//!   sentinel that sees the master down and reaches a majority of them;
//! - the leader promotes, [`PROMOTION_MS`] later, the live replica it reaches with the highest
//!   applied offset (`+switch-master`); the other replicas follow the new master;
//! - the old master is not told while it is cut off: behind a partition it keeps accepting writes
//!   from the clients that still reach it. When a sentinel reaches it again it is demoted
//!   (`+convert-to-slave`) and what it granted meanwhile is gone.
//! - clients ask the sentinels: a client that reaches a sentinel follows the new master at once
//!   (as with `+switch-master` on its subscription); one that reaches none keeps the master it knew.
//!
//! What differs from real Sentinel: pings are continuous rather than once per second, the
//! election is decided without epochs and vote messages, and a demoted master's dataset is
//! emptied rather than copied from the new master (docs/sentinel.md).

use crate::backend::redis::sim::cluster::Cluster;
use crate::history::{EventKind, Recorder};
use crate::sim::network::Network;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use std::time::Duration;

/// Sentinel's timer period.
const TICK_MS: u64 = 100;

/// From the sentinels seeing the master down to `+switch-master`: the `+odown` agreement, the
/// election, `REPLICAOF NO ONE` and the leader seeing the replica report itself as master (its
/// `INFO` every second during a failover). Measured on real sentinels (Redis 7.0.15, three of
/// them, `lockcheck run --real`, docs/sentinel.md "On real servers"): first `+sdown` to first
/// `+switch-master` took 1209, 1221 and 1258 ms on average over 6, 10 and 6 crashes with
/// `down_after_ms` 500, 1000 and 2000; the 100 ms tick adds up to one tick on top.
pub const PROMOTION_MS: u64 = 1_200;

/// The sentinels' settings: the scenario's `[redis]` keys.
#[derive(Clone, Debug)]
pub struct SentinelConfig {
    /// Node index of each sentinel (`sentinel-<i>` in `Scenario::node_names`).
    pub nodes: Vec<usize>,
    /// `down-after-milliseconds`.
    pub down_after_ms: u64,
    /// Sentinels that must agree a master is down.
    pub quorum: u32,
    /// `failover-timeout`: after a failover that found no replica, the next try waits this long.
    pub failover_timeout_ms: u64,
}

/// What the sentinels know of one master group.
#[derive(Clone, Default)]
struct GroupWatch {
    /// Per sentinel: when it last reached the master (true ms).
    last_ok: Vec<u64>,
    /// Per sentinel: whether it sees the master subjectively down (noted once).
    sdown: Vec<bool>,
    /// Whether `+odown` was noted for this outage.
    odown: bool,
    /// A failover decided: when to promote, and by which sentinel.
    promote_at: Option<(u64, usize)>,
    /// No failover before this time (after one that found no replica).
    quiet_until: u64,
    /// Old masters replaced while cut off, to demote when a sentinel reaches them.
    replaced: Vec<usize>,
}

/// The sentinels of one run, driven by one task on their own madsim node.
pub struct Sentinels {
    cfg: SentinelConfig,
    cluster: Cluster,
    net: Network,
    rec: Recorder,
    watch: Vec<GroupWatch>,
}

impl Sentinels {
    /// Starts the sentinels: clients route through them from now on. Returns their madsim node
    /// (kill it when the run is over). Call inside the run's runtime.
    pub fn start(cfg: SentinelConfig, cluster: Cluster, net: Network, rec: Recorder) -> NodeId {
        cluster.use_sentinels(cfg.nodes.clone());
        let n = cfg.nodes.len();
        let watch = (0..cluster.groups())
            .map(|_| GroupWatch {
                last_ok: vec![0; n],
                sdown: vec![false; n],
                ..GroupWatch::default()
            })
            .collect();
        let mut me = Sentinels {
            cfg,
            cluster,
            net,
            rec,
            watch,
        };
        let node = Handle::current().create_node().name("sentinels").build();
        node.spawn(async move {
            loop {
                madsim::time::sleep(Duration::from_millis(TICK_MS)).await;
                me.tick();
            }
        });
        node.id()
    }

    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// Whether sentinel `s` and node `n` reach each other.
    fn talks(&self, s: usize, n: usize) -> bool {
        let sn = self.cfg.nodes[s];
        self.net.reachable(sn, n) && self.net.reachable(n, sn)
    }

    /// One timer tick of every sentinel, for every group.
    fn tick(&mut self) {
        let now = self.rec.now_us() / 1000;
        for g in 0..self.watch.len() {
            self.watch_group(g, now);
        }
    }

    fn watch_group(&mut self, g: usize, now: u64) {
        let (master, replicas) = self.cluster.group(g);
        let name = |c: &Cluster, i: usize| c.name(i);
        let (alive, _) = self.cluster.server_state(master);
        let sentinels = self.cfg.nodes.len();
        for s in 0..sentinels {
            if alive && self.talks(s, master) {
                self.watch[g].last_ok[s] = now;
                self.watch[g].sdown[s] = false;
            } else if now.saturating_sub(self.watch[g].last_ok[s]) > self.cfg.down_after_ms
                && !self.watch[g].sdown[s]
            {
                self.watch[g].sdown[s] = true;
                self.note(format!(
                    "sentinel-{s}: +sdown master {}",
                    name(&self.cluster, master)
                ));
            }
        }
        // Demote replaced masters a sentinel reaches again.
        let replaced = std::mem::take(&mut self.watch[g].replaced);
        for old in replaced {
            let (up, _) = self.cluster.server_state(old);
            if up && (0..sentinels).any(|s| self.talks(s, old)) {
                self.cluster.demote(old);
            } else {
                self.watch[g].replaced.push(old);
            }
        }
        if let Some((at, leader)) = self.watch[g].promote_at {
            if now >= at {
                self.watch[g].promote_at = None;
                self.promote(g, master, &replicas, leader, now);
            }
            return;
        }
        // Objectively down: a quorum of sentinels that can talk to each other see it down.
        let majority = sentinels / 2 + 1;
        let leader = (0..sentinels).find(|&s| {
            let w = &self.watch[g];
            let agree = (0..sentinels)
                .filter(|&o| w.sdown[o] && (o == s || self.talks(s, self.cfg.nodes[o])))
                .count();
            let reach = (0..sentinels)
                .filter(|&o| o == s || self.talks(s, self.cfg.nodes[o]))
                .count();
            w.sdown[s] && agree >= self.cfg.quorum as usize && reach >= majority
        });
        let Some(leader) = leader else {
            if self.watch[g].sdown.iter().all(|d| !d) {
                self.watch[g].odown = false;
            }
            return;
        };
        if !self.watch[g].odown {
            self.watch[g].odown = true;
            self.note(format!(
                "sentinel-{leader}: +odown master {} #quorum {}",
                name(&self.cluster, master),
                self.cfg.quorum
            ));
        }
        if now >= self.watch[g].quiet_until {
            self.watch[g].promote_at = Some((now + PROMOTION_MS, leader));
        }
    }

    /// The leader promotes the replica it reaches with the best offset.
    fn promote(&mut self, g: usize, master: usize, replicas: &[usize], leader: usize, now: u64) {
        let best = replicas
            .iter()
            .copied()
            .filter(|&r| self.cluster.server_state(r).0 && self.talks(leader, r))
            .max_by_key(|&r| (self.cluster.server_state(r).1, std::cmp::Reverse(r)));
        let Some(new) = best else {
            self.note(format!(
                "sentinel-{leader}: -failover-abort-no-good-slave master {}",
                self.cluster.name(master)
            ));
            self.watch[g].quiet_until = now + self.cfg.failover_timeout_ms;
            return;
        };
        let (old, new_name) = self.cluster.switch_master(g, new);
        self.note(format!(
            "sentinel-{leader}: +switch-master {old} -> {new_name}"
        ));
        let w = &mut self.watch[g];
        w.replaced.push(master);
        w.odown = false;
        // The new master starts with a clean record.
        w.last_ok.iter_mut().for_each(|t| *t = now);
        w.sdown.iter_mut().for_each(|d| *d = false);
    }
}
