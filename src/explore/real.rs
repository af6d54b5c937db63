//! Explore on real servers (`explore --real`): each case runs on its own spawned `redis-server`s
//! (or MariaDB) and, for `kind = "client-program"`, its own client processes, so `--jobs N` runs N cases
//! at once.
//!
//! A real run is not a function of its seed: the kernel schedules the servers and the clients, and
//! a pause that lands a millisecond later can miss the window a violation needs. So a verdict is a
//! rate, not a bit, and the search treats it as one:
//! - a case that violates is **confirmed** by running it again, `--runs` times ([`DEFAULT_RUNS`]):
//!   its rate, say 3 of 3, is the **margin** every smaller case must keep ([`Margin`]);
//! - a shrink candidate is **kept** only while it violates as often as the case as drawn did
//!   ([`decide`]). Its runs go in rounds of `--jobs` at once, and it is decided after the first
//!   round that settles it: kept as soon as at least two runs (or all `--runs`, if fewer) show a
//!   violation rate at least the margin's, dropped as soon as the misses so far leave it short of
//!   the margin's violations even if every one of its remaining `--runs` runs violated. Against
//!   a margin of 3 of 3 on 2 cores, every candidate is decided by its first round of two runs: 2
//!   of 2 keeps it, a miss drops it;
//! - proptest's binary searches end at the edge of a timing window, where a candidate violates
//!   by luck, so before the finding is written the smallest kept case is **run again** and taken
//!   back to the one before it while it falls short of the margin ([`settle`]);
//! - the written file states its **reproduction rate**, counted by running it from the file.
//!
//! This is proptest's shrinking made tolerant of flakiness, as Jepsen's and QuickCheck's
//! state-machine testers re-check a shrunk history several times; the margin is what keeps the
//! shrink away from the edge of the window, where a finding replays one time in two.

use crate::check::Verdict;
use crate::exec::run_ordered;
use crate::explore::strategy::Case;
use crate::fault::FaultKind;
use crate::history::EventKind;
use crate::judge::{Mode, Outcome};
use crate::real::RealError;
use crate::registry::Registry;
use crate::scenario::Scenario;
use std::fmt;
use std::time::Instant;

/// Runs per confirmation and per shrink candidate when `--runs` is not given: enough that the
/// margin of a case that violated 3 of 3 times drops a candidate at the edge of the window (one
/// that violates half the time) 7 times in 8, few enough that a candidate costs seconds.
pub const DEFAULT_RUNS: u32 = 3;

/// The most runs `--runs` may ask for: each is a real run of seconds.
pub const MAX_RUNS: u32 = 100;

/// Shrink steps when `--shrink-steps` is not given on real servers: a step is one or two rounds
/// of real runs of a second or more, so proptest's full binary searches (thousands of steps in
/// simulation) would take hours. The structure shrinks first (fewer faults, clients, cycles);
/// what this budget leaves are the last halvings of the numbers, below what a real run's
/// scheduling noise can tell apart.
pub const REAL_MAX_SHRINK_STEPS: u32 = 32;

/// How often a case violated its check, out of the runs that tried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Runs that violated the check.
    pub violated: u32,
    /// Runs made.
    pub runs: u32,
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} runs", self.violated, self.runs)
    }
}

/// What one real run of a case gave.
pub enum RealRun {
    /// The run's judged history.
    Judged(Box<Outcome>),
    /// The deadline (`--time-limit`) passed during the run, which was cut there
    /// ([`crate::world::cut`]): the history up to the cut, judged. A violation in it is one of
    /// the whole run; its absence says nothing of the rest.
    Cut(Box<Outcome>),
    /// Real mode has no recipe for one of the case's faults (the reason): the case is skipped.
    Unsupported(String),
    /// The run could not be made (a missing `redis-server`, a client program that died at start):
    /// the search stops with this message, since every other case would fail the same way.
    Failed(String),
}

/// Runs `scenario` once on spawned servers, with its own seed, and judges it; cut at
/// `deadline` if it is still running then.
pub fn run_once(locks: &Registry, scenario: &Scenario, deadline: Option<Instant>) -> RealRun {
    crate::world::cut::set_deadline(deadline);
    let run = locks.run_real(scenario, scenario.seed);
    let cut = crate::world::cut::take_cut();
    crate::world::cut::set_deadline(None);
    match run {
        Ok(history) => {
            let outcome = Box::new(Outcome::judge(scenario, Mode::Real, scenario.seed, history));
            if cut {
                RealRun::Cut(outcome)
            } else {
                RealRun::Judged(outcome)
            }
        }
        Err(RealError::Unsupported(why)) => RealRun::Unsupported(why),
        Err(e) => RealRun::Failed(e.to_string()),
    }
}

