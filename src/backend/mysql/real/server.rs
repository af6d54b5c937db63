//! Spawning, signalling and killing lockcheck's own MariaDB servers.
//!
//! The same promises as for `redis-server` (see the module docs): lockcheck starts its own
//! `mariadbd` with its own data directory (made by `mariadb-install-db` in a temporary directory),
//! its own free TCP port on 127.0.0.1 (never 3306) and its own socket file; the process is
//! registered with the cleanup registry (panic hook, signal handlers, `PR_SET_PDEATHSIG`) and
//! killed and removed when the [`MariaDb`] guard is dropped. The machine's own server is never
//! contacted.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::real::servers::child::{find_program, kill_and_reap, remove_temp_dir};
use crate::real::servers::child::{free_port, spawn_from_long_lived_thread, tail_of_file};
use crate::real::servers::child::{wait_until_continued, wait_until_stopped};
use crate::real::servers::cleanup;
use crate::real::RealError;

/// The port of the machine's own MariaDB/MySQL; lockcheck never uses it.
const RESERVED_PORT: u16 = 3306;

/// How long `mariadb-install-db` and a start (with crash recovery) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The database the locks' tables live in (created at start-up by an init file).
pub const DATABASE: &str = "lockcheck";

/// The user lockcheck connects as (root of its own throw-away server, no password).
pub const USER: &str = "root";

/// A `mariadbd` process that lockcheck started and owns, with its data directory.
#[derive(Debug)]
pub struct MariaDb {
    port: u16,
    dir: PathBuf,
    mariadbd: PathBuf,
    child: Mutex<Option<Child>>,
}

