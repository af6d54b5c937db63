//! etcd: a key space with revisions and leases, the etcd `concurrency` mutex, and a cluster whose leader can crash.

pub mod engine;
pub mod locks;
pub mod real;
pub mod scenario;
pub mod seam;
pub mod sim;
