//! The simulated Redis deployment: servers (madsim nodes running [`Engine`]s), master groups with
//! their replicas, asynchronous replication, the Sentinel-like routing of clients to the current
//! master, and the network between nodes.
//!
//! Commands execute atomically when a request arrives (Redis is single-threaded), on the server's
//! own clock. Replication is by effects, with the scenario's lag, in order, from a task on the
//! master's node: when the master dies its in-flight stream dies with it, which is exactly the
//! window in which a failover loses a freshly granted lock.

use super::clock::Clocks;
use super::network::Network;
use crate::history::{EventKind, Recorder};
use crate::simredis::{ClientId, Engine, Role};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use redis::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a master runs its active-expiry sweep (Redis's default `hz 10`).
const EXPIRE_SWEEP: Duration = Duration::from_millis(100);

/// One Redis server.
struct Server {
    name: String,
    /// Index into the clocks and the network (the node order of the scenario).
    node: usize,
    madsim: Option<NodeId>,
    alive: bool,
    engine: Engine,
    group: usize,
    /// Replication offset: count of effect batches this server produced as a master.
    offset: u64,
    /// As a replica: the master offset it has applied.
    applied: u64,
    /// As a master: its outgoing replication streams, by replica server index.
    streams: BTreeMap<usize, Stream>,
}

/// An ordered replication stream to one replica.
#[derive(Default)]
struct Stream {
    queue: VecDeque<Batch>,
    /// Delivery times are non-decreasing so the stream stays in order.
    last_deliver_us: u64,
}

struct Batch {
    deliver_us: u64,
    offset: u64,
    cmds: Vec<Vec<Vec<u8>>>,
}

/// A master and its replicas, as Sentinel sees them.
#[derive(Clone, Debug)]
struct Group {
    master: usize,
    replicas: Vec<usize>,
}

struct State {
    servers: Vec<Server>,
    groups: Vec<Group>,
    /// Per (server, connection): the offset of that connection's last write, for WAIT.
    last_write: BTreeMap<(usize, ClientId), u64>,
    /// Commands executed, over all servers (for benchmarks and reports).
    commands: u64,
}

/// Topology parameters.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub masters: u32,
    pub replicas: u32,
    pub replication_lag_ms: [u64; 2],
}

/// The shared handle to the simulated deployment.
#[derive(Clone)]
pub struct Cluster {
    state: Arc<Mutex<State>>,
    clocks: Clocks,
    net: Network,
    rec: Recorder,
    lag_us: [u64; 2],
}

/// Why a request got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    Dead,
    Partitioned,
    /// The server is still working on it (a blocking `WAIT`) when the client stops waiting.
    NoReplyInTime,
}

impl Cluster {
    /// Lays out the servers; node indices follow `Scenario::node_names` (masters, each followed by
    /// its replicas). Call [`Cluster::start`] inside the runtime to create their madsim nodes.
    pub fn new(cfg: &ClusterConfig, clocks: Clocks, net: Network, rec: Recorder) -> Cluster {
        let mut servers = Vec::new();
        let mut groups = Vec::new();
        for m in 0..cfg.masters as usize {
            let master = servers.len();
            servers.push(Server::new(format!("redis-{m}"), master, m, Role::Master));
            let mut replicas = Vec::new();
            for r in 0..cfg.replicas {
                let idx = servers.len();
                servers.push(Server::new(
                    format!("redis-{m}-replica-{r}"),
                    idx,
                    m,
                    Role::Replica,
                ));
                replicas.push(idx);
            }
            for &r in &replicas {
                servers[master].streams.insert(r, Stream::default());
            }
            groups.push(Group { master, replicas });
        }
        Cluster {
            state: Arc::new(Mutex::new(State {
                servers,
                groups,
                last_write: BTreeMap::new(),
                commands: 0,
            })),
            clocks,
            net,
            rec,
            lag_us: [
                cfg.replication_lag_ms[0] * 1000,
                cfg.replication_lag_ms[1] * 1000,
            ],
        }
    }

    /// Creates one madsim node per server, each running its expiry sweep.
    pub fn start(&self) {
        let n = self.state.lock().unwrap().servers.len();
        for idx in 0..n {
            let name = self.state.lock().unwrap().servers[idx].name.clone();
            let me = self.clone();
            let node = Handle::current()
                .create_node()
                .name(name)
                .init(move || {
                    let me = me.clone();
                    async move { me.server_main(idx).await }
                })
                .build();
            self.state.lock().unwrap().servers[idx].madsim = Some(node.id());
        }
    }

    /// The server's own background work: the active-expiry sweep, as `serverCron` does.
    async fn server_main(self, idx: usize) {
        loop {
            madsim::time::sleep(EXPIRE_SWEEP).await;
            let now = self.clocks.now_ms(idx);
            let mut st = self.state.lock().unwrap();
            let s = &mut st.servers[idx];
            if !s.alive {
                continue;
            }
            let effects = s.engine.active_expire(now);
            if !effects.is_empty() {
                self.replicate(&mut st, idx, effects);
            }
        }
    }

