//! The cluster bus as a deterministic machine: every node's belief about the others (suspected,
//! failed, who is master, who owns which slot, which epoch), changed by the messages the nodes
//! send each other and by each node's `clusterCron`, which Redis runs every 100 ms.
//!
//! Inputs: the time (`now_ms`, passed in; nothing here reads a clock or sleeps), which nodes run
//! and which pairs can talk ([`Reach`]), the replication offsets (the world's replication owns
//! the data; the bus only reads offsets, to rank replicas and to finish a coordinated failover),
//! `CLUSTER SETSLOT` and `CLUSTER FAILOVER`. Outputs: timed [`BusEvent`]s and queries (each
//! node's owner of a slot, its role, its cluster state). The randomness Redis uses (the election
//! jitter, which nodes the once-a-second ping picks, each node's cron phase) comes from a seeded
//! RNG drawn from the one passed in, so a seed gives one run.
//!
//! The rules, from the cluster spec (<https://redis.io/docs/reference/cluster-spec/>) and Redis
//! 7.0's `cluster.c`, are in `gossip.rs` (pings, failure detection, the cluster state) and
//! `election.rs` (replica promotion, votes, manual failover). Their timing is checked against
//! the promotions measured on real `redis-server` 7.0.15 (docs/redis-cluster.md) by
//! `tests/redis/cluster_sim.rs`.
//!
//! Messages take `latency_ms` (1 ms by default) and are lost when the link is cut or the
//! receiver is down at either end of that (Redis's TCP link would hold them, but a cut longer
//! than half the node timeout makes Redis drop and reopen the link anyway).
//!
//! Nodes are numbered as [`RedisCluster`](crate::backend::redis::real::RedisCluster) numbers
//! them: masters `0..masters`, then master 0's replicas, master 1's, ...

use crate::backend::redis::engine::cluster::reach::Reach;
use crate::backend::redis::engine::cluster::redirect::NodeView;
use crate::backend::redis::engine::cluster::slot_map::SlotMap;
use crate::backend::redis::engine::cluster::topology::ClusterRole;
use crate::backend::redis::engine::cluster::topology::SlotRange;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::collections::BTreeMap;

/// How often each node runs its cron (`clusterCron`, from `serverCron` at `hz 10`).
pub const CRON_MS: u64 = 100;
/// A master whose cluster state was fail does not turn it ok in its first 2 s after start
/// (`CLUSTER_WRITABLE_DELAY`): the cluster gets a chance to tell it it is no longer master.
pub const WRITABLE_DELAY_MS: u64 = 2000;

/// The shape and timing of a simulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusConfig {
    /// Masters (at least 3, as the real deployment requires).
    pub masters: usize,
    /// Replicas per master.
    pub replicas: usize,
    /// `cluster-node-timeout`, ms.
    pub node_timeout_ms: u64,
    /// One-way delay of a bus message, ms.
    pub latency_ms: u64,
}

impl Default for BusConfig {
    /// Three masters with one replica each and a 500 ms node timeout, as `ClusterOptions`.
    fn default() -> Self {
        BusConfig {
            masters: 3,
            replicas: 1,
            node_timeout_ms: 500,
            latency_ms: 1,
        }
    }
}

