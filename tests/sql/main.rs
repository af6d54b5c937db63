//! The SQL seam: the simulated InnoDB subset, the two locks of the MySQL locks article on it and on
//! a real MariaDB that lockcheck spawns, and a differential test of the two databases.

mod differential;
mod engine;
mod locks;
mod scenarios;
