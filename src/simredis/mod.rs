//! A simulated single-node Redis 7.0: a pure, synchronous, deterministic command executor
//! with a Lua 5.1 host.
//!
//! This module is only the *engine*: it owns a keyspace, the script cache and pub/sub
//! subscriptions, and turns one command (plus this node's clock reading) into a reply, the
//! write effects to replicate and the pub/sub messages to deliver. It knows nothing about
//! networks, tasks or time passing: the node layer calls [`Engine::execute`] with the node's
//! (possibly skewed) clock, ships [`Outcome::effects`] to replicas, and calls
//! [`Engine::active_expire`] on its own schedule. Because nothing here reads a clock, spawns
//! a thread or iterates a `HashMap`, the same calls always give the same results, which is
//! what makes a simulation replayable from its seed.
//!
//! What "must match real Redis 7.0" means here is measured, not remembered: every error text,
//! reply shape and replication effect was checked against `redis-server` 7.0.15, and
//! `tests/differential.rs` keeps checking it.
//!
//! Files: [`keyspace`] (values and the expiry index), [`commands`] (the command table and
//! the command implementations), [`lua`] (the script host), [`reply`] (building
//! `redis::Value` replies and errors), [`num`] (Redis's integer parsing and Lua's number
//! formatting), [`pubsub`] (channel subscriptions), [`engine`] (the public API).

pub mod commands;
pub mod engine;
pub mod keyspace;
pub mod lua;
pub mod num;
pub mod pubsub;
pub mod reply;

pub use engine::{ClientId, Engine, Outcome, Role};
