//! Spawning, signalling and killing lockcheck's own etcd members: a single member or a
//! 3-member cluster.
//!
//! The same promises as for `redis-server` and MariaDB (see the module docs): every member is an
//! `etcd` process (Debian `etcd-server`, 3.4 here) with its own data directory in a temporary
//! directory, its own free client and peer ports on 127.0.0.1 (never 2379/2380, a system etcd's),
//! registered with the cleanup registry (panic hook, signal handlers, `PR_SET_PDEATHSIG`) and
//! killed and removed when the [`EtcdCluster`] guard is dropped. A system etcd is never contacted.
//!
//! A member is ready when its `/health` answers `"true"`, which etcd says only once the cluster
//! has a leader: a 3-member cluster is ready when all three say so.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::real::servers::child::{find_program, free_port, kill_and_reap, make_memory_temp_dir};
use crate::real::servers::child::{spawn_from_long_lived_thread, tail_of_file};
use crate::real::servers::child::{wait_until_continued, wait_until_stopped};
use crate::real::RealError;

/// A system etcd's client and peer ports; lockcheck never uses them.
const RESERVED_PORTS: [u16; 2] = [2379, 2380];

/// How long a cluster may take to elect its first leader (or a restarted member to rejoin).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one admin request (health, status) may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The raft timing a cluster runs with. etcd's minimum lease TTL follows from it
/// (`1.5 × election timeout`, rounded up to whole seconds), so a scenario's lease is refused by
/// etcd if it is shorter: `etcdserver/api/v3rpc` grants `max(TTL, minTTL)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtcdTiming {
    /// `--heartbeat-interval`: how often the leader tells followers it lives (ms).
    pub heartbeat_ms: u64,
    /// `--election-timeout`: how long a follower waits without a heartbeat before it stands
    /// for election (ms).
    pub election_ms: u64,
}

impl Default for EtcdTiming {
    /// etcd's own defaults (100 ms and 1 s).
    fn default() -> Self {
        EtcdTiming {
            heartbeat_ms: 100,
            election_ms: 1000,
        }
    }
}

/// Finds `etcd` (or `$LOCKCHECK_ETCD`).
pub fn etcd_path() -> Result<PathBuf, RealError> {
    let program = match std::env::var_os("LOCKCHECK_ETCD") {
        Some(p) => Some(PathBuf::from(p)),
        None => find_program("etcd"),
    };
    program
        .filter(|p| crate::real::servers::child::is_executable(p))
        .ok_or_else(|| RealError::missing("etcd", "etcd-server"))
}

/// One member of a cluster: its name, ports, data directory and process.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Mutex<Option<Child>>,
}

/// A set of `etcd` members that lockcheck started and owns, forming one cluster.
#[derive(Debug)]
pub struct EtcdCluster {
    dir: PathBuf,
    etcd: PathBuf,
    timing: EtcdTiming,
    members: Vec<Member>,
}

fn port_not_reserved() -> Result<u16, RealError> {
    loop {
        let p = free_port()?;
        if !RESERVED_PORTS.contains(&p) {
            return Ok(p);
        }
    }
}

