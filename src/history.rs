//! The history of a run: every event a client, the nemesis or a server reports, stamped with true
//! time. Checkers read only this, so the same checker judges a simulated and a real run.
//!
//! True time is the simulator's global clock (madsim's, never skewed) or, in real mode, the harness
//! process's monotonic clock. Node clocks appear only as data inside events (what a client believed).

use serde::Serialize;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

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
    AcquireFailed { reason: String },
    /// The holder enters its critical section.
    Enter,
    /// The holder leaves its critical section.
    Exit,
    /// The release completed; `deleted` says whether the client's own entry was removed.
    Released { deleted: bool },
    /// The release failed (for example the request timed out).
    ReleaseFailed { error: String },
    /// The protected resource accepted (or refused) a write.
    ResourceWrite {
        read: u64,
        wrote: u64,
        fencing_token: Option<u64>,
        accepted: bool,
        /// The storage's sequence number of an accepted write (the order it applied writes in).
        seq: Option<u64>,
    },
    /// The holder's validity time ran out on its own clock before its write: it stopped working
    /// and skipped the write (`check_validity_before_write`).
    LeaseExpired {
        /// Where its lease ended, and its clock when it noticed (both on its own clock).
        valid_until_ms: u64,
        now_ms: u64,
    },
    /// The nemesis did something (failover, pause, partition ...).
    Fault { what: String },
    /// A nested acquire by the holder succeeded (`depth` 2 is the first nested one).
    Reentered { depth: u32 },
    /// A nested acquire by the holder failed or gave up.
    ReentryFailed { depth: u32, reason: String },
    /// A nested (inner) release completed; `deleted` says whether it removed the lock entry.
    InnerReleased { depth: u32, deleted: bool },
    /// The client process died at `point` (the nemesis's `crash` of a client).
    Crashed { point: String },
    /// Address book (the address-book article): the holder inserted an address for `user`, as the default when
    /// the count it read was 0.
    AddressInserted {
        user: u32,
        count_seen: u64,
        is_default: bool,
        fencing_token: Option<u64>,
        accepted: bool,
        seq: Option<u64>,
    },
    /// The lock passed one of its named points (for example `before_del`: its release checked
    /// the owner and sends the DEL next), recorded as it goes on, after any pause there.
    Point { name: String },
    /// The servers watch the lock entry under `key` and record every [`EventKind::EntryRemoved`]:
    /// from this event on, the foreign-release check judges from what the servers did.
    LockEntriesWatched { key: String },
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
    /// Address book at the end of the run, read from the storage.
    AddressBookState {
        user: u32,
        addresses: u64,
        defaults: u64,
    },
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// True time, microseconds since the run started.
    pub at_us: u64,
    /// Who reported it: `client-<c>`, `nemesis`, or a server name.
    pub node: String,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// The client index, for events reported by a client.
    pub fn client(&self) -> Option<u32> {
        self.node.strip_prefix("client-")?.parse().ok()
    }
}

/// The events of one run, in the order they were recorded (which is true-time order).
#[derive(Clone, Debug, Default, Serialize)]
pub struct History {
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

    /// A short hash of the whole history: same scenario and seed must give the same hash.
    pub fn trace_hash(&self) -> String {
        let mut h = sha1_smol::Sha1::new();
        for e in &self.events {
            h.update(render_event(e).as_bytes());
            h.update(b"\n");
        }
        h.digest().to_string()[..16].to_string()
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
        EventKind::LockEntriesWatched { key } => format!("watching lock entries of {key}"),
        EventKind::EntryRemoved {
            by_client,
            owner,
            owner_client,
        } => format!("entry-removed by=client-{by_client} owner={owner} created_by={owner_client:?}"),
        EventKind::AddressBookState {
            user,
            addresses,
            defaults,
        } => format!("address-book user={user} addresses={addresses} defaults={defaults}"),
    };
    format!("{} {} {}", fmt_ms(e.at_us), e.node, what)
}

/// Where true time comes from.
#[derive(Clone, Copy, Debug)]
enum TrueClock {
    Sim(madsim::time::Instant),
    Real(std::time::Instant),
}

/// A shared, append-only recorder. Clients, the nemesis and servers all hold a clone.
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Mutex<History>>,
    clock: TrueClock,
}

impl Recorder {
    /// A recorder on the simulator's clock; call inside a madsim runtime.
    pub fn simulated() -> Recorder {
        Recorder {
            inner: Arc::default(),
            clock: TrueClock::Sim(madsim::time::Instant::now()),
        }
    }

    /// A recorder on the process's monotonic clock (real mode).
    pub fn real() -> Recorder {
        Recorder {
            inner: Arc::default(),
            clock: TrueClock::Real(std::time::Instant::now()),
        }
    }

    /// True time now, in microseconds since the run started.
    pub fn now_us(&self) -> u64 {
        match self.clock {
            TrueClock::Sim(start) => (madsim::time::Instant::now() - start).as_micros() as u64,
            TrueClock::Real(start) => start.elapsed().as_micros() as u64,
        }
    }

    pub fn record(&self, node: &str, kind: EventKind) {
        let at_us = self.now_us();
        self.inner.lock().unwrap().events.push(Event {
            at_us,
            node: node.to_string(),
            kind,
        });
    }

    /// Everything recorded, moved out (the recorder is left empty): the end of a run, where a
    /// copy of a long history was a tenth of a simulated lock cycle.
    pub fn take(&self) -> History {
        std::mem::take(&mut *self.inner.lock().unwrap())
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        self.inner.lock().unwrap().clone()
    }
}
