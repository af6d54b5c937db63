//! A fenced lock (Kleppmann, "How to do distributed locking", cited by the Redlock article): `SET NX PX` and,
//! in the same script, a fencing token from `INCR` of a counter next to the lock. The lock alone
//! is no safer than `set-nx-px`; the protection is that the storage refuses a write whose token is
//! older than one it has already seen ([`crate::resource`]). A holder paused past its lease can no
//! longer clobber its successor's writes.
//!
//! What fencing on one Redis with replicas cannot survive: a failover to a replica that had not
//! received the last `INCR`. The promoted counter is behind, the next grant reuses a token already
//! handed out, and the storage accepts the older holder's write because its token is not smaller.

use crate::env::Env;
use crate::lock::lease::{release_own_entry, renew_string_lease};
use crate::lock::{Guard, Lock, LockConfig, LockError, Next, Wait};
use redis::aio::ConnectionLike;
use std::sync::LazyLock;

/// The acquire script: lock and token in one atomic step.
pub static FENCED_ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/fenced_acquire.lua")));

/// The fencing counter's key, next to the lock's.
pub fn fencing_key(lock_key: &str) -> String {
    format!("{lock_key}:fencing")
}

/// One client's handle on a fenced lock.
pub struct Fenced<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
}

/// The kind's scenario-file name.
pub const NAME: &str = "fenced";

impl<C, E> Fenced<C, E> {
    /// One client's fenced lock: it talks to Redis over `conn` and reads time from `env`, its
    /// node's clock, so each client computes its validity time as a real client would.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        Fenced {
            conn: crate::lock::only_connection(conns),
            env,
            config,
        }
    }
}

impl<C, E> Lock for Fenced<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "SET NX PX plus a fencing token from INCR on the same Redis; storage refuses older tokens (Kleppmann, cited by the Redlock article)";
    const RENEWS: bool = true;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let wait = Wait::start(&self.env, &self.config);
        let counter = fencing_key(&self.config.key);
        loop {
            let started = self.env.monotonic_ms();
            // The token of a granted lock, nil for a taken one.
            let reply: Result<Option<u64>, _> = FENCED_ACQUIRE
                .key(&self.config.key)
                .key(&counter)
                .arg(&owner)
                .arg(ttl_ms)
                .invoke_async(&mut self.conn)
                .await;
            match wait.next(reply).await? {
                Next::Granted(token) => {
                    return Ok(Some(Guard {
                        owner,
                        fencing_token: Some(token),
                        acquired_at_ms: started,
                        valid_until_ms: started + ttl_ms,
                    }))
                }
                Next::Again => {}
                Next::GaveUp => return Ok(None),
            }
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        release_own_entry(&mut self.conn, &self.config.key, &guard.owner).await
    }

    /// The same renewal as `set-nx-px`'s; the fencing token stays the grant's.
    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        let ttl_ms = self.config.ttl.as_millis() as u64;
        renew_string_lease(&mut self.conn, &self.env, &self.config.key, ttl_ms, guard).await
    }
}
