//! Spawning, signalling and killing lockcheck's own `redis-server` processes.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::child::{
    find_program, free_port, info_field, is_executable, kill_and_reap, make_temp_dir,
    remove_temp_dir, spawn_from_long_lived_thread, tail_of_file, thread_states,
    wait_until_continued, wait_until_stopped,
};
use super::cleanup;
use super::faketime::{self, FakeTime, JumpableClock};
use crate::real::RealError;

/// How long a spawned server may take to answer `PING`. A bare server answers in
/// a few ms; the bound only turns a wedged start (e.g. a broken `LD_PRELOAD`) into
/// an error carrying the server's log.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// Read/write/connect timeout of every control-plane connection: a stopped server
/// must turn into an error, never into a hung lockcheck.
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(1);

/// How to start a [`RedisServer`].
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Start as a replica of the lockcheck server on this port (`--replicaof 127.0.0.1 P`).
    pub replica_of: Option<u16>,
    /// Run the server's wall clock under libfaketime (clock-skew faults).
    pub faketime: Option<FakeTime>,
    /// Extra `redis-server` arguments, appended after lockcheck's own (so they win).
    pub extra_args: Vec<String>,
    /// Run as a sentinel (`redis-server <dir>/sentinel.conf --sentinel`) with this configuration
    /// file. Sentinel rewrites it as it learns, so it lives in the server's own temporary dir.
    pub sentinel_config: Option<String>,
}

/// A `redis-server` process that lockcheck started and owns.
///
/// Dropping it `SIGKILL`s the process (and anything it forked), reaps it, and
/// removes its temporary directory. See `cleanup.rs` for the paths that skip `Drop`.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    pid: u32,
    child: Mutex<ChildState>,
    dir: PathBuf,
    clock: Option<JumpableClock>,
    startup: Duration,
}

#[derive(Debug)]
struct ChildState {
    child: Child,
    /// Set once the process has been waited for: from then on its pid may belong
    /// to somebody else, so no signal may be sent to it.
    reaped: bool,
}

/// Finds the `redis-server` binary: `$LOCKCHECK_REDIS_SERVER`, else `$PATH`, else
/// the usual system directories.
///
/// The path is deliberately not canonicalised: Debian's `redis-server` is a symlink
/// to `redis-check-rdb`, and the binary picks its personality from `argv[0]`.
pub fn redis_server_path() -> Result<PathBuf, RealError> {
    if let Some(explicit) = std::env::var_os("LOCKCHECK_REDIS_SERVER") {
        let path = PathBuf::from(explicit);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(RealError::missing(
                &format!("redis-server (LOCKCHECK_REDIS_SERVER={})", path.display()),
                "redis-server",
            ))
        };
    }
    find_program("redis-server").ok_or_else(|| RealError::missing("redis-server", "redis-server"))
}

