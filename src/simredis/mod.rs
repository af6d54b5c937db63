//! A simulated single-node Redis 7.0: a pure, synchronous, deterministic command executor
//! with a Lua 5.1 host.
//!
//! This module is only the *engine*: it owns a keyspace, the script cache and pub/sub
//! subscriptions, and turns one command (plus this node's clock reading) into a reply, the
//! write effects to replicate and the pub/sub messages to deliver. It knows nothing about
//! networks, tasks or time passing: the node layer calls [`Engine::execute`] with the node's
//! (possibly skewed) clock, ships [`Executed::effects`] to replicas, and calls
//! [`Engine::active_expire`] on its own schedule. Because nothing here reads a clock, spawns
//! a thread or iterates a `HashMap`, the same calls always give the same results, which is
//! what makes a simulation replayable from its seed.
//!
//! What "must match real Redis 7.0" means here is measured, not remembered: every error text,
//! reply shape and replication effect was checked against `redis-server` 7.0.15, and
//! `tests/redis_engine/differential.rs` keeps checking it.
//!
//! ```
//! use lockcheck::simredis::{Engine, Role};
//! use redis::Value;
//!
//! let args = |s: &[&str]| s.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
//! let mut master = Engine::new(Role::Master);
//! let mut replica = Engine::new(Role::Replica);
//!
//! // The master's clock reads 1000: the lease ends at 1100 on the master's clock, and that
//! // absolute time is what replicates.
//! let out = master.execute(1_000, 1, &args(&["SET", "lock", "me", "NX", "PX", "100"]));
//! assert_eq!(out.reply, Value::Okay);
//! assert_eq!(out.effects, vec![args(&["SET", "lock", "me", "PXAT", "1100"])]);
//! replica.apply_replicated(1_000, &out.effects);
//!
//! // A replica whose clock is ahead hides the key but keeps it until the master's DEL.
//! assert_eq!(replica.execute(1_200, 2, &args(&["GET", "lock"])).reply, Value::Nil);
//! assert_eq!(replica.dbsize(1_000), 1);
//! let dels = master.active_expire(1_101);
//! replica.apply_replicated(1_101, &dels);
//! assert_eq!(replica.dbsize(1_000), 0);
//! ```
//!
//! Files, each importing only files listed before it: `role.rs` (`ClientId` and `Role`),
//! `num.rs` (Redis's integer parsing and Lua's number formatting), `reply.rs` (building
//! `redis::Value` replies and errors), `glob.rs` (Redis's pattern matching), `sorted_set.rs`
//! (the sorted-set value), `pubsub.rs` (channel subscriptions), `keyspace.rs` (values and the
//! expiry index), `context.rs` (the data and the per-command context every command runs in),
//! the command families `strings.rs`, `keys.rs`, `expiry.rs`, `hashes.rs`, `lists.rs`,
//! `sets.rs`, `zsets.rs` and `server.rs`, `commands.rs` (the command table), `lua/` (the script
//! host and its bundled libraries), `native.rs` (the lock scripts every cycle runs, without
//! Lua), `scripts.rs` (EVAL and SCRIPT), `functions.rs` (FUNCTION and FCALL), `transactions.rs`
//! (WATCH), `clients.rs` (CLIENT ID/SETNAME, HELLO) and [`engine`] (the public API). Only the
//! engine and [`error_text`] are public: the command families are reached through the command
//! table.

mod clients;
mod commands;
mod context;
pub mod engine;
mod expiry;
mod functions;
mod glob;
mod hashes;
mod keys;
mod keyspace;
mod lists;
mod lua;
mod migrate;
mod native;
mod num;
mod pubsub;
mod reply;
mod role;
mod scripts;
mod server;
mod sets;
mod sorted_set;
mod strings;
mod transactions;
mod zsets;

pub use commands::may_write;
pub use engine::{ClientId, Engine, Executed, Role};
pub use reply::{error as error_reply, error_text};

/// The error a master with `min-replicas-to-write` answers a write with when too few replicas
/// are fresh.
pub fn noreplicas() -> redis::Value {
    reply::noreplicas()
}
