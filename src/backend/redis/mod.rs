//! Redis: the lease locks of the articles (naive `SETNX`+`EXPIRE`, `SET NX PX` with a Lua
//! compare-and-delete, Lettuce's reentrant lock, Redisson's `RLock`, Redlock, fencing tokens) on
//! masters with asynchronous replicas, failed over by hand or by Sentinel, simulated or spawned
//! `redis-server` processes, or servers lockcheck did not start (`--redis`).
//!
//! The protected resource lives on a Redis server in every world, whatever the lock's service;
//! that server and the connection to it are world-generic (`src/real/servers/redis_server.rs`,
//! `src/real/connection.rs`, `src/sim/storage.rs`).

pub mod declaration;
pub mod real;
pub mod sim;

pub use declaration::Redis;
