//! Firing a fault family through a real world's nemesis, for the worlds whose faults run as tokio
//! tasks (etcd, ZooKeeper): a refusal's reason goes into the history, and each timed fault
//! waits for its time in a task of its own.

use std::time::Duration;

use crate::fault::{FaultKind, Nemesis, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::schedule::Schedule;

/// Records what the nemesis did (or why it did not) in the history.
pub(crate) fn note(rec: &Recorder, what: String) {
    rec.record("nemesis", EventKind::Fault { what });
}

/// Whether a server crashed now, to restart `restart_after_ms` later, comes back before the
/// scenario's `duration_ms` ends: a restart due after that is not carried out (the crash is for
/// good), so that a run with a majority crashed for good ends instead of waiting for its
/// restart. In simulation such a restart falls after the clients are done, too.
pub(crate) fn restarts_in_run(rec: &Recorder, restart_after_ms: u64, duration_ms: u64) -> bool {
    (rec.now_us() / 1000).saturating_add(restart_after_ms) < duration_ms
}

/// Carries out one fault through `n` (a world's nemesis, or its view from a client's point);
/// what has no recipe there, the history says.
pub(crate) fn fire_noting<N: Nemesis>(rec: &Recorder, kind: &FaultKind, n: &N, at: &Occasion<'_>) {
    match kind.fire(n, at) {
        Ok(()) => {}
        Err(Refused::Because(why)) => note(rec, why),
        Err(Refused::Lacking) => note(rec, format!("{kind:?}: no real-mode recipe here")),
    }
}

/// Fires each fault of `pending` with an absolute time through `n` when the run's clock reaches
/// it (call inside the run's tokio runtime).
pub(crate) fn start_timed<N>(pending: &Schedule, rec: &Recorder, n: &N)
where
    N: Nemesis + Clone + Send + 'static,
{
    for (at_ms, kind) in pending.take_timed() {
        let n = n.clone();
        let rec = rec.clone();
        tokio::spawn(async move {
            let now = Duration::from_micros(rec.now_us());
            tokio::time::sleep(Duration::from_millis(at_ms).saturating_sub(now)).await;
            fire_noting(&rec, &kind, &n, &Occasion::TIMED);
        });
    }
}
