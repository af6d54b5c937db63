//! The `lockcheck` command line. Argument parsing only; the work is in the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc: the simulator allocates per command and per event, and Lua allocates through Rust's
/// allocator; mimalloc makes that cheaper than the system allocator (README, "Speed").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Deterministic simulation and verification harness for distributed locks.
#[derive(Parser)]
#[command(name = "lockcheck", version, about, long_about = None)]
struct Cli {
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
        /// Worker threads (default: every core). Output is the same for any value.
        #[arg(long, value_name = "J")]
        jobs: Option<usize>,
        /// Run only slice i of n (of the seeds for one file, of the files for a directory), so
        /// that n CI jobs together do exactly the work of one.
        #[arg(long, value_name = "i/n", value_parser = parse_shard)]
        shard: Option<lockcheck::exec::Shard>,
        #[command(flatten)]
        artifacts: lockcheck::suite::Artifacts,
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
        #[arg(long, value_name = "N", default_value_t = lockcheck::explore::DEFAULT_CASES)]
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
        shard: Option<lockcheck::exec::Shard>,
        /// Run the whole budget and count every violating case (the first is still the one
        /// shrunk and written).
        #[arg(long)]
        keep_going: bool,
        #[command(flatten)]
        artifacts: lockcheck::suite::Artifacts,
    },
    /// Model-check a lock design (stateright): BFS prints the shortest counterexample, DFS
    /// proves the property within the bound.
    ///
    /// Exit code 0 when the result matches the model's declared expectation for this
    /// configuration, 1 when it does not, 2 on bad input. Models: lease, failover, redlock,
    /// redisson, fencing.
    Model {
        /// The model: lease, failover, redlock, redisson, fencing.
        name: String,
        /// The property to check (default: the model's main one, e.g. mutual_exclusion).
        #[arg(long)]
        property: Option<String>,
        /// Breadth-first search: finds the shortest counterexample (the default).
        #[arg(long, conflicts_with = "dfs")]
        bfs: bool,
        /// Depth-first search: less memory, for exhaustive proofs within the bound.
        #[arg(long)]
        dfs: bool,
        /// Stop exploring past this many steps.
        #[arg(long, value_name = "N")]
        max_depth: Option<usize>,
        /// A model parameter, key=value (repeatable); an unknown key lists the valid ones.
        #[arg(long = "param", value_name = "K=V")]
        params: Vec<String>,
        /// Checker threads; 0 (the default): every core for DFS proofs, one for BFS (only a
        /// single-threaded BFS guarantees the shortest counterexample).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Serve stateright's Explorer on this address (e.g. 127.0.0.1:3000) instead of checking.
        #[arg(long, value_name = "ADDR")]
        explore: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Write the counterexample as a scenario file that `lockcheck run` replays.
        #[arg(long, value_name = "OUT.toml")]
        emit_scenario: Option<PathBuf>,
        /// Write the result as an HTML page into this directory (the counterexample step by step).
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
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
        artifacts: lockcheck::suite::Artifacts,
    },
}

/// `--seed`: a seed a scenario file can hold (TOML integers are signed 64-bit).
fn seed_range() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(0..=i64::MAX as u64)
}

/// `--seeds`: at least one, at most [`lockcheck::cli::run::MAX_SEEDS`].
fn seeds_range() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=lockcheck::cli::run::MAX_SEEDS)
}

fn parse_shard(s: &str) -> Result<lockcheck::exec::Shard, String> {
    lockcheck::exec::Shard::parse(s).map_err(|e| e.to_string())
}

fn jobs_or_all(jobs: Option<usize>) -> usize {
    jobs.filter(|&j| j > 0)
        .unwrap_or_else(lockcheck::exec::default_jobs)
}

fn main() {
    // A panic or Ctrl-C anywhere kills every server and client program this run started.
    lockcheck::real::install_cleanup_handlers();
    let cli = Cli::parse();
    let code = match cli.command {
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
            artifacts,
        } => lockcheck::cli::run::run_command(
            &path,
            &lockcheck::cli::run::RunOptions {
                seed,
                seeds,
                real,
                json,
                history,
                jobs: jobs_or_all(jobs),
                shard,
                artifacts,
                redis: redis.map(|urls| {
                    lockcheck::real::external::ExternalRedis::parse(&urls, key_prefix)
                        .unwrap_or_else(|e| {
                            eprintln!("error: {e}");
                            std::process::exit(lockcheck::cli::run::EXIT_BAD_INPUT)
                        })
                }),
            },
        ),
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
            artifacts,
        } => {
            let time_limit = match time_limit.map(std::time::Duration::try_from_secs_f64) {
                Some(Ok(t)) if !t.is_zero() => Some(t),
                None => None,
                Some(_) => {
                    eprintln!(
                        "error: --time-limit {}: give a positive number of seconds",
                        time_limit.unwrap_or_default()
                    );
                    std::process::exit(lockcheck::cli::run::EXIT_BAD_INPUT);
                }
            };
            lockcheck::cli::explore::explore_command(
                &path,
                &lockcheck::cli::explore::ExploreOptions {
                    cases,
                    seed,
                    time_limit,
                    check,
                    json,
                    out,
                    jobs: jobs_or_all(jobs),
                    shard: shard.unwrap_or(lockcheck::exec::Shard::WHOLE),
                    keep_going,
                    artifacts,
                },
            )
        }
        Command::Model {
            name,
            property,
            bfs: _,
            dfs,
            max_depth,
            params,
            threads,
            explore,
            json,
            emit_scenario,
            report,
        } => lockcheck::cli::model::ModelCommand {
            name,
            property,
            dfs,
            max_depth,
            params,
            threads,
            explore,
            json,
            emit_scenario,
            report,
        }
        .run(),
        Command::List => {
            lockcheck::out!("{}", lockcheck::cli::list::list());
            0
        }
        Command::Table {
            path,
            seeds,
            real,
            jobs,
            artifacts,
        } => {
            let dir = match path.map_or_else(lockcheck::cli::list::scenario_dir, Ok) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(lockcheck::cli::run::EXIT_BAD_INPUT);
                }
            };
            let opts = lockcheck::cli::table::TableOptions {
                seeds,
                real,
                jobs: jobs_or_all(jobs),
                artifacts,
            };
            match lockcheck::cli::table::table(&dir, &opts) {
                Ok(t) => {
                    lockcheck::out!("{t}");
                    0
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    lockcheck::cli::run::EXIT_BAD_INPUT
                }
            }
        }
    };
    std::process::exit(code);
}
