//! The verdict: what a checker concludes about a history, and what a scenario expects it to.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The verdict a check reaches, and the verdict a scenario expects: two values only, so an
/// expectation and an observation compare directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The property held in every checked run.
    Safe,
    /// The property was broken at least once; the checker's evidence shows where.
    Violation,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Safe => "safe",
            Verdict::Violation => "violation",
        })
    }
}