/// What the bus records, with its time in [`BusRecord`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BusEvent {
    /// `by` suspects `node` (`PFAIL`, `fail?`): no answer for the node timeout.
    Suspected {
        /// The node that suspects.
        by: usize,
        /// The node suspected.
        node: usize,
    },
    /// `by` holds `node` failed (`FAIL`): a majority of masters' suspicions met, or a `FAIL`
    /// message came.
    Failed {
        /// The node that holds it failed.
        by: usize,
        /// The node failed.
        node: usize,
    },
    /// `by` no longer suspects or holds `node` failed (it answered).
    Cleared {
        /// The node that cleared its flag.
        by: usize,
        /// The node cleared.
        node: usize,
    },
    /// Replica `node` asked the masters for their votes for `epoch`.
    ElectionStarted {
        /// The candidate.
        node: usize,
        /// The epoch it asks for.
        epoch: u64,
    },
    /// Master `by` voted for `candidate` in `epoch`.
    Voted {
        /// The voter.
        by: usize,
        /// The candidate.
        candidate: usize,
        /// The epoch of the vote.
        epoch: u64,
    },
    /// Replica `node` became a master with configuration epoch `epoch`, taking `replaced`'s slots.
    Promoted {
        /// The new master.
        node: usize,
        /// Its configuration epoch.
        epoch: u64,
        /// The master it replaced.
        replaced: usize,
    },
    /// `node` now replicates `master` (an old master that lost its slots, or a replica whose
    /// master did).
    Follows {
        /// The node.
        node: usize,
        /// Its master now.
        master: usize,
    },
    /// `node`'s cluster state turned ok (`true`) or fail (`false`).
    State {
        /// The node.
        node: usize,
        /// Whether it is ok now.
        ok: bool,
    },
    /// Master `node` paused (`true`) or resumed (`false`) its clients' writes for a coordinated
    /// manual failover.
    WritesPaused {
        /// The master.
        node: usize,
        /// Whether writes are paused now.
        paused: bool,
    },
}

/// An event and when it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusRecord {
    /// True time, ms.
    pub at_ms: u64,
    /// What happened.
    pub event: BusEvent,
}

/// What one node knows of another (`clusterNode` in `cluster.c`).
#[derive(Clone, Debug, Default)]
pub(super) struct Peer {
    /// `None`: a master; `Some(m)`: a replica of `m`.
    pub(super) replica_of: Option<usize>,
    /// `PFAIL`: this node's own suspicion.
    pub(super) pfail: bool,
    /// `FAIL`: agreed by a majority of masters.
    pub(super) fail: bool,
    pub(super) fail_time: u64,
    /// When the unanswered ping was sent (0: none pending).
    pub(super) ping_sent: u64,
    pub(super) pong_received: u64,
    pub(super) data_received: u64,
    /// Whether this node's bus connection to the peer is open.
    pub(super) link: bool,
    /// When that connection was opened.
    pub(super) link_since: u64,
    /// Failure reports on this peer: reporting master → when.
    pub(super) reports: BTreeMap<usize, u64>,
    /// When this node last voted for a replica of this peer (a master).
    pub(super) voted_time: Option<u64>,
    /// The replication offset the peer last announced.
    pub(super) offset: u64,
}

/// A replica's election (`failover_auth_*` in `cluster.c`).
#[derive(Clone, Debug, Default)]
pub(super) struct Election {
    /// When to ask for votes; `None` before the first is scheduled.
    pub(super) auth_time: Option<u64>,
    pub(super) sent: bool,
    pub(super) count: usize,
    pub(super) epoch: u64,
    pub(super) rank: u64,
}

/// A manual failover in progress (`mf_*` in `cluster.c`).
#[derive(Clone, Debug)]
pub(super) struct ManualState {
    pub(super) end_ms: u64,
    /// Replica: the election may start. Master: unused.
    pub(super) can_start: bool,
    /// Replica: the offset its paused master announced.
    pub(super) master_offset: Option<u64>,
    /// Master: the replica it pauses for.
    pub(super) replica: Option<usize>,
}

/// One node: its own state and its view of the others.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) alive: bool,
    pub(super) incarnation: u64,
    /// Its process start (`first_call_time` of `clusterUpdateState`).
    pub(super) started_ms: u64,
    /// Its cron's offset within the 100 ms.
    pub(super) phase: u64,
    pub(super) iteration: u64,
    pub(super) current_epoch: u64,
    pub(super) last_vote_epoch: u64,
    /// Its view of every node, itself included (for its own role).
    pub(super) peers: Vec<Peer>,
    pub(super) map: SlotMap,
    pub(super) state_ok: bool,
    pub(super) among_minority_ms: Option<u64>,
    pub(super) election: Election,
    pub(super) manual: Option<ManualState>,
    /// Until when its clients' writes are paused (a master in a coordinated failover).
    pub(super) paused_until: Option<u64>,
    /// Its replication offset (input).
    pub(super) offset: u64,
}

