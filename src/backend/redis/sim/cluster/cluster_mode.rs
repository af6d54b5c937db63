//! The simulated deployment as one Redis Cluster (`[redis.cluster]`): the cluster bus
//! (`engine::cluster::Bus`) decides who is master and who owns which slot, every server answers
//! `MOVED`, `ASK`, `TRYAGAIN` or `CLUSTERDOWN` before it executes a command it must not serve
//! (`engine::cluster::redirect`), and a promotion the bus decides becomes the group's new master
//! here, its replication included. lockcheck promotes nothing itself: the masters' failure
//! reports and the replica's election do, on the bus's timing (measured against real clusters,
//! docs/redis-cluster.md).
//!
//! The bus is driven from the world every [`TICK`]: which servers run comes from the crashes,
//! which pairs can talk from the network's partitions (a link cut either way is cut for the bus,
//! whose TCP connection needs both ways), and each server's replication offset (the bus ranks
//! replicas by it). A server's index here is its node index (`redis-<m>` followed by its
//! replicas); the bus numbers masters first, then master 0's replicas, master 1's, ... as the
//! spawned cluster does, so the two are mapped both ways.

use super::{Cluster, State};
use crate::backend::redis::engine::cluster::{
    decide, initial_slots, key_slot, Bus, BusConfig, BusEvent, BusRecord, ClientFlags, ClusterRole,
    Decision, ManualFailover, Reach,
};
use crate::fault::ClusterFailoverForm;
use crate::history::EventKind;
use crate::simredis::{error_reply, error_text, ClientId};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use redis::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How often the world hands the bus the time, the crashes and the cuts. The bus's own events
/// (its cron every 100 ms, messages 1 ms on the wire) happen at their own times; a tick only
/// makes them visible, so a promotion shows at most this late.
pub const TICK: Duration = Duration::from_millis(5);

/// How long a cluster with every node up may take to form before that is a bug (it takes about
/// 2 s: `engine::cluster::bus::WRITABLE_DELAY_MS`).
const FORM_LIMIT_MS: u64 = 60_000;

/// The port every simulated node's address names: nodes are told apart by their names.
const PORT: u16 = 6379;

/// The cluster part of the deployment's state.
pub(super) struct ClusterMode {
    pub(super) bus: Bus,
    /// The bus's time at the run's time 0: when the cluster had formed.
    formed_ms: u64,
    /// Bus node of each server, by server index.
    pub(super) bus_of: Vec<usize>,
    /// Server index of each bus node.
    pub(super) server_of: Vec<usize>,
    /// Each connection's `ASKING`/`READONLY` flags.
    flags: BTreeMap<ClientId, ClientFlags>,
    /// Nodes whose failure is already in the history (once per failure, not once per master
    /// that learns of it).
    failed: BTreeSet<usize>,
}

/// How the deployment's servers map onto the bus's nodes: masters `0..masters`, then each
/// master's replicas in order, from servers laid out as each master followed by its replicas.
fn bus_numbering(masters: usize, replicas: usize) -> Vec<usize> {
    let mut bus_of = Vec::new();
    for m in 0..masters {
        bus_of.push(m);
        for r in 0..replicas {
            bus_of.push(masters + m * replicas + r);
        }
    }
    bus_of
}

impl ClusterMode {
    pub(super) fn new(masters: usize, replicas: usize, node_timeout_ms: u64) -> ClusterMode {
        let bus_of = bus_numbering(masters, replicas);
        let mut server_of = vec![0; bus_of.len()];
        for (server, &b) in bus_of.iter().enumerate() {
            server_of[b] = server;
        }
        let config = BusConfig {
            masters,
            replicas,
            node_timeout_ms,
            latency_ms: 1,
        };
        let mut bus = Bus::new(config, &mut madsim::rand::thread_rng());
        // As the spawned cluster is, the simulated one is formed before the run starts: the
        // run's time 0 is the first tick at which every node's cluster state is ok.
        let reach = Reach::all(bus.len());
        let mut formed = 0;
        while (0..bus.len()).any(|n| !bus.state_ok(n)) && formed < FORM_LIMIT_MS {
            formed += TICK.as_millis() as u64;
            bus.advance(formed, &reach);
        }
        assert!(
            formed < FORM_LIMIT_MS,
            "a simulated cluster with every node up forms"
        );
        ClusterMode {
            bus,
            formed_ms: formed,
            bus_of,
            server_of,
            flags: BTreeMap::new(),
            failed: BTreeSet::new(),
        }
    }
}

