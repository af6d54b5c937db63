//! The process-wide registry of lockcheck's children, and the handlers that kill
//! them when lockcheck dies in a way that skips destructors.
//!
//! Layers of defence, from the common path to the rare one:
//!
//! 1. [`crate::real::RedisServer`]'s `Drop` kills and reaps its process (normal
//!    return, `?` errors, and unwinding panics).
//! 2. The panic hook installed by [`install_cleanup_handlers`] kills every child
//!    before anything else runs, and removes their scratch directories, which covers
//!    `panic = "abort"` builds and servers held by threads that will never unwind (a
//!    panic on the main thread ends the process without joining the others).
//! 3. The `SIGINT`/`SIGTERM`/`SIGHUP` handlers kill every child, then `_exit` with
//!    `128 + signal` (130 for Ctrl-C, 143 for `kill`), because a signal's default
//!    action runs no destructor at all.
//! 4. `PR_SET_PDEATHSIG = SIGKILL` in every child (see `child.rs`) makes the
//!    kernel kill them when lockcheck itself is `SIGKILL`ed, or exits through
//!    `std::process::exit`.
//!
//! Each child's scratch directory (`lockcheck-redis-*`, `lockcheck-client-*`,
//! `lockcheck-mariadb-*` in the temp dir) is registered too ([`register_dir`]): its owner's
//! `Drop` removes it, and on a signal the handler, once the children are dead, hands the
//! removal to the cleaner thread (removing a tree lists directories, which allocates, so it
//! cannot run in the handler itself) and waits for it to finish and exit. An interrupted Sentinel
//! run otherwise left five directories behind.
//!
//! The registry is a fixed array of atomics rather than a `Mutex<Vec<_>>` because
//! the signal handler reads it: a signal can arrive while the same thread holds the
//! mutex, and only lock-free loads (plus `kill` and `_exit`) are async-signal-safe.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use crate::real::RealError;

/// How many children (servers and client programs) can be alive at once in one lockcheck
/// process. A scenario has a handful of servers and up to 256 client programs
/// (`workload.clients` of a `client-program` lock), and `--jobs` runs several deployments at
/// once; the bound exists only because a signal handler cannot allocate.
pub const CAPACITY: usize = 2048;

/// Pids of live children; 0 marks a free slot. Each child leads its own process
/// group (pgid == pid), so killing `-pid` also kills anything it forked (Redis
/// forks for RDB transfers to replicas).
static CHILDREN: [AtomicI32; CAPACITY] = [const { AtomicI32::new(0) }; CAPACITY];

/// Records a freshly spawned child so that the handlers can kill it.
pub(crate) fn register(pid: u32) -> Result<(), RealError> {
    let pid = pid as i32;
    for slot in CHILDREN.iter() {
        if slot
            .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Ok(());
        }
    }
    Err(RealError::TooManyChildren { capacity: CAPACITY })
}

