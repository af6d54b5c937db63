//! Redis Cluster on real processes: `masters` masters with `replicas` replicas each, every one a
//! `redis-server --cluster-enabled yes` that lockcheck spawns, so it dies with the run on every
//! exit path (panic, Ctrl-C, drop) as every other server does.
//!
//! Each node has a directory of its own (its `nodes.conf`) that outlives its process: a node
//! crashed and restarted reads it back, comes back with its cluster id and its last view, and
//! rejoins as the cluster now has it (a crashed master whose replica was promoted returns as
//! that replica's replica), which is what a restarted node does in production. Its client port
//! and its bus port are new after a restart; the others learn them from its first ping.
//!
//! The bus port is chosen like the client port (`free_port`) and given with `cluster-port`,
//! rather than the default client port + 10000: a free client port above 55535 (common in the
//! ephemeral range) has no bus port at +10000 at all, and the port 10000 above a free one is not
//! known to be free.
//!
//! **Why the cluster is formed with `CLUSTER` commands and not `redis-cli --cluster create`.**
//! The layout is lockcheck's to decide, so tests and the simulation can name nodes by their
//! initial role: master `m` gets the `m`-th slice of the slots and replicas
//! `redis-<m>-replica-<r>`, always. `redis-cli --cluster create` places replicas by its own
//! anti-affinity rule (all nodes share one host here), prints a plan rather than returning one,
//! and is one more binary to find. The commands are the ones it sends: `CLUSTER ADDSLOTSRANGE`
//! on each master, `CLUSTER SET-CONFIG-EPOCH` with a distinct epoch each (so no epoch collision
//! has to be resolved before the first failover), `CLUSTER MEET`, then `CLUSTER REPLICATE` on
//! each replica once it knows its master.
//!
//! Replica migration is off (`cluster-allow-replica-migration no`): a master left without a
//! replica after a failover would otherwise take one from another master with more, and a test
//! that crashes a master must find the replicas where it put them.

pub use crate::backend::redis::engine::cluster::topology::ClusterRole;
use crate::backend::redis::real::cluster_nodes::{
    initial_slots, parse_cluster_nodes, NodeLine, SlotRange, SLOTS,
};
use crate::backend::redis::real::cluster_partition::BusLinks;
use crate::real::servers::child::{free_port, info_field, make_temp_dir, remove_temp_dir};
use crate::real::servers::redis_server::{RedisServer, ServerOptions};
use crate::real::RealError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One node as another sees it: its index, its master's (a replica's), the slots it serves.
type Seen = (usize, Option<usize>, Vec<SlotRange>);

/// How to start a [`RedisCluster`].
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Masters, at least 3 (a failover needs the votes of a majority of masters, so with fewer a
    /// crashed master leaves too few voters).
    pub masters: usize,
    /// Replicas per master, at least 1 (the promotion target).
    pub replicas: usize,
    /// `cluster-node-timeout`: how long a node goes unanswered before it is suspected (`fail?`).
    pub node_timeout: Duration,
    /// How long forming the cluster (and [`RedisCluster::wait_converged`] by default) may take
    /// before it is an error naming what did not converge.
    pub ready_timeout: Duration,
    /// Every node behind link proxies, cluster bus included, so that
    /// [`RedisCluster::partition`] can cut links (`cluster_partition.rs`).
    pub partitionable: bool,
    /// With `partitionable`: each chunk of a replication stream (a master's bytes to a replica
    /// on its client port) waits a draw from this range, ms; the cluster bus never lags. `[0,
    /// 0]`: no lag.
    pub replication_lag_ms: [u64; 2],
    /// More `redis-server` arguments for every node (`--min-replicas-to-write 1`, ...). A node
    /// restarted after a crash gets them again.
    pub node_args: Vec<String>,
}

