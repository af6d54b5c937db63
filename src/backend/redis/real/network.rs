//! The network of a real Sentinel run: which node is which address, which links a partition cuts,
//! and how long replication takes to cross a link.
//!
//! In a Sentinel run the servers, the sentinels and the replicas find each other by the addresses
//! they announce, so a partition cannot be a per-client route switch (as `blackhole.rs` does for
//! masters without replicas): the sentinels must lose the master exactly when the scenario says.
//! So every node of the scenario gets its own loopback address (`127.77.x.y`, Linux routes all of
//! `127/8` to `lo`), and every process sends from it (`bind-source-addr` for `redis-server` and
//! the sentinels, a bound socket for lockcheck's own clients). Servers and sentinels are reached
//! only through their [`crate::backend::redis::real::link_proxy::LinkProxy`], which knows the sender by its source
//! address and carries bytes only while the link between the two is not cut here.
//!
//! A cut link stalls rather than resets: TCP over a partition sees nothing arrive, and what was
//! sent is delivered when the partition heals (TCP retransmits), unless a side died meanwhile.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// The second octet of every node address: `127.77.0.0/16` is lockcheck's, by convention.
const NET: u8 = 77;

/// Node addresses per third octet (the fourth runs 1..=250).
const PER_BLOCK: usize = 250;

/// Who is who and which links are cut, for one run.
pub(crate) struct Network {
    /// Each node's name, by node index (the scenario's `node_names`).
    names: Vec<String>,
    /// Which nodes are Redis servers: bytes from a server to a server that connected to it are
    /// its replication stream, and take the replication lag.
    servers: Vec<bool>,
    /// How many partitions currently cut each directed link (from, to).
    cuts: Mutex<BTreeMap<(usize, usize), u32>>,
    /// Bumped on every change of `cuts`, so stalled links look again.
    changed: watch::Sender<u64>,
    /// `replication_lag_ms`: each chunk of a replication stream waits a draw from this range.
    lag_ms: [u64; 2],
    /// The lag draws, from the run's seed.
    rng: Mutex<SmallRng>,
    /// Whether replication lags yet. A deployment's own setup (each replica's first handshake
    /// and full sync) is not part of the run: with the lag on, a 4 s lag held a Redis Cluster's
    /// start-up for about 12 s, a round of the handshake at a time. See [`Network::lag_later`].
    lagging: AtomicBool,
}

impl Network {
    /// A network of `names` (node index = position), where `servers[i]` says whether node `i` is
    /// a Redis server.
    pub(crate) fn new(names: Vec<String>, servers: Vec<bool>, lag_ms: [u64; 2], seed: u64) -> Self {
        Network {
            names,
            servers,
            cuts: Mutex::new(BTreeMap::new()),
            changed: watch::channel(0).0,
            lag_ms,
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            lagging: AtomicBool::new(true),
        }
    }

    /// This network with its replication lag off until [`Network::start_lag`]: the replicas
    /// sync at once while the deployment starts, as a simulated run starts with them in sync,
    /// and replication lags from the run's start on (over the connections made before too).
    pub(crate) fn lag_later(self) -> Self {
        self.lagging.store(false, Ordering::Relaxed);
        self
    }

    /// Turns the replication lag on (see [`Network::lag_later`]).
    pub(crate) fn start_lag(&self) {
        self.lagging.store(true, Ordering::Relaxed);
    }