/// Forgets a child. Must be called *before* it is reaped: once reaped its pid can
/// be reused by an unrelated process, which a late signal handler must not kill.
pub(crate) fn deregister(pid: u32) {
    let pid = pid as i32;
    for slot in CHILDREN.iter() {
        if slot
            .compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// `SIGKILL`s every registered child and its process group.
///
/// Async-signal-safe: only atomic loads and `kill(2)`. Children are not reaped
/// here; their [`crate::real::RedisServer`] guards do that when dropped (a killed
/// but unreaped child is a zombie, so its pid cannot be reused in between).
pub fn kill_all_children() {
    for slot in CHILDREN.iter() {
        let pid = slot.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Removes what libfaketime left in `/dev/shm` for the dead process `pid`: a process it is
/// preloaded in (a server or client program with a clock fault) creates `faketime_shm_<pid>` and
/// `sem.faketime_sem_<pid>` there and unlinks them in its destructor, which a `SIGKILL` never
/// runs, so each killed process left two objects behind (426 after one test suite). A pid with no
/// such objects costs two failed unlinks.
pub(crate) fn remove_libfaketime_leftovers(pid: u32) {
    for name in [
        format!("/dev/shm/faketime_shm_{pid}"),
        format!("/dev/shm/sem.faketime_sem_{pid}"),
    ] {
        let _ = std::fs::remove_file(name);
    }
}

/// Number of children currently registered: alive, or killed but not yet reaped.
pub fn registered_children() -> usize {
    CHILDREN
        .iter()
        .filter(|s| s.load(Ordering::SeqCst) != 0)
        .count()
}

/// Scratch directories of live children, removed by their owners' `Drop` or, on a signal, by
/// the cleaner thread.
static SCRATCH: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set by the signal handler: lockcheck is exiting, and a directory made from now on is removed
/// at once instead of registered (a worker thread may still be starting a server).
static EXITING: AtomicBool = AtomicBool::new(false);

/// The write end of the pipe the signal handler wakes the cleaner thread through (-1: no
/// cleaner, the handler exits by itself).
static CLEANER: AtomicI32 = AtomicI32::new(-1);

/// How long the handler waits for the cleaner thread before exiting without it.
const CLEANER_WAIT_S: libc::c_uint = 5;

/// Records `dir`, a child's fresh scratch directory, so that a signal removes it. Fails (and
/// removes it) when lockcheck is already exiting on a signal.
pub(crate) fn register_dir(dir: &Path) -> Result<(), RealError> {
    let mut dirs = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    if EXITING.load(Ordering::SeqCst) {
        drop(dirs);
        let _ = std::fs::remove_dir_all(dir);
        return Err(RealError::io(
            format!("creating {}", dir.display()),
            std::io::ErrorKind::Interrupted.into(),
        ));
    }
    dirs.push(dir.to_path_buf());
    Ok(())
}

/// Removes a child's scratch directory and forgets it.
pub(crate) fn remove_dir(dir: &Path) {
    let mut dirs = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    dirs.retain(|d| d != dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// Removes every registered scratch directory (the panic hook, once it has killed the children
/// that wrote into them: a process that panics on its main thread ends without running the
/// guards that would have).
fn remove_all_dirs() {
    let dirs: Vec<PathBuf> = SCRATCH
        .lock()
        .map(|mut d| d.drain(..).collect())
        .unwrap_or_default();
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Scratch directories currently registered.
pub fn registered_dirs() -> usize {
    SCRATCH.lock().map_or(0, |d| d.len())
}

/// The cleaner thread: waits for a signal number from the handler, removes every registered
/// scratch directory (the children are dead by then, so nothing writes into them), and exits
/// with `128 + signal`. If the registry's lock is held by a thread the signal interrupted, it
/// gives up on the directories after a second rather than hang Ctrl-C.
fn cleaner(read_fd: libc::c_int) {
    // SAFETY: a filled set blocks every signal in this thread only, so a handler never runs
    // here (it would wait for this very thread).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: reading one byte into a live buffer from the pipe this thread owns.
        let n = unsafe { libc::read(read_fd, byte.as_mut_ptr().cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 {
            return;
        }
    }
    // The handler killed every registered child; what libfaketime kept for them goes too.
    for slot in CHILDREN.iter() {
        let pid = slot.load(Ordering::SeqCst);
        if pid > 0 {
            remove_libfaketime_leftovers(pid as u32);
        }
    }
    let give_up = Instant::now() + Duration::from_secs(1);
    loop {
        match SCRATCH.try_lock() {
            Ok(dirs) => {
                for d in dirs.iter() {
                    let _ = std::fs::remove_dir_all(d);
                }
                break;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                for d in p.into_inner().iter() {
                    let _ = std::fs::remove_dir_all(d);
                }
                break;
            }
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::sync::TryLockError::WouldBlock) => break,
        }
    }
    // SAFETY: _exit is the point: the handler that woke us waits for it.
    unsafe { libc::_exit(128 + libc::c_int::from(byte[0])) }
}

/// Starts the cleaner thread and publishes its pipe to the handler.
fn start_cleaner() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into a live array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_fd = fds[0];
    let started = std::thread::Builder::new()
        .name("lockcheck-cleaner".into())
        .spawn(move || cleaner(read_fd));
    if started.is_ok() {
        CLEANER.store(fds[1], Ordering::SeqCst);
    }
}

extern "C" fn on_fatal_signal(signal: libc::c_int) {
    EXITING.store(true, Ordering::SeqCst);
    kill_all_children();
    // Reap them too (waitpid is async-signal-safe), so that when lockcheck's exit
    // status is visible their ports are free and no zombie is left for init.
    for slot in CHILDREN.iter() {
        let pid = slot.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: waitpid with a null status pointer has no preconditions. A
            // SIGKILLed child exits promptly, so this does not block for long.
            unsafe {
                while libc::waitpid(pid, std::ptr::null_mut(), 0) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
            }
        }
    }
    let cleaner = CLEANER.load(Ordering::SeqCst);
    if cleaner >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) and sleep(3) are async-signal-safe. The cleaner removes the scratch
        // directories and exits the process; this thread only waits for it, and exits itself if
        // the cleaner does not come.
        unsafe {
            if libc::write(cleaner, (&byte as *const u8).cast(), 1) == 1 {
                let mut left = CLEANER_WAIT_S;
                while left > 0 {
                    left = libc::sleep(left);
                }
            }
        }
    }
    // SAFETY: _exit is async-signal-safe; exiting here is the point of the handler.
    unsafe { libc::_exit(128 + signal) }
}

/// Installs the panic hook and the `SIGINT`/`SIGTERM`/`SIGHUP` handlers that kill
/// every child lockcheck started. Idempotent; the `lockcheck` binary calls it first thing.
///
/// The panic hook kills the children on *any* panic, even one a caller later
/// catches (a panicking tokio task, say): a panic means lockcheck or the lock under
/// test is broken, a verdict from such a run cannot be trusted, and leaking servers
/// is worse than losing them. The previous hook runs afterwards, so the panic
/// message is still printed.
///
/// The library's runs install only the signal handlers ([`install_signal_handlers`]): in a
/// program that runs several real worlds at once (a test binary, whose failing assertions are
/// panics), a process-wide hook would kill every other run's servers whenever one test fails,
/// and unwinding already drops (and so kills) the panicking run's own servers.
pub fn install_cleanup_handlers() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            kill_all_children();
            remove_all_dirs();
            previous(info);
        }));
    });
    install_signal_handlers();
}

/// Installs the `SIGINT`/`SIGTERM`/`SIGHUP` handlers that kill every child lockcheck started.
/// Idempotent; every real run calls it.
///
/// The signal handlers replace the default action (terminate) and exit with
/// `128 + signal`, as a shell reports a process killed by that signal. Install
/// them before anything that wants to observe these signals itself (such as
/// `tokio::signal`), which then chains to them.
pub fn install_signal_handlers() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        start_cleaner();
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction is a valid starting point; the handler is
            // an `extern "C" fn(c_int)` that only calls async-signal-safe functions.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fatal_signal as extern "C" fn(libc::c_int) as usize;
                // Block the other signals while one is handled, so a second Ctrl-C
                // cannot interrupt the kill loop half-way.
                libc::sigfillset(&mut action.sa_mask);
                action.sa_flags = 0;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
}
