//! What real mode reads from the servers into the history, beside the clients' own events: the
//! lock entries each command removed (`witness.rs`, from `MONITOR`: the stream's lines in
//! `monitor_line.rs`, the entry they leave in `entry_model.rs`, whose connection is whose in
//! `connection_names.rs`). The sentinels' decisions are Redis's own observer, in its folder
//! (`backend/redis/real/sentinel_events.rs`).

pub mod clock_ties;
pub mod connection_names;
mod entry_model;
mod monitor_line;
pub mod witness;