impl Default for ClusterOptions {
    /// Three masters with one replica each, a 500 ms node timeout, 20 s to form.
    fn default() -> Self {
        ClusterOptions {
            masters: 3,
            replicas: 1,
            node_timeout: Duration::from_millis(500),
            ready_timeout: Duration::from_secs(20),
            partitionable: false,
            replication_lag_ms: [0, 0],
            node_args: Vec::new(),
        }
    }
}

/// A Redis Cluster that lockcheck started and owns. Nodes are numbered: masters `0..masters`
/// (`redis-<m>`), then the replicas of master 0, of master 1, ... (`redis-<m>-replica-<r>`);
/// a node keeps its number (and its name, from its initial role) across failovers and restarts.
pub struct RedisCluster {
    pub(crate) options: ClusterOptions,
    /// Node names, by node index.
    names: Vec<String>,
    /// Cluster ids, by node index (fixed: each node's `nodes.conf` survives its restarts).
    ids: Vec<String>,
    /// The live server of each node (a crashed one is absent until it restarts).
    pub(crate) servers: Mutex<BTreeMap<usize, RedisServer>>,
    /// Each node's own directory, holding its `nodes.conf`.
    dirs: Vec<PathBuf>,
    /// Each node's bus port (`cluster-port`) since its last start.
    bus_ports: Mutex<BTreeMap<usize, u16>>,
    /// The link proxies of a partitionable cluster (dropped after the nodes are dead).
    pub(crate) links: Option<BusLinks>,
}

impl RedisCluster {
    /// Spawns the nodes, forms the cluster and waits until it has converged (see
    /// [`RedisCluster::wait_converged`]). Blocking (about a second); from async code use
    /// `spawn_blocking`.
    pub fn start(options: ClusterOptions) -> Result<RedisCluster, RealError> {
        if options.masters < 3 || options.replicas < 1 {
            return Err(RealError::InvalidOption {
                what: format!(
                    "a Redis Cluster needs at least 3 masters and 1 replica each (asked: {} masters, {} replicas)",
                    options.masters, options.replicas
                ),
            });
        }
        let mut names: Vec<String> = (0..options.masters).map(|m| format!("redis-{m}")).collect();
        for m in 0..options.masters {
            names.extend((0..options.replicas).map(|r| format!("redis-{m}-replica-{r}")));
        }
        let mut dirs = Vec::new();
        let links = match options.partitionable {
            true => Some(BusLinks::start(&names, options.replication_lag_ms)?),
            false => None,
        };
        let mut cluster = RedisCluster {
            options,
            names,
            ids: Vec::new(),
            servers: Mutex::new(BTreeMap::new()),
            dirs: Vec::new(),
            bus_ports: Mutex::new(BTreeMap::new()),
            links,
        };
        for _ in 0..cluster.names.len() {
            dirs.push(make_temp_dir("cluster")?);
            // From here on the cluster's Drop removes every directory made so far.
            cluster.dirs = dirs.clone();
        }
        for node in 0..cluster.names.len() {
            let server = cluster.spawn_node(node)?;
            cluster.servers.lock().unwrap().insert(node, server);
        }
        cluster.ids = (0..cluster.names.len())
            .map(|n| {
                let mut conn = cluster.control(n)?;
                redis::cmd("CLUSTER")
                    .arg("MYID")
                    .query::<String>(&mut conn)
                    .map_err(|e| {
                        RealError::redis(format!("CLUSTER MYID on {}", cluster.names[n]), e)
                    })
            })
            .collect::<Result<_, _>>()?;
        cluster.form()?;
        cluster.wait_converged(cluster.options.ready_timeout)?;
        if let Some(links) = &cluster.links {
            links.start_lag();
        }
        Ok(cluster)
    }

