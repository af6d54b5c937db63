//! Foreign release: a client deleted a lock entry that another client owned at that moment. The
//! definition, what the check can never see, and why: `docs/checks.md`, "foreign_release".
//!
//! When the servers watched the lock entry (`LockEntriesWatched`: always in simulation), the
//! check judges from what the servers did: each `EntryRemoved` names the client whose command
//! removed an entry and the client that created it (else the client granted that owner token).
//! A removal of another client's entry is a foreign release, on any number of masters. An entry
//! that went without the servers saying whose command removed it (`EntryGone` with
//! `GoneCause::NotSaid`: real etcd's watch) could have been one: with such a removal and no
//! foreign one seen, the check does not judge. Without
//! the servers' word (real mode) the check falls back to inferring the owner from the order of
//! grants and releases, as below, which can blame the wrong pair when grants race.
//!
//! The Redlock article's picture: A's lease runs out while A is paused, B takes the lock, and A's release, a
//! plain `DEL`, removes B's entry; C then takes the lock while B still works. The checker flags a
//! release that reported deleting an entry when another client had been granted the lock after
//! this client's grant and before this client began its release: from that grant on, the only
//! entry there could be is someone else's (a grant needs the key absent, and nothing recreates
//! this client's entry). Releases that compare before deleting (a Lua compare-and-delete) never
//! report a deletion then. A release in several commands (the address-book article: GET, compare, DEL) begins, for
//! this purpose, at the last point the lock reached during it (`before_del`: the comparison is
//! done, the DEL goes next), so a grant that slipped in between its GET and its DEL counts. A grant
//! whose reply was still in flight when the release began is not counted: a violation is certain.

use super::{grants, CheckResult, Checker, Declaration, GrantIndex, Reads};
use crate::check::Verdict;
use crate::history::{fmt_ms, EventKind, GoneCause, History};
use std::collections::BTreeMap;

/// The foreign-release checker.
pub struct ForeignRelease {
    /// Independent masters the lock lives on. The rule needs one: with a quorum lock (Redlock) a
    /// grant takes a majority of the masters, and a release may still delete the holder's own
    /// entry on the others.
    pub masters: u32,
    /// Whether a release's answer says what it deleted (`check::Params`); without the servers'
    /// word the rule below reads "released" as "deleted", which only lockcheck's own locks mean.
    pub answers_report_deletion: bool,
}

impl ForeignRelease {
    /// Its entry in `check::CHECKERS`: releases against the grants (or the servers' removals); the masters.
    pub const DECLARATION: Declaration = Declaration {
        name: "foreign_release",
        label: "foreign release",
        reads: Reads::Grants,
        runs_only: None,
        build: |p| {
            Some(Box::new(ForeignRelease {
                answers_report_deletion: p.releases_report_deletion,
                ..ForeignRelease::for_masters(p.masters)
            }))
        },
    };

    /// The checker for a deployment of `masters` independent masters: the scenario's count,
    /// so that a quorum lock's releases are judged against the masters it really spans.
    pub fn for_masters(masters: u32) -> ForeignRelease {
        ForeignRelease {
            masters,
            answers_report_deletion: true,
        }
    }
}

