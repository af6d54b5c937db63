//! Spawning and killing lockcheck's own PgBouncer in front of one of its PostgreSQL servers.
//!
//! The pooler is what makes an advisory lock belong to the wrong party: in transaction mode a
//! client's statements go out on whichever server connection is free, and a session lock
//! belongs to the server connection it ran on, so the unlock on another one answers `f` and the
//! lock stays with a server connection the next client is given (pgbouncer#102, rails#32622).
//! Its settings are exactly the ones that decide how long such a stranded lock lives:
//! `server_lifetime`, `server_idle_timeout` and whether `server_reset_query` (`DISCARD ALL`,
//! which frees session advisory locks) runs in transaction mode (`server_reset_query_always`).
//!
//! Like the servers, `pgbouncer` runs from a temporary directory of its own (its ini and
//! userlist), on a free port on 127.0.0.1 (never 6432, where a system pgbouncer would listen),
//! as the `postgres` user when lockcheck is root, registered with the cleanup registry and
//! killed by the guard's `Drop`. It is one process (no forks), so a `SIGKILL` is the whole crash.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::admin::{block_on, first_value, query_once};
use super::binaries::pgbouncer_binary;
use super::run_as::RunAs;
use super::server::{free_unreserved_port, Postgres, DATABASE, USER};
use crate::real::servers::child::{kill_and_reap, make_temp_dir, remove_temp_dir};
use crate::real::servers::child::{spawn_from_long_lived_thread, tail_of_file};
use crate::real::RealError;

/// How long PgBouncer may take to answer its first statement.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub use crate::backend::postgres::table::PoolMode;

impl PoolMode {
    fn as_ini(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }
}

/// The `pgbouncer.ini` settings lockcheck varies; the defaults are PgBouncer's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BouncerSettings {
    /// `pool_mode`.
    pub pool_mode: PoolMode,
    /// `default_pool_size`: server connections per user and database.
    pub default_pool_size: u32,
    /// `server_lifetime` (seconds): a server connection older than this is closed once it is
    /// free, and its session (and a stranded lock) ends with it.
    pub server_lifetime_s: u32,
    /// `server_idle_timeout` (seconds): a server connection idle this long is closed.
    pub server_idle_timeout_s: u32,
    /// `server_reset_query`, run when a server connection is released (session mode only,
    /// unless `server_reset_query_always`).
    pub server_reset_query: String,
    /// `server_reset_query_always`: run the reset query in transaction mode too.
    pub server_reset_query_always: bool,
    /// `max_client_conn`.
    pub max_client_conn: u32,
}

impl Default for BouncerSettings {
    fn default() -> Self {
        BouncerSettings {
            pool_mode: PoolMode::Session,
            default_pool_size: 20,
            server_lifetime_s: 3600,
            server_idle_timeout_s: 600,
            server_reset_query: "DISCARD ALL".into(),
            server_reset_query_always: false,
            max_client_conn: 100,
        }
    }
}

