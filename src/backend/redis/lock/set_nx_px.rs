//! `SET key token NX PX ttl` with a Lua compare-and-delete release (the Lettuce and Redlock articles).
//!
//! The owner token is a random uuid so a client can tell its own entry from another's; the release
//! runs GET-compare-DEL as one script, because as two commands another client's SET could land
//! between them (the Redlock article). What this lock cannot prevent: a lease that runs out while its holder
//! is paused or slow, and a failover to a replica that never received the key. The last one has
//! an optional mitigation, `[lock] wait_replicas`: `WAIT` for the replicas after each grant and
//! give back a grant they did not acknowledge ([`super::WaitReplicas`]).

use crate::env::Env;
use crate::lock::lease::{release_own_entry, renew_string_lease, COMPARE_AND_DELETE};
use crate::lock::{Guard, Lock, LockConfig, LockError, Next, Wait};
use redis::aio::ConnectionLike;

/// The kind's scenario-file name.
pub const NAME: &str = crate::lock::redis_options::SET_NX_PX;

/// One client's handle on a `SET NX PX` lock.
pub struct SetNxPx<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
}

impl<C, E> SetNxPx<C, E> {
    /// One client's lock over `conn`; `env` supplies the owner token, the clock its validity
    /// time is computed on, and the retry pauses.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        SetNxPx {
            conn: crate::lock::only_connection(conns),
            env,
            config,
        }
    }
}

/// With `wait_replicas`: whether enough replicas acknowledged the grant just made under
/// `owner` (`WAIT`). If not, the grant is given back (compare-and-delete: the entry is
/// removed only if it is still ours) before the client could act on it: a failover now would
/// promote a replica without it and hand the lock to someone else. A `WAIT` that fails (the
/// master died under it) counts as not acknowledged. Without `wait_replicas`: true.
async fn replicated<C: ConnectionLike + Send>(
    conn: &mut C,
    config: &LockConfig,
    owner: &str,
) -> bool {
    let Some(w) = config.wait_replicas else {
        return true;
    };
    let acked: Result<i64, _> = redis::cmd("WAIT")
        .arg(w.replicas)
        .arg(w.timeout.as_millis() as u64)
        .query_async(conn)
        .await;
    if matches!(acked, Ok(n) if n >= i64::from(w.replicas)) {
        return true;
    }
    let _: Result<i64, _> = COMPARE_AND_DELETE
        .key(&config.key)
        .arg(owner)
        .invoke_async(conn)
        .await;
    false
}

impl<C, E> Lock for SetNxPx<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "SET key token NX PX ttl; release by a Lua compare-and-delete (the Lettuce and Redlock articles)";
    const RENEWS: bool = true;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let wait = Wait::start(&self.env, &self.config);
        // The same request every attempt: built once (building it was a tenth of a simulated
        // lock cycle when four clients contend and each waiter retries about four times).
        let mut set = redis::cmd("SET");
        set.arg(&self.config.key)
            .arg(&owner)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        loop {
            // The lease starts, as far as this client can know, before the request is sent.
            let started = self.env.monotonic_ms();
            // `Some(())` for the `OK` of a granted lock, `None` for the nil of a taken one.
            let reply: Result<Option<()>, _> = set.query_async(&mut self.conn).await;
            match wait.next(reply).await? {
                Next::Granted(()) => {
                    if !replicated(&mut self.conn, &self.config, &owner).await {
                        // Given back: try again after the usual pause, within the same wait.
                        match wait.next::<()>(Ok(None)).await? {
                            Next::GaveUp => return Ok(None),
                            _ => continue,
                        }
                    }
                    return Ok(Some(Guard {
                        owner,
                        fencing_token: None,
                        acquired_at_ms: started,
                        valid_until_ms: started + ttl_ms,
                    }));
                }
                Next::Again => {}
                Next::GaveUp => return Ok(None),
            }
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        release_own_entry(&mut self.conn, &self.config.key, &guard.owner).await
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        let ttl_ms = self.config.ttl.as_millis() as u64;
        renew_string_lease(&mut self.conn, &self.env, &self.config.key, ttl_ms, guard).await
    }
}
