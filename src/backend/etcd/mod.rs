//! etcd: a key space with revisions and leases, the etcd `concurrency` mutex, and a cluster whose leader can crash.

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
use std::sync::Arc;

pub use declaration::{Etcd, SERVICE};

/// An etcd lock's connection: to the simulated cluster or to spawned etcd members.
pub type EtcdConn = crate::env::Switch<sim::NetEtcdConn, real::RealEtcdConn>;

/// The etcd locks lockcheck ships, each with its runs in both worlds, in `lockcheck list` order.
pub fn locks() -> Vec<(LockKind, Arc<SimRunner>, Arc<RealRunner>)> {
    vec![
        runs(lock::NAME, lock::EtcdMutex::<_, _, { lock::PLAIN }>::new),
        runs(
            lock::NAME_LEASE_CHECK,
            lock::EtcdMutex::<_, _, { lock::LEASE_CHECK }>::new,
        ),
        runs(
            lock::NAME_FENCED,
            lock::EtcdMutex::<_, _, { lock::FENCED }>::new,
        ),
    ]
}

/// Lock `L`'s kind `name` on etcd, and its runs: on the simulated etcd and on spawned servers
/// (the etcd locks use no servers lockcheck did not start).
fn runs<L, F>(name: &'static str, make: F) -> (LockKind, Arc<SimRunner>, Arc<RealRunner>)
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<EtcdConn>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
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
        no_external(s, ext, "the etcd locks")?;
        real::world::run_with(s, seed, |config, conn, env| {
            make(config, vec![Switch::Real(conn)], Switch::Real(env))
        })
    };
    let kind = LockKind::of::<L>(name, Backend::on(SERVICE), Origin::Builtin);
    (kind, Arc::new(sim), Arc::new(real))
}

/// Client programs (any language) on etcd: real mode only, on spawned servers.
pub fn run_client_programs(
    s: &Scenario,
    seed: u64,
    ext: Option<&ExternalRedis>,
) -> Result<History, RealError> {
    no_external(s, ext, "client programs on etcd")?;
    real::world::run_client_programs(s, seed)
}
