//! The lock seam: what a distributed lock implementation provides, and the guard it hands out.
//!
//! A lock is written against two things only: a Redis connection (anything implementing
//! [`redis::aio::ConnectionLike`]) and an [`Env`](crate::env::Env) (its node's clock, timers,
//! tasks and randomness). The real backend passes a redis-rs connection and the real environment;
//! the simulator passes lockcheck's simulated connection and environment. The lock cannot tell.
//!
//! To test your own lock, implement [`Lock`] for it and register its constructor with
//! `lockcheck::Harness` (see the README and `examples/check_then_set.rs`).

mod acquire_loop;
pub mod fenced;
pub mod lettuce_reentrant;
pub mod mysql;
pub mod mysql_for_update;
pub mod mysql_insert_unique;
pub mod mysql_options;
pub mod naive_setnx_expire;
pub mod redisson;
pub mod redlock;
pub mod set_ex_nx_del;
pub mod set_nx_px;

use std::future::Future;
use std::time::Duration;

pub use acquire_loop::is_transient;
pub(crate) use acquire_loop::{retry_pause, Next, Wait};
pub use fenced::Fenced;
pub use lettuce_reentrant::LettuceReentrant;
pub use naive_setnx_expire::NaiveSetnxExpire;
pub use redisson::Redisson;
pub use redlock::{Redlock, RedlockBug, RedlockOptions};
pub use set_ex_nx_del::SetExNxDel;
pub use set_nx_px::SetNxPx;

use crate::env::{ClockKind, NamedPoint};
use crate::subscription::Subscribe;

/// What a holder has: proof of ownership and what it believes about its lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The owner token stored in Redis (a uuid), used to release only our own entry.
    pub owner: String,
    /// A fencing token, for locks that issue one (strictly increasing per grant).
    pub fencing_token: Option<u64>,
    /// The holder's clock ([`Lock::validity_clock`]: monotonic for lockcheck's locks) when the
    /// successful attempt started.
    pub acquired_at_ms: u64,
    /// Where the holder believes its lease ends, on that clock: the validity time.
    pub valid_until_ms: u64,
}

