//! The history of a run: every event a client, the nemesis or a server reports, stamped with true
//! time. Checkers read only this, so the same checker judges a simulated and a real run.
//!
//! True time is the simulator's global clock (madsim's, never skewed) or, in real mode, the harness
//! process's monotonic clock. Node clocks appear only as data inside events (what a client believed).

use serde::Serialize;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

mod node;
mod server_note;
mod trace_hash;
pub mod watch;

pub use node::Node;
pub use server_note::{Role, ServerNote};

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A client starts trying to acquire the lock.
    AcquireStart,
    /// `acquire` returned success: from here the client is a holder.
    Acquired {
        /// The owner token the lock stored (a uuid).
        owner: String,
        /// A fencing token, for locks that issue one.
        fencing_token: Option<u64>,
        /// The client's clock when it started the successful attempt.
        acquired_at_ms: u64,
        /// Where the client believes its lease ends, on its own clock.
        valid_until_ms: u64,
    },
    /// `acquire` gave up (wait bound reached) or failed.
    AcquireFailed {
        /// Why: the wait bound, or the error the lock returned (shown in reports).
        reason: String,
    },
    /// The holder enters its critical section.
    Enter,
    /// The holder leaves its critical section.
    Exit,
    /// The release completed; `deleted` says whether the client's own entry was removed.
    Released {
        /// Whether the release removed the client's own entry; `false` means the entry was
        /// already gone (expired, or taken by someone else): the lease was lost while held.
        deleted: bool,
    },
    /// The release failed (for example the request timed out).
    ReleaseFailed {
        /// The error the release returned.
        error: String,
    },
    /// The protected resource accepted (or refused) a write.
    ResourceWrite {
        /// The counter value the holder read before its write (a read-modify-write).
        read: u64,
        /// The value it wrote: `read + 1`, so a lost update shows as two writes of one value.
        wrote: u64,
        /// The fencing token it presented, if its lock issues one.
        fencing_token: Option<u64>,
        /// Whether the storage applied it (a fenced storage refuses an older token).
        accepted: bool,
        /// The storage's sequence number of an accepted write (the order it applied writes in).
        seq: Option<u64>,
    },
    /// The holder's validity time ran out on its own clock before its write: it stopped working
    /// and skipped the write (`check_validity_before_write`).
    LeaseExpired {
        /// Where its lease ended, and its clock when it noticed (both on its own clock).
        valid_until_ms: u64,
        /// The holder's clock when it noticed (its own clock).
        now_ms: u64,
    },
    /// The nemesis did something (failover, pause, partition ...).
    Fault {
        /// What, in words the reports show as they are.
        what: String,
    },
    /// A nested acquire by the holder succeeded (`depth` 2 is the first nested one).
    Reentered {
        /// The hold count after this acquire (2: the first nested acquire).
        depth: u32,
    },
    /// A nested acquire by the holder failed or gave up.
    ReentryFailed {
        /// The hold count the nested acquire tried to reach.
        depth: u32,
        /// Why it failed or gave up.
        reason: String,
    },
    /// A nested (inner) release completed; `deleted` says whether it removed the lock entry.
    InnerReleased {
        /// The hold count this inner release undid.
        depth: u32,
        /// Whether it removed the lock entry (an inner release must not).
        deleted: bool,
    },
    /// The holder renewed its lease (the workload's `renew_every_ms`): the lock says the entry
    /// is still its own, and the holder now believes its lease ends at `valid_until_ms`.
    Renewed {
        /// The new end of its validity time, on the clock its lock measures validity with.
        valid_until_ms: u64,
    },
    /// A renewal did not extend the lease. With `lost` the lock said the entry was no longer the
    /// holder's: it stops working and skips its write. Otherwise the renewal failed (a timeout,
    /// an error) and the holder keeps the validity time it had.
    RenewalFailed {
        /// The lock answered that the entry was no longer this holder's.
        lost: bool,
        /// What the lock answered, in words the reports show as they are.
        reason: String,
    },
    /// The run is over: every client has finished, or the grace period after `duration_ms` has
    /// run out and the clients still running are cut off. Recorded once, by the run assembly, so
    /// a client still waiting for the lock then is seen waiting until now (the liveness check),
    /// not until whatever event happened to be last.
    RunEnd,
    /// The client process died at `point` (the nemesis's `crash` of a client).
    Crashed {
        /// The named point where it died.
        point: String,
    },
    /// Address book (the address-book article): the holder inserted an address for `user`, as the default when
    /// the count it read was 0.
    AddressInserted {
        /// The user whose address book it wrote.
        user: u32,
        /// How many addresses the holder read before inserting (0: it makes this one default).
        count_seen: u64,
        /// Whether it inserted the address as the default.
        is_default: bool,
        /// The fencing token it presented, if its lock issues one.
        fencing_token: Option<u64>,
        /// Whether the storage applied it.
        accepted: bool,
        /// The storage's sequence number of an accepted insert.
        seq: Option<u64>,
    },
    /// The lock passed one of its named points (for example `before_del`: its release checked
    /// the owner and sends the DEL next), recorded as it goes on, after any pause there.
    Point {
        /// The point's name, as scenarios write it in `on = "<name>"`.
        name: String,
    },
    /// The servers watch the lock entry under `key` and record every [`EventKind::EntryRemoved`]:
    /// from this event on, the foreign-release check judges from what the servers did.
    LockEntriesWatched {
        /// The lock key whose entries the servers watch.
        key: String,
        /// How far a removal's recorded time may be from when the server executed it, in µs:
        /// 0 in simulation; in real mode the witness's uncertainty in tying the servers' clocks
        /// to the run's (half a marker's round trip, `real::observers::witness`).
        placed_within_us: u64,
    },
    /// A server saw a client command remove a holder's lock entry (a string key's value, or a
    /// hash field for hash locks); recorded by the server, so who removed whose entry is what
    /// the server did. An entry that had logically expired is not there to remove.
    EntryRemoved {
        /// The client whose command removed it.
        by_client: u32,
        /// The holder token removed (the stored value or hash field).
        owner: String,
        /// The client whose command created that entry, when the server saw it created.
        owner_client: Option<u32>,
    },
    /// A lock entry went without a client's command removing it (its lease or session
    /// expired), or an observer saw it go but the servers do not say whose command removed it.
    /// Not a removal by a client: the release check never counts it as one, so a library that
    /// answers "released" for an entry that went this way before its release is caught.
    EntryGone {
        /// The holder token of the entry that went (as the client that was granted it knows it).
        owner: String,
        /// The client that created it (was granted it), when known.
        owner_client: Option<u32>,
        /// Why it went, as far as the servers say.
        cause: GoneCause,
    },
    /// Address book at the end of the run, read from the storage.
    AddressBookState {
        /// The user whose book was read.
        user: u32,
        /// How many addresses it holds.
        addresses: u64,
        /// How many of them are marked default (the invariant: exactly one when any exist).
        defaults: u64,
    },
}

