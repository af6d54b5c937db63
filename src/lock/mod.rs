//! The lock seam: what a distributed lock implementation provides, and the guard it hands out.
//!
//! A lock is written against two things only: a Redis connection (anything implementing
//! [`redis::aio::ConnectionLike`]) and an [`Env`](crate::env::Env) (its node's clock, timers,
//! tasks and randomness). The real backend passes a redis-rs connection and the real environment;
//! the simulator passes lockcheck's simulated connection and environment. The lock cannot tell.
//!
//! To test your own lock, implement [`Lock`] for it and register its constructor with
//! `lockcheck::Harness` (see the README and `examples/check_then_set.rs`).

mod acquire_loop;
pub mod builtin;
pub mod config;
mod connections;
mod kind;
pub mod lease;
pub mod mysql_options;
pub mod redis_options;

use std::future::Future;

pub use crate::__moved::lock::*;
pub use acquire_loop::is_transient;
pub(crate) use acquire_loop::{retry_pause, Next, Wait};
pub use config::{LockConfig, LockSpec, UnsyncedAttempt, WaitReplicas};
pub(crate) use connections::only_connection;
pub use kind::{Backend, LockKind, Origin, Service};
pub use redis_options::{RedlockBug, RedlockOptions};

use crate::env::{ClockKind, NamedPoint};

/// What a holder has: proof of ownership and what it believes about its lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The owner token stored in Redis (a uuid), used to release only our own entry.
    pub owner: String,
    /// A fencing token, for locks that issue one (strictly increasing per grant).
    pub fencing_token: Option<u64>,
    /// The holder's clock ([`Lock::validity_clock`]: monotonic for lockcheck's locks) when the
    /// successful attempt started.
    pub acquired_at_ms: u64,
    /// Where the holder believes its lease ends, on that clock: the validity time.
    pub valid_until_ms: u64,
}

/// A lock operation failed in a way the caller should see (not "the lock was busy").
///
/// Non-exhaustive: a backend whose errors need a variant of their own may add one, so a `match`
/// outside lockcheck needs a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// A Redis command failed (connection lost, timeout, a script error): the client cannot
    /// know whether its command took effect, which is what a checker must allow for.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A database lock's SQL call failed with something other than "busy".
    #[error("sql: {0}")]
    Sql(#[from] crate::sql::SqlError),
    /// An etcd call failed (`etcd::EtcdError`).
    #[error("etcd: {0}")]
    Etcd(#[from] crate::etcd::EtcdError),
    /// A ZooKeeper lock's request failed with something other than a connection loss or a
    /// session expiry (which the recipe retries).
    #[error("zookeeper: {0}")]
    Zk(#[from] crate::zookeeper::ZkError),
    /// A call to a service with no variant of its own here failed (its message starts with the
    /// service's name: `postgres: FATAL 57P01: …`). A backend added since these variants were
    /// written reports through this one, so adding a service changes no public enum.
    #[error("{0}")]
    Service(String),
    /// A client program (`kind = "client-program"`) broke the protocol, failed, or did not answer.
    #[error("lock client: {0}")]
    Client(String),
    /// The lock has no such operation (`renew` on a lock without one), so a caller that needs it
    /// fails loudly instead of silently doing something else.
    #[error("this lock does not support {0}")]
    Unsupported(&'static str),
}

/// A distributed lock, as one client uses it.
///
/// Every method returns a `Send` future so the same lock can run in tokio tasks and madsim nodes.
pub trait Lock: Send {
    /// The named points inside this lock's protocol where a fault can fire (`on = "<name>"`),
    /// each passed with [`Env::point`](crate::env::Env::point) as the lock goes by. A scenario
    /// for a lock of your own names them once they are declared here and given to
    /// [`Scenario::parse_with_points`](crate::scenario::Scenario::parse_with_points).
    const POINTS: &'static [NamedPoint] = &[];

    /// One line about the design and where it comes from (`lockcheck list` prints it).
    const ABOUT: &'static str = "a lock of your own, registered with the harness";

    /// Whether the lock implements [`Lock::renew`], so the workload's `renew_every_ms` can renew
    /// its lease; a scenario that asks for renewals of a lock that says no is refused at the key.
    /// No by default, like [`Lock::renew`] itself: a lock that overrides `renew` says yes here,
    /// so a scenario cannot ask for renewals that would all fail with "unsupported".
    const RENEWS: bool = false;

    /// Whether the lock has a lease of its own when the scenario sets no `ttl_ms` (Redisson's
    /// watchdog), so such a scenario may leave `ttl_ms` out and set `watchdog_timeout_ms`.
    const DEFAULT_LEASE: bool = false;

    /// Tries to acquire until the configured wait bound; `Ok(None)` when it gave up.
    fn acquire(&mut self) -> impl Future<Output = Result<Option<Guard>, LockError>> + Send;

    /// Releases; `Ok(true)` when this client's own entry was deleted.
    fn release(&mut self, guard: &Guard) -> impl Future<Output = Result<bool, LockError>> + Send;

    /// The clock this lock measures validity times with: [`Guard::valid_until_ms`] is a reading
    /// of it, and a holder that checks its validity before writing compares it with this clock.
    /// Durations belong on the monotonic clock (the default); a wall-clock jump back would make a
    /// lease measured on the wall clock last longer than it does.
    fn validity_clock(&self) -> ClockKind {
        ClockKind::Monotonic
    }

    /// Extends the lease of a held lock (a watchdog's renewal, the workload's `renew_every_ms`)
    /// and moves `guard.valid_until_ms` to the new end of its validity time (on
    /// [`Lock::validity_clock`]); `Ok(false)` when the entry was no longer ours, which a correct
    /// renewal must check on the server in the same step as it extends the lease: a plain
    /// `PEXPIRE` would extend whoever holds the key now.
    fn renew(&mut self, guard: &mut Guard) -> impl Future<Output = Result<bool, LockError>> + Send {
        let _ = guard;
        async { Err(LockError::Unsupported("renew")) }
    }
}
