//! The simulated network between nodes: latency and cut links.
//!
//! madsim provides time and scheduling; lockcheck carries requests itself (a request is a sleep for
//! the one-way latency, then an atomic execution on the server, then a sleep back), which keeps a
//! simulated round trip to two timer events. Partitions are directed cuts between node indices, so
//! a link can fail one way only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Cut links and latency, shared by every node of a simulation.
#[derive(Clone, Debug)]
pub struct Network {
    /// Cut links `(from, to)`, each with the number of partitions currently cutting it (two
    /// overlapping partitions heal a link only when both have ended).
    cuts: Arc<Mutex<BTreeMap<(usize, usize), u32>>>,
    latency_ms: [u64; 2],
    rng: Rng,
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
    pub fn new(latency_ms: [u64; 2]) -> Network {
        Network {
            cuts: Arc::default(),
            latency_ms,
            rng: Rng(madsim::rand::thread_rng()),
        }
    }

    /// Whether a message sent now from `from` reaches `to`.
    pub fn reachable(&self, from: usize, to: usize) -> bool {
        let cuts = self.cuts.lock().unwrap();
        cuts.is_empty() || !cuts.contains_key(&(from, to))
    }

    /// Cuts the link `from -> to` (one way).
    pub fn cut(&self, from: usize, to: usize) {
        *self.cuts.lock().unwrap().entry((from, to)).or_insert(0) += 1;
    }

    /// Heals the link `from -> to`.
    pub fn heal(&self, from: usize, to: usize) {
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
}
