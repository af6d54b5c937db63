//! lockcheck: a deterministic simulation and verification harness for distributed locks.
//!
//! A lock implementation is ordinary async Rust written against two seams: a Redis connection
//! (anything implementing [`redis::aio::ConnectionLike`]) and an [`Env`] (its node's clock,
//! timers, tasks and randomness). lockcheck runs it
//! - in a **simulation** ([`sim`]): a madsim world with simulated Redis masters and replicas
//!   ([`simredis`]), asynchronous replication, failover, GC pauses, partitions and skewed node
//!   clocks, where the same scenario and seed always give the same history; and
//! - on **real processes** ([`real`]): `redis-server`s that lockcheck spawns, faults injected with
//!   signals and `REPLICAOF`, every process cleaned up on every exit path.
//!
//! A run flows through the modules in this order:
//! [`scenario`] (the TOML file, checked) → [`sim`] or [`real`] (a world runs the workload, each
//! client with its [`lock`], while [`schedule`] decides when each fault fires) → [`history`] (every
//! event in true time) → [`check`] (each checker's [`Verdict`]) → [`judge`] (an
//! [`Outcome`]: the verdicts against the scenario's expectations) → [`cli`] (reports, exit codes).
//! `ARCHITECTURE.md` in the repository says where each concept lives.
//!
//! # Example: a GC pause longer than the lease
//!
//! A holder stops for three seconds with a one-second lease. Redis expires its key, the other
//! client acquires, and the first wakes up still inside its critical section:
//!
//! ```
//! use lockcheck::{Mode, Outcome, Scenario, Verdict};
//!
//! let scenario = Scenario::parse("example.toml", r#"
//!     name = "gc-pause"
//!     expect = "violation"
//!     duration_ms = 5000
//!     [lock]
//!     kind = "set-nx-px"
//!     ttl_ms = 1000
//!     [workload]
//!     clients = 2
//!     cycles = 2
//!     hold_ms = [100, 200]
//!     [[faults]]
//!     kind = "pause"
//!     client = "holder"
//!     on = "acquired"
//!     for_ms = 3000
//! "#).unwrap();
//!
//! let locks = lockcheck::Registry::new();
//! let run = locks.run_sim(&scenario, 7);
//! let outcome = Outcome::judge(&scenario, Mode::Sim, 7, run.history);
//! assert_eq!(outcome.verdict(), Verdict::Violation);
//!
//! // Deterministic: the same seed gives the same history, byte for byte.
//! let again = locks.run_sim(&scenario, 7);
//! assert_eq!(again.history.trace_hash(), outcome.trace_hash);
//! ```
//!
//! # Example: testing your own lock
//!
//! Implement [`Lock`] against the two seams and register a constructor with the [`Harness`]:
//! `harness.main()` is then a whole `lockcheck` command line for it (`run`, `explore`, `table`,
//! `--real`, ...), [`Harness::explore`] searches for a violation from a `#[test]`, and its
//! scenarios say `[lock] kind = "check-then-set"`. This lock checks with `GET`, then `SET`s: two
//! clients can both see the key absent, and lockcheck finds it without any fault.
//!
//! ```
//! use lockcheck::{Env, Guard, Harness, Lock, LockConfig, LockError, Mode, Outcome, Verdict};
//! use lockcheck::redis::{self, aio::ConnectionLike};
//!
//! struct CheckThenSet<C, E> { conn: C, env: E, config: LockConfig }
//!
//! impl<C, E> CheckThenSet<C, E> {
//!     fn new(config: LockConfig, mut conns: Vec<C>, env: E) -> Self {
//!         CheckThenSet { conn: conns.remove(0), env, config }
//!     }
//! }
//!
//! impl<C: ConnectionLike + Send + Sync + 'static, E: Env> Lock for CheckThenSet<C, E> {
//!     async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
//!         let owner = self.env.uuid().to_string();
//!         let ttl = self.config.ttl.as_millis() as u64;
//!         let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
//!         while self.env.monotonic_ms() < deadline {
//!             let start = self.env.monotonic_ms();
//!             let key = &self.config.key;
//!             let holder: Option<String> =
//!                 redis::cmd("GET").arg(key).query_async(&mut self.conn).await?;
//!             if holder.is_none() {
//!                 // The race: another client may SET between our GET and this SET.
//!                 let _: () = redis::cmd("SET").arg(key).arg(&owner).arg("PX").arg(ttl)
//!                     .query_async(&mut self.conn).await?;
//!                 let (acquired_at_ms, valid_until_ms) = (start, start + ttl);
//!                 return Ok(Some(Guard { owner, fencing_token: None, acquired_at_ms, valid_until_ms }));
//!             }
//!             self.env.sleep(std::time::Duration::from_millis(2)).await;
//!         }
//!         Ok(None)
//!     }
//!
//!     async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
//!         let deleted: i64 = lockcheck::lock::lease::COMPARE_AND_DELETE
//!             .key(&self.config.key).arg(&guard.owner)
//!             .invoke_async(&mut self.conn).await?;
//!         Ok(deleted == 1)
//!     }
//! }
//!
//! // In a binary: `fn main() -> std::process::ExitCode { harness.main() }`.
//! let harness = Harness::new().lock("check-then-set", CheckThenSet::new);
//! let scenario = harness.registry().parse("inline.toml", r#"
//!     name = "check-then-set"
//!     expect = "violation"
//!     duration_ms = 20000
//!     [lock]
//!     kind = "check-then-set"
//!     ttl_ms = 5000
//!     [workload]
//!     clients = 3
//!     cycles = 20
//!     hold_ms = [5, 10]
//!     think_ms = [0, 5]
//! "#).unwrap();
//! let caught = (1..=5).filter(|&seed| {
//!     let run = harness.registry().run_sim(&scenario, seed);
//!     Outcome::judge(&scenario, Mode::Sim, seed, run.history).verdict() == Verdict::Violation
//! });
//! assert!(caught.count() >= 3);
//! ```
//!
//! Below the harness, [`backend::redis::sim::run_with`] and [`backend::redis::real::world::run_with`] run one scenario with
//! a constructor for that world's connection and environment types.

