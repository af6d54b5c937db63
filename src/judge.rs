//! Judging a run: every checker over the history, each verdict against the scenario's expectation.
//!
//! The judge sits above `check/` and `scenario/`: the checkers read only the history and the few
//! numbers passed to them; the scenario says what those numbers are (`Scenario::check_params`:
//! the liveness bound, the masters, the cycles the workload could complete), and the judge
//! composes the checkers that run from the one list, `check::CHECKERS`.

use crate::check::{self, CheckResult, Checker, Verdict};
use crate::exec::{DistinctCount, SeedSet};
use crate::history::History;
use crate::scenario::Scenario;
use std::collections::BTreeMap;

/// Every checker that runs for `scenario`, composed from the one list (`check::CHECKERS`), each
/// with its declaration.
pub fn for_scenario(scenario: &Scenario) -> Vec<(&'static check::Declaration, Box<dyn Checker>)> {
    check::for_params(&scenario.check_params())
}

/// The program replay commands name: `lockcheck`, or a harness binary's own name.
static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the program that replays a run ([`Outcome::replay`]: `<program> run <file> --seed N`).
/// A harness binary sets its own name once, before its first run; later calls change nothing.
pub fn set_program(name: impl Into<String>) {
    let _ = PROGRAM.set(name.into());
}

/// The program replay commands name (default `lockcheck`).
pub fn program() -> &'static str {
    PROGRAM.get().map_or("lockcheck", String::as_str)
}

/// Simulation or real `redis-server` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Simulated Redis inside one madsim runtime: deterministic, every fault available.
    Sim,
    /// `redis-server` processes lockcheck spawns: real timing, only the faults with a recipe.
    Real,
}

impl Mode {
    /// The name reports and JSON use (`sim`, `real`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sim => "sim",
            Mode::Real => "real",
        }
    }
}

/// One judged run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: String,
    /// Its file, for the replay command (none for a scenario parsed from text).
    pub path: Option<String>,
    /// Which world ran it.
    pub mode: Mode,
    /// The seed that replays it.
    pub seed: u64,
    /// Every checker's result, by check name (sorted, so output order is fixed).
    pub checks: BTreeMap<String, CheckResult>,
    /// The history's hash: equal hashes, equal runs (the determinism proof).
    pub trace_hash: String,
    /// The run itself, for the report's timeline and `--history`.
    pub history: History,
    /// Where a real run's servers were, when lockcheck did not start them: the `--redis` URLs
    /// (passwords shown as `***`), so the replay command points at the same servers.
    pub redis: Option<String>,
}

impl Outcome {
    /// Runs every checker over `history`.
    pub fn judge(scenario: &Scenario, mode: Mode, seed: u64, history: History) -> Outcome {
        let checks = check::run(for_scenario(scenario), &history)
            .into_iter()
            .map(|(name, result)| (name.to_string(), result))
            .collect();
        Outcome {
            scenario: scenario.name.clone(),
            path: scenario.path.as_ref().map(|p| p.display().to_string()),
            mode,
            seed,
            checks,
            trace_hash: history.trace_hash(),
            history,
            redis: None,
        }
    }

    /// The headline verdict: mutual exclusion.
    pub fn verdict(&self) -> Verdict {
        self.checks[check::MUTUAL_EXCLUSION].verdict
    }

    /// The command line that reproduces this run.
    pub fn replay(&self) -> String {
        let path = self
            .path
            .clone()
            .unwrap_or_else(|| "<scenario.toml>".into());
        let target = match (&self.redis, self.mode) {
            (Some(urls), _) => format!(" --redis {urls}"),
            (None, Mode::Real) => " --real".into(),
            (None, Mode::Sim) => String::new(),
        };
        format!("{} run {path} --seed {}{target}", program(), self.seed)
    }
}

/// The result of running one scenario over one or more seeds.
#[derive(Clone, Debug)]
pub struct SeedsOutcome {
    /// The run to show: the first that violated mutual exclusion, else the first that violated
    /// any check, else the first.
    pub shown: Outcome,
    /// How many seeds ran.
    pub seeds_run: u64,
    /// How many seeds violated at least one check.
    pub seeds_violating_any: u64,
    /// Per check: the seeds whose run violated it.
    pub violating_seeds: BTreeMap<String, SeedSet>,
    /// Per check: how many seeds' runs it could not judge (absent: it judged every seed).
    pub not_judged_seeds: BTreeMap<String, u64>,
    /// Per check with an expectation: (expected, observed over all seeds; see
    /// [`SeedsOutcome::observed`]).
    pub expectations: BTreeMap<String, (Verdict, Verdict)>,
    /// How many different histories the seeds produced (by trace hash).
    pub distinct_traces: u64,
    /// The seed whose run violated the most checks (the first such), if any violated.
    pub worst_seed: Option<u64>,
}

