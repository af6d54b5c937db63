//! Per-node clocks in the simulator.
//!
//! madsim has one global clock (true time). Real machines do not agree on the time: each node's
//! clock here is a piecewise-linear function of true time with its own offset, a rate error in
//! parts per million (drift), and step jumps (an NTP correction, an operator). Redis expiry on a
//! node, and a client's lease arithmetic, read that node's clock; checkers read true time.
//!
//! Each node has two clocks, as a machine does. The monotonic clock (`CLOCK_MONOTONIC`, Java's
//! `nanoTime`) only moves forward at the node's rate; the wall clock (`gettimeofday`, Java's
//! `currentTimeMillis`) is the monotonic clock plus a correction that wall-clock jumps
//! (`wall_clock_jump`: an NTP step, an operator) change. Start offsets, drift and `clock_jump`
//! skew both. Redis expires keys on its wall clock; a lock should measure its validity on the
//! monotonic one. Without a wall-clock jump both read the same.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The unix time (ms) every simulated clock starts from, so histories are reproducible.
pub const EPOCH_MS: u64 = 1_700_000_000_000;

/// One node's clock: `clock(t) = base_clock + (t - base_true) * (1 + ppm / 1e6)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct NodeClock {
    /// True time (µs since the run started) of the last change.
    base_true_us: u64,
    /// The node's clock at that moment (µs since the unix epoch).
    base_clock_us: i128,
    /// Rate error in parts per million: +100 runs 0.01% fast.
    ppm: i64,
    /// The wall clock's difference from the monotonic clock (µs), from wall-clock jumps.
    wall_us: i128,
}

impl NodeClock {
    fn at(&self, true_us: u64) -> i128 {
        let dt = true_us.saturating_sub(self.base_true_us) as i128;
        if self.ppm == 0 {
            // The common case, without a 128-bit division (every command reads a clock).
            return self.base_clock_us + dt;
        }
        self.base_clock_us + dt + dt * self.ppm as i128 / 1_000_000
    }
}

/// `us / 1000` as milliseconds for a non-negative `us`, with a 64-bit division whenever it fits
/// (a 128-bit one is a library call), the same result either way.
fn ms_of(us: i128) -> u64 {
    match u64::try_from(us) {
        Ok(us) => us / 1000,
        Err(_) => (us / 1000) as u64,
    }
}

/// The clocks of every node of a simulation, shared by the nodes and the nemesis.
#[derive(Clone)]
pub struct Clocks {
    inner: Arc<Mutex<Vec<NodeClock>>>,
    /// Whether any clock was ever stepped or given a drift. Until then every node reads
    /// [`EPOCH_MS`] plus true time, with no lock taken: most runs never skew a clock, and every
    /// simulated command reads one.
    skewed: Arc<AtomicBool>,
    true_time: TrueTime,
}

impl std::fmt::Debug for Clocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clocks")
            .field("inner", &self.inner)
            .finish()
    }
}

/// The simulator's true time, read through a handle kept from creation: `Instant::now()` looks the
/// runtime up in thread-local storage on every call, and every command reads the clock.
#[derive(Clone)]
pub struct TrueTime {
    handle: madsim::time::TimeHandle,
    start: Duration,
    /// The simulator's `Instant` at [`TrueTime::start`]: a message on the wire reads its arrival
    /// against it, without asking the runtime (two locks) for the time.
    start_instant: madsim::time::Instant,
}

impl crate::history::TrueClock for TrueTime {
    /// The history's clock: first runs every message on the wire that is due (its events are
    /// earlier), so events are recorded in true-time order.
    fn now_us(&self) -> u64 {
        super::wire::settle();
        TrueTime::now_us(self)
    }
}

impl TrueTime {
    /// A history recorder stamping events with the simulator's true time, from now. Call inside a
    /// madsim runtime.
    pub fn recorder() -> crate::history::Recorder {
        crate::history::Recorder::with_clock(std::sync::Arc::new(TrueTime::start()))
    }

    /// Starts now. Call inside a madsim runtime.
    pub fn start() -> TrueTime {
        let handle = madsim::time::TimeHandle::current();
        let start = handle.elapsed();
        let start_instant = handle.now_instant();
        TrueTime {
            handle,
            start,
            start_instant,
        }
    }

