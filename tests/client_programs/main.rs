//! Client-library scenarios, one binary: other people's lock libraries (redis-py, ioredis with
//! redlock, kazoo, npm etcd3, psycopg, npm advisory-lock) run as black-box client programs
//! against lockcheck's own servers of every backend, and reach their expected verdicts; faults
//! reach the programs and no program outlives a run.
//!
//! A binary of its own (it was part of `tests/redis`) so that it runs beside the backends'
//! binaries: its runs mostly wait on servers and programs, and each spawns its own servers on
//! free ports in directories of its own. Needs the pinned client libraries
//! (`scripts/install-clients.sh`; `.ci/run` runs it); a missing one fails with the install command.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod service_tables;