/// Where a client's next request for a slot goes, and what became of the last one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED`: the slot is `to`'s; ask it from now on.
    Moved {
        /// The slot.
        slot: u16,
        /// The server that owns it.
        to: usize,
    },
    /// `ASK`: send this one request to `to`, after `ASKING`.
    Ask {
        /// The migration's target server.
        to: usize,
    },
    /// `TRYAGAIN` or `CLUSTERDOWN`: wait, then send it again.
    Wait,
}

impl Cluster {
    /// Makes the deployment one Redis Cluster (before [`Cluster::start`]).
    pub fn enable_redis_cluster(&self, masters: usize, replicas: usize, node_timeout_ms: u64) {
        self.st().redis_cluster = Some(ClusterMode::new(masters, replicas, node_timeout_ms));
    }

    /// Whether the deployment is a Redis Cluster.
    pub fn is_redis_cluster(&self) -> bool {
        self.st().redis_cluster.is_some()
    }

    /// Starts the node that hands the bus the world's state every [`TICK`], when the deployment
    /// is a Redis Cluster.
    pub(super) fn start_bus(&self) -> Option<NodeId> {
        self.st().redis_cluster.as_ref()?;
        let me = self.clone();
        let node = Handle::current()
            .create_node()
            .name("cluster-bus")
            .init(move || {
                let me = me.clone();
                async move {
                    loop {
                        madsim::time::sleep(TICK).await;
                        me.bus_tick();
                    }
                }
            })
            .build();
        Some(node.id())
    }

    /// One step of the bus: up to now, with the servers that run, the links that are up and
    /// the replication offsets as they are now; what it decided takes effect here.
    pub(super) fn bus_tick(&self) {
        let now_ms = self.rec.now_us() / 1000;
        let records = {
            let mut st = self.st();
            let st = &mut *st;
            let Some(mode) = st.redis_cluster.as_mut() else {
                return;
            };
            let n = mode.server_of.len();
            let mut reach = Reach::all(n);
            for b in 0..n {
                let s = &st.servers[mode.server_of[b]];
                if !s.alive {
                    reach.crash(b);
                }
                let offset = match st.groups[s.group].master == mode.server_of[b] {
                    true => s.offset,
                    false => s.applied,
                };
                mode.bus.set_offset(b, offset);
            }
            for a in 0..n {
                for b in a + 1..n {
                    let (x, y) = (mode.server_of[a], mode.server_of[b]);
                    if !(self.net.reachable(x, y) && self.net.reachable(y, x)) {
                        reach.cut(a, b);
                    }
                }
            }
            mode.bus.advance(mode.formed_ms + now_ms, &reach)
        };
        for record in records {
            self.take_effect(record);
        }
    }