    /// Microseconds since [`TrueTime::start`]; while a message on the wire runs, its arrival
    /// time (`sim::wire`).
    pub fn now_us(&self) -> u64 {
        // `at - start_instant` is `elapsed - (now - at) - start`: the same microseconds.
        match super::wire::running_at() {
            Some(at) => (at - self.start_instant).as_micros() as u64,
            None => (self.handle.elapsed() - self.start).as_micros() as u64,
        }
    }

    /// The simulator's `Instant` now (what `madsim::time::Instant::now()` returns); while a
    /// message on the wire runs, its arrival time.
    pub fn instant(&self) -> madsim::time::Instant {
        super::wire::running_at().unwrap_or_else(|| self.handle.now_instant())
    }

    /// `madsim::time::sleep(d)` without its thread-local lookup of the runtime (every simulated
    /// request sleeps), as a [`Wakeup`](crate::env::wakeup::Wakeup) so a timeout around the
    /// request knows when it wakes.
    pub fn sleep(&self, d: Duration) -> crate::env::wakeup::Wakeup {
        crate::env::wakeup::Wakeup::new(self.handle.sleep(d))
    }

    /// `madsim::time::sleep(d)` through the kept handle, as a plain madsim sleep (one no
    /// enclosing timeout is told about).
    pub fn plain_sleep(&self, d: Duration) -> madsim::time::Sleep {
        self.handle.sleep(d)
    }

    /// `madsim::time::sleep_until(deadline)`, likewise.
    pub fn sleep_until(&self, deadline: madsim::time::Instant) -> crate::env::wakeup::Wakeup {
        crate::env::wakeup::Wakeup::new(self.handle.sleep_until(deadline))
    }
}

impl Clocks {
    /// `n` clocks that all read [`EPOCH_MS`] now. Call inside a madsim runtime.
    pub fn new(n: usize) -> Clocks {
        let c = NodeClock {
            base_true_us: 0,
            base_clock_us: EPOCH_MS as i128 * 1000,
            ppm: 0,
            wall_us: 0,
        };
        Clocks {
            inner: Arc::new(Mutex::new(vec![c; n])),
            skewed: Arc::new(AtomicBool::new(false)),
            true_time: TrueTime::start(),
        }
    }

    fn true_us(&self) -> u64 {
        self.true_time.now_us()
    }

    /// Node `node`'s wall clock now, unix milliseconds.
    pub fn now_ms(&self, node: usize) -> u64 {
        let t = self.true_us();
        if !self.skewed.load(Ordering::Relaxed) {
            return EPOCH_MS + t / 1000;
        }
        let c = self.inner.lock().unwrap()[node];
        ms_of((c.at(t) + c.wall_us).max(0))
    }

    /// Node `node`'s monotonic clock now, in milliseconds (it starts at [`EPOCH_MS`] like the
    /// wall clock, so the two agree until the wall clock jumps).
    pub fn monotonic_ms(&self, node: usize) -> u64 {
        let t = self.true_us();
        if !self.skewed.load(Ordering::Relaxed) {
            return EPOCH_MS + t / 1000;
        }
        let us = self.inner.lock().unwrap()[node].at(t);
        ms_of(us.max(0))
    }

    /// Steps node `node`'s wall clock alone by `by_ms` (negative: backwards); its monotonic
    /// clock goes on as before.
    pub fn jump_wall(&self, node: usize, by_ms: i64) {
        super::wire::settle();
        self.skewed.store(true, Ordering::Relaxed);
        self.inner.lock().unwrap()[node].wall_us += by_ms as i128 * 1000;
    }

    /// Steps both of node `node`'s clocks by `by_ms` (negative: backwards).
    pub fn jump(&self, node: usize, by_ms: i64) {
        super::wire::settle();
        let t = self.true_us();
        self.skewed.store(true, Ordering::Relaxed);
        let mut g = self.inner.lock().unwrap();
        let c = &mut g[node];
        c.base_clock_us = c.at(t) + by_ms as i128 * 1000;
        c.base_true_us = t;
    }