impl RedisServer {
    /// Starts a `redis-server` on a free 127.0.0.1 port and waits until it answers
    /// `PING` (and is verifiably the process that was started).
    ///
    /// Flags: `--save '' --appendonly no` (no disk state: every run starts empty),
    /// `--repl-diskless-sync-delay 0` (Redis 7.0 otherwise waits 5 s before the
    /// first full sync), its own temporary `--dir` and `--logfile`.
    ///
    /// Blocking (a few ms); from async code use `spawn_blocking`.
    pub fn spawn(opts: ServerOptions) -> Result<RedisServer, RealError> {
        let program = redis_server_path()?;
        // Resolve faketime's dependencies before any process exists, so a missing
        // package is reported as such and not as a start-up failure.
        let faketime_libs = match &opts.faketime {
            Some(_) => Some(faketime::preload_libraries()?),
            None => None,
        };
        let mut last_error = None;
        // A port can be taken by another program between our probe and the
        // server's bind; that is the only failure worth retrying.
        for _attempt in 0..5 {
            match Self::spawn_once(&program, &opts, faketime_libs.as_deref()) {
                Ok(server) => return Ok(server),
                Err(err @ RealError::PortHijacked { .. }) => last_error = Some(err),
                Err(err @ RealError::ExitedEarly { .. })
                    if err.to_string().contains("Address already in use") =>
                {
                    last_error = Some(err)
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    fn spawn_once(
        program: &Path,
        opts: &ServerOptions,
        faketime_libs: Option<&str>,
    ) -> Result<RedisServer, RealError> {
        let started = Instant::now();
        let port = free_port()?;
        let dir = make_temp_dir("redis")?;
        let result = (|| {
            let stderr = File::create(dir.join("stderr.log"))
                .map_err(|e| RealError::io("creating the server's stderr log", e))?;
            let stdout = stderr
                .try_clone()
                .map_err(|e| RealError::io("duplicating the server's stderr log", e))?;
            let mut command = Command::new(program);
            if let Some(config) = &opts.sentinel_config {
                let file = dir.join("sentinel.conf");
                std::fs::write(&file, config)
                    .map_err(|e| RealError::io("writing a sentinel's configuration", e))?;
                command.arg(file).arg("--sentinel");
            }
            command
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1"])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("redis.log"));
            if let Some(master) = opts.replica_of {
                command.args(["--replicaof", "127.0.0.1", &master.to_string()]);
            }
            command
                .args(&opts.extra_args)
                .stdin(Stdio::null())
                .stdout(stdout)
                .stderr(stderr);
            let clock = match (&opts.faketime, faketime_libs) {
                (Some(fake), Some(libs)) => faketime::configure(fake, libs, &dir, &mut command)?,
                _ => None,
            };
            let child = spawn_from_long_lived_thread(command)?;
            let server = RedisServer {
                port,
                pid: child.id(),
                child: Mutex::new(ChildState {
                    child,
                    reaped: false,
                }),
                dir: dir.clone(),
                clock,
                startup: Duration::ZERO,
            };
            Ok(server)
        })();
        let mut server = match result {
            Ok(server) => server,
            Err(err) => {
                remove_temp_dir(&dir);
                return Err(err);
            }
        };
        // From here on `server`'s Drop cleans up on every error path.
        server.wait_ready(START_TIMEOUT)?;
        server.startup = started.elapsed();
        Ok(server)
    }

    /// Polls until the server answers `PING` and `INFO server` names our pid.
    fn wait_ready(&self, timeout: Duration) -> Result<(), RealError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit_status() {
                return Err(RealError::ExitedEarly {
                    port: self.port,
                    status,
                    log_tail: self.log_tail(),
                });
            }
            if let Ok(mut conn) = self.control_with_timeout(Duration::from_millis(200)) {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    let info: String = redis::cmd("INFO")
                        .arg("server")
                        .query(&mut conn)
                        .map_err(|e| RealError::redis("INFO server on a new server", e))?;
                    let found = info_field(&info, "process_id")
                        .and_then(|v| v.parse::<u32>().ok())
                        .unwrap_or(0);
                    if found != self.pid {
                        return Err(RealError::PortHijacked {
                            port: self.port,
                            expected: self.pid,
                            found,
                        });
                    }
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(RealError::StartTimeout {
                    pid: self.pid,
                    port: self.port,
                    waited: timeout,
                    log_tail: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn try_exit_status(&self) -> Option<String> {
        let mut state = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if state.reaped {
            return Some("killed by lockcheck".to_string());
        }
        match state.child.try_wait() {
            Ok(Some(status)) => {
                // try_wait reaped it: its pid is free for reuse from now on.
                cleanup::deregister(self.pid);
                state.reaped = true;
                Some(status.to_string())
            }
            _ => None,
        }
    }

    /// The TCP port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL for the redis crate: `redis://127.0.0.1:P/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its process id (also its process-group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its temporary directory (log files, faketime's timestamp file).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long [`RedisServer::spawn`] took, from choosing a port to a verified `PING`.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The last lines of its log file and of its stdout/stderr, for error messages.
    pub fn log_tail(&self) -> String {
        let mut out = String::new();
        for name in ["redis.log", "stderr.log"] {
            let tail = tail_of_file(&self.dir.join(name), 20);
            if !tail.trim().is_empty() {
                out.push_str(&format!("--- {name}\n{tail}"));
            }
        }
        if out.is_empty() {
            out.push_str("(no output)");
        }
        out
    }

    /// A synchronous control-plane connection with read/write/connect timeouts.
    pub fn control(&self) -> Result<redis::Connection, RealError> {
        self.control_with_timeout(CONTROL_TIMEOUT)
    }

    fn control_with_timeout(&self, timeout: Duration) -> Result<redis::Connection, RealError> {
        let context = || format!("connecting to redis-server on port {}", self.port);
        let client = redis::Client::open(self.url()).map_err(|e| RealError::redis(context(), e))?;
        let conn = client
            .get_connection_with_timeout(timeout)
            .map_err(|e| RealError::redis(context(), e))?;
        conn.set_read_timeout(Some(timeout))
            .and_then(|_| conn.set_write_timeout(Some(timeout)))
            .map_err(|e| RealError::redis(context(), e))?;
        Ok(conn)
    }

    /// Waits until this replica reports `master_link_status:up` in `INFO replication`,
    /// i.e. it has loaded the master's snapshot and streams its writes.
    pub fn wait_replication_up(&self, timeout: Duration) -> Result<(), RealError> {
        self.wait_for_info(
            timeout,
            &format!(
                "replica on port {} to report master_link_status:up",
                self.port
            ),
            |info| info_field(info, "master_link_status") == Some("up"),
        )
    }

    /// Polls `INFO replication` until `done` holds, tolerating transient errors.
    pub(crate) fn wait_for_info(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> Result<(), RealError> {
        let deadline = Instant::now() + timeout;
        loop {
            let info = self.control().and_then(|mut conn| {
                redis::cmd("INFO")
                    .arg("replication")
                    .query::<String>(&mut conn)
                    .map_err(|e| RealError::redis("INFO replication", e))
            });
            if matches!(&info, Ok(info) if done(info)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RealError::Timeout {
                    what: what.to_string(),
                    waited: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Sends `signal` to the server's process group, unless it was already reaped.
    fn signal(&self, signal: libc::c_int) -> Result<(), RealError> {
        let state = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if state.reaped {
            return Err(RealError::ServerGone {
                pid: self.pid,
                port: self.port,
            });
        }
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
        // unreaped child (held under the lock), so it cannot have been reused.
        let rc = unsafe { libc::kill(-(self.pid as libc::pid_t), signal) };
        if rc != 0 {
            return Err(RealError::io(
                format!("sending signal {signal} to redis-server pid {}", self.pid),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// `SIGSTOP`s the server (a stop-the-world pause: a GC pause, a VM freeze) and
    /// returns once every one of its threads is stopped.
    ///
    /// Waiting matters: `kill` only queues the signal, and a fault step that runs
    /// before the server has actually stopped would race with it.
    pub fn pause(&self) -> Result<(), RealError> {
        self.signal(libc::SIGSTOP)?;
        wait_until_stopped(self.pid, "redis-server")
    }

    /// `SIGCONT`s a paused server and returns once it runs again.
    pub fn resume(&self) -> Result<(), RealError> {
        self.signal(libc::SIGCONT)?;
        wait_until_continued(self.pid, "redis-server")
    }

    /// Whether it is currently stopped by [`RedisServer::pause`].
    pub fn is_paused(&self) -> bool {
        let states = thread_states(self.pid);
        !states.is_empty() && states.iter().all(|s| matches!(s, 'T' | 't'))
    }

    /// Whether the process is alive (running or paused): not killed, not exited.
    pub fn is_running(&self) -> bool {
        self.try_exit_status().is_none()
            && thread_states(self.pid).first().is_some_and(|s| *s != 'Z')
    }

    /// `SIGKILL`s the server and everything it forked, and reaps it. Idempotent.
    ///
    /// A crash: no shutdown, no final write, the socket is reset.
    pub fn kill(&self) {
        let mut state = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if state.reaped {
            return;
        }
        // The group kill also reaches a forked RDB child.
        kill_and_reap(&mut state.child);
        state.reaped = true;
    }

    /// Moves this server's wall clock by `by_ms` milliseconds (forwards or back),
    /// on top of earlier jumps. Only for servers started with [`FakeTime::Jumpable`].
    ///
    /// Takes effect on the server's next clock read (libfaketime re-reads its
    /// timestamp file on every call with `FAKETIME_NO_CACHE=1`), so a key whose
    /// expiry time is now in the past is gone on the next access.
    pub fn jump_clock(&self, by_ms: i64) -> Result<(), RealError> {
        match &self.clock {
            Some(clock) => clock.jump(by_ms),
            None => Err(RealError::NotJumpable { port: self.port }),
        }
    }

    /// The cumulative clock offset applied by [`RedisServer::jump_clock`], in ms.
    pub fn clock_offset_ms(&self) -> Option<i64> {
        self.clock.as_ref().map(JumpableClock::offset_ms)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        remove_temp_dir(&self.dir);
    }
}
