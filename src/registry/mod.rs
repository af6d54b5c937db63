//! The lock kinds a program runs: lockcheck's own and the locks of the user's own that the
//! program registered (`lockcheck::Harness::lock`, which keeps one of these), registered the same
//! way: a name and a constructor (`lock::builtin` is lockcheck's list, through [`Registrar`]).
//!
//! A registered lock is written once, against [`Conn`] (or [`Db`]) and [`NodeEnv`]: each is the
//! simulated one in simulation and the real one on spawned servers, so one constructor serves
//! both worlds. Registering it keeps a simulated run and a real run of it ([`crate::sim::run_with`],
//! [`crate::real::redis_world::run_with`], the MySQL worlds' `run_with`); the search, the commands
//! and the scenario parser go through a [`Registry`], which runs a scenario's `[lock] kind`
//! whichever it is, so `lockcheck` itself is the registry with no lock of the user's own.

mod seams;

pub use seams::{Conn, ConnSubscription, Db, NodeEnv};

use crate::history::History;
use crate::lock::mysql::DatabaseLock;
use crate::lock::{builtin, Backend, Lock, LockConfig, LockKind, Origin, Registrar};
use crate::real::external::ExternalRedis;
use crate::real::{RealError, RoutedConnection};
use crate::scenario::own::read_params;
use crate::scenario::{OwnKind, Scenario, ScenarioError};
use crate::sim::SimRun;
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::Arc;

type SimRunner = dyn Fn(&Scenario, u64) -> SimRun + Send + Sync;
type RealRunner =
    dyn Fn(&Scenario, u64, Option<&ExternalRedis>) -> Result<History, RealError> + Send + Sync;

/// A registered lock kind: as scenarios see it, and its runs in both worlds.
#[derive(Clone)]
struct Registered {
    kind: LockKind,
    /// A lock of the user's own: how its scenarios' `[lock.params]` are checked.
    own: Option<OwnKind>,
    sim: Arc<SimRunner>,
    real: Arc<RealRunner>,
}

/// The lock kinds a program can run: lockcheck's own ([`builtin::register`]) and those the
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
        let mut registry = Registry { locks: Vec::new() };
        builtin::register(&mut Builtins(&mut registry));
        registry
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
        let kind = LockKind::of::<L>(name, Backend::Redis, Origin::Own);
        self.add_redis(kind, Some(OwnKind::new::<P>(kind)), make);
        self
    }

    /// Keeps a Redis lock's runs: simulated, on spawned servers, on servers lockcheck did not
    /// start.
    fn add_redis<P, L, F>(&mut self, kind: LockKind, own: Option<OwnKind>, make: F)
    where
        P: DeserializeOwned + Clone + Send + Sync + 'static,
        L: Lock + 'static,
        F: Fn(LockConfig<P>, Vec<Conn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let name = kind.name();
        let make = Arc::new(make);
        let params = move |s: &Scenario| -> P {
            read_params(s.lock.params.as_ref()).unwrap_or_else(|m| {
                panic!(
                    "{}: [lock.params] of lock kind `{name}`: {m} (parse the scenario with the registry, which checks them)",
                    s.name
                )
            })
        };
        let sim = {
            let make = make.clone();
            move |s: &Scenario, seed: u64| {
                let p = params(s);
                crate::sim::run_with(s, seed, |config, conns, env| {
                    make(
                        config.with_params(p.clone()),
                        conns.into_iter().map(Conn::Sim).collect(),
                        NodeEnv::Sim(env),
                    )
                })
            }
        };
        let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| {
            let p = params(s);
            let build = |config: LockConfig, conns: Vec<RoutedConnection>, env| {
                make(
                    config.with_params(p.clone()),
                    conns.into_iter().map(Conn::Real).collect(),
                    NodeEnv::Real(env),
                )
            };
            match ext {
                Some(ext) => crate::real::redis_world::run_external_with(s, seed, ext, build),
                None => crate::real::redis_world::run_with(s, seed, build),
            }
        };
        self.locks.push(Registered {
            kind,
            own,
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
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

    /// Runs `s` on spawned servers, whichever its lock kind.
    pub fn run_real(&self, s: &Scenario, seed: u64) -> Result<History, RealError> {
        (self.registered(s).real)(s, seed, None)
    }

    /// Runs `s` against servers lockcheck did not start
    /// ([`crate::real::redis_world::run_external_with`]), whichever its lock kind.
    pub fn run_external(
        &self,
        s: &Scenario,
        seed: u64,
        ext: &ExternalRedis,
    ) -> Result<History, RealError> {
        (self.registered(s).real)(s, seed, Some(ext))
    }
}

/// lockcheck's own locks registering: the registry's own path ([`Registry::add_redis`]), with
/// the database and client-program worlds besides.
struct Builtins<'a>(&'a mut Registry);

impl Registrar for Builtins<'_> {
    type Conn = Conn;
    type Db = Db;
    type Env = NodeEnv;

    fn redis<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Conn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let kind = LockKind::of::<L>(name, Backend::Redis, Origin::Builtin);
        self.0.add_redis(kind, None, make);
    }

    fn database<L, F>(&mut self, name: &'static str, make: F)
    where
        L: DatabaseLock + 'static,
        F: Fn(LockConfig, Vec<Db>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        let sim = {
            let make = make.clone();
            move |s: &Scenario, seed: u64| {
                crate::sim::mysql_world::run_with(s, seed, |config, conn, env| {
                    make(config, vec![Db::Sim(conn)], NodeEnv::Sim(env))
                })
            }
        };
        let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| match ext {
            Some(_) => Err(RealError::External(format!(
                "{}: --redis does not apply to the MySQL locks (they use a spawned MariaDB)",
                s.name
            ))),
            None => crate::real::mysql_world::run_with(s, seed, |config, conn, env| {
                make(config, vec![Db::Real(conn)], NodeEnv::Real(env))
            }),
        };
        self.0.locks.push(Registered {
            kind: LockKind::of::<L>(name, Backend::Database, Origin::Builtin),
            own: None,
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
    }

    fn client_program(&mut self, kind: LockKind) {
        let sim = move |s: &Scenario, _seed: u64| -> SimRun {
            panic!(
                "{}: lock kind `{}` runs in real mode only (--real): its lock is a separate program, which only real mode starts",
                s.name,
                kind.name()
            )
        };
        let real = |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| {
            crate::real::redis_world::run_client_programs(s, seed, ext)
        };
        self.0.locks.push(Registered {
            kind,
            own: None,
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
    }
}