/// Why a lock entry went without a client's removal ([`EventKind::EntryGone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GoneCause {
    /// The servers expired it: its lease ran out (etcd), its session expired (ZooKeeper).
    Expired,
    /// An observer of real servers saw it go and cannot tell by whose command or why (etcd's
    /// watch does not say whether a lease expired, was revoked, or a client deleted the key).
    NotSaid,
}

impl GoneCause {
    /// The cause in words (the history's text form, the reports).
    pub fn name(self) -> &'static str {
        match self {
            GoneCause::Expired => "expired",
            GoneCause::NotSaid => "not-said",
        }
    }
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// True time, microseconds since the run started.
    pub at_us: u64,
    /// Who reported it: `client-<c>`, `nemesis`, or a server name.
    pub node: Node,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// The client index, for events reported by a client (read when the event was made, not
    /// parsed again: every checker asks it of every event).
    pub fn client(&self) -> Option<u32> {
        self.node.client()
    }
}

/// What one event costs in a history's memory, not counting the strings some kinds hold (an
/// owner token, a fault's words): the figure the memory estimate before a run uses.
pub const EVENT_BYTES: usize = std::mem::size_of::<Event>();

/// The events of one run, in the order they were recorded (which is true-time order).
#[derive(Clone, Debug, Default, Serialize)]
pub struct History {
    /// Every event, in true-time order.
    pub events: Vec<Event>,
}

