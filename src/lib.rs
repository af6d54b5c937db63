//! lockcheck: a deterministic simulation and verification harness for distributed locks.
//!
//! A lock implementation is ordinary async Rust written against two seams: a Redis connection
//! (anything implementing [`redis::aio::ConnectionLike`]) and an [`env::Env`] (its node's clock,
//! timers, tasks and randomness). lockcheck runs it
//! - in a **simulation** ([`sim`]): a madsim world with simulated Redis masters and replicas
//!   ([`simredis`]), asynchronous replication, failover, GC pauses, partitions and skewed node
//!   clocks, where the same scenario and seed always give the same history; and
//! - on **real processes** ([`real`]): `redis-server`s that lockcheck spawns, faults injected with
//!   signals and `REPLICAOF`, every process cleaned up on every exit path.
//!
//! Either way the run produces a [`history::History`] of events in true time, and the checkers
//! ([`check`]) judge it: two overlapping critical sections are a mutual-exclusion violation.
//!
//! # Example: a GC pause longer than the lease
//!
//! A holder stops for three seconds with a one-second lease. Redis expires its key, the other
//! client acquires, and the first wakes up still inside its critical section:
//!
//! ```
//! use lockcheck::scenario::{Scenario, Verdict};
//! use lockcheck::verdict::{Mode, Outcome};
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
//! let run = lockcheck::sim::run(&scenario, 7);
//! let outcome = Outcome::judge(&scenario, Mode::Sim, 7, run.history);
//! assert_eq!(outcome.verdict(), Verdict::Violation);
//!
//! // Deterministic: the same seed gives the same history, byte for byte.
//! let again = lockcheck::sim::run(&scenario, 7);
//! assert_eq!(again.history.trace_hash(), outcome.trace_hash);
//! ```
//!
//! To test your own lock, implement [`lock::Lock`] and pass a constructor to [`sim::run_with`].

pub mod catalog;
pub mod check;
pub mod env;
pub mod exec;
pub mod explore;
pub mod history;
pub mod junit;
pub mod lock;
pub mod model_cmd;
pub mod progress;
pub mod real;
pub mod report;
pub mod report_html;
pub mod resource;
pub mod runner;
pub mod scenario;
pub mod sim;
pub mod simredis;
pub mod sql;
pub mod subscription;
pub mod suite;
pub mod table;
pub mod verdict;
pub mod workload;
