//! The protected resource: a storage node apart from the lock's Redis, and what holders do to it.
//!
//! The lock is only a means; the damage a user cares about happens here. The storage is a
//! separate server (a simulated storage node in simulation, its own `redis-server` process in
//! real mode) reached through the same [`redis::aio::ConnectionLike`] seam, so the same client code
//! runs in both modes. Every write carries the holder's fencing token when its lock issued one, and
//! the storage refuses a token older than the highest it has seen (Kleppmann's fix: the check is
//! made by the resource, not by the lock). Accepted writes get a sequence number, so checkers see
//! the order the storage applied them in, whatever order the replies arrived in.
//!
//! Two workloads use it: a read-modify-write counter (a lost update is an accepted write that
//! overwrote a value its writer never read: Jepsen's lock-set damage, as a number) and the address-book article's
//! address book ("a user's first address becomes the default; each user has exactly one default").

use redis::aio::ConnectionLike;
use std::sync::LazyLock;

/// The storage's fenced counter write.
pub static FENCED_WRITE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/fenced_write.lua")));

/// The storage's fenced address insert.
pub static FENCED_INSERT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/fenced_insert.lua")));

/// The read-modify-write counter the holders increment.
pub const COUNTER_KEY: &str = "lockcheck:resource:counter";
/// The highest fencing token the storage has accepted: the fenced scripts refuse a lower one.
pub const HIGHEST_TOKEN_KEY: &str = "lockcheck:resource:highest-token";
/// The storage's write counter: each accepted write takes the next number, so checkers see the
/// order the storage applied writes in, whatever order the replies arrived in.
pub const SEQ_KEY: &str = "lockcheck:resource:seq";

/// The key of a user's address rows (a hash: address id -> "1" if default, else "0").
pub fn addresses_key(user: u32) -> String {
    format!("lockcheck:resource:addresses:{user}")
}

/// A client of the storage node.
#[derive(Clone)]
pub struct Store<C> {
    conn: C,
}

impl<C: ConnectionLike + Send> Store<C> {
    /// A client of the storage over `conn`, a connection to the storage node, never to the
    /// lock's Redis: the damage is measured where a user would see it.
    pub fn new(conn: C) -> Self {
        Store { conn }
    }

    /// The counter's value (0 before the first write).
    pub async fn read(&mut self) -> redis::RedisResult<u64> {
        let v: Option<u64> = redis::cmd("GET")
            .arg(COUNTER_KEY)
            .query_async(&mut self.conn)
            .await?;
        Ok(v.unwrap_or(0))
    }

    /// Writes the counter; `Some(seq)` if the storage accepted it, `None` if it refused a stale
    /// fencing token.
    pub async fn write(
        &mut self,
        value: u64,
        token: Option<u64>,
    ) -> redis::RedisResult<Option<u64>> {
        let seq: u64 = FENCED_WRITE
            .key(COUNTER_KEY)
            .key(HIGHEST_TOKEN_KEY)
            .key(SEQ_KEY)
            .arg(value)
            .arg(token.map(|t| t.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn)
            .await?;
        Ok((seq > 0).then_some(seq))
    }

    /// How many addresses `user` has.
    pub async fn count_addresses(&mut self, user: u32) -> redis::RedisResult<u64> {
        redis::cmd("HLEN")
            .arg(addresses_key(user))
            .query_async(&mut self.conn)
            .await
    }

    /// Inserts an address row; `Some(seq)` if accepted.
    pub async fn insert_address(
        &mut self,
        user: u32,
        id: &str,
        is_default: bool,
        token: Option<u64>,
    ) -> redis::RedisResult<Option<u64>> {
        let seq: u64 = FENCED_INSERT
            .key(addresses_key(user))
            .key(HIGHEST_TOKEN_KEY)
            .key(SEQ_KEY)
            .arg(id)
            .arg(if is_default { "1" } else { "0" })
            .arg(token.map(|t| t.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn)
            .await?;
        Ok((seq > 0).then_some(seq))
    }

    /// (addresses, defaults) of `user`.
    pub async fn address_book(&mut self, user: u32) -> redis::RedisResult<(u64, u64)> {
        let rows: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(addresses_key(user))
            .query_async(&mut self.conn)
            .await?;
        let defaults = rows.values().filter(|v| v.as_str() == "1").count() as u64;
        Ok((rows.len() as u64, defaults))
    }

    /// (counter value, accepted writes).
    pub async fn totals(&mut self) -> redis::RedisResult<(u64, u64)> {
        let value = self.read().await?;
        let seq: Option<u64> = redis::cmd("GET")
            .arg(SEQ_KEY)
            .query_async(&mut self.conn)
            .await?;
        Ok((value, seq.unwrap_or(0)))
    }
}
