//! Foreign release: a client deleted a lock entry that another client owned at that moment.
//!
//! Seed 002's picture: A's lease runs out while A is paused, B takes the lock, and A's release, a
//! plain `DEL`, removes B's entry; C then takes the lock while B still works. The checker flags a
//! release that reported deleting an entry when another client had been granted the lock after
//! this client's grant and before this client began its release: from that grant on, the only
//! entry there could be is someone else's (a grant needs the key absent, and nothing recreates
//! this client's entry). Releases that compare before deleting (a Lua compare-and-delete) never
//! report a deletion then. A release in several commands (seed 004: GET, compare, DEL) begins, for
//! this purpose, at the last point the lock reached during it (`before_del`: the comparison is
//! done, the DEL goes next), so a grant that slipped in between its GET and its DEL counts. A grant
//! whose reply was still in flight when the release began is not counted: a violation is certain.

use super::{granted_between, grants, CheckResult, Checker};
use crate::history::{fmt_ms, EventKind, History};
use crate::scenario::Verdict;

/// The foreign-release checker.
pub struct ForeignRelease {
    /// Independent masters the lock lives on. The rule needs one: with a quorum lock (Redlock) a
    /// grant takes a majority of the masters, and a release may still delete the holder's own
    /// entry on the others.
    pub masters: u32,
}

impl ForeignRelease {
    pub fn for_masters(masters: u32) -> ForeignRelease {
        ForeignRelease { masters }
    }
}

impl Checker for ForeignRelease {
    fn name(&self) -> &'static str {
        "foreign_release"
    }

    fn check(&self, history: &History) -> CheckResult {
        if self.masters > 1 {
            return CheckResult {
                verdict: Verdict::Safe,
                summary: format!(
                    "not judged: on {} independent masters a grant does not take every master's entry",
                    self.masters
                ),
                evidence: serde_json::json!({ "judged": false, "foreign_releases": 0 }),
                timeline: Vec::new(),
            };
        }
        let gs = grants(history);
        let mut found = Vec::new();
        for g in &gs {
            let (Some(true), Some(exit), Some(end)) = (g.released_deleted, g.exit_us, g.end_us)
            else {
                continue;
            };
            // The release's deleting command went out after its last point, if it had any.
            let start = history
                .events
                .iter()
                .filter(|e| {
                    e.client() == Some(g.client)
                        && e.at_us >= exit
                        && e.at_us <= end
                        && matches!(e.kind, EventKind::Point { .. })
                })
                .map(|e| e.at_us)
                .max()
                .unwrap_or(exit);
            if let Some(victim) = granted_between(&gs, g.client, g.acquired_us, start) {
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
        let timeline: Vec<String> = found
            .iter()
            .take(3)
            .map(|f| {
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
                format!(
                    "{} release(s) deleted another client's lock entry",
                    found.len()
                )
            } else {
                "no release deleted another client's entry".to_string()
            },
            evidence: serde_json::json!({
                "judged": true,
                "foreign_releases": found.len(),
                "releases": found,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};
    use crate::history::EventKind;

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
        // Seed 004's release: GET (ours), pause, another client is granted, DEL.
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
        assert_eq!(r.verdict, Verdict::Safe);
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
}
