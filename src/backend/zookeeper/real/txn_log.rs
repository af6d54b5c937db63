//! The servers' word on real ZooKeeper servers: which lock node went, by whose command or by
//! which expiry, and when, read from the servers' transaction logs once the run is over.
//!
//! Every write a ZooKeeper ensemble commits is a transaction in each server's log
//! (`<dataDir>/version-2/log.<zxid>`, flushed before it is applied): its header names the session
//! that sent it (`clientId`) with the request's number in that session (`cxid`), its zxid, and the
//! time the leader stamped on it (`System.currentTimeMillis()` as it prepared it). The observer
//! reads every server's log (a server that crashed misses what it did not see; the logs agree on
//! every zxid they share) and replays the lock directory's children on them:
//! - a `create` of a child is its entry, created by the sending session; a client program's
//!   session is known as the client that was granted a node that session created (the owner
//!   token it reported: the node's path, or its name as kazoo's `Lock.node` gives it);
//! - a `delete` of a child is an [`EventKind::EntryRemoved`] by the sending session's client
//!   (an [`EventKind::EntryGone`] whose cause is not said when that session was never known as a
//!   client's);
//! - a `closeSession` deletes the session's ephemeral children: by its client when the client
//!   sent it, and an [`EventKind::EntryGone`] that expired when the server sent it (`cxid` 0: the
//!   session tracker's expiry, `ZooKeeperServer.expire` → `close`).
//!
//! Each removal is placed at the transaction's time, tied to the run's clock: ZooKeeper and
//! lockcheck run on one machine and read one wall clock, whose offset from the run's clock the
//! observer measures when the run starts (a server's clock fault is refused in real mode). The
//! stamp is whole milliseconds, so a removal is placed within 1 ms of when the leader prepared it,
//! which is after the deleting request arrived and before its answer went out. Nodes nobody was
//! granted (a waiter's, a timed-out contender's) are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::history::{EventKind, GoneCause, History, Recorder};

/// An event the observer puts in the history: its node, what, and its true time (µs).
pub type Placed = (String, EventKind, u64);

/// `ZKLG`: the transaction log's magic number.
const MAGIC: i32 = 0x5a4b_4c47;
/// ZooKeeper's op codes (`ZooDefs.OpCode`) the observer reads.
const CREATE: i32 = 1;
const DELETE: i32 = 2;
const MULTI: i32 = 14;
const CREATE2: i32 = 15;
const CLOSE_SESSION: i32 = -11;

/// How far a placed removal may be from when the leader prepared its transaction (µs): the
/// stamp's millisecond, placed at its middle, and the tie of the wall clock to the run's.
pub const PLACED_WITHIN_US: u64 = 1_000;

/// What one transaction did to a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A node created (ephemeral or not).
    Create {
        /// Its path.
        path: String,
        /// Whether it is ephemeral (goes with its session).
        ephemeral: bool,
    },
    /// A node deleted.
    Delete {
        /// Its path.
        path: String,
    },
    /// The session closed (by its client, or by the server's expiry).
    CloseSession,
}

/// One logged transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// The session that sent it (`clientId`).
    pub session: i64,
    /// The request's number in its session (0: sent by the server itself).
    pub cxid: i32,
    /// Its zxid.
    pub zxid: i64,
    /// The leader's wall clock as it prepared it (ms since the epoch).
    pub time_ms: i64,
    /// What it did (a `multi` may do several things).
    pub ops: Vec<Op>,
}

/// A cursor over big-endian jute data.
struct Jute<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Jute<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }
    fn int(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn long(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn buffer(&mut self) -> Option<&'a [u8]> {
        let len = self.int()?;
        if len < 0 {
            return Some(&[]);
        }
        self.take(len as usize)
    }
    fn string(&mut self) -> Option<String> {
        Some(String::from_utf8_lossy(self.buffer()?).into_owned())
    }
}

