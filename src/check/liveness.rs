//! Liveness: the lock must not stay unavailable for long while no live client holds it.
//!
//! Unavailable means someone asked and could not get it: a wait counts only while the waiting
//! client is live and not paused (a paused process asks nothing, so a free lock nobody can ask
//! for is not a liveness failure), and the run's end (`RunEnd`) is an event, so a client still
//! waiting then has waited until then (it was never served).
//!
//! A lease exists so that a holder that dies does not take the lock with it. When it fails (the
//! naive lock of the address-book article dies between `SETNX` and `EXPIRE`, leaving a key that never expires)
//! every other client waits forever. The checker looks for stretches of true time in which some
//! live client was trying to acquire, no live client was a holder (a crashed holder is not live; a
//! paused one is), and no grant ended the wait, and reports a violation when one is longer than
//! the bound: `[checks] liveness_bound_ms`, by default three leases, far more than a correct lease
//! lock ever makes a waiter wait after its holder died. A lock whose release never deletes (every
//! holding lasts a full lease) makes each waiter wait most of a lease after every release: a
//! bound under one lease catches it, and so does the throughput check.

use super::{grants, CheckResult, Checker, Declaration, Reads};
use crate::check::Verdict;
use crate::history::{fmt_ms, EventKind, History, PauseNote};
use std::collections::BTreeMap;

/// The liveness checker with its bound (`[checks] liveness_bound_ms`, three leases by default).
pub struct Liveness {
    /// A wait longer than this (µs) with no live holder is a liveness violation.
    pub bound_us: u64,
}

/// A stretch during which the lock was unavailable with no live holder.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stretch {
    /// When the wait began (µs, true time).
    pub from_us: u64,
    /// When it ended (µs, true time).
    pub to_us: u64,
    /// Clients that were waiting during it.
    pub waiting: Vec<u32>,
    /// Whether a grant ended it (false: the history ended, or every waiter stopped trying).
    pub ended_by_grant: bool,
}

/// Every stretch with waiters and no live holder, in time order.
pub fn stretches(history: &History, gs: &[crate::check::grants::Grant]) -> Vec<Stretch> {
    let end = history.end_us();
    // Holding intervals (a crashed holder stops holding when it dies).
    let holds: Vec<(u64, u64)> = gs
        .iter()
        .map(|g| (g.acquired_us, g.end_us.unwrap_or(end)))
        .collect();
    // Waiting intervals, per client.
    // A hint, not a bound: a wait takes an acquire-start and its end.
    let mut waits: Vec<(u64, u64, u32)> = Vec::with_capacity(history.events.len() / 4);
    let mut started: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match &e.kind {
            EventKind::AcquireStart => {
                started.insert(c, e.at_us);
            }
            EventKind::Acquired { .. }
            | EventKind::AcquireFailed { .. }
            | EventKind::Crashed { .. } => {
                if let Some(s) = started.remove(&c) {
                    waits.push((s, e.at_us, c));
                }
            }
            _ => {}
        }
    }
    for (c, s) in started {
        waits.push((s, end, c));
    }
    // A paused client is not asking: a GC-paused process sends nothing and hears nothing, so a
    // free lock nobody can ask for is not unavailable. Its waits lose their paused stretches.
    let mut waits = asking(waits, &pauses(history, end));
    // The periods with no holder: the complement of the union of holding intervals.
    let mut hs = holds.clone();
    hs.sort();
    let mut free: Vec<(u64, u64)> = Vec::new();
    let mut t = 0u64;
    for (a, b) in hs {
        if a > t {
            free.push((t, a));
        }
        t = t.max(b);
    }
    if t < end {
        free.push((t, end));
    }
    let mut grant_times: Vec<u64> = gs.iter().map(|g| g.acquired_us).collect();
    grant_times.sort_unstable();
    // A sweep over the free periods (disjoint, in time order) and the waits by start time. A
    // client waits for one acquire at a time, so the waits open during a period are at most one
    // per client plus those that start inside it: the check stays O(n log n), not O(periods x waits).
    waits.sort_unstable();
    let mut next_wait = 0;
    let mut open: Vec<(u64, u64, u32)> = Vec::new();
    let mut out = Vec::new();
    for (p0, p1) in free {
        while next_wait < waits.len() && waits[next_wait].0 < p1 {
            open.push(waits[next_wait]);
            next_wait += 1;
        }
        // A wait that ended by this period's start cannot overlap it or any later one.
        open.retain(|&(_, e, _)| e > p0);
        let inside: Vec<(u64, u64, u32)> = open
            .iter()
            .map(|&(s, e, c)| (s.max(p0), e.min(p1), c))
            .collect();
        if inside.is_empty() {
            continue;
        }
        let from = inside.iter().map(|w| w.0).min().expect("non-empty");
        let ended_by_grant = grant_times.binary_search(&p1).is_ok();
        let to = if ended_by_grant {
            p1
        } else {
            inside.iter().map(|w| w.1).max().expect("non-empty")
        };
        let mut waiting: Vec<u32> = inside.iter().map(|w| w.2).collect();
        waiting.sort();
        waiting.dedup();
        out.push(Stretch {
            from_us: from,
            to_us: to,
            waiting,
            ended_by_grant,
        });
    }
    out
}

