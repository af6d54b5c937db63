//! PostgreSQL: advisory locks on a simulated server or a spawned `postgres`, straight or behind
//! PgBouncer, with a standby to fail over to.

pub mod declaration;
pub mod engine;
pub mod lock;
pub mod real;
pub mod seam;
pub mod sim;
pub mod switch;
pub mod table;
pub mod world;

use crate::env::Switch;
use crate::history::History;
use crate::lock::{Backend, Lock, LockConfig, LockKind, Origin};
use crate::real::{no_external, ExternalRedis, RealEnv, RealError, RealRunner};
use crate::scenario::Scenario;
use crate::sim::{SimEnv, SimRunner};
use std::sync::Arc;

pub use declaration::{Postgres, SERVICE};

/// A PostgreSQL lock's connection: to the simulated deployment or to spawned servers.
pub type PgConn = Switch<sim::NetPgConn, real::route::PgRoute>;

/// The PostgreSQL locks lockcheck ships, each with its runs in both worlds.
pub fn locks() -> Vec<(LockKind, Arc<SimRunner>, Arc<RealRunner>)> {
    use lock::AdvisoryLock as A;
    vec![
        runs(lock::NAME_SESSION, A::<_, _, { lock::SESSION }>::new),
        runs(lock::NAME_XACT, A::<_, _, { lock::XACT }>::new),
        runs(lock::NAME_TRY, A::<_, _, { lock::TRY }>::new),
        runs(lock::NAME_FENCED, A::<_, _, { lock::FENCED }>::new),
    ]
}

/// Lock `L`'s kind `name` on PostgreSQL, and its runs in both worlds.
fn runs<L, F>(name: &'static str, make: F) -> (LockKind, Arc<SimRunner>, Arc<RealRunner>)
where
    L: Lock + 'static,
    F: Fn(LockConfig, Vec<PgConn>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
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
        no_external(s, ext, "the PostgreSQL locks")?;
        real::world::run_with(s, seed, |config, conn, env| {
            make(config, vec![Switch::Real(conn)], Switch::Real(env))
        })
    };
    let kind = LockKind::of::<L>(name, Backend::on(SERVICE), Origin::Builtin);
    (kind, Arc::new(sim), Arc::new(real))
}

/// Client programs (any language) on PostgreSQL: real mode only, on spawned servers.
pub fn run_client_programs(
    s: &Scenario,
    seed: u64,
    ext: Option<&ExternalRedis>,
) -> Result<History, RealError> {
    no_external(s, ext, "client programs on PostgreSQL")?;
    real::world::run_client_programs(s, seed)
}
