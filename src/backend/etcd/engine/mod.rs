//! The simulated etcd engine: a linearizable key space with revisions and leases, what etcd's
//! locks use and nothing more (`engine.rs`). The simulated etcd server node (`sim/etcd_*.rs`)
//! runs it on the leader's clock; the differential test compares it with a real `etcd`.

pub mod machine;

pub use machine::{EtcdEngine, EXPIRY_LOOP_MS};