    /// What a bus event does to the deployment, and what the history says of it (the phrases
    /// the real cluster's watcher records too, which the timeline's server lanes read).
    fn take_effect(&self, record: BusRecord) {
        let note = {
            let mut st = self.st();
            let st = &mut *st;
            let Some(mode) = st.redis_cluster.as_mut() else {
                return;
            };
            let name = |b: usize| st.servers[mode.server_of[b]].name.clone();
            match record.event {
                BusEvent::Failed { node, .. } if mode.failed.insert(node) => Some(format!(
                    "cluster: {} marked failed by a majority of masters",
                    name(node)
                )),
                BusEvent::Cleared { node, .. } => {
                    mode.failed.remove(&node);
                    None
                }
                BusEvent::Promoted { node, epoch, .. } => {
                    let new = mode.server_of[node];
                    let group = st.servers[new].group;
                    let text = format!(
                        "{} promoted to master of group {group} (cluster election, epoch {epoch})",
                        name(node)
                    );
                    if st.groups[group].master != new {
                        let old = st.replicaof_no_one(group, new);
                        st.servers[old].streams.clear();
                    }
                    Some(text)
                }
                BusEvent::Follows { node, master } => {
                    let idx = mode.server_of[node];
                    let group = st.servers[idx].group;
                    let follows = name(master);
                    let text = format!("{} demoted to a replica (follows {follows})", name(node));
                    // Only an old master changes here: a replica of the group already follows
                    // the group's master since the promotion.
                    let old_master =
                        st.groups[group].master != idx && !st.groups[group].replicas.contains(&idx);
                    match old_master {
                        true => {
                            st.demote_to_replica(idx);
                            Some(text)
                        }
                        false => None,
                    }
                }
                BusEvent::State { node, ok } => {
                    let master = mode.bus.role(node) == ClusterRole::Master;
                    master.then(|| {
                        let state = if ok { "ok" } else { "fail" };
                        format!("cluster: {} cluster state {state}", name(node))
                    })
                }
                _ => None,
            }
        };
        if let Some(what) = note {
            self.rec.record("nemesis", EventKind::Fault { what });
        }
    }

    /// `CLUSTER FAILOVER` in `form`, sent to the first replica of master group `group` as the
    /// group was laid out (`redis-<group>-replica-0`); the bus carries it out.
    pub fn manual_failover(&self, group: usize, form: ClusterFailoverForm) -> Result<(), String> {
        let name = format!("redis-{group}-replica-0");
        let done = {
            let mut st = self.st();
            let st = &mut *st;
            let Some(mode) = st.redis_cluster.as_mut() else {
                return Err("CLUSTER FAILOVER: the deployment is no Redis Cluster".into());
            };
            let idx = st.servers.iter().position(|s| s.name == name);
            let how = match form {
                ClusterFailoverForm::Coordinated => ManualFailover::Coordinated,
                ClusterFailoverForm::Force => ManualFailover::Force,
                ClusterFailoverForm::Takeover => ManualFailover::Takeover,
            };
            match idx {
                Some(idx) if st.servers[idx].alive => mode.bus.failover(mode.bus_of[idx], how),
                _ => Err(format!("{name} is not running")),
            }
        };
        let what = match &done {
            Ok(()) => format!("CLUSTER FAILOVER{} sent to {name}", form.option()),
            Err(why) => format!("CLUSTER FAILOVER{} to {name} refused: {why}", form.option()),
        };
        self.rec.record("nemesis", EventKind::Fault { what });
        done
    }

    /// What server `idx` does with command `args` from connection `conn` before executing it:
    /// `None` to execute it, or the redirect or refusal it answers instead.
    pub(super) fn cluster_refusal(
        st: &mut State,
        idx: usize,
        conn: ClientId,
        args: &[Vec<u8>],
        now_ms: u64,
    ) -> Option<Value> {
        let mode = st.redis_cluster.as_mut()?;
        let flags = mode.flags.entry(conn).or_default();
        let asked = *flags;
        if let Some(name) = args.first() {
            flags.after(name);
        }
        let engine = &st.servers[idx].engine;
        let decision = decide(&mode.bus.view(mode.bus_of[idx]), args, asked, |k| {
            engine.has_key(k, now_ms)
        });
        let names = &st.servers;
        let server_of = &mode.server_of;
        match decision {
            Decision::Serve => None,
            d => d
                .error_line(|b| format!("{}:{PORT}", names[server_of[b]].name))
                .map(|line| error_reply(&line)),
        }
    }

