//! The command line every harness binary has: `lockcheck` itself, and a user's binary that
//! registered locks of its own (`Harness::lock`). Argument parsing only, beside the subcommands
//! it calls, given the program's [`Registry`] so a scenario may name any of its lock kinds;
//! `harness/` builds it with the program's own name and locks.

use crate::registry::Registry;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Deterministic simulation and verification harness for distributed locks.
#[derive(Parser)]
#[command(name = "lockcheck", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file, or every scenario in a directory, and judge it against its `expect`.
    ///
    /// Exit code 0: every outcome matched its expectation; 1: some did not; 2: bad input or a
    /// missing dependency.
    Run {
        /// A scenario .toml file, or a directory of them (the CI suite).
        path: PathBuf,
        /// Seed to run (default: the scenario's `seed`), 0 to 2^63-1 (what a scenario's `seed`
        /// holds).
        #[arg(long, value_parser = seed_range())]
        seed: Option<u64>,
        /// Run N seeds: seed, seed+1, ..., seed+N-1 (N from 1 to 10000000). Expect violation
        /// means at least one seed violated; expect safe means none did.
        #[arg(long, value_name = "N", value_parser = seeds_range())]
        seeds: Option<u64>,
        /// Run on real redis-server processes that lockcheck spawns, instead of the simulator.
        #[arg(long)]
        real: bool,
        /// Run the workload against your own Redis instead (comma-separated URLs, one per
        /// master for Redlock), without server faults; lockcheck deletes only its own keys.
        #[arg(long, value_name = "URL[,URL...]")]
        redis: Option<String>,
        /// Prefix of every key written with --redis (default: a fresh `lockcheck:<uuid>:`).
        #[arg(long, value_name = "PREFIX", requires = "redis")]
        key_prefix: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// After the report, print the run's whole history (every event, true time in ms).
        #[arg(long)]
        history: bool,
        /// Worker threads (default: every core). Output is the same for any value. With --real,
        /// J runs side by side, each on servers of its own (default: one at a time).
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
        /// Run only slice i of n (of the seeds for one file, of the files for a directory), so
        /// that n CI jobs together do exactly the work of one.
        #[arg(long, value_name = "i/n", value_parser = parse_shard)]
        shard: Option<crate::exec::Shard>,
        /// Run even when the estimate (time, memory) is over the default budget of 10 min and
        /// 4 GB per scenario; a run that cannot fit in the available memory is still refused.
        #[arg(long)]
        no_budget: bool,
        #[command(flatten)]
        artifacts: crate::suite::Artifacts,
    },
    /// Search a scenario's space of fault schedules, workloads and seeds for a violation
    /// (proptest), shrink it, and write it as a scenario that `lockcheck run` replays.
    ///
    /// The space is the scenario's `[explore]` table, or a default for its lock kind. Exit code
    /// 1: a violation was found; 0: the budget ran out with none; 2: bad input.
    Explore {
        /// The scenario to start from (its lock, cluster, workload; its faults are ignored).
        path: PathBuf,
        /// Cases to try.
        #[arg(long, value_name = "N", default_value_t = crate::explore::DEFAULT_CASES)]
        cases: u64,
        /// Search seed: the same seed and case count draw the same cases.
        #[arg(long, value_name = "S", default_value_t = 0)]
        seed: u64,
        /// Stop drawing cases after this many seconds (the result then depends on speed).
        #[arg(long, value_name = "SECS")]
        time_limit: Option<f64>,
        /// Only this checker's violations count (default: any checker's).
        #[arg(long, value_name = "NAME")]
        check: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Where to write the minimal scenario (default: <input>.found.toml beside the input).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Worker threads (default: every core). Output is the same for any value.
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
        /// Try only slice i of n of the cases.
        #[arg(long, value_name = "i/n", value_parser = parse_shard)]
        shard: Option<crate::exec::Shard>,
        /// Run the whole budget and count every violating case (the first is still the one
        /// shrunk and written).
        #[arg(long)]
        keep_going: bool,
        /// Run each case on redis-server (or MariaDB) and client processes that lockcheck
        /// spawns, one set per case (`--jobs` cases at once), instead of the simulator. A
        /// violation is confirmed by rerunning it, shrunk while it violates in at least one of
        /// `--runs` runs, and written with its reproduction rate. Any lock kind, `process`
        /// included.
        #[arg(long)]
        real: bool,
        /// With --real: runs per confirmation and per shrink candidate.
        #[arg(long, value_name = "K", default_value_t = crate::explore::real::DEFAULT_RUNS)]
        runs: u32,
        /// Shrink at most this many steps (default: 2000 in simulation, 32 with --real, where a
        /// step is one or more rounds of --jobs real runs, decided by the confirmed rate).
        #[arg(long, value_name = "N")]
        shrink_steps: Option<u32>,
        #[command(flatten)]
        artifacts: crate::suite::Artifacts,
    },
    /// Model-check a lock design (stateright): BFS prints the shortest counterexample, DFS
    /// proves the property within the bound.
    ///
    /// Exit code 0 when the result matches the model's declared expectation for this
    /// configuration, 1 when it does not, 2 on bad input. Models: lease, failover, redlock,
    /// redisson, fencing, zk-session.
    Model(crate::cli::model::ModelCommand),
    /// List lock kinds, fault kinds and bundled scenarios.
    List,
    /// Run the bundled scenarios (or a directory of them) and print the lock x fault table in
    /// markdown (docs/lock-fault-table.md is its output).
    Table {
        /// A directory of scenarios (default: $LOCKCHECK_SCENARIOS, else ./scenarios).
        path: Option<PathBuf>,
        /// Simulation seeds per scenario (1 to 10000000).
        #[arg(long, value_name = "N", default_value_t = 5, value_parser = seeds_range())]
        seeds: u64,
        /// Also run every scenario once on real redis-server processes.
        #[arg(long)]
        real: bool,
        /// Worker threads for the simulated runs (default: every core).
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
        #[command(flatten)]
        artifacts: crate::suite::Artifacts,
    },
}

