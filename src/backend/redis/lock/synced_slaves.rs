//! Redisson's `checkLockSyncedSlaves` (`[lock] wait_replicas` on `kind = "redisson"`): every
//! write an `RLock` makes (the acquire script, the unlock script) goes to the key's master in one
//! batch with `WAIT <replicas> <slavesSyncTimeout>`, and a `WAIT` that answers 0 fails the call
//! with "None of slaves were synced".
//!
//! Why this matters after a failover: the check runs *after* the script, on the master that ran
//! it. A promoted replica has no replica of its own until another node follows it, so every
//! `WAIT` answers 0 and every call fails, yet every acquire script has already written its hold
//! count. What happens to that count is the difference between Redisson releases
//! ([`UnsyncedAttempt`]): before the fix for redisson#4822 (also reported as #4706 and #5205) the
//! count stays, the same client's next attempt adds one to it (the lock is reentrant), and its
//! unlock after the window only takes one off, so the hash never goes and no other client can
//! take the lock while that one keeps using it. The fix (`handleNoSync`) runs the unlock script
//! to undo the attempt before failing it.

use crate::lock::config::WaitReplicas;
use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisError, RedisResult, Script, ScriptInvocation};

pub use crate::lock::config::UnsyncedAttempt;

/// The message of the `IllegalStateException` Redisson fails the call with.
pub const NONE_SYNCED: &str = "None of slaves were synced";

/// How many times today's Redisson retries a lock attempt that failed with [`NONE_SYNCED`]
/// (`retryAttempts`, 3 by default), each after `retryInterval`.
pub const RETRY_ATTEMPTS: u32 = 3;

/// Runs `call` (an invocation of `script`) as Redisson runs an `RLock` write: alone without
/// `wait`; with it, in one pipeline with `WAIT` (one request to the key's master: a cluster
/// client routes a pipeline by its first keyed command, so `WAIT` asks the master that ran the
/// script). The pipeline loads the script first, so the call never meets `NOSCRIPT` on a master
/// that has not seen it (a promoted replica: `SCRIPT LOAD` is not replicated), as Redisson's
/// `EVAL` never does. Returns the
/// script's reply and whether any replica acknowledged it (always true without `wait`). The
/// script has run either way: a caller that fails an unsynced call must say what became of it.
pub async fn eval_write<T, C>(
    conn: &mut C,
    script: &Script,
    call: &ScriptInvocation<'_>,
    wait: Option<WaitReplicas>,
) -> RedisResult<(T, bool)>
where
    T: FromRedisValue,
    C: ConnectionLike + Send,
{
    let Some(w) = wait else {
        return Ok((call.invoke_async(conn).await?, true));
    };
    let (reply, synced): (T, i64) = redis::pipe()
        .load_script(script)
        .ignore()
        .invoke_script(call)
        .cmd("WAIT")
        .arg(w.replicas)
        .arg(w.timeout.as_millis() as u64)
        .query_async(conn)
        .await?;
    // Redisson fails the call only when none synced (`getSyncedSlaves() == 0`), not when fewer
    // than it asked for did.
    Ok((reply, synced > 0))
}

/// The error an unsynced call fails with: a client-side error (not a transient one: Redisson's
/// own retry of it is [`RETRY_ATTEMPTS`], not its connection retry).
pub fn none_synced(wait: Option<WaitReplicas>) -> RedisError {
    let detail = wait
        .map(|w| {
            format!(
                "WAIT {} {} answered 0 after the script ran",
                w.replicas,
                w.timeout.as_millis()
            )
        })
        .unwrap_or_default();
    RedisError::from((redis::ErrorKind::Client, NONE_SYNCED, detail))
}

/// Whether `e` is the [`none_synced`] error.
pub fn is_none_synced(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Client && e.to_string().contains(NONE_SYNCED)
}
