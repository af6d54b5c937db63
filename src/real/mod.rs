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
//!
//! The folder holds what every service's real world shares; each service's own real world (its
//! servers, connection, nemesis and run) lives in its backend folder, `backend/<service>/real/`.
//! Here: real mode's side of the generic seams (`connection.rs`, the routed Redis-protocol
//! connection and its cluster mode; `env.rs`, the client's clock and sleeps), the clients' tasks
//! (`client_tasks.rs`) and the run's end (`run_end.rs`), the servers' shared parts
//! (`servers/`: child processes, cleanup, libfaketime, the `redis-server` every world's
//! protected resource lives on), `nemesis/` the faults every service shares, `observers/` what
//! it reads from servers into the history, `external_redis.rs` the `--redis` target, and
//! `client_programs/` the lock clients in other languages.

pub mod client_programs;
pub(crate) mod client_tasks;
pub(crate) mod connection;
mod env;
mod error;
pub mod external_redis;
pub mod nemesis;
pub mod observers;
pub mod run_end;
pub mod servers;

/// Paths that moved into `crate::backend`, kept for users' code (see `lib.rs`).
pub use crate::__moved::real::*;
pub use client_programs::client_program::{ClientCommand, ClientProgram};
pub use client_programs::client_program_lock::ClientProgramLock;
pub use connection::{cluster_client, ClusterPolicy, ConnectionTimeouts, Route, RoutedConnection};
pub use env::{Gate, RealEnv};
pub use error::{FailoverPhase, RealError};
pub use external_redis::ExternalRedis;

/// A registered lock kind's run on real servers: spawned ones, or (`Some`) servers lockcheck
/// did not start, which a backend that cannot use them refuses.
pub type RealRunner = dyn Fn(
        &crate::scenario::Scenario,
        u64,
        Option<&ExternalRedis>,
    ) -> Result<crate::history::History, RealError>
    + Send
    + Sync;

/// A backend's refusal of servers it did not start (`--redis`), or `Ok` when there are none.
pub fn no_external(
    s: &crate::scenario::Scenario,
    ext: Option<&ExternalRedis>,
    locks: &str,
) -> Result<(), RealError> {
    match ext {
        Some(_) => Err(RealError::External(format!(
            "{}: --redis does not apply to {locks} (they use servers lockcheck spawns)",
            s.name
        ))),
        None => Ok(()),
    }
}
pub use nemesis::proxy::RouteProxy;
pub use servers::cleanup::{
    install_cleanup_handlers, install_signal_handlers, kill_all_children, registered_children,
    registered_dirs,
};
pub use servers::faketime::FakeTime;
pub use servers::redis_server::{redis_server_path, RedisServer, ServerOptions};
