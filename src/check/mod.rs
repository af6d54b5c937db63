//! Checkers: each reads a [`History`] and reaches a verdict with evidence. One checker per file.
//!
//! Checkers use true time only. They never look at what a client believed about its lease except
//! to show it in the evidence, because the question is what actually happened, not what anyone
//! thought was happening.

pub mod declaration;
pub mod foreign_release;
pub mod grants;
pub mod liveness;
pub mod mutual_exclusion;
pub mod reentrancy;
pub mod release;
pub mod resource;
pub mod throughput;
pub mod verdict;

use crate::history::History;
use serde::Serialize;

pub use declaration::{Declaration, Params, Reads};
pub use grants::{grants, Grant, GrantIndex};
pub use verdict::Verdict;

/// Every checker lockcheck has, in report order: the one list the judge composes a run's checkers
/// from, and `expect_checks`, the reports and the table read their names and labels from.
pub const CHECKERS: &[Declaration] = &[
    mutual_exclusion::MutualExclusion::DECLARATION,
    resource::Resource::DECLARATION,
    liveness::Liveness::DECLARATION,
    foreign_release::ForeignRelease::DECLARATION,
    reentrancy::Reentrancy::DECLARATION,
    release::Release::DECLARATION,
    throughput::Throughput::DECLARATION,
];

/// The check names a scenario may name in `expect_checks`, in report order: the names
/// [`CHECKERS`] declares.
pub const CHECK_NAMES: &[&str] = &{
    let mut names = [""; CHECKERS.len()];
    let mut i = 0;
    while i < CHECKERS.len() {
        names[i] = CHECKERS[i].name;
        i += 1;
    }
    names
};

/// The headline check, whose verdict is a run's (`Outcome::verdict`, a scenario's `expect`).
pub const MUTUAL_EXCLUSION: &str = mutual_exclusion::MutualExclusion::DECLARATION.name;

/// A check's short label for narrow places (a table cell); an unknown name is its own label.
pub fn label(name: &str) -> &str {
    CHECKERS
        .iter()
        .find(|d| d.name == name)
        .map_or(name, |d| d.label)
}

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
    /// The same, given the history's grants (`grants::grants(history)`): [`run`] computes them
    /// once for every checker whose declaration reads them ([`Reads::Grants`]), since a long
    /// history's grants cost as much as a checker's own pass. Checkers that use grants implement
    /// this one.
    fn check_with(&self, history: &History, grants: &[grants::Grant]) -> CheckResult {
        let _ = grants;
        self.check(history)
    }
}

/// The liveness bound when a scenario sets none and its lock has no lease to scale it from:
/// three times Redisson's default 30 s watchdog lease (a test in `judge.rs` keeps the two equal).
pub const DEFAULT_LIVENESS_BOUND_MS: u64 = 90_000;

/// The checkers that run for `params`, in report order, each with its declaration.
pub fn for_params(params: &Params) -> Vec<(&'static Declaration, Box<dyn Checker>)> {
    CHECKERS
        .iter()
        .filter_map(|d| (d.build)(params).map(|c| (d, c)))
        .collect()
}

/// Every checker that runs with default parameters (the default liveness bound, one master, no
/// throughput minimum), in report order.
pub fn all() -> Vec<Box<dyn Checker>> {
    for_params(&Params::default())
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

/// Runs `checkers` over `history`, by check name: the grants are computed once, and only when a
/// checker reads them.
pub fn run(
    checkers: Vec<(&'static Declaration, Box<dyn Checker>)>,
    history: &History,
) -> Vec<(&'static str, CheckResult)> {
    let reads_grants = checkers.iter().any(|(d, _)| d.reads == Reads::Grants);
    let grants = if reads_grants {
        grants::grants(history)
    } else {
        Vec::new()
    };
    checkers
        .into_iter()
        .map(|(d, c)| {
            let result = match d.reads {
                Reads::History => c.check(history),
                Reads::Grants => c.check_with(history, &grants),
            };
            (d.name, result)
        })
        .collect()
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

/// An acquisition of the owner token `owner`, without a fencing token (for observer tests).
#[cfg(test)]
pub(crate) fn acquired_as(owner: &str) -> crate::history::EventKind {
    crate::history::EventKind::Acquired {
        owner: owner.into(),
        fencing_token: None,
        acquired_at_ms: 0,
        valid_until_ms: 0,
    }
}

#[cfg(test)]
mod names {
    use super::*;

    /// Every checker reports the name it is declared under, and with every parameter set that
    /// lets a checker run, every declared checker runs, in the list's order.
    #[test]
    fn each_checker_reports_its_declared_name() {
        let every = Params {
            min_throughput: Some(0.5),
            ..Params::default()
        };
        let reported: Vec<&str> = for_params(&every).iter().map(|(_, c)| c.name()).collect();
        assert_eq!(reported, CHECK_NAMES);
        let names: Vec<&str> = CHECKERS.iter().map(|d| d.name).collect();
        assert_eq!(names, CHECK_NAMES);
    }

    /// A checker that does not run with default parameters says what makes it run (throughput,
    /// a minimum); the others always run and say nothing.
    #[test]
    fn a_checker_that_runs_only_when_asked_says_so() {
        let default: Vec<&str> = for_params(&Params::default())
            .iter()
            .map(|(d, _)| d.name)
            .collect();
        for d in CHECKERS {
            let runs = default.contains(&d.name);
            assert_eq!(d.runs_only.is_some(), !runs, "{}", d.name);
        }
        assert!(throughput::Throughput::DECLARATION.runs_only.is_some());
    }

    #[test]
    fn labels_come_from_the_declarations() {
        assert_eq!(label(MUTUAL_EXCLUSION), "ME");
        assert_eq!(label("no_such_check"), "no_such_check");
    }
}