/// Whether `outcome` violates `check`.
fn violates(outcome: &Outcome, check: &str) -> bool {
    outcome.checks.get(check).map(|c| c.verdict) == Some(Verdict::Violation)
}

/// The evidence a smaller case needs to be kept: `needed` violating runs of at most `runs`, the
/// rate at which the case as drawn violated when confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Margin {
    /// Violating runs needed.
    pub needed: u32,
    /// Runs at most.
    pub runs: u32,
}

impl Margin {
    /// The margin of a case confirmed at `confirmed`: as many violations in as many runs, and at
    /// least one (a case that did not violate again is shrunk on "violates at all", the search's
    /// own violating run being its only evidence).
    pub fn of(confirmed: Rate) -> Margin {
        Margin {
            needed: confirmed.violated.clamp(1, confirmed.runs.max(1)),
            runs: confirmed.runs.max(1),
        }
    }

    /// Kept: at least [`MIN_EVIDENCE`] runs (or all of them, if fewer), violating at the
    /// margin's rate or more (and with all of them, as many times).
    fn reached(&self, r: Rate) -> bool {
        r.runs >= MIN_EVIDENCE.min(self.runs)
            && u64::from(r.violated) * u64::from(self.runs)
                >= u64::from(self.needed) * u64::from(r.runs)
    }

    /// Dropped: too many misses for the margin's violations, even if every run left violated.
    fn out_of_reach(&self, r: Rate) -> bool {
        r.violated + self.runs.saturating_sub(r.runs) < self.needed
    }
}

/// The fewest runs that keep a shrink candidate: one run that violates is luck as often as not
/// at the edge of a timing window.
pub const MIN_EVIDENCE: u32 = 2;

impl Margin {}

/// How a series of real runs is made: the lock registry, how many at once (`--jobs`, each on its
/// own servers and ports) and when the command's `--time-limit` ends (each run is cut there).
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    /// The locks the runs build.
    pub locks: &'a Registry,
    /// Runs at once.
    pub jobs: usize,
    /// When runs are cut; `None`: never.
    pub deadline: Option<Instant>,
}

/// Why a series of runs stopped before its end.
enum Stopped {
    /// Real mode has no recipe for one of the scenario's faults.
    Unsupported(String),
    /// A run could not be made.
    Failed(String),
}

/// Runs `scenario` up to `runs` times in rounds of `jobs` at once, counting the runs that violate
/// `check` (with the first violating run), and stops after the first round at whose end `done`
/// says so. Rounds, not a pool: a run started while the round before is judged would be waited
/// for even when the verdict no longer needs it, and a real run is seconds. `tick` is called
/// after each run with the count so far. A run cut at `deadline` counts only if it violated
/// (what it judged is a prefix of the run), and ends the series: no time is left for another.
/// It also counts, for every check, the judged runs that violated it.
fn tally(
    runner: &Runner,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    done: &dyn Fn(Rate) -> bool,
    tick: &dyn Fn(Rate),
) -> Result<(Rate, Option<Outcome>, ByCheck), Stopped> {
    let mut rate = Rate {
        violated: 0,
        runs: 0,
    };
    let mut by_check = ByCheck::new();
    let mut count = |o: &Outcome| {
        for (name, result) in &o.checks {
            if result.verdict == Verdict::Violation {
                *by_check.entry(name.clone()).or_default() += 1;
            }
        }
        for e in &o.history.events {
            if let EventKind::Fault { what } = &e.kind {
                if what.starts_with(NEVER_FIRED) {
                    *by_check.entry(what.clone()).or_default() += 1;
                }
            }
        }
    };
    let mut first = None;
    let mut stopped = None;
    let mut cut = false;
    while rate.runs < runs && !done(rate) && !cut {
        let round = (runs - rate.runs).min(runner.jobs.max(1) as u32);
        let indices: Vec<u64> = (0..u64::from(round)).collect();
        run_ordered(
            &indices,
            runner.jobs,
            |_| run_once(runner.locks, scenario, runner.deadline),
            |_, run| match run {
                RealRun::Judged(o) => {
                    rate.runs += 1;
                    count(&o);
                    if violates(&o, check) {
                        rate.violated += 1;
                        first.get_or_insert(*o);
                    }
                    tick(rate);
                    true
                }
                RealRun::Cut(o) => {
                    cut = true;
                    if violates(&o, check) {
                        rate.runs += 1;
                        count(&o);
                        rate.violated += 1;
                        first.get_or_insert(*o);
                        tick(rate);
                    }
                    true
                }
                RealRun::Unsupported(m) => {
                    stopped = Some(Stopped::Unsupported(m));
                    false
                }
                RealRun::Failed(m) => {
                    stopped = Some(Stopped::Failed(m));
                    false
                }
            },
        );
        if let Some(s) = stopped {
            return Err(s);
        }
    }
    Ok((rate, first, by_check))
}

