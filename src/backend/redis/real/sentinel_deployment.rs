//! Redis Sentinel on real processes: the masters, their replicas and `sentinels` sentinels of a
//! Sentinel scenario, every one reached only through its link proxy (`link_proxy.rs`), so the
//! scenario's partitions cut the links they name, the sentinels' links included.
//!
//! What runs, per master group `m` (named `group-<m>` in the sentinels' `monitor` lines):
//! - `redis-<m>` and its replicas: `redis-server` on 127.0.0.1, sending from their node address
//!   (`bind-source-addr`) and announcing their proxy (`replica-announce-ip/port`); replicas
//!   follow the master's proxy; `min-replicas-to-write` / `min-replicas-max-lag` on all of them,
//!   since a promoted replica must keep refusing as its master did;
//! - `sentinel-<i>`: `redis-server <dir>/sentinel.conf --sentinel`, its configuration generated:
//!   `monitor`, `down-after-milliseconds`, `failover-timeout`, `parallel-syncs 1`, its own
//!   `myid`, the replicas and the other sentinels as already known (so no run waits the two
//!   seconds of hello messages for them to meet), announcing its proxy.
//!
//! The failover is the sentinels' decision; lockcheck only crashes, restarts and partitions
//! nodes. Every process is a [`RedisServer`], so it dies with the run on every exit path.

use crate::backend::redis::real::link_proxy::LinkProxy;
use crate::backend::redis::real::network::Network;
use crate::real::servers::redis_server::{RedisServer, ServerOptions};
use crate::real::RealError;
use crate::scenario::Scenario;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the sentinels may take to see every server and each other as up. With every peer
/// given in their configuration they do within a few hundred ms; the bound only turns a broken
/// set-up into an error with the sentinels' log.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A master group as the sentinels watch it: node indices.
#[derive(Clone, Debug)]
pub(crate) struct WatchedGroup {
    /// `redis-<m>`.
    pub(crate) master: usize,
    /// `redis-<m>-replica-<r>`.
    pub(crate) replicas: Vec<usize>,
}

/// The processes of a Sentinel run and their link proxies.
pub(crate) struct SentinelDeployment {
    /// Who is who, which links are cut.
    pub(crate) net: Arc<Network>,
    /// The link proxy of every server and sentinel node.
    proxies: BTreeMap<usize, LinkProxy>,
    // Field order is drop order: the sentinels die before the servers, so none of them sees the
    // servers go and starts a failover in the logs of a finished run.
    /// The sentinels, by sentinel index.
    sentinels: Vec<RedisServer>,
    /// The live server of each server node (a crashed one is absent until it restarts).
    servers: Mutex<BTreeMap<usize, RedisServer>>,
    /// How each server node was started (a restart starts it the same way).
    opts: BTreeMap<usize, ServerOptions>,
    /// The master groups, by group index.
    pub(crate) groups: Vec<WatchedGroup>,
    /// The sentinels' node indices, by sentinel index.
    pub(crate) sentinel_nodes: Vec<usize>,
}

/// The name of master group `m` in the sentinels' configuration.
pub(crate) fn master_name(m: usize) -> String {
    format!("group-{m}")
}

/// The configured `sentinel myid` of sentinel `i`: 40 hex digits, fixed so every sentinel can be
/// told the others before they start.
fn sentinel_id(i: usize) -> String {
    format!("{:040x}", 0x10c4_c4ec_0000_u64 + i as u64)
}

