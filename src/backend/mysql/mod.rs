//! MySQL/MariaDB: the two database locks of the MySQL article (`SELECT … FOR UPDATE` and a unique insert), on a simulated InnoDB subset or a spawned MariaDB.

pub mod declaration;
pub mod engine;
pub mod lock;
pub mod real;
pub mod sim;
pub mod switch;
pub mod table;
pub mod world;

use crate::env::Switch;
use crate::lock::{Backend, LockConfig, LockKind, Origin};
use crate::real::{no_external, ExternalRedis, RealEnv, RealRunner};
use crate::scenario::Scenario;
use crate::sim::{SimEnv, SimRunner};
use lock::{for_update, insert_unique, DatabaseLock};
use std::sync::Arc;

pub use declaration::{Mysql, SERVICE};

/// The database connection a registered MySQL lock gets: to the simulated InnoDB subset in
/// simulation, to a spawned MariaDB in real mode.
pub type Db = crate::env::Switch<sim::NetSqlConn, real::RealSqlConn>;

/// The MySQL locks lockcheck ships, each with its runs in both worlds, in `lockcheck list` order.
pub fn locks() -> Vec<(LockKind, Arc<SimRunner>, Arc<RealRunner>)> {
    vec![
        runs(for_update::NAME, for_update::MysqlForUpdate::new),
        runs(insert_unique::NAME, insert_unique::MysqlInsertUnique::new),
    ]
}

/// Lock `L`'s kind `name` on MySQL, and its runs: on the simulated MySQL and on spawned servers
/// (the MySQL locks use no servers lockcheck did not start).
fn runs<L, F>(name: &'static str, make: F) -> (LockKind, Arc<SimRunner>, Arc<RealRunner>)
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, Vec<Db>, Switch<SimEnv, RealEnv>) -> L + Send + Sync + 'static,
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
        no_external(s, ext, "the MySQL locks")?;
        real::world::run_with(s, seed, |config, conn, env| {
            make(config, vec![Switch::Real(conn)], Switch::Real(env))
        })
    };
    let kind = LockKind::of::<L>(name, Backend::on(SERVICE), Origin::Builtin);
    (kind, Arc::new(sim), Arc::new(real))
}
