//! What `lockcheck run` does: load scenarios, run them over seeds in simulation or on real
//! processes, judge them, and print the report. The CLI (`main.rs`) only parses arguments.

use crate::report;
use crate::scenario::Scenario;
use crate::verdict::{Mode, Outcome, SeedsOutcome};
use std::path::{Path, PathBuf};

/// Exit code when every outcome matched its expectation.
pub const EXIT_MATCH: i32 = 0;
/// Exit code when some outcome did not match its expectation.
pub const EXIT_MISMATCH: i32 = 1;
/// Exit code for bad input or a missing dependency.
pub const EXIT_BAD_INPUT: i32 = 2;

/// An error that stops a run before any verdict: bad input or a missing dependency.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Options of `lockcheck run`.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub seed: Option<u64>,
    pub seeds: Option<u64>,
    pub real: bool,
    pub json: bool,
    /// Print the whole history of the run shown, one event per line (text output only).
    pub history: bool,
}

/// Runs one scenario (over its seeds) in the mode asked for.
pub fn run_scenario(scenario: &Scenario, opts: &RunOptions) -> Result<SeedsOutcome, BadInput> {
    let first = opts.seed.unwrap_or(scenario.seed);
    let n = opts.seeds.unwrap_or(1).max(1);
    let mut runs = Vec::with_capacity(n as usize);
    for seed in first..first.saturating_add(n) {
        let outcome = if opts.real {
            let history =
                crate::real::world::run(scenario, seed).map_err(|e| BadInput(e.to_string()))?;
            Outcome::judge(scenario, Mode::Real, seed, history)
        } else {
            let run = crate::sim::run(scenario, seed);
            Outcome::judge(scenario, Mode::Sim, seed, run.history)
        };
        runs.push(outcome);
    }
    Ok(SeedsOutcome::aggregate(scenario, runs))
}

/// The scenario files a path names: the file itself, or every `*.toml` in a directory, sorted.
pub fn scenario_files(path: &Path) -> Result<Vec<PathBuf>, BadInput> {
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| BadInput(format!("cannot read directory {}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(BadInput(format!(
                "{} has no *.toml scenario files",
                path.display()
            )));
        }
        Ok(files)
    } else if path.exists() {
        Ok(vec![path.to_path_buf()])
    } else {
        Err(BadInput(format!(
            "{}: no such scenario file or directory",
            path.display()
        )))
    }
}

/// `lockcheck run`: returns the exit code; prints the report to stdout, errors to stderr.
pub fn run_command(path: &Path, opts: &RunOptions) -> i32 {
    let files = match scenario_files(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    // Parse everything first: a typo in one file must not surface after minutes of runs.
    let mut scenarios = Vec::new();
    for f in &files {
        match Scenario::load(f) {
            Ok(s) => scenarios.push(s),
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    let directory = path.is_dir();
    let mut all_match = true;
    let mut json_results = Vec::new();
    for s in &scenarios {
        let outcome = match run_scenario(s, opts) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        };
        all_match &= outcome.matches_expectation();
        if opts.json {
            json_results.push(report::json(s, &outcome));
        } else if directory {
            println!("{}", report::line(s, &outcome));
        } else {
            print!("{}", report::text(s, &outcome));
            if opts.history {
                println!("history:");
                print!("{}", outcome.shown.history.render());
            }
        }
    }
    if opts.json {
        let v = if directory {
            serde_json::json!({ "matches_expectation": all_match, "scenarios": json_results })
        } else {
            json_results.pop().unwrap_or_default()
        };
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if directory {
        let passed = scenarios.len();
        println!(
            "{} scenario(s): {}",
            passed,
            if all_match {
                "all as expected"
            } else {
                "SOME NOT AS EXPECTED"
            }
        );
    }
    if all_match {
        EXIT_MATCH
    } else {
        EXIT_MISMATCH
    }
}