#![warn(missing_docs)]

// The modules by layer, lowest first: each imports only modules listed in an earlier group
// (ARCHITECTURE.md draws the layers; tests/architecture.rs holds the code to them).

// 1. Vocabulary every stage shares (the seams among it).
pub mod env;
pub mod etcd;
pub mod exec;
pub mod history;
pub mod junit;
pub mod progress;
pub mod resource;
pub mod sql;
pub mod stdout;
pub mod subscription;
pub mod zookeeper;
// 2. The checkers.
pub mod check;
// 3. The locks under test; the fault families.
pub mod fault;
pub mod lock;
// 4. The scenario format; the simulated Redis engine (it runs the locks' scripts natively, and
// holds the protected resource in every world).
pub mod scenario;
pub mod simredis;
// 5. When faults fire; what a client does.
pub mod schedule;
pub mod workload;
// 6. One run's assembly.
pub mod world;
// 7. What every simulated and every real world shares.
pub mod real;
pub mod sim;
// 8, 9. The services' engines and worlds, one folder each: each part sits at its role's layer (a
// simulated engine at 4, what a service's two worlds share at 6, its worlds at 8, its `mod.rs`
// at 9), so nothing below the worlds imports it.
pub mod backend;
// 10. Judging a run; the lock kinds a program runs.
pub mod judge;
pub mod registry;
// 11. Searching for violations.
pub mod explore;
// 12. The HTML report.
pub mod report_html;
// 13. A run's cases and artifacts.
pub mod suite;
// 14. The command line.
pub mod cli;
// 15. The harness: the command line (and a test's search) for locks of the user's own.
pub mod harness;

/// Declares a deprecated module at an old path whose items all moved to `$to`: a user's code
/// written against the old path keeps compiling, with a warning naming the new one.
macro_rules! moved_module {
    ($name:ident => $($to:ident)::+) => {
        #[deprecated(note = "moved into lockcheck::backend::<service>: CHANGELOG.md names the new path")]
        #[doc(hidden)]
        pub mod $name {
            pub use crate::$($to)::+::*;
        }
    };
}

moved_module!(simetcd => backend::etcd::engine);
moved_module!(simsql => backend::mysql::engine);
moved_module!(simzk => backend::zookeeper::engine);