impl SentinelDeployment {
    /// Starts the proxies (on `rt`), the servers and the sentinels of `s`, and waits until every
    /// sentinel sees every master, replica and other sentinel up.
    pub(crate) fn start(
        s: &Scenario,
        seed: u64,
        rt: &tokio::runtime::Runtime,
    ) -> Result<SentinelDeployment, RealError> {
        let names = s.node_names();
        let index = |n: &str| names.iter().position(|x| x == n).expect("a scenario node");
        let groups: Vec<WatchedGroup> = (0..s.redis.masters as usize)
            .map(|m| WatchedGroup {
                master: index(&format!("redis-{m}")),
                replicas: (0..s.redis.replicas)
                    .map(|r| index(&format!("redis-{m}-replica-{r}")))
                    .collect(),
            })
            .collect();
        let sentinel_nodes: Vec<usize> = (0..s.redis.sentinels as usize)
            .map(|i| index(&format!("sentinel-{i}")))
            .collect();
        let is_server: Vec<bool> = names.iter().map(|n| n.starts_with("redis-")).collect();
        let net = Arc::new(
            Network::new(
                names.clone(),
                is_server.clone(),
                s.redis.replication_lag_ms,
                seed,
            )
            .lag_later(),
        );
        let proxied: Vec<usize> = (0..names.len())
            .filter(|&i| is_server[i] || sentinel_nodes.contains(&i))
            .collect();
        let proxies = rt
            .block_on(async {
                let mut proxies = BTreeMap::new();
                for &i in &proxied {
                    proxies.insert(i, LinkProxy::start(net.clone(), i).await?);
                }
                Ok::<_, std::io::Error>(proxies)
            })
            .map_err(|e| RealError::io("starting the Sentinel run's link proxies", e))?;
        let announced = |i: usize| proxies[&i].addr();
        let mut opts = BTreeMap::new();
        let mut servers = BTreeMap::new();
        for g in &groups {
            let master = announced(g.master);
            for &node in std::iter::once(&g.master).chain(&g.replicas) {
                let mut args = vec![
                    "--protected-mode".to_string(),
                    "no".to_string(),
                    "--bind-source-addr".to_string(),
                    Network::address(node).to_string(),
                    "--replica-announce-ip".to_string(),
                    Network::address(node).to_string(),
                    "--replica-announce-port".to_string(),
                    announced(node).port().to_string(),
                ];
                if s.redis.min_replicas_to_write > 0 {
                    args.extend(min_replicas_args(s));
                }
                if node != g.master {
                    args.extend([
                        "--replicaof".to_string(),
                        master.ip().to_string(),
                        master.port().to_string(),
                    ]);
                }
                let o = ServerOptions {
                    extra_args: args,
                    ..ServerOptions::default()
                };
                let server = RedisServer::spawn(o.clone())?;
                proxies[&node].set_target(real_address(&server));
                opts.insert(node, o);
                servers.insert(node, server);
            }
            for r in &g.replicas {
                servers[r].wait_replication_up(READY_TIMEOUT)?;
            }
        }
        let mut sentinels = Vec::new();
        for (i, &node) in sentinel_nodes.iter().enumerate() {
            let config = sentinel_config(s, i, &groups, &sentinel_nodes, &announced);
            let sentinel = RedisServer::spawn(ServerOptions {
                extra_args: vec![
                    "--protected-mode".to_string(),
                    "no".to_string(),
                    "--bind-source-addr".to_string(),
                    Network::address(node).to_string(),
                ],
                sentinel_config: Some(config),
                ..ServerOptions::default()
            })?;
            proxies[&node].set_target(real_address(&sentinel));
            sentinels.push(sentinel);
        }
        let d = SentinelDeployment {
            net,
            proxies,
            sentinels,
            servers: Mutex::new(servers),
            opts,
            groups,
            sentinel_nodes,
        };
        d.wait_ready()?;
        // The replicas synced while the deployment started; replication lags from the run on.
        d.net.start_lag();
        Ok(d)
    }

