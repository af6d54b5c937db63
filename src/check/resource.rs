//! Resource safety (the check named `resource`): the damage, as the protected storage saw it. The
//! store it reads from is `src/resource/`; this file only judges what the store recorded.
//! What it reads, what counts as a violation, what it can never see: `docs/checks.md`, "resource".
//!
//! Two holders at once is the lock's failure; what a user loses is measured here, from the
//! storage's own order of accepted writes (its sequence numbers):
//! - **stale writes accepted**: the storage applied a write from a holder whose grant had been
//!   superseded, after it had already applied a write from the newer holder. This is what a
//!   fencing token exists to refuse (Kleppmann); a plain lock lets it through.
//! - **lost updates** of the read-modify-write counter: an accepted write that overwrote updates
//!   its writer never read (it read 4 when the counter was already 6: two updates are lost).
//!   Jepsen's lock-set damage, as a number.
//! - **address book** (the address-book article): at the end, a user with addresses must have exactly one
//!   default address.
//!
//! Reused fencing tokens (two grants with the same token, as after a failover to a lagging
//! replica) and writes the storage refused are reported as evidence; they are not damage by
//! themselves.

use super::{grants, CheckResult, Checker, Declaration, GrantIndex, Reads};
use crate::check::Verdict;
use crate::history::{fmt_ms, EventKind, History};
use serde::Serialize;
use std::collections::BTreeMap;

/// The resource checker.
pub struct Resource {
    /// `[checks] max_refused_writes`: above this share of refused writes, a violation.
    pub max_refused_writes: Option<f64>,
}

/// One write as the storage saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Write {
    /// The writing client.
    pub client: u32,
    /// True time of the write (µs).
    pub at_us: u64,
    /// When the writer's grant was made (µs); 0 if the history has none.
    pub granted_us: u64,
    /// The token the write carried, which a fencing storage compares with the highest it saw.
    pub fencing_token: Option<u64>,
    /// The storage's sequence number for an accepted write: its own order of writes, which
    /// decides staleness independently of the clients' clocks.
    pub seq: Option<u64>,
    /// Whether the storage applied the write (a fencing storage refuses older tokens).
    pub accepted: bool,
    /// Counter writes: the value read before the write, to count the updates it overwrote.
    pub read: Option<u64>,
    /// Counter writes: the value written.
    pub wrote: Option<u64>,
}

/// The writes of a history, in event order, each with its writer's grant.
pub fn writes(history: &History, gs: &[crate::check::grants::Grant]) -> Vec<Write> {
    let index = GrantIndex::new(gs);
    let grant_of = |client: u32, at: u64| -> u64 {
        index
            .of_client_at(client, at)
            .map(|g| g.acquired_us)
            .unwrap_or(0)
    };
    // A hint, not a bound: a write takes at least an acquire, an enter and an exit event too.
    let mut out = Vec::with_capacity(history.events.len() / 4);
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        let w = match &e.kind {
            EventKind::ResourceWrite {
                read,
                wrote,
                fencing_token,
                accepted,
                seq,
            } => Write {
                client: c,
                at_us: e.at_us,
                granted_us: grant_of(c, e.at_us),
                fencing_token: *fencing_token,
                seq: *seq,
                accepted: *accepted,
                read: Some(*read),
                wrote: Some(*wrote),
            },
            EventKind::AddressInserted {
                fencing_token,
                accepted,
                seq,
                ..
            } => Write {
                client: c,
                at_us: e.at_us,
                granted_us: grant_of(c, e.at_us),
                fencing_token: *fencing_token,
                seq: *seq,
                accepted: *accepted,
                read: None,
                wrote: None,
            },
            _ => continue,
        };
        out.push(w);
    }
    out
}

impl Resource {
    /// Its entry in `check::CHECKERS`: the writes the storage saw, against the grants; `[checks] max_refused_writes`.
    pub const DECLARATION: Declaration = Declaration {
        name: "resource",
        label: "resource",
        reads: Reads::Grants,
        runs_only: None,
        build: |p| {
            Some(Box::new(Resource {
                max_refused_writes: p.max_refused_writes,
            }))
        },
    };
}

impl Checker for Resource {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let all = writes(history, gs);
        let refused = all.iter().filter(|w| !w.accepted).count();
        let mut applied: Vec<&Write> = all.iter().filter(|w| w.accepted).collect();
        // The storage's order; writes without a sequence number keep their event order.
        applied.sort_by_key(|w| (w.seq.unwrap_or(u64::MAX), w.at_us));

