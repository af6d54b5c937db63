//! Explore on real servers (`explore --real`): each case runs on its own spawned `redis-server`s
//! (or MariaDB) and, for `kind = "client-program"`, its own client processes, so `--jobs N` runs N cases
//! at once.
//!
//! A real run is not a function of its seed: the kernel schedules the servers and the clients, and
//! a pause that lands a millisecond later can miss the window a violation needs. So a verdict is a
//! rate, not a bit, and the search treats it as one:
//! - a case that violates is **confirmed** by running it again, [`DEFAULT_RUNS`] times by default;
//! - a shrink candidate **keeps** the violation when it violates in at least one of its runs
//!   ([`violates_in`]); it stops at the first that does, so a reliable violation costs one run;
//! - a shrink that ends at the edge of a timing window (a pause 26 ms shorter than the lease that
//!   violated once, when the hold that followed it happened to be long) is **taken back** to the
//!   last kept candidate that violates in at least half of its runs ([`settle`]);
//! - the written file states its **reproduction rate**, counted by running it from the file.
//!
//! The property is proptest's shrinking made tolerant of flakiness, as Jepsen's and QuickCheck's
//! state-machine testers do it when they re-check a shrunk history several times: "violates in at
//! least one of k runs" is monotone enough for proptest's binary searches, because a candidate that
//! lost the violation is reported only after k misses.

use crate::check::Verdict;
use crate::exec::run_ordered;
use crate::judge::{Mode, Outcome};
use crate::real::RealError;
use crate::registry::Registry;
use crate::scenario::Scenario;
use std::fmt;

/// Runs per confirmation and per shrink candidate when `--runs` is not given: enough that a
/// violation seen in half the runs is kept 7 times in 8, few enough that a candidate that lost
/// it costs seconds, not minutes.
pub const DEFAULT_RUNS: u32 = 3;

/// The most runs `--runs` may ask for: each is a real run of seconds.
pub const MAX_RUNS: u32 = 100;

/// Shrink steps when `--shrink-steps` is not given on real servers: a step is up to `--runs` real
/// runs of a second or more, so proptest's full binary searches (thousands of steps in
/// simulation) would take hours. The structure shrinks first (fewer faults, clients, cycles);
/// what this budget leaves are the last halvings of the numbers.
pub const REAL_MAX_SHRINK_STEPS: u32 = 48;

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
    /// Real mode has no recipe for one of the case's faults (the reason): the case is skipped.
    Unsupported(String),
    /// The run could not be made (a missing `redis-server`, a client program that died at start):
    /// the search stops with this message, since every other case would fail the same way.
    Failed(String),
}

/// Runs `scenario` once on spawned servers, with its own seed, and judges it.
pub fn run_once(locks: &Registry, scenario: &Scenario) -> RealRun {
    match locks.run_real(scenario, scenario.seed) {
        Ok(history) => RealRun::Judged(Box::new(Outcome::judge(
            scenario,
            Mode::Real,
            scenario.seed,
            history,
        ))),
        Err(RealError::Unsupported(why)) => RealRun::Unsupported(why),
        Err(e) => RealRun::Failed(e.to_string()),
    }
}

/// Whether `outcome` violates `check`.
fn violates(outcome: &Outcome, check: &str) -> bool {
    outcome.checks.get(check).map(|c| c.verdict) == Some(Verdict::Violation)
}

/// Why a series of runs stopped before its end.
enum Stopped {
    /// Real mode has no recipe for one of the scenario's faults.
    Unsupported(String),
    /// A run could not be made.
    Failed(String),
}

/// Runs `scenario` `runs` times, `jobs` at once, and counts the runs that violate `check`, with
/// the first violating run; with `stop_at_first`, stops there.
fn tally(
    locks: &Registry,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    jobs: usize,
    stop_at_first: bool,
) -> Result<(Rate, Option<Outcome>), Stopped> {
    let mut rate = Rate {
        violated: 0,
        runs: 0,
    };
    let mut first = None;
    let mut stopped = None;
    let indices: Vec<u64> = (0..u64::from(runs)).collect();
    run_ordered(
        &indices,
        jobs,
        |_| run_once(locks, scenario),
        |_, run| match run {
            RealRun::Judged(o) => {
                rate.runs += 1;
                if violates(&o, check) {
                    rate.violated += 1;
                    first.get_or_insert(*o);
                    return !stop_at_first;
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
    match stopped {
        Some(s) => Err(s),
        None => Ok((rate, first)),
    }
}

/// Runs `scenario` up to `runs` times, `jobs` at once, and stops at the first run that violates
/// `check`: the shrink's test ("violates in at least one of k runs"). Returns that run, or `None`
/// when every run held (or real mode cannot run the case at all).
pub fn violates_in(
    locks: &Registry,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    jobs: usize,
) -> Result<Option<Outcome>, String> {
    match tally(locks, scenario, check, runs, jobs, true) {
        Ok((_, first)) => Ok(first),
        Err(Stopped::Unsupported(_)) => Ok(None),
        Err(Stopped::Failed(m)) => Err(m),
    }
}

/// Runs `scenario` `runs` times, `jobs` at once, and counts the runs that violate `check`: its
/// reproduction rate, with the first violating run (the one a report shows).
pub fn rate(
    locks: &Registry,
    scenario: &Scenario,
    check: &str,
    runs: u32,
    jobs: usize,
) -> Result<(Rate, Option<Outcome>), String> {
    tally(locks, scenario, check, runs, jobs, false).map_err(|s| match s {
        Stopped::Unsupported(m) | Stopped::Failed(m) => m,
    })
}

/// The most shrink steps [`settle`] takes back, each costing `--runs` runs, before it falls back
/// to the case as drawn (which the search confirmed).
pub const MAX_TAKEN_BACK: usize = 4;

/// Whether `rate` reproduces reliably enough to be written as a finding: at least half its runs.
fn reliable(rate: Rate) -> bool {
    rate.violated * 2 >= rate.runs
}

/// The finding to write after a shrink on real servers. "Violates in at least one of k runs" lets
/// a shrink step keep a case that violated once by luck, and proptest's binary searches end
/// exactly there, at the edge of the window. So the kept candidates are tried again from the
/// newest (`kept` is in the order they were kept), at most [`MAX_TAKEN_BACK`] of them, and the
/// first that violates in at least half of `runs` runs is the finding: returns its index in
/// `kept`, its rate and a violating run. `None`: none did, the case as drawn is the finding.
pub fn settle(
    locks: &Registry,
    kept: &[Scenario],
    check: &str,
    runs: u32,
    jobs: usize,
) -> Result<Option<(usize, Rate, Outcome)>, String> {
    for (i, scenario) in kept.iter().enumerate().rev().take(MAX_TAKEN_BACK) {
        let (r, first) = rate(locks, scenario, check, runs, jobs)?;
        if let (true, Some(outcome)) = (reliable(r), first) {
            return Ok(Some((i, r, outcome)));
        }
    }
    Ok(None)
}
