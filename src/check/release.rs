//! Release truth: what each release told its caller against what the servers did. The definition,
//! what the check can never see, and why: `docs/checks.md`, "release".
//!
//! A lock's `release` returns whether it removed the caller's own entry; the workload records that
//! answer (`Released { deleted }`), and code in production trusts it. The simulated servers
//! record every removal of a lock entry (`EntryRemoved`: whose command, whose entry), and in real
//! mode the `MONITOR` witness does the same, so a release whose answer the servers contradict is
//! visible. Only one direction is a lie:
//! - it said "released" but no server removed its entry (nothing was removed, or another client's
//!   entry was: a release that swallows its error, or a `DEL` that reports any deletion as its
//!   own). Its caller goes on as if its lease ended cleanly when it did not: a violation.
//! - it said "not released", or the call failed, while its entry was removed: an unknown outcome,
//!   not a lie. A release whose commands landed but whose replies were lost (a cut inbound link,
//!   a timeout) cannot know it released; saying "not released" or failing is the honest answer,
//!   and its caller treats the lease as lost, which is safe. The evidence lists these as
//!   `unknown`, and the timeline shows them, but they are not violations.
//!
//! A release's commands are those the client sent between leaving its critical section (`Exit`)
//! and the answer (`Released`). Its removals are counted past the answer, up to the client's
//! next event that follows a server's reply (not `acquire-start` or a named point, which a client
//! records before it sends): in real mode the witness places a removal by the server's clock,
//! tied to the run's to within tens of microseconds, and a client with no think time records its
//! answer and its next `acquire-start` within a microsecond or two of each other, so a removal
//! may land after both. Past the answer only a removal of the released grant's own entry (its
//! owner token) counts: the client's next acquire may remove entries too (Redlock's clean-up of
//! a failed acquire removes the new grant's), and those have a new token. What the window gives
//! up: a release that lied, followed by an acquire that overwrote that very stale entry (a `SET`
//! without `NX`), would hide the lie; a lock whose entry does not hold its owner token gets no
//! late removal counted, as before. On several independent masters (Redlock) "released" means a
//! majority of them removed the entry. Without the servers' word (`LockEntriesWatched` absent:
//! real mode with the witness off) the check does not judge.
//!
//! An entry that went without a client's command (`EntryGone`: its lease or session expired, or
//! a real-mode observer saw it go without learning whose command it was, as etcd's watch) is no
//! removal by anyone's release: a release that answers "released" after its entry went that way
//! is a lie (npm etcd3's and kazoo's `release()`), and its evidence names when the entry went.

use super::{CheckResult, Checker, Declaration, Reads, Verdict};
use crate::history::{fmt_ms, EventKind, GoneCause, History};
use std::collections::BTreeMap;

/// The release-truth checker, for a lock on `masters` independent masters.
pub struct Release {
    /// Independent masters the lock lives on (a release on a majority counts as released).
    pub masters: u32,
}

/// What the servers' removals say about one answered (or failed) release.
enum Finding {
    /// It answered "released" and the servers removed no entry of its own (on a majority).
    Lie(serde_json::Value),
    /// It answered "not released", or failed, and its entry was removed: it could not know.
    Unknown(serde_json::Value),
}

/// What one client's release in progress has seen the servers do.
#[derive(Default)]
struct Open {
    /// The owner token of the client's current grant.
    owner: Option<String>,
    /// Whether the client is between `Exit` and its release's answer (or its next event).
    releasing: bool,
    /// The answer of a release not judged yet (its time, and whether it said "released"; `None`
    /// for a failed call): judged at the client's next event, or at the end.
    answered: Option<(u64, Option<bool>)>,
    /// Removals of its own entry, and of others' entries, during the release.
    own: u32,
    foreign: Vec<u32>,
    /// Removals of its own entry placed (by a real-mode witness) before its `Exit`, since its
    /// grant: each counts for the release if within the witness's placement bound of `Exit`.
    early: Vec<u64>,
    /// When its current grant's entry went without a client's removal (an expiry, or a removal
    /// the servers did not attribute), and why: the evidence of a release that answered
    /// "released" for an entry already gone.
    gone: Option<(u64, GoneCause)>,
}