/// A lock operation failed in a way the caller should see (not "the lock was busy").
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A Redis command failed (connection lost, timeout, a script error): the client cannot
    /// know whether its command took effect, which is what a checker must allow for.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A database lock's SQL call failed with something other than "busy".
    #[error("sql: {0}")]
    Sql(#[from] crate::sql::SqlError),
    /// A client program (`kind = "process"`) broke the protocol, failed, or did not answer.
    #[error("lock client: {0}")]
    Client(String),
    /// The lock has no such operation (`renew` on a lock without one, any call on a kind whose
    /// lock is an external program), so a caller that needs it fails loudly instead of silently
    /// doing something else.
    #[error("this lock does not support {0}")]
    Unsupported(&'static str),
}

/// A distributed lock, as one client uses it.
///
/// Every method returns a `Send` future so the same lock can run in tokio tasks and madsim nodes.
pub trait Lock: Send {
    /// The named points inside this lock's protocol where a fault can fire (`on = "<name>"`),
    /// each passed with [`Env::point`](crate::env::Env::point) as the lock goes by. A scenario
    /// for a lock of your own names them once they are declared here and given to
    /// [`Scenario::parse_with_points`](crate::scenario::Scenario::parse_with_points).
    const POINTS: &'static [NamedPoint] = &[];

    /// Tries to acquire until the configured wait bound; `Ok(None)` when it gave up.
    fn acquire(&mut self) -> impl Future<Output = Result<Option<Guard>, LockError>> + Send;

    /// Releases; `Ok(true)` when this client's own entry was deleted.
    fn release(&mut self, guard: &Guard) -> impl Future<Output = Result<bool, LockError>> + Send;

    /// The clock this lock measures validity times with: [`Guard::valid_until_ms`] is a reading
    /// of it, and a holder that checks its validity before writing compares it with this clock.
    /// Durations belong on the monotonic clock (the default); a wall-clock jump back would make a
    /// lease measured on the wall clock last longer than it does.
    fn validity_clock(&self) -> ClockKind {
        ClockKind::Monotonic
    }

    /// Extends the lease of a held lock (a watchdog's renewal, the workload's `renew_every_ms`)
    /// and moves `guard.valid_until_ms` to the new end of its validity time (on
    /// [`Lock::validity_clock`]); `Ok(false)` when the entry was no longer ours, which a correct
    /// renewal must check on the server in the same step as it extends the lease: a plain
    /// `PEXPIRE` would extend whoever holds the key now.
    fn renew(&mut self, guard: &mut Guard) -> impl Future<Output = Result<bool, LockError>> + Send {
        let _ = guard;
        async { Err(LockError::Unsupported("renew")) }
    }
}

/// The lock kinds a scenario can name: lockcheck's own, by their scenario-file names, and
/// [`LockKind::Own`], a lock the program running lockcheck registered (the harness).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockKind {
    /// `SET key token NX PX ttl`, released by a Lua compare-and-delete (the Lettuce and Redlock articles).
    SetNxPx,
    /// `SET key value EX n NX`, released by a plain `DEL` (the Redlock article).
    SetExNxDel,
    /// `SETNX` then a separate `EXPIRE`; release by `GET`, compare, `DEL` (the address-book article).
    NaiveSetnxExpire,
    /// Lettuce: a SETNX+PEXPIRE script returning PTTL, EVALSHA, client-side reentrancy (the Lettuce article).
    LettuceReentrant,
    /// Redisson's `RLock`: hash lock, watchdog, pub/sub wake-ups (the Redisson article).
    Redisson,
    /// `SET NX PX` plus a fencing token from `INCR` (Kleppmann, cited by the Redlock article).
    Fenced,
    /// Redlock: `SET NX PX` on N independent masters, a majority and validity time (the Redlock article).
    Redlock,
    /// The user's own client program in any language, driven over the client protocol
    /// (`command = [...]`; real mode only).
    Process,
    /// `SELECT … FOR UPDATE` in a transaction on MySQL/MariaDB (the MySQL locks article).
    MysqlForUpdate,
    /// A row inserted under a unique key, with an optional cleanup job (the MySQL locks article).
    MysqlInsertUnique,
    /// A lock of the user's own, registered under this name with the harness
    /// (`lockcheck::Harness::lock`), which builds it; the scenario's `[lock.params]` go to its
    /// constructor.
    Own(&'static str),
}

impl LockKind {
    /// Every kind lockcheck ships, for `lockcheck list` and error messages.
    pub const ALL: &'static [LockKind] = &[
        LockKind::SetNxPx,
        LockKind::SetExNxDel,
        LockKind::NaiveSetnxExpire,
        LockKind::LettuceReentrant,
        LockKind::Redisson,
        LockKind::Fenced,
        LockKind::Redlock,
        LockKind::Process,
        LockKind::MysqlForUpdate,
        LockKind::MysqlInsertUnique,
    ];

    /// The name scenario files and reports use (`set-nx-px`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LockKind::SetNxPx => "set-nx-px",
            LockKind::SetExNxDel => "set-ex-nx-del",
            LockKind::NaiveSetnxExpire => "naive-setnx-expire",
            LockKind::LettuceReentrant => "lettuce-reentrant",
            LockKind::Redisson => "redisson",
            LockKind::Fenced => "fenced",
            LockKind::Redlock => "redlock",
            LockKind::Process => "process",
            LockKind::MysqlForUpdate => "mysql-for-update",
            LockKind::MysqlInsertUnique => "mysql-insert-unique",
            LockKind::Own(name) => name,
        }
    }

    /// The kind lockcheck ships under `name` (its scenario-file name), if any.
    pub fn builtin(name: &str) -> Option<LockKind> {
        LockKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// One line about the design and where it comes from.
    pub fn about(self) -> &'static str {
        match self {
            LockKind::SetNxPx => {
                "SET key token NX PX ttl; release by a Lua compare-and-delete (the Lettuce and Redlock articles)"
            }
            LockKind::SetExNxDel => {
                "SET key value EX n NX; release by a plain DEL, no owner check (the Redlock article)"
            }
            LockKind::NaiveSetnxExpire => {
                "Jedis SETNX, then EXPIRE as a second command; release GET, compare, DEL; retry every 2 ms (the address-book article)"
            }
            LockKind::LettuceReentrant => {
                "Lettuce: SETNX+PEXPIRE script returning PTTL, SCRIPT LOAD + EVALSHA, reentrancy counted on the client, waiters poll every 5 ms (the Lettuce article)"
            }
            LockKind::Redisson => {
                "Redisson RLock: hash lock uuid:thread -> count, watchdog lease 30 s renewed every 10 s, unlock publishes to waiters (the Redisson article)"
            }
            LockKind::Fenced => {
                "SET NX PX plus a fencing token from INCR on the same Redis; storage refuses older tokens (Kleppmann, cited by the Redlock article)"
            }
            LockKind::Redlock => {
                "SET NX PX on N independent masters in parallel; a majority within the validity time (the Redlock article)"
            }
            LockKind::Process => {
                "your own client program (any language) over the JSON-lines client protocol; real mode only (docs/client-protocol.md)"
            }
            LockKind::MysqlForUpdate => {
                "MySQL: BEGIN; SELECT … FOR UPDATE on the lock's row; COMMIT to release; the row lock lives as long as the transaction (the MySQL locks article, docs/mysql.md)"
            }
            LockKind::MysqlInsertUnique => {
                "MySQL: INSERT the lock name under a unique key, duplicate key = busy; DELETE by owner to release; optional age-based cleanup job (the MySQL locks article, docs/mysql.md)"
            }
            LockKind::Own(_) => "a lock of your own, registered with the harness",
        }
    }

    /// Whether the kind is one of the MySQL locks (its own worlds: a database, not Redis).
    pub fn is_mysql(self) -> bool {
        matches!(self, LockKind::MysqlForUpdate | LockKind::MysqlInsertUnique)
    }

    /// Whether the kind has a lease of its own when the scenario sets no `ttl_ms`.
    pub fn has_default_lease(self) -> bool {
        matches!(self, LockKind::Redisson)
    }

    /// Whether the kind's lock implements [`Lock::renew`], so the workload's `renew_every_ms`
    /// can renew its lease. A lock of your own is assumed to (its scenario asks for renewals).
    pub fn renews(self) -> bool {
        matches!(
            self,
            LockKind::SetNxPx | LockKind::Redisson | LockKind::Fenced | LockKind::Own(_)
        )
    }

    /// Named points inside the lock's protocol where a fault can fire (`on = "<point>"`).
    pub fn points(self) -> &'static [NamedPoint] {
        match self {
            LockKind::NaiveSetnxExpire => naive_setnx_expire::POINTS,
            _ => &[],
        }
    }
}

