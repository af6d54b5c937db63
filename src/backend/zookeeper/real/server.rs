//! Spawning, faulting and killing lockcheck's own ZooKeeper servers: one standalone server, or a
//! three-server ensemble.
//!
//! The same promises as for `redis-server` and MariaDB: every server is a JVM that lockcheck
//! starts itself (Debian's `zookeeper` 3.8 jars in `/usr/share/java`, run by `java`), on free TCP
//! ports of 127.0.0.1 (never 2181, the port of a machine's own ZooKeeper), with its own data
//! directory in a temporary directory; each process is registered with the cleanup registry
//! (panic hook, signal handlers, `PR_SET_PDEATHSIG`) and killed, and the directory removed, when
//! the [`ZooKeeper`] guard is dropped.
//!
//! The JVM is kept small and quick to start: a 128 MiB heap, the serial collector, the C1
//! compiler only, no `hsperfdata` file in `/tmp` (`-XX:-UsePerfData`) and only the jars the
//! server loads on its classpath (the whole of `/usr/share/java` holds several SLF4J bindings
//! and takes longer to scan). Measured on 2 cores: a standalone server serves within about 1 s,
//! an ensemble elects its leader within about 2 s, and a new leader is elected about 0.5 s after
//! the old one is killed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::backend::zookeeper::real::lag_link::LagLink;
use crate::real::servers::child::{
    find_program, free_port, is_executable, kill_and_reap, make_temp_dir,
};
use crate::real::servers::child::{spawn_from_long_lived_thread, tail_of_file};
use crate::real::servers::child::{wait_until_continued, wait_until_stopped};
use crate::real::RealError;

/// The client port of a machine's own ZooKeeper; lockcheck never uses it.
const RESERVED_PORT: u16 = 2181;

/// How long a server (or every server of an ensemble, with its election) may take to serve.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The jars a ZooKeeper 3.8 server loads, found in the jar directory. The server speaks NIO to
/// clients and TCP to its peers; netty and the metrics library are linked from classes it loads
/// at start-up, SLF4J's simple binding writes its warnings to the server's log file.
const JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-transport.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "commons-cli.jar",
    "metrics-core.jar",
];

/// What to start: how many servers, how fast their clocks tick, and (for tests and unusual
/// installations) where `java` and the jars are.
#[derive(Clone, Debug)]
pub struct ZooKeeperOptions {
    /// 1 (a standalone server, `ZooKeeperServerMain`) or 3 (an ensemble, `QuorumPeerMain`).
    pub servers: usize,
    /// ZooKeeper's `tickTime`: the unit of its heartbeats and the granularity of session expiry
    /// (a session expires on the first tick after its timeout, see `ExpiryQueue`).
    pub tick_ms: u32,
    /// The session timeouts the server accepts: a client's requested timeout is clamped into
    /// this range (by default ZooKeeper allows only 2 to 20 ticks).
    pub session_timeout_ms: (u32, u32),
    /// `java`; by default `$LOCKCHECK_JAVA`, else `java` on the `$PATH`.
    pub java: Option<PathBuf>,
    /// The directory holding ZooKeeper's jars; by default `$LOCKCHECK_ZOOKEEPER_JARS`, else
    /// `/usr/share/java`.
    pub jar_dir: Option<PathBuf>,
    /// `localSessionsEnabled` (and `localSessionsUpgradingEnabled`): a session is created by the
    /// server a client connects to, with no transaction, and becomes global (a transaction of
    /// the leader) only when it creates an ephemeral node. Off by default, as in ZooKeeper.
    pub local_sessions: bool,
    /// An ensemble whose every follower hears the leader this late: each server reaches the
    /// others' peer (quorum) ports through a [`LagLink`] that delays what the leader sends on it,
    /// so a follower receives proposals, commits, pings and the answers to its session
    /// revalidations this late, and nothing it sends is delayed. A write is then committed about
    /// one delay after the leader proposed it (a follower's acknowledgement of the late proposal
    /// makes the quorum) and applied by the followers about two delays after. `None`: servers
    /// reach each other directly.
    pub peer_delay: Option<Duration>,
}

impl Default for ZooKeeperOptions {
    fn default() -> Self {
        ZooKeeperOptions {
            servers: 1,
            tick_ms: 100,
            session_timeout_ms: (200, 60_000),
            java: None,
            jar_dir: None,
            local_sessions: false,
            peer_delay: None,
        }
    }
}

/// The role a server reports for itself (the `Mode:` line of its `srvr` answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A server started alone.
    Standalone,
    /// The ensemble's leader: it orders every write and tracks every session.
    Leader,
    /// A follower of the leader.
    Follower,
}