/// What the body of a transaction of type `op` did.
fn ops_of(op: i32, body: &[u8]) -> Option<Vec<Op>> {
    let mut j = Jute { bytes: body, at: 0 };
    Some(match op {
        CREATE | CREATE2 => {
            let path = j.string()?;
            j.buffer()?;
            let acls = j.int()?;
            for _ in 0..acls.max(0) {
                j.int()?;
                j.string()?;
                j.string()?;
            }
            let ephemeral = j.take(1)?[0] != 0;
            vec![Op::Create { path, ephemeral }]
        }
        DELETE => vec![Op::Delete { path: j.string()? }],
        CLOSE_SESSION => vec![Op::CloseSession],
        MULTI => {
            let n = j.int()?;
            let mut ops = Vec::new();
            for _ in 0..n.max(0) {
                let inner = j.int()?;
                let data = j.buffer()?;
                ops.extend(ops_of(inner, data).unwrap_or_default());
            }
            ops
        }
        _ => Vec::new(),
    })
}

/// The transactions of one log file, in file order; a preallocated (zeroed) or torn tail ends it.
pub fn parse_log(bytes: &[u8]) -> Vec<Txn> {
    let mut j = Jute { bytes, at: 0 };
    if j.int() != Some(MAGIC) || j.int().is_none() || j.long().is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    while let (Some(_crc), Some(len)) = (j.long(), j.int()) {
        if len <= 0 {
            break;
        }
        let Some(record) = j.take(len as usize) else {
            break;
        };
        if j.take(1) != Some(b"B") {
            break;
        }
        let mut r = Jute {
            bytes: record,
            at: 0,
        };
        let header = (|| Some((r.long()?, r.int()?, r.long()?, r.long()?, r.int()?)))();
        let Some((session, cxid, zxid, time_ms, op)) = header else {
            break;
        };
        out.push(Txn {
            session,
            cxid,
            zxid,
            time_ms,
            ops: ops_of(op, &record[r.at..]).unwrap_or_default(),
        });
    }
    out
}

/// Every transaction in the logs of the servers whose data directories are `data_dirs`, once
/// each, in zxid order.
pub fn read_logs(data_dirs: &[std::path::PathBuf]) -> Vec<Txn> {
    let mut by_zxid = BTreeMap::new();
    for dir in data_dirs {
        let Ok(files) = std::fs::read_dir(dir.join("version-2")) else {
            continue;
        };
        for file in files.flatten() {
            let path = file.path();
            let is_log = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("log."));
            if let (true, Ok(bytes)) = (is_log, std::fs::read(&path)) {
                for txn in parse_log(&bytes) {
                    by_zxid.entry(txn.zxid).or_insert(txn);
                }
            }
        }
    }
    by_zxid.into_values().collect()
}

/// The run's clock against the wall clock: the wall clock's microseconds at the run's 0.
#[derive(Clone, Copy, Debug)]
pub struct WallTie {
    wall_us_at_zero: i64,
}

impl WallTie {
    /// Ties `rec`'s clock to the wall clock now (the tightest of a few back-to-back readings).
    pub fn now(rec: &Recorder) -> WallTie {
        let wall_us = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64)
        };
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..5 {
            let before = rec.now_us();
            let wall = wall_us();
            let after = rec.now_us();
            let spread = after - before;
            if best.is_none_or(|(s, _)| spread < s) {
                best = Some((spread, wall - (before + spread / 2) as i64));
            }
        }
        WallTie {
            wall_us_at_zero: best.map_or(0, |(_, w)| w),
        }
    }

    /// The run's time of a wall-clock stamp in whole milliseconds: the middle of its millisecond.
    pub fn run_us(&self, stamp_ms: i64) -> u64 {
        (stamp_ms * 1000 + 500 - self.wall_us_at_zero).max(0) as u64
    }

    /// A tie whose run starts at wall-clock `wall_us_at_zero` (tests).
    pub fn at(wall_us_at_zero: i64) -> WallTie {
        WallTie { wall_us_at_zero }
    }
}

