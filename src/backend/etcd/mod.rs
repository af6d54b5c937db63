//! etcd: a key space with revisions and leases, the etcd `concurrency` mutex, and a cluster whose leader can crash.

pub mod declaration;
pub mod engine;
pub mod real;
pub mod sim;

pub use declaration::Etcd;
