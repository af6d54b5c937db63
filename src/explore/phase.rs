//! Where a search is, for the progress it reports: a search of minutes spends most of them
//! after the first violation (confirming it on real servers, shrinking it), and a bar that stops
//! at the violating case says nothing about that part.

/// One step of progress, named by its phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Drawing and running cases: `done` of `total`, `violating` of them violating.
    Search {
        /// Cases run or skipped.
        done: u64,
        /// Cases in the budget (this shard's).
        total: u64,
        /// Cases that violated.
        violating: u64,
    },
    /// On real servers, running the violating case as drawn again: `done` of `runs` runs.
    Confirm {
        /// Runs made.
        done: u32,
        /// Runs to make.
        runs: u32,
    },
    /// Shrinking: `step` of at most `max` steps taken, `kept` of them kept a smaller case.
    Shrink {
        /// Steps taken.
        step: u32,
        /// The step budget (`--shrink-steps`); the last pass that drops faults may add a few.
        max: u32,
        /// Steps that kept a smaller case.
        kept: u32,
    },
    /// On real servers, re-running the smallest kept case (and, while it falls short of the
    /// margin, the ones before it): `done` of `runs` runs of the candidate in hand.
    Settle {
        /// Runs made of this candidate.
        done: u32,
        /// Runs per candidate.
        runs: u32,
    },
}

impl Phase {
    /// The phase's name in a progress line.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Search { .. } => "search",
            Phase::Confirm { .. } => "confirm",
            Phase::Shrink { .. } => "shrink",
            Phase::Settle { .. } => "settle",
        }
    }

    /// (done, total, unit) for a progress bar.
    pub fn position(&self) -> (u64, u64, &'static str) {
        match *self {
            Phase::Search { done, total, .. } => (done, total, "cases"),
            Phase::Confirm { done, runs } | Phase::Settle { done, runs } => {
                (u64::from(done), u64::from(runs), "runs")
            }
            Phase::Shrink { step, max, .. } => (u64::from(step), u64::from(max), "steps"),
        }
    }

    /// What the phase counts besides its position: violations in the search, kept steps in the
    /// shrink.
    pub fn count(&self) -> Option<u64> {
        match *self {
            Phase::Search { violating, .. } => Some(violating),
            Phase::Shrink { kept, .. } => Some(u64::from(kept)),
            _ => None,
        }
    }
}
