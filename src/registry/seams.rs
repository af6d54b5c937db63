//! The connection and environment a registered lock gets, whichever world runs it: [`Conn`] (a
//! Redis connection), [`Db`] (a database connection), [`EtcdConn`] (an etcd client), [`ZkConn`]
//! (a ZooKeeper session) and [`NodeEnv`]. Each is the world switch (`env::Switch`) of the
//! simulated side and the real one, so one constructor serves both worlds; each seam forwards
//! its trait through the switch once, in its backend's `switch.rs` (the environment in
//! `env/switch.rs`). `Conn::Sim(c)`, `NodeEnv::Real(e)` and the like still name the two sides.

use crate::env::Switch;
use crate::real::RealEnv;
use crate::sim::SimEnv;

pub use crate::backend::etcd::EtcdConn;
pub use crate::backend::mysql::Db;
pub use crate::backend::redis::{Conn, ConnSubscription};
pub use crate::backend::zookeeper::ZkConn;

/// The environment a registered lock gets: its simulated node's in simulation, the real one on
/// spawned servers. Every method is the world's own, so clock faults reach the lock as they
/// reach lockcheck's locks.
pub type NodeEnv = Switch<SimEnv, RealEnv>;
