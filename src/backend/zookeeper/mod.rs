//! ZooKeeper: sessions, ephemeral sequential znodes and watches, the lock recipes of Curator and the ZooKeeper documentation, and an ensemble with leader election and lagging followers.

pub mod declaration;
pub mod engine;
pub mod real;
pub mod sim;

pub use declaration::ZooKeeper;