/// Folds judged runs one at a time, so `--seeds 100000` keeps two histories (the first run and
/// the first violation), not 100,000.
#[derive(Debug, Default)]
pub struct SeedsAggregate {
    first: Option<Outcome>,
    first_violation: Option<Outcome>,
    first_any_violation: Option<Outcome>,
    seeds_run: u64,
    seeds_violating_any: u64,
    violating: BTreeMap<String, SeedSet>,
    not_judged: BTreeMap<String, u64>,
    traces: DistinctCount,
    worst: Option<(usize, u64)>,
}

impl SeedsAggregate {
    /// Adds one run (in seed order, for a deterministic result).
    pub fn add(&mut self, r: Outcome) {
        self.seeds_run += 1;
        let mut violated = 0;
        for (name, c) in &r.checks {
            let e = self.violating.entry(name.clone()).or_default();
            match c.verdict {
                Verdict::Violation => {
                    e.push(r.seed);
                    violated += 1;
                }
                Verdict::NotJudged => *self.not_judged.entry(name.clone()).or_default() += 1,
                Verdict::Safe => {}
            }
        }
        self.seeds_violating_any += u64::from(violated > 0);
        if violated > self.worst.map_or(0, |(n, _)| n) {
            self.worst = Some((violated, r.seed));
        }
        // The hash is 16 hex digits: 8 bytes per distinct history.
        self.traces
            .add(u64::from_str_radix(&r.trace_hash, 16).unwrap_or(0));
        if self.first_violation.is_none() && r.verdict() == Verdict::Violation {
            self.first_violation = Some(r.clone());
        }
        if self.first_any_violation.is_none() && violated > 0 {
            self.first_any_violation = Some(r.clone());
        }
        if self.first.is_none() {
            self.first = Some(r);
        }
    }

    /// How many runs were added.
    pub fn seeds_run(&self) -> u64 {
        self.seeds_run
    }

    /// The aggregate over every run added; `None` when none was.
    pub fn finish(self, scenario: &Scenario) -> Option<SeedsOutcome> {
        let shown = self
            .first_violation
            .or(self.first_any_violation)
            .or(self.first)?;
        let mut expectations = BTreeMap::new();
        for (name, seeds) in &self.violating {
            let observed = observed(seeds.len(), self.not_judged.get(name).copied());
            if let Some(expected) = scenario.held_to(name, observed) {
                expectations.insert(name.clone(), (expected, observed));
            }
        }
        Some(SeedsOutcome {
            shown,
            seeds_run: self.seeds_run,
            seeds_violating_any: self.seeds_violating_any,
            violating_seeds: self.violating,
            not_judged_seeds: self.not_judged,
            expectations,
            distinct_traces: self.traces.count(),
            worst_seed: self.worst.map(|(_, s)| s),
        })
    }
}

/// A check's verdict over many seeds: a violation when any seed violated it, not judged when it
/// violated none but could not judge some, else safe. A seed it could not judge is never counted
/// as safe: "safe on 200 seeds" must mean it looked at 200 runs.
fn observed(violating: u64, not_judged: Option<u64>) -> Verdict {
    if violating > 0 {
        Verdict::Violation
    } else if not_judged.is_some_and(|n| n > 0) {
        Verdict::NotJudged
    } else {
        Verdict::Safe
    }
}

/// A check whose verdict over the seeds differs from what the scenario expects.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// The check's name.
    pub check: String,
    /// What the scenario expects of it.
    pub expected: Verdict,
    /// What it found over the seeds.
    pub observed: Verdict,
    /// On how many seeds it found a violation.
    pub violating: u64,
    /// On how many seeds it could not judge.
    pub not_judged: u64,
}

impl Mismatch {
    /// How the check differs from its expectation, in the headline's words ("liveness violated
    /// on 200 of 200 seeds, expected safe").
    pub fn text(&self, seeds_run: u64) -> String {
        let on = |n: u64| {
            if seeds_run > 1 {
                format!(" on {n} of {seeds_run} seeds")
            } else {
                String::new()
            }
        };
        let what = match self.observed {
            Verdict::Violation => format!("violated{}", on(self.violating)),
            Verdict::NotJudged => format!("not judged{}", on(self.not_judged)),
            Verdict::Safe if seeds_run > 1 => format!("safe on all {seeds_run} seeds"),
            Verdict::Safe => "safe".to_string(),
        };
        format!("{} {what}, expected {}", self.check, self.expected)
    }
}

impl SeedsOutcome {
    /// A check's verdict over every seed (violated on any, else not judged on any, else safe).
    pub fn observed(&self, check: &str) -> Verdict {
        observed(
            self.violating_seeds.get(check).map_or(0, |s| s.len()),
            self.not_judged_seeds.get(check).copied(),
        )
    }

    /// Whether any check was violated on any seed: the report's headline word.
    pub fn any_violation(&self) -> bool {
        self.seeds_violating_any > 0
    }

