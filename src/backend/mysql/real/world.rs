//! The MySQL locks on a real MariaDB that lockcheck spawns (`real::mariadb`: its own datadir in a
//! temporary directory, its own free port, never the machine's server on 3306), with the same
//! lock code, workload and checkers as the simulation.
//!
//! Every client reaches the server through its own TCP forwarder ([`CutProxy`]), which is how a
//! partition is made: while a client is cut off, its forwarder holds every byte (both ways) and
//! every new connection, without closing anything, so the server sees an idle connection and
//! closes it only at `wait_timeout` (set with `SET GLOBAL wait_timeout` from `[database]`).
//! - Client pause: the client stalls at its trigger point (its [`Gate`](crate::real::Gate) closes, as the Redis real
//!   mode does); its connection and open transaction stay.
//! - Client crash: the client's task is aborted where it stands, dropping its connection: the
//!   socket closes and MariaDB rolls the transaction back.
//! - Crash of `mysql-0`: `SIGKILL`, and after `restart_after_ms` a restart on the same port and
//!   datadir (InnoDB crash recovery).
//! - Pause of `mysql-0`: `SIGSTOP` of `mariadbd`, `SIGCONT` after `for_ms`.
//!
//! The protected resource lives on a spawned `redis-server`, as in the Redis real mode. Every
//! process and directory is removed when this returns, on error and on panic (the guards' `Drop`
//! and the cleanup registry).

use crate::backend::mysql::lock::DatabaseLock;
use crate::backend::mysql::real::nemesis::MysqlNemesis;
use crate::backend::mysql::real::recipes::check_mysql;
use crate::backend::mysql::real::server::{MariaDb, DATABASE, USER};
use crate::backend::mysql::real::RealSqlConn;
use crate::backend::mysql::world::{cleanup_pass, prepare};
use crate::env::PointHook;
use crate::history::{History, Recorder};
use crate::lock::LockConfig;
use crate::real::client_tasks::wait_for_live_clients;
use crate::real::nemesis::client_stops::ClientTasks;
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::run_end::settle_by;
use crate::real::RealEnv;
use crate::real::RealError;
use crate::real::{ConnectionTimeouts, RedisServer, Route, RoutedConnection, ServerOptions};
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::sql::SqlConn;
use crate::world;
use std::sync::Arc;
use std::time::Duration;

/// Runs a MySQL scenario on a spawned MariaDB and returns the history, building each client's
/// lock with `make_lock` (on the client's one connection); the lock type `L` creates its table
/// first.
pub fn run_with<L, F>(scenario: &Scenario, _seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, RealSqlConn, RealEnv) -> L,
{
    real_check(scenario)?;
    crate::real::install_signal_handlers();
    let db = Arc::new(MariaDb::spawn()?);
    let storage = RedisServer::spawn(ServerOptions::default())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))?;
    let history = rt.block_on(drive(scenario, db.clone(), storage.url(), make_lock));
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(storage);
    drop(db);
    history
}

/// `SET GLOBAL wait_timeout`: how long the server keeps an idle connection (new sessions).
pub(super) async fn set_wait_timeout(port: u16, s: &Scenario) -> Result<(), crate::sql::SqlError> {
    let mut admin = RealSqlConn::connect(port, USER, DATABASE, Duration::from_secs(10)).await?;
    admin
        .execute(&format!(
            "SET GLOBAL wait_timeout = {}",
            s.database.wait_timeout_s
        ))
        .await?;
    Ok(())
}

