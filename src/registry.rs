//! The lock kinds a program runs: lockcheck's own, and the locks of the user's own that the
//! program registered (`lockcheck::Harness::lock`, which keeps one of these).
//!
//! A registered lock is written once, against [`Conn`] and [`NodeEnv`]: each is the simulated
//! one in simulation and the real one on spawned servers, so one constructor serves both worlds.
//! Registering it keeps a simulated run and a real run of it ([`crate::sim::run_with`],
//! [`crate::real::redis_world::run_with`]); the search, the commands and the scenario parser go
//! through a [`Registry`], which runs a scenario's `[lock] kind` whichever it is, so `lockcheck`
//! itself is the registry with no lock of the user's own.

use crate::env::{Env, RealEnv, TaskHandle};
use crate::history::History;
use crate::lock::{Lock, LockConfig, LockKind};
use crate::real::external::ExternalRedis;
use crate::real::subscription::RealSubscription;
use crate::real::{RealError, RoutedConnection};
use crate::scenario::own::read_params;
use crate::scenario::{OwnKind, Scenario, ScenarioError};
use crate::sim::subscription::SimSubscription;
use crate::sim::{SimConnection, SimEnv, SimRun};
use crate::subscription::{Subscribe, Subscription};
use futures::future::Either;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use serde::de::DeserializeOwned;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

type SimRunner = dyn Fn(&Scenario, u64) -> SimRun + Send + Sync;
type RealRunner =
    dyn Fn(&Scenario, u64, Option<&ExternalRedis>) -> Result<History, RealError> + Send + Sync;

/// A lock of the user's own: its kind as scenarios see it, and its runs in both worlds.
#[derive(Clone)]
struct Registered {
    kind: OwnKind,
    sim: Arc<SimRunner>,
    real: Arc<RealRunner>,
}

/// The lock kinds a program can run: lockcheck's own ([`LockKind::ALL`]) and those registered.
#[derive(Clone, Default)]
pub struct Registry {
    own: Vec<Registered>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "own",
                &self.own.iter().map(|r| r.kind.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Registry {
    /// lockcheck's own kinds only: what the `lockcheck` binary runs.
    pub fn new() -> Self {
        Registry::default()
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
            self.own.iter().all(|r| r.kind.name != name),
            "lock kind `{name}` is registered twice"
        );
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
        self.own.push(Registered {
            kind: OwnKind::new::<P>(name, L::POINTS),
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
        self
    }

    /// The registered kinds, in registration order.
    pub fn own_kinds(&self) -> Vec<OwnKind> {
        self.own.iter().map(|r| r.kind).collect()
    }

    /// Parses scenario text whose `[lock] kind` may name a registered lock.
    pub fn parse(&self, file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with_locks(file, text, &self.own_kinds())
    }

    /// Reads a scenario file whose `[lock] kind` may name a registered lock.
    pub fn load(&self, path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_with_locks(path, &self.own_kinds())
    }

    fn registered(&self, s: &Scenario) -> Option<&Registered> {
        match s.lock.kind {
            LockKind::Own(name) => Some(
                self.own
                    .iter()
                    .find(|r| r.kind.name == name)
                    .unwrap_or_else(|| {
                        panic!("{}: lock kind `{name}` is not registered here", s.name)
                    }),
            ),
            _ => None,
        }
    }

    /// Runs `s` with `seed` in simulation, whichever its lock kind.
    pub fn run_sim(&self, s: &Scenario, seed: u64) -> SimRun {
        match self.registered(s) {
            Some(r) => (r.sim)(s, seed),
            None => crate::sim::run(s, seed),
        }
    }

    /// Runs `s` on spawned servers ([`crate::real::redis_world::run`]), whichever its lock kind.
    pub fn run_real(&self, s: &Scenario, seed: u64) -> Result<History, RealError> {
        match self.registered(s) {
            Some(r) => (r.real)(s, seed, None),
            None => crate::real::redis_world::run(s, seed),
        }
    }

    /// Runs `s` against servers lockcheck did not start
    /// ([`crate::real::redis_world::run_external`]), whichever its lock kind.
    pub fn run_external(
        &self,
        s: &Scenario,
        seed: u64,
        ext: &ExternalRedis,
    ) -> Result<History, RealError> {
        match self.registered(s) {
            Some(r) => (r.real)(s, seed, Some(ext)),
            None => crate::real::redis_world::run_external(s, seed, ext),
        }
    }
}

/// The connection a registered lock gets: to a simulated server in simulation, to a spawned
/// `redis-server` in real mode. A [`redis::aio::ConnectionLike`], so `redis::cmd(..).query_async`
/// and `redis::Script::invoke_async` work on it, and [`Subscribe`] for pub/sub.
#[derive(Clone)]
pub enum Conn {
    /// Simulation.
    Sim(SimConnection),
    /// Real servers.
    Real(RoutedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Sim(c) => c.req_packed_command(cmd),
            Conn::Real(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Sim(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Real(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Sim(c) => c.get_db(),
            Conn::Real(c) => c.get_db(),
        }
    }
}

/// A [`Conn`]'s subscriber connection.
pub enum ConnSubscription {
    /// Simulation.
    Sim(SimSubscription),
    /// Real servers.
    Real(RealSubscription),
}

impl Subscribe for Conn {
    type Subscription = ConnSubscription;

    fn subscription(&self) -> ConnSubscription {
        match self {
            Conn::Sim(c) => ConnSubscription::Sim(c.subscription()),
            Conn::Real(c) => ConnSubscription::Real(c.subscription()),
        }
    }
}

impl Subscription for ConnSubscription {
    fn subscribe(&mut self, channel: &str) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.subscribe(channel)),
            ConnSubscription::Real(s) => Either::Right(s.subscribe(channel)),
        }
    }

    fn unsubscribe(
        &mut self,
        channel: &str,
    ) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.unsubscribe(channel)),
            ConnSubscription::Real(s) => Either::Right(s.unsubscribe(channel)),
        }
    }

    fn next_message(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.next_message()),
            ConnSubscription::Real(s) => Either::Right(s.next_message()),
        }
    }
}

/// The environment a registered lock gets: its simulated node's in simulation, the real one on
/// spawned servers. Every method is the world's own, so clock faults reach the lock as they
/// reach lockcheck's locks.
#[derive(Clone)]
pub enum NodeEnv {
    /// Simulation.
    Sim(SimEnv),
    /// Real servers.
    Real(RealEnv),
}

impl Env for NodeEnv {
    fn now_ms(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.now_ms(),
            NodeEnv::Real(e) => e.now_ms(),
        }
    }

    fn monotonic_ms(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.monotonic_ms(),
            NodeEnv::Real(e) => e.monotonic_ms(),
        }
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.sleep(d)),
            NodeEnv::Real(e) => Either::Right(e.sleep(d)),
        }
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self {
            NodeEnv::Sim(e) => e.spawn(task),
            NodeEnv::Real(e) => e.spawn(task),
        }
    }

    fn random_u64(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.random_u64(),
            NodeEnv::Real(e) => e.random_u64(),
        }
    }

    fn point(&self, name: &'static str) -> impl Future<Output = ()> + Send {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.point(name)),
            NodeEnv::Real(e) => Either::Right(e.point(name)),
        }
    }

    fn timeout<F>(&self, d: Duration, task: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
    {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.timeout(d, task)),
            NodeEnv::Real(e) => Either::Right(e.timeout(d, task)),
        }
    }
}
