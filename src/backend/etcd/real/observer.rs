//! The servers' word on real etcd members: which lock entries went, and when, in true time.
//!
//! A simulated cluster records each removal of a lock entry with its cause as it applies it. A
//! spawned `etcd` cannot be asked to, but its key space keeps every revision (lockcheck's members
//! never compact), so once the run is over a watch from the run's first revision with `prev_kv`
//! replays every delete of the lock's entries (the lock key itself, npm etcd3's, and every key
//! under `<key>/`, `concurrency.Mutex`'s queue): its revision, and the entry as it was (its create
//! revision and lease). What a watch does not say is when, in true time, and why.
//!
//! When: during the run the observer reads the cluster's revision over and over (a linearizable
//! range of one unused key, no write), each read timed by the run's clock from before it is sent
//! to after its answer. A delete at revision `r` took effect after the send of the last read that
//! answered a revision below `r`, and before the answer of the first that answered `r` or more:
//! it is placed in the middle of that bracket, and the history's `LockEntriesWatched` states the
//! widest half-bracket of the run as the placement bound (a few milliseconds on a quiet machine).
//!
//! Why: etcd's watch reports a lease's expiry, a client's revocation of its lease and a client's
//! delete of the key alike. So the observer says a removal is a client's own (`EntryRemoved`, by
//! the client that was granted the entry) only when its bracket meets that client's release (from
//! its `Exit` to its answer: the deleting request went out after the one and was applied before
//! the other); any other removal of a granted entry is an `EntryGone` whose cause the servers did
//! not say. Another client's releases are not asked: with short holds, the next holder's release
//! may fall in the same bracket, and calling such a removal unattributed made a correct release
//! read as a lie (seen once in 20 runs of `etcd3-lock-no-faults`). What that gives up: another
//! client's delete of the entry, or its lease's expiry, landing within its owner's own release is
//! taken for the release's. That is enough for release truth: a release
//! that answered "released" while no removal of its entry fell in it is a lie (npm etcd3 revokes
//! a lease its expiry already revoked and answers without error). It is not enough for foreign
//! releases: with an unattributed removal in the history that check does not judge. Entries no
//! client was granted (a waiter's key, a failed try's) are not followed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::backend::etcd::real::conn::{b64, int, unb64};
use crate::backend::etcd::real::gateway::{post, Messages};
use crate::history::{EventKind, GoneCause, History, Recorder};

/// The key whose linearizable reads time the revisions (never written).
const PROBE_KEY: &str = "lockcheck-observer-probe";
/// The key the observer puts once the run is over: its revision ends the watch's replay.
const END_KEY: &str = "lockcheck-observer-end";
/// How long the revision reads rest between two (a read takes about a millisecond).
const READ_EVERY: Duration = Duration::from_millis(2);

/// One read of the cluster's revision: sent at `sent_us`, answered `revision` at `answered_us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tie {
    /// When the read was sent (the run's clock, µs).
    pub sent_us: u64,
    /// The revision it answered.
    pub revision: i64,
    /// When its answer came (the run's clock, µs).
    pub answered_us: u64,
}

/// An event an observer puts in the history after the run: its node, what, and its true time
/// (µs).
pub type Placed = (String, EventKind, u64);

/// One put or delete of a lock entry, as the watch replays it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Its revision.
    pub revision: i64,
    /// The key put or deleted.
    pub key: String,
    /// The lease the key was (for a delete: had been) attached to (0: none).
    pub lease: i64,
    /// A delete (else a put).
    pub deleted: bool,
}

/// Follows the cluster's revision during a run, and replays the lock entries' deletes after it.
pub struct Observer {
    key: String,
    ports: Vec<u16>,
    rec: Recorder,
    start_revision: i64,
    ties: Arc<Mutex<Vec<Tie>>>,
    stop: Arc<AtomicBool>,
    reads: tokio::task::JoinHandle<()>,
}