/// What every bus message says of its sender (`clusterMsg`'s header).
#[derive(Clone, Debug)]
pub(super) struct Header {
    pub(super) current_epoch: u64,
    /// The sender's configuration epoch, or its master's if it is a replica.
    pub(super) config_epoch: u64,
    pub(super) replica_of: Option<usize>,
    /// The slots it serves, or its master's.
    pub(super) claimed: Vec<SlotRange>,
    pub(super) offset: u64,
    /// A master paused for a manual failover (`CLUSTERMSG_FLAG0_PAUSED`).
    pub(super) paused: bool,
    /// Gossip: (node, pfail, fail) as the sender sees a few others.
    pub(super) gossip: Vec<(usize, bool, bool)>,
}

/// The message types lockcheck models (`CLUSTERMSG_TYPE_*`).
#[derive(Clone, Debug)]
pub(super) enum Body {
    Ping,
    Pong,
    Fail(usize),
    AuthRequest {
        force: bool,
    },
    AuthAck,
    Update {
        node: usize,
        epoch: u64,
        slots: Vec<SlotRange>,
    },
    MfStart,
}

#[derive(Clone, Debug)]
pub(super) struct Message {
    pub(super) from: usize,
    pub(super) to: usize,
    /// The receiver's incarnation when sent: a restarted receiver never gets it.
    pub(super) to_incarnation: u64,
    pub(super) header: Header,
    pub(super) body: Body,
}

#[derive(Clone, Debug)]
pub(super) enum Pending {
    Tick { node: usize, incarnation: u64 },
    Deliver(Message),
}

/// The simulated cluster bus.
#[derive(Clone, Debug)]
pub struct Bus {
    pub(super) config: BusConfig,
    pub(super) nodes: Vec<Node>,
    pub(super) reach: Reach,
    pub(super) queue: BTreeMap<(u64, u64), Pending>,
    pub(super) seq: u64,
    pub(super) now: u64,
    pub(super) rng: SmallRng,
    pub(super) out: Vec<BusRecord>,
}

/// `CLUSTER SETSLOT <slot> ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlot {
    /// `MIGRATING <node>` (on the owner).
    Migrating(usize),
    /// `IMPORTING <node>` (on the target).
    Importing(usize),
    /// `STABLE`.
    Stable,
    /// `NODE <node>`: the migration's end.
    Node(usize),
}

impl Bus {
    /// A cluster formed as `RedisCluster::start` forms it, its nodes started at time 0: every
    /// node knows the layout (master `m` owns the `m`-th slice with epoch `m + 1`, its replicas
    /// follow it) and no node has talked yet. As on real servers, the cluster state turns ok
    /// about 2 s later ([`WRITABLE_DELAY_MS`]). `rng` seeds the bus's own RNG.
    pub fn new(config: BusConfig, rng: &mut impl RngCore) -> Bus {
        let mut rng = SmallRng::seed_from_u64(rng.next_u64());
        let n = config.masters * (1 + config.replicas);
        let map = SlotMap::formed(config.masters);
        let peers: Vec<Peer> = (0..n)
            .map(|node| Peer {
                replica_of: (node >= config.masters)
                    .then(|| (node - config.masters) / config.replicas.max(1)),
                ..Peer::default()
            })
            .collect();
        let nodes = (0..n)
            .map(|_| Node {
                alive: true,
                incarnation: 0,
                started_ms: 0,
                phase: 1 + rng.next_u64() % CRON_MS,
                iteration: 0,
                current_epoch: config.masters as u64,
                last_vote_epoch: 0,
                peers: peers.clone(),
                map: map.clone(),
                state_ok: false,
                among_minority_ms: None,
                election: Election::default(),
                manual: None,
                paused_until: None,
                offset: 0,
            })
            .collect();
        let mut bus = Bus {
            config,
            nodes,
            reach: Reach::all(n),
            queue: BTreeMap::new(),
            seq: 0,
            now: 0,
            rng,
            out: Vec::new(),
        };
        for node in 0..n {
            bus.schedule_tick(node, 0);
        }
        bus
    }

