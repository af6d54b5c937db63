//! What `lockcheck run` does: load scenarios, run them over seeds in simulation or on real
//! processes, judge them, and print the report. The CLI (`main.rs`) only parses arguments.

use crate::cli::report;
use crate::exec::{run_ordered, Shard};
use crate::judge::{Mode, Outcome, SeedsAggregate, SeedsOutcome};
use crate::scenario::Scenario;
use std::path::{Path, PathBuf};

/// Exit code when every outcome matched its expectation.
pub const EXIT_MATCH: i32 = 0;
/// Exit code when some outcome did not match its expectation.
pub const EXIT_MISMATCH: i32 = 1;
/// Exit code for bad input or a missing dependency.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code of `lockcheck model --max-depth N` when the search was cut at N steps and found
/// nothing: not 0, since that is no proof, and not 1, since nothing contradicts the model's
/// expectation either; its own code lets CI tell a bounded search from both.
pub const EXIT_BOUNDED: i32 = 3;

/// The most seeds one `--seeds` may ask for.
pub const MAX_SEEDS: u64 = 10_000_000;

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
    /// `--seed`: the first seed (default: the scenario's).
    pub seed: Option<u64>,
    /// `--seeds N`: how many consecutive seeds.
    pub seeds: Option<u64>,
    /// `--real`: spawned `redis-server`s instead of the simulator.
    pub real: bool,
    /// `--json`: one JSON object instead of text.
    pub json: bool,
    /// Print the whole history of the run shown, one event per line (text output only).
    pub history: bool,
    /// Worker threads (0: every core; with `real`, 0 is one run at a time, N runs N side by
    /// side).
    pub jobs: usize,
    /// This CI job's slice: of the seeds for one file, of the files for a directory.
    pub shard: Option<Shard>,
    /// `--junit FILE` and `--report DIR`.
    pub artifacts: crate::suite::Artifacts,
    /// `--redis`: run against these servers (lockcheck did not start them) without server
    /// faults; implies real mode.
    pub redis: Option<crate::backend::redis::real::external::ExternalRedis>,
    /// The lock kinds scenarios may name: lockcheck's, and those the program registered.
    pub locks: crate::registry::Registry,
    /// `--no-budget`: run a scenario whose estimate is over the default budget
    /// (`cli::budget`).
    pub no_budget: bool,
}

impl RunOptions {
    /// The threads to use: `jobs`, every core when 0. Real runs mostly wait on their servers,
    /// and each spawns its own on free ports and in its own directories, so `--real --jobs N`
    /// runs N side by side; unset (0), one at a time, so a run's timing is its own. Servers
    /// lockcheck did not start (`--redis`) hold one key space: one run at a time, always.
    pub fn threads(&self) -> usize {
        if self.redis.is_some() {
            1
        } else if self.real {
            self.jobs.max(1)
        } else if self.jobs == 0 {
            crate::exec::default_jobs()
        } else {
            self.jobs
        }
    }
}

/// Runs and judges one seed of a scenario in the mode asked for.
fn run_seed(scenario: &Scenario, opts: &RunOptions, seed: u64) -> Result<Outcome, BadInput> {
    let real = opts.real || opts.redis.is_some();
    if let Some(ext) = &opts.redis {
        let history = opts
            .locks
            .run_external(scenario, seed, ext)
            .map_err(|e| BadInput(e.to_string()))?;
        let mut outcome = Outcome::judge(scenario, Mode::Real, seed, history);
        let shown: Vec<String> = ext
            .urls
            .iter()
            .map(|u| crate::backend::redis::real::external::redact(u))
            .collect();
        outcome.redis = Some(shown.join(","));
        return Ok(outcome);
    }
    if !real && scenario.lock.kind.is_client_program() {
        return Err(BadInput(format!(
            "{}: lock kind `client-program` runs the client program against real servers lockcheck spawns; \
             the simulator cannot run another program inside it: add --real",
            scenario.name
        )));
    }
    if real {
        let history = opts
            .locks
            .run_real(scenario, seed)
            .map_err(|e| BadInput(e.to_string()))?;
        Ok(Outcome::judge(scenario, Mode::Real, seed, history))
    } else {
        let run = opts.locks.run_sim(scenario, seed);
        Ok(Outcome::judge(scenario, Mode::Sim, seed, run.history))
    }
}

