//! ZooKeeper: sessions, ephemeral sequential znodes and watches, the lock recipes of Curator and the ZooKeeper documentation, and an ensemble with leader election and lagging followers.

pub mod declaration;
pub mod engine;
pub mod lock;
pub mod real;
pub mod seam;
pub mod sim;
pub mod switch;
pub mod table;

use crate::env::Switch;
use crate::history::History;
use crate::lock::{Backend, Lock, LockConfig, LockKind, Origin};
use crate::real::RealError;
use crate::real::{no_external, ExternalRedis, RealEnv, RealRunner};
use crate::scenario::Scenario;
use crate::sim::{SimEnv, SimRunner};
use lock::Variant as _;
use std::sync::Arc;

pub use declaration::{ZooKeeper, SERVICE};

/// The ZooKeeper session a registered ZooKeeper lock gets: on the simulated service, or on
/// spawned ZooKeeper servers.
pub type ZkConn = crate::env::Switch<sim::SimZkClient, real::RealZkClient>;

/// The ZooKeeper locks lockcheck ships, each with its runs in both worlds, in `lockcheck list` order.
pub fn locks() -> Vec<(LockKind, Arc<SimRunner>, Arc<RealRunner>)> {
    vec![
        runs(lock::Plain::NAME, lock::ZkRecipe::<_, _, lock::Plain>::new),
        runs(
            lock::Listener::NAME,
            lock::ZkRecipe::<_, _, lock::Listener>::new,
        ),
        runs(
            lock::Fenced::NAME,
            lock::ZkRecipe::<_, _, lock::Fenced>::new,
        ),
    ]
}

/// Lock `L`'s kind `name` on ZooKeeper, and its runs: on the simulated ZooKeeper and on spawned servers
/// (the ZooKeeper locks use no servers lockcheck did not start).
fn runs<L, F>(name: &'static str, make: F) -> (LockKind, Arc<SimRunner>, Arc<RealRunner>)
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<ZkConn>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let sim = {
        let make = make.clone();
        move |s: &Scenario, seed: u64| {
            sim::world::run_with(s, seed, |config, conn, env| {
                make(config, vec![Switch::Sim(conn)], Switch::Sim(env))
            })
        }
    };
    let real = move |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| {
        no_external(s, ext, "the ZooKeeper locks")?;
        real::world::run_with(s, seed, |config, conn, env| {
            make(config, vec![Switch::Real(conn)], Switch::Real(env))
        })
    };
    let kind = LockKind::of::<L>(name, Backend::on(SERVICE), Origin::Builtin);
    (kind, Arc::new(sim), Arc::new(real))
}

/// Client programs (any language) on ZooKeeper: real mode only, on spawned servers.
pub fn run_client_programs(
    s: &Scenario,
    seed: u64,
    ext: Option<&ExternalRedis>,
) -> Result<History, RealError> {
    no_external(s, ext, "client programs on ZooKeeper")?;
    real::world::run_client_programs(s, seed)
}