impl Checker for ForeignRelease {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let watched = history
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::LockEntriesWatched { .. }));
        if watched {
            let found = observed(history);
            // An observer that saw entries go without learning whose command removed them
            // (`GoneCause::NotSaid`) cannot vouch that none of those was a foreign release.
            let unsaid = history
                .events
                .iter()
                .filter(|e| {
                    matches!(
                        e.kind,
                        EventKind::EntryGone {
                            cause: GoneCause::NotSaid,
                            ..
                        }
                    )
                })
                .count();
            if found.is_empty() && unsaid > 0 {
                return CheckResult {
                    verdict: Verdict::NotJudged,
                    summary: format!(
                        "{unsaid} lock entr{} went without the servers saying whose command \
                         removed {} (an expiry, or another client's delete); no removal they \
                         did attribute was foreign",
                        if unsaid == 1 { "y" } else { "ies" },
                        if unsaid == 1 { "it" } else { "them" },
                    ),
                    evidence: serde_json::json!({
                        "judged": false,
                        "foreign_releases": 0,
                        "removals_not_attributed": unsaid,
                    }),
                    timeline: Vec::new(),
                };
            }
            return verdict(found, true);
        }
        if !self.answers_report_deletion {
            return CheckResult {
                verdict: Verdict::NotJudged,
                summary: "a client program's \"released\" says what the program said, not what \
                          it deleted, and the servers' removals were not watched"
                    .into(),
                evidence: serde_json::json!({ "judged": false, "foreign_releases": 0 }),
                timeline: Vec::new(),
            };
        }
        if self.masters > 1 {
            return CheckResult {
                verdict: Verdict::NotJudged,
                summary: format!(
                    "on {} independent masters a grant does not take every master's entry",
                    self.masters
                ),
                evidence: serde_json::json!({ "judged": false, "foreign_releases": 0 }),
                timeline: Vec::new(),
            };
        }
        let index = GrantIndex::new(gs);
        // Each client's named points, in time order, to find a release's last one by bisection.
        let mut points: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for e in &history.events {
            if let (Some(c), EventKind::Point { .. }) = (e.client(), &e.kind) {
                points.entry(c).or_default().push(e.at_us);
            }
        }
        for times in points.values_mut() {
            times.sort_unstable();
        }
        let mut found = Vec::new();
        for g in gs {
            let (Some(true), Some(exit), Some(end)) = (g.released_deleted, g.exit_us, g.end_us)
            else {
                continue;
            };
            // The release's deleting command went out after its last point, if it had any.
            let start = points
                .get(&g.client)
                .and_then(|ts| {
                    let k = ts.partition_point(|&t| t <= end);
                    k.checked_sub(1).map(|k| ts[k]).filter(|&t| t >= exit)
                })
                .unwrap_or(exit);
            if let Some(victim) = index.other_granted_between(g.client, g.acquired_us, start) {
                found.push(serde_json::json!({
                    "client": g.client,
                    "granted_us": g.acquired_us,
                    "release_started_us": exit,
                    "deleting_command_sent_us": start,
                    "released_us": end,
                    "owner": victim.client,
                    "owner_granted_us": victim.acquired_us,
                }));
            }
        }
        verdict(found, false)
    }
}

