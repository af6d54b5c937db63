//! The parts of running any child process that `redis-server`, MariaDB and client programs
//! share: a free port, a temporary directory, forking from a thread that outlives every caller
//! (so `PR_SET_PDEATHSIG` kills children only with lockcheck), and reading a process's state.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::cleanup;
use crate::real::RealError;

/// The port of the machine's own Redis. lockcheck never starts a server there and
/// never sends a command to it.
const RESERVED_PORT: u16 = 6379;

/// How long a port handed out by [`free_port`] is not handed out again: long enough for the
/// server it was picked for to bind it.
const HANDED_OUT_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// Picks a free port by binding port 0. The listener is closed before the server
/// binds, so another program can take the port in between: `spawn` retries, and
/// checks the pid of whoever answers. Nor does the kernel remember a port once its listener is
/// closed, so picking the ports of one ensemble one after another could give the same port twice
/// (seen: ZooKeeper refusing "Client and election port must be different!"): a port handed out
/// in this process is not handed out again for [`HANDED_OUT_FOR`].
pub(crate) fn free_port() -> Result<u16, RealError> {
    static HANDED_OUT: std::sync::Mutex<Vec<(u16, std::time::Instant)>> =
        std::sync::Mutex::new(Vec::new());
    loop {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| RealError::io("finding a free port on 127.0.0.1", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| RealError::io("finding a free port on 127.0.0.1", e))?
            .port();
        if port == RESERVED_PORT {
            continue;
        }
        let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        handed.retain(|(_, at)| at.elapsed() < HANDED_OUT_FOR);
        if handed.iter().any(|(p, _)| *p == port) {
            continue;
        }
        handed.push((port, std::time::Instant::now()));
        return Ok(port);
    }
}

/// A fresh temporary directory `lockcheck-<what>-<pid>-<n>-<nanos>` for one child's files,
/// registered so that a signal removes it ([`remove_temp_dir`] removes it otherwise). `<pid>`
/// is the lockcheck process that owns it: a `SIGKILL` runs no handler, so a killed run's
/// directories stay behind, and the next run removes those whose owner is dead
/// ([`sweep_dead_scratch`]).
pub(crate) fn make_temp_dir(what: &str) -> Result<PathBuf, RealError> {
    make_temp_dir_in(&std::env::temp_dir(), what)
}

/// A fresh scratch directory in memory (`/dev/shm`, where the machine has it; the temp dir
/// otherwise), for a server that `fsync`s every write it acknowledges: etcd waits for its WAL's
/// `fsync` before it answers, and on a machine whose disk is busy (a build writing gigabytes
/// beside the tests) that wait grew to seconds, longer than a lease's TTL, so leases expired
/// and waiters waited for reasons no lock has. A process crash (`SIGKILL`, the only crash
/// lockcheck makes) keeps what is in memory exactly as it keeps what is on disk, so a restarted
/// member finds the same data either way.
pub(crate) fn make_memory_temp_dir(what: &str) -> Result<PathBuf, RealError> {
    let shm = Path::new("/dev/shm");
    let writable = std::fs::metadata(shm).is_ok_and(|m| m.is_dir() && !m.permissions().readonly());
    if writable {
        if let Ok(dir) = make_temp_dir_in(shm, what) {
            return Ok(dir);
        }
    }
    make_temp_dir(what)
}

fn make_temp_dir_in(base: &Path, what: &str) -> Result<PathBuf, RealError> {
    // The first scratch directory of a process is the start of its first real run: the moment
    // to clear what killed runs left, before this run adds its own.
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        sweep_dead_scratch(&scratch_bases());
    });
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(
        "lockcheck-{what}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir)
        .map_err(|e| RealError::io(format!("creating {}", dir.display()), e))?;
    cleanup::register_dir(&dir)?;
    Ok(dir)
}

/// Where lockcheck makes scratch directories: the temp dir, and `/dev/shm`
/// ([`make_memory_temp_dir`]: a three-member etcd's WALs, 367 MB after one killed run).
pub(crate) fn scratch_bases() -> Vec<PathBuf> {
    vec![std::env::temp_dir(), PathBuf::from("/dev/shm")]
}