/// The events the transactions say about the children of the lock directory `dir` (node name,
/// kind, true time), given the clients' grants in `history`. `Err` when clients were granted the
/// lock but no granted node's creation is in the logs (the lock keeps its nodes elsewhere, or
/// its owner tokens are not its nodes): "nothing of mine was removed" would then read as every
/// release lying.
pub fn attribute(
    history: &History,
    dir: &str,
    txns: &[Txn],
    tie: WallTie,
) -> Result<Vec<Placed>, String> {
    let mut granted: BTreeMap<&str, u32> = BTreeMap::new();
    for e in &history.events {
        if let (Some(c), EventKind::Acquired { owner, .. }) = (e.client(), &e.kind) {
            granted.insert(owner.as_str(), c);
        }
    }
    let child = |path: &str| -> Option<String> {
        let name = path.strip_prefix(dir)?.strip_prefix('/')?;
        (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
    };
    // The owner token a client was granted for the node at `path`, and that client.
    let grant_of = |path: &str| -> Option<(String, u32)> {
        let name = child(path)?;
        let found = [path, name.as_str()]
            .into_iter()
            .find_map(|o| granted.get(o).map(|&c| (o.to_string(), c)));
        found
    };
    // A session is a client's when it created a node that client was granted.
    let mut client_of: BTreeMap<i64, u32> = BTreeMap::new();
    for t in txns {
        for op in &t.ops {
            if let Op::Create { path, .. } = op {
                if let Some((_, c)) = grant_of(path) {
                    client_of.insert(t.session, c);
                }
            }
        }
    }
    if client_of.is_empty() && !granted.is_empty() {
        return Err(format!(
            "no node a client was granted was created under `{dir}` in the servers' logs (the \
             lock keeps its nodes elsewhere, or its owner tokens are not its nodes)"
        ));
    }
    let mut live: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    let mut events = Vec::new();
    let server = "zookeeper".to_string();
    for t in txns {
        let at_us = tie.run_us(t.time_ms);
        let by = client_of.get(&t.session).copied();
        let mut gone = |path: &str, expired: bool| {
            let Some((owner, c)) = grant_of(path) else {
                return;
            };
            let kind = match (expired, by) {
                (false, Some(by_client)) => EventKind::EntryRemoved {
                    by_client,
                    owner,
                    owner_client: Some(c),
                },
                (true, _) => EventKind::EntryGone {
                    owner,
                    owner_client: Some(c),
                    cause: GoneCause::Expired,
                },
                (false, None) => EventKind::EntryGone {
                    owner,
                    owner_client: Some(c),
                    cause: GoneCause::NotSaid,
                },
            };
            events.push((server.clone(), kind, at_us));
        };
        for op in &t.ops {
            match op {
                Op::Create { path, ephemeral } if *ephemeral && child(path).is_some() => {
                    live.entry(t.session).or_default().insert(path.clone());
                }
                Op::Delete { path } if child(path).is_some() => {
                    for nodes in live.values_mut() {
                        nodes.remove(path);
                    }
                    gone(path, false);
                }
                Op::CloseSession => {
                    for path in live.remove(&t.session).unwrap_or_default() {
                        gone(&path, t.cxid == 0);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(events)
}

/// Reads the logs of the servers under `deployment_dir` (`server<id>/data`) and puts what they
/// say about the lock directory `dir` in the history, with `LockEntriesWatched`; `Err` says why
/// it cannot vouch (then it records nothing).
pub fn observe(
    rec: &Recorder,
    deployment_dir: &Path,
    servers: usize,
    dir: &str,
    tie: WallTie,
) -> Result<(), String> {
    let data: Vec<std::path::PathBuf> = (1..=servers)
        .map(|id| deployment_dir.join(format!("server{id}")).join("data"))
        .collect();
    let txns = read_logs(&data);
    if txns.is_empty() {
        return Err("no transaction in the servers' logs".into());
    }
    let events = attribute(&rec.snapshot(), dir, &txns, tie)?;
    for (node, kind, at_us) in events {
        rec.insert_at(&node, kind, at_us);
    }
    rec.record_entries_watched(dir, PLACED_WITHIN_US);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jute_string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as i32).to_be_bytes());
        out.extend(s.as_bytes());
    }

    /// One log record: header and body, framed as `FileTxnLog` writes it.
    fn record(session: i64, cxid: i32, zxid: i64, time_ms: i64, op: i32, body: &[u8]) -> Vec<u8> {
        let mut txn = Vec::new();
        txn.extend(session.to_be_bytes());
        txn.extend(cxid.to_be_bytes());
        txn.extend(zxid.to_be_bytes());
        txn.extend(time_ms.to_be_bytes());
        txn.extend(op.to_be_bytes());
        txn.extend(body);
        let mut out = Vec::new();
        out.extend(0i64.to_be_bytes());
        out.extend((txn.len() as i32).to_be_bytes());
        out.extend(txn);
        out.push(b'B');
        out
    }

    fn create(path: &str) -> Vec<u8> {
        let mut b = Vec::new();
        jute_string(&mut b, path);
        b.extend((-1i32).to_be_bytes()); // no data
        b.extend(1i32.to_be_bytes()); // one ACL
        b.extend(31i32.to_be_bytes());
        jute_string(&mut b, "world");
        jute_string(&mut b, "anyone");
        b.push(1); // ephemeral
        b.extend(3i32.to_be_bytes());
        b
    }

    fn log(records: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(MAGIC.to_be_bytes());
        out.extend(2i32.to_be_bytes());
        out.extend(0i64.to_be_bytes());
        for r in records {
            out.extend(r);
        }
        out.extend([0u8; 64]); // preallocated
        out
    }

    use crate::check::acquired_as as acquired;

    /// kazoo's node (its owner token is the node's name) created by session 7, removed by the
    /// server's expiry of that session (`closeSession`, cxid 0): gone, expired, placed at the
    /// stamp's millisecond; client 1's node deleted by its own session: its removal.
    #[test]
    fn a_session_expiry_is_an_expiry_and_a_delete_is_its_clients() {
        let dir = "/lockcheck/k";
        let bytes = log(&[
            record(
                7,
                1,
                1,
                1_000_010,
                CREATE,
                &create("/lockcheck/k/a__lock__0000000000"),
            ),
            record(
                8,
                1,
                2,
                1_000_020,
                CREATE,
                &create("/lockcheck/k/b__lock__0000000001"),
            ),
            record(7, 0, 3, 1_002_000, CLOSE_SESSION, &[]),
            record(8, 5, 4, 1_003_000, DELETE, &{
                let mut b = Vec::new();
                jute_string(&mut b, "/lockcheck/k/b__lock__0000000001");
                b.extend((-1i32).to_be_bytes());
                b
            }),
        ]);
        let txns = parse_log(&bytes);
        assert_eq!(txns.len(), 4);
        assert_eq!(
            txns[0].ops,
            vec![Op::Create {
                path: "/lockcheck/k/a__lock__0000000000".into(),
                ephemeral: true
            }]
        );
        let h = History {
            events: vec![
                crate::check::ev(20_000, "client-0", acquired("a__lock__0000000000")),
                crate::check::ev(2_100_000, "client-1", acquired("b__lock__0000000001")),
            ],
        };
        // The run started at wall-clock second 1 000.
        let events = attribute(&h, dir, &txns, WallTie::at(1_000_000_000)).unwrap();
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].2, 2_000_500);
        assert!(matches!(
            events[0].1,
            EventKind::EntryGone {
                cause: GoneCause::Expired,
                owner_client: Some(0),
                ..
            }
        ));
        assert!(matches!(
            events[1].1,
            EventKind::EntryRemoved {
                by_client: 1,
                owner_client: Some(1),
                ..
            }
        ));
        // A client's own close of its session is its removal, not an expiry.
        let mut closed = txns.clone();
        closed[2].cxid = 9;
        let events = attribute(&h, dir, &closed, WallTie::at(1_000_000_000)).unwrap();
        assert!(matches!(
            events[0].1,
            EventKind::EntryRemoved { by_client: 0, .. }
        ));
        // Grants whose nodes never show under the directory: not vouched for.
        assert!(attribute(&h, "/elsewhere", &txns, WallTie::at(0)).is_err());
    }
}
