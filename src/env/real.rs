//! The real environment: tokio timers, the system clock, the OS's randomness.

use super::{Env, TaskHandle};
use rand::{RngCore, SeedableRng};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Real time and real tasks; must be used inside a tokio runtime.
#[derive(Clone)]
pub struct RealEnv {
    rng: Arc<Mutex<rand::rngs::SmallRng>>,
}

impl Default for RealEnv {
    fn default() -> Self {
        RealEnv {
            rng: Arc::new(Mutex::new(rand::rngs::SmallRng::from_entropy())),
        }
    }
}

impl Env for RealEnv {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
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
