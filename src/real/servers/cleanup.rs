//! The process-wide registry of lockcheck's children, and the handlers that kill
//! them when lockcheck dies in a way that skips destructors.
//!
//! Layers of defence, from the common path to the rare one:
//!
//! 1. [`crate::real::RedisServer`]'s `Drop` kills and reaps its process (normal
//!    return, `?` errors, and unwinding panics).
//! 2. The panic hook installed by [`install_cleanup_handlers`] kills every child
//!    before anything else runs, which covers `panic = "abort"` builds and servers
//!    held by threads that will never unwind (a panic on the main thread ends the
//!    process without joining the others).
//! 3. The `SIGINT`/`SIGTERM`/`SIGHUP` handlers kill every child, then `_exit` with
//!    `128 + signal` (130 for Ctrl-C, 143 for `kill`), because a signal's default
//!    action runs no destructor at all.
//! 4. `PR_SET_PDEATHSIG = SIGKILL` in every child (see `child.rs`) makes the
//!    kernel kill them when lockcheck itself is `SIGKILL`ed, or exits through
//!    `std::process::exit`.
//!
//! The registry is a fixed array of atomics rather than a `Mutex<Vec<_>>` because
//! the signal handler reads it: a signal can arrive while the same thread holds the
//! mutex, and only lock-free loads (plus `kill` and `_exit`) are async-signal-safe.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

use crate::real::RealError;

/// How many children can be alive at once. A scenario has a handful of servers;
/// the bound exists only because a signal handler cannot allocate.
const CAPACITY: usize = 256;

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

/// Number of children currently registered: alive, or killed but not yet reaped.
pub fn registered_children() -> usize {
    CHILDREN
        .iter()
        .filter(|s| s.load(Ordering::SeqCst) != 0)
        .count()
}

extern "C" fn on_fatal_signal(signal: libc::c_int) {
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