/// The cluster's revision, read on the first of `ports` that answers.
async fn read_revision(ports: &[u16]) -> Option<i64> {
    for &port in ports {
        let body = json!({ "key": b64(PROBE_KEY), "count_only": true });
        if let Ok(v) = post(port, "/v3/kv/range", &body).await {
            if v["error"].is_null() {
                return Some(int(&v["header"]["revision"]));
            }
        }
    }
    None
}

impl Observer {
    /// Starts reading the revision of the cluster on `ports` (its members' client ports) for
    /// the lock `key`, timed by `rec`'s clock. `None` when no member answers.
    pub async fn start(key: &str, ports: Vec<u16>, rec: Recorder) -> Option<Observer> {
        let start_revision = read_revision(&ports).await?;
        let ties = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = tokio::spawn({
            let (ports, rec, ties, stop) = (ports.clone(), rec.clone(), ties.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    let sent_us = rec.now_us();
                    if let Some(revision) = read_revision(&ports).await {
                        let answered_us = rec.now_us();
                        ties.lock().unwrap().push(Tie {
                            sent_us,
                            revision,
                            answered_us,
                        });
                    }
                    tokio::time::sleep(READ_EVERY).await;
                }
            }
        });
        Some(Observer {
            key: key.to_string(),
            ports,
            rec,
            start_revision,
            ties,
            stop,
            reads,
        })
    }

    /// Stops reading, replays the run's deletes of lock entries and puts what it can say in
    /// the history: each removal of a granted entry (see the module docs) and
    /// `LockEntriesWatched`. `Err` says why it cannot vouch (then it records nothing).
    pub async fn finish(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.reads.await;
        // One last read, after every client's last answer, closes every bracket.
        let sent_us = self.rec.now_us();
        let revision = read_revision(&self.ports)
            .await
            .ok_or("no etcd member answered the observer's last read")?;
        let mut ties = std::mem::take(&mut *self.ties.lock().unwrap());
        ties.push(Tie {
            sent_us,
            revision,
            answered_us: self.rec.now_us(),
        });
        let changes = tokio::time::timeout(
            Duration::from_secs(5),
            replay(&self.ports, &self.key, self.start_revision),
        )
        .await
        .map_err(|_| "the watch's replay did not end within 5 s".to_string())??;
        let history = self.rec.snapshot();
        let (events, within_us) = attribute(&history, &self.key, &ties, &changes)?;
        for (node, kind, at_us) in events {
            self.rec.insert_at(&node, kind, at_us);
        }
        self.rec.record_entries_watched(&self.key, within_us.max(1));
        Ok(())
    }
}

