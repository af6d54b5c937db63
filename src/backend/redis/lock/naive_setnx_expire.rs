//! The address-book article's Jedis lock: `SETNX`, then `EXPIRE` as a second command;
//! release by `GET`, compare, then `DEL` as two commands; waiters retry every 2 ms.
//!
//! The article chose not to wrap SETNX and EXPIRE in a transaction ("the chance that setnx succeeds
//! and expire fails is very low"). A client that dies between the two leaves a key without expiry:
//! the lock is never free again (named point `after_setnx`). The release's GET and DEL can be
//! separated as well (named point `before_del`): if the lease runs out between them and another
//! client takes the lock, the DEL removes that client's entry.
//!
//! Faithful details: the value is 20 characters drawn from the article's alphabet; `EXPIRE` takes
//! whole seconds (Jedis `expire(key, 5)`; a lease that is not whole seconds uses `PEXPIRE`); a
//! failed EXPIRE is only logged, the lock still counts as taken; a failed SETNX gives up.

use crate::env::{Env, NamedPoint};
use crate::lock::{Guard, Lock, LockConfig, LockError};
use redis::aio::ConnectionLike;
use std::time::Duration;

/// The named points of this lock's protocol.
pub const POINTS: &[NamedPoint] = &[
    NamedPoint::new(
        "after_setnx",
        "SETNX succeeded, EXPIRE not sent yet: the key has no expiry",
    ),
    NamedPoint::new(
        "before_del",
        "the release read the key and found its own value; the DEL goes next",
    ),
];

/// The article's alphabet for lock values (`getRandomString`).
const ALPHABET: &[u8] = b"123456qwertyuioplkhgsvbQWERTYUIOPLKJHGFDSAZXCVBNM7890";

/// The article's fixed retry interval.
pub const RETRY: Duration = Duration::from_millis(2);

/// One client's handle on the seed-004 lock.
pub struct NaiveSetnxExpire<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
}

/// The kind's scenario-file name.
pub const NAME: &str = "naive-setnx-expire";

impl<C, E: Env> NaiveSetnxExpire<C, E> {
    /// One client's lock over `conn`, with `env` its node's clock and timers (the 2 ms retry
    /// pause, the gap between `SETNX` and `EXPIRE` where a fault can fire).
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        NaiveSetnxExpire {
            conn: crate::lock::only_connection(conns),
            env,
            config,
        }
    }

    fn random_value(&self) -> String {
        (0..20)
            .map(|_| ALPHABET[self.env.random_range(0, ALPHABET.len() as u64 - 1) as usize] as char)
            .collect()
    }
}

impl<C, E> Lock for NaiveSetnxExpire<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const POINTS: &'static [NamedPoint] = POINTS;
    const ABOUT: &'static str = "Jedis SETNX, then EXPIRE as a second command; release GET, compare, DEL; retry every 2 ms (the address-book article)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let value = self.random_value();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        loop {
            let started = self.env.monotonic_ms();
            let set: i64 = redis::cmd("SETNX")
                .arg(&self.config.key)
                .arg(&value)
                .query_async(&mut self.conn)
                .await?;
            if set == 1 {
                // The window: the key exists and has no expiry yet.
                self.env.point("after_setnx").await;
                let expire = if ttl_ms.is_multiple_of(1000) {
                    let mut c = redis::cmd("EXPIRE");
                    c.arg(&self.config.key).arg(ttl_ms / 1000);
                    c
                } else {
                    let mut c = redis::cmd("PEXPIRE");
                    c.arg(&self.config.key).arg(ttl_ms);
                    c
                };
                // As in the article, a failed EXPIRE is logged and ignored.
                let _: Result<i64, _> = expire.query_async(&mut self.conn).await;
                return Ok(Some(Guard {
                    owner: value,
                    fencing_token: None,
                    acquired_at_ms: started,
                    valid_until_ms: started + ttl_ms,
                }));
            }
            if self.env.monotonic_ms() >= deadline {
                return Ok(None);
            }
            self.env.sleep(RETRY).await;
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let current: Option<String> = redis::cmd("GET")
            .arg(&self.config.key)
            .query_async(&mut self.conn)
            .await?;
        if current.as_deref() != Some(guard.owner.as_str()) {
            return Ok(false);
        }
        // The second window: ours at the GET, maybe someone else's at the DEL.
        self.env.point("before_del").await;
        let n: i64 = redis::cmd("DEL")
            .arg(&self.config.key)
            .query_async(&mut self.conn)
            .await?;
        Ok(n == 1)
    }
}
