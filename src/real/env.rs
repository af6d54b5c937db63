//! The real environment: tokio timers, the system clock, the OS's randomness.
//!
//! A client's clock can be skewed in real mode too: the lock reads it only through `Env`, so an
//! offset, a rate error and jumps are applied here, on top of the monotonic clock, exactly as a
//! wrong clock on the client's machine would look to the lock. The wall clock is that clock plus
//! the corrections of wall-clock jumps, which leave the monotonic clock alone.
//!
//! A real GC pause stops the whole client process, background threads included, so a paused
//! client must not keep renewing its lease from a watchdog task. Each real client therefore has a
//! [`Gate`]: the nemesis closes it for a pause (or forever for a crash), and while it is closed the
//! client's spawned tasks are not polled and its sleeps do not return. In-flight Redis replies are
//! buffered meanwhile, as the kernel would buffer them for a stopped process.

use crate::env::{Env, PointHook, TaskHandle};
use rand::{RngCore, SeedableRng};
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Real time and real tasks; must be used inside a tokio runtime.
#[derive(Clone)]
pub struct RealEnv {
    rng: Arc<Mutex<rand::rngs::SmallRng>>,
    skew: Arc<Mutex<Option<Skew>>>,
    /// The wall clock's difference from the (skewed) monotonic clock, from wall-clock jumps (ms).
    wall_offset_ms: Arc<Mutex<i64>>,
    gate: Gate,
    points: Option<PointHook>,
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
            wall_offset_ms: Arc::default(),
            gate: Gate::default(),
            points: None,
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
    /// Uses `gate` to stop this client's timers and background tasks during pauses.
    pub fn with_gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// Sends this client's named points to `hook` (the nemesis).
    pub fn with_points(mut self, hook: PointHook) -> Self {
        self.points = Some(hook);
        self
    }

    /// This client's gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Steps this environment's wall clock alone by `by_ms` (negative: backwards); its monotonic
    /// clock goes on. Clones share the clocks.
    pub fn jump_wall(&self, by_ms: i64) {
        *self.wall_offset_ms.lock().unwrap() += by_ms;
    }

    /// Steps both of this environment's clocks by `by_ms` (negative: backwards). Clones share the
    /// clocks.
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
        let offset = *self.wall_offset_ms.lock().unwrap();
        self.monotonic_ms().saturating_add_signed(offset)
    }

    fn monotonic_ms(&self) -> u64 {
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
        let gate = self.gate.clone();
        async move {
            // tokio's timer has a 1 ms grain: even a zero sleep waited for the next tick, which
            // capped a client at ~700 cycles/s when the workload asked for no hold or think time.
            if !d.is_zero() {
                tokio::time::sleep(d).await;
            }
            gate.wait_open().await;
        }
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let h = tokio::spawn(self.gate.clone().gated(task));
        TaskHandle::new(move || h.abort())
    }

    fn random_u64(&self) -> u64 {
        self.rng.lock().unwrap().next_u64()
    }

    fn point(&self, name: &'static str) -> impl Future<Output = ()> + Send {
        let hook = self.points.clone();
        async move {
            if let Some(h) = hook {
                h.reached(name).await
            }
        }
    }
}

/// Stops a real client: closed for a pause, closed forever when it crashed.
#[derive(Clone, Default)]
pub struct Gate {
    inner: Arc<Mutex<GateState>>,
}

#[derive(Default)]
struct GateState {
    paused: bool,
    dead: bool,
    wakers: Vec<Waker>,
}

impl Gate {
    /// Closes the gate (a pause starts).
    pub fn close(&self) {
        self.inner.lock().unwrap().paused = true;
    }

    /// Opens it again (the pause ends), waking everything that waited.
    pub fn open(&self) {
        let wakers = {
            let mut g = self.inner.lock().unwrap();
            g.paused = false;
            std::mem::take(&mut g.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Closes it for good: the client crashed.
    pub fn kill(&self) {
        let mut g = self.inner.lock().unwrap();
        g.dead = true;
        g.paused = true;
    }

    /// Whether the client crashed.
    pub fn is_dead(&self) -> bool {
        self.inner.lock().unwrap().dead
    }

    /// Whether the client may run now (not paused, not crashed), for code that must not block
    /// to find out.
    pub fn is_open(&self) -> bool {
        !self.inner.lock().unwrap().paused
    }

    /// Ready while the gate is open; otherwise waits until it opens (forever, for a dead client).
    fn poll_open(&self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let mut g = self.inner.lock().unwrap();
        if g.paused {
            if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                g.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    /// Returns once the gate is open.
    pub async fn wait_open(&self) {
        std::future::poll_fn(|cx| self.poll_open(cx)).await
    }

    /// `task`, not polled while the gate is closed.
    pub async fn gated<F: Future<Output = ()>>(self, task: F) {
        let mut task = pin!(task);
        std::future::poll_fn(|cx| {
            if self.poll_open(cx).is_pending() {
                return Poll::Pending;
            }
            task.as_mut().poll(cx)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wall_clock_jump_moves_the_wall_clock_only() {
        let env = RealEnv::default();
        let (wall, mono) = (env.now_ms(), env.monotonic_ms());
        env.jump_wall(-10_000);
        let clone = env.clone();
        // Clones share the clocks; the monotonic clock goes on, the wall clock is 10 s behind.
        assert!(clone.monotonic_ms() >= mono);
        assert!(clone.monotonic_ms() < mono + 1_000);
        assert!(clone.now_ms() + 9_000 < wall);
        // A jump of the machine's time moves both.
        env.jump(5_000);
        assert!(env.monotonic_ms() >= mono + 5_000);
        assert!(env.now_ms() + 4_000 < env.monotonic_ms());
    }
}
