//! Checkers: each reads a [`History`] and reaches a verdict with evidence. One checker per file.
//!
//! Checkers use true time only. They never look at what a client believed about its lease except
//! to show it in the evidence, because the question is what actually happened, not what anyone
//! thought was happening.

pub mod mutual_exclusion;

use crate::history::History;
use crate::scenario::Verdict;
use serde::Serialize;

/// The outcome of one check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
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
    fn check(&self, history: &History) -> CheckResult;
}

/// Every checker lockcheck runs, in report order.
pub fn all() -> Vec<Box<dyn Checker>> {
    vec![Box::new(mutual_exclusion::MutualExclusion)]
}