    /// Node `i`'s own address: where its proxy listens and what it sends from.
    pub(crate) fn address(i: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(
            127,
            NET,
            (i / PER_BLOCK) as u8,
            (i % PER_BLOCK + 1) as u8,
        ))
    }

    /// The node that sends from `ip`, if it is one of this run's (anything else, such as
    /// lockcheck's own control connections and client programs, is never cut).
    pub(crate) fn node_of(&self, ip: IpAddr) -> Option<usize> {
        let IpAddr::V4(v4) = ip else { return None };
        let [a, b, c, d] = v4.octets();
        let i =
            (a == 127 && b == NET && d >= 1).then(|| c as usize * PER_BLOCK + d as usize - 1)?;
        (i < self.names.len()).then_some(i)
    }

    /// Cuts (`on`) or restores the directed links `(from, to)`. Overlapping partitions count: a
    /// link carries again when the last partition that cut it heals.
    pub(crate) fn cut(&self, links: &[(usize, usize)], on: bool) {
        let mut cuts = self.cuts.lock().unwrap();
        for &link in links {
            let n = cuts.entry(link).or_insert(0);
            *n = if on { *n + 1 } else { n.saturating_sub(1) };
            if *n == 0 {
                cuts.remove(&link);
            }
        }
        drop(cuts);
        self.changed.send_modify(|g| *g += 1);
    }

    /// Whether bytes from `from` reach `to` now (an unknown sender is never cut).
    pub(crate) fn open(&self, from: Option<usize>, to: Option<usize>) -> bool {
        match (from, to) {
            (Some(a), Some(b)) => !self.cuts.lock().unwrap().contains_key(&(a, b)),
            _ => true,
        }
    }

    /// Waits until bytes from `from` reach `to`.
    pub(crate) async fn wait_open(&self, from: Option<usize>, to: Option<usize>) {
        let mut rx = self.changed.subscribe();
        while !self.open(from, to) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until the cuts change (a partition starts or heals).
    pub(crate) async fn changes(&self) {
        let mut rx = self.changed.subscribe();
        let _ = rx.changed().await;
    }

    /// Whether bytes from server `from` to `to` are a replication stream that lags: `to` is a
    /// server too (servers connect to servers only to replicate) and the lag is not zero.
    pub(crate) fn lags(&self, from: usize, to: Option<usize>) -> bool {
        to.is_some_and(|to| self.servers[from] && self.servers[to]) && self.lag_ms[1] > 0
    }

    /// The next replication lag draw (none before [`Network::start_lag`] when it lags later).
    pub(crate) fn replication_lag(&self) -> Duration {
        if !self.lagging.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let [lo, hi] = self.lag_ms;
        Duration::from_millis(self.rng.lock().unwrap().gen_range(lo..=hi))
    }
}

#[cfg(test)]
mod tests {
    use super::Network;

    fn net() -> Network {
        let names = ["redis-0", "redis-0-replica-0", "client-0", "sentinel-0"]
            .map(String::from)
            .to_vec();
        Network::new(names, vec![true, true, false, false], [5, 5], 1)
    }

    #[test]
    fn every_node_has_its_own_address_and_is_known_by_it() {
        let n = net();
        for i in 0..4 {
            assert_eq!(n.node_of(Network::address(i)), Some(i));
        }
        assert_eq!(n.node_of("127.0.0.1".parse().unwrap()), None);
        assert_eq!(
            n.node_of(Network::address(4)),
            None,
            "not a node of this run"
        );
        assert_eq!(Network::address(251).to_string(), "127.77.1.2");
    }

    #[test]
    fn overlapping_partitions_heal_when_the_last_one_does() {
        let n = net();
        n.cut(&[(0, 3)], true);
        n.cut(&[(0, 3), (3, 0)], true);
        assert!(!n.open(Some(0), Some(3)) && !n.open(Some(3), Some(0)));
        assert!(n.open(Some(3), Some(1)), "other links carry");
        assert!(n.open(None, Some(0)), "an unknown sender is never cut");
        n.cut(&[(0, 3), (3, 0)], false);
        assert!(!n.open(Some(0), Some(3)) && n.open(Some(3), Some(0)));
        n.cut(&[(0, 3)], false);
        assert!(n.open(Some(0), Some(3)));
    }

    #[test]
    fn only_server_to_server_links_lag() {
        let n = net();
        assert!(n.lags(0, Some(1)));
        assert!(!n.lags(0, Some(2)) && !n.lags(0, None) && !n.lags(3, Some(0)));
        assert_eq!(n.replication_lag().as_millis(), 5);
    }
}