impl Release {
    /// Its entry in `check::CHECKERS`: each release's answer against the servers' removals; the masters.
    pub const DECLARATION: Declaration = Declaration {
        name: "release",
        label: "release",
        reads: Reads::History,
        runs_only: None,
        build: |p| Some(Box::new(Release { masters: p.masters })),
    };
}

impl Checker for Release {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        let watched = history.events.iter().find_map(|e| match e.kind {
            EventKind::LockEntriesWatched {
                placed_within_us, ..
            } => Some(placed_within_us),
            _ => None,
        });
        // How far a removal's time may be off (0: exact, as in simulation).
        let slack_us = watched.unwrap_or(0);
        if watched.is_none() {
            return CheckResult {
                verdict: Verdict::NotJudged,
                summary: "the servers' removals were not watched".into(),
                evidence: serde_json::json!({ "judged": false }),
                timeline: Vec::new(),
            };
        }
        let need = if self.masters > 1 {
            self.masters / 2 + 1
        } else {
            1
        };
        let mut open: BTreeMap<u32, Open> = BTreeMap::new();
        let mut releases = 0u64;
        let mut lies = Vec::new();
        let mut unknown = Vec::new();
        let mut note = |f: Option<Finding>| match f {
            Some(Finding::Lie(v)) => lies.push(v),
            Some(Finding::Unknown(v)) => unknown.push(v),
            None => {}
        };
        for e in &history.events {
            if let EventKind::EntryGone {
                owner,
                owner_client,
                cause,
            } = &e.kind
            {
                let whose = owner_client.or_else(|| {
                    open.iter()
                        .find(|(_, o)| o.owner.as_deref() == Some(owner))
                        .map(|(c, _)| *c)
                });
                if let Some(o) = whose.and_then(|c| open.get_mut(&c)) {
                    if o.owner.as_deref() == Some(owner) {
                        o.gone = Some((e.at_us, *cause));
                    }
                }
                continue;
            }
            if let EventKind::EntryRemoved {
                by_client,
                owner,
                owner_client,
            } = &e.kind
            {
                let o = open.entry(*by_client).or_default();
                let mine =
                    owner_client.map_or(o.owner.as_deref() == Some(owner), |c| c == *by_client);
                if let (true, Some((answered_us, _))) = (o.releasing, o.answered) {
                    // Past the answer: only the released grant's own entry, placed late by the
                    // witness: its value is the grant's owner, or (a client program's owner is
                    // what the program said, not the entry's value) it is the client's own entry
                    // placed within the witness's bound after the answer, since the server ran
                    // the delete before it answered. Anything else is the client's next acquire
                    // at work (Redlock's clean-up of a failed acquire removes the new grant's
                    // entries).
                    let placed_late = mine && e.at_us <= answered_us.saturating_add(slack_us);
                    if o.owner.as_deref() == Some(owner) || placed_late {
                        o.own += 1;
                    }
                } else if o.releasing {
                    if mine {
                        o.own += 1;
                    } else {
                        o.foreign.extend(*owner_client);
                    }
                } else if slack_us > 0 && mine {
                    // Placed before the release began, by a witness whose placement may be off
                    // by `slack_us`: it counts if that close to `Exit` (judged there).
                    o.early.push(e.at_us);
                }
                continue;
            }
            let Some(c) = e.client() else { continue };
            let o = open.entry(c).or_default();
            let before_a_send = matches!(e.kind, EventKind::AcquireStart | EventKind::Point { .. });
            if !before_a_send {
                note(judge(c, o, need));
            }
            match &e.kind {
                EventKind::Acquired { owner, .. } => {
                    o.owner = Some(owner.clone());
                    o.early.clear();
                    o.gone = None;
                }
                EventKind::Exit => {
                    o.releasing = true;
                    let near = |t: &&u64| e.at_us.saturating_sub(**t) <= slack_us;
                    o.own = o.early.iter().filter(near).count() as u32;
                    o.early.clear();
                    o.foreign.clear();
                }
                EventKind::Crashed { .. } => o.releasing = false,
                EventKind::ReleaseFailed { .. } if o.releasing => {
                    releases += 1;
                    o.answered = Some((e.at_us, None));
                }
                EventKind::Released { deleted } if o.releasing => {
                    releases += 1;
                    o.answered = Some((e.at_us, Some(*deleted)));
                }
                _ => {}
            }
        }
        for (c, o) in open.iter_mut() {
            note(judge(*c, o, need));
        }
        let by_time = |l: &serde_json::Value| (l["at_us"].as_u64(), l["client"].as_u64());
        lies.sort_by_key(by_time);
        unknown.sort_by_key(by_time);
        let line = |l: &serde_json::Value, how: &str| {
            format!(
                "client-{} at {} ms: release {}, but the servers {}{how}",
                l["client"],
                fmt_ms(l["at_us"].as_u64().unwrap_or(0)),
                match l["said_released"].as_bool() {
                    Some(true) => "answered \"released\"",
                    Some(false) => "answered \"not released\"",
                    None => "failed",
                },
                l["servers_did"].as_str().unwrap_or("?")
            )
        };
        let mut timeline: Vec<String> = lies.iter().take(3).map(|l| line(l, "")).collect();
        timeline.extend(
            unknown
                .iter()
                .take(3)
                .map(|l| line(l, ": an unknown outcome (its replies were lost), not a lie")),
        );
        let unknown_note = if unknown.is_empty() {
            String::new()
        } else {
            format!(
                "; {} did not learn that their entry was removed (unknown outcome, not a lie)",
                unknown.len()
            )
        };
        let summary = match lies.first() {
            None => format!(
                "{releases} release(s), none answered \"released\" without removing its entry{unknown_note}"
            ),
            Some(_) => format!(
                "{} of {releases} release(s) answered \"released\" while the servers removed no entry of theirs{unknown_note}",
                lies.len()
            ),
        };
        CheckResult {
            verdict: Verdict::of(!lies.is_empty()),
            summary,
            evidence: serde_json::json!({
                "judged": true,
                "releases": releases,
                "mismatches": lies,
                "unknown": unknown,
            }),
            timeline,
        }
    }
}