    /// The number of servers (they occupy node indices `0..n`).
    pub fn server_count(&self) -> usize {
        self.state.lock().unwrap().servers.len()
    }

    /// Server index by name.
    pub fn server_index(&self, name: &str) -> Option<usize> {
        let st = self.state.lock().unwrap();
        st.servers.iter().position(|s| s.name == name)
    }

    /// The server a client of `group` is routed to now (Sentinel's answer).
    pub fn master_of(&self, group: usize) -> usize {
        self.state.lock().unwrap().groups[group].master
    }

    /// Executes a request that has reached server `idx` from `client_node`.
    /// Returns `Err` when it never got there (server dead or link cut).
    pub fn execute(
        &self,
        client_node: usize,
        idx: usize,
        conn: ClientId,
        args: &[Vec<u8>],
    ) -> Result<Value, Unreachable> {
        let mut st = self.state.lock().unwrap();
        if !st.servers[idx].alive {
            return Err(Unreachable::Dead);
        }
        if !self.net.reachable(client_node, idx) {
            return Err(Unreachable::Partitioned);
        }
        st.commands += 1;
        let now = self.clocks.now_ms(idx);
        if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"INFO"))
        {
            return Ok(info_reply(&st, idx));
        }
        let out = st.servers[idx].engine.execute(now, conn, args);
        if !out.effects.is_empty() {
            let offset = self.replicate(&mut st, idx, out.effects);
            st.last_write.insert((idx, conn), offset);
        }
        Ok(out.reply)
    }

    /// For `WAIT`: how many replicas of `idx` have applied connection `conn`'s last write.
    pub fn acked_replicas(&self, idx: usize, conn: ClientId) -> i64 {
        let st = self.state.lock().unwrap();
        let target = st.last_write.get(&(idx, conn)).copied().unwrap_or(0);
        let group = &st.groups[st.servers[idx].group];
        if group.master != idx {
            return 0;
        }
        group
            .replicas
            .iter()
            .filter(|&&r| st.servers[r].alive && st.servers[r].applied >= target)
            .count() as i64
    }

    /// Whether `to` can hear from `from` right now (for replies).
    pub fn reachable(&self, from: usize, to: usize) -> bool {
        self.net.reachable(from, to)
    }

    /// Queues `effects` on every replication stream of master `idx`; returns the new offset.
    fn replicate(&self, st: &mut State, idx: usize, effects: Vec<Vec<Vec<u8>>>) -> u64 {
        let s = &mut st.servers[idx];
        s.offset += 1;
        let offset = s.offset;
        if s.streams.is_empty() {
            return offset;
        }
        let now_us = self.rec.now_us();
        let targets: Vec<usize> = s.streams.keys().copied().collect();
        for r in targets {
            let lag = lo_hi_random(self.lag_us);
            let stream = s.streams.get_mut(&r).expect("stream exists");
            let deliver_us = (now_us + lag).max(stream.last_deliver_us);
            stream.last_deliver_us = deliver_us;
            stream.queue.push_back(Batch {
                deliver_us,
                offset,
                cmds: effects.clone(),
            });
            let me = self.clone();
            let wait = Duration::from_micros(deliver_us - now_us);
            if let Some(node) = s.madsim.and_then(|id| Handle::current().get_node(id)) {
                node.spawn(async move {
                    madsim::time::sleep(wait).await;
                    me.deliver(idx, r);
                });
            }
        }
        offset
    }

    /// Applies every batch of the `master -> replica` stream that is due. A cut link holds the
    /// stream back (Redis resumes from its backlog when the link heals).
    fn deliver(&self, master: usize, replica: usize) {
        let now_us = self.rec.now_us();
        let mut st = self.state.lock().unwrap();
        if !st.servers[master].alive {
            return;
        }
        if !self.net.reachable(master, replica) {
            drop(st);
            let me = self.clone();
            madsim::task::spawn(async move {
                madsim::time::sleep(Duration::from_millis(10)).await;
                me.deliver(master, replica);
            });
            return;
        }
        let mut due = Vec::new();
        if let Some(stream) = st.servers[master].streams.get_mut(&replica) {
            while stream.queue.front().is_some_and(|b| b.deliver_us <= now_us) {
                due.push(stream.queue.pop_front().expect("front exists"));
            }
        }
        let now = self.clocks.now_ms(replica);
        let r = &mut st.servers[replica];
        if !r.alive {
            return;
        }
        for b in due {
            r.engine.apply_replicated(now, &b.cmds);
            r.applied = r.applied.max(b.offset);
        }
    }

    /// Kills server `name`'s process: its memory and its outgoing replication are gone.
    pub fn kill(&self, idx: usize) {
        let id = {
            let mut st = self.state.lock().unwrap();
            let s = &mut st.servers[idx];
            s.alive = false;
            for stream in s.streams.values_mut() {
                stream.queue.clear();
            }
            s.madsim
        };
        if let Some(id) = id {
            Handle::current().kill(id);
        }
        let name = self.name(idx);
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("{name} killed"),
            },
        );
    }

    /// Restarts a crashed server with an empty dataset (no persistence).
    pub fn restart_empty(&self, idx: usize) {
        let id = {
            let mut st = self.state.lock().unwrap();
            let s = &mut st.servers[idx];
            let role = s.engine.role();
            s.engine = Engine::new(role);
            s.alive = true;
            s.offset = 0;
            s.applied = 0;
            for stream in s.streams.values_mut() {
                *stream = Stream::default();
            }
            s.madsim
        };
        if let Some(id) = id {
            Handle::current().restart(id);
        }
        let name = self.name(idx);
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("{name} restarted empty"),
            },
        );
    }

    /// Promotes the first live replica of `group` to master (`REPLICAOF NO ONE` by Sentinel) and
    /// routes clients to it. The promoted server keeps whatever it had received.
    pub fn promote(&self, group: usize) -> Option<String> {
        let promoted = {
            let mut st = self.state.lock().unwrap();
            let g = st.groups[group].clone();
            let new = g.replicas.iter().copied().find(|&r| st.servers[r].alive)?;
            st.servers[new].engine.set_role(Role::Master);
            let rest: Vec<usize> = g.replicas.iter().copied().filter(|&r| r != new).collect();
            st.servers[new].streams = rest.iter().map(|&r| (r, Stream::default())).collect();
            st.servers[new].offset = 0;
            for &r in &rest {
                st.servers[r].applied = 0;
            }
            let old = g.master;
            st.groups[group] = Group {
                master: new,
                replicas: rest,
            };
            // The old master, if it comes back, is a replica of the new one (Sentinel reconfigures it).
            if st.servers[old].alive {
                st.servers[old].engine.set_role(Role::Replica);
            }
            st.servers[new].name.clone()
        };
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("{promoted} promoted to master of group {group}"),
            },
        );
        Some(promoted)
    }

    /// Commands executed so far, over all servers.
    pub fn commands(&self) -> u64 {
        self.state.lock().unwrap().commands
    }

    pub fn name(&self, idx: usize) -> String {
        self.state.lock().unwrap().servers[idx].name.clone()
    }

    /// Live keys on server `idx` (for tests and reports).
    pub fn dbsize(&self, idx: usize) -> usize {
        let now = self.clocks.now_ms(idx);
        self.state.lock().unwrap().servers[idx].engine.dbsize(now)
    }
}

