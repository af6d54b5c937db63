//! The simulated environment: madsim's timers and RNG, and this node's own skewed clocks (wall
//! and monotonic).

use super::{Env, PointHook, TaskHandle};
use crate::sim::clock::Clocks;
use std::future::Future;
use std::time::Duration;

/// A simulated node's environment. Must be used inside a madsim runtime, on the node it belongs to.
#[derive(Clone)]
pub struct SimEnv {
    clocks: Clocks,
    node: usize,
    points: Option<PointHook>,
}

impl SimEnv {
    /// The environment of node `node` (an index into `clocks`).
    pub fn new(clocks: Clocks, node: usize) -> Self {
        SimEnv {
            clocks,
            node,
            points: None,
        }
    }

    /// Sends this client's named points to `hook` (the nemesis).
    pub fn with_points(mut self, hook: PointHook) -> Self {
        self.points = Some(hook);
        self
    }
}

impl Env for SimEnv {
    fn now_ms(&self) -> u64 {
        self.clocks.now_ms(self.node)
    }

    fn monotonic_ms(&self) -> u64 {
        self.clocks.monotonic_ms(self.node)
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        // A drifting clock measures `d` in more or less true time.
        madsim::time::sleep(self.clocks.true_duration(self.node, d))
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let h = madsim::task::spawn(task);
        TaskHandle::new(move || h.abort())
    }

    fn random_u64(&self) -> u64 {
        madsim::rand::random::<u64>()
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
