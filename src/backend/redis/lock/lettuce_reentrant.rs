//! The reentrant lock on the Lettuce client (the Lettuce article).
//!
//! Acquire is one script, `SETNX` then `PEXPIRE`, returning nil on success and the holder's
//! remaining `PTTL` on contention; release is a get-compare-delete script. Both scripts are loaded
//! once with `SCRIPT LOAD` and run with `EVALSHA` by their sha1, as the article does to save
//! bandwidth. A waiter sleeps 5 ms between attempts (the author notes Redisson wakes waiters with
//! pub/sub instead). Reentrancy is counted on the client, per holder (the article's per-thread
//! `ThreadLocal` map): a nested acquire by the holder only increments the count, without asking
//! Redis, and only the outermost release runs the unlock script. The holder's value is made once
//! and kept (the article never removes it from its map).
//!
//! Consequences the scenarios show: a nested acquire "succeeds" even after the lease ran out and
//! another client holds the lock, because the count is only on the client; and since Redis 7 does
//! not replicate `SCRIPT LOAD`, a promoted replica answers the cached sha with `NOSCRIPT`, which
//! the article's code does not handle (Lettuce throws `RedisNoScriptException`).

use crate::env::Env;
use crate::lock::{is_transient, Guard, Lock, LockConfig, LockError};
use redis::aio::ConnectionLike;
use std::time::Duration;

/// The acquire script's text.
pub const LOCK_SCRIPT: &str = include_str!("scripts/lettuce_lock.lua");
/// The release script's text.
pub const UNLOCK_SCRIPT: &str = include_str!("scripts/lettuce_unlock.lua");

/// The article's polling interval.
pub const POLL: Duration = Duration::from_millis(5);

/// One client's (one thread's) handle on the Lettuce lock.
pub struct LettuceReentrant<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
    /// sha1 of the two scripts, once loaded.
    shas: Option<(String, String)>,
    /// The holder's value, made on first use and kept.
    value: Option<String>,
    /// Client-side hold count (0: not held).
    count: u32,
    /// The outermost acquisition's guard, handed out again to nested acquires.
    held: Option<Guard>,
}

/// The kind's scenario-file name.
pub const NAME: &str = "lettuce-reentrant";

impl<C, E> LettuceReentrant<C, E> {
    /// One client's reentrant lock, holding nothing yet: the hold count lives in the client, so
    /// every client needs its own instance over its own `conn` and `env`.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        LettuceReentrant {
            conn: crate::lock::only_connection(conns),
            env,
            config,
            shas: None,
            value: None,
            count: 0,
            held: None,
        }
    }

    /// The client-side hold count.
    pub fn hold_count(&self) -> u32 {
        self.count
    }
}

impl<C, E> LettuceReentrant<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    /// `SCRIPT LOAD` both scripts, once (the article does it in the constructor).
    async fn shas(&mut self) -> Result<(String, String), LockError> {
        if let Some(s) = &self.shas {
            return Ok(s.clone());
        }
        let lock: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(LOCK_SCRIPT)
            .query_async(&mut self.conn)
            .await?;
        let unlock: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(UNLOCK_SCRIPT)
            .query_async(&mut self.conn)
            .await?;
        self.shas = Some((lock, unlock));
        Ok(self.shas.clone().expect("just set"))
    }
}

impl<C, E> Lock for LettuceReentrant<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "Lettuce: SETNX+PEXPIRE script returning PTTL, SCRIPT LOAD + EVALSHA, reentrancy counted on the client, waiters poll every 5 ms (the Lettuce article)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        if self.count > 0 {
            // Reentrant: the holder only counts, Redis is not asked.
            self.count += 1;
            return Ok(self.held.clone());
        }
        let (lock_sha, _) = self.shas().await?;
        let value = self
            .value
            .get_or_insert_with(|| self.env.uuid().to_string())
            .clone();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        loop {
            let started = self.env.monotonic_ms();
            let reply: Result<Option<i64>, _> = redis::cmd("EVALSHA")
                .arg(&lock_sha)
                .arg(1)
                .arg(&self.config.key)
                .arg(ttl_ms)
                .arg(&value)
                .query_async(&mut self.conn)
                .await;
            match reply {
                Ok(None) => {
                    let guard = Guard {
                        owner: value,
                        fencing_token: None,
                        acquired_at_ms: started,
                        valid_until_ms: started + ttl_ms,
                    };
                    self.count = 1;
                    self.held = Some(guard.clone());
                    return Ok(Some(guard));
                }
                // Held by someone else, for this many more ms: poll again.
                Ok(Some(_pttl)) => {}
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(e.into()),
            }
            if self.env.monotonic_ms() >= deadline {
                return Ok(None);
            }
            self.env.sleep(POLL).await;
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        if self.count == 0 {
            return Ok(false);
        }
        self.count -= 1;
        if self.count > 0 {
            return Ok(false);
        }
        self.held = None;
        let (_, unlock_sha) = self.shas().await?;
        let deleted: Option<i64> = redis::cmd("EVALSHA")
            .arg(&unlock_sha)
            .arg(1)
            .arg(&self.config.key)
            .arg(&guard.owner)
            .query_async(&mut self.conn)
            .await?;
        Ok(deleted == Some(1))
    }
}