/// Runs one scenario over its seeds (this shard's share of them) on `opts.threads()` threads,
/// folding each run into the aggregate as it finishes. `None` when the shard has no seeds.
pub fn run_scenario(
    scenario: &Scenario,
    opts: &RunOptions,
) -> Result<Option<SeedsOutcome>, BadInput> {
    let first = opts.seed.unwrap_or(scenario.seed);
    let n = opts.seeds.unwrap_or(1);
    if !(1..=MAX_SEEDS).contains(&n) {
        return Err(BadInput(format!(
            "--seeds {n}: give a number of seeds from 1 to {MAX_SEEDS}"
        )));
    }
    let indices = opts.shard.unwrap_or(Shard::WHOLE).indices(n);
    let (runs, real) = (indices.len() as u64, opts.real || opts.redis.is_some());
    super::budget::check(scenario, runs, opts.threads(), real, opts.no_budget)?;
    let bar = if n > 1 {
        crate::progress::bar(indices.len() as u64, "seeds", &scenario.name)
    } else {
        crate::progress::hidden()
    };
    let mut agg = SeedsAggregate::default();
    let mut error = None;
    let mut violating = 0;
    super::run_progress::watched(scenario, runs, real, || {
        run_ordered(
            &indices,
            opts.threads(),
            |i| run_seed(scenario, opts, first.saturating_add(i)),
            |_, r| match r {
                Ok(o) => {
                    // Any check's violation counts: the bar must not read "0 violated" while
                    // liveness fails on every seed.
                    violating += u64::from(
                        o.checks
                            .values()
                            .any(|c| c.verdict == crate::check::Verdict::Violation),
                    );
                    agg.add(o);
                    bar.tick(agg.seeds_run(), Some(violating));
                    true
                }
                Err(e) => {
                    error = Some(e);
                    false
                }
            },
        )
    });
    bar.finish();
    match error {
        Some(e) => Err(e),
        None => Ok(agg.finish(scenario)),
    }
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
        match opts.locks.load(f) {
            Ok(s) => scenarios.push(s),
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    }
    for w in scenarios.iter().flat_map(|s| &s.warnings) {
        eprintln!("warning: {w}");
    }
    if opts.real {
        for s in &scenarios {
            for w in crate::scenario::input::real_mode_warnings(s) {
                eprintln!(
                    "warning: {}: {w}",
                    s.path.as_deref().unwrap_or(path).display()
                );
            }
        }
    }
    let directory = path.is_dir();
    let mut suite = crate::suite::Suite::new(crate::suite::title(path), opts.artifacts.clone());
    let mut all_match = true;
    let mut json_results = Vec::new();
    let mut error = None;
    let mut ran = 0usize;
    // A directory runs its files in parallel (each file's seeds on one thread) and shards the
    // files; a single file runs and shards its seeds.
    let (file_indices, per_file) = if directory {
        let shard = opts.shard.unwrap_or(Shard::WHOLE);
        let per_file = RunOptions {
            jobs: 1,
            shard: None,
            ..opts.clone()
        };
        let mut indices = shard.indices(scenarios.len() as u64);
        // A directory lists what cannot run in this mode and goes on; a single file is an error.
        suite.skip_unrunnable(&scenarios, &mut indices, opts.real, opts.json);
        (indices, per_file)
    } else {
        (vec![0], opts.clone())
    };
    let threads = if directory { opts.threads() } else { 1 };
    run_ordered(
        &file_indices,
        threads,
        |i| crate::suite::timed(|| run_scenario(&scenarios[i as usize], &per_file)),
        |i, (r, time)| {
            let s = &scenarios[i as usize];
            let outcome = match r {
                Ok(Some(o)) => o,
                Ok(None) => return true,
                Err(e) => {
                    error = Some(BadInput(format!("{}: {e}", files[i as usize].display())));
                    return false;
                }
            };
            ran += 1;
            if let Err(e) = suite.add(s, &outcome, time) {
                error = Some(BadInput(e));
                return false;
            }
            all_match &= outcome.matches_expectation();
            if opts.json {
                json_results.push(report::json(s, &outcome));
            } else if directory {
                crate::outln!("{}", report::line(s, &outcome));
            } else {
                crate::out!("{}", report::text(s, &outcome));
                if opts.history {
                    crate::outln!("history:");
                    crate::out!("{}", outcome.shown.history.render());
                }
            }
            true
        },
    );
    if let Some(e) = error {
        eprintln!("error: {e}");
        return EXIT_BAD_INPUT;
    }
    if let Err(e) = suite.finish() {
        eprintln!("error: {e}");
        return EXIT_BAD_INPUT;
    }
    if ran == 0 && !directory {
        let shard = opts.shard.unwrap_or(Shard::WHOLE);
        crate::outln!("shard {shard}: no seeds to run");
        return EXIT_MATCH;
    }
    if opts.json {
        let v = if directory {
            serde_json::json!({ "matches_expectation": all_match, "scenarios": json_results })
        } else {
            json_results.pop().unwrap_or_default()
        };
        crate::outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if directory {
        crate::outln!(
            "{} — {}",
            suite.summary(),
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

#[cfg(test)]
mod threads {
    use super::RunOptions;

    /// `--real` runs one scenario at a time unless `--jobs` asks for more; servers lockcheck did
    /// not start are never shared by two runs; simulation uses every core by default.
    #[test]
    fn real_runs_go_side_by_side_only_when_asked() {
        let opts = |real, jobs| RunOptions {
            real,
            jobs,
            ..RunOptions::default()
        };
        assert_eq!(opts(true, 0).threads(), 1);
        assert_eq!(opts(true, 4).threads(), 4);
        assert_eq!(opts(false, 3).threads(), 3);
        assert_eq!(opts(false, 0).threads(), crate::exec::default_jobs());
        let external = RunOptions {
            redis: Some(
                crate::backend::redis::real::external::ExternalRedis::parse(
                    "redis://127.0.0.1:1/",
                    None,
                )
                .unwrap(),
            ),
            ..opts(true, 4)
        };
        assert_eq!(external.threads(), 1);
    }
}

#[cfg(test)]
mod exit_codes {
    /// A failed write to stdout ends with the bad-input code, as every other failure outside the
    /// lock's verdict does.
    #[test]
    fn stdout_failure_is_the_bad_input_code() {
        assert_eq!(super::EXIT_BAD_INPUT, crate::stdout::WRITE_FAILED_EXIT);
    }
}
