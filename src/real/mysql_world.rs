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

use super::client_tasks::wait_for_live_clients;
use super::nemesis::client_stops::ClientTasks;
use super::nemesis::mysql_nemesis::MysqlNemesis;
use super::nemesis::plan::check_supported;
use super::servers::mariadb::{MariaDb, DATABASE, USER};
use super::RealError;
use super::{ConnectionTimeouts, RedisServer, Route, RoutedConnection, ServerOptions};
use super::{RealEnv, RealSqlConn};
use crate::env::PointHook;
use crate::history::{History, Recorder};
use crate::lock::mysql::DatabaseLock;
use crate::lock::LockConfig;
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::sql::SqlConn;
use crate::world;
use crate::world::mysql::{cleanup_pass, prepare};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How often a held byte stream checks whether its partition healed.
const POLL: Duration = Duration::from_millis(5);

/// A TCP forwarder to the server that a partition can cut without closing anything.
#[derive(Clone)]
pub struct CutProxy {
    port: u16,
    /// How many partitions cut it now.
    cuts: Arc<AtomicU32>,
    /// Bumped by [`CutProxy::forget_new_connections`]: a connection accepted before a bump and
    /// still waiting for the cut to end is closed instead of forwarded.
    forgets: Arc<AtomicU32>,
}

impl CutProxy {
    /// Binds a free 127.0.0.1 port and forwards every connection to `target` (call inside a
    /// tokio runtime).
    pub async fn start(target: u16) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = CutProxy {
            port: listener.local_addr()?.port(),
            cuts: Arc::default(),
            forgets: Arc::default(),
        };
        let me = proxy.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(me.clone().forward(inbound, target));
            }
        });
        Ok(proxy)
    }

    /// `proxies[c][s]`: a forwarder of its own for each of `clients` clients to each of the
    /// servers on `ports` (call inside a tokio runtime).
    pub async fn per_client(clients: u32, ports: &[u16]) -> Result<Vec<Vec<CutProxy>>, RealError> {
        let mut proxies = Vec::new();
        for _ in 0..clients {
            let mut mine = Vec::new();
            for &port in ports {
                mine.push(
                    CutProxy::start(port)
                        .await
                        .map_err(|e| RealError::io("starting a client's forwarder", e))?,
                );
            }
            proxies.push(mine);
        }
        Ok(proxies)
    }

    /// Holds every one of `proxies` now and lets them go `for_ms` later, then calls `healed`
    /// (call inside a tokio runtime).
    pub fn hold_for(proxies: Vec<CutProxy>, for_ms: u64, healed: impl FnOnce() + Send + 'static) {
        for p in &proxies {
            p.cut(true);
        }
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            for p in &proxies {
                p.cut(false);
            }
            healed();
        });
    }

    /// The forwarder's port: the client connects here instead of to MariaDB.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts (`true`) or ends (`false`) one partition.
    pub fn cut(&self, on: bool) {
        if on {
            self.cuts.fetch_add(1, Ordering::SeqCst);
        } else {
            let _ = self
                .cuts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    async fn healed(&self) {
        while self.cuts.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Closes, instead of forwarding, every connection accepted while the forwarder is cut
    /// (call before the cut ends): what a paused client's library opened during the pause, on
    /// timers a paused process would not have run, never reaches the server.
    pub fn forget_new_connections(&self) {
        self.forgets.fetch_add(1, Ordering::SeqCst);
    }

    async fn forward(self, inbound: TcpStream, target: u16) {
        let forgets = self.forgets.load(Ordering::SeqCst);
        self.healed().await;
        if self.forgets.load(Ordering::SeqCst) != forgets {
            return;
        }
        let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
            return;
        };
        let (ri, wi) = inbound.into_split();
        let (ro, wo) = outbound.into_split();
        tokio::join!(self.pump(ri, wo), self.pump(ro, wi));
    }

    /// Copies one direction; bytes (and the end of the stream) wait while the link is cut.
    async fn pump(
        &self,
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = from.read(&mut buf).await.unwrap_or(0);
            self.healed().await;
            if n == 0 || to.write_all(&buf[..n]).await.is_err() {
                let _ = to.shutdown().await;
                return;
            }
        }
    }
}

/// Runs a MySQL scenario on a spawned MariaDB and returns the history, building each client's
/// lock with `make_lock` (on the client's one connection); the lock type `L` creates its table
/// first.
pub fn run_with<L, F>(scenario: &Scenario, _seed: u64, make_lock: F) -> Result<History, RealError>
where
    L: DatabaseLock + 'static,
    F: Fn(LockConfig, RealSqlConn, RealEnv) -> L,
{
    check_supported(scenario)?;
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
    let timeout = crate::scenario::database::request_timeout(scenario);
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
    let grace = Duration::from_millis(world::grace_ms(scenario, timeout.as_millis() as u64));
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
    async fn wait_clients(&mut self, limit: Duration) {
        wait_for_live_clients(&self.tasks, &self.nemesis.clients.gates, limit).await;
        for t in &self.tasks {
            t.abort();
        }
        if let Some(job) = &self.cleanup_job {
            job.abort();
        }
    }

    /// Lets a server restart in progress finish before the history is read.
    async fn settle(&self) {
        self.nemesis.settle().await;
    }
}