    /// The configuration it was made with.
    pub fn config(&self) -> BusConfig {
        self.config
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true (for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The time of the last [`Bus::advance`].
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// Runs the bus up to `now_ms`: every cron tick and message before `now_ms` under the
    /// reachability given last, then `reach` from `now_ms` on (a node down in it and up before
    /// crashes now; one up in it and down before restarts now), then what falls at `now_ms`.
    /// Returns what happened, in order.
    pub fn advance(&mut self, now_ms: u64, reach: &Reach) -> Vec<BusRecord> {
        assert!(now_ms >= self.now, "time runs forward");
        assert_eq!(reach.nodes(), self.nodes.len(), "one entry per node");
        self.run_until(now_ms, false);
        self.now = now_ms;
        for node in 0..self.nodes.len() {
            match (self.nodes[node].alive, reach.alive(node)) {
                (true, false) => self.crash(node),
                (false, true) => self.restart(node),
                _ => {}
            }
        }
        self.reach = reach.clone();
        self.run_until(now_ms, true);
        std::mem::take(&mut self.out)
    }

    fn run_until(&mut self, now_ms: u64, inclusive: bool) {
        while let Some(entry) = self.queue.first_entry() {
            let at = entry.key().0;
            if at > now_ms || (at == now_ms && !inclusive) {
                break;
            }
            let pending = entry.remove();
            self.now = at;
            match pending {
                Pending::Tick { node, incarnation } => {
                    if self.nodes[node].alive && self.nodes[node].incarnation == incarnation {
                        self.cron(node);
                        let next = self.now + CRON_MS;
                        self.push(next, Pending::Tick { node, incarnation });
                    }
                }
                Pending::Deliver(msg) => {
                    let to = &self.nodes[msg.to];
                    if to.alive
                        && to.incarnation == msg.to_incarnation
                        && self.reach.can_talk(msg.from, msg.to)
                    {
                        self.receive(msg);
                    }
                }
            }
        }
    }

    pub(super) fn push(&mut self, at: u64, pending: Pending) {
        self.seq += 1;
        self.queue.insert((at, self.seq), pending);
    }

    fn schedule_tick(&mut self, node: usize, from_ms: u64) {
        let incarnation = self.nodes[node].incarnation;
        let at = from_ms + self.nodes[node].phase;
        self.push(at, Pending::Tick { node, incarnation });
    }

    pub(super) fn record(&mut self, event: BusEvent) {
        self.out.push(BusRecord {
            at_ms: self.now,
            event,
        });
    }

    /// The process dies: every peer's connection to it breaks.
    fn crash(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        n.alive = false;
        n.incarnation += 1;
        for other in 0..self.nodes.len() {
            self.nodes[other].peers[node].link = false;
        }
    }

    /// The process starts again with its `nodes.conf`: its view of roles, slots, epochs and
    /// failed nodes, its current epoch and last vote survive; suspicions, pending pings,
    /// elections and links do not, and its cluster state starts fail.
    fn restart(&mut self, node: usize) {
        let now = self.now;
        let n = &mut self.nodes[node];
        n.alive = true;
        n.incarnation += 1;
        n.started_ms = now;
        n.iteration = 0;
        n.state_ok = false;
        n.among_minority_ms = None;
        n.election = Election::default();
        n.manual = None;
        n.paused_until = None;
        for p in &mut n.peers {
            p.pfail = false;
            p.ping_sent = 0;
            p.pong_received = now;
            p.data_received = now;
            p.link = false;
            p.reports.clear();
        }
        self.schedule_tick(node, now);
    }

    /// Sets node `node`'s replication offset (a master's: what it has produced; a replica's:
    /// what it has applied). The world's replication calls this.
    pub fn set_offset(&mut self, node: usize, offset: u64) {
        self.nodes[node].offset = offset;
    }

    /// `CLUSTER SETSLOT <slot> ...` on node `node`; an error is Redis's reply text.
    pub fn set_slot(&mut self, node: usize, slot: u16, how: SetSlot) -> Result<(), String> {
        let n = &mut self.nodes[node];
        if n.peers[node].replica_of.is_some() {
            return Err("ERR Please use SETSLOT only with masters.".into());
        }
        match how {
            SetSlot::Migrating(to) => {
                if n.map.owner(slot) != Some(node) {
                    return Err(format!("ERR I'm not the owner of hash slot {slot}"));
                }
                n.map.set_migrating(slot, to);
            }
            SetSlot::Importing(from) => {
                if n.map.owner(slot) == Some(node) {
                    return Err(format!("ERR I'm already the owner of hash slot {slot}"));
                }
                n.map.set_importing(slot, from);
            }
            SetSlot::Stable => n.map.set_stable(slot),
            SetSlot::Node(to) => {
                // The source, handing the slot over, stops migrating it; the target, taking it,
                // stops importing it and bumps its epoch without agreement so its claim wins
                // (`clusterBumpConfigEpochWithoutConsensus`, the spec's resharding section).
                let importing = n.map.importing_from(slot).is_some();
                n.map.set_stable(slot);
                n.map.assign(
                    SlotRange {
                        first: slot,
                        last: slot,
                    },
                    to,
                );
                if to == node && importing {
                    self.bump_epoch_without_consensus(node);
                }
            }
        }
        Ok(())
    }

    /// Gives `node` a new configuration epoch alone, unless its epoch is already the greatest
    /// (`clusterBumpConfigEpochWithoutConsensus`).
    pub(super) fn bump_epoch_without_consensus(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        let max = n.map.max_epoch().max(n.current_epoch);
        let mine = n.map.epoch(node);
        if mine == 0 || mine != max {
            n.current_epoch += 1;
            n.map.set_epoch(node, n.current_epoch);
        }
    }

    /// Whether node `node` runs.
    pub fn alive(&self, node: usize) -> bool {
        self.nodes[node].alive
    }

    /// Node `node`'s role in its own word.
    pub fn role(&self, node: usize) -> ClusterRole {
        match self.nodes[node].peers[node].replica_of {
            None => ClusterRole::Master,
            Some(of) => ClusterRole::Replica { of },
        }
    }

    /// Whether node `node`'s cluster state is ok.
    pub fn state_ok(&self, node: usize) -> bool {
        self.nodes[node].state_ok
    }

    /// Who owns `slot` as node `viewer` sees it.
    pub fn owner_of(&self, viewer: usize, slot: u16) -> Option<usize> {
        self.nodes[viewer].map.owner(slot)
    }

    /// The master serving `slot` now: of the running masters that say they own it, the one
    /// with the greatest configuration epoch (as `RedisCluster::master_of_slot` decides).
    pub fn master_of_slot(&self, slot: u16) -> Option<usize> {
        (0..self.nodes.len())
            .filter(|&n| {
                self.alive(n)
                    && self.role(n) == ClusterRole::Master
                    && self.owner_of(n, slot) == Some(n)
            })
            .max_by_key(|&n| self.nodes[n].map.epoch(n))
    }

    /// Node `node`'s current epoch.
    pub fn current_epoch(&self, node: usize) -> u64 {
        self.nodes[node].current_epoch
    }

    /// `node`'s configuration epoch as `viewer` sees it.
    pub fn config_epoch(&self, viewer: usize, node: usize) -> u64 {
        self.nodes[viewer].map.epoch(node)
    }

    /// Whether `viewer` suspects `node` (`fail?`).
    pub fn suspects(&self, viewer: usize, node: usize) -> bool {
        self.nodes[viewer].peers[node].pfail
    }

    /// Whether `viewer` holds `node` failed (`fail`).
    pub fn failed(&self, viewer: usize, node: usize) -> bool {
        self.nodes[viewer].peers[node].fail
    }

    /// Whether master `node` holds its clients' writes (a coordinated manual failover).
    pub fn writes_paused(&self, node: usize) -> bool {
        self.nodes[node].paused_until.is_some()
    }

    /// What node `node` routes commands by (for [`decide`](super::redirect::decide)).
    pub fn view(&self, node: usize) -> NodeView<'_> {
        let n = &self.nodes[node];
        NodeView {
            me: node,
            map: &n.map,
            replica_of: n.peers[node].replica_of,
            state_ok: n.state_ok,
        }
    }

    /// The nodes `viewer` sees as masters with at least one slot (the cluster's size).
    pub(super) fn voting_masters(&self, viewer: usize) -> Vec<usize> {
        let n = &self.nodes[viewer];
        (0..self.nodes.len())
            .filter(|&m| n.peers[m].replica_of.is_none() && n.map.count_of(m) > 0)
            .collect()
    }
}