async fn drive<L, F>(
    scenario: &Scenario,
    db: Arc<MariaDb>,
    storage_url: String,
    make_lock: F,
) -> Result<History, RealError>
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, RealSqlConn, RealEnv) -> L,
{
    let sql_err =
        |what: &str, e: crate::sql::SqlError| RealError::Unsupported(format!("{what}: {e}"));
    let port = db.port();
    set_wait_timeout(port, scenario)
        .await
        .map_err(|e| sql_err("setting wait_timeout", e))?;
    {
        let mut admin = RealSqlConn::connect(port, USER, DATABASE, Duration::from_secs(10))
            .await
            .map_err(|e| sql_err("connecting to the spawned MariaDB", e))?;
        prepare::<L, _>(&mut admin, scenario)
            .await
            .map_err(|e| sql_err("creating the lock table", e))?;
    }
    let rec = Recorder::real();
    let timeout = crate::backend::mysql::table::request_timeout(scenario);
    let options = scenario.lock.mysql_options();
    let mut proxies = Vec::new();
    for _ in 0..scenario.workload.clients {
        proxies.push(
            CutProxy::start(port)
                .await
                .map_err(|e| RealError::io("starting a client's forwarder", e))?,
        );
    }
    let cleanup_job = options.cleanup.map(|cleanup| {
        let rec = rec.clone();
        let options = options.clone();
        tokio::spawn(async move {
            let env = RealEnv::default();
            let mut conn = None;
            loop {
                tokio::time::sleep(Duration::from_millis(cleanup.interval_ms)).await;
                if conn.is_none() {
                    conn = RealSqlConn::connect(port, USER, DATABASE, timeout)
                        .await
                        .ok();
                }
                let Some(c) = conn.as_mut() else { continue };
                let now = crate::env::Env::now_ms(&env);
                cleanup_pass(c, &options, cleanup, now, &rec).await;
            }
        })
    });
    let nemesis = MysqlNemesis {
        pending: Schedule::new(scenario.faults.clone()),
        db: db.clone(),
        rec: rec.clone(),
        scenario: Arc::new(scenario.clone()),
        proxies: Arc::new(proxies),
        clients: ClientTasks::new(rec.clone(), scenario.workload.clients),
        down_for_good: Default::default(),
    };
    nemesis.start_timed();
    // Set-up, before the workload's clock matters: a server that has just started (or a
    // forwarder that has just bound) can drop the first handshake; a few tries absorb it.
    let mut conns = Vec::new();
    for c in 0..scenario.workload.clients {
        let port = nemesis.proxies[c as usize].port();
        let mut attempt = 0;
        let conn = loop {
            match RealSqlConn::connect(port, USER, DATABASE, timeout).await {
                Ok(conn) => break conn,
                Err(e) if attempt >= 4 => return Err(sql_err("connecting a client", e)),
                Err(_) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
            }
        };
        conns.push(Some(conn));
    }
    let mut world = SqlRealWorld {
        rec: rec.clone(),
        nemesis: nemesis.clone(),
        conns,
        storage: Route::new(storage_url),
        timeouts: ConnectionTimeouts {
            connect: Duration::from_secs(2),
            response: Duration::from_secs(2),
        },
        tasks: Vec::new(),
        cleanup_job,
    };
    let grace = Duration::from_millis(world::estimate::run_grace_ms(scenario));
    world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
        make_lock(config, conn, env)
    })
    .await;
    Ok(rec.snapshot())
}

/// The real database world's side of a run ([`world::World`]): clients are tokio tasks, each
/// with one connection to the spawned MariaDB through its own forwarder (so a partition can cut
/// it); the protected resource lives on a spawned `redis-server`, as for the Redis locks.
struct SqlRealWorld {
    rec: Recorder,
    nemesis: MysqlNemesis,
    /// Each client's connection, made before the run (see `drive`), taken when its lock is built.
    conns: Vec<Option<RealSqlConn>>,
    storage: Arc<Route>,
    timeouts: ConnectionTimeouts,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    cleanup_job: Option<tokio::task::JoinHandle<()>>,
}

impl world::World for SqlRealWorld {
    type Conns = RealSqlConn;
    type Env = RealEnv;
    type StoreConn = RoutedConnection;
    type Nemesis = MysqlNemesis;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &MysqlNemesis {
        &self.nemesis
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> RealEnv {
        RealEnv::default()
            .with_gate(self.nemesis.clients.gates[c as usize].clone())
            .with_points(points)
    }

    fn connections(&mut self, c: u32, _env: &RealEnv) -> RealSqlConn {
        self.conns[c as usize]
            .take()
            .expect("one connection per client")
    }

    fn store(&mut self, _id: u64) -> Store<RoutedConnection> {
        Store::new(RoutedConnection::new(self.storage.clone(), self.timeouts))
    }

    fn spawn_client(&mut self, _c: u32, run: world::ClientRun) {
        let task = tokio::spawn(run);
        self.nemesis
            .clients
            .tasks
            .lock()
            .unwrap()
            .push(task.abort_handle());
        self.tasks.push(task);
    }

    /// Crashed clients never finish: stop waiting once every live one has; then stop the rest.
    async fn wait_clients(&mut self, end: Duration) {
        wait_for_live_clients(&self.rec, &self.tasks, &self.nemesis.clients.gates, end).await;
        if let Some(job) = &self.cleanup_job {
            job.abort();
        }
    }

    /// Lets a server restart in progress finish before the history is read, by the run's end.
    async fn settle(&self, end: Duration) {
        let what = "the restart of mysql-0";
        settle_by(&self.rec, end, self.nemesis.settle(), what).await;
    }
}

/// Whether real mode can run `s` on a spawned MariaDB: every fault has a recipe.
pub fn real_check(s: &Scenario) -> Result<(), RealError> {
    check_mysql(s)
}