    /// Every check whose verdict differs from its expectation, in report order.
    pub fn mismatches(&self) -> Vec<Mismatch> {
        let mut out: Vec<Mismatch> = self
            .expectations
            .iter()
            .filter(|(_, (e, o))| e != o)
            .map(|(name, &(expected, observed))| Mismatch {
                check: name.clone(),
                expected,
                observed,
                violating: self.violating_seeds.get(name).map_or(0, |s| s.len()),
                not_judged: self.not_judged_seeds.get(name).copied().unwrap_or(0),
            })
            .collect();
        out.sort_by_key(|m| check::CHECK_NAMES.iter().position(|n| *n == m.check));
        out
    }

    /// Aggregates runs: a check is a violation over the seeds when any seed violated it, so
    /// "expect violation" means at least one seed found it and "expect safe" means none did.
    pub fn aggregate(scenario: &Scenario, runs: Vec<Outcome>) -> SeedsOutcome {
        let mut agg = SeedsAggregate::default();
        for r in runs {
            agg.add(r);
        }
        agg.finish(scenario).expect("at least one seed")
    }

    /// The mutual-exclusion verdict over all seeds.
    pub fn verdict(&self) -> Verdict {
        self.expectations
            .get(check::MUTUAL_EXCLUSION)
            .map(|&(_, o)| o)
            .unwrap_or_else(|| self.shown.verdict())
    }

    /// Whether every stated expectation was met: the exit code of `lockcheck run`.
    pub fn matches_expectation(&self) -> bool {
        self.expectations.values().all(|(e, o)| e == o)
    }

    /// The headline word: VIOLATION when any check was violated on any seed, else SAFE. Every
    /// check counts, not only mutual exclusion: a lock that never lets two holders in but leaves
    /// its waiters stuck is not "SAFE". The text report and the HTML page both read it.
    pub fn headline_word(&self) -> &'static str {
        if self.any_violation() {
            "VIOLATION"
        } else {
            "SAFE"
        }
    }

    /// What the parenthesis of the headline says: each check that differs from its expectation
    /// ("NOT AS EXPECTED: liveness violated on 200 of 200 seeds, expected safe"), or, when all
    /// are as expected, what was violated (`docs/checks.md`, the headline).
    pub fn expectation_text(&self, scenario: &Scenario) -> String {
        let mismatches = self.mismatches();
        if !mismatches.is_empty() {
            let each: Vec<String> = mismatches.iter().map(|m| m.text(self.seeds_run)).collect();
            return format!("NOT AS EXPECTED: {}", each.join("; "));
        }
        let violated = self.violated_checks();
        if violated.iter().all(|c| *c == check::MUTUAL_EXCLUSION) {
            return format!("as expected: expected {}", scenario.expect);
        }
        let me = if violated.contains(&check::MUTUAL_EXCLUSION) {
            String::new()
        } else {
            format!(
                ", {} {}",
                check::MUTUAL_EXCLUSION,
                self.observed(check::MUTUAL_EXCLUSION)
            )
        };
        format!("as expected: {} violated{me}", violated.join(", "))
    }

    /// The checks violated on some seed, in report order.
    pub fn violated_checks(&self) -> Vec<&'static str> {
        check::CHECK_NAMES
            .iter()
            .copied()
            .filter(|c| self.violating_seeds.get(*c).is_some_and(|s| !s.is_empty()))
            .collect()
    }
}

#[cfg(test)]
mod capacity_tests {
    use super::*;

    /// The default liveness bound is three of Redisson's default watchdog leases.
    #[test]
    fn default_liveness_bound_is_three_redisson_leases() {
        assert_eq!(
            check::DEFAULT_LIVENESS_BOUND_MS,
            3 * crate::lock::redis_options::DEFAULT_WATCHDOG_TIMEOUT_MS
        );
    }

    #[test]
    fn capacity_is_bounded_by_cycles_duration_and_think_time() {
        let s = |extra: &str| {
            Scenario::parse(
                "t.toml",
                &format!(
                    "name = \"t\"\nexpect = \"safe\"\nduration_ms = 6000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 1000\n[workload]\n{extra}"
                ),
            )
            .unwrap()
        };
        // 3 x 15 = 45 cycles asked; serialised 150 ms sections fit 41 into 6 s.
        assert_eq!(
            Scenario::capacity(&s("clients = 3\ncycles = 15\nhold_ms = [100, 200]\n")),
            41
        );
        assert_eq!(
            Scenario::capacity(&s("clients = 3\ncycles = 5\nhold_ms = [100, 200]\n")),
            15
        );
        // One client that thinks as long as it holds: half the time.
        assert_eq!(
            Scenario::capacity(&s(
                "clients = 1\ncycles = 100\nhold_ms = [100, 100]\nthink_ms = [100, 100]\n"
            )),
            31
        );
    }
}
