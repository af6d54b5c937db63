//! The trace hash: one short value that is equal for equal histories, the determinism proof every
//! run prints and `tests/golden/trace_hashes.txt` pins.
//!
//! It covers every field of every event, in order: the event's true time, its node's name, what
//! happened (a tag per kind) and each of the kind's fields. It is computed from a fixed binary
//! form, not from the events' text: rendering a long run's history to text for its hash cost a
//! sixth of the run. The binary form is the same on every platform:
//!
//! - integers as 8 bytes little-endian (`u32` fields widened to 8), booleans as one byte 0 or 1;
//! - an optional integer as one byte 0 (none) or 1 followed by the integer;
//! - a string as its length (8 bytes little-endian) followed by its UTF-8 bytes;
//! - an event as `at_us`, `node`, the kind's tag (one byte, a fixed number per kind, given in
//!   [`Encoder::event`] and never reused), then the kind's fields in declaration order.
//!
//! The digest is XXH3-64 (seed 0; a specified hash, stable across platforms and versions) of the
//! concatenation, printed as 16 lower-case hexadecimal digits. It is not a cryptographic hash:
//! it tells runs apart, it does not authenticate them.

use super::{Event, EventKind};
use xxhash_rust::xxh3::Xxh3Default;

/// The trace hash of `events` (see the module docs).
pub(super) fn of(events: &[Event]) -> String {
    let mut hasher = Xxh3Default::new();
    let mut buf = Encoder(Vec::with_capacity(BATCH + 1024));
    for e in events {
        buf.event(e);
        if buf.0.len() >= BATCH {
            hasher.update(&buf.0);
            buf.0.clear();
        }
    }
    hasher.update(&buf.0);
    format!("{:016x}", hasher.digest())
}

/// Bytes encoded before they are fed to the hasher: its streaming update has a fixed cost per
/// call, which a call per field would pay millions of times.
const BATCH: usize = 64 * 1024;

/// The binary form of events (see the module docs).
struct Encoder(Vec<u8>);

impl Encoder {
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn bool(&mut self, v: bool) {
        self.0.push(v as u8);
    }

