//! PostgreSQL: advisory locks on a simulated PostgreSQL or on a spawned `postgres` (issue #42).

pub mod real;
pub mod seam;
