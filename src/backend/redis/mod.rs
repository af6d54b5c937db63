//! Redis: the lease locks of the articles (naive `SETNX`+`EXPIRE`, `SET NX PX` with a Lua
//! compare-and-delete, Lettuce's reentrant lock, Redisson's `RLock`, Redlock, fencing tokens) on
//! masters with asynchronous replicas, failed over by hand or by Sentinel, simulated or spawned
//! `redis-server` processes, or servers lockcheck did not start (`--redis`).
//!
//! The protected resource lives on a Redis server in every world, whatever the lock's service;
//! that server and the connection to it are world-generic (`src/real/servers/redis_server.rs`,
//! `src/real/connection.rs`, `src/sim/storage.rs`).

pub mod declaration;
pub mod engine;
pub mod lock;
pub mod real;
pub mod sim;
pub mod switch;
pub mod table;

use crate::env::Switch;
use crate::history::History;
use crate::lock::{Backend, Lock, LockConfig, LockKind, Origin};
use crate::real::{ExternalRedis, RealEnv, RealError, RealRunner, RoutedConnection};
use crate::scenario::own::read_params;
use crate::scenario::Scenario;
use crate::sim::{SimEnv, SimRunner};
use lock::{
    fenced, lettuce_reentrant, naive_setnx_expire, redisson, redlock, set_ex_nx_del, set_nx_px,
    Fenced, LettuceReentrant, NaiveSetnxExpire, Redisson, Redlock, SetExNxDel, SetNxPx,
};
use serde::de::DeserializeOwned;
use std::sync::Arc;

pub use declaration::{Redis, SERVICE};

/// The connection a registered Redis lock gets: to a simulated server in simulation, to a
/// spawned `redis-server` in real mode (`registry::Conn`). A [`redis::aio::ConnectionLike`], so
/// `redis::cmd(..).query_async` and `redis::Script::invoke_async` work on it, and
/// [`crate::subscription::Subscribe`] for pub/sub.
pub type Conn = crate::env::Switch<sim::SimConnection, crate::real::RoutedConnection>;

/// A [`Conn`]'s subscriber connection.
pub type ConnSubscription =
    crate::env::Switch<sim::subscription::SimSubscription, real::subscription::RealSubscription>;

/// The Redis locks lockcheck ships, each with its runs, in `lockcheck list` order.
pub fn locks() -> Vec<(LockKind, Arc<SimRunner>, Arc<RealRunner>)> {
    fn builtin<L, F>(name: &'static str, make: F) -> (LockKind, Arc<SimRunner>, Arc<RealRunner>)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Conn>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
    {
        let kind = LockKind::of::<L>(name, Backend::on(SERVICE), Origin::Builtin);
        let (sim, real) = runs::<(), _, _>(kind, make);
        (kind, sim, real)
    }
    vec![
        builtin(set_nx_px::NAME, SetNxPx::new),
        builtin(set_ex_nx_del::NAME, SetExNxDel::new),
        builtin(naive_setnx_expire::NAME, NaiveSetnxExpire::new),
        builtin(lettuce_reentrant::NAME, LettuceReentrant::new),
        builtin(redisson::NAME, Redisson::new),
        builtin(fenced::NAME, Fenced::new),
        builtin(redlock::NAME, Redlock::new),
    ]
}

/// A Redis lock's runs: simulated, on spawned servers, and on servers lockcheck did not start
/// (`--redis`). `make` gets the scenario's `[lock]` with its `[lock.params]` read into `P` (a
/// lock of the user's own; `()` for lockcheck's), one connection per master group and the
/// client's environment.
pub fn runs<P, L, F>(kind: LockKind, make: F) -> (Arc<SimRunner>, Arc<RealRunner>)
where
    P: DeserializeOwned + Clone + Send + Sync + 'static,
    L: Lock + 'static,
    F: Fn(LockConfig<P>, Vec<Conn>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
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
            sim::run_with(s, seed, |config, conns, env| {
                make(
                    config.with_params(p.clone()),
                    conns.into_iter().map(Switch::Sim).collect(),
                    Switch::Sim(env),
                )
            })
        }
    };
    let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| {
        let p = params(s);
        let build = |config: LockConfig, conns: Vec<RoutedConnection>, env| {
            make(
                config.with_params(p.clone()),
                conns.into_iter().map(Switch::Real).collect(),
                Switch::Real(env),
            )
        };
        match ext {
            Some(ext) => real::world::run_external_with(s, seed, ext, build),
            None => real::world::run_with(s, seed, build),
        }
    };
    (Arc::new(sim), Arc::new(real))
}

/// Client programs (any language) on Redis: real mode only, on spawned servers or (`--redis`)
/// on servers lockcheck did not start.
pub fn run_client_programs(
    s: &Scenario,
    seed: u64,
    ext: Option<&ExternalRedis>,
) -> Result<History, RealError> {
    real::world::run_client_programs(s, seed, ext)
}
