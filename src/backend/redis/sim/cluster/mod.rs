//! The simulated Redis deployment: servers (madsim nodes running [`Engine`]s), master groups with
//! their replicas, asynchronous replication, the Sentinel-like routing of clients to the current
//! master, and the network between nodes.
//!
//! Commands execute atomically when a request arrives (Redis is single-threaded), on the server's
//! own clock. Replication is by effects, with the scenario's lag, in order, from a task on the
//! master's node: when the master dies its in-flight stream dies with it, which is exactly the
//! window in which a failover loses a freshly granted lock.
//!
//! As one Redis Cluster (`[redis.cluster]`, `cluster_mode.rs`) the groups are its shards: the
//! cluster bus decides who is master and who owns which slot, and every server redirects a
//! command it must not serve before executing it.

mod cluster_mode;
mod failover;
mod migration;
mod replication;

pub use cluster_mode::{request_slot, Redirect};
pub use migration::SlotMove;

use crate::history::{EventKind, Recorder};
use crate::sim::clock::Clocks;
use crate::sim::network::Network;
use crate::simredis::{ClientId, Engine, Role};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use redis::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
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
    /// As a replica: when (true time, ms) its master last heard its `REPLCONF ACK` (replicas
    /// ack every second; `min-replicas-max-lag` is measured from it).
    last_ack_ms: u64,
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
    /// The lock key whose entries the servers watch (see [`Cluster::watch_lock_key`]).
    lock_key: Option<Vec<u8>>,
    /// When a lock's key is placed on each master group under its own name (Redlock on a
    /// Redis Cluster): each group's name of it, watched on that group's servers instead.
    placed_keys: Option<Vec<Vec<u8>>>,
    /// Per holder token (a string value or a hash field): the client whose command last made it
    /// appear on a server, so a removal names the client that created the entry it removed.
    /// Never iterated (a map with fixed hash keys, so its layout is the same every run); a
    /// `BTreeMap` of every token ever granted cost a twentieth of a lock cycle to insert into.
    creators: HashMap<Vec<u8>, u32, rustc_hash::FxBuildHasher>,
    /// The lock entry's holders before and after the command being executed (kept to reuse).
    holders: [Vec<Vec<u8>>; 2],
    /// With Redis Sentinel (`sentinel.rs`): where each client believes each group's master is,
    /// by (client node, group); empty without sentinels (clients follow the group's master).
    routes: BTreeMap<(usize, usize), usize>,
    /// The sentinels' node indices; empty without sentinels.
    sentinel_nodes: Vec<usize>,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (ms), when set.
    min_replicas: Option<(u32, u64)>,
    /// As one Redis Cluster (`[redis.cluster]`): the bus and the redirects.
    redis_cluster: Option<cluster_mode::ClusterMode>,
    /// The node that drives the bus, once started.
    bus_node: Option<NodeId>,
}

/// Topology parameters: the scenario's `[redis]` table as the cluster needs it.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Independent master groups (Redlock's N); one for every other lock.
    pub masters: u32,
    /// Replicas per master, each fed asynchronously: the reason a failover can lose a lock.
    pub replicas: u32,
    /// The range a replicated write's delay is drawn from, so a failover can land inside it.
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
    /// Pub/sub subscriber connections: where each one's messages go (see `sim::subscription`).
    subscribers: Arc<Mutex<BTreeMap<ClientId, Subscriber>>>,
}

/// A subscriber connection's node and its inbox.
#[derive(Clone)]
pub struct Subscriber {
    /// The subscriber's node index, so a published message pays that link's latency and cut.
    pub node: usize,
    /// Where the delivered RESP push frames go.
    pub inbox: futures::channel::mpsc::UnboundedSender<Vec<u8>>,
}

/// Why a request got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// The server's node is down (crashed, not yet restarted): a real client sees a refusal.
    Dead,
    /// A partition cuts the link: a real client sees nothing until its timeout.
    Partitioned,
    /// The server is still working on it (a blocking `WAIT`) when the client stops waiting.
    NoReplyInTime,
}

