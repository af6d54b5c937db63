//! `lockcheck model`: run a stateright model of a lock design, print the shortest
//! counterexample (BFS) or the size of a bounded proof (DFS), and turn a counterexample into a
//! scenario file the simulator (and, where the faults exist, real mode) can replay.

use crate::cli::run::{EXIT_BAD_INPUT, EXIT_BOUNDED, EXIT_MATCH, EXIT_MISMATCH};
use lockcheck_models::{ModelReport, RunOptions, Strategy};
use std::path::PathBuf;

/// Options of `lockcheck model`, as its command line reads them.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ModelCommand {
    /// The model: lease, failover, redlock, redisson, fencing, zk-session.
    pub name: String,
    /// The property to check (default: the model's main one, e.g. mutual_exclusion).
    #[arg(long)]
    pub property: Option<String>,
    /// Breadth-first search: finds the shortest counterexample (the default).
    #[arg(long, conflicts_with = "dfs")]
    pub bfs: bool,
    /// Depth-first search: less memory, for exhaustive proofs within the bound.
    #[arg(long)]
    pub dfs: bool,
    /// Check only states at most N steps from the start (0: the initial states). A search cut
    /// there that finds nothing prints "no counterexample within depth N (bounded: not a
    /// proof)" and exits 3, never HOLDS.
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// A model parameter, key=value (repeatable); an unknown key lists the valid ones.
    #[arg(long = "param", value_name = "K=V")]
    pub params: Vec<String>,
    /// Checker threads, at most 1024; 0 (the default): every core for DFS proofs, one for BFS
    /// (only a single-threaded BFS guarantees the shortest counterexample).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Serve stateright's Explorer on this address (e.g. 127.0.0.1:3000) instead of checking.
    #[arg(long, value_name = "ADDR")]
    pub explore: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write the counterexample as a scenario file that `lockcheck run` replays.
    #[arg(long, value_name = "OUT.toml")]
    pub emit_scenario: Option<PathBuf>,
    /// Write the result as an HTML page into this directory (the counterexample step by step).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// The most checker threads `--threads` may ask for: stateright spawns each one and panics when
/// the OS refuses (100000 threads did), so the bound is checked before it starts.
pub const MAX_THREADS: usize = 1024;

impl ModelCommand {
    fn options(&self) -> Result<RunOptions, String> {
        if self.threads > MAX_THREADS {
            return Err(format!(
                "--threads {}: give 0 (every core) to {MAX_THREADS} checker threads",
                self.threads
            ));
        }
        let mut params = Vec::new();
        for p in &self.params {
            let Some((k, v)) = p.split_once('=') else {
                return Err(format!(
                    "--param takes key=value, got `{}`",
                    crate::scenario::input::excerpt(p, crate::scenario::input::MAX_QUOTED_CHARS)
                ));
            };
            params.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(RunOptions {
            property: self.property.clone(),
            strategy: if self.dfs {
                Strategy::Dfs
            } else {
                Strategy::Bfs
            },
            max_depth: self.max_depth,
            params,
            threads: self.threads,
        })
    }

    /// Runs the command; returns the exit code.
    pub fn run(&self) -> i32 {
        let opts = match self.options() {
            Ok(o) => o,
            Err(e) => {
                return bad_input(e);
            }
        };
        if let Some(addr) = &self.explore {
            eprintln!(
                "serving stateright's Explorer for model `{}` on http://{addr}/ (Ctrl-C stops it)",
                self.name
            );
            return match lockcheck_models::serve_explorer(&self.name, &opts, addr) {
                Ok(()) => EXIT_MATCH,
                Err(e) => bad_input(e),
            };
        }
        let report = match lockcheck_models::run(&self.name, &opts) {
            Ok(r) => r,
            Err(e) => {
                return bad_input(e);
            }
        };
        if self.json {
            crate::outln!(
                "{}",
                serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
            );
        } else {
            crate::out!("{}", report.to_text());
        }
        if let Some(dir) = &self.report {
            match crate::report_html::model::write_model(dir, &report) {
                Ok(p) => eprintln!("report written to {}", p.display()),
                Err(e) => return bad_input(e),
            }
        }
        if let Some(path) = &self.emit_scenario {
            if let Err(code) = emit(&report, path) {
                return code;
            }
        }
        if report.is_bounded() {
            EXIT_BOUNDED
        } else if report.matches_expectation() {
            EXIT_MATCH
        } else {
            EXIT_MISMATCH
        }
    }
}

/// Prints `e` (what it quotes of the user's input cut short) and gives the bad-input exit code.
fn bad_input(e: impl std::fmt::Display) -> i32 {
    eprintln!(
        "error: {}",
        crate::scenario::input::short_message(&e.to_string())
    );
    EXIT_BAD_INPUT
}

/// Writes the counterexample as a scenario file.
fn emit(report: &ModelReport, path: &PathBuf) -> Result<(), i32> {
    match report.to_scenario_toml() {
        Some(text) => {
            std::fs::write(path, text).map_err(|e| {
                eprintln!("error: cannot write {}: {e}", path.display());
                EXIT_BAD_INPUT
            })?;
            eprintln!(
                "scenario written to {}; replay it with: lockcheck run {}",
                path.display(),
                path.display()
            );
            Ok(())
        }
        None => {
            let why = report
                .scenario_note
                .clone()
                .unwrap_or_else(|| match report.outcome {
                    lockcheck_models::Finding::Bounded { max_depth, .. } => format!(
                        "no counterexample within depth {max_depth} (the search was cut there): \
                     there is nothing to replay"
                    ),
                    _ => "the property held: there is no counterexample to replay".into(),
                });
            eprintln!("error: no scenario written: {why}");
            Err(EXIT_BAD_INPUT)
        }
    }
}