/// The foreign releases the servers saw: removals of an entry another client created (or, when
/// its creation was not seen, was granted).
fn observed(history: &History) -> Vec<serde_json::Value> {
    // A removal by the entry's own creator is no foreign release; in a long run every removal is
    // one, and the look-up tables below (a map of every owner token) are built only when needed.
    let suspects: Vec<&crate::history::Event> = history
        .events
        .iter()
        .filter(|e| {
            matches!(&e.kind, EventKind::EntryRemoved { by_client, owner_client, .. }
                if *owner_client != Some(*by_client))
        })
        .collect();
    if suspects.is_empty() {
        return Vec::new();
    }
    // Owner token -> (client, grant time) of each grant, and each client's points in time order.
    let mut granted: BTreeMap<&str, Vec<(u32, u64)>> = BTreeMap::new();
    let mut steps: BTreeMap<u32, Vec<(u64, &EventKind)>> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        if let EventKind::Acquired { owner, .. } = &e.kind {
            granted.entry(owner).or_default().push((c, e.at_us));
        }
        steps.entry(c).or_default().push((e.at_us, &e.kind));
    }
    let mut found = Vec::new();
    for e in suspects {
        let EventKind::EntryRemoved {
            by_client,
            owner,
            owner_client,
        } = &e.kind
        else {
            continue;
        };
        let grants_of_token = granted
            .get(owner.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let Some(owner_client) = owner_client.or_else(|| grants_of_token.first().map(|&(c, _)| c))
        else {
            continue;
        };
        if owner_client == *by_client {
            continue;
        }
        // The owner's grant of that token: its latest at or before the removal, else its first.
        let mine: Vec<u64> = grants_of_token
            .iter()
            .filter(|&&(c, _)| c == owner_client)
            .map(|&(_, t)| t)
            .collect();
        let owner_granted = mine
            .iter()
            .rev()
            .find(|&&t| t <= e.at_us)
            .or(mine.first())
            .copied();
        let own = steps.get(by_client).map(Vec::as_slice).unwrap_or(&[]);
        let release_started = own
            .iter()
            .rev()
            .find(|(t, k)| *t <= e.at_us && matches!(k, EventKind::Exit))
            .map(|&(t, _)| t)
            .unwrap_or(e.at_us);
        let granted_us = own
            .iter()
            .rev()
            .find(|(t, k)| *t <= e.at_us && matches!(k, EventKind::Acquired { .. }))
            .map(|&(t, _)| t);
        // Whether a release removed it: the client's last step before the removal is leaving its
        // section or a release's answer (nothing of its own goes out between an answer and its
        // next acquire-start). Otherwise the command was an acquire's or a renewal's: a `SET`
        // over a live entry, or an expiry moved into the past.
        let by_release = own
            .iter()
            .rev()
            .find(|(t, k)| {
                *t <= e.at_us
                    && matches!(
                        k,
                        EventKind::Exit
                            | EventKind::Released { .. }
                            | EventKind::ReleaseFailed { .. }
                            | EventKind::InnerReleased { .. }
                            | EventKind::AcquireStart
                            | EventKind::Acquired { .. }
                            | EventKind::Renewed { .. }
                            | EventKind::RenewalFailed { .. }
                    )
            })
            .is_some_and(|(_, k)| {
                matches!(
                    k,
                    EventKind::Exit
                        | EventKind::Released { .. }
                        | EventKind::ReleaseFailed { .. }
                        | EventKind::InnerReleased { .. }
                )
            });
        let del_sent = own
            .iter()
            .rev()
            .find(|(t, k)| *t <= e.at_us && matches!(k, EventKind::Point { .. }))
            .map(|&(t, _)| t)
            .filter(|&t| t >= release_started)
            .unwrap_or(release_started);
        let released = own
            .iter()
            .find(|(t, k)| {
                *t >= e.at_us
                    && matches!(
                        k,
                        EventKind::Released { .. }
                            | EventKind::ReleaseFailed { .. }
                            | EventKind::InnerReleased { .. }
                    )
            })
            .map(|&(t, _)| t)
            .unwrap_or(e.at_us);
        found.push(serde_json::json!({
            "client": by_client,
            "server": e.node,
            "granted_us": granted_us,
            "removed_us": e.at_us,
            "release_started_us": release_started,
            "deleting_command_sent_us": del_sent,
            "released_us": released,
            "by_release": by_release,
            "owner": owner_client,
            "owner_token": owner,
            "owner_granted_us": owner_granted,
        }));
    }
    found
}

