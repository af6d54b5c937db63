//! The lock seam: what a distributed lock implementation provides, and the guard it hands out.
//!
//! A lock is written against two things only: a Redis connection (anything implementing
//! [`redis::aio::ConnectionLike`]) and an [`Env`](crate::env::Env) (its node's clock, timers,
//! tasks and randomness). The real backend passes a redis-rs connection and the real environment;
//! the simulator passes lockcheck's simulated connection and environment. The lock cannot tell.
//!
//! To test your own lock, implement [`Lock`] for it (see the README and `lockcheck::sim::run_with`).

pub mod redlock;
pub mod set_nx_px;

use serde::Deserialize;
use std::future::Future;
use std::time::Duration;

pub use redlock::{Redlock, RedlockOptions};
pub use set_nx_px::SetNxPx;

/// What a holder has: proof of ownership and what it believes about its lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The owner token stored in Redis (a uuid), used to release only our own entry.
    pub owner: String,
    /// A fencing token, for locks that issue one (strictly increasing per grant).
    pub fencing_token: Option<u64>,
    /// The holder's clock when the successful attempt started.
    pub acquired_at_ms: u64,
    /// Where the holder believes its lease ends, on its own clock: the validity time.
    pub valid_until_ms: u64,
}

/// A lock operation failed in a way the caller should see (not "the lock was busy").
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("this lock does not support {0}")]
    Unsupported(&'static str),
}

/// A distributed lock, as one client uses it.
///
/// Every method returns a `Send` future so the same lock can run in tokio tasks and madsim nodes.
pub trait Lock: Send {
    /// Tries to acquire until the configured wait bound; `Ok(None)` when it gave up.
    fn acquire(&mut self) -> impl Future<Output = Result<Option<Guard>, LockError>> + Send;

    /// Releases; `Ok(true)` when this client's own entry was deleted.
    fn release(&mut self, guard: &Guard) -> impl Future<Output = Result<bool, LockError>> + Send;

    /// Extends the lease of a held lock (a watchdog's renewal); `Ok(false)` when it was no longer ours.
    fn renew(&mut self, guard: &mut Guard) -> impl Future<Output = Result<bool, LockError>> + Send {
        let _ = guard;
        async { Err(LockError::Unsupported("renew")) }
    }
}

/// The lock kinds lockcheck ships, by their scenario-file names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    /// `SET key token NX PX ttl`, released by a Lua compare-and-delete (seeds 000, 002).
    SetNxPx,
    /// Redlock: `SET NX PX` on N independent masters, a majority and validity time (seed 002).
    Redlock,
}

impl LockKind {
    /// Every kind, for `lockcheck list` and error messages.
    pub const ALL: &'static [LockKind] = &[LockKind::SetNxPx, LockKind::Redlock];

    pub fn name(self) -> &'static str {
        match self {
            LockKind::SetNxPx => "set-nx-px",
            LockKind::Redlock => "redlock",
        }
    }

    /// One line about the design and where it comes from.
    pub fn about(self) -> &'static str {
        match self {
            LockKind::SetNxPx => {
                "SET key token NX PX ttl; release by a Lua compare-and-delete (seeds 000, 002)"
            }
            LockKind::Redlock => {
                "SET NX PX on N independent masters in parallel; a majority within the validity time (seed 002)"
            }
        }
    }

    /// Whether the kind has a lease of its own when the scenario sets no `ttl_ms`.
    pub fn has_default_lease(self) -> bool {
        false
    }
}

/// How a client's lock is configured (from the scenario's `[lock]`).
#[derive(Clone, Debug)]
pub struct LockConfig {
    pub key: String,
    pub ttl: Duration,
    pub wait: Duration,
    /// Pause between failed attempts, uniform in this range.
    pub retry: (Duration, Duration),
    /// Redlock's parameters (ignored by other kinds).
    pub redlock: RedlockOptions,
}

impl LockConfig {
    pub fn from_spec(spec: &crate::scenario::LockSpec) -> Self {
        LockConfig {
            key: spec.key.clone(),
            ttl: Duration::from_millis(spec.ttl_ms.unwrap_or(30_000)),
            wait: Duration::from_millis(spec.wait_ms),
            retry: (
                Duration::from_millis(spec.retry_ms[0]),
                Duration::from_millis(spec.retry_ms[1]),
            ),
            redlock: {
                let d = RedlockOptions::default();
                RedlockOptions {
                    node_timeout: spec
                        .node_timeout_ms
                        .map(Duration::from_millis)
                        .unwrap_or(d.node_timeout),
                    drift_factor: spec.drift_factor.unwrap_or(d.drift_factor),
                    drift_ms: spec.drift_ms.unwrap_or(d.drift_ms),
                    recheck_after_acquire: spec
                        .recheck_after_acquire
                        .unwrap_or(d.recheck_after_acquire),
                }
            },
        }
    }
}

/// Any lock lockcheck ships, chosen at run time from the scenario.
pub enum AnyLock<C, E> {
    SetNxPx(SetNxPx<C, E>),
    Redlock(Redlock<C, E>),
}

impl<C, E> AnyLock<C, E>
where
    C: redis::aio::ConnectionLike + Send + Sync + 'static,
    E: crate::env::Env,
{
    /// Builds the lock of `kind` for one client.
    pub fn build(kind: LockKind, config: LockConfig, mut conns: Vec<C>, env: E) -> Self {
        match kind {
            LockKind::SetNxPx => AnyLock::SetNxPx(SetNxPx::new(conns.remove(0), env, config)),
            LockKind::Redlock => AnyLock::Redlock(Redlock::new(conns, env, config)),
        }
    }
}

impl<C, E> Lock for AnyLock<C, E>
where
    C: redis::aio::ConnectionLike + Send + Sync + 'static,
    E: crate::env::Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.acquire().await,
            AnyLock::Redlock(l) => l.acquire().await,
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.release(guard).await,
            AnyLock::Redlock(l) => l.release(guard).await,
        }
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.renew(guard).await,
            AnyLock::Redlock(l) => l.renew(guard).await,
        }
    }
}

/// Whether a Redis error means "no answer" (timeout, connection lost), after which an attempt may
/// be retried, rather than a reply the lock must not ignore.
pub fn is_transient(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}