impl History {
    /// One line per event; the canonical form the trace hash covers.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            let _ = writeln!(out, "{}", render_event(e));
        }
        out
    }

    /// A short hash of the whole history: same scenario and seed must give the same hash. It
    /// covers every field of every event, from their binary form (see [`trace_hash`]), so it
    /// costs no text rendering.
    pub fn trace_hash(&self) -> String {
        trace_hash::of(&self.events)
    }

    /// The client that holds the lock now, as far as the clients know: the latest one whose
    /// acquire succeeded and that has not released since.
    pub fn current_holder(&self) -> Option<u32> {
        let mut holding: Vec<u32> = Vec::new();
        for e in &self.events {
            let Some(c) = e.client() else { continue };
            match e.kind {
                EventKind::Acquired { .. } => {
                    holding.retain(|&h| h != c);
                    holding.push(c);
                }
                EventKind::Released { .. } | EventKind::ReleaseFailed { .. } => {
                    holding.retain(|&h| h != c)
                }
                _ => {}
            }
        }
        holding.last().copied()
    }

    /// True time of the last event, in microseconds.
    pub fn end_us(&self) -> u64 {
        self.events.last().map(|e| e.at_us).unwrap_or(0)
    }
}

/// Formats microseconds as milliseconds with three decimals.
pub fn fmt_ms(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

fn render_event(e: &Event) -> String {
    let what = match &e.kind {
        EventKind::AcquireStart => "acquire-start".to_string(),
        EventKind::Acquired {
            owner,
            fencing_token,
            acquired_at_ms,
            valid_until_ms,
        } => format!(
            "acquired owner={owner} fencing={fencing_token:?} at={acquired_at_ms} valid_until={valid_until_ms}"
        ),
        EventKind::AcquireFailed { reason } => format!("acquire-failed {reason}"),
        EventKind::Enter => "enter".to_string(),
        EventKind::Exit => "exit".to_string(),
        EventKind::Released { deleted } => format!("released deleted={deleted}"),
        EventKind::ReleaseFailed { error } => format!("release-failed {error}"),
        EventKind::ResourceWrite {
            read,
            wrote,
            fencing_token,
            accepted,
            seq,
        } => format!(
            "write read={read} wrote={wrote} fencing={fencing_token:?} accepted={accepted} seq={seq:?}"
        ),
        EventKind::LeaseExpired {
            valid_until_ms,
            now_ms,
        } => format!("lease-expired valid_until={valid_until_ms} now={now_ms} write skipped"),
        EventKind::Fault { what } => format!("fault {what}"),
        EventKind::Reentered { depth } => format!("reentered depth={depth}"),
        EventKind::ReentryFailed { depth, reason } => {
            format!("reentry-failed depth={depth} {reason}")
        }
        EventKind::InnerReleased { depth, deleted } => {
            format!("inner-released depth={depth} deleted={deleted}")
        }
        EventKind::Renewed { valid_until_ms } => format!("renewed valid_until={valid_until_ms}"),
        EventKind::RenewalFailed { lost, reason } => {
            format!("renewal-failed lost={lost} {reason}")
        }
        EventKind::RunEnd => "run-end".to_string(),
        EventKind::Crashed { point } => format!("crashed at {point}"),
        EventKind::Point { name } => format!("point {name}"),
        EventKind::AddressInserted {
            user,
            count_seen,
            is_default,
            fencing_token,
            accepted,
            seq,
        } => format!(
            "address-insert user={user} count_seen={count_seen} default={is_default} fencing={fencing_token:?} accepted={accepted} seq={seq:?}"
        ),
        EventKind::LockEntriesWatched {
            key,
            placed_within_us: 0,
        } => format!("watching lock entries of {key}"),
        EventKind::LockEntriesWatched {
            key,
            placed_within_us,
        } => format!(
            "watching lock entries of {key} (removals placed within {} ms)",
            fmt_ms(*placed_within_us)
        ),
        EventKind::EntryRemoved {
            by_client,
            owner,
            owner_client,
        } => format!("entry-removed by=client-{by_client} owner={owner} created_by={owner_client:?}"),
        EventKind::EntryGone {
            owner,
            owner_client,
            cause,
        } => format!(
            "entry-gone cause={} owner={owner} created_by={owner_client:?}",
            cause.name()
        ),
        EventKind::AddressBookState {
            user,
            addresses,
            defaults,
        } => format!("address-book user={user} addresses={addresses} defaults={defaults}"),
    };
    format!("{} {} {}", fmt_ms(e.at_us), e.node, what)
}

/// Where a recorder reads true time. The history does not know which world it records: the
/// simulator passes its virtual clock (`sim::clock::TrueTime`), real mode the process's
/// monotonic clock ([`Recorder::real`]).
pub trait TrueClock: Send + Sync {
    /// Microseconds since the run started.
    fn now_us(&self) -> u64;
}

/// The process's monotonic clock, from the moment the run started (real mode).
struct MonotonicSince(std::time::Instant);

impl TrueClock for MonotonicSince {
    fn now_us(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// A shared, append-only recorder. Clients, the nemesis and servers all hold a clone.
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Mutex<Recording>>,
    clock: Arc<dyn TrueClock>,
}

/// What a recorder holds: the history so far, and the node names it has seen (so an event
/// shares its node's name instead of allocating one).
#[derive(Debug, Default)]
struct Recording {
    history: History,
    names: node::Names,
}

impl std::fmt::Debug for dyn TrueClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrueClock")
    }
}

