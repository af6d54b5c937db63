//! Waiting for the clients of a real run, in both real worlds (Redis and MariaDB).
//!
//! A real client is a tokio task. A crashed one never finishes (its gate is dead and it waits
//! forever, as a dead process would), so "every client has finished" is the wrong end: a run is
//! over once every client that is still alive has finished.

use super::Gate;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Waits, at most `limit`, until every client task has finished or its gate says it crashed.
pub async fn wait_for_live_clients(tasks: &[JoinHandle<()>], gates: &[Gate], limit: Duration) {
    let all = async {
        while !tasks
            .iter()
            .zip(gates)
            .all(|(t, g)| t.is_finished() || g.is_dead())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(limit, all).await;
}
