//! Spawning, signalling and killing lockcheck's own PostgreSQL servers: a primary, or a
//! streaming standby cloned from one, which can be promoted.
//!
//! The same promises as for MariaDB: `initdb` makes a data directory in a fresh temporary
//! directory, `postgres` listens on a free port on 127.0.0.1 (never 5432) with its Unix socket
//! in that directory, as the `postgres` user when lockcheck is root (see `run_as.rs`); the
//! postmaster is registered with the cleanup registry and the guard's `Drop` kills it and every
//! process it forked and removes the directory. The server accepts anyone from 127.0.0.1
//! (`trust`), and lockcheck connects as the `postgres` superuser to the database `lockcheck`.
//! Before it is used, a spawned server is asked for its `data_directory`: a server that answers
//! with another one (the machine's own, a stranger that took the port) is never used.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::admin::{block_on, first_value, query_once};
use super::binaries::{pg_binaries, PgBinaries};
use super::process_tree::{children_of, exited, signal, wait_exited};
use super::run_as::RunAs;
use super::settings::ServerSettings;
use crate::backend::postgres::seam::PgError;
use crate::real::servers::child::{free_port, kill_and_reap, make_temp_dir, remove_temp_dir};
use crate::real::servers::child::{spawn_from_long_lived_thread, tail_of_file};
use crate::real::servers::child::{wait_until_continued, wait_until_stopped};
use crate::real::servers::cleanup;
use crate::real::RealError;

/// Ports lockcheck never uses: the machine's PostgreSQL and a system PgBouncer.
pub(crate) const RESERVED_PORTS: [u16; 2] = [5432, 6432];

/// How long an `initdb`, a base backup or a start (with crash recovery) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stopped or killed server's children may take to be gone.
const CHILDREN_TIMEOUT: Duration = Duration::from_secs(5);

/// The database the locks' tables live in.
pub const DATABASE: &str = "lockcheck";

/// The user lockcheck connects as: the superuser `initdb` made, with no password (`trust`).
pub const USER: &str = "postgres";

/// A `postgres` server (its postmaster) that lockcheck started and owns, with its directory.
#[derive(Debug)]
pub struct Postgres {
    port: u16,
    dir: PathBuf,
    binaries: PgBinaries,
    run_as: RunAs,
    settings: ServerSettings,
    child: Mutex<Option<Child>>,
    /// The children a pause stopped (registered with the cleanup registry until resumed).
    paused: Mutex<Vec<u32>>,
}

/// A free port that is neither reserved one.
pub(crate) fn free_unreserved_port() -> Result<u16, RealError> {
    loop {
        let port = free_port()?;
        if !RESERVED_PORTS.contains(&port) {
            return Ok(port);
        }
    }
}

fn failure(context: String, log: &Path) -> RealError {
    RealError::io(
        format!("{context}; its log ends with:\n{}", tail_of_file(log, 15)),
        std::io::Error::other("postgres start-up failed"),
    )
}

