//! Shrinking a violating case: proptest's shrink loop over the case's value tree, then a pass
//! that drops each spare fault. In simulation a candidate is decided by its one run; on real
//! servers by the margin of [`super::real`]. Every step is reported as progress and bounded by
//! the time limit.

use super::phase::Phase;
use super::real::{self, Margin};
use super::search::{judge, tree, violated, Budget, SearchMode, SearchOptions};
use super::strategy::Case;
use crate::judge::Outcome;
use crate::scenario::{Scenario, Space};
use proptest::strategy::ValueTree;

/// What a shrink needs besides the tree: the search's options, the check it keeps, the margin a
/// real candidate keeps, and where its steps are reported.
pub(super) struct Shrinking<'a> {
    pub(super) opts: &'a SearchOptions,
    pub(super) check: &'a str,
    pub(super) margin: Margin,
    pub(super) progress: &'a dyn Fn(Phase),
}

impl Shrinking<'_> {
    /// Whether `case` still violates the check: in its one simulated run (`Some` with that run),
    /// or on real servers by the margin (`Some(None)`: which run is settled later).
    fn still_violates(
        &self,
        base: &Scenario,
        space: &Space,
        case: &Case,
        runner: &real::Runner,
    ) -> Result<Option<Option<Box<Outcome>>>, String> {
        let opts = self.opts;
        match opts.mode {
            SearchMode::Sim => {
                let (_, outcome) = judge(&opts.locks, base, space, case);
                Ok(violated(&outcome, Some(self.check)).map(|_| Some(Box::new(outcome))))
            }
            SearchMode::Real { .. } => {
                Ok(
                    real::decide(runner, &case.scenario(base, space), self.check, self.margin)?
                        .map(|_| None),
                )
            }
        }
    }

    /// Reports the shrink's progress after a step.
    fn stepped(&self, shrunk: &Shrunk) {
        (self.progress)(Phase::Shrink {
            step: shrunk.steps,
            max: self.opts.max_shrink_steps,
            kept: shrunk.kept.len() as u32,
        });
    }
}

/// What a shrink ended with.
pub(super) struct Shrunk {
    /// The case as drawn.
    pub(super) drawn: Case,
    /// Steps taken.
    pub(super) steps: u32,
    /// Every case a step kept, in order: the last is the smallest. On real servers the end of
    /// this chain may be taken back ([`real::settle`]).
    pub(super) kept: Vec<Case>,
    /// The deadline stopped the shrink before it was done.
    pub(super) cut_short: bool,
    /// In simulation, the run of the last kept case.
    pub(super) kept_outcome: Option<Box<Outcome>>,
}

/// proptest's shrink loop over case `index`'s tree: simplify while the case still violates
/// `check`, complicate back when a step lost it. Returns the last violating case and the steps;
/// no step starts that `budget` cannot afford.
pub(super) fn shrink(
    base: &Scenario,
    space: &Space,
    sh: &Shrinking<'_>,
    mut budget: Budget,
    index: u64,
) -> Result<Shrunk, String> {
    let opts = sh.opts;
    let mut tree = tree(space, opts.seed, index);
    let mut shrunk = Shrunk {
        drawn: tree.current(),
        steps: 0,
        kept: Vec::new(),
        cut_short: false,
        kept_outcome: None,
    };
    if !tree.simplify() {
        return Ok(shrunk);
    }
    while shrunk.steps < opts.max_shrink_steps {
        if budget.spent() {
            shrunk.cut_short = true;
            return Ok(shrunk);
        }
        shrunk.steps += 1;
        let candidate = tree.current();
        let runner = budget.runner(opts);
        let kept = budget.step(|| sh.still_violates(base, space, &candidate, &runner))?;
        let go_on = if let Some(o) = kept {
            shrunk.kept.push(candidate);
            shrunk.kept_outcome = o;
            tree.simplify()
        } else {
            tree.complicate()
        };
        sh.stepped(&shrunk);
        if !go_on {
            break;
        }
    }
    drop_faults(base, space, sh, budget, shrunk)
}

impl Shrunk {
    /// The smallest case that kept the violation (the case as drawn, when no step kept it).
    pub(super) fn case(&self) -> &Case {
        self.kept.last().unwrap_or(&self.drawn)
    }
}

/// A last pass after proptest's shrink: drops each remaining fault in turn and keeps the case
/// without it while it still violates `check`, until no fault can go: the finding is then
/// 1-minimal (removing any one of its faults loses the violation), unless the deadline cut it
/// short. proptest removes a fault only while it shrinks the schedule, before the seed and the other faults have shrunk; a fault
/// that was needed then (a 1 ms pause that shifted the interleaving) can be spare at the end.
///
/// It is not bounded by `max_shrink_steps`: it tries at most n(n+1)/2 removals for n faults
/// (`max_faults` is at most 16), and a spare fault is what a reader of the finding would trip on
/// first, also when the numbers' budget ran out (on real servers it always does). It is bounded
/// by `deadline`, like every step.
fn drop_faults(
    base: &Scenario,
    space: &Space,
    sh: &Shrinking<'_>,
    mut budget: Budget,
    mut shrunk: Shrunk,
) -> Result<Shrunk, String> {
    let mut i = 0;
    // Down to none: a case that still violates without any fault (a race) is 1-minimal only
    // when even its last fault was tried.
    while i < shrunk.case().faults.len() {
        if budget.spent() {
            shrunk.cut_short = true;
            break;
        }
        shrunk.steps += 1;
        let mut candidate = shrunk.case().clone();
        candidate.faults.remove(i);
        let runner = budget.runner(sh.opts);
        if let Some(o) = budget.step(|| sh.still_violates(base, space, &candidate, &runner))? {
            shrunk.kept.push(candidate);
            shrunk.kept_outcome = o;
            i = 0;
        } else {
            i += 1;
        }
        sh.stepped(&shrunk);
    }
    Ok(shrunk)
}