/// A `pgbouncer` process that lockcheck started and owns, in front of one [`Postgres`].
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl PgBouncer {
    /// Writes an ini and a userlist and starts `pgbouncer` in front of `server` on a free
    /// port; returns once a statement through it reaches `server`. Blocking.
    pub fn spawn(server: &Postgres, settings: &BouncerSettings) -> Result<PgBouncer, RealError> {
        let program = pgbouncer_binary()?;
        let run_as = RunAs::server_user()?;
        let dir = make_temp_dir("pgbouncer")?;
        let mut bouncer = PgBouncer {
            port: 0,
            dir,
            child: Mutex::new(None),
        };
        // From here on Drop removes the directory.
        run_as.own(&bouncer.dir)?;
        std::fs::write(
            bouncer.dir.join("userlist.txt"),
            format!("\"{USER}\" \"\"\n"),
        )
        .map_err(|e| RealError::io("writing pgbouncer's userlist.txt", e))?;
        let mut last = None;
        for _attempt in 0..5 {
            bouncer.port = free_unreserved_port()?;
            bouncer.write_ini(server, settings)?;
            match bouncer.start(&program, run_as, server) {
                Ok(()) => return Ok(bouncer),
                Err(e) if tail_of_file(&bouncer.log(), 20).contains("Address already in use") => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("five attempts failed"))
    }

    fn write_ini(&self, server: &Postgres, s: &BouncerSettings) -> Result<(), RealError> {
        let mut ini = String::new();
        let _ = writeln!(ini, "[databases]");
        let _ = writeln!(
            ini,
            "{DATABASE} = host=127.0.0.1 port={} dbname={DATABASE} user={USER}",
            server.port()
        );
        let _ = writeln!(ini, "\n[pgbouncer]");
        for (key, value) in [
            ("listen_addr", "127.0.0.1".to_string()),
            ("listen_port", self.port.to_string()),
            // No Unix socket: nothing but TCP on 127.0.0.1.
            ("unix_socket_dir", String::new()),
            ("auth_type", "trust".into()),
            (
                "auth_file",
                self.dir.join("userlist.txt").display().to_string(),
            ),
            ("pool_mode", s.pool_mode.as_ini().into()),
            ("default_pool_size", s.default_pool_size.to_string()),
            ("max_client_conn", s.max_client_conn.to_string()),
            ("server_lifetime", s.server_lifetime_s.to_string()),
            ("server_idle_timeout", s.server_idle_timeout_s.to_string()),
            ("server_reset_query", s.server_reset_query.clone()),
            (
                "server_reset_query_always",
                u8::from(s.server_reset_query_always).to_string(),
            ),
            // tokio-postgres and JDBC send it; PgBouncer refuses unknown startup parameters.
            ("ignore_startup_parameters", "extra_float_digits".into()),
        ] {
            let _ = writeln!(ini, "{key} = {value}");
        }
        std::fs::write(self.ini(), ini).map_err(|e| RealError::io("writing pgbouncer.ini", e))
    }

    fn ini(&self) -> PathBuf {
        self.dir.join("pgbouncer.ini")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("pgbouncer.log")
    }

    fn start(&self, program: &Path, run_as: RunAs, server: &Postgres) -> Result<(), RealError> {
        let out =
            File::create(self.log()).map_err(|e| RealError::io("creating pgbouncer.log", e))?;
        let err = out
            .try_clone()
            .map_err(|e| RealError::io("pgbouncer.log", e))?;
        let mut command = run_as.command(program, &self.dir);
        command
            .arg(self.ini())
            .stdout(out)
            .stderr(err)
            .stdin(Stdio::null());
        let child = spawn_from_long_lived_thread(command)?;
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        let result = block_on(self.wait_until_ready(server));
        if result.is_err() {
            self.kill();
        }
        result
    }

    async fn wait_until_ready(&self, server: &Postgres) -> Result<(), RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let ours = server.dir().join("data");
        let failed = |what: String| {
            RealError::io(
                format!(
                    "{what}; its log ends with:\n{}",
                    tail_of_file(&self.log(), 15)
                ),
                std::io::Error::other("pgbouncer start-up failed"),
            )
        };
        loop {
            let exited = {
                let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
                guard
                    .as_mut()
                    .is_none_or(|c| c.try_wait().ok().flatten().is_some())
            };
            if exited {
                return Err(failed(format!(
                    "pgbouncer on port {} exited during start-up",
                    self.port
                )));
            }
            let conninfo = self.conninfo();
            let answer = query_once(&conninfo, "SHOW data_directory", Duration::from_secs(2));
            match answer.await {
                Ok(rows) if Path::new(&first_value(&rows)) == ours => return Ok(()),
                Ok(rows) => {
                    return Err(RealError::External(format!(
                        "port {} leads to the PostgreSQL of {}, not to {}; lockcheck never \
                         uses another server",
                        self.port,
                        first_value(&rows),
                        ours.display()
                    )))
                }
                Err(_) if Instant::now() < deadline => {}
                Err(e) => {
                    return Err(failed(format!(
                        "pgbouncer on port {} did not answer within {START_TIMEOUT:?} (last: {e})",
                        self.port
                    )))
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its temporary directory (ini, userlist, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its pid, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    /// The connection string for the `lockcheck` database through the pooler.
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user={USER} dbname={DATABASE}",
            self.port
        )
    }

    /// `SIGKILL`s the pooler (a crash: every client and server connection closes with no
    /// goodbye, so the server ends every session it pooled) and reaps it. Idempotent.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            kill_and_reap(&mut child);
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.kill();
        remove_temp_dir(&self.dir);
    }
}
