//! `SET key value EX n NX`, released by a plain `DEL` (the Redlock article, its second step).
//!
//! The lease fixes the crashed-holder deadlock of a bare `SETNX`, but the release checks nothing:
//! if A's lease ran out while it was paused, B took the lock, and A's `DEL` now removes B's entry,
//! so C can take the lock while B still works (the Redlock article's figure). The value is a random token only
//! so the history can name holders; the release never looks at it.

use crate::env::Env;
use crate::lock::{Guard, Lock, LockConfig, LockError, Next, Wait};
use redis::aio::ConnectionLike;

/// One client's handle on a `SET EX NX` + `DEL` lock.
pub struct SetExNxDel<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
}

/// The kind's scenario-file name.
pub const NAME: &str = "set-ex-nx-del";

impl<C, E> SetExNxDel<C, E> {
    /// One client's lock over `conn`; `env` supplies the random value and the retry pauses.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        SetExNxDel {
            conn: crate::lock::only_connection(conns),
            env,
            config,
        }
    }
}

/// `EX seconds` as in the article when the lease is whole seconds, `PX` otherwise.
pub(crate) fn expiry_args(cmd: &mut redis::Cmd, ttl_ms: u64) {
    if ttl_ms.is_multiple_of(1000) {
        cmd.arg("EX").arg(ttl_ms / 1000);
    } else {
        cmd.arg("PX").arg(ttl_ms);
    }
}

impl<C, E> Lock for SetExNxDel<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str =
        "SET key value EX n NX; release by a plain DEL, no owner check (the Redlock article)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let wait = Wait::start(&self.env, &self.config);
        // The same request every attempt, so it is built once.
        let mut cmd = redis::cmd("SET");
        cmd.arg(&self.config.key).arg(&owner);
        expiry_args(&mut cmd, ttl_ms);
        cmd.arg("NX");
        loop {
            let started = self.env.monotonic_ms();
            let reply: Result<Option<()>, _> = cmd.query_async(&mut self.conn).await;
            match wait.next(reply).await? {
                Next::Granted(()) => {
                    return Ok(Some(Guard {
                        owner,
                        fencing_token: None,
                        acquired_at_ms: started,
                        valid_until_ms: started + ttl_ms,
                    }))
                }
                Next::Again => {}
                Next::GaveUp => return Ok(None),
            }
        }
    }

    async fn release(&mut self, _guard: &Guard) -> Result<bool, LockError> {
        let n: i64 = redis::cmd("DEL")
            .arg(&self.config.key)
            .query_async(&mut self.conn)
            .await?;
        Ok(n == 1)
    }
}
