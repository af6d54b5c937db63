//! Checkers: each reads a [`History`] and reaches a verdict with evidence. One checker per file.
//!
//! Checkers use true time only. They never look at what a client believed about its lease except
//! to show it in the evidence, because the question is what actually happened, not what anyone
//! thought was happening.

pub mod foreign_release;
pub mod grants;
pub mod liveness;
pub mod mutual_exclusion;
pub mod protected_resource;
pub mod reentrancy;
pub mod release;
pub mod throughput;
pub mod verdict;

use crate::history::History;
use serde::Serialize;

pub use grants::{grants, Grant, GrantIndex};
pub use verdict::Verdict;

/// The check names a scenario may name in `expect_checks`, in report order (the names the
/// checkers of [`all`] report; a test keeps the two lists equal).
pub const CHECK_NAMES: &[&str] = &[
    "mutual_exclusion",
    "resource",
    "liveness",
    "foreign_release",
    "reentrancy",
    "release",
    "throughput",
];

/// The outcome of one check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// Whether the property held; the judge compares it with the scenario's expectation.
    pub verdict: Verdict,
    /// One line a human reads first.
    pub summary: String,
    /// Check-specific details, in JSON.
    pub evidence: serde_json::Value,
    /// A short text timeline of the evidence (the report prints it under the verdict).
    #[serde(skip)]
    pub timeline: Vec<String>,
}

/// A property of histories.
pub trait Checker {
    /// The name used in `expect_checks` and in the JSON `checks` object.
    fn name(&self) -> &'static str;
    /// Read the whole history and decide, with the evidence a reader needs to see why.
    fn check(&self, history: &History) -> CheckResult;
    /// The same, given the history's grants (`grants::grants(history)`): the judge computes them
    /// once for every checker, since five of them need them and a long history's grants cost
    /// as much as a checker's own pass. Checkers that use grants implement this one.
    fn check_with(&self, history: &History, grants: &[grants::Grant]) -> CheckResult {
        let _ = grants;
        self.check(history)
    }
}

/// The liveness bound when a scenario sets none and its lock has no lease to scale it from:
/// three times Redisson's default 30 s watchdog lease (a test in `judge.rs` keeps the two equal).
pub const DEFAULT_LIVENESS_BOUND_MS: u64 = 90_000;

/// Every checker lockcheck runs, in report order, with default parameters (the default liveness
/// bound; one master).
pub fn all() -> Vec<Box<dyn Checker>> {
    with(DEFAULT_LIVENESS_BOUND_MS, 1, None)
}

/// Every checker that always runs, parameterised: the liveness bound (ms), the masters the lock
/// lives on (the foreign-release and release rules need them), and the share of writes the
/// resource may refuse before that is a violation (`None`: refusals are only reported). The throughput check runs besides when a
/// scenario sets a minimum (`judge::for_scenario`).
pub fn with(
    liveness_bound_ms: u64,
    masters: u32,
    max_refused_writes: Option<f64>,
) -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(mutual_exclusion::MutualExclusion),
        Box::new(protected_resource::Resource { max_refused_writes }),
        Box::new(liveness::Liveness {
            bound_us: liveness_bound_ms.saturating_mul(1000),
        }),
        Box::new(foreign_release::ForeignRelease::for_masters(masters)),
        Box::new(reentrancy::Reentrancy),
        Box::new(release::Release { masters }),
    ]
}

/// Builds an event (for checker tests).
#[cfg(test)]
pub(crate) fn ev(at_us: u64, node: &str, kind: crate::history::EventKind) -> crate::history::Event {
    crate::history::Event {
        at_us,
        node: node.into(),
        kind,
    }
}

/// A plain acquisition event (for checker tests).
#[cfg(test)]
pub(crate) fn acquired(token: Option<u64>) -> crate::history::EventKind {
    crate::history::EventKind::Acquired {
        owner: "o".into(),
        fencing_token: token,
        acquired_at_ms: 0,
        valid_until_ms: 0,
    }
}

#[cfg(test)]
mod names {
    /// `expect_checks` accepts exactly the names the checkers report.
    #[test]
    fn check_names_are_the_checkers_names() {
        let mut reported: Vec<&str> = super::all().iter().map(|c| c.name()).collect();
        // The throughput check runs only when a scenario sets `[checks] min_throughput`.
        reported.push(super::throughput::Throughput::NAME);
        assert_eq!(reported, super::CHECK_NAMES);
    }
}