/// The owning pid of a lockcheck scratch directory's name, `lockcheck-<what>-<pid>-<n>-<nanos>`
/// ([`make_temp_dir`]), or `None` for any other name. Strict (a lowercase word, then three
/// numbers) so that the sweep never takes another directory that merely starts with
/// `lockcheck-`: `lockcheck-cache` (libfaketime's build), `lockcheck-out-<pid>`, a test's own.
pub(crate) fn scratch_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("lockcheck-")?;
    let mut fields = rest.rsplitn(4, '-');
    let (nanos, n, pid, what) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let numeric = |f: &str| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit());
    let word = !what.is_empty() && what.bytes().all(|b| b.is_ascii_lowercase());
    (word && numeric(nanos) && numeric(n) && numeric(pid))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether process `pid` still runs: `kill(pid, 0)` finds it (or finds it and may not signal
/// it), and it is not a zombie (a killed process its parent has not reaped yet is as dead as
/// its scratch). A pid reused by an unrelated process counts as alive: the sweep then keeps a
/// dead run's directory rather than risk a live one's.
pub(crate) fn process_alive(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
    let found = unsafe { libc::kill(raw, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    found && proc_state(&format!("/proc/{pid}/stat")) != Some('Z')
}

/// Removes, in each of `bases`, every lockcheck scratch directory ([`scratch_owner`]) whose
/// owning process is dead and is not this one: what a `SIGKILL`ed run (or a machine that lost
/// power) left, which no handler of its own could remove. Returns the directories removed.
/// A live owner's directories are never touched, so runs side by side (`--jobs`, two terminals,
/// a test suite's lanes) keep theirs.
pub(crate) fn sweep_dead_scratch(bases: &[PathBuf]) -> Vec<PathBuf> {
    let me = std::process::id();
    let mut removed = Vec::new();
    for base in bases {
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = name.to_str().and_then(scratch_owner) else {
                continue;
            };
            // Only directories (never a symlink to one elsewhere), and only a dead owner's.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || owner == me || process_alive(owner) {
                continue;
            }
            if std::fs::remove_dir_all(entry.path()).is_ok() {
                removed.push(entry.path());
            }
        }
    }
    removed
}

/// Removes a directory [`make_temp_dir`] made, and forgets it.
pub(crate) fn remove_temp_dir(dir: &Path) {
    cleanup::remove_dir(dir);
}

/// A spawn request for the spawner thread.
struct SpawnJob {
    command: Command,
    reply: mpsc::Sender<Result<Child, RealError>>,
}

/// Forks `command` from a thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
/// process: a server forked from a test thread, a scoped thread or a tokio
/// blocking-pool thread (which idles out after 10 s) would be killed as soon as
/// that thread ends. So every fork happens on one dedicated thread that never
/// returns; it ends only with the process, which is exactly when the children
/// should die.
pub(crate) fn spawn_from_long_lived_thread(command: Command) -> Result<Child, RealError> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("lockcheck-spawner".into())
            .spawn(move || {
                // `rx` never disconnects: the static keeps `tx` alive forever.
                for job in rx {
                    let result = fork_and_register(job.command);
                    if let Err(mpsc::SendError(Ok(mut orphan))) = job.reply.send(result) {
                        // The requester is gone; nobody would ever kill this child.
                        let _ = orphan.kill();
                        cleanup::deregister(orphan.id());
                        let _ = orphan.wait();
                    }
                }
            })
            .expect("cannot start the lockcheck-spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .send(SpawnJob {
            command,
            reply: reply_tx,
        })
        .map_err(|_| RealError::io("spawner thread", std::io::ErrorKind::BrokenPipe.into()))?;
    reply_rx
        .recv()
        .map_err(|_| RealError::io("spawner thread", std::io::ErrorKind::BrokenPipe.into()))?
}

/// Looks a program up in `$PATH` and then in the standard system directories
/// (which a minimal `$PATH`, as under some CI runners, may lack).
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(
            ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
                .iter()
                .map(PathBuf::from),
        )
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn fork_and_register(mut command: Command) -> Result<Child, RealError> {
    let parent = std::process::id() as libc::pid_t;
    // Own process group: Ctrl-C in a terminal reaches lockcheck only (which then
    // kills the servers itself), and a group kill also reaches Redis's forks.
    command.process_group(0);
    // SAFETY: the closure runs between fork and exec and calls only prctl, getppid
    // and _exit, which are async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // lockcheck may have died between fork and prctl; then the death
            // signal will never come, so give up now.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .spawn()
        .map_err(|e| RealError::io(format!("starting {program}"), e))?;
    if let Err(err) = cleanup::register(child.id()) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(err);
    }
    Ok(child)
}

/// `SIGKILL`s an unreaped child and everything it forked, then reaps it: a crash, no shutdown,
/// the same for a `redis-server`, a MariaDB and a client program. The group kill reaches what
/// it forked; the direct kill covers a child whose `setpgid` never ran. It is deregistered
/// before it is reaped, so a signal handler can never kill a reused pid.
pub(crate) fn kill_and_reap(child: &mut Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) has no memory-safety preconditions; the caller holds the child unreaped,
    // so `pid` is still its.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
    cleanup::deregister(child.id());
    let _ = child.wait();
    cleanup::remove_libfaketime_leftovers(child.id());
}

