//! The real environment: tokio timers, the system clock, the OS's randomness.
//!
//! A client's clock can be skewed in real mode too: the lock reads it only through `Env`, so an
//! offset, a rate error and jumps are applied here, on top of the monotonic clock, exactly as a
//! wrong clock on the client's machine would look to the lock.

use super::{Env, TaskHandle};
use rand::{RngCore, SeedableRng};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Real time and real tasks; must be used inside a tokio runtime.
#[derive(Clone)]
pub struct RealEnv {
    rng: Arc<Mutex<rand::rngs::SmallRng>>,
    skew: Arc<Mutex<Option<Skew>>>,
}

/// A skewed client clock: `base_ms + (now - base) * (1 + ppm / 1e6)`.
#[derive(Clone, Copy, Debug)]
struct Skew {
    base: Instant,
    base_ms: f64,
    ppm: i64,
}

impl Skew {
    fn now_ms(&self) -> f64 {
        let dt = self.base.elapsed().as_secs_f64() * 1000.0;
        self.base_ms + dt * (1.0 + self.ppm as f64 / 1e6)
    }
}

impl Default for RealEnv {
    fn default() -> Self {
        RealEnv {
            rng: Arc::new(Mutex::new(rand::rngs::SmallRng::from_entropy())),
            skew: Arc::default(),
        }
    }
}

fn system_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

impl RealEnv {
    /// Steps this environment's clock by `by_ms` (negative: backwards). Clones share the clock.
    pub fn jump(&self, by_ms: i64) {
        let mut g = self.skew.lock().unwrap();
        let now = g.map_or_else(system_ms, |s| s.now_ms());
        let ppm = g.map_or(0, |s| s.ppm);
        *g = Some(Skew {
            base: Instant::now(),
            base_ms: now + by_ms as f64,
            ppm,
        });
    }

    /// Sets this environment's clock rate error from now on, in parts per million.
    pub fn set_drift(&self, ppm: i64) {
        assert!(ppm > -1_000_000, "a clock must move forward");
        let mut g = self.skew.lock().unwrap();
        let now = g.map_or_else(system_ms, |s| s.now_ms());
        *g = Some(Skew {
            base: Instant::now(),
            base_ms: now,
            ppm,
        });
    }
}

impl Env for RealEnv {
    fn now_ms(&self) -> u64 {
        match *self.skew.lock().unwrap() {
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            Some(s) => s.now_ms().max(0.0) as u64,
        }
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        // A drifting clock measures `d` in more or less real time.
        let ppm = self.skew.lock().unwrap().map_or(0, |s| s.ppm);
        let d = if ppm == 0 {
            d
        } else {
            d.mul_f64(1e6 / (1e6 + ppm as f64))
        };
        tokio::time::sleep(d)
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let h = tokio::spawn(task);
        TaskHandle::new(move || h.abort())
    }

    fn random_u64(&self) -> u64 {
        self.rng.lock().unwrap().next_u64()
    }
}
