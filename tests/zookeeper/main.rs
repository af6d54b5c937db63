//! ZooKeeper: the servers lockcheck spawns (standalone and a three-server ensemble), their
//! cleanup on every exit path, and the refusal when ZooKeeper or Java is not installed; the
//! bundled ZooKeeper scenarios in simulation; followers that answer reads behind their leader
//! (CURATOR-604); an ensemble without a quorum serves nobody, in both worlds.

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod ends;
mod followers;
mod quorum;
mod scenarios;
mod servers;
mod timeline;

/// One ZooKeeper deployment at a time in this binary: each is one to three JVMs, and on 2 cores
/// two ensembles starting together slow each other's elections past what a test should wait.
fn zookeeper_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