impl Cluster {
    /// The madsim nodes of the servers, so a finished run can kill them and free their tasks.
    pub fn madsim_nodes(&self) -> Vec<NodeId> {
        let state = self.st();
        let servers = state.servers.iter().filter_map(|s| s.madsim);
        servers.chain(state.bus_node).collect()
    }

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
                lock_key: None,
                placed_keys: None,
                creators: HashMap::default(),
                holders: Default::default(),
                routes: BTreeMap::new(),
                sentinel_nodes: Vec::new(),
                min_replicas: None,
                redis_cluster: None,
                bus_node: None,
            })),
            clocks,
            net,
            rec,
            lag_us: [
                cfg.replication_lag_ms[0] * 1000,
                cfg.replication_lag_ms[1] * 1000,
            ],
            subscribers: Arc::default(),
        }
    }

    /// Creates one madsim node per server, each running its expiry sweep.
    pub fn start(&self) {
        let n = self.st().servers.len();
        for idx in 0..n {
            let name = self.st().servers[idx].name.clone();
            let me = self.clone();
            let node = Handle::current()
                .create_node()
                .name(name)
                .init(move || {
                    let me = me.clone();
                    async move { me.server_main(idx).await }
                })
                .build();
            self.st().servers[idx].madsim = Some(node.id());
        }
        let bus = self.start_bus();
        self.st().bus_node = bus;
    }

    /// The server's own background work: the active-expiry sweep, as `serverCron` does.
    async fn server_main(self, idx: usize) {
        let mut ticks = 0u64;
        loop {
            madsim::time::sleep(EXPIRE_SWEEP).await;
            ticks += 1;
            // A replica acks its master every second (what `min-replicas-max-lag` measures).
            if ticks.is_multiple_of(10) {
                self.ack(idx);
            }
            let now = self.clocks.now_ms(idx);
            let mut st = self.st();
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

    /// Makes every server compare the lock entry under `key` before and after each client
    /// command and record an [`EventKind::EntryRemoved`] when a command removed a holder's entry:
    /// who removed whose entry is then what the server did, not something a checker infers from
    /// the order of replies. Clients are the nodes after the servers (`Scenario::node_names`).
    pub fn watch_lock_key(&self, key: &str) {
        self.st().lock_key = Some(key.as_bytes().to_vec());
        self.rec.record(
            "servers",
            EventKind::LockEntriesWatched {
                key: key.to_string(),
                placed_within_us: 0,
            },
        );
    }

    /// Watches each master group's own name of the lock key (`placed[g]` on group `g`'s
    /// servers) instead of one name everywhere: Redlock's instances on a Redis Cluster.
    pub fn watch_placed_keys(&self, placed: &[String]) {
        self.st().placed_keys = Some(placed.iter().map(|k| k.as_bytes().to_vec()).collect());
    }

    /// The number of servers (they occupy node indices `0..n`).
    pub fn server_count(&self) -> usize {
        self.st().servers.len()
    }

    /// Server index by name.
    pub fn server_index(&self, name: &str) -> Option<usize> {
        let st = self.st();
        st.servers.iter().position(|s| s.name == name)
    }

    /// The server a client of `group` is routed to now (Sentinel's answer).
    pub fn master_of(&self, group: usize) -> usize {
        self.st().groups[group].master
    }

    /// The master of `group` as the client on node `client_node` knows it: the group's master,
    /// or with Sentinel the one the sentinels named when the client could last reach one.
    pub fn master_for(&self, client_node: usize, group: usize) -> usize {
        let mut st = self.st();
        let master = st.groups[group].master;
        if st.sentinel_nodes.is_empty() {
            return master;
        }
        let asks = st
            .sentinel_nodes
            .iter()
            .any(|&s| self.net.reachable(client_node, s) && self.net.reachable(s, client_node));
        if asks {
            st.routes.insert((client_node, group), master);
            master
        } else {
            *st.routes.get(&(client_node, group)).unwrap_or(&master)
        }
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
        let mut st = self.st();
        if !st.servers[idx].alive {
            return Err(Unreachable::Dead);
        }
        if !self.net.reachable(client_node, idx) {
            return Err(Unreachable::Partitioned);
        }
        st.commands += 1;
        let now = self.clocks.now_ms(idx);
        // A cluster node redirects before it checks anything else (`processCommand`).
        if let Some(refusal) = Cluster::cluster_refusal(&mut st, idx, conn, args, now) {
            return Ok(refusal);
        }
        if st.min_replicas.is_some()
            && crate::simredis::may_write(args)
            && !self.enough_replicas(&st, idx)
        {
            return Ok(crate::simredis::noreplicas());
        }
        if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"INFO"))
        {
            return Ok(info_reply(&st, idx));
        }
        // Lent out for the command (not cloned or allocated: this runs for every command),
        // unless the key has a name of its own on each group (then cloned).
        let group = st.servers[idx].group;
        let placed = st.placed_keys.as_ref().map(|k| k[group].clone());
        let lent = placed.is_none();
        let key = placed.or_else(|| st.lock_key.take());
        let [mut before, mut after] = std::mem::take(&mut st.holders);
        if let Some(k) = &key {
            st.servers[idx]
                .engine
                .live_holders_into(k, now, &mut before);
        }
        // Effects are copied only for a master that has replicas to send them to.
        let wanted = !st.servers[idx].streams.is_empty();
        st.servers[idx].engine.set_effects_wanted(wanted);
        let version = st.servers[idx].engine.data_version();
        let out = st.servers[idx].engine.execute(now, conn, args);
        // A command that changed no key (a refused SET NX, a GET) left the holders as they were.
        if let (Some(k), true) = (&key, st.servers[idx].engine.data_version() != version) {
            st.servers[idx].engine.live_holders_into(k, now, &mut after);
            if before != after {
                self.record_entry_changes(&mut st, idx, client_node, &before, &after);
            }
        }
        if lent {
            st.lock_key = key;
        }
        st.holders = [before, after];
        if out.wrote {
            let offset = self.replicate(&mut st, idx, out.effects);
            st.last_write.insert((idx, conn), offset);
        }
        if !out.messages.is_empty() {
            self.publish(&st, idx, out.messages);
        }
        Ok(out.reply)
    }

    /// Records the holders a client command removed from server `idx`, and remembers which
    /// client created the holders that appeared.
    fn record_entry_changes(
        &self,
        st: &mut State,
        idx: usize,
        client_node: usize,
        before: &[Vec<u8>],
        after: &[Vec<u8>],
    ) {
        let Some(by_client) = client_node.checked_sub(st.servers.len()) else {
            return;
        };
        let by_client = by_client as u32;
        for gone in before.iter().filter(|h| !after.contains(h)) {
            self.rec.record(
                &st.servers[idx].name,
                EventKind::EntryRemoved {
                    by_client,
                    owner: String::from_utf8_lossy(gone).into_owned(),
                    owner_client: st.creators.get(gone).copied(),
                },
            );
        }
        for new in after.iter().filter(|h| !before.contains(h)) {
            st.creators.insert(new.clone(), by_client);
        }
    }

    /// Registers a subscriber connection's inbox (before it sends SUBSCRIBE).
    pub fn register_subscriber(&self, id: ClientId, sub: Subscriber) {
        self.subscribers.lock().unwrap().insert(id, sub);
    }

    /// The connection closed: the server forgets its subscriptions.
    pub fn drop_subscriber(&self, id: ClientId) {
        self.subscribers.lock().unwrap().remove(&id);
        let mut st = self.st();
        for s in st.servers.iter_mut() {
            s.engine.disconnect(id);
        }
    }

    /// Sends pub/sub deliveries from server `idx` to their subscribers over the network: each
    /// arrives after one latency if the link is up then, and dies with the server if it dies first.
    fn publish(&self, st: &State, idx: usize, messages: Vec<(ClientId, Vec<u8>, Vec<u8>)>) {
        let Some(node) = st.servers[idx]
            .madsim
            .and_then(|id| Handle::current().get_node(id))
        else {
            return;
        };
        let subs = self.subscribers.lock().unwrap();
        for (client, _channel, payload) in messages {
            let Some(sub) = subs.get(&client).cloned() else {
                continue;
            };
            let me = self.clone();
            // Timed from the publishing command's arrival (it may run later, see `sim::wire`).
            let due = crate::sim::wire::now() + self.net.latency();
            node.spawn(async move {
                madsim::time::sleep_until(due).await;
                if me.net.reachable(idx, sub.node) {
                    let _ = sub.inbox.unbounded_send(payload);
                }
            });
        }
    }

    /// For `WAIT`: how many replicas of `idx` have applied connection `conn`'s last write.
    pub fn acked_replicas(&self, idx: usize, conn: ClientId) -> i64 {
        let st = self.st();
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

    /// The cluster's state, after every message on the wire that is due has run (see
    /// `sim::wire`): every read or change of a server goes through here.
    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        crate::sim::wire::settle();
        self.state.lock().unwrap()
    }

    /// Kills server `name`'s process: its memory and its outgoing replication are gone.
    pub fn kill(&self, idx: usize) {
        let id = {
            let mut st = self.st();
            let s = &mut st.servers[idx];
            s.alive = false;
            for stream in s.streams.values_mut() {
                stream.queue.clear();
            }
            // Its subscriber connections close with it (the process's sockets are gone): each
            // subscriber's stream ends, as a real client's pub/sub connection does, so it can
            // subscribe again elsewhere instead of waiting on a dead server for ever.
            let mut subs = self.subscribers.lock().unwrap();
            subs.retain(|id, _| !s.engine.is_subscriber(*id));
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
        // The cluster bus hears of it now, not at its next tick.
        self.bus_tick();
    }

    /// Restarts a crashed server with an empty dataset (no persistence).
    pub fn restart_empty(&self, idx: usize) {
        let id = {
            let mut st = self.st();
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
        // A restarted node answers from its own fresh state (cluster state fail, its writable
        // delay), not from what the bus knew of it before it died.
        self.bus_tick();
    }

    /// Promotes the first live replica of `group` to master (`REPLICAOF NO ONE` by Sentinel) and
    /// routes clients to it. The promoted server keeps whatever it had received.
    pub fn promote(&self, group: usize) -> Option<String> {
        let promoted = {
            let mut st = self.st();
            let new = st.groups[group]
                .replicas
                .iter()
                .copied()
                .find(|&r| st.servers[r].alive)?;
            let old = st.replicaof_no_one(group, new);
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
        self.st().commands
    }

    /// Server `idx`'s name (`redis-0`, `redis-0-replica-0`), as the history and scenarios say it.
    pub fn name(&self, idx: usize) -> String {
        self.st().servers[idx].name.clone()
    }

    /// Live keys on server `idx` (for tests and reports).
    pub fn dbsize(&self, idx: usize) -> usize {
        let now = self.clocks.now_ms(idx);
        self.st().servers[idx].engine.dbsize(now)
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
            last_ack_ms: 0,
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