    /// The server a client on node `client_node` learns owns `slot` when it asks for the slot
    /// map (`CLUSTER SLOTS`): the first running server it can reach, in bus order, answers from
    /// its own view, which may be stale (a master cut off in the minority still names itself).
    pub fn slot_owner_for(&self, client_node: usize, slot: u16) -> Option<usize> {
        let st = self.st();
        let mode = st.redis_cluster.as_ref()?;
        (0..mode.server_of.len())
            .map(|b| (b, mode.server_of[b]))
            .find(|&(_, s)| {
                st.servers[s].alive
                    && self.net.reachable(client_node, s)
                    && self.net.reachable(s, client_node)
            })
            .and_then(|(b, _)| mode.bus.owner_of(b, slot))
            .map(|owner| mode.server_of[owner])
    }

    /// The server a subscriber on node `client_node` subscribes to `channel` on: its group's
    /// master, or in a Redis Cluster the master of the channel's slot, as a cluster client
    /// routes it (a lock's channel that names its key in a hash tag, as Redisson's
    /// `redisson_lock__channel:{key}` does, lands on the key's master, where the unlock
    /// publishes; Redis would broadcast a `PUBLISH` to every node, which this does not model).
    pub fn subscription_server(&self, client_node: usize, group: usize, channel: &str) -> usize {
        match self.is_redis_cluster() {
            true => self
                .slot_owner_for(client_node, key_slot(channel.as_bytes()))
                .unwrap_or_else(|| self.master_of(group)),
            false => self.master_of(group),
        }
    }

    /// The first slot of each master's initial share: a request routed by each reaches every
    /// master (`SCRIPT LOAD` goes to all of them).
    pub fn first_slots(&self) -> Vec<u16> {
        let masters = self.st().groups.len();
        (0..masters)
            .map(|m| initial_slots(m, masters).first)
            .collect()
    }

    /// What a reply tells a cluster client to do, if anything.
    pub fn redirect_of(&self, v: &Value) -> Option<Redirect> {
        let text = error_text(v)?;
        let mut words = text.split(' ');
        let server = |addr: Option<&str>| {
            let host = addr?.rsplit_once(':')?.0;
            self.server_index(host)
        };
        match words.next()? {
            "MOVED" => {
                let slot = words.next()?.parse().ok()?;
                Some(Redirect::Moved {
                    slot,
                    to: server(words.next())?,
                })
            }
            "ASK" => {
                words.next()?;
                Some(Redirect::Ask {
                    to: server(words.next())?,
                })
            }
            "TRYAGAIN" | "CLUSTERDOWN" => Some(Redirect::Wait),
            _ => None,
        }
    }
}

/// The slot a request is routed by: its first command with a key, as redis-rs's cluster client
/// routes a pipeline; `None` for a request with no key (sent to any node).
pub fn request_slot<'a>(cmds: impl Iterator<Item = &'a [Vec<u8>]>) -> Option<u16> {
    cmds.filter_map(crate::backend::redis::engine::cluster::command_keys)
        .find_map(|keys| keys.first().map(|k| key_slot(k)))
}

impl State {
    /// Old master `idx` rejoins as a replica of its group's master: a full resync replaces its
    /// dataset (it restarts from an empty one and follows the master's stream from now on).
    pub(super) fn demote_to_replica(&mut self, idx: usize) {
        let group = self.servers[idx].group;
        let master = self.groups[group].master;
        self.servers[idx].engine = crate::simredis::Engine::new(crate::simredis::Role::Replica);
        self.servers[idx].offset = 0;
        self.servers[idx].applied = 0;
        self.servers[idx].streams.clear();
        self.servers[master]
            .streams
            .insert(idx, super::Stream::default());
        if !self.groups[group].replicas.contains(&idx) {
            self.groups[group].replicas.push(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bus_numbering;

    /// The spawned cluster's numbering: masters first, then master 0's replicas, master 1's.
    #[test]
    fn servers_map_onto_the_bus_as_the_spawned_cluster_numbers_its_nodes() {
        // Servers: redis-0, redis-0-replica-0, redis-0-replica-1, redis-1, ...
        assert_eq!(bus_numbering(3, 2), vec![0, 3, 4, 1, 5, 6, 2, 7, 8]);
        assert_eq!(bus_numbering(3, 0), vec![0, 1, 2]);
    }
}