/// For each check, how many of a file's runs violated it (a check no run violated is absent);
/// and, keyed by the history's note of a fault that never fired (`never fired: …`, from
/// [`crate::world::never_fired`]), in how many runs it did not fire.
pub type ByCheck = std::collections::BTreeMap<String, u32>;

/// How the history's note of a fault that never fired begins.
pub const NEVER_FIRED: &str = "never fired: ";

/// Whether `scenario` keeps the violation of `check` by `margin`: runs it in rounds of `jobs`
/// until the margin is reached (returns the rate so far and a violating run) or out of reach
/// (`None`; also when real mode cannot run the case at all).
pub fn decide(
    runner: &Runner,
    scenario: &Scenario,
    check: &str,
    margin: Margin,
) -> Result<Option<(Rate, Outcome)>, String> {
    let done = |r: Rate| margin.reached(r) || margin.out_of_reach(r);
    match tally(runner, scenario, check, margin.runs, &done, &|_| {}) {
        Ok((r, Some(first), _)) if margin.reached(r) => Ok(Some((r, first))),
        Ok(_) | Err(Stopped::Unsupported(_)) => Ok(None),
        Err(Stopped::Failed(m)) => Err(m),
    }
}

/// Runs `scenario` `runs` times, `jobs` at once, and counts the runs that violate `check`: its
/// reproduction rate, with the first violating run (the one a report shows). `tick` is called
/// after each run.
pub fn rate(
    runner: &Runner,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    tick: &dyn Fn(Rate),
) -> Result<(Rate, Option<Outcome>), String> {
    rate_by_check(runner, scenario, check, runs, tick).map(|(rate, first, _)| (rate, first))
}

/// [`rate`], with how many of the runs violated each check: what a found file states it expects
/// is what its runs showed ([`crate::explore::emit::found_scenario_replayed`]), so `lockcheck run`
/// on it says "as expected" as often as the file's rate says, not "NOT AS EXPECTED" for a check
/// that broke only in the search's own run.
pub fn rate_by_check(
    runner: &Runner,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    tick: &dyn Fn(Rate),
) -> Result<(Rate, Option<Outcome>, ByCheck), String> {
    tally(runner, scenario, check, runs, &|_| false, tick).map_err(|s| match s {
        Stopped::Unsupported(m) | Stopped::Failed(m) => m,
    })
}

/// The most shrink steps [`settle`] takes back, each costing a round or two of runs, before it
/// falls back to the case as drawn (which the search confirmed).
pub const MAX_TAKEN_BACK: usize = 4;

/// The finding to write after a shrink on real servers. Each kept candidate reached the margin
/// once, and proptest's binary searches end where a candidate reaches it by luck: the kept
/// candidates are decided again from the newest (`kept` is in the order they were kept), at most
/// [`MAX_TAKEN_BACK`] of them, and the first that reaches `margin` again is the finding: returns
/// its index in `kept` and a violating run. `None`: none did, the case as drawn is the finding.
pub fn settle(
    runner: &Runner,
    kept: &[Scenario],
    check: &str,
    margin: Margin,
) -> Result<Option<(usize, Outcome)>, String> {
    for (i, scenario) in kept.iter().enumerate().rev().take(MAX_TAKEN_BACK) {
        if let Some((_, outcome)) = decide(runner, scenario, check, margin)? {
            return Ok(Some((i, outcome)));
        }
    }
    Ok(None)
}

