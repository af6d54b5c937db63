//! The simulated ZooKeeper: a linearizable single-leader store with what the lock recipes use
//! and nothing more (sessions that expire on the server's clock, ephemeral and sequential
//! znodes, one-shot watches, zxids), as a pure state machine so the simulated world and the
//! differential test drive the same code. An ensemble's followers (`follower.rs`) replay the
//! leader's committed transactions (`txn.rs`) after a lag and answer their clients' reads from
//! what they have applied.

pub mod follower;
pub mod machine;
pub mod tree;
pub mod txn;

pub use follower::Follower;
pub use machine::{Request, Response, ZkConfig, ZkEngine};
pub use txn::{Committed, Txn};