/// Whether `k` is one of the lock `key`'s entries: the key, or a key under `key/`.
fn is_entry(key: &str, k: &str) -> bool {
    k == key
        || k.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Every put and delete of a lock entry from revision `from` on: a watch of the whole key space
/// from there with `prev_kv`, read until the end key the observer puts now comes by.
async fn replay(ports: &[u16], key: &str, from: i64) -> Result<Vec<Change>, String> {
    let mut last_error = String::from("no etcd member");
    for &port in ports {
        let put = json!({ "key": b64(END_KEY), "value": b64("end") });
        let end = match post(port, "/v3/kv/put", &put).await {
            Ok(v) if v["error"].is_null() => int(&v["header"]["revision"]),
            Ok(v) => {
                last_error = format!("etcd refused the end key: {v}");
                continue;
            }
            Err(e) => {
                last_error = format!("the end key: {e}");
                continue;
            }
        };
        let body = json!({ "create_request": {
            "key": b64("\0"), "range_end": b64("\0"),
            "start_revision": from.to_string(), "prev_kv": true } });
        let mut messages = match Messages::open(port, "/v3/watch", &body).await {
            Ok(m) => m,
            Err(e) => {
                last_error = format!("the watch: {e}");
                continue;
            }
        };
        let mut changes = Vec::new();
        loop {
            let message = messages
                .next()
                .await
                .map_err(|e| format!("the watch: {e}"))?;
            let result = &message["result"];
            if let Some(error) = message["error"]["message"].as_str() {
                return Err(format!("the watch: {error}"));
            }
            if result["canceled"].as_bool() == Some(true) {
                return Err(format!(
                    "the watch was canceled: {}",
                    result["cancel_reason"]
                ));
            }
            for event in result["events"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                let kv = &event["kv"];
                let revision = int(&kv["mod_revision"]);
                let k = unb64(&kv["key"]);
                if is_entry(key, &k) {
                    // A put's type is proto3's default, left out of the JSON.
                    let deleted = event["type"].as_str() == Some("DELETE");
                    let lease = if deleted {
                        &event["prev_kv"]["lease"]
                    } else {
                        &kv["lease"]
                    };
                    changes.push(Change {
                        revision,
                        key: k,
                        lease: int(lease),
                        deleted,
                    });
                }
                if revision >= end {
                    return Ok(changes);
                }
            }
        }
    }
    Err(last_error)
}

/// Where a delete at `revision` took effect: between the send of the last read that answered a
/// revision below it and the answer of the first that answered it or more.
fn bracket(ties: &[Tie], revision: i64) -> (u64, u64) {
    let lo = ties
        .iter()
        .filter(|t| t.revision < revision)
        .map(|t| t.sent_us)
        .max()
        .unwrap_or(0);
    let hi = ties
        .iter()
        .filter(|t| t.revision >= revision)
        .map(|t| t.answered_us)
        .min()
        .unwrap_or(u64::MAX);
    (lo, hi.max(lo))
}

/// Each client's releases: from its `Exit` to its release's answer (true time, µs).
fn releases(history: &History) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let mut out: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut exited: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match e.kind {
            EventKind::Exit => {
                exited.insert(c, e.at_us);
            }
            EventKind::Released { .. } | EventKind::ReleaseFailed { .. } => {
                if let Some(from) = exited.remove(&c) {
                    out.entry(c).or_default().push((from, e.at_us));
                }
            }
            EventKind::Crashed { .. } => {
                exited.remove(&c);
            }
            _ => {}
        }
    }
    // A release cut by the run's end: open to the end.
    for (c, from) in exited {
        out.entry(c).or_default().push((from, u64::MAX));
    }
    out
}

