//! The lock kinds a program runs: lockcheck's own and the locks of the user's own that the
//! program registered (`lockcheck::Harness::lock`, which keeps one of these), registered the same
//! way: a name and a constructor, with its runs in both worlds (lockcheck's are each backend's
//! `locks()`, in `backend::BACKENDS` order). This file is the table of kinds; `runs.rs` runs a
//! scenario through a kind's runs.
//!
//! A registered lock is written once, against [`Conn`] (or [`Db`]) and [`NodeEnv`]: each is the
//! simulated one in simulation and the real one on spawned servers, so one constructor serves
//! both worlds. Registering it keeps a simulated run and a real run of it ([`crate::backend::redis::sim::run_with`],
//! [`crate::backend::redis::real::world::run_with`], the MySQL worlds' `run_with`); the search, the commands
//! and the scenario parser go through a [`Registry`], which runs a scenario's `[lock] kind`
//! whichever it is, so `lockcheck` itself is the registry with no lock of the user's own.

mod runs;
mod seams;

pub use crate::real::RealRunner;
pub use crate::sim::SimRunner;
pub use seams::{Conn, ConnSubscription, Db, EtcdConn, NodeEnv, ZkConn};

use crate::lock::{Backend, Lock, LockConfig, LockKind, Origin};
use crate::scenario::{OwnKind, Scenario, ScenarioError};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::Arc;

/// A registered lock kind: as scenarios see it, and its runs in both worlds.
#[derive(Clone)]
struct Registered {
    kind: LockKind,
    /// A lock of the user's own: how its scenarios' `[lock.params]` are checked.
    own: Option<OwnKind>,
    sim: Arc<SimRunner>,
    real: Arc<RealRunner>,
}

/// The lock kinds a program can run: lockcheck's own (`backend::BACKENDS`'s locks) and those the
/// program registered.
#[derive(Clone)]
pub struct Registry {
    locks: Vec<Registered>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "own",
                &self
                    .own_kinds()
                    .iter()
                    .map(|o| o.kind.name())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// lockcheck's own kinds only: what the `lockcheck` binary runs.
    pub fn new() -> Self {
        let locks = crate::backend::lock_runs()
            .into_iter()
            .map(|(kind, sim, real)| Registered {
                kind,
                own: None,
                sim,
                real,
            })
            .collect();
        Registry { locks }
    }

    /// Registers a lock of your own as `[lock] kind = "<name>"`. `make` builds one client's lock
    /// from the scenario's `[lock]` (its `[lock.params]` read into `P`, `()` for none), one
    /// connection per master group and the client's environment.
    ///
    /// # Panics
    ///
    /// When `name` is empty, a kind lockcheck ships, or already registered: a program that
    /// registers two locks under one name is wrong before it runs anything.
    pub fn register<P, L, F>(&mut self, name: &'static str, make: F) -> &mut Self
    where
        P: DeserializeOwned + Clone + Send + Sync + 'static,
        L: Lock + 'static,
        F: Fn(LockConfig<P>, Vec<Conn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        assert!(!name.is_empty(), "a lock kind's name cannot be empty");
        assert!(
            LockKind::builtin(name).is_none(),
            "`{name}` is a lock kind lockcheck ships: register your lock under another name"
        );
        assert!(
            self.locks.iter().all(|r| !r.kind.answers_to(name)),
            "lock kind `{name}` is registered twice"
        );
        let kind = LockKind::of::<L>(
            name,
            Backend::on(crate::backend::redis::SERVICE),
            Origin::Own,
        );
        self.add_redis(kind, Some(OwnKind::new::<P>(kind)), make);
        self
    }

    /// Every kind this program runs, lockcheck's first, in registration order.
    pub fn kinds(&self) -> Vec<LockKind> {
        self.locks.iter().map(|r| r.kind).collect()
    }

    /// The kinds of the user's own, in registration order.
    pub fn own_kinds(&self) -> Vec<OwnKind> {
        self.locks.iter().filter_map(|r| r.own).collect()
    }

    /// Parses scenario text whose `[lock] kind` may name a registered lock.
    pub fn parse(&self, file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with_locks(file, text, &self.own_kinds())
    }

    /// Reads a scenario file whose `[lock] kind` may name a registered lock.
    pub fn load(&self, path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_with_locks(path, &self.own_kinds())
    }
}