    fn opt(&mut self, v: Option<u64>) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                self.u64(v);
            }
        }
    }

    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn tag(&mut self, tag: u8) {
        self.0.push(tag);
    }

    fn event(&mut self, e: &Event) {
        self.u64(e.at_us);
        self.str(&e.node);
        match &e.kind {
            EventKind::AcquireStart => self.tag(0),
            EventKind::Acquired {
                owner,
                fencing_token,
                acquired_at_ms,
                valid_until_ms,
            } => {
                self.tag(1);
                self.str(owner);
                self.opt(*fencing_token);
                self.u64(*acquired_at_ms);
                self.u64(*valid_until_ms);
            }
            EventKind::AcquireFailed { reason } => {
                self.tag(2);
                self.str(reason);
            }
            EventKind::Enter => self.tag(3),
            EventKind::Exit => self.tag(4),
            EventKind::Released { deleted } => {
                self.tag(5);
                self.bool(*deleted);
            }
            EventKind::ReleaseFailed { error } => {
                self.tag(6);
                self.str(error);
            }
            EventKind::ResourceWrite {
                read,
                wrote,
                fencing_token,
                accepted,
                seq,
            } => {
                self.tag(7);
                self.u64(*read);
                self.u64(*wrote);
                self.opt(*fencing_token);
                self.bool(*accepted);
                self.opt(*seq);
            }
            EventKind::LeaseExpired {
                valid_until_ms,
                now_ms,
            } => {
                self.tag(8);
                self.u64(*valid_until_ms);
                self.u64(*now_ms);
            }
            EventKind::Fault { what } => {
                self.tag(9);
                self.str(what);
            }
            EventKind::Reentered { depth } => {
                self.tag(10);
                self.u64(u64::from(*depth));
            }
            EventKind::ReentryFailed { depth, reason } => {
                self.tag(11);
                self.u64(u64::from(*depth));
                self.str(reason);
            }
            EventKind::InnerReleased { depth, deleted } => {
                self.tag(12);
                self.u64(u64::from(*depth));
                self.bool(*deleted);
            }
            EventKind::RunEnd => self.tag(13),
            EventKind::Crashed { point } => {
                self.tag(14);
                self.str(point);
            }
            EventKind::AddressInserted {
                user,
                count_seen,
                is_default,
                fencing_token,
                accepted,
                seq,
            } => {
                self.tag(15);
                self.u64(u64::from(*user));
                self.u64(*count_seen);
                self.bool(*is_default);
                self.opt(*fencing_token);
                self.bool(*accepted);
                self.opt(*seq);
            }
            EventKind::Point { name } => {
                self.tag(16);
                self.str(name);
            }
            EventKind::LockEntriesWatched {
                key,
                placed_within_us,
            } => {
                self.tag(17);
                self.str(key);
                // Always 0 in simulation: hashed only when set, so simulated traces keep theirs.
                if *placed_within_us != 0 {
                    self.u64(*placed_within_us);
                }
            }
            EventKind::EntryRemoved {
                by_client,
                owner,
                owner_client,
            } => {
                self.tag(18);
                self.u64(u64::from(*by_client));
                self.str(owner);
                self.opt(owner_client.map(u64::from));
            }
            EventKind::EntryGone {
                owner,
                owner_client,
                cause,
            } => {
                self.tag(23);
                self.str(owner);
                self.opt(owner_client.map(u64::from));
                self.str(cause.name());
            }
            EventKind::Renewed { valid_until_ms } => {
                self.tag(20);
                self.u64(*valid_until_ms);
            }
            EventKind::RenewalFailed { lost, reason } => {
                self.tag(21);
                self.bool(*lost);
                self.str(reason);
            }
            EventKind::AddressBookState {
                user,
                addresses,
                defaults,
            } => {
                self.tag(19);
                self.u64(u64::from(*user));
                self.u64(*addresses);
                self.u64(*defaults);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;

    fn ev(at_us: u64, node: &str, kind: EventKind) -> Event {
        Event {
            at_us,
            node: node.into(),
            kind,
        }
    }

    /// The hash is pinned: a change to the binary form (or the hash function) changes every
    /// recorded hash, and must be a decision, not an accident.
    #[test]
    fn the_hash_of_a_small_history_is_pinned() {
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(
                    1500,
                    "client-0",
                    EventKind::Acquired {
                        owner: "a".into(),
                        fencing_token: Some(7),
                        acquired_at_ms: 1,
                        valid_until_ms: 10_001,
                    },
                ),
                ev(2000, "nemesis", EventKind::Fault { what: "x".into() }),
            ],
        };
        assert_eq!(h.trace_hash(), "12ac7eda9a9fe5f4");
    }

    #[test]
    fn every_field_counts() {
        let base = vec![ev(5, "client-1", EventKind::Released { deleted: true })];
        let hash = |events: Vec<Event>| History { events }.trace_hash();
        let h0 = hash(base.clone());
        assert_ne!(
            h0,
            hash(vec![ev(
                6,
                "client-1",
                EventKind::Released { deleted: true }
            )])
        );
        assert_ne!(
            h0,
            hash(vec![ev(
                5,
                "client-2",
                EventKind::Released { deleted: true }
            )])
        );
        assert_ne!(
            h0,
            hash(vec![ev(
                5,
                "client-1",
                EventKind::Released { deleted: false }
            )])
        );
        assert_ne!(h0, hash(vec![ev(5, "client-1", EventKind::Exit)]));
        // Strings are length-prefixed: moving bytes between two fields changes the hash.
        let removed = |by: &str, owner: &str| {
            hash(vec![ev(
                0,
                by,
                EventKind::EntryRemoved {
                    by_client: 0,
                    owner: owner.into(),
                    owner_client: None,
                },
            )])
        };
        assert_ne!(removed("ab", "c"), removed("a", "bc"));
    }
}
