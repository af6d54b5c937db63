//! Throughput: the lock must let the workload get its work done, not merely never deadlock.
//! What it reads, what counts as a violation, what it can never see: `docs/checks.md`, "throughput".
//!
//! A lock whose release never deletes its entry (every holding lasts until the lease runs out)
//! keeps mutual exclusion and, with a short lease, never leaves waiters stuck for long; what it
//! loses is throughput. The check compares the cycles completed (a grant whose holder left its
//! critical section and released) with what the workload could have completed: at most `clients`
//! x `cycles`, at most one critical section of the mean `hold_ms` at a time within `duration_ms`,
//! and at most `duration_ms / (hold + think)` cycles per client (the judge computes it from the
//! scenario, `Scenario::capacity`). It runs when the scenario sets
//! `[checks] min_throughput` and reports a violation when the share completed is below it.

use super::Verdict;
use super::{grants, CheckResult, Checker, Declaration, Reads};
use crate::history::History;

/// The throughput checker: the least share of `capacity` cycles that must complete.
pub struct Throughput {
    /// The scenario's `[checks] min_throughput`: below this share of `capacity`, the lock
    /// stalled the workload (a liveness failure the other checkers do not see).
    pub min_share: f64,
    /// Cycles the workload could complete (see the module doc).
    pub capacity: u64,
}

impl Throughput {
    /// Its entry in `check::CHECKERS`: completed grants; runs only when a scenario sets `[checks] min_throughput`.
    pub const DECLARATION: Declaration = Declaration {
        name: "throughput",
        label: "throughput",
        reads: Reads::Grants,
        runs_only: Some(
            "when `[checks] min_throughput` is set (for example `min_throughput = 0.5`)",
        ),
        build: |p| {
            let min_share = p.min_throughput?;
            Some(Box::new(Throughput {
                min_share,
                capacity: p.capacity,
            }))
        },
    };
}

impl Checker for Throughput {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, _history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let completed = gs
            .iter()
            .filter(|g| g.exit_us.is_some() && g.end_us.is_some() && !g.crashed)
            .count() as u64;
        let share = completed as f64 / self.capacity as f64;
        let violation = share < self.min_share;
        let summary = format!(
            "{completed} of {} possible cycle(s) completed ({:.0}%, minimum {:.0}%)",
            self.capacity,
            share * 100.0,
            self.min_share * 100.0
        );
        CheckResult {
            verdict: Verdict::of(violation),
            summary,
            evidence: serde_json::json!({
                "completed_cycles": completed,
                "possible_cycles": self.capacity,
                "share": share,
                "min_share": self.min_share,
            }),
            timeline: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{acquired, ev};
    use crate::history::EventKind;

    fn cycle(at: u64, client: &str) -> Vec<crate::history::Event> {
        vec![
            ev(at, client, acquired(None)),
            ev(at + 1, client, EventKind::Exit),
            ev(at + 2, client, EventKind::Released { deleted: true }),
        ]
    }

    #[test]
    fn completed_cycles_against_the_minimum() {
        let mut events = cycle(0, "client-0");
        events.extend(cycle(10, "client-1"));
        // A grant still held at the end is not a completed cycle.
        events.push(ev(20, "client-0", acquired(None)));
        let h = History { events };
        let t = Throughput {
            min_share: 0.5,
            capacity: 4,
        };
        let r = t.check(&h);
        assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
        assert_eq!(r.evidence["completed_cycles"], 2);
        let r = Throughput {
            min_share: 0.6,
            capacity: 4,
        }
        .check(&h);
        assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    }
}
