//! The simulated Redis, tested as one binary: `semantics` pins replies measured on
//! redis-server 7.0.15, `differential` compares the engine with a spawned redis-server
//! (fixed tables and random proptest sequences), `sessions` covers the connection layer
//! (response timeouts, pipelines, transactions).

#[path = "../common/mod.rs"]
mod common;

mod differential;
mod functions;
mod native_scripts;
mod semantics;
mod sessions;
