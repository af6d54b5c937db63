//! lockcheck: a deterministic simulation and verification harness for distributed locks.
pub mod simredis;