impl EtcdCluster {
    /// Starts `members` (1 or 3) etcd processes forming one new cluster and returns once every
    /// member reports itself healthy (the cluster has a leader). Blocking (a second or two).
    pub fn spawn(members: usize, timing: EtcdTiming) -> Result<EtcdCluster, RealError> {
        let etcd = etcd_path()?;
        let dir = make_memory_temp_dir("etcd")?;
        let mut cluster = EtcdCluster {
            dir,
            etcd,
            timing,
            members: Vec::new(),
        };
        // From here on Drop removes the directory. A port taken between `free_port` and etcd's
        // bind fails the start; a second set of ports then succeeds.
        let mut last = None;
        for _attempt in 0..3 {
            cluster.kill_all();
            cluster.members.clear();
            for i in 0..members {
                cluster.members.push(Member {
                    name: format!("n{i}"),
                    client_port: port_not_reserved()?,
                    peer_port: port_not_reserved()?,
                    child: Mutex::new(None),
                });
            }
            for i in 0..members {
                let _ = std::fs::remove_dir_all(cluster.data_dir(i));
            }
            let started = (0..members).try_for_each(|i| cluster.start(i, "new"));
            match started.and_then(|()| cluster.wait_healthy(0..members)) {
                Ok(()) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| RealError::Unsupported("etcd did not start".into())))
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.etcd", self.members[i].name))
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.members[i].name))
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts member `i`; `state` is etcd's `--initial-cluster-state` (`new` the first time; a
    /// restart finds its data directory and ignores it).
    fn start(&self, i: usize, state: &str) -> Result<(), RealError> {
        let m = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))
            .map_err(|e| RealError::io(format!("creating {}", self.log(i).display()), e))?;
        let err = log.try_clone().map_err(|e| RealError::io("etcd log", e))?;
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut command = Command::new(&self.etcd);
        command
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(self.initial_cluster())
            .arg("--initial-cluster-state")
            .arg(state)
            .arg("--initial-cluster-token")
            .arg(self.dir.file_name().unwrap_or_default())
            .arg("--heartbeat-interval")
            .arg(self.timing.heartbeat_ms.to_string())
            .arg("--election-timeout")
            .arg(self.timing.election_ms.to_string())
            // etcd's own proxy of environment variables (ETCD_*) must not reach in.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        let child = spawn_from_long_lived_thread(command)?;
        *m.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// Waits until each member of `which` answers `/health` with `true`.
    fn wait_healthy(&self, which: impl IntoIterator<Item = usize>) -> Result<(), RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        for i in which {
            loop {
                if self.healthy(i) {
                    break;
                }
                if !self.running(i) {
                    self.kill_all();
                    return Err(self.failure(i, "exited during start-up"));
                }
                if Instant::now() >= deadline {
                    self.kill_all();
                    return Err(RealError::Timeout {
                        what: format!(
                            "etcd member {} on port {} to report itself healthy",
                            self.members[i].name, self.members[i].client_port
                        ),
                        waited: START_TIMEOUT,
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    fn failure(&self, i: usize, what: &str) -> RealError {
        let m = &self.members[i];
        RealError::io(
            format!(
                "etcd member {} (client port {}) {what}; its log ends with:\n{}",
                m.name,
                m.client_port,
                tail_of_file(&self.log(i), 15)
            ),
            std::io::Error::other("etcd start-up failed"),
        )
    }

    fn running(&self, i: usize) -> bool {
        let mut guard = self.members[i]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        guard
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Whether member `i` answers `/health` with `true` (it sees a leader).
    pub fn healthy(&self, i: usize) -> bool {
        admin_request(self.members[i].client_port, "GET", "/health", "")
            .is_ok_and(|body| body.contains("\"true\""))
    }

    /// How many members the cluster has.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no member (never, once spawned).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The client port of member `i` on 127.0.0.1.
    pub fn client_port(&self, i: usize) -> u16 {
        self.members[i].client_port
    }

    /// The client ports of every member, in member order.
    pub fn client_ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.client_port).collect()
    }

    /// The cluster's temporary directory (data directories, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The raft timing the members run with.
    pub fn timing(&self) -> EtcdTiming {
        self.timing
    }

    /// The pid of member `i`, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    /// The index of the member that is the raft leader, as member `asked` sees it (its
    /// `/v3/maintenance/status`): `None` when it knows no leader or does not answer.
    pub fn leader_seen_by(&self, asked: usize) -> Option<usize> {
        let statuses: Vec<Option<(String, String)>> = (0..self.members.len())
            .map(|i| {
                let body = admin_request(
                    self.members[i].client_port,
                    "POST",
                    "/v3/maintenance/status",
                    "{}",
                )
                .ok()?;
                let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                let me = v["header"]["member_id"].as_str()?.to_string();
                let leader = v["leader"].as_str()?.to_string();
                Some((me, leader))
            })
            .collect();
        let (_, leader) = statuses.get(asked)?.clone()?;
        statuses
            .iter()
            .position(|s| s.as_ref().is_some_and(|(me, _)| *me == leader))
    }

    /// The index of the leader, waiting (up to the start timeout) for the running members to
    /// agree on one.
    pub fn leader(&self) -> Result<usize, RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let running: Vec<usize> = (0..self.members.len())
                .filter(|&i| self.running(i))
                .collect();
            let seen: Vec<Option<usize>> =
                running.iter().map(|&i| self.leader_seen_by(i)).collect();
            if let Some(Some(first)) = seen.first() {
                if seen.iter().all(|s| *s == Some(*first)) {
                    return Ok(*first);
                }
            }
            if Instant::now() >= deadline {
                return Err(RealError::Timeout {
                    what: "the etcd members to agree on a leader".into(),
                    waited: START_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn member_id(&self, i: usize) -> Option<String> {
        let body = admin_request(
            self.members[i].client_port,
            "POST",
            "/v3/maintenance/status",
            "{}",
        )
        .ok()?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["header"]["member_id"].as_str().map(str::to_string)
    }

    /// Makes member `i` the leader (etcd's `MoveLeader`, asked of the current leader) and
    /// returns once every member agrees, so that a scenario's `etcd-0` leads when its run starts
    /// in both worlds.
    pub fn make_leader(&self, i: usize) -> Result<(), RealError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let leader = self.leader()?;
            if leader == i {
                return Ok(());
            }
            if let Some(target) = self.member_id(i) {
                let body = format!("{{\"targetID\":\"{target}\"}}");
                let _ = admin_request(
                    self.members[leader].client_port,
                    "POST",
                    "/v3/maintenance/transfer-leadership",
                    &body,
                );
            }
            if Instant::now() >= deadline {
                return Err(RealError::Timeout {
                    what: format!("etcd member {} to become the leader", self.members[i].name),
                    waited: START_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, i: usize, signal: libc::c_int) -> Result<u32, RealError> {
        let guard = self.members[i]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(child) = guard.as_ref() else {
            return Err(RealError::Unsupported(format!(
                "etcd member {} is not running",
                self.members[i].name
            )));
        };
        // SAFETY: kill(2) has no memory-safety preconditions; the child is not reaped while we
        // hold the lock, so its pid is still ours.
        unsafe { libc::kill(-(child.id() as libc::pid_t), signal) };
        Ok(child.id())
    }

    /// `SIGSTOP`s member `i` (a server pause) and returns once every thread is stopped.
    pub fn pause(&self, i: usize) -> Result<(), RealError> {
        let pid = self.signal(i, libc::SIGSTOP)?;
        wait_until_stopped(pid, "etcd")
    }

    /// `SIGCONT`s a paused member.
    pub fn resume(&self, i: usize) -> Result<(), RealError> {
        let pid = self.signal(i, libc::SIGCONT)?;
        wait_until_continued(pid, "etcd")
    }

    /// `SIGKILL`s member `i` (a crash; what raft committed is in its write-ahead log) and reaps
    /// it. Idempotent.
    pub fn kill(&self, i: usize) {
        let mut guard = self.members[i]
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = guard.take() {
            kill_and_reap(&mut child);
        }
    }

    fn kill_all(&self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }

    /// A member crash and restart: `SIGKILL`, then start again on the same ports and data
    /// directory; returns once it reports itself healthy (it rejoined a cluster with a leader).
    pub fn restart(&self, i: usize) -> Result<(), RealError> {
        self.kill(i);
        self.start(i, "existing")?;
        self.wait_healthy([i])
    }

    /// Starts a member that was [`EtcdCluster::kill`]ed without waiting for it to be healthy
    /// (a single member is healthy at once; one of three needs a quorum to come back).
    pub fn start_again(&self, i: usize) -> Result<(), RealError> {
        if self.running(i) {
            return Ok(());
        }
        self.start(i, "existing")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One HTTP/1.1 request to a member's client port, blocking, `Connection: close`; returns the
/// body of a 2xx answer. Only for the harness's own questions (health, status): the locks speak
/// through `real::etcd_conn`.
fn admin_request(port: u16, method: &str, path: &str, body: &str) -> Result<String, RealError> {
    let io = |e| RealError::io(format!("etcd admin request {path} on port {port}"), e);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, ADMIN_TIMEOUT).map_err(io)?;
    stream.set_read_timeout(Some(ADMIN_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(ADMIN_TIMEOUT)).map_err(io)?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(io)?;
    let text = String::from_utf8_lossy(&answer);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| io(std::io::Error::other("no HTTP header")))?;
    let ok = head
        .split_whitespace()
        .nth(1)
        .is_some_and(|code| code.starts_with('2'));
    if !ok {
        return Err(io(std::io::Error::other(format!("answered {head}"))));
    }
    // etcd's gateway answers small bodies with Content-Length; a chunked one is unwrapped here.
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(unchunk(rest));
    }
    Ok(rest.to_string())
}

/// The body of a complete `Transfer-Encoding: chunked` answer.
fn unchunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    body
}
