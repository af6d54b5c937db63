//! The environment seam: everything a lock needs from the world besides Redis.
//!
//! A lock asks its `Env` for the time (its node's clock, which in simulation may be offset,
//! drifting or jumping), to sleep, to spawn a background task (a watchdog) and for randomness (owner
//! tokens, retry jitter). Because locks never call tokio, madsim or the system clock directly, the
//! same lock code runs on real Redis and in the simulator, and in simulation every one of those is
//! deterministic.

pub mod switch;
pub mod wakeup;

pub use switch::Switch;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A named point: a place in a client's protocol where a fault can fire (`on = "<name>"` in a
/// scenario). The workload declares its own ([`crate::scenario::WORKLOAD_POINTS`]); a lock
/// declares those inside its protocol ([`crate::lock::Lock::POINTS`]) and passes them with
/// [`Env::point`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NamedPoint {
    /// The name scenarios use (`on = "before_del"`).
    pub name: &'static str,
    /// What has happened and what comes next when a client is there (`lockcheck list` shows it).
    pub about: &'static str,
}

impl NamedPoint {
    /// A point for a `POINTS` table; `const` so locks and the workload declare theirs as
    /// constants that `lockcheck list` and scenario validation read without running anything.
    pub const fn new(name: &'static str, about: &'static str) -> NamedPoint {
        NamedPoint { name, about }
    }
}

/// Where a client's named points lead: the nemesis, which may pause or crash the client there.
/// Built per client by the world; [`Env::point`] calls it.
#[derive(Clone)]
pub struct PointHook {
    hook: Arc<dyn Fn(&'static str) -> BoxedUnit + Send + Sync>,
}

type BoxedUnit = Pin<Box<dyn Future<Output = ()> + Send>>;

impl PointHook {
    /// A hook that runs `f` with the point's name each time the client reaches one; the world
    /// gives it the nemesis's schedule, so a point-triggered pause or crash happens right there.
    pub fn new<F, Fut>(f: F) -> PointHook
    where
        F: Fn(&'static str) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        PointHook {
            hook: Arc::new(move |p| Box::pin(f(p))),
        }
    }

    /// The client reached `point`.
    pub fn reached(&self, point: &'static str) -> impl Future<Output = ()> + Send {
        (self.hook)(point)
    }
}

/// Which of a node's clocks a lock measures its validity time with ([`crate::lock::Lock::validity_clock`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockKind {
    /// [`Env::monotonic_ms`]: right for durations.
    #[default]
    Monotonic,
    /// [`Env::now_ms`]: moves when the wall clock is corrected.
    Wall,
}

impl ClockKind {
    /// `env`'s reading of this clock.
    pub fn read<E: Env>(self, env: &E) -> u64 {
        match self {
            ClockKind::Monotonic => env.monotonic_ms(),
            ClockKind::Wall => env.now_ms(),
        }
    }
}

/// A handle to a spawned background task; dropping it does not stop the task, `abort` does.
pub struct TaskHandle {
    abort: Box<dyn FnOnce() + Send>,
}

impl TaskHandle {
    pub(crate) fn new(abort: impl FnOnce() + Send + 'static) -> Self {
        TaskHandle {
            abort: Box::new(abort),
        }
    }

    /// Stops the task at its next await point.
    pub fn abort(self) {
        (self.abort)()
    }
}

/// A node's view of the world: its clock, its timers, its tasks, its randomness.
pub trait Env: Clone + Send + Sync + 'static {
    /// This node's wall clock in unix milliseconds (`gettimeofday`, Java's `currentTimeMillis`).
    /// In simulation it may disagree with true time, and a wall-clock jump moves it backwards or
    /// forwards: measure durations with [`Env::monotonic_ms`].
    fn now_ms(&self) -> u64;

    /// This node's monotonic clock in milliseconds (`CLOCK_MONOTONIC`, Java's `nanoTime`): it
    /// never jumps, but runs at the node's rate (drift) and moves with `clock_jump` faults, which
    /// skew the whole machine's time. It reads the same as [`Env::now_ms`] until the wall clock
    /// alone jumps (`wall_clock_jump`). Leases, validity times and wait bounds use it.
    fn monotonic_ms(&self) -> u64 {
        self.now_ms()
    }
    /// Sleeps for `d` as measured by this node's clock.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;
    /// Spawns a background task on this node (it pauses and dies with the node).
    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static;
    /// A random 64-bit number (madsim's seeded RNG in simulation).
    fn random_u64(&self) -> u64;

    /// The lock reached a named point of its protocol (for example `after_setnx`, between two
    /// commands that should have been one). The nemesis may pause or crash the client here; without
    /// faults this returns at once.
    fn point(&self, name: &'static str) -> impl Future<Output = ()> + Send {
        let _ = name;
        async {}
    }

    /// Runs `task` for at most `d` as measured by this node's clock: `Some(output)` if it finished
    /// in time, `None` if the time ran out first (the task is then dropped, as a client library
    /// abandons a request whose reply is late). When both are ready at the same poll (a node that
    /// was paused while the reply arrived), the finished task wins.
    fn timeout<F>(&self, d: Duration, task: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
    {
        let timer = self.sleep(d);
        async move {
            let task = std::pin::pin!(task);
            let timer = std::pin::pin!(timer);
            match futures::future::select(task, timer).await {
                futures::future::Either::Left((out, _)) => Some(out),
                futures::future::Either::Right(_) => None,
            }
        }
    }

    /// A uniformly random value in `[lo, hi]`.
    fn random_range(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.random_u64() % (hi - lo + 1)
        }
    }

    /// A random (version 4) uuid built from this environment's randomness, so that owner tokens
    /// are reproducible in simulation.
    fn uuid(&self) -> uuid::Uuid {
        let hi = self.random_u64().to_be_bytes();
        let lo = self.random_u64().to_be_bytes();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi);
        b[8..].copy_from_slice(&lo);
        uuid::Builder::from_random_bytes(b).into_uuid()
    }
}
