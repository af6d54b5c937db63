//! The SQL seam: the simulated InnoDB subset, the two locks of the MySQL locks article on it and on
//! a real MariaDB that lockcheck spawns, and a differential test of the two databases.

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod ends;
mod engine;
mod faults_refused;
mod locks;
mod scenarios;
mod server_pause;
mod timeline;

/// One MariaDB-backed test at a time in this binary: real runs are timing-sensitive on 2 cores,
/// and `scenarios`' check that no data directory of this process is left behind can only count
/// while no other test of the process has a server running.
fn mariadb_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