/// Clients still inside `acquire` when the run ended (cut off after the grace period).
fn never_served(history: &History) -> Vec<u32> {
    let mut waiting: BTreeMap<u32, bool> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match e.kind {
            EventKind::AcquireStart => {
                waiting.insert(c, true);
            }
            EventKind::Acquired { .. }
            | EventKind::AcquireFailed { .. }
            | EventKind::Crashed { .. } => {
                waiting.insert(c, false);
            }
            _ => {}
        }
    }
    waiting
        .into_iter()
        .filter(|&(_, w)| w)
        .map(|(c, _)| c)
        .collect()
}

/// Each client's paused stretches, from the nemesis's notes (a pause still open at the end, or
/// ended by a crash, lasts until then).
fn pauses(history: &History, end: u64) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let mut out: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut since: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &history.events {
        match &e.kind {
            EventKind::Fault { what } => match PauseNote::parse(what) {
                Some(PauseNote::Paused(c)) => {
                    since.entry(c).or_insert(e.at_us);
                }
                Some(PauseNote::Resumed(c)) => {
                    if let Some(s) = since.remove(&c) {
                        out.entry(c).or_default().push((s, e.at_us));
                    }
                }
                None => {}
            },
            EventKind::Crashed { .. } => {
                if let Some(c) = e.client() {
                    if let Some(s) = since.remove(&c) {
                        out.entry(c).or_default().push((s, e.at_us));
                    }
                }
            }
            _ => {}
        }
    }
    for (c, s) in since {
        out.entry(c).or_default().push((s, end));
    }
    out
}

/// The parts of each wait `(from, to, client)` during which the client was not paused.
fn asking(
    waits: Vec<(u64, u64, u32)>,
    pauses: &BTreeMap<u32, Vec<(u64, u64)>>,
) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::with_capacity(waits.len());
    for (s, e, c) in waits {
        let mut from = s;
        for &(p0, p1) in pauses.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
            if p1 <= from || p0 >= e {
                continue;
            }
            if p0 > from {
                out.push((from, p0, c));
            }
            from = from.max(p1);
        }
        if from < e {
            out.push((from, e, c));
        }
    }
    out
}

impl Liveness {
    /// Its entry in `check::CHECKERS`: waits against the grants; the liveness bound.
    pub const DECLARATION: Declaration = Declaration {
        name: "liveness",
        label: "liveness",
        reads: Reads::Grants,
        runs_only: None,
        build: |p| {
            Some(Box::new(Liveness {
                bound_us: p.liveness_bound_ms.saturating_mul(1000),
            }))
        },
    };
}

