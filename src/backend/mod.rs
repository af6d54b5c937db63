//! The services lockcheck runs locks against, one folder each: its seam (what a lock is written
//! against), its simulated engine, its locks, its scenario table, and its two worlds (`sim/`, the
//! service simulated inside madsim; `real/`, the service's own servers that lockcheck spawns),
//! as madsim's `madsim-etcd-client` keeps a service's simulation beside its real client and
//! Jepsen keeps one suite per database. What every service shares stays world-first in
//! `src/sim/` and `src/real/`.

pub mod etcd;
pub mod mysql;
pub mod redis;
pub mod zookeeper;
