//! PostgreSQL's advisory locks, as migration tools, job queues and leader elections use them
//! (the manual's "Advisory Locks"; Rails' `with_advisory_lock`, golang-migrate, goose, Flyway).
//! The lock's name becomes a `bigint` key ([`advisory_key`]). Four kinds:
//!
//! - `pg-advisory-lock`: a session lock. `SET lock_timeout` to the wait bound, then
//!   `pg_advisory_lock(key)`; release is `pg_advisory_unlock(key)`, which answers `f` (only a
//!   WARNING) when the session does not hold it. The session keeps the lock, not the client:
//!   a terminated session, an idle timeout, a failover or a pooler's recycled connection frees
//!   it while the client still believes it holds (wolverine#2602), and behind a transaction
//!   pooler it belongs to whichever server connection ran the statement (pgbouncer#102).
//! - `pg-advisory-xact-lock`: `BEGIN`, `pg_advisory_xact_lock(key)`, the critical section inside
//!   the transaction, `COMMIT` to release: what works behind a transaction pooler, since the
//!   whole transaction runs on one server connection (Rails' `advisory_locks: false` advice).
//! - `pg-try-advisory-lock`: `pg_try_advisory_lock(key)` polled every `retry_ms` until the wait
//!   bound (Rails' migration lock), released like the session lock.
//! - `pg-advisory-lock-fenced`: the session lock, then `nextval` of a sequence as the fencing
//!   token the resource checks: a holder whose session was ended writes with a token lower than
//!   the next holder's, so the resource refuses it. Sequences never go back, even across a crash
//!   or a promotion (values are WAL-logged ahead), so the token only grows.

use crate::backend::postgres::seam::{PgClient, PgError};
use crate::env::Env;
use crate::lock::{retry_pause, Guard, Lock, LockConfig, LockError};

/// The sequence the fenced lock draws its tokens from (the worlds create it first).
pub const FENCE_SEQUENCE: &str = "lockcheck_fence";

/// `pg-advisory-lock`: the session advisory lock.
pub const NAME_SESSION: &str = "pg-advisory-lock";
/// `pg-advisory-xact-lock`: the transaction-level advisory lock.
pub const NAME_XACT: &str = "pg-advisory-xact-lock";
/// `pg-try-advisory-lock`: the try-lock, polled.
pub const NAME_TRY: &str = "pg-try-advisory-lock";
/// `pg-advisory-lock-fenced`: the session lock with a sequence's value as fencing token.
pub const NAME_FENCED: &str = "pg-advisory-lock-fenced";

/// The session lock.
pub const SESSION: u8 = 0;
/// The transaction-level lock.
pub const XACT: u8 = 1;
/// The polled try-lock.
pub const TRY: u8 = 2;
/// The session lock with a fencing token.
pub const FENCED: u8 = 3;

const ABOUTS: [&str; 4] = [
    "PostgreSQL: session advisory lock (SET lock_timeout; pg_advisory_lock; pg_advisory_unlock): the session holds it, so a terminated session, a failover or a transaction pooler frees or moves it (pgbouncer#102, wolverine#2602)",
    "PostgreSQL: transaction-level advisory lock (BEGIN; pg_advisory_xact_lock; critical section; COMMIT): one transaction, one server connection, safe behind a transaction pooler",
    "PostgreSQL: pg_try_advisory_lock polled every retry_ms until the wait bound (Rails' migration lock), released with pg_advisory_unlock",
    "PostgreSQL: session advisory lock whose fencing token is nextval of a sequence, checked by the resource",
];