impl Checker for Liveness {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let all = stretches(history, gs);
        let longest = all
            .iter()
            .max_by_key(|s| (s.to_us - s.from_us, u64::MAX - s.from_us));
        let crashes: Vec<serde_json::Value> = history
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Crashed { point } => Some(serde_json::json!({
                    "client": e.client(), "at_us": e.at_us, "point": point,
                })),
                _ => None,
            })
            .collect();
        let longest_us = longest.map(|s| s.to_us - s.from_us).unwrap_or(0);
        let never_served = never_served(history);
        let violation = longest_us > self.bound_us;
        let mut timeline = Vec::new();
        let summary = match longest {
            Some(s) if violation => {
                for c in &crashes {
                    timeline.push(format!(
                        "client-{} crashed at {} at {} ms",
                        c["client"],
                        c["point"].as_str().unwrap_or("?"),
                        fmt_ms(c["at_us"].as_u64().unwrap_or(0))
                    ));
                }
                timeline.push(format!(
                    "from {} ms to {} ms no live client held the lock, and client(s) {:?} could not get it",
                    fmt_ms(s.from_us),
                    fmt_ms(s.to_us),
                    s.waiting
                ));
                format!(
                    "the lock was unavailable for {} ms with no live holder (bound {} ms){}",
                    fmt_ms(longest_us),
                    fmt_ms(self.bound_us),
                    if s.ended_by_grant {
                        String::new()
                    } else if never_served.is_empty() {
                        ", and never became free again".to_string()
                    } else {
                        format!(
                            ", and never became free again: client(s) {never_served:?} still waiting when the run ended, never served"
                        )
                    }
                )
            }
            _ => format!(
                "longest wait with no live holder {} ms (bound {} ms)",
                fmt_ms(longest_us),
                fmt_ms(self.bound_us)
            ),
        };
        CheckResult {
            verdict: Verdict::of(violation),
            summary,
            evidence: serde_json::json!({
                "bound_us": self.bound_us,
                "longest_unavailable_us": longest_us,
                "longest": longest,
                "crashes": crashes,
                "never_served": never_served,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};

    fn failed() -> EventKind {
        EventKind::AcquireFailed {
            reason: "wait bound reached".into(),
        }
    }

    #[test]
    fn a_crashed_setnx_holder_blocks_everyone() {
        // client 0 crashed between SETNX and EXPIRE (it never got its Acquired); client 1 keeps
        // trying for 10 s.
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(0, "client-1", EventKind::AcquireStart),
                ev(
                    2,
                    "client-0",
                    EventKind::Crashed {
                        point: "after_setnx".into(),
                    },
                ),
                ev(5_000_000, "client-1", failed()),
                ev(5_010_000, "client-1", EventKind::AcquireStart),
                ev(10_010_000, "client-1", failed()),
            ],
        };
        let r = Liveness {
            bound_us: 3_000_000,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert_eq!(r.evidence["longest_unavailable_us"], 10_010_000);
        assert!(r.summary.contains("never became free"), "{}", r.summary);
    }

    #[test]
    fn a_live_holder_is_not_unavailability() {
        // client 0 holds for 20 s (paused, maybe); client 1 waits all along: that is the lock working.
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(1, "client-0", acquired(None)),
                ev(2, "client-1", EventKind::AcquireStart),
                ev(20_000_000, "client-1", failed()),
                ev(
                    20_000_001,
                    "client-0",
                    EventKind::Released { deleted: true },
                ),
            ],
        };
        let r = Liveness {
            bound_us: 3_000_000,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    }

    #[test]
    fn a_crashed_holders_lease_expiring_in_time_is_safe() {
        // client 0 crashes while holding; its lease (1 s) runs out and client 1 gets the lock.
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(1, "client-0", acquired(None)),
                ev(2, "client-1", EventKind::AcquireStart),
                ev(
                    3,
                    "client-0",
                    EventKind::Crashed {
                        point: "acquired".into(),
                    },
                ),
                ev(1_000_010, "client-1", acquired(None)),
            ],
        };
        let r = Liveness {
            bound_us: 3_000_000,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["longest_unavailable_us"], 1_000_007);
        // With a tighter bound the same history is a violation: the bound is what decides.
        let r = Liveness { bound_us: 500_000 }.check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
    }

    fn note(at: u64, what: &str) -> crate::history::Event {
        ev(at, "nemesis", EventKind::Fault { what: what.into() })
    }

    /// The false alarm a correct lock met: its holder crashes while the only waiter is paused.
    /// The lock is free from the lease's end, but nobody can ask for it until the waiter resumes,
    /// and then it is granted at once: not unavailable.
    #[test]
    fn a_free_lock_nobody_can_ask_for_is_not_unavailable() {
        let crash = EventKind::Crashed {
            point: "acquired".into(),
        };
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(1_000, "client-0", acquired(None)),
                ev(2_000, "client-1", EventKind::AcquireStart),
                note(3_000, "client-1 paused for 4490 ms (GC pause)"),
                ev(5_000, "client-0", crash),
                note(4_493_000, "client-1 resumed"),
                ev(4_494_000, "client-1", acquired(None)),
                ev(4_600_000, "run", EventKind::RunEnd),
            ],
        };
        let r = Liveness {
            bound_us: 3_000_000,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    }

    /// A client stuck in `acquire` after the holder crashed (a lock with no lease) waits until
    /// the run ends, not until whatever event came last.
    #[test]
    fn a_client_stuck_until_the_run_ends_is_never_served() {
        let crash = EventKind::Crashed {
            point: "acquired".into(),
        };
        let h = History {
            events: vec![
                ev(0, "client-0", EventKind::AcquireStart),
                ev(1_000, "client-0", acquired(None)),
                ev(2_000, "client-1", EventKind::AcquireStart),
                ev(11_000, "client-0", crash),
                ev(30_000_000, "run", EventKind::RunEnd),
            ],
        };
        let r = Liveness {
            bound_us: 3_000_000,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
        assert!(r.summary.contains("never served"), "{}", r.summary);
        assert_eq!(r.evidence["never_served"], serde_json::json!([1]));
    }
}