/// The old paths, inside the layers' modules, of what moved into [`backend`]: each layer
/// re-exports its part (`pub use crate::__moved::sim::*;` in `sim/mod.rs`), so a user's code
/// written against them keeps compiling. New code uses the `backend::<service>` paths.
#[doc(hidden)]
pub mod __moved {
    /// What `lockcheck::sim` held.
    pub mod sim {
        moved_module!(etcd_world => backend::etcd::sim::world);
        moved_module!(mysql_world => backend::mysql::sim::world);
        moved_module!(zk_world => backend::zookeeper::sim::world);
        moved_module!(cluster => backend::redis::sim::cluster);
        moved_module!(connection => backend::redis::sim::connection);
        moved_module!(nemesis => backend::redis::sim::nemesis);
        moved_module!(sentinel => backend::redis::sim::sentinel);
        moved_module!(subscription => backend::redis::sim::subscription);
        pub use crate::backend::etcd::sim::NetEtcdConn;
        pub use crate::backend::mysql::sim::{NetSqlConn, SharedEngine, SimSqlConn};
        pub use crate::backend::redis::sim::{run_with, SimConnection};
        pub use crate::backend::zookeeper::sim::{SimZk, SimZkClient};
    }
    /// What `lockcheck::real` held.
    pub mod real {
        moved_module!(etcd_world => backend::etcd::real::world);
        moved_module!(mysql_world => backend::mysql::real::world);
        moved_module!(zk_conn => backend::zookeeper::real::conn);
        moved_module!(zk_world => backend::zookeeper::real::world);
        moved_module!(redis_world => backend::redis::real::world);
        moved_module!(external => backend::redis::real::external);
        moved_module!(subscription => backend::redis::real::subscription);
        pub use crate::backend::etcd::real::{etcd_path, EtcdCluster, EtcdTiming, RealEtcdConn};
        pub use crate::backend::mysql::real::{MariaDb, RealSqlConn};
        pub use crate::backend::redis::real::{
            client_kill_replicas, info_replication, promote, wait_role_master, BlackHole,
            FailoverRig, FailoverTimings,
        };
        pub use crate::backend::zookeeper::real::{RealZkClient, ZooKeeper, ZooKeeperOptions};
    }
    /// What `lockcheck::real::servers` held.
    pub mod servers {
        moved_module!(etcd => backend::etcd::real::server);
        moved_module!(mariadb => backend::mysql::real::server);
        moved_module!(zookeeper => backend::zookeeper::real::server);
    }
    /// What `lockcheck::lock` held.
    pub mod lock {
        moved_module!(etcd_mutex => backend::etcd::lock);
        moved_module!(zk_recipe => backend::zookeeper::lock);
        moved_module!(mysql => backend::mysql::lock::database_lock);
        moved_module!(mysql_for_update => backend::mysql::lock::for_update);
        moved_module!(mysql_insert_unique => backend::mysql::lock::insert_unique);
        moved_module!(fenced => backend::redis::lock::fenced);
        moved_module!(lettuce_reentrant => backend::redis::lock::lettuce_reentrant);
        moved_module!(naive_setnx_expire => backend::redis::lock::naive_setnx_expire);
        moved_module!(redisson => backend::redis::lock::redisson);
        moved_module!(redlock => backend::redis::lock::redlock);
        moved_module!(set_ex_nx_del => backend::redis::lock::set_ex_nx_del);
        moved_module!(set_nx_px => backend::redis::lock::set_nx_px);
        moved_module!(synced_slaves => backend::redis::lock::synced_slaves);
        pub use crate::backend::redis::lock::{
            Fenced, LettuceReentrant, NaiveSetnxExpire, Redisson, Redlock, SetExNxDel, SetNxPx,
        };
    }
    /// What `lockcheck::etcd` held besides its error: the etcd seam, now `backend::etcd::seam`.
    pub mod etcd {
        moved_module!(types => backend::etcd::seam::types);
        pub use crate::backend::etcd::seam::{
            EtcdClient, KeyValue, Lease, LeaseId, RangeRequest, RangeResponse, Revision, Txn,
            TxnOp, TxnOpResponse, TxnResponse,
        };
    }
    /// What `lockcheck::zookeeper` held besides its error: the ZooKeeper seam, now
    /// `backend::zookeeper::seam`.
    pub mod zookeeper {
        pub use crate::backend::zookeeper::seam::{
            ping_after_idle_ms, sequence_of, CreateMode, SessionState, Stat, ZkClient, ZkEvent,
        };
    }
    /// What `lockcheck::scenario`'s service tables held besides their types: what each backend
    /// reads off its table, now in its folder (`backend::<service>::table`).
    pub mod scenario {
        /// What `lockcheck::scenario::database` held.
        pub mod database {
            pub use crate::backend::mysql::table::{request_timeout, SERVER};
        }
        /// What `lockcheck::scenario::etcd` held.
        pub mod etcd {
            pub use crate::backend::etcd::table::member;
        }
        /// What `lockcheck::scenario::zookeeper` held.
        pub mod zookeeper {
            pub use crate::backend::zookeeper::table::server_name;
        }
    }
    /// What `lockcheck::world` held.
    pub mod world {
        moved_module!(mysql => backend::mysql::world);
    }
}

// What a user of the library needs, at the crate root: a scenario, a lock and its seams, the
// judged outcome.
pub use check::{CheckResult, Checker, Verdict};
pub use env::Env;
pub use harness::Harness;
pub use history::History;
pub use judge::{Mode, Outcome, SeedsOutcome};
pub use lock::{Guard, Lock, LockConfig, LockError, LockKind};
/// The redis-rs crate a lock is written against (`redis::cmd`, `redis::Script`,
/// `redis::aio::ConnectionLike`), so a user's crate uses the very version lockcheck's connections
/// implement.
pub use redis;
/// The connection and environment a lock registered with the harness gets.
pub use registry::{Conn, Db, NodeEnv, Registry};
pub use scenario::{Scenario, ScenarioError};

/// The Rust blocks of `docs/own-lock.md`, compiled as doc tests (`cargo test --doc`, part of the
/// README's test command): a public item a user's code copied from them uses that disappears or
/// changes fails the suite, whatever `CHANGELOG.md` says. Lines starting `# ` in those blocks are
/// the context each needs (hidden in the book, as mdBook hides them). The README's one Rust block
/// is the first of them (`tests/docs.rs` holds it to that); the examples they include are built
/// by `cargo test` too.
#[cfg(doctest)]
#[doc = include_str!("../docs/own-lock.md")]
pub struct OwnLockBlocks;