/// How a client's lock is configured (from the scenario's `[lock]`). `P` is the type a lock of
/// your own reads its `[lock.params]` table into (with serde); lockcheck's locks take none.
#[derive(Clone, Debug)]
pub struct LockConfig<P = ()> {
    /// The key the lock lives under.
    pub key: String,
    /// The lease each grant asks for (or the watchdog timeout).
    pub ttl: Duration,
    /// How long `acquire` keeps trying before it gives up.
    pub wait: Duration,
    /// Pause between failed attempts, uniform in this range.
    pub retry: (Duration, Duration),
    /// No explicit lease was set: a lock with a watchdog (Redisson) takes `ttl` as its watchdog
    /// timeout and renews it while held.
    pub watchdog: bool,
    /// Redlock's parameters (ignored by other kinds).
    pub redlock: RedlockOptions,
    /// `set-nx-px` only: after a grant, `WAIT` for this many replicas to have the entry, and
    /// give the grant back when they do not (`None`: no `WAIT`, the articles' lock).
    pub wait_replicas: Option<WaitReplicas>,
    /// The scenario's `[lock.params]`, read into the lock's own parameter type.
    pub params: P,
}

impl<P> LockConfig<P> {
    /// The same configuration with `params` as its parameters.
    pub fn with_params<Q>(self, params: Q) -> LockConfig<Q> {
        LockConfig {
            key: self.key,
            ttl: self.ttl,
            wait: self.wait,
            retry: self.retry,
            watchdog: self.watchdog,
            redlock: self.redlock,
            wait_replicas: self.wait_replicas,
            params,
        }
    }
}

/// `WAIT numreplicas timeout` after a grant: the mitigation the Redis documentation offers for a
/// failover to a replica that never received the key. `WAIT` makes the write synchronous for the
/// replicas that acknowledge it; a grant they have not acknowledged is given back, so no holder
/// enters on an entry a promoted replica would not have. (It does not make the lock safe under
/// a crash that restarts a master empty, or under pauses and clock jumps: only the failover
/// window closes.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitReplicas {
    /// Replicas that must acknowledge the grant.
    pub replicas: u32,
    /// How long `WAIT` blocks for them.
    pub timeout: Duration,
}

/// Why an [`AnyLock::External`] lock cannot run.
const NOT_BUILT_HERE: &str = "running in-process: `kind = \"process\"` needs real mode (--real), \
     and a lock of your own is built by the program that registered it";

