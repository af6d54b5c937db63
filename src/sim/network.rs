//! The simulated network between nodes: latency, cut links, and the requests on the wire.
//!
//! madsim provides time and scheduling; lockcheck carries requests itself (a request is a sleep for
//! the one-way latency, then an atomic execution on the server, then a sleep back), which keeps a
//! simulated round trip to two timer events. Partitions are directed cuts between node indices, so
//! a link can fail one way only.
//!
//! A request on the wire belongs to the network, not to its client: when the nemesis pauses a
//! client (a GC pause, `SIGSTOP`), what the client already sent still arrives and runs on the
//! server at its arrival time; only what the client does next (reading the reply, its timers,
//! its next command) waits for it to resume. Connections attach themselves here
//! ([`Network::attach`]) so the nemesis can claim their requests in flight
//! ([`Network::claim_in_flight`]) and deliver them on time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// A connection whose request may be on the wire (implemented by `sim::connection`).
pub trait OnTheWire: Send + Sync {
    /// If a request is on the wire now and has not run: its arrival time and the delivery that
    /// runs it on the server then. Claiming it means the connection's own task will not run it.
    fn claim(&self) -> Option<(madsim::time::Instant, Delivery)>;
}

/// Running a claimed request on its server, at its arrival time.
pub type Delivery = Box<dyn FnOnce() + Send>;

/// The connections of one client node (weak: a dropped connection leaves).
type NodeConns = Vec<Weak<dyn OnTheWire>>;

/// The connections of each client node, by node index.
#[derive(Clone, Default)]
struct Attached(Arc<Mutex<BTreeMap<usize, NodeConns>>>);

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attached")
    }
}

/// Cut links and latency, shared by every node of a simulation.
#[derive(Clone, Debug)]
pub struct Network {
    /// Cut links `(from, to)`, each with the number of partitions currently cutting it (two
    /// overlapping partitions heal a link only when both have ended).
    cuts: Arc<Mutex<BTreeMap<(usize, usize), u32>>>,
    latency_ms: [u64; 2],
    rng: Rng,
    attached: Attached,
}

/// madsim's seeded RNG, kept from creation: `madsim::rand::random` looks it up in thread-local
/// storage on every draw, and every simulated request draws twice. The same generator, so the
/// same draws.
#[derive(Clone)]
struct Rng(madsim::rand::GlobalRng);

impl std::fmt::Debug for Rng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlobalRng")
    }
}

impl Network {
    /// A network with no cuts whose one-way latency is drawn from `latency_ms` (the scenario's
    /// `latency_ms`) with madsim's seeded RNG. Call inside a madsim runtime.
    /// A new network starts a new simulation on this thread: messages an earlier one left on the
    /// wire are dropped (`sim::wire`).
    pub fn new(latency_ms: [u64; 2]) -> Network {
        super::wire::start();
        Network {
            cuts: Arc::default(),
            latency_ms,
            rng: Rng(madsim::rand::thread_rng()),
            attached: Attached::default(),
        }
    }

    /// Whether a message sent now from `from` reaches `to`.
    pub fn reachable(&self, from: usize, to: usize) -> bool {
        let cuts = self.cuts.lock().unwrap();
        cuts.is_empty() || !cuts.contains_key(&(from, to))
    }

    /// Cuts the link `from -> to` (one way).
    pub fn cut(&self, from: usize, to: usize) {
        super::wire::settle();
        *self.cuts.lock().unwrap().entry((from, to)).or_insert(0) += 1;
    }

    /// Heals the link `from -> to`.
    pub fn heal(&self, from: usize, to: usize) {
        super::wire::settle();
        let mut cuts = self.cuts.lock().unwrap();
        if let Some(n) = cuts.get_mut(&(from, to)) {
            *n -= 1;
            if *n == 0 {
                cuts.remove(&(from, to));
            }
        }
    }

    /// A one-way latency sample.
    pub fn latency(&self) -> std::time::Duration {
        let ms = super::draw::lo_hi(&mut self.rng.0.clone(), self.latency_ms);
        std::time::Duration::from_millis(ms.max(1))
    }

    /// Registers `conn`, a connection of the client on node `node`, so its requests in flight
    /// can be claimed when that client is paused. Only a weak reference is kept: a dropped
    /// connection leaves (a watchdog's connection lives for one holding).
    pub fn attach(&self, node: usize, conn: &Arc<dyn OnTheWire>) {
        let mut attached = self.attached.0.lock().unwrap();
        let conns = attached.entry(node).or_default();
        conns.retain(|c| c.strong_count() > 0);
        conns.push(Arc::downgrade(conn));
    }

    /// The requests in flight of the client on node `node`, claimed for delivery without it
    /// (its node has just been paused): each with its arrival time.
    pub fn claim_in_flight(&self, node: usize) -> Vec<(madsim::time::Instant, Delivery)> {
        let attached = self.attached.0.lock().unwrap();
        attached
            .get(&node)
            .map(|conns| conns.iter().filter_map(|c| c.upgrade()?.claim()).collect())
            .unwrap_or_default()
    }
}
