//! Judging a run: every checker over the history, each verdict against the scenario's expectation.

use crate::check::{self, CheckResult};
use crate::history::History;
use crate::scenario::{Scenario, Verdict};
use std::collections::BTreeMap;

/// Simulation or real `redis-server` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sim,
    Real,
}

impl Mode {
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
    pub scenario: String,
    pub path: Option<String>,
    pub mode: Mode,
    pub seed: u64,
    pub checks: BTreeMap<String, CheckResult>,
    pub trace_hash: String,
    pub history: History,
}

impl Outcome {
    /// Runs every checker over `history`.
    pub fn judge(scenario: &Scenario, mode: Mode, seed: u64, history: History) -> Outcome {
        let checks = check::for_scenario(scenario)
            .into_iter()
            .map(|c| (c.name().to_string(), c.check(&history)))
            .collect();
        Outcome {
            scenario: scenario.name.clone(),
            path: scenario.path.as_ref().map(|p| p.display().to_string()),
            mode,
            seed,
            checks,
            trace_hash: history.trace_hash(),
            history,
        }
    }

    /// The headline verdict: mutual exclusion.
    pub fn verdict(&self) -> Verdict {
        self.checks["mutual_exclusion"].verdict
    }

    /// The command line that reproduces this run.
    pub fn replay(&self) -> String {
        let path = self
            .path
            .clone()
            .unwrap_or_else(|| "<scenario.toml>".into());
        let real = if self.mode == Mode::Real {
            " --real"
        } else {
            ""
        };
        format!("lockcheck run {path} --seed {}{real}", self.seed)
    }
}

/// The result of running one scenario over one or more seeds.
#[derive(Clone, Debug)]
pub struct SeedsOutcome {
    /// The run to show: the first that violated mutual exclusion, else the first.
    pub shown: Outcome,
    pub seeds_run: u64,
    /// Per check: the seeds whose run violated it.
    pub violating_seeds: BTreeMap<String, Vec<u64>>,
    /// Per check with an expectation: (expected, observed over all seeds).
    pub expectations: BTreeMap<String, (Verdict, Verdict)>,
}

impl SeedsOutcome {
    /// Aggregates runs: a check is a violation over the seeds when any seed violated it, so
    /// "expect violation" means at least one seed found it and "expect safe" means none did.
    pub fn aggregate(scenario: &Scenario, runs: Vec<Outcome>) -> SeedsOutcome {
        assert!(!runs.is_empty(), "at least one seed");
        let mut violating: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for r in &runs {
            for (name, c) in &r.checks {
                let e = violating.entry(name.clone()).or_default();
                if c.verdict == Verdict::Violation {
                    e.push(r.seed);
                }
            }
        }
        let mut expectations = BTreeMap::new();
        for name in violating.keys() {
            if let Some(expected) = scenario.expected(name) {
                let observed = if violating[name].is_empty() {
                    Verdict::Safe
                } else {
                    Verdict::Violation
                };
                expectations.insert(name.clone(), (expected, observed));
            }
        }
        let seeds_run = runs.len() as u64;
        let first_violating = violating
            .get("mutual_exclusion")
            .and_then(|v| v.first().copied());
        let shown = runs
            .iter()
            .find(|r| Some(r.seed) == first_violating)
            .unwrap_or(&runs[0])
            .clone();
        SeedsOutcome {
            shown,
            seeds_run,
            violating_seeds: violating,
            expectations,
        }
    }

    /// The mutual-exclusion verdict over all seeds.
    pub fn verdict(&self) -> Verdict {
        self.expectations
            .get("mutual_exclusion")
            .map(|&(_, o)| o)
            .unwrap_or_else(|| self.shown.verdict())
    }

    pub fn matches_expectation(&self) -> bool {
        self.expectations.values().all(|(e, o)| e == o)
    }
}