/// Any lock lockcheck ships, chosen at run time from the scenario.
pub enum AnyLock<C, E>
where
    C: Subscribe,
{
    /// `set-nx-px`: [`SetNxPx`].
    SetNxPx(SetNxPx<C, E>),
    /// `set-ex-nx-del`: [`SetExNxDel`].
    SetExNxDel(SetExNxDel<C, E>),
    /// `naive-setnx-expire`: [`NaiveSetnxExpire`].
    NaiveSetnxExpire(NaiveSetnxExpire<C, E>),
    /// `lettuce-reentrant`: [`LettuceReentrant`].
    LettuceReentrant(LettuceReentrant<C, E>),
    /// `redisson`: [`Redisson`].
    Redisson(Redisson<C, E>),
    /// `fenced`: [`Fenced`].
    Fenced(Fenced<C, E>),
    /// `redlock`: [`Redlock`].
    Redlock(Redlock<C, E>),
    /// A kind that has no in-process implementation here (`process`: its lock is a separate
    /// program that only real mode starts; a lock of your own, which the registry builds).
    /// Every call fails with [`LockError::Unsupported`].
    External(LockKind),
}

impl<C, E> AnyLock<C, E>
where
    C: redis::aio::ConnectionLike + Subscribe + Clone + Send + Sync + 'static,
    E: crate::env::Env,
{
    /// Builds the lock of `kind` for one client.
    pub fn build(kind: LockKind, config: LockConfig, mut conns: Vec<C>, env: E) -> Self {
        match kind {
            LockKind::SetNxPx => AnyLock::SetNxPx(SetNxPx::new(conns.remove(0), env, config)),
            LockKind::SetExNxDel => {
                AnyLock::SetExNxDel(SetExNxDel::new(conns.remove(0), env, config))
            }
            LockKind::NaiveSetnxExpire => {
                AnyLock::NaiveSetnxExpire(NaiveSetnxExpire::new(conns.remove(0), env, config))
            }
            LockKind::LettuceReentrant => {
                AnyLock::LettuceReentrant(LettuceReentrant::new(conns.remove(0), env, config))
            }
            LockKind::Redisson => AnyLock::Redisson(Redisson::new(conns.remove(0), env, config)),
            LockKind::Fenced => AnyLock::Fenced(Fenced::new(conns.remove(0), env, config)),
            LockKind::Redlock => AnyLock::Redlock(Redlock::new(conns, env, config)),
            // The MySQL locks run on a database connection, built by their own worlds
            // (`sim::mysql_world`, `real::mysql_world`) as `lock::mysql::SqlLock`.
            // A lock of the user's own is built by the program that registered it.
            LockKind::Process
            | LockKind::MysqlForUpdate
            | LockKind::MysqlInsertUnique
            | LockKind::Own(_) => AnyLock::External(kind),
        }
    }
}

impl<C, E> Lock for AnyLock<C, E>
where
    C: redis::aio::ConnectionLike + Subscribe + Clone + Send + Sync + 'static,
    E: crate::env::Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.acquire().await,
            AnyLock::SetExNxDel(l) => l.acquire().await,
            AnyLock::NaiveSetnxExpire(l) => l.acquire().await,
            AnyLock::LettuceReentrant(l) => l.acquire().await,
            AnyLock::Redisson(l) => l.acquire().await,
            AnyLock::Fenced(l) => l.acquire().await,
            AnyLock::Redlock(l) => l.acquire().await,
            AnyLock::External(_) => Err(LockError::Unsupported(NOT_BUILT_HERE)),
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.release(guard).await,
            AnyLock::SetExNxDel(l) => l.release(guard).await,
            AnyLock::NaiveSetnxExpire(l) => l.release(guard).await,
            AnyLock::LettuceReentrant(l) => l.release(guard).await,
            AnyLock::Redisson(l) => l.release(guard).await,
            AnyLock::Fenced(l) => l.release(guard).await,
            AnyLock::Redlock(l) => l.release(guard).await,
            AnyLock::External(_) => Err(LockError::Unsupported(NOT_BUILT_HERE)),
        }
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        match self {
            AnyLock::SetNxPx(l) => l.renew(guard).await,
            AnyLock::SetExNxDel(l) => l.renew(guard).await,
            AnyLock::NaiveSetnxExpire(l) => l.renew(guard).await,
            AnyLock::LettuceReentrant(l) => l.renew(guard).await,
            AnyLock::Redisson(l) => l.renew(guard).await,
            AnyLock::Fenced(l) => l.renew(guard).await,
            AnyLock::Redlock(l) => l.renew(guard).await,
            AnyLock::External(_) => Err(LockError::Unsupported(NOT_BUILT_HERE)),
        }
    }
}
