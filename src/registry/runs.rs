//! Each registered kind's runs in both worlds, and running a scenario through them: the registry
//! keeps, per lock kind, a simulated run and a real one ([`crate::backend::redis::sim::run_with`],
//! [`crate::backend::redis::real::world::run_with`], the MySQL worlds' `run_with`), so a command runs a
//! scenario whichever its `[lock] kind`, in the world its backend needs.

use super::{Conn, NodeEnv, Registered, Registry};
use crate::history::History;
use crate::lock::{Lock, LockConfig, LockKind};
use crate::real::{ExternalRedis, RealError};
use crate::scenario::{OwnKind, Scenario};
use crate::sim::SimRun;
use serde::de::DeserializeOwned;

impl Registry {
    /// Keeps a Redis lock's runs (`backend::redis::runs`): simulated, on spawned servers, on
    /// servers lockcheck did not start.
    pub(super) fn add_redis<P, L, F>(&mut self, kind: LockKind, own: Option<OwnKind>, make: F)
    where
        P: DeserializeOwned + Clone + Send + Sync + 'static,
        L: Lock + 'static,
        F: Fn(LockConfig<P>, Vec<Conn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let (sim, real) = crate::backend::redis::runs::<P, L, F>(kind, make);
        self.locks.push(Registered {
            kind,
            own,
            sim,
            real,
        });
    }

    fn registered(&self, s: &Scenario) -> &Registered {
        self.locks
            .iter()
            .find(|r| r.kind == s.lock.kind)
            .unwrap_or_else(|| {
                panic!(
                    "{}: lock kind `{}` is not registered here",
                    s.name,
                    s.lock.kind.name()
                )
            })
    }

    /// Runs `s` with `seed` in simulation, whichever its lock kind.
    ///
    /// # Panics
    ///
    /// For a client-program scenario, which only real mode can run (the commands refuse it
    /// before they get here, with the reason).
    pub fn run_sim(&self, s: &Scenario, seed: u64) -> SimRun {
        (self.registered(s).sim)(s, seed)
    }

    /// Runs `s` on spawned servers, whichever its lock kind; a run past twice its estimate is
    /// cut there ([`crate::real::run_end::within_twice_estimate`]).
    pub fn run_real(&self, s: &Scenario, seed: u64) -> Result<History, RealError> {
        crate::real::run_end::within_twice_estimate(s, || (self.registered(s).real)(s, seed, None))
    }

    /// Runs `s` against servers lockcheck did not start
    /// ([`crate::backend::redis::real::world::run_external_with`]), whichever its lock kind.
    pub fn run_external(
        &self,
        s: &Scenario,
        seed: u64,
        ext: &ExternalRedis,
    ) -> Result<History, RealError> {
        (self.registered(s).real)(s, seed, Some(ext))
    }
}
