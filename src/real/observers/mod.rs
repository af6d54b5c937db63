//! What real mode reads from the servers into the history, beside the clients' own events: the
//! lock entries each command removed (`witness.rs`, from `MONITOR`) and the sentinels' decisions.

pub(in crate::real) mod sentinel_events;
pub mod witness;