    /// Starts node `node`'s `redis-server` in cluster mode, on a new client port and bus port,
    /// with its `nodes.conf` in its own directory.
    pub(crate) fn spawn_node(&self, node: usize) -> Result<RedisServer, RealError> {
        let mut last = None;
        // The bus port is probed like the client port, so it can be taken in between; only that
        // failure is worth another port.
        for _attempt in 0..5 {
            let bus = free_port()?;
            let mut args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &self.dirs[node].join("nodes.conf").to_string_lossy(),
                "--cluster-node-timeout",
                &self.options.node_timeout.as_millis().to_string(),
                "--cluster-port",
                &bus.to_string(),
                "--cluster-allow-replica-migration",
                "no",
            ]
            .map(String::from)
            .to_vec();
            if let Some(links) = &self.links {
                args.extend(links.args(node));
            }
            args.extend(self.options.node_args.iter().cloned());
            match RedisServer::spawn(ServerOptions {
                extra_args: args,
                ..ServerOptions::default()
            }) {
                Ok(server) => {
                    self.bus_ports.lock().unwrap().insert(node, bus);
                    if let Some(links) = &self.links {
                        links.lead_to(node, server.port(), bus);
                    }
                    return Ok(server);
                }
                Err(e @ RealError::ExitedEarly { .. }) if e.to_string().contains("in use") => {
                    last = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// Assigns the slots and epochs, meets every node, then makes each replica follow its master.
    fn form(&self) -> Result<(), RealError> {
        let masters = self.options.masters;
        for m in 0..masters {
            let SlotRange { first, last } = initial_slots(m, masters);
            self.command(m, "CLUSTER SET-CONFIG-EPOCH", |c| {
                c.arg("SET-CONFIG-EPOCH").arg(m + 1);
            })?;
            self.command(m, "CLUSTER ADDSLOTSRANGE", |c| {
                c.arg("ADDSLOTSRANGE").arg(first).arg(last);
            })?;
        }
        // Every node meets every other, rather than one meeting all and gossip introducing the
        // rest: gossip carries a few nodes per ping, so that took a second longer.
        // A node behind proxies is met at its proxies, the address it announces.
        let addresses: Vec<(String, u16, u16)> = (0..self.names.len())
            .map(|n| match &self.links {
                Some(links) => {
                    let (ip, port, bus) = links.announced(n);
                    (ip.to_string(), port, bus)
                }
                None => {
                    let (port, bus) = self.ports(n).expect("every node runs while forming");
                    ("127.0.0.1".to_string(), port, bus)
                }
            })
            .collect();
        for n in 0..self.names.len() {
            for (other, (ip, port, bus)) in addresses.iter().enumerate().filter(|&(o, _)| o > n) {
                self.command(n, "CLUSTER MEET", |c| {
                    c.arg("MEET").arg(ip).arg(port).arg(bus);
                })
                .map_err(|e| match e {
                    RealError::Redis { context, source } => RealError::Redis {
                        context: format!("{context} {}", self.names[other]),
                        source,
                    },
                    e => e,
                })?;
            }
        }
        // A replica can follow only a master it knows.
        self.wait_until(
            self.options.ready_timeout,
            "every node to know every other",
            || self.everyone_known(),
        )?;
        for m in 0..masters {
            for r in self.initial_replicas(m) {
                self.command(r, "CLUSTER REPLICATE", |c| {
                    c.arg("REPLICATE").arg(&self.ids[m]);
                })?;
            }
        }
        Ok(())
    }

    /// `Ok` when every node knows every other, out of handshake; else who does not.
    fn everyone_known(&self) -> Result<(), String> {
        for n in 0..self.names.len() {
            let view = self.view(n).map_err(|e| e.to_string())?;
            let known = view.iter().filter(|l| !l.is_unknown()).count();
            if known != self.names.len() {
                return Err(format!(
                    "{} knows {known} of {} nodes",
                    self.names[n],
                    self.names.len()
                ));
            }
        }
        Ok(())
    }

    /// Waits until the cluster has converged, or errs naming what has not:
    /// - every node runs, says `cluster_state:ok` and knows every node;
    /// - every node sees every other connected and neither suspected nor failed;
    /// - every node agrees with every other on each node's role (and a replica's master) and on
    ///   the owner of each slot, and all 16384 slots are owned;
    /// - every replica's replication link is up (`master_link_status:up`).
    pub fn wait_converged(&self, timeout: Duration) -> Result<(), RealError> {
        self.wait_until(timeout, "the cluster to converge", || self.converged())
    }

    fn converged(&self) -> Result<(), String> {
        let live = self.live_nodes();
        if live.len() != self.names.len() {
            let down: Vec<&str> = (0..self.names.len())
                .filter(|n| !live.contains(n))
                .map(|n| self.names[n].as_str())
                .collect();
            return Err(format!("not running: {}", down.join(", ")));
        }
        let mut agreed: Option<(usize, Vec<Seen>)> = None;
        for &n in &live {
            let name = &self.names[n];
            let info = self.cluster_info(n).map_err(|e| e.to_string())?;
            if info_field(&info, "cluster_state") != Some("ok") {
                return Err(format!("{name}: cluster_state is not ok"));
            }
            let view = self.view(n).map_err(|e| e.to_string())?;
            let mut roles = Vec::new();
            for line in &view {
                let who = self.node_of_id(&line.id).ok_or_else(|| {
                    format!(
                        "{name} knows a node that is not this cluster's: {}",
                        line.id
                    )
                })?;
                if line.is_unknown() || line.is_suspected() || line.is_failed() {
                    return Err(format!(
                        "{name} sees {} as {}",
                        self.names[who],
                        line.flags.join(",")
                    ));
                }
                if !line.is_myself() && !line.connected {
                    return Err(format!("{name}'s bus link to {} is down", self.names[who]));
                }
                let master = line.master.as_deref().and_then(|id| self.node_of_id(id));
                let mut slots = line.slots.clone();
                slots.sort();
                roles.push((who, master, slots));
            }
            roles.sort();
            if roles.len() != self.names.len() {
                return Err(format!(
                    "{name} knows {} of {} nodes",
                    roles.len(),
                    self.names.len()
                ));
            }
            let owned: usize = roles
                .iter()
                .flat_map(|(_, _, s)| s.iter().map(SlotRange::len))
                .sum();
            if owned != usize::from(SLOTS) {
                return Err(format!("{name} sees {owned} of {SLOTS} slots owned"));
            }
            match &agreed {
                None => agreed = Some((n, roles)),
                Some((first, theirs)) if *theirs != roles => {
                    return Err(format!(
                        "{name} and {} disagree on roles or slots",
                        self.names[*first]
                    ))
                }
                Some(_) => {}
            }
        }
        for &n in &live {
            if let ClusterRole::Replica { of } = self.role(n).map_err(|e| e.to_string())? {
                let info = self.info_replication(n).map_err(|e| e.to_string())?;
                if info_field(&info, "master_link_status") != Some("up") {
                    return Err(format!(
                        "{}'s replication link to {} is not up",
                        self.names[n], self.names[of]
                    ));
                }
            }
        }
        Ok(())
    }

    /// Polls `check` until it is `Ok`; at `timeout` the error names `what` and the last reason.
    pub(crate) fn wait_until<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut() -> Result<T, String>,
    ) -> Result<T, RealError> {
        let deadline = Instant::now() + timeout;
        loop {
            match check() {
                Ok(t) => return Ok(t),
                Err(reason) if Instant::now() >= deadline => {
                    return Err(RealError::Timeout {
                        what: format!("{what} (last: {reason})"),
                        waited: timeout,
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// The options it was started with.
    pub fn options(&self) -> &ClusterOptions {
        &self.options
    }

    /// How many nodes it has (running or not).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Never true: a cluster has at least six nodes (for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Node `node`'s name, from its initial role: `redis-<m>` or `redis-<m>-replica-<r>`.
    pub fn name(&self, node: usize) -> &str {
        &self.names[node]
    }

    /// Node `node`'s cluster id.
    pub fn id(&self, node: usize) -> &str {
        &self.ids[node]
    }

    /// The node index with cluster id `id`.
    pub fn node_of_id(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|x| x == id)
    }

    /// The nodes that were master `m`'s replicas when the cluster formed.
    pub fn initial_replicas(&self, m: usize) -> Vec<usize> {
        let r = self.options.replicas;
        (0..r).map(|i| self.options.masters + m * r + i).collect()
    }

    /// The nodes whose process runs now.
    pub fn live_nodes(&self) -> Vec<usize> {
        self.servers.lock().unwrap().keys().copied().collect()
    }

    /// Whether node `node`'s process runs now.
    pub fn is_running(&self, node: usize) -> bool {
        self.servers.lock().unwrap().contains_key(&node)
    }

    /// Node `node`'s client port and bus port on 127.0.0.1, while it runs (a partitionable
    /// cluster's nodes announce their proxies' instead, which no partition cuts from here).
    pub fn ports(&self, node: usize) -> Option<(u16, u16)> {
        let port = self.port(node)?;
        let bus = self.bus_ports.lock().unwrap().get(&node).copied()?;
        Some((port, bus))
    }

    /// Node `node`'s client port (127.0.0.1), while it runs.
    pub fn port(&self, node: usize) -> Option<u16> {
        self.servers
            .lock()
            .unwrap()
            .get(&node)
            .map(RedisServer::port)
    }

    /// Node `node`'s `redis://127.0.0.1:P/` URL, while it runs.
    pub fn url(&self, node: usize) -> Option<String> {
        self.port(node).map(|p| format!("redis://127.0.0.1:{p}/"))
    }

    /// Node `node`'s process id, while it runs.
    pub fn pid(&self, node: usize) -> Option<u32> {
        self.servers
            .lock()
            .unwrap()
            .get(&node)
            .map(RedisServer::pid)
    }

    /// The last lines of node `node`'s log, while it runs (for error messages).
    pub fn log_tail(&self, node: usize) -> String {
        self.servers
            .lock()
            .unwrap()
            .get(&node)
            .map_or_else(|| "(not running)".to_string(), RedisServer::log_tail)
    }

    /// A control connection to node `node` (one-second timeouts).
    pub fn control(&self, node: usize) -> Result<redis::Connection, RealError> {
        match self.servers.lock().unwrap().get(&node) {
            Some(server) => server.control(),
            None => Err(RealError::Timeout {
                what: format!("{} to run (it is crashed)", self.names[node]),
                waited: Duration::ZERO,
            }),
        }
    }

    /// Sends `CLUSTER <what build adds>` to node `node`, expecting `OK`.
    fn command(
        &self,
        node: usize,
        what: &str,
        build: impl FnOnce(&mut redis::Cmd),
    ) -> Result<(), RealError> {
        let mut conn = self.control(node)?;
        let mut cmd = redis::cmd("CLUSTER");
        build(&mut cmd);
        cmd.query::<()>(&mut conn)
            .map_err(|e| RealError::redis(format!("{what} on {}", self.names[node]), e))
    }

    /// What node `node` believes about the cluster: its `CLUSTER NODES`, line by line.
    pub fn view(&self, node: usize) -> Result<Vec<NodeLine>, RealError> {
        let mut conn = self.control(node)?;
        let reply: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut conn)
            .map_err(|e| RealError::redis(format!("CLUSTER NODES on {}", self.names[node]), e))?;
        parse_cluster_nodes(&reply).map_err(|what| RealError::InvalidOption { what })
    }

    /// Node `node`'s `CLUSTER INFO` reply (`cluster_state:ok`, `cluster_current_epoch:…`).
    pub fn cluster_info(&self, node: usize) -> Result<String, RealError> {
        let mut conn = self.control(node)?;
        redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut conn)
            .map_err(|e| RealError::redis(format!("CLUSTER INFO on {}", self.names[node]), e))
    }

    fn info_replication(&self, node: usize) -> Result<String, RealError> {
        let mut conn = self.control(node)?;
        redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .map_err(|e| RealError::redis(format!("INFO replication on {}", self.names[node]), e))
    }

    /// Node `node`'s own line of its view: what it says it is.
    fn myself(&self, node: usize) -> Result<NodeLine, RealError> {
        self.view(node)?
            .into_iter()
            .find(NodeLine::is_myself)
            .ok_or_else(|| RealError::InvalidOption {
                what: format!("{}'s CLUSTER NODES has no myself line", self.names[node]),
            })
    }

    /// Node `node`'s role, in its own word (its `myself` line).
    pub fn role(&self, node: usize) -> Result<ClusterRole, RealError> {
        let me = self.myself(node)?;
        match me.master.as_deref() {
            Some(id) if me.is_replica() => Ok(ClusterRole::Replica {
                of: self
                    .node_of_id(id)
                    .ok_or_else(|| RealError::InvalidOption {
                        what: format!("{} follows an unknown node {id}", self.names[node]),
                    })?,
            }),
            _ => Ok(ClusterRole::Master),
        }
    }

    /// The slots master `node` serves, in its own word (empty for a replica).
    pub fn slot_ranges(&self, node: usize) -> Result<Vec<SlotRange>, RealError> {
        Ok(self.myself(node)?.slots)
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a running node).
    pub fn key_slot(&self, key: &str) -> Result<u16, RealError> {
        let node = self.any_live()?;
        let mut conn = self.control(node)?;
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .map_err(|e| RealError::redis("CLUSTER KEYSLOT", e))
    }

    fn any_live(&self) -> Result<usize, RealError> {
        self.live_nodes()
            .first()
            .copied()
            .ok_or_else(|| RealError::Unsupported("every node of the cluster is down".into()))
    }

    /// The running node that serves `slot` now: of those that say they are master and own it
    /// (two can, briefly, after a failover), the one with the newer configuration epoch, the claim
    /// the cluster keeps.
    pub fn master_of_slot(&self, slot: u16) -> Result<usize, RealError> {
        let mut best: Option<(u64, usize)> = None;
        for n in self.live_nodes() {
            let Ok(me) = self.myself(n) else { continue };
            if me.is_master() && me.owns(slot) && best.is_none_or(|(e, _)| me.config_epoch > e) {
                best = Some((me.config_epoch, n));
            }
        }
        best.map(|(_, n)| n).ok_or_else(|| RealError::Timeout {
            what: format!("a running master that serves slot {slot}"),
            waited: Duration::ZERO,
        })
    }

    /// The running node that serves `key`'s slot now.
    pub fn master_of_key(&self, key: &str) -> Result<usize, RealError> {
        self.master_of_slot(self.key_slot(key)?)
    }

    /// The running nodes that say they replicate `master`.
    pub fn replicas_of(&self, master: usize) -> Result<Vec<usize>, RealError> {
        let mut out = Vec::new();
        for n in self.live_nodes() {
            if self.role(n)? == (ClusterRole::Replica { of: master }) {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// The running nodes that say they are masters.
    pub fn masters(&self) -> Result<Vec<usize>, RealError> {
        let mut out = Vec::new();
        for n in self.live_nodes() {
            if self.role(n)? == ClusterRole::Master {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// What runs where: `redis-0 pid 123 port 40001 master, ...`, so a reader (and a test) can
    /// tell every process of the cluster.
    pub fn describe(&self) -> String {
        let servers = self.servers.lock().unwrap();
        let parts: Vec<String> = servers
            .iter()
            .map(|(&n, s)| format!("{} pid {} port {}", self.names[n], s.pid(), s.port()))
            .collect();
        format!("Redis Cluster: {}", parts.join(", "))
    }
}

impl Drop for RedisCluster {
    /// Kills every node (their own Drop), then removes the nodes' directories.
    fn drop(&mut self) {
        let servers = std::mem::take(&mut *self.servers.lock().unwrap_or_else(|p| p.into_inner()));
        drop(servers);
        for dir in &self.dirs {
            remove_temp_dir(dir);
        }
    }
}
