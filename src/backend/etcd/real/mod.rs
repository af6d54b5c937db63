//! The real service: the servers lockcheck spawns, the client connection to them, its nemesis and
//! its world.

pub mod conn;
pub mod gateway;
pub mod nemesis;
pub mod observer;
pub mod server;
pub mod world;

pub use conn::RealEtcdConn;
pub use server::{etcd_path, EtcdCluster, EtcdTiming};