    /// Sets node `node`'s rate error from now on.
    pub fn set_drift(&self, node: usize, ppm: i64) {
        super::wire::settle();
        let t = self.true_us();
        self.skewed.store(true, Ordering::Relaxed);
        let mut g = self.inner.lock().unwrap();
        let c = &mut g[node];
        c.base_clock_us = c.at(t);
        c.base_true_us = t;
        c.ppm = ppm;
    }

    /// Sleeps while node `node`'s clock advances by `d` (through the kept time handle: every
    /// simulated pause sleeps, and `madsim::time::sleep` looks the runtime up each time).
    pub fn sleep(&self, node: usize, d: Duration) -> crate::env::wakeup::Wakeup {
        // Every wait a node arms is a step at which a run can be cut (`explore --time-limit`).
        crate::world::cut::check();
        self.true_time.sleep(self.true_duration(node, d))
    }

    /// How much true time passes while node `node`'s clock advances by `d`.
    pub fn true_duration(&self, node: usize, d: Duration) -> Duration {
        if !self.skewed.load(Ordering::Relaxed) {
            return d;
        }
        let ppm = self.inner.lock().unwrap()[node].ppm;
        if ppm == 0 {
            return d;
        }
        let ns = d.as_nanos() as i128 * 1_000_000 / (1_000_000 + ppm as i128);
        Duration::from_nanos(ns.max(0) as u64)
    }
}

/// Sets every node's clock as the scenario's `[clocks]` table says, drawing each node's offset and
/// drift from the run's seed, and records what it drew. Makes no draw when all clocks are perfect.
pub fn start_clocks(
    spec: &crate::scenario::ClocksSpec,
    names: &[String],
    clocks: &Clocks,
    rec: &crate::history::Recorder,
) {
    for start in crate::schedule::clocks::draw(spec, names, signed_random) {
        let i = names
            .iter()
            .position(|n| *n == start.node)
            .expect("drawn for a named node");
        clocks.jump(i, start.offset_ms);
        clocks.set_drift(i, start.drift_ppm);
        rec.record(
            "nemesis",
            crate::history::EventKind::Fault {
                what: start.describe(),
            },
        );
    }
}

/// Uniform in `[lo, hi]` from madsim's seeded RNG.
fn signed_random([lo, hi]: [i64; 2]) -> i64 {
    if hi <= lo {
        lo
    } else {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (madsim::rand::random::<u64>() as u128 % span) as i128) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_jumps_are_piecewise_linear() {
        let c = NodeClock {
            base_true_us: 0,
            base_clock_us: 0,
            ppm: 10_000, // 1% fast
            wall_us: 0,
        };
        assert_eq!(c.at(1_000_000), 1_010_000);
    }

    #[test]
    fn clocks_follow_true_time_and_faults() {
        madsim::runtime::Runtime::new().block_on(async {
            let clocks = Clocks::new(2);
            assert_eq!(clocks.now_ms(0), EPOCH_MS);
            madsim::time::sleep(Duration::from_millis(1000)).await;
            assert_eq!(clocks.now_ms(1), EPOCH_MS + 1000);
            clocks.jump(1, 45_000);
            clocks.set_drift(0, 100_000); // 10% fast
            madsim::time::sleep(Duration::from_millis(1000)).await;
            assert_eq!(clocks.now_ms(0), EPOCH_MS + 2100);
            assert_eq!(clocks.now_ms(1), EPOCH_MS + 47_000);
            assert_eq!(
                clocks.true_duration(0, Duration::from_millis(1100)),
                Duration::from_millis(1000)
            );
            // A wall-clock jump back moves the wall clock only.
            clocks.jump_wall(1, -10_000);
            assert_eq!(clocks.now_ms(1), EPOCH_MS + 37_000);
            assert_eq!(clocks.monotonic_ms(1), EPOCH_MS + 47_000);
            madsim::time::sleep(Duration::from_millis(1000)).await;
            assert_eq!(clocks.now_ms(1), EPOCH_MS + 38_000);
            assert_eq!(clocks.monotonic_ms(1), EPOCH_MS + 48_000);
            assert_eq!(clocks.monotonic_ms(0), clocks.now_ms(0));
        });
    }
}
