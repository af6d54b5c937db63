//! The verdict: what a checker concludes about a history, and what a scenario expects it to.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The verdict a check reaches, and the verdict a scenario expects (`safe` or `violation`; a
/// scenario cannot expect `NotJudged`), so an expectation and an observation compare directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The property held in every checked run.
    Safe,
    /// The property was broken at least once; the checker's evidence shows where.
    Violation,
    /// The check could not decide from this history: what it reads was not recorded (the
    /// servers' removals unwatched, a quorum lock's entries). Neither safe nor a violation, so
    /// an expectation of either is not met by it.
    #[serde(skip_deserializing)]
    NotJudged,
}

impl Verdict {
    /// `Violation` when `violated`, else `Safe`.
    pub fn of(violated: bool) -> Verdict {
        if violated {
            Verdict::Violation
        } else {
            Verdict::Safe
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Safe => "safe",
            Verdict::Violation => "violation",
            Verdict::NotJudged => "not judged",
        })
    }
}