/// Judges client `c`'s answered release, if one waits, against what the servers removed (`need`
/// servers for "released"): a lie, an unknown outcome, or nothing to say. Ends the release.
fn judge(c: u32, o: &mut Open, need: u32) -> Option<Finding> {
    let (at_us, deleted) = o.answered.take()?;
    o.releasing = false;
    let removed = o.own >= need;
    let lie = match deleted {
        Some(true) if !removed => true,
        Some(false) | None if removed => false,
        _ => return None,
    };
    let did = if o.own > 0 {
        format!("removed its entry on {} server(s)", o.own)
    } else if !o.foreign.is_empty() {
        format!("removed the entry of client {:?}, not its own", o.foreign)
    } else if let Some((gone_us, cause)) = o.gone {
        let how = match cause {
            GoneCause::Expired => "its lease or session expired and the servers removed it",
            _ => "the servers do not say how",
        };
        format!(
            "removed no entry: its entry had gone at {} ms ({how})",
            fmt_ms(gone_us)
        )
    } else {
        "removed no entry".to_string()
    };
    let evidence = serde_json::json!({
        "client": c,
        "at_us": at_us,
        "said_released": deleted,
        "own_removed": o.own,
        "foreign_removed": o.foreign,
        "entry_gone_us": o.gone.map(|(t, _)| t),
        "entry_gone_cause": o.gone.map(|(_, c)| c.name()),
        "servers_did": did,
    });
    Some(if lie {
        Finding::Lie(evidence)
    } else {
        Finding::Unknown(evidence)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};

    fn removed(at: u64, by: u32, owner_client: u32) -> crate::history::Event {
        ev(
            at,
            "redis-0",
            EventKind::EntryRemoved {
                by_client: by,
                owner: "o".into(),
                owner_client: Some(owner_client),
            },
        )
    }

    fn history(events: Vec<crate::history::Event>) -> History {
        let mut all = vec![ev(
            0,
            "run",
            EventKind::LockEntriesWatched {
                key: "k".into(),
                placed_within_us: 0,
            },
        )];
        all.extend(events);
        History { events: all }
    }

    /// The verdict on `events` watched by a witness that places removals within `bound_us`.
    fn watched_within(bound_us: u64, events: Vec<crate::history::Event>) -> Verdict {
        let mut h = history(events);
        h.events[0].kind = EventKind::LockEntriesWatched {
            key: "k".into(),
            placed_within_us: bound_us,
        };
        Release { masters: 1 }.check(&h).verdict
    }

    #[test]
    fn a_truthful_release_is_safe() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            removed(3, 0, 0),
            ev(4, "client-0", EventKind::Released { deleted: true }),
        ]);
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    }

    /// In real mode the witness places a removal within a stated bound (half a marker round
    /// trip): a removal of its own entry placed that close before `Exit` is the release's; one
    /// placed earlier than that, or any early one in simulation (exact placement), is not.
    #[test]
    fn a_removal_placed_early_counts_only_within_the_witness_bound() {
        let events = |early_by: u64| {
            vec![
                ev(1_000, "client-0", acquired(None)),
                removed(10_000 - early_by, 0, 0),
                ev(10_000, "client-0", EventKind::Exit),
                ev(10_400, "client-0", EventKind::Released { deleted: true }),
            ]
        };
        let with_bound = |bound: u64, early_by: u64| watched_within(bound, events(early_by));
        assert_eq!(with_bound(500, 200), Verdict::Safe);
        assert_eq!(with_bound(500, 501), Verdict::Violation);
        assert_eq!(with_bound(0, 200), Verdict::Violation);
    }

    /// A client program's owner is what the program said (`pid7#1`), not the entry's value the
    /// servers show: its own entry's removal, placed by the witness a little after the answer
    /// (the server ran the delete before it answered), is the release's within the bound; a
    /// removal placed later than that is not (seen on redis-py's lock under load: 3 of 14
    /// releases read as lies, each removal placed 0.03 to 0.16 ms after the answer).
    #[test]
    fn a_programs_removal_placed_late_counts_only_within_the_witness_bound() {
        let with_bound = |bound: u64, late_by: u64| {
            let events = vec![
                ev(
                    1_000,
                    "client-0",
                    EventKind::Acquired {
                        owner: "pid7#1".into(),
                        fencing_token: None,
                        acquired_at_ms: 0,
                        valid_until_ms: 0,
                    },
                ),
                ev(10_000, "client-0", EventKind::Exit),
                ev(10_400, "client-0", EventKind::Released { deleted: true }),
                removed(10_400 + late_by, 0, 0),
                ev(20_000, "client-0", EventKind::AcquireStart),
                ev(20_500, "client-0", acquired(None)),
            ];
            watched_within(bound, events)
        };
        assert_eq!(with_bound(500, 160), Verdict::Safe);
        assert_eq!(with_bound(500, 501), Verdict::Violation);
        assert_eq!(with_bound(0, 1), Verdict::Violation);
    }

    /// etcd3's and kazoo's release answer "released" for an entry their lease's or session's
    /// expiry removed before they released: the servers removed it (`EntryGone`), but no client's
    /// command did, so the answer is a lie, and the evidence says when the entry went.
    #[test]
    fn released_after_its_entry_expired_is_a_lie_that_names_the_expiry() {
        let gone = |owner_client| {
            ev(
                1_500,
                "zookeeper-0",
                EventKind::EntryGone {
                    owner: "o".into(),
                    owner_client,
                    cause: GoneCause::Expired,
                },
            )
        };
        let answered = |owner_client, deleted| {
            let h = history(vec![
                ev(1_000, "client-0", acquired(None)),
                gone(owner_client),
                ev(6_000, "client-0", EventKind::Exit),
                ev(6_400, "client-0", EventKind::Released { deleted }),
            ]);
            Release { masters: 1 }.check(&h)
        };
        for owner_client in [Some(0), None] {
            let r = answered(owner_client, true);
            assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
            let lie = &r.timeline[0];
            assert!(lie.contains("had gone at 1.500 ms"), "{lie}");
            assert!(lie.contains("expired"), "{lie}");
            assert_eq!(r.evidence["mismatches"][0]["entry_gone_cause"], "expired");
        }
        // Its answer "not released" is the truth: no finding.
        let r = answered(Some(0), false);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["unknown"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    fn released_with_nothing_removed_is_a_lie() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            ev(4, "client-0", EventKind::Released { deleted: true }),
        ]);
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert!(
            r.timeline[0].contains("removed no entry"),
            "{:?}",
            r.timeline
        );
    }

    #[test]
    fn released_by_removing_another_clients_entry_is_a_lie() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            removed(3, 0, 1),
            ev(4, "client-0", EventKind::Released { deleted: true }),
        ]);
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert!(r.timeline[0].contains("client [1]"), "{:?}", r.timeline);
    }

    /// A release whose compare-and-delete landed but whose reply was lost answers "not
    /// released" (or fails): it could not know, so that is an unknown outcome, shown in the
    /// evidence and the timeline, and not a violation.
    #[test]
    fn not_released_or_failed_while_its_entry_was_removed_is_unknown_not_a_lie() {
        for answer in [
            EventKind::Released { deleted: false },
            EventKind::ReleaseFailed {
                error: "timed out".into(),
            },
        ] {
            let h = history(vec![
                ev(1, "client-0", acquired(None)),
                ev(2, "client-0", EventKind::Exit),
                removed(3, 0, 0),
                ev(4, "client-0", answer),
            ]);
            let r = Release { masters: 1 }.check(&h);
            assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
            assert_eq!(r.evidence["unknown"].as_array().map(Vec::len), Some(1));
            assert!(
                r.timeline[0].contains("unknown outcome"),
                "{:?}",
                r.timeline
            );
            assert!(r.summary.contains("unknown outcome"), "{}", r.summary);
        }
    }

    #[test]
    fn a_quorum_release_needs_a_majority_of_removals() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            removed(3, 0, 0),
            removed(3, 0, 0),
            ev(4, "client-0", EventKind::Released { deleted: true }),
        ]);
        assert_eq!(Release { masters: 3 }.check(&h).verdict, Verdict::Safe);
        assert_eq!(Release { masters: 5 }.check(&h).verdict, Verdict::Violation);
    }

    #[test]
    fn unwatched_histories_are_not_judged() {
        let h = History {
            events: vec![ev(4, "client-0", EventKind::Released { deleted: true })],
        };
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::NotJudged);
        assert_eq!(r.evidence["judged"], false);
    }

    /// In real mode a removal may be placed just after the answer it belongs to (the witness ties
    /// the server's clock to the run's only to within tens of microseconds), even after the
    /// client's next `acquire-start`: it counts up to the client's next event that follows a
    /// reply, and not after it.
    #[test]
    fn a_removal_placed_just_after_its_answer_still_counts() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            ev(4, "client-0", EventKind::Released { deleted: true }),
            ev(5, "client-0", EventKind::AcquireStart),
            removed(6, 0, 0),
            ev(9, "client-0", acquired(None)),
        ]);
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        let late = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            ev(4, "client-0", EventKind::Released { deleted: true }),
            ev(9, "client-0", acquired(None)),
            removed(10, 0, 0),
        ]);
        let r = Release { masters: 1 }.check(&late);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    }

    /// Past the answer only the released grant's own entry counts: Redlock's next acquire,
    /// failing, cleans up the entries of its new grant (another token), which says nothing about
    /// the release before it.
    #[test]
    fn the_next_acquires_clean_up_is_not_the_release() {
        let h = history(vec![
            ev(1, "client-0", acquired(None)),
            ev(2, "client-0", EventKind::Exit),
            ev(4, "client-0", EventKind::Released { deleted: false }),
            ev(5, "client-0", EventKind::AcquireStart),
            ev(
                6,
                "redis-0",
                EventKind::EntryRemoved {
                    by_client: 0,
                    owner: "the next grant".into(),
                    owner_client: Some(0),
                },
            ),
            ev(
                9,
                "client-0",
                EventKind::AcquireFailed {
                    reason: "taken".into(),
                },
            ),
        ]);
        let r = Release { masters: 1 }.check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    }
}
