//! The simulated environment: madsim's timers and RNG, and this node's own skewed clocks (wall
//! and monotonic).

use super::clock::Clocks;
use crate::env::wakeup;
use crate::env::{Env, PointHook, TaskHandle};
use std::future::Future;
use std::task::{Poll, Waker};
use std::time::Duration;

/// A simulated node's environment. Must be used inside a madsim runtime, on the node it belongs to.
#[derive(Clone)]
pub struct SimEnv {
    clocks: Clocks,
    node: usize,
    points: Option<PointHook>,
    /// madsim's seeded RNG, kept (`madsim::rand::random` looks it up on every draw).
    rng: madsim::rand::GlobalRng,
}

impl SimEnv {
    /// The environment of node `node` (an index into `clocks`). Call inside a madsim runtime.
    pub fn new(clocks: Clocks, node: usize) -> Self {
        SimEnv {
            clocks,
            node,
            points: None,
            rng: madsim::rand::thread_rng(),
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
        self.clocks.sleep(self.node, d)
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let h = madsim::task::spawn(task);
        TaskHandle::new(move || h.abort())
    }

    fn random_u64(&self) -> u64 {
        rand::RngCore::next_u64(&mut self.rng.clone())
    }

    /// As [`Env::timeout`] (the task first, then the timer), but the timer is armed only when
    /// needed: not while the task has armed a [`Wakeup`](wakeup::Wakeup) that wakes it by the deadline, and then
    /// once (a madsim `Sleep` adds a timer on every pending poll). See [`super::wakeup`].
    fn timeout<F>(&self, d: Duration, task: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
    {
        // A drifting clock measures `d` in more or less true time.
        let timer = self.clocks.sleep(self.node, d);
        async move {
            let mut task = std::pin::pin!(task);
            let mut timer = std::pin::pin!(timer);
            let mut armed: Option<Waker> = None;
            std::future::poll_fn(|cx| {
                let (polled, woken_at) = wakeup::watch(|| task.as_mut().poll(cx));
                if let Poll::Ready(out) = polled {
                    return Poll::Ready(Some(out));
                }
                if timer.is_elapsed() {
                    return Poll::Ready(None);
                }
                let task_wakes_in_time = woken_at.is_some_and(|t| t <= timer.sleep_deadline());
                let is_armed = armed.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
                if !task_wakes_in_time && !is_armed {
                    if timer.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                    armed = Some(cx.waker().clone());
                }
                Poll::Pending
            })
            .await
        }
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
