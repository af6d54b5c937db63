//! The simulated service: its server nodes inside madsim, the client connection to them, its
//! nemesis and its world.

pub mod conn;
pub mod nemesis;
pub mod server;
pub mod world;

pub use conn::NetEtcdConn;