/// The events the deletes among `changes` say, at their true times, and the placement bound
/// (µs): see the module docs. `Err` when clients were granted the lock but no put of a granted
/// entry shows under the key: the lock keeps its entries under another key (or its owner tokens
/// are neither its keys nor its lease ids), and "nothing of mine was removed" would read as
/// every release lying.
pub fn attribute(
    history: &History,
    key: &str,
    ties: &[Tie],
    changes: &[Change],
) -> Result<(Vec<Placed>, u64), String> {
    // Owner token -> the client granted it. A lockcheck lock's token is its key; a program's is
    // what it reported (npm etcd3's: its lease's id, in decimal).
    let mut granted: BTreeMap<&str, u32> = BTreeMap::new();
    for e in &history.events {
        if let (Some(c), EventKind::Acquired { owner, .. }) = (e.client(), &e.kind) {
            granted.insert(owner.as_str(), c);
        }
    }
    let windows = releases(history);
    let mut events = Vec::new();
    let mut within_us = 0u64;
    let mut created = 0usize;
    for d in changes {
        let lease = d.lease.to_string();
        let Some((owner, c)) = [d.key.as_str(), lease.as_str()]
            .into_iter()
            .find_map(|o| granted.get(o).map(|&c| (o.to_string(), c)))
        else {
            continue;
        };
        if !d.deleted {
            created += 1;
            continue;
        }
        let (lo, hi) = bracket(ties, d.revision);
        let at_us = lo + (hi - lo) / 2;
        within_us = within_us.max((hi - lo).div_ceil(2));
        let meets = |client: &u32| {
            windows
                .get(client)
                .is_some_and(|ws| ws.iter().any(|&(from, to)| from <= hi && lo <= to))
        };
        // Within its owner's own release, the removal is that release's: its request to remove
        // its own entry is the one under way. (Another client's delete or an expiry landing in
        // that very window would be taken for it: see the module docs.)
        let kind = if meets(&c) {
            EventKind::EntryRemoved {
                by_client: c,
                owner,
                owner_client: Some(c),
            }
        } else {
            EventKind::EntryGone {
                owner,
                owner_client: Some(c),
                cause: GoneCause::NotSaid,
            }
        };
        events.push(("etcd".to_string(), kind, at_us));
    }
    if created == 0 && !granted.is_empty() {
        return Err(format!(
            "no granted entry was ever put under `{key}` (the lock keeps its entries under \
             another key, or its owner tokens are neither its keys nor its lease ids)"
        ));
    }
    Ok((events, within_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::check::{acquired_as as acquired, ev};

    fn ties() -> Vec<Tie> {
        // Reads every 1 000 µs, each taking 200 µs; revision 5 until 3 000, 6 after.
        (0..10)
            .map(|i| Tie {
                sent_us: i * 1_000,
                revision: if i < 3 { 5 } else { 6 },
                answered_us: i * 1_000 + 200,
            })
            .collect()
    }

    /// A delete is placed between the last read below its revision and the first at or above:
    /// a removal within client 0's release (its lease revoked by its release, etcd3's) is its
    /// own; one long before its release (its lease expired) is gone without a cause said.
    #[test]
    fn a_delete_in_the_owners_release_is_its_own_and_one_before_is_not_said() {
        let changes = [
            Change {
                revision: 4,
                key: "k".into(),
                lease: 7,
                deleted: false,
            },
            Change {
                revision: 6,
                key: "k".into(),
                lease: 7,
                deleted: true,
            },
        ];
        let history = |exit: u64| History {
            events: vec![
                ev(100, "client-0", acquired("7")),
                ev(exit, "client-0", EventKind::Exit),
                ev(
                    exit + 1_000,
                    "client-0",
                    EventKind::Released { deleted: true },
                ),
            ],
        };
        let (events, within) = attribute(&history(2_500), "k", &ties(), &changes).unwrap();
        assert_eq!((events[0].2, within), (2_600, 600));
        assert!(matches!(
            events[0].1,
            EventKind::EntryRemoved {
                by_client: 0,
                owner_client: Some(0),
                ..
            }
        ));
        let (events, _) = attribute(&history(8_000), "k", &ties(), &changes).unwrap();
        assert!(matches!(
            events[0].1,
            EventKind::EntryGone {
                cause: GoneCause::NotSaid,
                ..
            }
        ));
        // Another client's release in the same bracket (short holds) does not take it away
        // from its owner's.
        let mut both = history(2_500);
        both.events.push(ev(2_000, "client-1", EventKind::Exit));
        both.events
            .push(ev(2_100, "client-1", EventKind::Released { deleted: true }));
        let (events, _) = attribute(&both, "k", &ties(), &changes).unwrap();
        assert!(matches!(
            events[0].1,
            EventKind::EntryRemoved { by_client: 0, .. }
        ));
    }

    /// Keys of other locks and entries nobody was granted are not followed; a lock whose
    /// granted entries never show under the key is not vouched for.
    #[test]
    fn only_granted_entries_under_the_key_are_followed() {
        assert!(is_entry("k", "k") && is_entry("k", "k/1f") && !is_entry("k", "k2"));
        let h = History {
            events: vec![
                ev(100, "client-0", acquired("k/1")),
                ev(200, "client-0", EventKind::Exit),
                ev(300, "client-0", EventKind::Released { deleted: true }),
            ],
        };
        let waiter = |revision, deleted| Change {
            revision,
            key: "k/2".into(),
            lease: 2,
            deleted,
        };
        let waiters = [waiter(4, false), waiter(6, true)];
        assert!(attribute(&h, "k", &ties(), &waiters).is_err());
        let mine = Change {
            revision: 3,
            key: "k/1".into(),
            lease: 1,
            deleted: false,
        };
        let (events, _) = attribute(&h, "k", &ties(), &[mine, waiters[1].clone()]).unwrap();
        assert!(events.is_empty(), "{events:?}");
    }
}