        let mut stale = Vec::new();
        let mut newest: Option<&Write> = None;
        let mut value = 0u64;
        let mut lost_updates = 0u64;
        let mut lost_examples = Vec::new();
        for w in &applied {
            if let Some(n) = newest {
                if w.granted_us < n.granted_us && w.client != n.client {
                    stale.push(serde_json::json!({
                        "client": w.client,
                        "granted_us": w.granted_us,
                        "fencing_token": w.fencing_token,
                        "seq": w.seq,
                        "at_us": w.at_us,
                        "after_write_of_client": n.client,
                        "newer_grant_us": n.granted_us,
                        "newer_fencing_token": n.fencing_token,
                    }));
                }
            }
            if newest.is_none_or(|n| w.granted_us >= n.granted_us) {
                newest = Some(w);
            }
            if let (Some(read), Some(wrote)) = (w.read, w.wrote) {
                if read < value {
                    lost_updates += value - read;
                    if lost_examples.len() < 5 {
                        lost_examples.push(serde_json::json!({
                            "client": w.client, "read": read, "counter_was": value, "wrote": wrote, "seq": w.seq,
                        }));
                    }
                }
                value = wrote;
            }
        }

        // Fencing tokens handed out more than once.
        let mut by_token: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for g in gs {
            if let Some(t) = g.fencing_token {
                by_token.entry(t).or_default().push(g.client);
            }
        }
        let reused: Vec<serde_json::Value> = by_token
            .iter()
            .filter(|(_, cs)| cs.len() > 1)
            .map(|(t, cs)| serde_json::json!({ "token": t, "clients": cs }))
            .collect();

        // The address-book article's invariant, on the final state.
        let mut book_damage = Vec::new();
        for e in &history.events {
            if let EventKind::AddressBookState {
                user,
                addresses,
                defaults,
            } = e.kind
            {
                if addresses > 0 && defaults != 1 {
                    book_damage.push(serde_json::json!({
                        "user": user, "addresses": addresses, "default_addresses": defaults,
                    }));
                }
            }
        }

