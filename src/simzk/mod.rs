//! The simulated ZooKeeper: a linearizable single-leader store with what the lock recipes use
//! and nothing more (sessions that expire on the server's clock, ephemeral and sequential
//! znodes, one-shot watches, zxids), as a pure state machine so the simulated world and the
//! differential test drive the same code.

pub mod engine;
pub mod tree;

pub use engine::{Request, Response, ZkConfig, ZkEngine};