/// `--seed`: a seed a scenario file can hold (TOML integers are signed 64-bit).
fn seed_range() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(0..=i64::MAX as u64)
}

/// `--seeds`: at least one, at most [`crate::cli::run::MAX_SEEDS`].
fn seeds_range() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=crate::cli::run::MAX_SEEDS)
}

fn parse_shard(s: &str) -> Result<crate::exec::Shard, String> {
    crate::exec::Shard::parse(s).map_err(|e| e.to_string())
}

fn jobs_or_all(jobs: Option<usize>) -> usize {
    jobs.filter(|&j| j > 0)
        .unwrap_or_else(crate::exec::default_jobs)
}

/// Runs the command `cli` asks for with the lock kinds of `locks`; returns the exit code.
pub(crate) fn run(cli: Cli, locks: &Registry) -> i32 {
    use crate::cli::run::EXIT_BAD_INPUT;
    let bad_input = |m: String| {
        eprintln!("error: {m}");
        EXIT_BAD_INPUT
    };
    match cli.command {
        Command::Run {
            path,
            seed,
            seeds,
            real,
            redis,
            key_prefix,
            json,
            history,
            jobs,
            shard,
            no_budget,
            artifacts,
        } => {
            let redis = match redis
                .map(|urls| {
                    crate::backend::redis::real::external::ExternalRedis::parse(&urls, key_prefix)
                })
                .transpose()
            {
                Ok(r) => r,
                Err(e) => return bad_input(e.to_string()),
            };
            crate::cli::run::run_command(
                &path,
                &crate::cli::run::RunOptions {
                    seed,
                    seeds,
                    real,
                    json,
                    history,
                    jobs: jobs.unwrap_or(0),
                    shard,
                    artifacts,
                    redis,
                    locks: locks.clone(),
                    no_budget,
                },
            )
        }
        Command::Explore {
            path,
            cases,
            seed,
            time_limit,
            check,
            json,
            out,
            jobs,
            shard,
            keep_going,
            real,
            runs,
            shrink_steps,
            artifacts,
        } => {
            let time_limit = match time_limit.map(std::time::Duration::try_from_secs_f64) {
                Some(Ok(t)) if !t.is_zero() => Some(t),
                None => None,
                Some(_) => {
                    return bad_input(format!(
                        "--time-limit {}: give a positive number of seconds",
                        time_limit.unwrap_or_default()
                    ))
                }
            };
            crate::cli::explore::explore_command(
                &path,
                &crate::cli::explore::ExploreOptions {
                    cases,
                    seed,
                    time_limit,
                    check,
                    json,
                    out,
                    jobs: jobs_or_all(jobs),
                    shard: shard.unwrap_or(crate::exec::Shard::WHOLE),
                    keep_going,
                    artifacts,
                    locks: locks.clone(),
                    real,
                    runs,
                    shrink_steps,
                },
            )
        }
        Command::Model(model) => model.run(),
        Command::List => {
            crate::out!("{}", crate::cli::list::list(locks));
            0
        }
        Command::Table {
            path,
            seeds,
            real,
            jobs,
            artifacts,
        } => {
            let dir = match path.map_or_else(crate::cli::list::scenario_dir, Ok) {
                Ok(d) => d,
                Err(e) => return bad_input(e),
            };
            let opts = crate::cli::table::TableOptions {
                seeds,
                real,
                jobs: jobs_or_all(jobs),
                artifacts,
                locks: locks.clone(),
            };
            match crate::cli::table::table(&dir, &opts) {
                Ok(t) => {
                    crate::out!("{t}");
                    0
                }
                Err(e) => bad_input(e.to_string()),
            }
        }
    }
}