/// Runs a one-shot tool (`initdb`, `pg_basebackup`) to its end, its output into `log`.
fn run_tool(
    run_as: RunAs,
    program: &Path,
    args: &[String],
    dir: &Path,
    log: &Path,
) -> Result<(), RealError> {
    let out =
        File::create(log).map_err(|e| RealError::io(format!("creating {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| RealError::io(format!("{}", log.display()), e))?;
    let mut command = run_as.command(program, dir);
    command.args(args).stdout(out).stderr(err);
    let mut child = spawn_from_long_lived_thread(command)?;
    let status = child.wait();
    cleanup::deregister(child.id());
    let name = program.file_name().unwrap_or_default().to_string_lossy();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(failure(format!("{name} failed ({s})"), log)),
        Err(e) => Err(RealError::io(format!("waiting for {name}"), e)),
    }
}

impl Postgres {
    /// Makes a data directory with `initdb` and starts a primary on a free port; returns once
    /// it accepts connections and the `lockcheck` database exists. Blocking (about a second).
    pub fn spawn(settings: &ServerSettings) -> Result<Postgres, RealError> {
        let server = Postgres::prepare(settings.clone(), "pg")?;
        // From here on Drop removes the directory.
        let data = server.data_dir().display().to_string();
        run_tool(
            server.run_as,
            &server.binaries.initdb,
            &[
                format!("--pgdata={data}"),
                format!("--username={USER}"),
                "--auth=trust".into(),
                "--no-sync".into(),
                "--no-instructions".into(),
                "--encoding=UTF8".into(),
                "--locale=C".into(),
            ],
            &server.dir,
            &server.dir.join("initdb.log"),
        )?;
        let server = server.start_on_a_free_port()?;
        let conninfo = server.conninfo_for("postgres");
        block_on(query_once(
            &conninfo,
            &format!("CREATE DATABASE {DATABASE}"),
            START_TIMEOUT,
        ))
        .map_err(|e| {
            failure(
                format!("creating the database {DATABASE}: {e}"),
                &server.log(),
            )
        })?;
        Ok(server)
    }

    /// Clones `primary` with `pg_basebackup -R` (streaming replication, the primary's settings)
    /// and starts it as a hot standby; returns once it accepts read-only connections.
    pub fn spawn_standby(primary: &Postgres) -> Result<Postgres, RealError> {
        let server = Postgres::prepare(primary.settings.clone(), "pg-standby")?;
        run_tool(
            server.run_as,
            &server.binaries.pg_basebackup,
            &[
                format!("--pgdata={}", server.data_dir().display()),
                "--host=127.0.0.1".into(),
                format!("--port={}", primary.port),
                format!("--username={USER}"),
                "--write-recovery-conf".into(),
                "--wal-method=stream".into(),
                "--checkpoint=fast".into(),
                "--no-sync".into(),
                "--no-password".into(),
            ],
            &server.dir,
            &server.dir.join("basebackup.log"),
        )?;
        server.start_on_a_free_port()
    }

    /// A temporary directory handed to the server's user, and the guard that removes it.
    fn prepare(settings: ServerSettings, what: &str) -> Result<Postgres, RealError> {
        let binaries = pg_binaries()?;
        let run_as = RunAs::server_user()?;
        let dir = make_temp_dir(what)?;
        let server = Postgres {
            port: 0,
            dir,
            binaries,
            run_as,
            settings,
            child: Mutex::new(None),
            paused: Mutex::new(Vec::new()),
        };
        server.run_as.own(&server.dir)?;
        Ok(server)
    }

    /// Starts on a free port, and on another when a stranger took the one chosen.
    fn start_on_a_free_port(mut self) -> Result<Postgres, RealError> {
        let mut last = None;
        for _attempt in 0..5 {
            self.port = free_unreserved_port()?;
            match self.start() {
                Ok(()) => return Ok(self),
                Err(e) if tail_of_file(&self.log(), 20).contains("Address already in use") => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| failure("postgres could not bind a port".into(), &self.log())))
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    /// Starts (or restarts, after [`Postgres::kill`]) the server on its port and data
    /// directory, and waits until it answers with its own data directory.
    fn start(&self) -> Result<(), RealError> {
        let log = self.log();
        let out = File::create(&log).map_err(|e| RealError::io("creating postgres.log", e))?;
        let err = out
            .try_clone()
            .map_err(|e| RealError::io("postgres.log", e))?;
        let mut command = self.run_as.command(&self.binaries.postgres, &self.dir);
        command
            .arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg("listen_addresses=127.0.0.1")
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.display()));
        for (name, value) in self.settings.args() {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        command.stdout(out).stderr(err).stdin(Stdio::null());
        let child = spawn_from_long_lived_thread(command)?;
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        let result = block_on(self.wait_until_ready());
        match result {
            Ok(()) => {
                if let (Some(id), Some(pid)) = (self.shared_memory_id(), self.pid()) {
                    mark_shared_memory_for_removal(id, pid);
                }
                Ok(())
            }
            Err(e) => {
                self.kill();
                Err(e)
            }
        }
    }

    async fn wait_until_ready(&self) -> Result<(), RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let conninfo = self.conninfo_for("postgres");
        let ours = self.data_dir();
        loop {
            let exited = {
                let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
                guard
                    .as_mut()
                    .is_none_or(|c| c.try_wait().ok().flatten().is_some())
            };
            if exited {
                return Err(failure(
                    format!("postgres on port {} exited during start-up", self.port),
                    &self.log(),
                ));
            }
            match query_once(&conninfo, "SHOW data_directory", Duration::from_secs(2)).await {
                Ok(rows) if Path::new(&first_value(&rows)) == ours => return Ok(()),
                Ok(rows) => {
                    return Err(RealError::External(format!(
                        "port {} is answered by the PostgreSQL of {}, not by the one lockcheck \
                         started ({}); lockcheck never uses another server",
                        self.port,
                        first_value(&rows),
                        ours.display()
                    )))
                }
                Err(_) if Instant::now() < deadline => {}
                Err(e) => {
                    return Err(failure(
                        format!(
                            "postgres on port {} did not accept connections within {:?} \
                             (last: {e})",
                            self.port, START_TIMEOUT
                        ),
                        &self.log(),
                    ))
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Promotes a standby to a primary (`pg_promote()`), returning once it accepts writes.
    /// Nothing of the old primary's advisory locks comes along: they live in its shared
    /// memory, never in the WAL.
    pub fn promote(&self) -> Result<(), RealError> {
        let conninfo = self.conninfo_for("postgres");
        let promote = |e: PgError| failure(format!("promoting the standby: {e}"), &self.log());
        let answer = block_on(query_once(
            &conninfo,
            "SELECT pg_promote(true, 60)",
            START_TIMEOUT,
        ))
        .map_err(promote)?;
        if first_value(&answer) != "t" {
            return Err(failure(
                format!("pg_promote() answered {answer:?}"),
                &self.log(),
            ));
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let rows = block_on(query_once(
                &conninfo,
                "SELECT pg_is_in_recovery()",
                Duration::from_secs(5),
            ))
            .map_err(promote)?;
            if first_value(&rows) == "f" {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RealError::Timeout {
                    what: format!("postgres on port {} to leave recovery", self.port),
                    waited: START_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's temporary directory (`data/`, its socket, its logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &ServerSettings {
        &self.settings
    }

    /// The postmaster's pid, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    /// The postmaster and every process it forked (a backend per session, the checkpointer,
    /// a WAL sender...), postmaster first: what a test checks is gone after a kill.
    pub fn processes(&self) -> Vec<u32> {
        let Some(postmaster) = self.pid() else {
            return Vec::new();
        };
        let mut all = vec![postmaster];
        all.extend(children_of(postmaster));
        all
    }

    /// The connection string for the `lockcheck` database as the `postgres` superuser, for
    /// `tokio-postgres` or libpq.
    pub fn conninfo(&self) -> String {
        self.conninfo_for(DATABASE)
    }

    fn conninfo_for(&self, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={USER} dbname={database}",
            self.port
        )
    }

    /// Stops the server as a VM freeze would: `SIGSTOP` to the postmaster (so it forks no new
    /// backend) and then to every process it forked, returning once all are stopped.
    ///
    /// A real freeze stops the kernel too: the sockets go silent, nothing is acknowledged,
    /// keepalive probes go unanswered, a connect times out. Here only the processes stop; the
    /// machine's kernel still acknowledges what clients send, answers keepalive probes, and
    /// completes new connections into the listen backlog, so a client sees a server that takes
    /// its statements and never answers, and no keepalive on either side ever fires. Timeouts
    /// measured on the server's clock (`idle_session_timeout`, `lock_timeout`) run on through
    /// the pause and fire at once on [`Postgres::resume`], as they do after a real freeze.
    pub fn pause(&self) -> Result<(), RealError> {
        let postmaster = self.running_pid()?;
        signal(postmaster, libc::SIGSTOP);
        wait_until_stopped(postmaster, "postgres")?;
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        for child in children_of(postmaster) {
            // A stopped backend never notices its postmaster's death: if lockcheck dies during
            // the pause, the cleanup must kill it itself.
            cleanup::register(child)?;
            paused.push(child);
            signal(child, libc::SIGSTOP);
        }
        for &child in paused.iter() {
            wait_until_stopped(child, "a postgres backend")?;
        }
        Ok(())
    }

    /// Continues a paused server: its children, then the postmaster.
    pub fn resume(&self) -> Result<(), RealError> {
        let postmaster = self.running_pid()?;
        for child in std::mem::take(&mut *self.paused.lock().unwrap_or_else(|p| p.into_inner())) {
            signal(child, libc::SIGCONT);
            cleanup::deregister(child);
        }
        signal(postmaster, libc::SIGCONT);
        wait_until_continued(postmaster, "postgres")
    }

    fn running_pid(&self) -> Result<u32, RealError> {
        self.pid().ok_or_else(|| {
            RealError::Unsupported(format!("postgres on port {} is not running", self.port))
        })
    }

    /// `SIGKILL`s the server, a crash: the postmaster and every process it forked at once,
    /// so every session ends with no goodbye and every advisory lock is gone; open
    /// transactions are rolled back by crash recovery on the next start. Returns once all of
    /// them are gone. Idempotent.
    pub fn kill(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let Some(mut child) = guard.take() else {
            return;
        };
        let postmaster = child.id();
        // Stopped, the postmaster neither forks nor reaps: every pid listed stays its child.
        if !exited(postmaster) {
            signal(postmaster, libc::SIGSTOP);
            let _ = wait_until_stopped(postmaster, "postgres");
        }
        let children = children_of(postmaster);
        for &c in &children {
            signal(c, libc::SIGKILL);
        }
        kill_and_reap(&mut child);
        for c in std::mem::take(&mut *self.paused.lock().unwrap_or_else(|p| p.into_inner())) {
            cleanup::deregister(c);
        }
        wait_exited(&children, CHILDREN_TIMEOUT);
    }

    /// The System V shared memory segment id the running server wrote into `postmaster.pid`
    /// (its 7th line: key and id).
    fn shared_memory_id(&self) -> Option<libc::c_int> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        text.lines().nth(6)?.split_whitespace().nth(1)?.parse().ok()
    }

    /// A crash and a restart: `SIGKILL`, then start again on the same port and data directory
    /// (crash recovery replays the WAL; a standby goes on streaming).
    pub fn restart(&self) -> Result<(), RealError> {
        self.kill();
        self.start()
    }
}

/// Marks the server's System V segment for removal once nothing is attached.
///
/// PostgreSQL keeps a small one (56 bytes) only to tell, at its next start, whether processes
/// of an old server still run (their attach count); it removes it on a clean shutdown, which
/// lockcheck's servers never get, and the cleanup that kills them on a panic or a signal
/// cannot know of it: each such run left one behind. Marked `IPC_RMID`, the kernel removes it
/// when its last process exits, and the check still works: while any old process is attached
/// the segment is still found by its id with its attach count (Linux), and once none is, it
/// is gone and the next start makes a new one. Only a segment `creator` made is marked.
fn mark_shared_memory_for_removal(id: libc::c_int, creator: u32) {
    // SAFETY: shmctl with IPC_STAT writes into a live, zeroed shmid_ds; IPC_RMID takes none.
    unsafe {
        let mut info: libc::shmid_ds = std::mem::zeroed();
        if libc::shmctl(id, libc::IPC_STAT, &mut info) == 0
            && info.shm_cpid == creator as libc::pid_t
        {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
        remove_temp_dir(&self.dir);
    }
}
