//! Reentrancy: a nested acquire by the holder succeeds, and the lock is freed only when the
//! outermost release runs.
//! What it reads, what counts as a violation, what it can never see: `docs/checks.md`, "reentrancy".
//!
//! The workload's `nested = n` makes every holder acquire the lock n more times inside its
//! critical section and release those inner acquisitions before it finishes its work. A violation
//! is one of:
//! - a nested acquire failed while the client still held the lock (no other client had been
//!   granted it since: a non-reentrant lock deadlocks on itself here);
//! - an inner release reported deleting the lock entry;
//! - another client was granted the lock after one of the holder's inner releases and before its
//!   outermost release, while the holder still held it: the inner release freed it.
//!
//! A holder that had already lost the lock (its lease ran out while it was paused and another
//! client was granted it) is the lease's failure, not reentrancy's: mutual exclusion reports it.

use super::{grants, CheckResult, Checker, Declaration, GrantIndex, Reads};
use crate::check::Verdict;
use crate::history::{fmt_ms, EventKind, History};

/// The reentrancy checker.
pub struct Reentrancy;

impl Reentrancy {
    /// Its entry in `check::CHECKERS`: nested acquisitions against the grants; no parameter.
    pub const DECLARATION: Declaration = Declaration {
        name: "reentrancy",
        label: "reentrancy",
        reads: Reads::Grants,
        runs_only: None,
        build: |_| Some(Box::new(Reentrancy)),
    };
}

impl Checker for Reentrancy {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let index = GrantIndex::new(gs);
        let end = history.end_us();
        let mut nested_ok = 0u64;
        let mut inner_releases = 0u64;
        let mut problems: Vec<serde_json::Value> = Vec::new();
        for e in &history.events {
            // Only nested acquires and inner releases are judged here: the rest of a long
            // history is skipped before the (logarithmic) look-up of its grant.
            if !matches!(
                e.kind,
                EventKind::Reentered { .. }
                    | EventKind::ReentryFailed { .. }
                    | EventKind::InnerReleased { .. }
            ) {
                continue;
            }
            let Some(c) = e.client() else { continue };
            // The grant this event belongs to: the client's latest at or before it.
            let Some(g) = index.of_client_at(c, e.at_us) else {
                continue;
            };
            let lost_before = |t: u64| index.other_granted_between(c, g.acquired_us, t).is_some();
            match &e.kind {
                EventKind::Reentered { .. } => nested_ok += 1,
                EventKind::ReentryFailed { depth, reason } if !lost_before(e.at_us) => {
                    problems.push(serde_json::json!({
                        "client": c, "at_us": e.at_us, "what": "nested acquire failed",
                        "depth": depth, "reason": reason,
                    }));
                }
                EventKind::InnerReleased { depth, deleted } => {
                    inner_releases += 1;
                    if lost_before(e.at_us) {
                        continue;
                    }
                    if *deleted {
                        problems.push(serde_json::json!({
                            "client": c, "at_us": e.at_us, "what": "inner release deleted the lock entry",
                            "depth": depth,
                        }));
                    }
                    // Until the outermost release starts (the holder leaves its section).
                    let outer = g.exit_us.or(g.end_us).unwrap_or(end);
                    if let Some(other) = index.other_granted_between(c, e.at_us, outer) {
                        problems.push(serde_json::json!({
                            "client": c, "at_us": e.at_us,
                            "what": "lock granted to another client after an inner release, before the outermost release",
                            "depth": depth, "other_client": other.client, "other_granted_us": other.acquired_us,
                        }));
                    }
                }
                _ => {}
            }
        }
        problems.sort_by_key(|p| p["at_us"].as_u64());
        problems.dedup();
        let violation = !problems.is_empty();
        let timeline = problems
            .iter()
            .take(3)
            .map(|p| {
                format!(
                    "client-{} at {} ms: {}",
                    p["client"],
                    fmt_ms(p["at_us"].as_u64().unwrap_or(0)),
                    p["what"].as_str().unwrap_or("?")
                )
            })
            .collect();
        CheckResult {
            verdict: if violation {
                Verdict::Violation
            } else {
                Verdict::Safe
            },
            summary: if violation {
                format!("{} reentrancy failure(s)", problems.len())
            } else if nested_ok == 0 {
                "no nested acquires in this run".to_string()
            } else {
                format!(
                    "{nested_ok} nested acquire(s) succeeded; {inner_releases} inner release(s) kept the lock held"
                )
            },
            evidence: serde_json::json!({
                "nested_acquires": nested_ok,
                "inner_releases": inner_releases,
                "failures": problems,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};

    fn run(inner_deleted: bool, other_grant_at: Option<u64>) -> History {
        let mut events = vec![
            ev(0, "client-0", acquired(None)),
            ev(1, "client-0", EventKind::Enter),
            ev(2, "client-0", EventKind::Reentered { depth: 2 }),
            ev(
                3,
                "client-0",
                EventKind::InnerReleased {
                    depth: 2,
                    deleted: inner_deleted,
                },
            ),
            ev(100, "client-0", EventKind::Exit),
            ev(102, "client-0", EventKind::Released { deleted: true }),
        ];
        if let Some(t) = other_grant_at {
            events.push(ev(t, "client-1", acquired(None)));
            events.sort_by_key(|e| e.at_us);
        }
        History { events }
    }

    #[test]
    fn a_correct_reentrant_lock_is_safe() {
        let r = Reentrancy.check(&run(false, Some(110)));
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["nested_acquires"], 1);
    }

    #[test]
    fn an_inner_release_that_frees_the_lock_is_caught() {
        let r = Reentrancy.check(&run(true, Some(50)));
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["failures"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_nested_acquire_that_deadlocks_is_caught() {
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(
                    5_000_000,
                    "client-0",
                    EventKind::ReentryFailed {
                        depth: 2,
                        reason: "wait bound reached".into(),
                    },
                ),
            ],
        };
        assert_eq!(Reentrancy.check(&h).verdict, Verdict::Violation);
    }

    #[test]
    fn a_holder_that_already_lost_the_lock_is_not_blamed() {
        // Lease lost while paused: client 1 was granted at 50, before the nested acquire failed.
        let h = History {
            events: vec![
                ev(0, "client-0", acquired(None)),
                ev(50, "client-1", acquired(None)),
                ev(
                    60,
                    "client-0",
                    EventKind::ReentryFailed {
                        depth: 2,
                        reason: "wait bound reached".into(),
                    },
                ),
            ],
        };
        assert_eq!(Reentrancy.check(&h).verdict, Verdict::Safe);
    }
}
