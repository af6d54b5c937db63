//! MySQL/MariaDB: the two database locks of the MySQL article (`SELECT … FOR UPDATE` and a unique insert), on a simulated InnoDB subset or a spawned MariaDB.

pub mod declaration;
pub mod engine;
pub mod real;
pub mod sim;
pub mod world;

pub use declaration::Mysql;