/// The check's result for the foreign releases `found`; `observed` says whether the servers saw
/// them or they were inferred from the clients' events.
fn verdict(found: Vec<serde_json::Value>, observed: bool) -> CheckResult {
    let timeline: Vec<String> = found
            .iter()
            .take(3)
            .map(|f| {
                if f["by_release"] == false {
                    return format!(
                        "client-{} removed the entry of client-{} (granted {} ms) at {} ms, outside a release: an overwriting SET or an expiry moved into the past",
                        f["client"],
                        f["owner"],
                        fmt_ms(f["owner_granted_us"].as_u64().unwrap_or(0)),
                        fmt_ms(f["removed_us"].as_u64().unwrap_or(0)),
                    );
                }
                format!(
                    "client-{} (granted {} ms) released at {} ms and deleted the entry of client-{} (granted {} ms)",
                    f["client"],
                    fmt_ms(f["granted_us"].as_u64().unwrap_or(0)),
                    fmt_ms(f["released_us"].as_u64().unwrap_or(0)),
                    f["owner"],
                    fmt_ms(f["owner_granted_us"].as_u64().unwrap_or(0)),
                )
            })
            .collect();
    let violation = !found.is_empty();
    CheckResult {
        verdict: if violation {
            Verdict::Violation
        } else {
            Verdict::Safe
        },
        summary: if violation {
            let outside = found.iter().filter(|f| f["by_release"] == false).count();
            if outside == 0 {
                format!(
                    "{} release(s) deleted another client's lock entry",
                    found.len()
                )
            } else {
                format!(
                    "{} removal(s) of another client's lock entry, {outside} of them outside a release (an overwriting SET or an expiry moved into the past)",
                    found.len()
                )
            }
        } else {
            "no release deleted another client's entry".to_string()
        },
        evidence: serde_json::json!({
            "judged": true,
            "observed_by_servers": observed,
            "foreign_releases": found.len(),
            "releases": found,
        }),
        timeline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};
    use crate::history::{Event, EventKind};

    fn seed_002(a_deleted: bool) -> History {
        History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(1, "client-0", EventKind::Enter),
                ev(1_000_000, "client-1", acquired(None)),
                ev(1_000_001, "client-1", EventKind::Enter),
                ev(1_500_000, "client-0", EventKind::Exit),
                ev(
                    1_500_002,
                    "client-0",
                    EventKind::Released { deleted: a_deleted },
                ),
                ev(1_500_010, "client-2", acquired(None)),
            ],
        }
    }

    #[test]
    fn a_plain_del_after_someone_elses_grant_is_foreign() {
        let r = ForeignRelease::for_masters(1).check(&seed_002(true));
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["releases"][0]["client"], 0);
        assert_eq!(r.evidence["releases"][0]["owner"], 1);
    }

    #[test]
    fn a_compare_and_delete_that_deleted_nothing_is_safe() {
        let r = ForeignRelease::for_masters(1).check(&seed_002(false));
        assert_eq!(r.verdict, Verdict::Safe);
    }

    #[test]
    fn a_grant_between_get_and_del_counts() {
        // The address-book article's release: GET (ours), pause, another client is granted, DEL.
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(10, "client-0", EventKind::Exit),
                ev(
                    12,
                    "client-0",
                    EventKind::Point {
                        name: "before_del".into(),
                    },
                ),
                ev(1_000_000, "client-1", acquired(None)),
                ev(
                    1_500_000,
                    "client-0",
                    EventKind::Point {
                        name: "before_del".into(),
                    },
                ),
                ev(1_500_002, "client-0", EventKind::Released { deleted: true }),
            ],
        };
        let r = ForeignRelease::for_masters(1).check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert_eq!(r.evidence["releases"][0]["owner"], 1);
    }

    #[test]
    fn quorum_locks_are_not_judged() {
        let r = ForeignRelease::for_masters(5).check(&seed_002(true));
        assert_eq!(r.verdict, Verdict::NotJudged);
        assert_eq!(r.evidence["judged"], false);
    }

    #[test]
    fn deleting_your_own_entry_is_safe() {
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(10, "client-0", EventKind::Exit),
                // A grant that arrives while the release reply is in flight is not counted.
                ev(11, "client-1", acquired(None)),
                ev(12, "client-0", EventKind::Released { deleted: true }),
                ev(20, "client-1", EventKind::Exit),
                ev(22, "client-1", EventKind::Released { deleted: true }),
            ],
        };
        let r = ForeignRelease::for_masters(1).check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    }

    fn removed(at: u64, by_client: u32, owner: &str, owner_client: Option<u32>) -> Event {
        ev(
            at,
            "redis-0",
            EventKind::EntryRemoved {
                by_client,
                owner: owner.into(),
                owner_client,
            },
        )
    }

    /// The servers start watching the lock entry of `k`, at 0.
    fn watching() -> Event {
        ev(
            0,
            "servers",
            EventKind::LockEntriesWatched {
                key: "k".into(),
                placed_within_us: 0,
            },
        )
    }

    fn granted(at: u64, client: &str, owner: &str) -> Event {
        ev(
            at,
            client,
            EventKind::Acquired {
                owner: owner.into(),
                fencing_token: None,
                acquired_at_ms: 0,
                valid_until_ms: 0,
            },
        )
    }

    #[test]
    fn the_server_names_whose_entry_was_removed() {
        // Client 0's release deleted nothing of its own (its reply says deleted), but the server
        // saw it remove client 2's entry: the order of grants would have blamed client 1.
        let h = History {
            events: vec![
                watching(),
                granted(0, "client-0", "a"),
                granted(1_000_000, "client-1", "b"),
                granted(1_200_000, "client-2", "c"),
                ev(1_500_000, "client-0", EventKind::Exit),
                removed(1_500_001, 0, "c", Some(2)),
                ev(1_500_002, "client-0", EventKind::Released { deleted: true }),
            ],
        };
        let r = ForeignRelease::for_masters(3).check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert_eq!(r.evidence["observed_by_servers"], true);
        assert_eq!(r.evidence["releases"][0]["client"], 0);
        assert_eq!(r.evidence["releases"][0]["owner"], 2);
        assert_eq!(r.evidence["releases"][0]["owner_granted_us"], 1_200_000);
    }

    /// An expiry the servers name is nobody's release; a removal an observer saw without
    /// learning whose command it was (etcd's watch) could have been a foreign one: while one
    /// is in the history and no foreign release was seen, the check does not judge.
    #[test]
    fn removals_the_servers_did_not_attribute_leave_it_unjudged() {
        let gone = |cause| {
            ev(
                500,
                "server-0",
                EventKind::EntryGone {
                    owner: "a".into(),
                    owner_client: Some(0),
                    cause,
                },
            )
        };
        let h = |cause| History {
            events: vec![
                watching(),
                granted(0, "client-0", "a"),
                gone(cause),
                granted(1_000, "client-1", "b"),
                removed(2_000, 1, "b", Some(1)),
            ],
        };
        let r = ForeignRelease::for_masters(1).check(&h(GoneCause::Expired));
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        let r = ForeignRelease::for_masters(1).check(&h(GoneCause::NotSaid));
        assert_eq!(r.verdict, Verdict::NotJudged, "{}", r.summary);
        assert_eq!(r.evidence["removals_not_attributed"], 1);
        // A foreign removal the servers did see is a violation all the same.
        let mut foreign = h(GoneCause::NotSaid);
        foreign.events.push(removed(2_500, 0, "c", Some(2)));
        let r = ForeignRelease::for_masters(1).check(&foreign);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    }

    #[test]
    fn removing_your_own_entry_seen_by_the_server_is_safe() {
        let h = History {
            events: vec![
                watching(),
                granted(0, "client-0", "a"),
                // Creation not seen (for example it came by replication): the grant names it.
                removed(10, 0, "a", None),
            ],
        };
        let r = ForeignRelease::for_masters(1).check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["foreign_releases"], 0);
    }

    /// A removal outside any release (a client's acquire overwrote a live entry) is still a
    /// foreign removal, and is worded as what it was, not as a release.
    #[test]
    fn an_overwrite_is_worded_as_an_overwrite() {
        let h = History {
            events: vec![
                watching(),
                granted(0, "client-0", "a"),
                ev(1_000_000, "client-1", EventKind::AcquireStart),
                removed(1_000_001, 1, "a", Some(0)),
                granted(1_000_002, "client-1", "b"),
            ],
        };
        let r = ForeignRelease::for_masters(1).check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert!(
            r.summary.contains("1 of them outside a release"),
            "{}",
            r.summary
        );
        assert!(
            r.timeline[0].contains("outside a release: an overwriting SET"),
            "{:?}",
            r.timeline
        );
        assert_eq!(r.evidence["releases"][0]["by_release"], false);
    }
}
