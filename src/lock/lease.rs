//! What the lease locks share to end and extend a lease safely: release by compare-and-delete and
//! renewal by compare-and-`PEXPIRE`, each one script, so the owner token is compared on the
//! server in the same step as the entry is deleted or extended (`set-nx-px`, `fenced`, and
//! Redlock's release on each master).

use super::{Guard, LockError};
use crate::env::Env;
use redis::aio::ConnectionLike;
use std::sync::LazyLock;

/// The compare-and-delete release script's text, for `SCRIPT LOAD` when a master answers
/// `NOSCRIPT` (a fresh or restarted server).
pub const COMPARE_AND_DELETE_SOURCE: &str = include_str!("scripts/compare_and_delete.lua");

/// The compare-and-delete release script (one text for real and simulated Redis): `DEL` only
/// while the entry is still ours, as one step, because as two commands another client's `SET`
/// could land between them (the Redlock article).
pub static COMPARE_AND_DELETE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(COMPARE_AND_DELETE_SOURCE));

/// The renewal script: `PEXPIRE` only while the entry is still ours (one text for real and
/// simulated Redis).
pub static COMPARE_AND_PEXPIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/compare_and_pexpire.lua")));

/// Renews the string lease `guard` holds under `key` for `ttl_ms` more (the owner token compared
/// on the server in the same step), and moves its validity time on `env`'s monotonic clock to
/// `ttl_ms` after the request was sent: the lease restarts, as far as the client can know, then.
pub(crate) async fn renew_string_lease<C, E>(
    conn: &mut C,
    env: &E,
    key: &str,
    ttl_ms: u64,
    guard: &mut Guard,
) -> Result<bool, LockError>
where
    C: ConnectionLike + Send,
    E: Env,
{
    let started = env.monotonic_ms();
    let renewed: i64 = COMPARE_AND_PEXPIRE
        .key(key)
        .arg(&guard.owner)
        .arg(ttl_ms)
        .invoke_async(conn)
        .await?;
    if renewed == 1 {
        guard.valid_until_ms = started + ttl_ms;
    }
    Ok(renewed == 1)
}

/// Deletes the string entry under `key` if `owner` still holds it: `Ok(true)` when it was ours.
pub(crate) async fn release_own_entry<C>(
    conn: &mut C,
    key: &str,
    owner: &str,
) -> Result<bool, LockError>
where
    C: ConnectionLike + Send,
{
    let deleted: i64 = COMPARE_AND_DELETE
        .key(key)
        .arg(owner)
        .invoke_async(conn)
        .await?;
    Ok(deleted == 1)
}