/// Finds `mariadbd` (or `$LOCKCHECK_MARIADBD`) and `mariadb-install-db`.
pub fn mariadb_paths() -> Result<(PathBuf, PathBuf), RealError> {
    let server = match std::env::var_os("LOCKCHECK_MARIADBD") {
        Some(p) => Some(PathBuf::from(p)),
        None => find_program("mariadbd").or_else(|| find_program("mysqld")),
    };
    let server = server
        .filter(|p| p.exists())
        .ok_or_else(|| RealError::missing("mariadbd", "mariadb-server"))?;
    let install = find_program("mariadb-install-db")
        .or_else(|| find_program("mysql_install_db"))
        .ok_or_else(|| RealError::missing("mariadb-install-db", "mariadb-server"))?;
    Ok((server, install))
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A fresh temporary directory for one server, with its `data` directory inside.
fn temp_dir() -> Result<PathBuf, RealError> {
    let dir = crate::real::servers::child::make_temp_dir("mariadb")?;
    std::fs::create_dir(dir.join("data"))
        .map_err(|e| RealError::io(format!("creating {}/data", dir.display()), e))?;
    Ok(dir)
}

fn failure(context: String, log: &Path) -> RealError {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR"))
        .take(10)
        .collect();
    RealError::io(
        format!(
            "{context}; its errors:\n{}\nits log ends with:\n{}",
            errors.join("\n"),
            tail_of_file(log, 15)
        ),
        std::io::Error::other("mariadb start-up failed"),
    )
}

impl MariaDb {
    /// Makes a data directory and starts `mariadbd` on a free port; returns once it accepts
    /// connections and the `lockcheck` database exists. Blocking (a few seconds).
    pub fn spawn() -> Result<MariaDb, RealError> {
        let (mariadbd, install) = mariadb_paths()?;
        let dir = temp_dir()?;
        let install_once = || {
            let _ = std::fs::remove_dir_all(dir.join("data"));
            std::fs::create_dir_all(dir.join("data"))
                .map_err(|e| RealError::io(format!("creating {}", dir.display()), e))?;
            let log = dir.join("install.log");
            let out = File::create(&log).map_err(|e| RealError::io("creating install.log", e))?;
            let err = out
                .try_clone()
                .map_err(|e| RealError::io("install.log", e))?;
            let mut command = Command::new(&install);
            command
                .arg("--no-defaults")
                .arg(format!("--datadir={}", dir.join("data").display()))
                .arg("--auth-root-authentication-method=normal")
                .arg("--skip-test-db")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            if running_as_root() {
                command.arg("--user=root");
            }
            let mut child = spawn_from_long_lived_thread(command)?;
            let status = child.wait();
            cleanup::deregister(child.id());
            match status {
                Ok(s) if s.success() => {}
                _ => return Err(failure("mariadb-install-db failed".into(), &log)),
            }
            Ok(())
        };
        let result = (|| {
            // On a loaded machine the bootstrap server occasionally fails; a second try from a
            // clean data directory succeeds.
            let mut installed = install_once();
            for _ in 0..2 {
                if installed.is_ok() {
                    break;
                }
                installed = install_once();
            }
            installed?;
            std::fs::write(
                dir.join("init.sql"),
                format!("CREATE DATABASE IF NOT EXISTS {DATABASE};\n"),
            )
            .map_err(|e| RealError::io("writing init.sql", e))?;
            Ok(())
        })();
        if let Err(e) = result {
            remove_temp_dir(&dir);
            return Err(e);
        }
        let server = MariaDb {
            port: 0,
            dir,
            mariadbd,
            child: Mutex::new(None),
        };
        let mut server = server;
        // From here on Drop removes the directory.
        for _attempt in 0..5 {
            server.port = loop {
                let p = free_port()?;
                if p != RESERVED_PORT {
                    break p;
                }
            };
            match server.start() {
                Ok(()) => return Ok(server),
                Err(e) if tail_of_file(&server.log(), 20).contains("Address already in use") => {
                    let _ = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(failure(
            "mariadbd could not bind a port".into(),
            &server.log(),
        ))
    }

    fn log(&self) -> PathBuf {
        self.dir.join("mariadbd.err")
    }

    /// Starts (or restarts, after [`MariaDb::kill`]) the server on its port and data directory.
    fn start(&self) -> Result<(), RealError> {
        let log = self.log();
        let _ = std::fs::remove_file(&log);
        let mut command = Command::new(&self.mariadbd);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!(
                "--socket={}",
                self.dir.join("mariadbd.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!(
                "--init-file={}",
                self.dir.join("init.sql").display()
            ))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg("--skip-name-resolve")
            .arg("--skip-log-bin")
            .arg("--innodb-buffer-pool-size=16M")
            .arg("--innodb-flush-log-at-trx-commit=2")
            .arg("--max-connections=500")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if running_as_root() {
            // mariadbd refuses to run as root unless told to.
            command.arg("--user=root");
        }
        let child = spawn_from_long_lived_thread(command)?;
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("ready for connections") {
                return Ok(());
            }
            let exited = {
                let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
                guard
                    .as_mut()
                    .is_none_or(|c| c.try_wait().ok().flatten().is_some())
            };
            if exited {
                self.kill();
                return Err(failure(
                    format!("mariadbd on port {} exited during start-up", self.port),
                    &log,
                ));
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(RealError::Timeout {
                    what: format!("mariadbd on port {} to accept connections", self.port),
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

    /// The server's temporary directory (data, socket, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pid of the running server, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    fn signal(&self, signal: libc::c_int) -> Result<u32, RealError> {
        let guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let Some(child) = guard.as_ref() else {
            return Err(RealError::Unsupported(format!(
                "mariadbd on port {} is not running",
                self.port
            )));
        };
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped while we
        // hold the lock, so its pid is still ours.
        unsafe { libc::kill(-(child.id() as libc::pid_t), signal) };
        Ok(child.id())
    }

    /// `SIGSTOP`s the server (a server pause) and returns once every thread is stopped.
    pub fn pause(&self) -> Result<(), RealError> {
        let pid = self.signal(libc::SIGSTOP)?;
        wait_until_stopped(pid, "mariadbd")
    }

    /// `SIGCONT`s a paused server.
    pub fn resume(&self) -> Result<(), RealError> {
        let pid = self.signal(libc::SIGCONT)?;
        wait_until_continued(pid, "mariadbd")
    }

    /// `SIGKILL`s the server (a crash: open transactions are rolled back by crash recovery on the
    /// next start) and reaps it. Idempotent.
    pub fn kill(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = guard.take() {
            kill_and_reap(&mut child);
        }
    }

    /// A server crash and restart: `SIGKILL`, then start again on the same port and data.
    pub fn restart(&self) -> Result<(), RealError> {
        self.kill();
        self.start()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.kill();
        remove_temp_dir(&self.dir);
    }
}