/// The advisory key of lock name `name`: its 64-bit FNV-1a hash, as a `bigint`. Libraries hash
/// the name the same way in spirit (Rails: CRC32 of the database name and a salt).
pub fn advisory_key(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// One client's advisory lock (variant `V`: [`SESSION`], [`XACT`], [`TRY`] or [`FENCED`]).
pub struct AdvisoryLock<C, E, const V: u8> {
    conn: C,
    env: E,
    config: LockConfig,
    key: i64,
}

impl<C, E, const V: u8> AdvisoryLock<C, E, V> {
    /// The lock on `config.key`, over `conns`' one connection.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        let conn = crate::lock::only_connection(conns);
        AdvisoryLock {
            key: advisory_key(&config.key),
            conn,
            env,
            config,
        }
    }
}

/// A statement's single text value.
fn value(rows: &[Vec<Option<String>>]) -> Option<&str> {
    rows.first()?.first()?.as_deref()
}

impl From<PgError> for LockError {
    fn from(e: PgError) -> LockError {
        LockError::Service(format!("postgres: {e}"))
    }
}

impl<C, E, const V: u8> AdvisoryLock<C, E, V>
where
    C: PgClient + Sync,
    E: Env,
{
    fn guard(&self, started: u64, token: Option<u64>) -> Guard {
        Guard {
            // The server knows no owner (the session is one): a uuid tells grants apart.
            owner: self.env.uuid().to_string(),
            fencing_token: token,
            acquired_at_ms: started,
            // No lease: the lock lasts as long as the session (or the transaction).
            valid_until_ms: u64::MAX,
        }
    }

    async fn sql(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, PgError> {
        self.conn.simple_query(sql).await
    }

    /// One blocking attempt: the lock, `None` when the wait bound ran out, an error otherwise.
    async fn blocking_attempt(&mut self) -> Result<Option<()>, PgError> {
        let wait_ms = self.config.wait.as_millis().max(1);
        let k = self.key;
        if V == XACT {
            self.sql("BEGIN").await?;
            self.sql(&format!("SET lock_timeout = {wait_ms}")).await?;
            return match self
                .sql(&format!("SELECT pg_advisory_xact_lock({k})"))
                .await
            {
                Ok(_) => Ok(Some(())),
                Err(e) if e.is_busy() => {
                    self.sql("ROLLBACK").await?;
                    Ok(None)
                }
                Err(e) => Err(e),
            };
        }
        self.sql(&format!("SET lock_timeout = {wait_ms}")).await?;
        match self.sql(&format!("SELECT pg_advisory_lock({k})")).await {
            Ok(_) => Ok(Some(())),
            Err(e) if e.is_busy() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl<C, E, const V: u8> Lock for AdvisoryLock<C, E, V>
where
    C: PgClient + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = ABOUTS[V as usize];

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        loop {
            let started = self.env.now_ms();
            let got = if V == TRY {
                let k = self.key;
                self.sql(&format!("SELECT pg_try_advisory_lock({k})"))
                    .await
                    .map(|rows| (value(&rows) == Some("t")).then_some(()))
            } else {
                self.blocking_attempt().await
            };
            match got {
                Ok(Some(())) => {
                    let token = if V == FENCED {
                        let rows = self
                            .sql(&format!("SELECT nextval('{FENCE_SEQUENCE}')"))
                            .await?;
                        value(&rows).and_then(|v| v.parse().ok())
                    } else {
                        None
                    };
                    return Ok(Some(self.guard(started, token)));
                }
                // Busy (a try-lock's `f`, or a wait that ran out): try again until the bound.
                Ok(None) if V == TRY => {}
                Ok(None) => return Ok(None),
                // The session went (a termination, a crash): the next statement reconnects.
                Err(e) if e.session_gone() => {}
                Err(e) => return Err(e.into()),
            }
            if !retry_pause(&self.env, &self.config, deadline).await {
                return Ok(None);
            }
        }
    }

    async fn release(&mut self, _guard: &Guard) -> Result<bool, LockError> {
        if V == XACT {
            self.sql("COMMIT").await?;
            return Ok(true);
        }
        let k = self.key;
        let rows = self.sql(&format!("SELECT pg_advisory_unlock({k})")).await?;
        Ok(value(&rows) == Some("t"))
    }
}