    /// Waits until every sentinel sees every group's master, replicas and the other sentinels
    /// connected and not down.
    fn wait_ready(&self) -> Result<(), RealError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            loop {
                let seen = self.sees_everyone(sentinel);
                if seen.is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(RealError::Timeout {
                        what: format!(
                            "sentinel-{i} to see every server and sentinel up ({}); its log ends with:\n{}",
                            seen.err().unwrap_or_default(),
                            sentinel.log_tail()
                        ),
                        waited: READY_TIMEOUT,
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// `Ok` when `sentinel` sees everything up; else what it does not see yet.
    fn sees_everyone(&self, sentinel: &RedisServer) -> Result<(), String> {
        let mut conn = sentinel.control().map_err(|e| e.to_string())?;
        for (m, g) in self.groups.iter().enumerate() {
            let name = master_name(m);
            let mut lists: Vec<(&str, Vec<Vec<String>>, usize)> = Vec::new();
            for (what, want) in [
                ("master", 1),
                ("replicas", g.replicas.len()),
                ("sentinels", self.sentinels.len() - 1),
            ] {
                let mut cmd = redis::cmd("SENTINEL");
                cmd.arg(what).arg(&name);
                let found: Vec<Vec<String>> = if what == "master" {
                    vec![cmd.query(&mut conn).map_err(|e| e.to_string())?]
                } else {
                    cmd.query(&mut conn).map_err(|e| e.to_string())?
                };
                lists.push((what, found, want));
            }
            for (what, found, want) in lists {
                if found.len() != want {
                    return Err(format!("{name}: {} {what} of {want}", found.len()));
                }
                for fields in found {
                    let flags = field(&fields, "flags").unwrap_or_default();
                    if flags.contains("disconnected") || flags.contains("down") {
                        return Err(format!("{name}: {what} flags {flags}"));
                    }
                }
            }
        }
        Ok(())
    }

    /// The sentinels' real addresses (127.0.0.1), for lockcheck's own event subscriptions: the
    /// nemesis is not a node, and no partition hides what the sentinels decided.
    pub(crate) fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(RedisServer::port).collect()
    }

    /// Every node's announced address, by node index (servers and sentinels).
    pub(crate) fn announced(&self) -> BTreeMap<usize, SocketAddr> {
        self.proxies.iter().map(|(&i, p)| (i, p.addr())).collect()
    }

    /// The sentinels' announced addresses, by sentinel index: whom clients ask.
    pub(crate) fn sentinel_addresses(&self) -> Vec<SocketAddr> {
        self.sentinel_nodes
            .iter()
            .map(|i| self.proxies[i].addr())
            .collect()
    }

    /// What a client program needs to ask the sentinels itself: `LOCKCHECK_SENTINELS` (their
    /// announced `host:port`s, comma-separated) and `LOCKCHECK_SENTINEL_MASTERS` (each master
    /// group's name, in group order), as `docs/client-protocol.md` describes.
    pub(crate) fn client_env(&self) -> Vec<(String, String)> {
        let sentinels: Vec<String> = self
            .sentinel_addresses()
            .iter()
            .map(SocketAddr::to_string)
            .collect();
        let masters: Vec<String> = (0..self.groups.len()).map(master_name).collect();
        vec![
            ("LOCKCHECK_SENTINELS".to_string(), sentinels.join(",")),
            ("LOCKCHECK_SENTINEL_MASTERS".to_string(), masters.join(",")),
        ]
    }

    /// The `redis://` URL of group `m`'s first master (its proxy): what every client knows
    /// before the run.
    pub(crate) fn initial_master_url(&self, m: usize) -> String {
        format!("redis://{}/", self.proxies[&self.groups[m].master].addr())
    }

    /// What runs where, for the history: `redis-0 pid 123 at 127.77.0.1:40001, ...` (node
    /// names from `names`), so a reader (and a test) can tell every process of the run.
    pub(crate) fn describe(&self, names: &[String]) -> String {
        let servers = self.servers.lock().unwrap();
        let mut parts: Vec<String> = servers
            .iter()
            .map(|(&i, s)| {
                format!(
                    "{} pid {} at {}",
                    names[i],
                    s.pid(),
                    self.proxies[&i].addr()
                )
            })
            .collect();
        for (s, &i) in self.sentinels.iter().zip(&self.sentinel_nodes) {
            parts.push(format!(
                "{} pid {} at {}",
                names[i],
                s.pid(),
                self.proxies[&i].addr()
            ));
        }
        format!("Redis Sentinel run: {}", parts.join(", "))
    }

    /// `SIGKILL`s server node `node` (a crash). Whether it was running.
    pub(crate) fn crash(&self, node: usize) -> bool {
        let server = self.servers.lock().unwrap().remove(&node);
        server.map(|s| s.kill()).is_some()
    }

    /// Starts crashed server node `node` again, empty, as it was first started (a master comes
    /// back a master, until the sentinels convert it); its proxy leads to the new process.
    /// Returns its pid.
    pub(crate) fn restart(&self, node: usize) -> Result<u32, RealError> {
        let server = RedisServer::spawn(self.opts[&node].clone())?;
        let pid = server.pid();
        self.proxies[&node].set_target(real_address(&server));
        self.servers.lock().unwrap().insert(node, server);
        Ok(pid)
    }
}

/// `--min-replicas-to-write` and `--min-replicas-max-lag` from the scenario.
pub(crate) fn min_replicas_args(s: &Scenario) -> Vec<String> {
    vec![
        "--min-replicas-to-write".to_string(),
        s.redis.min_replicas_to_write.to_string(),
        "--min-replicas-max-lag".to_string(),
        s.redis.min_replicas_max_lag_s.to_string(),
    ]
}

/// Where `server`'s process listens.
fn real_address(server: &RedisServer) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], server.port()))
}

/// The value after `name` in a `SENTINEL master`-style flat field list.
fn field<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields
        .chunks(2)
        .find(|kv| kv[0] == name)
        .and_then(|kv| kv.get(1))
        .map(String::as_str)
}

/// Sentinel `i`'s configuration file.
fn sentinel_config(
    s: &Scenario,
    i: usize,
    groups: &[WatchedGroup],
    sentinel_nodes: &[usize],
    announced: &dyn Fn(usize) -> SocketAddr,
) -> String {
    let me = announced(sentinel_nodes[i]);
    let mut c = format!(
        "sentinel myid {}\nsentinel announce-ip {}\nsentinel announce-port {}\n",
        sentinel_id(i),
        me.ip(),
        me.port()
    );
    for (m, g) in groups.iter().enumerate() {
        let name = master_name(m);
        let master = announced(g.master);
        c.push_str(&format!(
            "sentinel monitor {name} {} {} {}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            master.ip(),
            master.port(),
            s.redis.quorum(),
            s.redis.down_after_ms,
            s.redis.failover_timeout_ms,
        ));
        for &r in &g.replicas {
            let a = announced(r);
            c.push_str(&format!(
                "sentinel known-replica {name} {} {}\n",
                a.ip(),
                a.port()
            ));
        }
        for (o, &node) in sentinel_nodes.iter().enumerate().filter(|&(o, _)| o != i) {
            let a = announced(node);
            c.push_str(&format!(
                "sentinel known-sentinel {name} {} {} {}\n",
                a.ip(),
                a.port(),
                sentinel_id(o)
            ));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::{field, sentinel_id};

    #[test]
    fn sentinel_ids_are_40_hex_digits_and_distinct() {
        let ids: Vec<String> = (0..9).map(sentinel_id).collect();
        for id in &ids {
            assert_eq!(id.len(), 40, "{id}");
            assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        }
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(unique, ids);
    }

    #[test]
    fn fields_of_a_sentinel_reply() {
        let f = ["name", "group-0", "flags", "master"].map(String::from);
        assert_eq!(field(&f, "flags"), Some("master"));
        assert_eq!(field(&f, "quorum"), None);
    }
}