        let refused_share = refused as f64 / all.len().max(1) as f64;
        let too_many_refused = self
            .max_refused_writes
            .is_some_and(|max| refused_share > max);
        let violation =
            !stale.is_empty() || lost_updates > 0 || !book_damage.is_empty() || too_many_refused;
        let mut parts = Vec::new();
        if too_many_refused {
            parts.push(format!(
                "{refused} of {} write(s) refused ({:.0}%, at most {:.0}% allowed): the holders believed their leases valid",
                all.len(),
                refused_share * 100.0,
                self.max_refused_writes.unwrap_or(0.0) * 100.0
            ));
        }
        if !stale.is_empty() {
            parts.push(format!("{} stale write(s) accepted", stale.len()));
        }
        if lost_updates > 0 {
            parts.push(format!("{lost_updates} lost update(s)"));
        }
        for b in &book_damage {
            parts.push(format!(
                "user {} has {} default addresses",
                b["user"], b["default_addresses"]
            ));
        }
        let summary = if violation {
            parts.join(", ")
        } else {
            format!(
                "no stale write accepted, no lost update ({} write(s) applied{})",
                applied.len(),
                if refused > 0 {
                    format!(
                        ", {refused} of {} refused as stale ({:.0}%)",
                        all.len(),
                        refused_share * 100.0
                    )
                } else {
                    String::new()
                }
            )
        };
        let mut summary = summary;
        if !reused.is_empty() {
            summary.push_str(&format!(
                "; fencing token(s) reused: {}",
                reused
                    .iter()
                    .map(|r| format!("{} by clients {}", r["token"], r["clients"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let mut timeline = Vec::new();
        for s in stale.iter().take(3) {
            timeline.push(format!(
                "client-{} (granted {} ms, token {}) wrote at {} ms after client-{}'s write (granted {} ms, token {})",
                s["client"],
                fmt_ms(s["granted_us"].as_u64().unwrap_or(0)),
                s["fencing_token"],
                fmt_ms(s["at_us"].as_u64().unwrap_or(0)),
                s["after_write_of_client"],
                fmt_ms(s["newer_grant_us"].as_u64().unwrap_or(0)),
                s["newer_fencing_token"],
            ));
        }
        CheckResult {
            verdict: Verdict::of(violation),
            summary,
            evidence: serde_json::json!({
                "writes_applied": applied.len(),
                "writes_refused": refused,
                "writes_refused_share": refused_share,
                "stale_writes_accepted": stale.len(),
                "stale_writes": stale,
                "lost_updates": lost_updates,
                "lost_update_examples": lost_examples,
                "fencing_tokens_reused": reused,
                "address_book_damage": book_damage,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};

    fn write(read: u64, token: Option<u64>, accepted: bool, seq: Option<u64>) -> EventKind {
        EventKind::ResourceWrite {
            read,
            wrote: read + 1,
            fencing_token: token,
            accepted,
            seq,
        }
    }

    #[test]
    fn serial_writes_are_safe() {
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(Some(1))),
                ev(10, "client-0", write(0, Some(1), true, Some(1))),
                ev(20, "client-1", acquired(Some(2))),
                ev(30, "client-1", write(1, Some(2), true, Some(2))),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["writes_applied"], 2);
    }

    #[test]
    fn an_old_holders_write_after_the_new_holders_is_stale() {
        // Kleppmann's picture without fencing: client 0 pauses, client 1 is granted and writes,
        // client 0 wakes and writes.
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(100, "client-1", acquired(None)),
                ev(110, "client-1", write(0, None, true, Some(1))),
                ev(200, "client-0", write(1, None, true, Some(2))),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["stale_writes_accepted"], 1);
        assert_eq!(r.evidence["stale_writes"][0]["client"], 0);
        // The same with fencing: the storage refused it; nothing is damaged.
        let mut h2 = h.clone();
        h2.events[1].kind = acquired(Some(34));
        h2.events[0].kind = acquired(Some(33));
        h2.events[2].kind = write(0, Some(34), true, Some(1));
        h2.events[3].kind = write(1, Some(33), false, None);
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h2);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["writes_refused"], 1);
    }

    #[test]
    fn storage_order_not_reply_order_decides() {
        // The replies arrived in the other order; the sequence numbers say client 1 wrote first.
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(100, "client-1", acquired(None)),
                ev(200, "client-0", write(0, None, true, Some(2))),
                ev(201, "client-1", write(0, None, true, Some(1))),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.evidence["stale_writes_accepted"], 1);
        assert_eq!(
            r.evidence["lost_updates"], 1,
            "client 0 read 0, counter was 1"
        );
    }

    #[test]
    fn lost_updates_are_counted() {
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(1, "client-0", write(0, None, true, Some(1))),
                ev(2, "client-0", write(1, None, true, Some(2))),
                ev(3, "client-0", write(2, None, true, Some(3))),
                ev(4, "client-0", write(0, None, true, Some(4))),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["lost_updates"], 3);
        assert_eq!(r.evidence["stale_writes_accepted"], 0, "same holder");
    }

    #[test]
    fn reused_tokens_are_reported_and_the_equal_token_write_is_stale() {
        // Failover to a lagging replica: both grants got token 34; the storage accepts the old
        // holder's 34 after the new holder's 34.
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(Some(34))),
                ev(1000, "client-1", acquired(Some(34))),
                ev(1100, "client-1", write(0, Some(34), true, Some(1))),
                ev(4000, "client-0", write(1, Some(34), true, Some(2))),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["fencing_tokens_reused"][0]["token"], 34);
        assert!(r.summary.contains("reused"), "{}", r.summary);
    }

    #[test]
    fn two_default_addresses_are_damage() {
        let state = |defaults| EventKind::AddressBookState {
            user: 1,
            addresses: 2,
            defaults,
        };
        let h = History {
            events: vec![ev(0, "storage", state(2))],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
        assert!(r.summary.contains("2 default addresses"), "{}", r.summary);
        let h = History {
            events: vec![ev(0, "storage", state(1))],
        };
        assert_eq!(
            Resource {
                max_refused_writes: None
            }
            .check(&h)
            .verdict,
            Verdict::Safe
        );
    }

    /// Refusals are reported always, and a violation above `[checks] max_refused_writes`.
    #[test]
    fn refused_writes_are_reported_and_bounded() {
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(Some(5))),
                ev(1, "client-0", write(0, Some(5), true, Some(1))),
                ev(2, "client-1", acquired(Some(3))),
                ev(3, "client-1", write(1, Some(3), false, None)),
            ],
        };
        let r = Resource {
            max_refused_writes: None,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert!(r.summary.contains("1 of 2 refused"), "{}", r.summary);
        let r = Resource {
            max_refused_writes: Some(0.25),
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert!(
            r.summary.contains("1 of 2 write(s) refused"),
            "{}",
            r.summary
        );
    }
}
