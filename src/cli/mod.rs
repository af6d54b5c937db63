//! The command line's work, one file per subcommand: `main.rs` only parses arguments and calls
//! in here, so every command can also be driven (and tested) as a library call.
//!
//! - [`run`]: `lockcheck run` — load scenarios, run them over seeds, judge, report;
//! - [`report`]: the text and JSON a run prints;
//! - [`unstarted_cycles`]: which clients the run's end stopped before their last cycle;
//! - [`table`]: `lockcheck table` — the lock x fault matrix of the README;
//! - [`list`]: `lockcheck list` — the lock kinds, fault kinds and bundled scenarios;
//! - [`model`]: `lockcheck model` — run a stateright model and replay its counterexample;
//! - [`stdout`]: the report's output, which ends quietly when the reader has gone.

pub mod args;
pub mod budget;
pub mod explore;
mod explore_artifacts;
mod explore_out;
mod explore_progress;
pub mod explore_report;
pub mod list;
pub mod model;
pub mod report;
pub mod run;
mod run_progress;
pub mod table;
pub mod unstarted_cycles;
