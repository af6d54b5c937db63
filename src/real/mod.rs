//! Real mode: lockcheck's own `redis-server` processes and the faults it injects into them.
//!
//! The simulator answers "can this lock lose mutual exclusion?" cheaply and
//! deterministically; real mode shows that the same scenario also happens on the
//! real `redis-server` binary, so a finding is not an artefact of the simulated
//! Redis. Everything here is built around three promises:
//!
//! * **lockcheck only faults servers it started.** [`RedisServer`] always binds a
//!   fresh free port on 127.0.0.1 (never 6379) and checks that the process answering
//!   on that port is the one it spawned, so a port race can never make it
//!   `SIGSTOP` or `REPLICAOF` somebody else's server.
//! * **Every process it starts dies on every exit path**: drop guards for the
//!   normal path and for unwinding, a panic hook and `SIGINT`/`SIGTERM` handlers
//!   ([`install_cleanup_handlers`]) for the paths that skip destructors, and
//!   `PR_SET_PDEATHSIG` so even a `SIGKILL`ed lockcheck takes its servers with it.
//! * **Faults are deterministic.** The failover lock-loss recipe ([`FailoverRig`])
//!   does not depend on replication lag: the replica is provably cut off before the
//!   client writes, so the promoted replica never has the lock key.
//!
//! All control-plane calls here are blocking (they are short: a few ms). From async
//! code, call them through `tokio::task::spawn_blocking` or `block_in_place`.
//! The data plane for lock clients is [`RoutedConnection`], an async
//! `redis::aio::ConnectionLike` that follows failovers the way a Sentinel-aware
//! client does.

mod admin;
mod blackhole;
mod child;
mod cleanup;
mod client_program;
mod client_program_launch;
pub mod client_program_lock;
pub(crate) mod client_tasks;
mod connection;
mod error;
pub mod external;
mod failover;
mod faketime;
mod link_proxy;
pub mod mariadb;
mod master_finder;
mod mysql_nemesis;
pub mod mysql_world;
mod nemesis;
mod network;
mod plan;
mod proxy;
mod recipes;
mod redis_server;
pub mod redis_world;
mod sentinel_deployment;
mod sentinel_events;
pub mod subscription;
pub mod witness;

pub use admin::{client_kill_replicas, info_replication, promote, wait_role_master};
pub use blackhole::BlackHole;
pub use cleanup::{
    install_cleanup_handlers, install_signal_handlers, kill_all_children, registered_children,
};
pub use client_program::{ClientCommand, ClientProgram};
pub use client_program_lock::ClientProgramLock;
pub use connection::{ConnectionTimeouts, Route, RoutedConnection};
pub use error::RealError;
pub use failover::{FailoverPhase, FailoverRig, FailoverTimings};
pub use faketime::FakeTime;
pub use mariadb::MariaDb;
pub use proxy::RouteProxy;
pub use redis_server::{redis_server_path, RedisServer, ServerOptions};
