//! Each registered kind's runs in both worlds, and running a scenario through them: the registry
//! keeps, per lock kind, a simulated run and a real one ([`crate::backend::redis::sim::run_with`],
//! [`crate::backend::redis::real::world::run_with`], the MySQL worlds' `run_with`), so a command runs a
//! scenario whichever its `[lock] kind`, in the world its backend needs.

use super::{Conn, Db, EtcdConn, NodeEnv, Registered, Registry, ZkConn};
use crate::backend::redis::real::external::ExternalRedis;
use crate::history::History;
use crate::lock::mysql::DatabaseLock;
use crate::lock::{Backend, Lock, LockConfig, LockKind, Origin, Registrar, Service};
use crate::real::{RealError, RoutedConnection};
use crate::scenario::own::read_params;
use crate::scenario::{OwnKind, Scenario};
use crate::sim::SimRun;
use serde::de::DeserializeOwned;
use std::sync::Arc;

pub(super) type SimRunner = dyn Fn(&Scenario, u64) -> SimRun + Send + Sync;
pub(super) type RealRunner =
    dyn Fn(&Scenario, u64, Option<&ExternalRedis>) -> Result<History, RealError> + Send + Sync;

impl Registry {
    /// Keeps a Redis lock's runs: simulated, on spawned servers, on servers lockcheck did not
    /// start.
    pub(super) fn add_redis<P, L, F>(&mut self, kind: LockKind, own: Option<OwnKind>, make: F)
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
                crate::backend::redis::sim::run_with(s, seed, |config, conns, env| {
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
                Some(ext) => {
                    crate::backend::redis::real::world::run_external_with(s, seed, ext, build)
                }
                None => crate::backend::redis::real::world::run_with(s, seed, build),
            }
        };
        self.locks.push(Registered {
            kind,
            own,
            sim: Arc::new(sim),
            real: Arc::new(real),
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

    /// Runs `s` on spawned servers, whichever its lock kind.
    pub fn run_real(&self, s: &Scenario, seed: u64) -> Result<History, RealError> {
        (self.registered(s).real)(s, seed, None)
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

/// lockcheck's own locks registering: the registry's own path ([`Registry::add_redis`]), with
/// the database and client-program worlds besides.
pub(super) struct Builtins<'a>(pub(super) &'a mut Registry);

impl Registrar for Builtins<'_> {
    type Conn = Conn;
    type Db = Db;
    type Etcd = EtcdConn;
    type Zk = ZkConn;
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
                crate::backend::mysql::sim::world::run_with(s, seed, |config, conn, env| {
                    make(config, vec![Db::Sim(conn)], NodeEnv::Sim(env))
                })
            }
        };
        let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| match ext {
            Some(_) => Err(RealError::External(format!(
                "{}: --redis does not apply to the MySQL locks (they use a spawned MariaDB)",
                s.name
            ))),
            None => crate::backend::mysql::real::world::run_with(s, seed, |config, conn, env| {
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

    fn etcd<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<EtcdConn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        let sim = {
            let make = make.clone();
            move |s: &Scenario, seed: u64| {
                crate::backend::etcd::sim::world::run_with(s, seed, |config, conn, env| {
                    make(config, vec![EtcdConn::Sim(conn)], NodeEnv::Sim(env))
                })
            }
        };
        let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| match ext {
            Some(_) => Err(RealError::External(format!(
                "{}: --redis does not apply to the etcd locks (they use spawned etcd members)",
                s.name
            ))),
            None => crate::backend::etcd::real::world::run_with(s, seed, |config, conn, env| {
                make(config, vec![EtcdConn::Real(conn)], NodeEnv::Real(env))
            }),
        };
        self.0.locks.push(Registered {
            kind: LockKind::of::<L>(name, Backend::Etcd, Origin::Builtin),
            own: None,
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
    }

    fn zookeeper<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<ZkConn>, NodeEnv) -> L + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        let sim = {
            let make = make.clone();
            move |s: &Scenario, seed: u64| {
                crate::backend::zookeeper::sim::world::run_with(s, seed, |config, conn, env| {
                    make(config, vec![ZkConn::Sim(conn)], NodeEnv::Sim(env))
                })
            }
        };
        let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| match ext {
            Some(_) => Err(RealError::External(format!(
                "{}: --redis does not apply to the ZooKeeper locks (they use spawned ZooKeeper \
                 servers)",
                s.name
            ))),
            None => {
                crate::backend::zookeeper::real::world::run_with(s, seed, |config, conn, env| {
                    make(config, vec![ZkConn::Real(conn)], NodeEnv::Real(env))
                })
            }
        };
        self.0.locks.push(Registered {
            kind: LockKind::of::<L>(name, Backend::ZooKeeper, Origin::Builtin),
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
        // The service the scenario's programs speak to picks the world (`scenario/service.rs`).
        let real =
            |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| match (s.lock.service, ext) {
                (Service::Redis, ext) => {
                    crate::backend::redis::real::world::run_client_programs(s, seed, ext)
                }
                (Service::Etcd, None) => {
                    crate::backend::etcd::real::world::run_client_programs(s, seed)
                }
                (Service::ZooKeeper, None) => {
                    crate::backend::zookeeper::real::world::run_client_programs(s, seed)
                }
                (service, _) => Err(RealError::External(format!(
                    "{}: --redis does not apply to client programs on {service:?} (they run on \
                 spawned servers)",
                    s.name
                ))),
            };
        self.0.locks.push(Registered {
            kind,
            own: None,
            sim: Arc::new(sim),
            real: Arc::new(real),
        });
    }
}