impl Recorder {
    /// A recorder that stamps events with `clock` (the simulator's clock, in simulation).
    pub fn with_clock(clock: Arc<dyn TrueClock>) -> Recorder {
        Recorder {
            inner: Arc::default(),
            clock,
        }
    }

    /// A recorder on the process's monotonic clock (real mode).
    pub fn real() -> Recorder {
        Recorder {
            inner: Arc::default(),
            clock: Arc::new(MonotonicSince(std::time::Instant::now())),
        }
    }

    /// True time now, in microseconds since the run started.
    pub fn now_us(&self) -> u64 {
        self.clock.now_us()
    }

    /// Appends an event of `node`, stamped with true time now.
    pub fn record(&self, node: &str, kind: EventKind) {
        let at_us = self.now_us();
        watch::recorded(at_us);
        let mut rec = self.inner.lock().unwrap();
        let node = rec.names.get(node);
        rec.history.events.push(Event { at_us, node, kind });
    }

    /// Records that the servers watch the lock entries of `key` ([`EventKind::LockEntriesWatched`],
    /// from `servers`): 0 for `placed_within_us` is simulation's exact placement, so a real-mode
    /// observer's bound is at least 1 µs.
    pub fn record_entries_watched(&self, key: &str, placed_within_us: u64) {
        self.record(
            "servers",
            EventKind::LockEntriesWatched {
                key: key.to_string(),
                placed_within_us,
            },
        );
    }

    /// Inserts an event of `node` stamped `at_us`, after every event stamped at or before it: for
    /// an observer that learns of an event after the fact (the real-mode witness reads the
    /// servers' `MONITOR` streams behind them), so the history stays in true-time order.
    pub fn insert_at(&self, node: &str, kind: EventKind, at_us: u64) {
        let mut rec = self.inner.lock().unwrap();
        let node = rec.names.get(node);
        let events = &mut rec.history.events;
        let later = events.iter().rev().take_while(|e| e.at_us > at_us).count();
        let at = events.len() - later;
        events.insert(at, Event { at_us, node, kind });
    }