/// Waits (up to 2 s) until the thread states of `pid` satisfy `done`: a signal is only queued
/// by `kill`, and a fault step that runs before the process has actually stopped would race it.
fn wait_for_state(
    pid: u32,
    who: &str,
    what: &str,
    done: impl Fn(&[char]) -> bool,
) -> Result<(), RealError> {
    let timeout = Duration::from_secs(2);
    let deadline = Instant::now() + timeout;
    loop {
        if done(&thread_states(pid)) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(RealError::Timeout {
                what: format!("{who} pid {pid} to {what}"),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits until every thread of `pid` is stopped (`SIGSTOP` only queues the signal, and a fault
/// step that ran before the process had stopped would race with it).
pub(crate) fn wait_until_stopped(pid: u32, who: &str) -> Result<(), RealError> {
    wait_for_state(pid, who, "stop", |s| {
        !s.is_empty() && s.iter().all(|c| matches!(c, 'T' | 't'))
    })
}

/// Waits until no thread of `pid` is stopped any more, after a `SIGCONT`.
pub(crate) fn wait_until_continued(pid: u32, who: &str) -> Result<(), RealError> {
    wait_for_state(pid, who, "continue", |s| {
        s.iter().all(|c| !matches!(c, 'T' | 't'))
    })
}

/// The scheduler state letters (`R`, `S`, `T`, `Z`, ...) of every thread of `pid`,
/// main thread first; empty once the process is gone.
pub(crate) fn thread_states(pid: u32) -> Vec<char> {
    let mut states = Vec::new();
    if let Some(main) = proc_state(&format!("/proc/{pid}/stat")) {
        states.push(main);
    } else {
        return states;
    }
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if task.file_name().to_string_lossy() == pid.to_string() {
                continue;
            }
            if let Some(state) = proc_state(&format!("{}/stat", task.path().display())) {
                states.push(state);
            }
        }
    }
    states
}

/// The state letter of a `/proc/.../stat` file: the field after the `(comm)`.
fn proc_state(path: &str) -> Option<char> {
    let stat = std::fs::read_to_string(path).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// The value of `field:` in an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

pub(crate) fn tail_of_file(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut text = String::new();
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_ok() {
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    let mut out = all[all.len().saturating_sub(lines)..].join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ports of one ensemble, picked one after another, are all different.
    #[test]
    fn free_port_does_not_hand_out_a_port_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        assert!(!ports.contains(&RESERVED_PORT));
    }

    #[test]
    fn only_lockchecks_own_scratch_names_have_an_owner() {
        assert_eq!(scratch_owner("lockcheck-redis-4242-0-123456"), Some(4242));
        assert_eq!(scratch_owner("lockcheck-etcd-7-12-0"), Some(7));
        for other in [
            "lockcheck-cache",
            "lockcheck-out-4242",
            "lockcheck-regressions",
            "lockcheck-bounded-x-4242",
            "lockcheck-interrupt-test-servers-4242",
            "lockcheck-redis-4242-0",
            "lockcheck-Redis-4242-0-1",
            "lockcheck--4242-0-1",
            "lockcheck-redis-42a-0-1",
            "faketime_shm_4242",
            "lockcheck-redis-4242-0-1/x",
        ] {
            assert_eq!(scratch_owner(other), None, "{other}");
        }
    }

    /// The sweep takes a dead owner's directories and nothing else: not a live owner's, not this
    /// process's, not a file, not a name that is not lockcheck's scratch.
    #[test]
    fn the_sweep_removes_only_dead_owners_scratch_directories() {
        let base =
            std::env::temp_dir().join(format!("lockcheck-sweep-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let mut c = Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        // A zombie (exited, not yet reaped) is dead too.
        let zombie = Command::new("true").spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc_state(&format!("/proc/{}/stat", zombie.id())) != Some('Z') {
            assert!(Instant::now() < deadline, "no zombie");
            std::thread::sleep(Duration::from_millis(5));
        }
        let me = std::process::id();
        let parent = std::os::unix::process::parent_id();
        let dead_dir = base.join(format!("lockcheck-etcd-{dead}-0-1"));
        let zombie_dir = base.join(format!("lockcheck-client-{}-3-9", zombie.id()));
        let mine = base.join(format!("lockcheck-redis-{me}-0-1"));
        let live = base.join(format!("lockcheck-redis-{parent}-0-1"));
        let file = base.join(format!("lockcheck-redis-{dead}-1-1"));
        let other = base.join(format!("lockcheck-out-{dead}"));
        for d in [&dead_dir, &zombie_dir, &mine, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(dead_dir.join("wal"), b"x").unwrap();
        std::fs::write(&file, b"x").unwrap();
        let mut removed = sweep_dead_scratch(std::slice::from_ref(&base));
        removed.sort();
        let mut zombie = zombie;
        zombie.wait().unwrap();
        let kept = [&mine, &live, &file, &other].map(|p| p.exists());
        let _ = std::fs::remove_dir_all(&base);
        let mut want = vec![dead_dir, zombie_dir];
        want.sort();
        assert_eq!(removed, want);
        assert_eq!(kept, [true; 4]);
        assert!(scratch_bases().contains(&PathBuf::from("/dev/shm")));
    }
}