/// How close to the lease a shrunk client pause is "at its edge": a fifth of the lease, and at
/// least 20 ms. proptest's binary search ends a pause's length at the shortest that still
/// violated once, which for a lease lock is a hair past the lease: there the wall clock's phase
/// (when the server's expiry timer runs, when the paused process is scheduled again) decides,
/// and a finding that violated 3 of 3 while shrinking replayed 1 of 5 from its file.
pub fn edge_ms(lease_ms: u64) -> u64 {
    (lease_ms / 5).max(20)
}

/// `case` with every client pause that ends at the lease's edge ([`edge_ms`] either side of
/// `lease_ms`) lengthened to twice the edge past the lease, within the space's longest pause
/// (`longest_ms`); `None` when no pause is at the edge. The search keeps it only if it violates
/// at the margin ([`decide`]), so a pause the violation needs short (one that must end before
/// the lease does) stays as it was.
pub fn off_the_edge(case: &Case, lease_ms: u64, longest_ms: u64) -> Option<Case> {
    let edge = edge_ms(lease_ms);
    let wide = (lease_ms + 2 * edge).min(longest_ms);
    let mut moved = case.clone();
    let mut any = false;
    for (_, fault) in &mut moved.faults {
        if let FaultKind::Pause { for_ms, .. } = fault {
            if for_ms.abs_diff(lease_ms) <= edge && *for_ms < wide {
                *for_ms = wide;
                any = true;
            }
        }
    }
    any.then_some(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_at_the_leases_edge_is_moved_off_it_and_no_other() {
        use crate::explore::strategy::When;
        let pause = |for_ms| {
            (
                When::At(0),
                FaultKind::Pause {
                    client: crate::fault::ClientRef::Holder,
                    for_ms,
                },
            )
        };
        let case = |faults| Case {
            faults,
            clients: 2,
            cycles: 2,
            hold_ms: [10, 20],
            seed: 1,
            nested: 0,
        };
        let lengths = |c: &Case| -> Vec<u64> {
            c.faults
                .iter()
                .map(|(_, f)| f.clone().pause_ms_mut().map_or(0, |ms| *ms))
                .collect()
        };
        // A 300 ms lease: the edge is 60 ms either side; 310 ms and 250 ms are at it, 200 ms and
        // 900 ms are not.
        let moved = off_the_edge(&case(vec![pause(310), pause(200), pause(250)]), 300, 2000);
        assert_eq!(lengths(&moved.unwrap()), vec![420, 200, 420]);
        assert!(off_the_edge(&case(vec![pause(200), pause(900)]), 300, 2000).is_none());
        // Never past the space's longest pause, and never shorter than it was.
        let capped = off_the_edge(&case(vec![pause(305)]), 300, 350).unwrap();
        assert_eq!(lengths(&capped), vec![350]);
        assert!(off_the_edge(&case(vec![pause(355)]), 300, 350).is_none());
        // A short lease still gets 20 ms either side.
        assert_eq!(edge_ms(50), 20);
    }

    #[test]
    fn a_margin_decides_as_soon_as_the_evidence_allows() {
        let r = |violated, runs| Rate { violated, runs };
        let all = Margin::of(r(3, 3));
        assert_eq!(all, Margin { needed: 3, runs: 3 });
        // One miss and 3 of 3 can no longer be reached: dropped after the first round.
        assert!(all.out_of_reach(r(1, 2)));
        // Two of two is the margin's rate on the evidence of two runs: kept after one round.
        assert!(!all.reached(r(1, 1)) && !all.out_of_reach(r(1, 1)));
        assert!(all.reached(r(2, 2)) && all.reached(r(3, 3)));
        // A case that violated twice in 3: 1 of 2 waits for the third run, which decides.
        let twice = Margin::of(r(2, 3));
        assert!(!twice.reached(r(1, 2)) && !twice.out_of_reach(r(1, 2)));
        assert!(twice.reached(r(2, 3)) && twice.out_of_reach(r(1, 3)));
        assert!(twice.out_of_reach(r(0, 2)));
        // A case that violated once in 3 keeps a candidate at 1 of 2.
        let once = Margin::of(r(1, 3));
        assert!(once.reached(r(1, 2)) && !once.reached(r(0, 2)));
        assert!(!once.out_of_reach(r(0, 2)) && once.out_of_reach(r(0, 3)));
        // A case that never violated again still needs one violation of its runs.
        assert_eq!(Margin::of(r(0, 3)), Margin { needed: 1, runs: 3 });
    }
}
