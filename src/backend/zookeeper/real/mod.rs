//! The real service: the servers lockcheck spawns, the client connection to them, its nemesis and
//! its world.

pub mod conn;
pub mod cuts;
pub mod lag_link;
pub mod nemesis;
pub mod server;
pub mod txn_log;
pub mod world;

pub use conn::RealZkClient;
pub use server::{ZooKeeper, ZooKeeperOptions};
