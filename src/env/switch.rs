//! The world switch: one value that is the simulated side of a seam or the real one. A lock is
//! written against a seam's trait and registered once; the registry hands it a `Switch` of the
//! two sides, so one constructor serves both worlds. Each seam forwards its trait through
//! `Switch` once, beside the seam's own code (this file for [`Env`]; each backend's
//! `switch.rs` for its client), as madsim keeps a service's simulation and its real client
//! behind one import path.

use super::{Env, TaskHandle};
use futures::future::Either;
use std::future::Future;
use std::time::Duration;

/// The simulated side or the real side of a seam.
#[derive(Clone, Debug)]
pub enum Switch<S, R> {
    /// Simulation.
    Sim(S),
    /// Real servers.
    Real(R),
}

impl<S: Env, R: Env> Env for Switch<S, R> {
    fn now_ms(&self) -> u64 {
        match self {
            Switch::Sim(e) => e.now_ms(),
            Switch::Real(e) => e.now_ms(),
        }
    }

    fn monotonic_ms(&self) -> u64 {
        match self {
            Switch::Sim(e) => e.monotonic_ms(),
            Switch::Real(e) => e.monotonic_ms(),
        }
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        match self {
            Switch::Sim(e) => Either::Left(e.sleep(d)),
            Switch::Real(e) => Either::Right(e.sleep(d)),
        }
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self {
            Switch::Sim(e) => e.spawn(task),
            Switch::Real(e) => e.spawn(task),
        }
    }

    fn random_u64(&self) -> u64 {
        match self {
            Switch::Sim(e) => e.random_u64(),
            Switch::Real(e) => e.random_u64(),
        }
    }

    fn point(&self, name: &'static str) -> impl Future<Output = ()> + Send {
        match self {
            Switch::Sim(e) => Either::Left(e.point(name)),
            Switch::Real(e) => Either::Right(e.point(name)),
        }
    }

    fn timeout<F>(&self, d: Duration, task: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
    {
        match self {
            Switch::Sim(e) => Either::Left(e.timeout(d, task)),
            Switch::Real(e) => Either::Right(e.timeout(d, task)),
        }
    }
}
