//! The postmaster's children, which its own process group does not hold.
//!
//! Every process PostgreSQL forks (a backend per session, the checkpointer, the WAL writer and
//! sender, a standby's startup process and WAL receiver) calls `setsid()` first, so it leads a
//! session and a process group of its own: the group kill that takes down a `redis-server` with
//! its forks (`kill(-pid)`) reaches the postmaster alone. Left to themselves the children exit
//! when they notice the postmaster is gone (PostgreSQL sets `PR_SET_PDEATHSIG` on them on
//! Linux and watches a pipe), which is what happens when lockcheck's cleanup kills the
//! postmaster on a panic or a signal. A *stopped* child notices nothing, so a pause registers
//! the children it stops with the cleanup registry, and a kill sends each a `SIGKILL` of its
//! own and waits until it is gone, so a restart never finds its old shared memory still
//! attached.

use std::time::{Duration, Instant};

/// The pid, parent pid and state letter of `/proc/<pid>/stat`.
fn stat_of(pid: u32) -> Option<(u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

/// The live (not zombie) children of `parent`, read from `/proc`.
pub(crate) fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(
            |&pid| matches!(stat_of(pid), Some((ppid, state)) if ppid == parent && state != 'Z'),
        )
        .collect()
}

/// Whether `pid` has exited (gone, or a zombie waiting for whoever inherited it).
pub(crate) fn exited(pid: u32) -> bool {
    !matches!(stat_of(pid), Some((_, state)) if state != 'Z' && state != 'X')
}

/// Sends `signal` to `pid` alone.
pub(crate) fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Waits (up to `timeout`) until every pid of `pids` has exited; returns those that have not.
pub(crate) fn wait_exited(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| !exited(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