impl Server {
    fn new(name: String, node: usize, group: usize, role: Role) -> Server {
        Server {
            name,
            node,
            madsim: None,
            alive: true,
            engine: Engine::new(role),
            group,
            offset: 0,
            applied: 0,
            streams: BTreeMap::new(),
        }
    }
}

/// `INFO replication`, with the fields lock libraries and operators look at.
fn info_reply(st: &State, idx: usize) -> Value {
    let s = &st.servers[idx];
    let g = &st.groups[s.group];
    let mut text = String::from("# Replication\r\n");
    if g.master == idx {
        let live: Vec<&usize> = g
            .replicas
            .iter()
            .filter(|&&r| st.servers[r].alive)
            .collect();
        text.push_str("role:master\r\n");
        text.push_str(&format!("connected_slaves:{}\r\n", live.len()));
        for (i, &&r) in live.iter().enumerate() {
            text.push_str(&format!(
                "slave{i}:ip=127.0.0.1,port={},state=online,offset={},lag=0\r\n",
                6380 + st.servers[r].node,
                st.servers[r].applied
            ));
        }
        text.push_str(&format!("master_repl_offset:{}\r\n", s.offset));
    } else {
        let m = &st.servers[g.master];
        text.push_str("role:slave\r\n");
        text.push_str(&format!(
            "master_host:127.0.0.1\r\nmaster_port:{}\r\n",
            6380 + m.node
        ));
        let up = if m.alive { "up" } else { "down" };
        text.push_str(&format!("master_link_status:{up}\r\n"));
        text.push_str(&format!("slave_repl_offset:{}\r\n", s.applied));
    }
    Value::BulkString(text.into_bytes())
}

/// Uniform in `[lo, hi]` from madsim's seeded RNG.
pub(crate) fn lo_hi_random([lo, hi]: [u64; 2]) -> u64 {
    if hi <= lo {
        lo
    } else {
        lo + madsim::rand::random::<u64>() % (hi - lo + 1)
    }
}