    /// Makes room for `events` more events up front: a long run's history then grows without
    /// copying itself at every doubling (a sixth of a 100,000-cycle run went to that). Only
    /// address space is taken until events are written, so a generous estimate costs nothing.
    pub fn reserve(&self, events: usize) {
        self.inner.lock().unwrap().history.events.reserve(events);
    }

    /// Everything recorded, moved out (the recorder is left empty): the end of a run, where a
    /// copy of a long history was a tenth of a simulated lock cycle.
    pub fn take(&self) -> History {
        std::mem::take(&mut self.inner.lock().unwrap().history)
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        self.inner.lock().unwrap().history.clone()
    }
}

/// How long a holder believed its grant valid, in ms after the grant (its clock), or `None`
/// for a grant with no end the holder knows of: a lock whose holder keeps it until it releases
/// (a ZooKeeper node, a MySQL row lock) grants until `u64::MAX`, which is not a lease to print.
pub fn believed_lease_ms(acquired_at_ms: u64, valid_until_ms: u64) -> Option<u64> {
    (valid_until_ms != u64::MAX).then(|| valid_until_ms.saturating_sub(acquired_at_ms))
}

/// A client pause or resumption, as the nemesis of either world notes it (`client-2 paused for
/// 300 ms (GC pause)`, `client-2 resumed`): the one place that reads those notes back, for the
/// liveness check and the HTML timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseNote {
    /// The client stopped (its tasks and timers stand still).
    Paused(u32),
    /// The client goes on.
    Resumed(u32),
}

/// A partition as the nemesis of either world notes it (`fault::partition::describe_partition`:
/// "partition: client-1, redis-0 cut off from redis-1 for 5034 ms", `everyone` for `from` when
/// the cut runs to every other node, and how the cut runs after it): the one place that reads
/// those notes back, for the liveness check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionNote {
    /// The nodes on the cut side.
    pub nodes: Vec<String>,
    /// The nodes they are cut off from; `None`: every node not in `nodes`.
    pub from: Option<Vec<String>>,
    /// How long the cut lasts (ms).
    pub for_ms: u64,
}

impl PartitionNote {
    /// What a nemesis note `what` says of a partition, if it is one.
    pub fn parse(what: &str) -> Option<PartitionNote> {
        let rest = what.strip_prefix("partition: ")?;
        let (nodes, rest) = rest.split_once(" cut off from ")?;
        let (from, rest) = rest.split_once(" for ")?;
        let for_ms = rest.split_once(" ms")?.0.parse().ok()?;
        let names = |s: &str| s.split(", ").map(str::to_string).collect::<Vec<_>>();
        Some(PartitionNote {
            nodes: names(nodes),
            from: (from != "everyone").then(|| names(from)),
            for_ms,
        })
    }

    /// Whether the cut separates `a` from `b`, one way or both (a request that cannot arrive or
    /// an answer that cannot come back: either way nothing is asked and answered).
    pub fn separates(&self, a: &str, b: &str) -> bool {
        let cut = |x: &str| self.nodes.iter().any(|n| n == x);
        let other = |x: &str| match &self.from {
            Some(from) => from.iter().any(|n| n == x),
            None => !cut(x),
        };
        (cut(a) && other(b)) || (cut(b) && other(a))
    }
}

impl PauseNote {
    /// What a nemesis note `what` says of a client pause, if anything.
    pub fn parse(what: &str) -> Option<PauseNote> {
        let rest = what.strip_prefix("client-")?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let client = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.starts_with(" paused for ") {
            Some(PauseNote::Paused(client))
        } else if tail == " resumed" {
            Some(PauseNote::Resumed(client))
        } else {
            None
        }
    }
}
