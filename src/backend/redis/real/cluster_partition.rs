//! Network partitions of a real Redis Cluster, cluster bus included, with the mechanism Sentinel
//! runs use (`network.rs`, `link_proxy.rs`): no new one.
//!
//! A cluster started with `ClusterOptions::partitionable` gives every node its own loopback
//! address (`Network::address`) and two link proxies there, one for its client port and one for
//! its bus port. The node sends from its address (`bind-source-addr`, which Redis 7.0 also uses
//! for cluster-bus connections) and announces its proxies (`cluster-announce-ip`,
//! `cluster-announce-port`, `cluster-announce-bus-port`), so every byte between two nodes (gossip,
//! failover votes, replication) crosses a proxy that knows the sender by its address, and a cut
//! link holds it. lockcheck's own connections come from `127.0.0.1`, an address of no node, and
//! are never cut: a test still reaches a master cut off in the minority.
//!
//! A restarted node keeps its announced addresses (its proxies lead to its new ports), so the
//! others find it where they last knew it.

use crate::backend::redis::real::cluster::RedisCluster;
use crate::backend::redis::real::link_proxy::LinkProxy;
use crate::backend::redis::real::network::Network;
use crate::real::RealError;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The proxies of a partitionable cluster and the cuts in force.
pub(crate) struct BusLinks {
    /// The bus proxies' network: cut by partitions, never lagging.
    pub(crate) net: Arc<Network>,
    /// The client-port proxies' network: cut with the bus, and lagging replication streams
    /// (`ClusterOptions::replication_lag_ms`).
    data: Arc<Network>,
    /// Each node's (client, bus) link proxy.
    proxies: BTreeMap<usize, (LinkProxy, LinkProxy)>,
    /// The links each partition in force cut, to heal them.
    pub(crate) cuts: Mutex<Vec<Vec<(usize, usize)>>>,
    /// Runs the proxies; shut down (without waiting) after the nodes are dead.
    rt: Option<tokio::runtime::Runtime>,
}

impl BusLinks {
    /// Starts two proxies per node of `names` on a runtime of their own; replication through the
    /// client-port proxies lags by `lag_ms`.
    pub(crate) fn start(names: &[String], lag_ms: [u64; 2]) -> Result<BusLinks, RealError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lockcheck-cluster-links")
            .enable_all()
            .build()
            .map_err(|e| RealError::io("starting the cluster's link proxies", e))?;
        let net = Arc::new(Network::new(
            names.to_vec(),
            vec![true; names.len()],
            [0, 0],
            0,
        ));
        let data =
            Arc::new(Network::new(names.to_vec(), vec![true; names.len()], lag_ms, 0).lag_later());
        let proxies = rt
            .block_on(async {
                let mut proxies = BTreeMap::new();
                for node in 0..names.len() {
                    let client = LinkProxy::start(data.clone(), node).await?;
                    let bus = LinkProxy::start(net.clone(), node).await?;
                    proxies.insert(node, (client, bus));
                }
                Ok::<_, std::io::Error>(proxies)
            })
            .map_err(|e| RealError::io("starting the cluster's link proxies", e))?;
        Ok(BusLinks {
            net,
            data,
            proxies,
            cuts: Mutex::new(Vec::new()),
            rt: Some(rt),
        })
    }

    /// The `redis-server` arguments that make node `node` send from its address and announce its
    /// proxies.
    pub(crate) fn args(&self, node: usize) -> Vec<String> {
        let (ip, port, bus) = self.announced(node);
        [
            "--bind-source-addr",
            &ip.to_string(),
            "--cluster-announce-ip",
            &ip.to_string(),
            "--cluster-announce-port",
            &port.to_string(),
            "--cluster-announce-bus-port",
            &bus.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// Cuts (`on`) or heals the directed `links`, bus and client ports alike.
    fn cut(&self, links: &[(usize, usize)], on: bool) {
        self.net.cut(links, on);
        self.data.cut(links, on);
    }

    /// Turns the replication lag on, once the cluster has formed (`BusLinks::start` holds it
    /// back: each replica's first sync is set-up, not part of the run).
    pub(crate) fn start_lag(&self) {
        self.data.start_lag();
    }

    /// Node `node`'s announced address: its ip, client proxy port and bus proxy port.
    pub(crate) fn announced(&self, node: usize) -> (IpAddr, u16, u16) {
        let (client, bus) = &self.proxies[&node];
        (
            Network::address(node),
            client.addr().port(),
            bus.addr().port(),
        )
    }

    /// Leads node `node`'s proxies to its process's ports.
    pub(crate) fn lead_to(&self, node: usize, port: u16, bus: u16) {
        let (client, bus_proxy) = &self.proxies[&node];
        client.set_target(SocketAddr::from(([127, 0, 0, 1], port)));
        bus_proxy.set_target(SocketAddr::from(([127, 0, 0, 1], bus)));
    }
}

impl Drop for BusLinks {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            // Not `drop(rt)`: that blocks, and panics when the cluster is dropped in async code.
            rt.shutdown_background();
        }
    }
}

impl RedisCluster {
    /// Cuts every link, both ways, between the nodes of `side` and all the others: gossip,
    /// votes and replication stall as over a real partition (lockcheck's own connections still
    /// reach every node). Needs a cluster started with
    /// [`crate::backend::redis::real::ClusterOptions::partitionable`].
    pub fn partition(&self, side: &[usize]) -> Result<(), RealError> {
        let links = self.bus_links()?;
        let mut cut = Vec::new();
        for &a in side {
            for b in (0..self.len()).filter(|b| !side.contains(b)) {
                cut.extend([(a, b), (b, a)]);
            }
        }
        links.cut(&cut, true);
        links.cuts.lock().unwrap().push(cut);
        Ok(())
    }

    /// Cuts (`on`) the directed links `links` (node pairs), or heals them: links cut twice heal
    /// when both are healed. Needs a partitionable cluster, as [`RedisCluster::partition`].
    pub fn cut_links(&self, links: &[(usize, usize)], on: bool) -> Result<(), RealError> {
        self.bus_links()?.cut(links, on);
        Ok(())
    }

    /// The link proxies, which only a partitionable cluster has.
    fn bus_links(&self) -> Result<&BusLinks, RealError> {
        self.links.as_ref().ok_or_else(|| RealError::InvalidOption {
            what: "a partition needs a cluster started with ClusterOptions::partitionable".into(),
        })
    }

    /// Heals every partition in force.
    pub fn heal(&self) {
        if let Some(links) = &self.links {
            for cut in links.cuts.lock().unwrap().drain(..) {
                links.cut(&cut, false);
            }
        }
    }
}
