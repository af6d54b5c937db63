//! The lock entries a simulated service watches for the release and foreign-release checks: which
//! client created each entry still there, and what each request or expiry removed, as history
//! events. The service lists its entries before and after each change (a key and its create
//! revision, a node's path and the zxid that created it); this turns the two lists into
//! [`EventKind::EntryRemoved`] (a client's request removed it) or [`EventKind::EntryGone`] (an
//! expiry did).

use crate::history::{EventKind, GoneCause, Recorder};
use std::collections::BTreeMap;

/// One lock entry: its name (the owner token lockcheck's locks hold: the key or node path) and
/// the revision or zxid that created it (an entry removed and created again is another one).
pub type Entry = (String, i64);

/// Which client's request created each watched entry still there.
#[derive(Debug, Default)]
pub struct EntryCreators {
    creators: BTreeMap<Entry, u32>,
}

impl EntryCreators {
    /// Starts watching: records `LockEntriesWatched` for `key` (placed exactly: 0).
    pub fn start(rec: &Recorder, key: &str) -> EntryCreators {
        rec.record_entries_watched(key, 0);
        EntryCreators::default()
    }

    /// Records on `server` what went between `before` and `after`: removed by client `by`'s
    /// request, or expired when `by` is `None`; remembers who created the entries that appeared.
    pub fn record_changes(
        &mut self,
        rec: &Recorder,
        server: &str,
        by: Option<u32>,
        before: &[Entry],
        after: &[Entry],
    ) {
        for gone in before.iter().filter(|e| !after.contains(e)) {
            let owner_client = self.creators.remove(gone);
            let owner = gone.0.clone();
            let kind = match by {
                Some(by_client) => EventKind::EntryRemoved {
                    by_client,
                    owner,
                    owner_client,
                },
                None => EventKind::EntryGone {
                    owner,
                    owner_client,
                    cause: GoneCause::Expired,
                },
            };
            rec.record(server, kind);
        }
        if let Some(by) = by {
            for new in after.iter().filter(|e| !before.contains(e)) {
                self.creators.insert(new.clone(), by);
            }
        }
    }
}