/// One server of the deployment: its ports, its directory and its process.
#[derive(Debug)]
struct Server {
    /// `myid`, 1-based as ZooKeeper numbers its servers.
    id: usize,
    client_port: u16,
    peer_port: u16,
    election_port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

/// One standalone ZooKeeper server or a three-server ensemble that lockcheck started and owns.
#[derive(Debug)]
pub struct ZooKeeper {
    servers: Vec<Server>,
    /// `links[n][m]`: how server `n` reaches server `m`'s peer port, for an ensemble with a
    /// follower lag (empty otherwise). Dropped after the servers are killed.
    links: Vec<Vec<Option<LagLink>>>,
    dir: PathBuf,
    java: PathBuf,
    classpath: String,
}

/// Finds `java` and ZooKeeper's jar directory, or says which Debian package to install.
pub fn zookeeper_paths(opts: &ZooKeeperOptions) -> Result<(PathBuf, PathBuf), RealError> {
    let java = match opts
        .java
        .clone()
        .or_else(|| std::env::var_os("LOCKCHECK_JAVA").map(PathBuf::from))
    {
        Some(path) if is_executable(&path) => path,
        Some(path) => {
            return Err(RealError::missing(
                &format!("java ({})", path.display()),
                "default-jre-headless",
            ))
        }
        None => find_program("java")
            .ok_or_else(|| RealError::missing("java", "default-jre-headless"))?,
    };
    let jar_dir = opts
        .jar_dir
        .clone()
        .or_else(|| std::env::var_os("LOCKCHECK_ZOOKEEPER_JARS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/usr/share/java"));
    if !jar_dir.join("zookeeper.jar").is_file() {
        return Err(RealError::missing(
            &format!("{}", jar_dir.join("zookeeper.jar").display()),
            "zookeeper",
        ));
    }
    Ok((java, jar_dir))
}

fn classpath(jar_dir: &Path) -> Result<String, RealError> {
    let mut parts = Vec::new();
    for jar in JARS {
        let path = jar_dir.join(jar);
        if !path.is_file() {
            return Err(RealError::missing(&path.display().to_string(), "zookeeper"));
        }
        parts.push(path.display().to_string());
    }
    Ok(parts.join(":"))
}

/// A port that is free now and is not a machine's own ZooKeeper's.
fn port() -> Result<u16, RealError> {
    loop {
        let p = free_port()?;
        if p != RESERVED_PORT {
            return Ok(p);
        }
    }
}

/// Sends a four-letter command (`srvr`, `conf`) to a client port and returns the answer.
pub fn four_letter(port: u16, command: &str) -> std::io::Result<String> {
    let timeout = Duration::from_millis(500);
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(command.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

impl ZooKeeper {
    /// Starts the servers on free ports and returns once every one serves (an ensemble: once it
    /// has elected a leader). Blocking (one to a few seconds).
    pub fn spawn(opts: ZooKeeperOptions) -> Result<ZooKeeper, RealError> {
        if opts.servers != 1 && opts.servers != 3 {
            return Err(RealError::Unsupported(format!(
                "a ZooKeeper deployment has 1 or 3 servers, not {}",
                opts.servers
            )));
        }
        let (java, jar_dir) = zookeeper_paths(&opts)?;
        let classpath = classpath(&jar_dir)?;
        let mut last_error = None;
        // A port can be taken by another program between the probe and the server's bind; that
        // is the failure worth retrying, with fresh ports.
        for _attempt in 0..3 {
            let mut zk = ZooKeeper {
                servers: Vec::new(),
                links: Vec::new(),
                dir: make_temp_dir("zookeeper")?,
                java: java.clone(),
                classpath: classpath.clone(),
            };
            // From here on Drop kills what started and removes the directory.
            match zk.configure(&opts).and_then(|()| zk.start_all()) {
                Ok(()) => return Ok(zk),
                Err(err) if zk.any_log_contains("Address already in use") => last_error = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    /// Picks the ports and writes every server's `zoo.cfg` and `myid`.
    fn configure(&mut self, opts: &ZooKeeperOptions) -> Result<(), RealError> {
        for id in 1..=opts.servers {
            let dir = self.dir.join(format!("server{id}"));
            std::fs::create_dir_all(dir.join("data"))
                .map_err(|e| RealError::io(format!("creating {}", dir.display()), e))?;
            self.servers.push(Server {
                id,
                client_port: port()?,
                peer_port: port()?,
                election_port: port()?,
                dir,
                child: Mutex::new(None),
            });
        }
        if let Some(lag) = opts.peer_delay.filter(|_| opts.servers > 1) {
            for n in 0..self.servers.len() {
                let mut row = Vec::new();
                for m in 0..self.servers.len() {
                    row.push(if n == m {
                        None
                    } else {
                        let upstream = ([127, 0, 0, 1], self.servers[m].peer_port).into();
                        Some(LagLink::start(upstream, lag)?)
                    });
                }
                self.links.push(row);
            }
        }
        for (n, server) in self.servers.iter().enumerate() {
            let peers = self.peer_lines(n);
            let local = if opts.local_sessions {
                "localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\n"
            } else {
                ""
            };
            // initLimit/syncLimit are in ticks: generous, so a loaded machine does not make a
            // follower drop out of the ensemble on its own (only a fault should). At least 5 s
            // and 2 s whatever the tick: with a 1 ms tick, 50 ticks is less than a JVM takes to
            // sync a follower, and a three-server ensemble never formed (the spawn waited its
            // whole minute, then failed).
            let init_limit = 50.max(5_000u64.div_ceil(u64::from(opts.tick_ms.max(1))));
            let sync_limit = 20.max(2_000u64.div_ceil(u64::from(opts.tick_ms.max(1))));
            let config = format!(
                "tickTime={tick}\n\
                 initLimit={init_limit}\n\
                 syncLimit={sync_limit}\n\
                 dataDir={data}\n\
                 clientPort={client}\n\
                 clientPortAddress=127.0.0.1\n\
                 minSessionTimeout={min}\n\
                 maxSessionTimeout={max}\n\
                 4lw.commands.whitelist=srvr,conf,stat,cons,mntr\n\
                 admin.enableServer=false\n\
                 preAllocSize=1024\n\
                 {local}{peers}",
                tick = opts.tick_ms,
                data = server.dir.join("data").display(),
                client = server.client_port,
                min = opts.session_timeout_ms.0,
                max = opts.session_timeout_ms.1,
            );
            std::fs::write(server.dir.join("zoo.cfg"), config)
                .map_err(|e| RealError::io("writing zoo.cfg", e))?;
            if opts.servers > 1 {
                std::fs::write(
                    server.dir.join("data").join("myid"),
                    format!("{}\n", server.id),
                )
                .map_err(|e| RealError::io("writing myid", e))?;
            }
        }
        Ok(())
    }

    /// The `server.<id>=` lines of server `n`'s `zoo.cfg`: its own ports, and for each other server
    /// its election port and the peer port server `n` reaches it by (a lag link's, if any).
    /// ZooKeeper binds a server's own line and connects to the others' (a follower to its
    /// leader's peer port), so only the connecting side's view of a port needs to differ.
    fn peer_lines(&self, n: usize) -> String {
        if self.servers.len() == 1 {
            return String::new();
        }
        self.servers
            .iter()
            .enumerate()
            .map(|(m, s)| {
                let peer = self
                    .links
                    .get(n)
                    .and_then(|row| row[m].as_ref())
                    .map_or(s.peer_port, LagLink::port);
                format!("server.{}=127.0.0.1:{}:{}\n", s.id, peer, s.election_port)
            })
            .collect()
    }

    fn any_log_contains(&self, text: &str) -> bool {
        self.servers.iter().any(|s| {
            std::fs::read_to_string(s.dir.join("server.log"))
                .map(|log| log.contains(text))
                .unwrap_or(false)
        })
    }

    fn start_all(&self) -> Result<(), RealError> {
        for index in 0..self.servers.len() {
            self.launch(index)?;
        }
        self.wait_serving(&(0..self.servers.len()).collect::<Vec<_>>())
    }

    /// Starts server `index`'s JVM (its data directory as it was: a restart recovers it).
    fn launch(&self, index: usize) -> Result<(), RealError> {
        let server = &self.servers[index];
        let log = std::fs::File::create(server.dir.join("server.log"))
            .map_err(|e| RealError::io("creating the server's log", e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| RealError::io("duplicating the server's log", e))?;
        let main_class = if self.servers.len() == 1 {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        } else {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        };
        let mut command = Command::new(&self.java);
        command
            .args(["-Xmx128m", "-Xss512k", "-XX:+UseSerialGC"])
            .args(["-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"])
            .arg(format!("-Djava.io.tmpdir={}", server.dir.display()))
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-Dzookeeper.jmx.log4j.disable=true")
            .arg("-cp")
            .arg(&self.classpath)
            .arg(main_class)
            .arg(server.dir.join("zoo.cfg"))
            .current_dir(&server.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let child = spawn_from_long_lived_thread(command)?;
        *server.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// Waits until every listed server serves clients as the server lockcheck configured (its
    /// `conf` names our data directory, so a stranger on the port is never taken for ours), and
    /// an ensemble's serving servers agree on one leader.
    fn wait_serving(&self, indices: &[usize]) -> Result<(), RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let mut ready = true;
            for &i in indices {
                let server = &self.servers[i];
                if !self.is_running(i) {
                    return Err(RealError::io(
                        format!(
                            "ZooKeeper server {} on port {} exited during start-up; its log ends with:\n{}",
                            server.id,
                            server.client_port,
                            tail_of_file(&server.dir.join("server.log"), 15)
                        ),
                        std::io::Error::other("zookeeper start-up failed"),
                    ));
                }
                let ours = four_letter(server.client_port, "conf")
                    .map(|conf| conf.contains(&server.dir.join("data").display().to_string()))
                    .unwrap_or(false);
                if !ours || self.mode(i).is_none() {
                    ready = false;
                }
            }
            if ready && (self.servers.len() == 1 || self.leader().is_some()) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RealError::Timeout {
                    what: "the ZooKeeper servers to serve clients".into(),
                    waited: START_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn is_running(&self, index: usize) -> bool {
        let mut guard = self.servers[index]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(child) => child.try_wait().ok().flatten().is_none(),
            None => false,
        }
    }

    /// How many servers the deployment has.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: a deployment has at least one server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Server `index`'s client port on 127.0.0.1.
    pub fn client_port(&self, index: usize) -> u16 {
        self.servers[index].client_port
    }

    /// The connect string a client is given: every server's `127.0.0.1:port`, comma-separated.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The deployment's temporary directory (every server's data, configuration and log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pid of server `index`'s JVM, if it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.servers[index]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    /// What server `index` says it is now; `None` while it does not serve (starting, electing,
    /// cut off from its quorum, paused or killed).
    pub fn mode(&self, index: usize) -> Option<Mode> {
        let answer = four_letter(self.servers[index].client_port, "srvr").ok()?;
        let mode = answer.lines().find_map(|l| l.strip_prefix("Mode: "))?;
        match mode.trim() {
            "standalone" => Some(Mode::Standalone),
            "leader" => Some(Mode::Leader),
            "follower" => Some(Mode::Follower),
            _ => None,
        }
    }

    /// The index of the server that says it leads (a standalone server leads itself).
    pub fn leader(&self) -> Option<usize> {
        (0..self.servers.len()).find(|&i| {
            self.is_running(i) && matches!(self.mode(i), Some(Mode::Leader | Mode::Standalone))
        })
    }

    /// [`ZooKeeper::leader`], asked again every 50 ms for up to `wait`: on a loaded machine one
    /// `srvr` question can time out while the servers serve.
    pub fn leader_within(&self, wait: Duration) -> Option<usize> {
        let deadline = Instant::now() + wait;
        loop {
            let leader = self.leader();
            if leader.is_some() || Instant::now() >= deadline {
                return leader;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, index: usize, signal: libc::c_int) -> Result<u32, RealError> {
        let guard = self.servers[index]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(child) = guard.as_ref() else {
            return Err(RealError::Unsupported(format!(
                "ZooKeeper server {} is not running",
                self.servers[index].id
            )));
        };
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped while we
        // hold the lock, so its pid is still ours.
        unsafe { libc::kill(-(child.id() as libc::pid_t), signal) };
        Ok(child.id())
    }

    /// `SIGSTOP`s server `index` (a server pause: its clients' sessions are not heard) and
    /// returns once every JVM thread is stopped.
    pub fn pause(&self, index: usize) -> Result<(), RealError> {
        let pid = self.signal(index, libc::SIGSTOP)?;
        wait_until_stopped(pid, "zookeeper")
    }

    /// `SIGCONT`s a paused server.
    pub fn resume(&self, index: usize) -> Result<(), RealError> {
        let pid = self.signal(index, libc::SIGCONT)?;
        wait_until_continued(pid, "zookeeper")
    }

    /// `SIGKILL`s server `index` (a crash) and reaps it. Idempotent.
    pub fn kill(&self, index: usize) {
        let mut guard = self.servers[index]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = guard.take() {
            kill_and_reap(&mut child);
        }
    }

    /// Starts a killed server again on its ports and data directory, and waits until it serves
    /// (a server of an ensemble: until it has rejoined the quorum).
    pub fn restart(&self, index: usize) -> Result<(), RealError> {
        self.kill(index);
        self.launch(index)?;
        self.wait_serving(&[index])
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        for index in 0..self.servers.len() {
            self.kill(index);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
