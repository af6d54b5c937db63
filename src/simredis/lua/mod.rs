//! The Lua 5.1 script host: EVAL/EVALSHA semantics of Redis 7.0 on top of `mlua`.
//!
//! One Lua state per engine. Scripts are compiled once and cached by the lowercase sha1 hex
//! of their body (EVAL caches too, as Redis does). While a script runs, the engine's data and
//! the execution context are moved into the Lua state's app data (`state.rs`) so that
//! `redis.call` — a Rust function — can reach the keyspace; they are moved back afterwards.
//!
//! Why `redis.call` must be a Rust (C) function and not a Lua wrapper: Redis reports the line
//! of the script that called `redis.call` (`... script: <sha>, on @user_script:<line>.`). A Lua
//! wrapper called as `return redis.call(...)` is a tail call in Lua 5.1, which replaces the
//! caller's frame, so the line is lost. A C function called from Lua leaves the caller's frame
//! on the stack, where the error handler finds it one level up.
//!
//! The error machinery mirrors Redis 7.0: errors raised by `redis.call` are "error tables"
//! (`{err='CODE msg'}`); the message handler turns any other error value into
//! `ERR <tostring(value)>` and appends ` script: <sha>, on <source>:<line>.`; Redis's own
//! `pcall` replacement hands a caught error table back as its message string. The global
//! table and the library tables are read-only (`Attempt to modify a readonly table`) and
//! reading an undefined global is an error (`Script attempted to access nonexistent global
//! variable 'x'`), which Redis 7.0 does in a patched Lua; here the script's globals are an
//! empty proxy whose metatable forwards reads and refuses writes.
//!
//! Files, each importing only the ones listed before it: `sha.rs` (a script's name),
//! `registered.rs` (what a FUNCTION library registers), `state.rs` (what a running script
//! reaches), `errors.rs` (error tables, raised errors, the message handler), `convert.rs`
//! (Redis replies and Lua values), `random.rs` (rand48), `bit.rs`, `cjson.rs`, `cmsgpack.rs`,
//! `structlib.rs` (the bundled libraries), `readonly.rs` (the raw functions that see through
//! read-only tables), `api.rs` (the `redis` table and `redis.call`), `library.rs` (FUNCTION
//! LOAD's API), `sandbox.rs` (the globals scripts see) and `host.rs` (the script host). This
//! file only declares them and re-exports what the rest of the engine uses.

mod api;
mod bit;
mod cjson;
mod cmsgpack;
mod convert;
mod errors;
mod host;
mod library;
mod random;
mod readonly;
mod registered;
mod sandbox;
mod sha;
mod state;
mod structlib;

pub use host::LuaHost;
pub use registered::{valid_name, Registered};
pub use sandbox::Flavor;
pub use sha::{sha1hex, Sha};
