//! What real mode reads from the servers into the history, beside the clients' own events: the
//! lock entries each command removed (`witness.rs`, from `MONITOR`: the stream's lines in
//! `monitor_line.rs`, the entry they leave in `entry_model.rs`, whose connection is whose in
//! `connection_names.rs`) and the sentinels' decisions.

pub mod clock_ties;
pub mod connection_names;
mod entry_model;
mod monitor_line;
pub(crate) mod sentinel_events;
pub mod witness;
