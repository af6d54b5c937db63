//! The command line, one binary: the contract (exit codes, messages, JSON) and the `list` and
//! `table` commands, each run as the `lockcheck` executable.

#[path = "../common/mod.rs"]
mod common;

mod bounded;
mod contract;
mod harness_example;
mod model_bounds;
mod table_and_list;
