//! What a client reaching one of its lock's named points sets off, in every world whose nemesis
//! fires faults at points itself (the database, etcd and ZooKeeper worlds): the faults due there,
//! and the history of a client crash fired at one.

use crate::history::{EventKind, Recorder};
use crate::scenario::FaultKind;
use crate::schedule::Schedule;

/// The faults a client reaching `point` now sets off.
pub fn due(schedule: &Schedule, rec: &Recorder, client: u32, point: &str) -> Vec<FaultKind> {
    schedule
        .take_at_point(rec.now_us() / 1000, client, point)
        .into_iter()
        .map(|f| f.kind)
        .collect()
}

/// Records that `client` crashed at `point` (its own event and the nemesis's note, which says
/// how this world carries the crash out).
pub fn record_client_crash(rec: &Recorder, client: u32, point: &str, how: &str) {
    rec.record(
        &format!("client-{client}"),
        EventKind::Crashed {
            point: point.to_string(),
        },
    );
    rec.record(
        "nemesis",
        EventKind::Fault {
            what: format!("client-{client} crashed at {point} ({how})"),
        },
    );
}
