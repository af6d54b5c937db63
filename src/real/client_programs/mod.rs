//! Client programs in any language (`[lock] kind = "client-program"`): spawning one per client,
//! its environment and clock, and the lock driven over the JSON-lines client protocol.

pub(crate) mod client_program;
pub(crate) mod client_program_launch;
pub mod client_program_lock;
